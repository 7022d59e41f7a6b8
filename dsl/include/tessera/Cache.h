// The persistent compile cache (docs/cache.md): compiled kernels kept on
// disk, so a new process loads a kernel compiled before instead of
// compiling it again.
//
//   auto k = tessera::compile(softmax(1024), dev);  // a hit: loaded, not compiled
//   if (!k.fromDiskCache())
//     std::cerr << tessera::explainCompile(softmax(1024), dev).str();  // why not
//
// On by default, in $XDG_CACHE_HOME/tessera (else ~/.cache/tessera);
// TESSERA_CACHE=0 turns it off, TESSERA_CACHE_DIR moves it,
// TESSERA_CACHE_MAX_SIZE bounds it (least recently used entries go first),
// CompileOptions::useDiskCache = false keeps one compile out of it, and
// setDiskCacheSettings replaces all three for the process. `tessera cache
// stats|explain|clear` is the command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/Compile.h"
#include "tessera/codegen/DiskCache.h"

namespace tessera {

using DiskCacheSettings = codegen::DiskCacheSettings;
using DiskCacheCounters = codegen::DiskCacheCounters;
using CacheExplanation = codegen::Explanation;
using CacheEntry = codegen::EntryInfo;

/// The settings in force: the environment's, or setDiskCacheSettings'.
DiskCacheSettings diskCacheSettings();
/// Replaces the environment's settings for this process (a folder of its
/// own, another limit, off); resetDiskCacheSettings goes back to them.
void setDiskCacheSettings(const DiskCacheSettings& s);
void resetDiskCacheSettings();

/// The folder and what it holds, with this process's counters.
struct DiskCacheStats {
  DiskCacheSettings settings;
  bool exists = false;              // the folder exists
  uint64_t entries = 0, bytes = 0;  // compiled kernels kept, and their size
  uint64_t tempFiles = 0;           // writes in flight, or left by a killed process
  DiskCacheCounters process;        // hits, misses, stores, ... of this process
  std::string str() const;          // as `tessera cache stats` prints it
};
DiskCacheStats diskCacheStats();
/// Every entry of the folder, most recently used first, with its key parts.
std::vector<CacheEntry> diskCacheEntries();
/// Removes every entry (and leftover temporary file); returns how many entries.
uint64_t clearDiskCache();

/// Whether compile(k, target, opts) would load `k` from the persistent
/// cache, and if not, which parts of its key differ from the nearest entry
/// (the same kernel name, fewest differing parts): the IR (the first line
/// that changed), the options (each field), the target and the host cpu
/// features, the Tessera build, the LLVM version.
CacheExplanation explainCompile(const Kernel& k, const Target& target, const CompileOptions& opts = {});
/// The same for compile(k, dev, opts).
CacheExplanation explainCompile(const Kernel& k, const Device& dev, const CompileOptions& opts = {});

}  // namespace tessera

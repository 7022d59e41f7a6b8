// The persistent compile cache (docs/cache.md): compiled kernels kept on
// disk between processes, keyed by a BLAKE3 hash of everything that decides
// the code (the tile IR text, the target as resolved on this host, the
// options, the Tessera and LLVM versions). No LLVM header appears here.
//
// Two layers:
//   - KeyedStore: a folder of self-checking entries, one file per key. An
//     entry holds its key's parts (so a miss can be explained against the
//     nearest entry) and a payload; it is written to a temporary file and
//     renamed into place (readers never see a torn entry), ends in a
//     checksum (a corrupt, truncated or foreign entry is reported once on
//     stderr, removed and treated as a miss), and the folder is kept under a
//     size limit by evicting the least recently used entries. Any failure
//     of the folder (missing and not creatable, read-only, full) is reported
//     once and never fails a compile. The compile cache is one user (kind
//     "kernels"); other tools can keep their own kinds beside it.
//   - the compile cache proper: the key of a compile and an Artifact written
//     as an entry and read back ready to launch (CPU code relinked into the
//     JIT, PTX and AMDGPU code objects as they are).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/codegen/Compiler.h"

namespace tessera::codegen {

// ---- settings ----------------------------------------------------------------

/// Where and whether entries are kept. From the environment unless
/// setDiskCacheSettings was called:
///   TESSERA_CACHE=0             turns the cache off (also off, false, no)
///   TESSERA_CACHE_DIR=DIR       the folder (default $XDG_CACHE_HOME/tessera,
///                               else $HOME/.cache/tessera)
///   TESSERA_CACHE_MAX_SIZE=N    the size limit in bytes; K, M, G suffixes
///                               (powers of 1024); default 1G. 0 turns the
///                               cache off (origin says so); a value that
///                               is no size warns once and the default applies
struct DiskCacheSettings {
  bool enabled = true;
  std::string dir;                        // "" when none can be determined (no HOME): nothing is cached
  uint64_t maxBytes = uint64_t{1} << 30;  // entries beyond it are evicted, least recently used first; 0: off
  std::string origin;                     // where `dir` / `enabled` came from, for messages
};
DiskCacheSettings diskCacheSettings();
/// Replaces the environment's settings for this process (tests, tools, a
/// program that keeps its own folder). maxBytes = 0 is stored as off, its
/// origin saying why. An empty dir with enabled = true is a UsageError.
void setDiskCacheSettings(const DiskCacheSettings& s);
/// Back to the environment's settings.
void resetDiskCacheSettings();
/// Parses a size: digits with an optional K, M, G or T suffix (powers of
/// 1024). A UsageError names what was expected otherwise (a negative
/// value, garbage, a size over 2^64 bytes).
uint64_t parseByteSize(const std::string& text, const std::string& what);

// ---- keys ------------------------------------------------------------------

/// One named part of a key ("ir", "target", "options", "tessera", ...).
struct KeyPart {
  std::string name, value;
  bool operator==(const KeyPart& o) const { return name == o.name && value == o.value; }
};

struct CacheKey {
  std::string kind;  // the store it belongs to ("kernels")
  std::vector<KeyPart> parts;
  std::string hash;  // 64 hex digits: BLAKE3 of the kind and every part
  /// The value of a part, or nullptr.
  const std::string* find(const std::string& name) const;
  /// Hashes `parts` (the order matters; names must be unique).
  static CacheKey make(std::string kind, std::vector<KeyPart> parts);
};

/// The toolchain every key carries: "tessera 0.4.0 (sources 0123abcd...)"
/// and "LLVM 22.1.x". The source hash changes with any change of the
/// compiler's sources, so a rebuilt Tessera never reuses an older build's code.
std::string tesseraBuildId();
std::string llvmVersion();

// ---- the store ---------------------------------------------------------------

/// One entry as found on disk.
struct EntryInfo {
  std::string path;
  std::string hash;  // from the file name
  uint64_t bytes = 0;
  int64_t mtimeNs = 0;         // last use (entries are touched on every hit)
  bool valid = false;          // header and checksum check out
  std::string problem;         // why not, when !valid
  std::vector<KeyPart> parts;  // when valid
};

/// What a folder holds.
struct StoreStats {
  std::string dir;
  bool exists = false;
  uint64_t entries = 0, bytes = 0;  // valid or not, every entry file
  uint64_t tempFiles = 0, tempBytes = 0;
};

/// This process's counters, all kinds together.
struct DiskCacheCounters {
  uint64_t hits = 0, misses = 0, stores = 0;
  uint64_t rejected = 0;       // corrupt, truncated or foreign entries found (and removed)
  uint64_t storeFailures = 0;  // entries that could not be written (folder missing, read-only, full)
  uint64_t evictions = 0;      // entries this process removed to keep under the limit
};
DiskCacheCounters diskCacheCounters();
void resetDiskCacheCounters();

/// Why a key missed, against the nearest entry of the store.
struct KeyDifference {
  std::string part;     // "ir", "options", "target", ...
  std::string summary;  // one line: "num-warps: 4 -> 8", "line 7: ... -> ...", "+avx512f"
};
struct Explanation {
  std::string dir;
  bool enabled = true;
  std::string hash;        // the key's hash
  bool cached = false;     // an entry with exactly this key exists: the next compile is a hit
  std::string entryPath;   // that entry, or the nearest one
  bool nearest = false;    // !cached and some entry was compared
  std::string nearestWhy;  // "same kernel name, 1 part differs"
  std::vector<KeyDifference> differences;
  std::string note;  // when nothing could be compared: why
  /// The explanation as the CLI prints it.
  std::string str() const;
};

class KeyedStore {
 public:
  /// The store of `kind` under the current settings' folder.
  explicit KeyedStore(std::string kind);
  const std::string& dir() const { return dir_; }
  bool usable() const { return enabled_ && !dir_.empty(); }

  /// The payload stored under `key`, or nullopt (a miss). A bad entry is
  /// reported once on stderr, removed, and is a miss. A hit marks the entry
  /// as recently used.
  std::optional<std::string> load(const CacheKey& key);
  /// Writes the entry atomically (temporary file, then rename) and evicts
  /// least recently used entries past the limit. False (reported once on
  /// stderr) when it could not be written; never throws.
  bool save(const CacheKey& key, const std::string& payload);
  /// Every entry of the folder, parsed (key parts of valid ones).
  std::vector<EntryInfo> list() const;
  StoreStats stats() const;
  /// The difference of `key` from the nearest entry: the entry of the same
  /// "kernel" part (if the key has one) with the fewest differing parts,
  /// the most recently used on a tie.
  Explanation explain(const CacheKey& key) const;
  /// Removes every entry and temporary file; returns how many entries.
  uint64_t clear();

 private:
  std::string kind_, dir_;
  bool enabled_ = true;
  uint64_t maxBytes_ = 0;
  void evict();
};

// ---- the compile cache -------------------------------------------------------

/// The option fields that decide the code, "name=value;..." (every field
/// but dumpAssembly, emuHooks and useDiskCache).
std::string optionsKey(const CompileOptions& o);

/// Whether compiles for `target` are kept on disk: cpu, nvptx and amdgpu
/// targets are; emu: targets are not (their code is linked against this
/// process's SIMT machine and carries host-side state that is not
/// serialised; they compile in the emulator's own time).
bool diskCacheable(const Target& target);

/// The key of compiling `irText` (the kernel as ir::print gives it) for
/// `target` with `opts`: parts kernel, ir, target (for cpu targets the
/// triple, LLVM cpu and feature string as resolved on this host, so a
/// folder shared between machines never hands one host's code to
/// another), options, tessera, llvm.
CacheKey compileKey(const std::string& kernelName, const std::string& irText, const Target& target,
                    const CompileOptions& opts);

/// The artifact stored under `key`, ready for Device::load: CPU code is
/// linked into this process's JIT. Null on a miss (a bad entry is reported
/// once, removed, and is a miss). The artifact has no stage dumps and no
/// kept module (fromDiskCache is set): whoever needs them recompiles.
std::shared_ptr<Artifact> loadCachedArtifact(const CacheKey& key);
/// Stores `a` under `key`: what the runtime loads (the KernelBinary without
/// its JIT state), the object code for CPU targets, the warnings. A no-op
/// for what cannot be kept (emu: targets, CPU code this host cannot run).
/// Returns whether an entry was written; never throws.
bool storeCachedArtifact(const CacheKey& key, const Artifact& a);

}  // namespace tessera::codegen

// Where tuning results live (docs/tune.md):
//
//   - the store: the persistent cache folder of tessera/codegen/DiskCache.h
//     (TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else
//     ~/.cache/tessera; TESSERA_CACHE=0 turns it off), kind "tune", one
//     entry per measured config. An entry's key is the kernel, the shape
//     bucket, the dtype, the device, the toolchain and the config; its
//     payload is the outcome (TuneCandidateResult). Entries are written
//     atomically, so two processes tuning at once each add whole entries
//     and the later of two measurements of one config wins.
//   - the table: the best config per (kernel, bucket, dtype, device),
//     exported as JSON and loaded where a kernel is deployed, so it picks
//     its config per shape at launch without tuning.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/perf/Tune.h"

namespace tessera::perf {

/// The store's kind: entries live in <cache folder>/tune/.
inline constexpr const char* kTuneStoreKind = "tune";

/// The stored outcome of one config under the key of `r` (kernel, bucket,
/// dtype, device, toolchain of `r`), or nullopt.
std::optional<TuneCandidateResult> loadTuneEntry(const TuneResult& key, const TuneConfig& config);
/// Stores one outcome; false when the store is off or cannot be written
/// (reported once on stderr by the store). Never throws.
bool saveTuneEntry(const TuneResult& key, const TuneCandidateResult& c);
/// The config a deterministic run pinned for the key of `r` (kernel,
/// bucket, dtype, device, toolchain, code), or nullopt.
std::optional<TuneConfig> loadTunePin(const TuneResult& key);
/// Records `c` as the key's pin, replacing any; false when the store is
/// off or cannot be written. Never throws.
bool saveTunePin(const TuneResult& key, const TuneConfig& c);

/// One row of a deployable table.
struct TuneTableEntry {
  std::string kernel, bucket, dtype, device;
  std::string toolchain;  // where it was measured (informational: lookups ignore it)
  TuneConfig config;
  double seconds = 0;  // its median time
  std::string shape;   // the shape it was measured at
};

class TuneTable {
 public:
  std::vector<TuneTableEntry> entries;

  /// The best valid config of every key in the store, for this toolchain;
  /// only kernel `kernel` when not empty, and only results measured for
  /// code `code` (TuneProblem::code) when not empty. Under
  /// TESSERA_DETERMINISTIC=1 a key with a pin (saveTunePin) gives its
  /// pinned config instead of the fastest, so a deployed choice is the one
  /// deterministic tuning made.
  static TuneTable fromStore(const std::string& kernel = "", const std::string& code = "");
  /// Reads a table written by toJson; a UsageError naming `source` and the
  /// place for anything malformed.
  static TuneTable fromJson(const std::string& text, const std::string& source = "<json>");
  /// Reads a file (UsageError when it cannot be read or is malformed).
  static TuneTable load(const std::string& path);
  std::string toJson() const;
  /// Writes toJson() to `path` (UsageError when it cannot).
  void save(const std::string& path) const;

  /// Adds `e`, replacing an entry of the same kernel, bucket, dtype and
  /// device when `e` is faster (or the old one is not).
  void add(const TuneTableEntry& e);
  /// The entry for a launch of `kernel` at `shape` in `dtype` on `device`
  /// (tuneDeviceKey): the one of shapeBucket(shape), or nullptr.
  const TuneTableEntry* find(const std::string& kernel, const std::vector<int64_t>& shape, const std::string& dtype,
                             const std::string& device) const;
  /// find's config; a UsageError when there is none, naming the key and
  /// the buckets the table has for that kernel (tune that shape, or use
  /// the overload with a fallback).
  TuneConfig pick(const std::string& kernel, const std::vector<int64_t>& shape, const std::string& dtype,
                  const std::string& device) const;
  /// find's config, or `fallback` when the table has no entry for it.
  TuneConfig pick(const std::string& kernel, const std::vector<int64_t>& shape, const std::string& dtype,
                  const std::string& device, const TuneConfig& fallback) const;
  /// The entry for a launch on `device`: one measured on it
  /// (tuneDeviceKey(device)), else one the GPU performance model ranked for
  /// the machine the device is (machineForDevice; modelDeviceKey), so a
  /// table tuned without the GPU serves it. nullptr when neither is there.
  const TuneTableEntry* findFor(const std::string& kernel, const std::vector<int64_t>& shape, const std::string& dtype,
                                const Device& device) const;
  /// findFor's config, or `fallback` when there is none.
  TuneConfig pickFor(const std::string& kernel, const std::vector<int64_t>& shape, const std::string& dtype,
                     const Device& device, const TuneConfig& fallback) const;
};

}  // namespace tessera::perf

// The autotuner (docs/tune.md): a kernel declares its config space -- meta-
// parameters with their candidate values, and named constraints between
// them -- and `tune` finds the fastest config that gives the right answer
// on a device, remembering every measurement on disk so that no config is
// measured twice for the same key.
//
//   perf::TuneSpace space;
//   space.param("BLOCK_M", {32, 64, 128}).param("BLOCK_N", {32, 64, 128})
//        .constrain("tile at most 64 Ki elements", [](const perf::TuneConfig& c) {
//          return c.get("BLOCK_M") * c.get("BLOCK_N") <= 65536; });
//   perf::TuneProblem p{"my_gemm", {M, N, K}, "f32", dev, space, prepareFn};
//   perf::TuneResult r = perf::tune(p);          // r.best: the config to use
//
// The steps, for each candidate of the space in order:
//   1. constraints: a config that violates one is pruned, naming it;
//   2. the store: a config already measured under the same key (kernel,
//      shape bucket, dtype, device, toolchain) is not run again;
//   3. compile, in parallel: whatever the compiler rejects with a
//      ResourceError (shared memory, registers, threads per block) or
//      another tessera::Error is pruned with the compiler's message; nothing
//      has run yet;
//   4. measure, one at a time: the benchmark harness (Bench.h) times the
//      launch, then the result is checked against the kernel's reference --
//      a config with a wrong answer is recorded as such and never chosen.
// Every outcome of steps 3 and 4 is stored at once (TuneTable.h), one entry
// per config, so an interrupted run keeps what it finished and two
// processes tuning the same kernel only ever add whole entries.
//
// Deterministic mode (TuneOptions::deterministic, TESSERA_DETERMINISTIC=1)
// pins the choice per key: timing noise must not change which config runs,
// since another config adds its partial sums in another order. The first
// deterministic run records its choice in the store (a pin per key); later
// ones return the pinned config without timing anything. Where the store
// is off, nothing can be recorded: the choice is then the first valid
// config in the space's order, whatever the times (TuneChoice).
//
// No LLVM here: the tuner needs only the compile/launch API.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/Compile.h"
#include "tessera/perf/Bench.h"

namespace tessera::perf {

/// One point of a config space: a value per meta-parameter, in the order
/// the space declares them.
struct TuneConfig {
  std::vector<std::pair<std::string, int64_t>> values;
  /// The value of `name`; a UsageError naming the parameters there are.
  int64_t get(const std::string& name) const;
  /// The value of `name`, or `fallback` when the config has none.
  int64_t getOr(const std::string& name, int64_t fallback) const;
  bool has(const std::string& name) const;
  /// "BLOCK_M=64,BLOCK_N=32": the config's spelling in keys, tables and
  /// messages (the space's order, so one config has one spelling).
  std::string str() const;
  /// Reads str()'s spelling; a UsageError saying what was expected.
  static TuneConfig parse(const std::string& text);
  bool operator==(const TuneConfig& o) const { return values == o.values; }
};

/// A rule between parameters. `name` says why a config is pruned by it
/// ("BLOCK_K divides BLOCK_M"), so the pruning report reads as a reason.
struct TuneConstraint {
  std::string name;
  std::function<bool(const TuneConfig&)> holds;
};

/// The config space: the cartesian product of the parameters' values, in
/// declaration order (the first parameter varies slowest), minus nothing --
/// constraints prune at tuning time so that the report can say why.
struct TuneSpace {
  struct Param {
    std::string name;
    std::vector<int64_t> values;
  };
  std::vector<Param> params;
  std::vector<TuneConstraint> constraints;

  /// Adds a parameter (names unique, at least one value): a UsageError otherwise.
  TuneSpace& param(const std::string& name, std::vector<int64_t> values);
  TuneSpace& constrain(const std::string& name, std::function<bool(const TuneConfig&)> holds);
  bool empty() const { return params.empty(); }
  /// Every config of the product, in order.
  std::vector<TuneConfig> candidates() const;
  /// The constraints `c` violates, by name (empty: none).
  std::vector<std::string> violated(const TuneConfig& c) const;
};

/// A config made ready to compile and run: the kernel traced with the
/// config's meta-parameters, its compile options, and one launch on the
/// device with generated inputs and a check against the reference.
struct TuneCandidate {
  Kernel kernel;
  CompileOptions options;
  Dim3 grid;
  std::vector<rt::Arg> args;
  /// Grid axis 0 counts the tiles of a persistent schedule: the launches
  /// timed run at most CompiledKernel::residentPrograms of them.
  bool persistent = false;
  /// Run after the timed launches: true when the output matches the
  /// reference; otherwise false with `why` set.
  std::function<bool(std::string& why)> check;
};
using TunePrepareFn = std::function<TuneCandidate(const TuneConfig&)>;

/// What to tune: the key's parts and the way to build a candidate.
struct TuneProblem {
  std::string kernel;          // a stable name ("gemm_f32"), part of the key
  std::vector<int64_t> shape;  // the problem; its bucket is part of the key
  std::string dtype;           // "f32", "f16", ...: part of the key
  Device device = Device::cpu();
  TuneSpace space;
  TunePrepareFn prepare;
  /// What the kernel's code is, part of the key (codeFingerprint): results
  /// measured for other code are not reused, so editing a kernel retunes
  /// it. Empty: the name alone stands for the code (then `retune` after an
  /// edit).
  std::string code;
};

/// A fingerprint of a kernel's code: the hash of its tile IR text (16 hex
/// digits). Tracing a kernel costs microseconds to milliseconds, so a tuner
/// can fingerprint the default config's kernel on every run.
std::string codeFingerprint(const Kernel& k);

/// The shape bucket a problem belongs to: every dimension rounded up to a
/// power of two (0 and 1 stay as they are), "512x256x256". The best config
/// measured at one shape is reused for every shape of its bucket.
std::string shapeBucket(const std::vector<int64_t>& shape);
/// The device as keys name it: Device::name() ("cpu (avx2, 8 threads)",
/// "emu:nvptx:sm_80 ...", "cuda:0 NVIDIA H100 ..."): the thread count and
/// ISA are part of it because the best config depends on them.
std::string tuneDeviceKey(const Device& d);
/// The toolchain as keys name it: Tessera's build id and LLVM's version.
std::string tuneToolchainKey();

/// How a candidate ended.
enum class TuneStatus {
  Measured,     // timed and its answer checked: a valid choice
  Constraint,   // pruned: violates a declared constraint
  Resources,    // pruned: the compiler refused it (ResourceError)
  CompileFail,  // pruned: the compiler refused it (another error)
  Wrong,        // ran, but the answer did not match the reference
  LaunchFail,   // the launch failed (a tessera::Error while running)
  Skipped,      // not run: a deterministic run's choice was pinned (never stored)
};
const char* name(TuneStatus s);  // "measured", "constraint", "resources", ...

/// How TuneResult::best was chosen.
enum class TuneChoice {
  Fastest,     // the fastest valid config (not deterministic)
  Recorded,    // deterministic: the fastest valid config, now the key's pin
  Pinned,      // deterministic: the key's pin, taken from the store, nothing timed
  FirstValid,  // deterministic, no pin can be recorded (store off): the first
               // valid config in the space's order, whatever the times
};
const char* name(TuneChoice c);  // "fastest", "recorded", "pinned", "first-valid"

struct TuneCandidateResult {
  TuneConfig config;
  TuneStatus status = TuneStatus::Measured;
  std::string reason;     // why pruned or rejected (first line of the message)
  double seconds = 0;     // median time per launch (Measured)
  double minSeconds = 0;  // fastest repetition
  int reps = 0;
  std::string shape;       // the shape it was measured at ("300x200x150")
  bool fromStore = false;  // found in the store: not run by this call
  bool valid() const { return status == TuneStatus::Measured; }
};

struct TuneResult {
  std::string kernel, bucket, dtype, device, toolchain;
  std::string code;                             // TuneProblem::code
  std::vector<TuneCandidateResult> candidates;  // the space's order
  std::optional<size_t> best;                   // index of the chosen candidate (see choice)
  TuneChoice choice = TuneChoice::Fastest;      // how it was chosen
  size_t measured = 0;                          // run (or ranked) by this call: compiled, then timed or rejected
  size_t reused = 0;                            // taken from the store
  size_t pruned = 0;                            // by constraints or the compiler (this call or stored)
  double seconds = 0;                           // wall time of the call
  const TuneConfig* bestConfig() const { return best ? &candidates[*best].config : nullptr; }
};

/// Hook for ranking GPU configs without a GPU (a performance model from the
/// compiled artifact): seconds predicted for one launch of `cand`. The GPU
/// performance model provides one (GpuModel.h: gpuModelTuneOptions); when
/// set in TuneOptions, survivors are compiled for `predictTarget` and
/// ranked by it instead of being run, and their results are stored under
/// the device key "model: " + predictKey, apart from measurements.
using TunePredictFn = std::function<double(const codegen::Artifact& artifact, const TuneCandidate& cand)>;

struct TuneOptions {
  /// Timing of each candidate. The default is shorter than `tessera
  /// bench`'s: tuning compares configs against each other, not to a baseline.
  /// A thread count in bench.launch (CPU, emulator) joins the device key:
  /// ", launched with N threads" after tuneDeviceKey(device).
  BenchOptions bench = defaultBench();
  /// Measure every candidate again, replacing what the store holds.
  bool retune = false;
  /// The progress bar on standard error: on when it is a terminal, unless quiet.
  bool quiet = false;
  /// Parallel compiles; 0 = the hardware's threads.
  unsigned compileThreads = 0;
  /// Pin the choice per key (TuneChoice): repeated runs choose the same
  /// config whatever the timing noise. TESSERA_DETERMINISTIC overrides it
  /// when set (1 on, 0 off), as it does CompileOptions::deterministic.
  /// With `retune` a deterministic run measures again and records the new
  /// fastest as the pin: the one way a pinned choice changes.
  bool deterministic = false;
  /// The GPU performance model hook (TunePredictFn); empty: measure.
  TunePredictFn predict;
  Target predictTarget;  // the target predicted for, when predict is set
  /// What the predictions are stored under: device key "model: " + this
  /// (e.g. "h100_sxm (nvptx:sm_90a)"); empty: predictTarget's spelling.
  std::string predictKey;

  static BenchOptions defaultBench();
};

/// No candidate can be chosen: every one was pruned or rejected. what()
/// lists each candidate with its status and reason; `result` holds them.
class TuneError : public Error {
 public:
  TuneError(const std::string& msg, TuneResult r) : Error(msg), result(std::move(r)) {}
  TuneResult result;
};

/// Whether a tuning with `o` is deterministic: o.deterministic, overridden
/// by TESSERA_DETERMINISTIC when it is set (1 on, 0 off; another value is
/// a UsageError).
bool tuneDeterministic(const TuneOptions& o);

/// Tunes `p`: see the steps above. Throws TuneError when no candidate is
/// valid, UsageError for an empty space or problem, and lets a
/// DeviceError of the device through.
TuneResult tune(const TuneProblem& p, const TuneOptions& opts = {});

/// The result as the CLI prints it: one row per candidate (config, status,
/// median, where it came from, reason) and the best.
std::string formatTuneTable(const TuneResult& r);

}  // namespace tessera::perf

// The benchmark harness: times a launch on its device -- warm-up, then
// repetitions until a time budget (within minimum and maximum counts),
// optionally flushing the caches between repetitions -- and summarises the
// samples (median, minimum, maximum, quartiles). Throughput comes from the
// work the IR implies (tessera/ir/analysis/Work.h) or the caller declares.
// Results print as a table, write and read back as JSON, and compare with a
// baseline run, flagging changes beyond a noise threshold taken from the
// two runs' own spread. `tessera bench` is this API on the bundled
// examples; docs/bench.md is the guide.
//
//   auto k = tessera::compile(softmax(1024), dev);
//   tessera::perf::BenchResult r = tessera::perf::benchmark(k, {rows}, {out, in, cols});
//   std::cout << tessera::perf::formatTable({r});
//
// Timing: host devices (the CPU, the emulator) time each synchronous launch
// with the steady clock; CUDA and HIP devices record an rt::Event pair
// around each launch on a stream and read the device's elapsed time. No
// LLVM here: the harness needs only the compile/launch API.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/Compile.h"
#include "tessera/ir/analysis/Work.h"

namespace tessera::perf {

/// How long and how often to repeat.
struct BenchOptions {
  /// Warm-up: untimed launches until this much time has passed and at
  /// least `minWarmup` have run (compiles, page faults, clocks settle).
  double warmupSeconds = 0.05;
  int minWarmup = 2;
  /// Timed repetitions until this much wall time is spent, but at least
  /// `minReps` and at most `maxReps` of them.
  double budgetSeconds = 0.5;
  int minReps = 5;
  int maxReps = 100000;
  /// Before each timed repetition, write a buffer as large as the last-level
  /// cache (the CPU's LLC, from sysfs; a GPU's L2 or, on AMD, Infinity
  /// Cache: the architecture table), so every repetition starts cold. The
  /// write is not timed. `flushBytes` overrides the size.
  bool flushCache = false;
  size_t flushBytes = 0;
  /// Threads and checked launches as for any launch; `stream` is ignored
  /// (GPU repetitions go to the device's default stream, timed by events).
  LaunchOptions launch;
  /// Checks the options: a UsageError naming the option and what it expects.
  void validate() const;
};

/// Order statistics of a sample (seconds). Quartiles interpolate linearly
/// between order statistics (the "type 7" definition of R and NumPy).
struct Stats {
  size_t count = 0;
  double min = 0, q1 = 0, median = 0, q3 = 0, max = 0, mean = 0;
  double iqr() const { return q3 - q1; }
  /// iqr / median (0 for an empty or zero sample): the run's relative spread.
  double relativeIqr() const { return median > 0 ? iqr() / median : 0; }
};
/// Summarises `samples` (any order; empty gives all zeros).
Stats summarize(std::vector<double> samples);
/// The p-quantile (0 <= p <= 1) of sorted samples, type 7.
double quantile(const std::vector<double>& sorted, double p);

/// The work one launch does, as throughput is computed from it.
struct Work {
  double flops = 0;
  double bytes = 0;     // compulsory global-memory bytes, read + written
  std::string source;   // "ir" (the Work analysis) or "declared" (the caller)
  ir::WorkEstimate ir;  // the full estimate when source == "ir"
};

/// One benchmarked launch.
struct BenchResult {
  std::string name;    // what was benchmarked ("softmax")
  std::string shape;   // the problem ("4096x4096"), free text
  std::string kernel;  // the kernel's IR name
  std::string device;  // Device::name()
  std::string timing;  // "steady clock" or "device events"
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::vector<double> samples;  // seconds per repetition, in run order
  Stats stats;
  int warmupReps = 0;
  bool flushed = false;
  size_t flushBytes = 0;
  /// Wall time of the timed phase, and the harness's own time per
  /// repetition inside it: (wall - sum of samples - cache flushes) / reps.
  double wallSeconds = 0;
  double overheadPerRep = 0;
  Work work;
  /// Throughput at the median time (0 without work).
  double bytesPerSecond() const { return stats.median > 0 ? work.bytes / stats.median : 0; }
  double flopsPerSecond() const { return stats.median > 0 ? work.flops / stats.median : 0; }
  /// "name[shape]": how results are matched against a baseline.
  std::string id() const { return shape.empty() ? name : name + "[" + shape + "]"; }

  /// Filled by the caller that relates the run to a machine's roofline
  /// (tessera/perf/SpeedOfLight.h): that machine, its roofline time for this
  /// work and the fraction of it achieved (roofline time / median).
  std::string rooflineMachine;
  double rooflineSeconds = 0;
  double rooflineFraction = 0;
  std::string rooflineBound;  // "memory" or "compute (f32)", ...
};

/// A launch as the harness repeats it: launch once with these options
/// (synchronous when opts.stream is null, else queued on it).
using LaunchFn = std::function<void(const LaunchOptions& opts)>;

/// Times `launch` on `device`. The result's work is empty: set it (or use
/// the overload below, which counts it from the IR).
BenchResult benchmark(const Device& device, const LaunchFn& launch, const BenchOptions& opts = {});

/// Times k.launchWith(grid, args) on the kernel's device, with the work
/// counted from its IR and this launch (or `declared` when given).
BenchResult benchmark(const CompiledKernel& k, Dim3 grid, const std::vector<rt::Arg>& args,
                      const BenchOptions& opts = {}, std::optional<Work> declared = std::nullopt);

/// The work of k's IR launched on `grid` with `args`: integer scalars and
/// buffer sizes come from the arguments (ir::estimateWork after the
/// canonicalize, cse and dce passes).
Work launchWork(const Kernel& k, Dim3 grid, const std::vector<rt::Arg>& args);
/// The same from launch facts given directly (`tessera sol FILE.tir --arg`).
Work launchWork(const Kernel& k, const ir::LaunchFacts& facts);

/// The table `tessera bench` prints: one row per result (median, min, max,
/// IQR, repetitions, GB/s, GFLOP/s, and the roofline fraction when set).
std::string formatTable(const std::vector<BenchResult>& results);
/// "12.3 us", "4.56 ms": a duration with three significant digits.
std::string formatSeconds(double s);

/// What a JSON report records besides the results.
struct RunInfo {
  std::string tesseraVersion;
  std::string options;  // the options as given, for the reader
};
/// The JSON report (docs/bench.md gives its fields).
std::string toJson(const std::vector<BenchResult>& results, const RunInfo& info = {});
/// Reads a report written by toJson; a UsageError naming `source` and the
/// place for anything malformed. Samples are optional in the input.
std::vector<BenchResult> fromJson(const std::string& text, const std::string& source = "<json>");

/// One row of a comparison with a baseline.
struct Comparison {
  enum class Verdict { Same, Faster, Slower, New, Missing };
  std::string id;
  Verdict verdict = Verdict::Same;
  double baselineMedian = 0, currentMedian = 0;
  double change = 0;     // current / baseline - 1
  double threshold = 0;  // the noise threshold applied (relative)
};
/// The noise threshold two runs are compared with: half the sum of their
/// interquartile ranges, relative to the baseline median -- beyond it the
/// two runs' middle halves no longer overlap -- and never below `floor`.
double noiseThreshold(const Stats& current, const Stats& baseline, double floor);
/// Compares each current result with the baseline result of the same id.
std::vector<Comparison> compare(const std::vector<BenchResult>& current, const std::vector<BenchResult>& baseline,
                                double floor = 0.02);
/// The comparison as a table, with the rule stated; `regressed` is set when
/// any row is Slower.
std::string formatComparison(const std::vector<Comparison>& rows, double floor, bool* regressed = nullptr);
const char* name(Comparison::Verdict v);

/// The size of the host's last-level cache in bytes (sysfs, else sysconf,
/// else 32 MiB), and its L2 per core.
size_t hostLastLevelCacheBytes();
size_t hostL2Bytes();

}  // namespace tessera::perf

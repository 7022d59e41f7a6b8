// `tessera bench`: the benchmark harness (tessera/perf/Bench.h) on the
// bundled examples and on textual IR (docs/bench.md). Argument handling and
// printing only; what is launched and where is perf/ (Launches.h, Peers.h).
#include <unistd.h>

#include <climits>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "Subjects.h"
#include "tessera/perf/Bench.h"
#include "tessera/perf/Peers.h"
#include "tessera/perf/Roofline.h"
#include "tessera/perf/SpeedOfLight.h"

namespace tessera::tools {

namespace {

const char* const kSynopsis =
    "  tessera bench KERNEL[:SHAPE]...|FILE.tir [--target T] [--shape A,B,...] [--threads N]\n"
    "                  [--budget-ms MS] [--warmup-ms MS] [--min-reps N] [--max-reps N] [--flush]\n"
    "                  [--flush-bytes N] [--no-check] [--json FILE] [--baseline FILE] [--threshold PCT]\n"
    "                  [--roofline FILE.svg] [--machines ID,...] [--flops N] [--bytes N] [--seed S]\n"
    "                  [--precision accurate|approx] [--config K=V,...] [--peers] [--check-bounds]\n"
    "                  [--profile] [--grid X,Y,Z --arg NAME=VALUE... --kernel NAME]\n";
const char* const kSolSynopsis =
    "  tessera sol [KERNEL[:SHAPE]...|FILE.tir] [--target T] [--shape A,B,...] [--machines ID,...]\n"
    "                  [--grid X,Y,Z] [--arg NAME=VALUE]... [--kernel NAME] [--remeasure-host] [--model]\n";

std::string benchOptionsHelp() {
  return "bench:   times each KERNEL (a bundled example, `tessera list`; NAME:A,B,... gives its shape) on the\n"
         "         target's device: warm-up, then repetitions until the time budget, and prints median,\n"
         "         min, max, IQR, GB/s and GFLOP/s (work counted from the IR) and the fraction of the\n"
         "         device's roofline; then checks the result against the example's C++ reference\n"
         "  --budget-ms MS      time for the timed repetitions of each kernel (default 500)\n"
         "  --warmup-ms MS      untimed warm-up before them (default 50)\n"
         "  --min-reps N, --max-reps N   bounds on the repetitions (default 5 and 100000)\n"
         "  --flush             write a buffer the size of the last-level cache before each repetition\n"
         "                      (CPU: its LLC; GPUs: L2 / Infinity Cache); --flush-bytes N sets the size\n"
         "                      (N may end in K, M or G)\n"
         "  --no-check          skip the check against the reference (large GEMMs: it runs in double)\n"
         "  --json FILE         write the results as JSON (- for standard output; docs/bench.md)\n"
         "  --baseline FILE     compare with an earlier --json report; a median slower than the noise\n"
         "                      threshold (from both runs' IQRs, at least --threshold PCT, default 2)\n"
         "                      is a regression: exit status 1\n"
         "  --roofline FILE.svg the roofline chart of the results (and FILE.png where rsvg-convert or\n"
         "                      inkscape is installed); --machines ID,... picks its roofs (default all)\n"
         "  --flops N, --bytes N  declare the work of one launch instead of counting it from the IR\n"
         "  --config K=V,...    trace each example with this point of its tune space (`tessera tune`\n"
         "                      prints them; num_warps is the compile option) instead of its defaults;\n"
         "                      --config tuned takes the best one `tessera tune` stored for the device\n"
         "  --peers             also time each kernel's peer on the same device with the same harness:\n"
         "                      a GEMM example's product on the vendor BLAS (cuBLAS on CUDA, rocBLAS\n"
         "                      on HIP, loaded at run time; TESSERA_CUBLAS_LIBRARY /\n"
         "                      TESSERA_ROCBLAS_LIBRARY), any other kernel against a device-to-device\n"
         "                      copy of the bytes it moves; then prints each kernel against its peer\n"
         "  --check-bounds      time checked launches (every global access tested against its buffer;\n"
         "                      CPU: the bounds-checked compile; the emulator always checks)\n"
         "  --profile           time profiled launches (the profiled compile, its buffer written and\n"
         "                      decoded each time: what a profiled launch costs; docs/profiling.md)\n"
         "  FILE.tir            a kernel from textual IR: --grid X[,Y[,Z]] and --arg NAME=VALUE for\n"
         "                      every argument (a scalar's value, a buffer's element count; buffers\n"
         "                      are zero-filled); --kernel NAME picks one of several kernels. On the\n"
         "                      CPU and the emulator its first launch is a checked one, so buffers\n"
         "                      smaller than the kernel reads are an error naming the access\n"
         "exit codes: 0 success; 1 a result check failed or a regression against --baseline;\n"
         "            2 a usage, compile or device error\n";
}

/// bench's options, typed and checked.
struct BenchArgs {
  perf::BenchOptions bench;
  bool check = true;
  std::string json, baseline, roofline;
  double thresholdFloor = 0.02;
  std::vector<std::string> machines;  // empty: all
  std::optional<double> flops, bytes;
  std::optional<perf::TuneConfig> config;  // values empty: tuned
};

size_t byteCount(const cli::Args& args, const std::string& s) {
  std::string digits = s;
  uint64_t mul = 1;
  if (!digits.empty() && std::string("KMG").find(digits.back()) != std::string::npos) {
    mul = digits.back() == 'K' ? 1ull << 10 : digits.back() == 'M' ? 1ull << 20 : 1ull << 30;
    digits.pop_back();
  }
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(digits.c_str(), &end, 10);
  if (digits.empty() || *end || errno || v < 1 || v > (int64_t{1} << 40))
    args.fail("--flush-bytes expects a size in bytes >= 1 (optionally ending in K, M or G), got '" + s + "'");
  if (static_cast<uint64_t>(v) * mul > (uint64_t{1} << 40))
    args.fail("--flush-bytes expects a size of at most 1T bytes, got '" + s + "'");
  return static_cast<size_t>(static_cast<uint64_t>(v) * mul);
}

BenchArgs benchArgs(const cli::Args& args) {
  BenchArgs a;
  const std::string ms = "a time in milliseconds (>= 0)";
  if (auto v = args.number("--budget-ms", ms, 0, HUGE_VAL)) a.bench.budgetSeconds = *v / 1e3;
  if (auto v = args.number("--warmup-ms", ms, 0, HUGE_VAL)) a.bench.warmupSeconds = *v / 1e3;
  if (auto v = args.integer("--min-reps", "a repetition count >= 1", 1, INT32_MAX)) a.bench.minReps = int(*v);
  if (auto v = args.integer("--max-reps", "a repetition count >= 1", 1, INT32_MAX)) a.bench.maxReps = int(*v);
  a.bench.flushCache = args.has("--flush");
  if (auto v = args.value("--flush-bytes")) {
    a.bench.flushCache = true;
    a.bench.flushBytes = byteCount(args, *v);
  }
  a.bench.launch.threads = threadsOf(args);
  a.bench.launch.checkBounds = args.has("--check-bounds");
  // Each timed launch fills the same profile (the last one is kept).
  static rt::Profile profile;
  if (args.has("--profile")) a.bench.launch.profile = &profile;
  a.check = !args.has("--no-check");
  a.json = args.value("--json", "");
  a.baseline = args.value("--baseline", "");
  a.roofline = args.value("--roofline", "");
  if (auto v = args.number("--threshold", "a percentage between 0 and 100", 0, 100)) a.thresholdFloor = *v / 100;
  a.machines = machinesOf(args);
  a.flops = args.number("--flops", "a flop count (>= 0) of one launch", 0, HUGE_VAL);
  a.bytes = args.number("--bytes", "a byte count (>= 0) of one launch", 0, HUGE_VAL);
  seedOf(args);  // checked here, used by each example's context
  if (auto v = args.value("--config")) {
    try {
      a.config = *v == "tuned" ? perf::TuneConfig{} : perf::TuneConfig::parse(*v);
    } catch (const UsageError& e) {
      args.fail(std::string("--config: ") + e.what());
    }
  }
  if (a.bench.maxReps < a.bench.minReps)
    args.fail("--max-reps (" + std::to_string(a.bench.maxReps) + ") must be at least --min-reps (" +
              std::to_string(a.bench.minReps) + ")");
  if (a.flops.has_value() != a.bytes.has_value())
    args.fail("--flops and --bytes declare the work together: give both (or neither, to count it from the IR)");
  return a;
}

int runBench(const cli::Args& args) {
  std::ostream& out = std::cout;
  std::ostream& err = std::cerr;
  const BenchArgs a = benchArgs(args);
  std::vector<Subject> subjects;
  for (const std::string& s : args.positionals()) subjects.push_back(resolveSubject(args, s));
  // Read the baseline first: a bad file is reported before minutes of timing.
  std::vector<perf::BenchResult> baseline;
  if (!a.baseline.empty()) {
    std::ifstream f(a.baseline, std::ios::binary);
    if (!f) args.fail("--baseline: cannot read '" + a.baseline + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    baseline = perf::fromJson(ss.str(), a.baseline);
  }
  Device dev = deviceFor(args.value("--target", "cpu"));
  applyPrecision(args);

  // The machines: the device's own for the fraction, those asked for the
  // chart. Chosen once the first launch is prepared, so that a mistake in
  // it is reported before the host is measured.
  const bool onHost = dev.kind() == rt::DeviceKind::CPU;
  std::vector<perf::Machine> machines;
  const perf::Machine* own = nullptr;
  bool machinesChosen = false;

  std::ostream& table = a.json == "-" ? err : out;
  table << "tessera bench on " << dev.name() << ": " << perf::formatSeconds(a.bench.budgetSeconds)
        << " budget per kernel (" << a.bench.minReps << ".." << a.bench.maxReps << " repetitions), warm-up "
        << perf::formatSeconds(a.bench.warmupSeconds) << ", caches " << (a.bench.flushCache ? "flushed" : "not flushed")
        << (a.config ? ", config " + (a.config->values.empty() ? std::string("tuned") : a.config->str())
                     : std::string())
        << "\n";
  std::vector<perf::BenchResult> results;
  std::optional<perf::PeerRuns> peers;
  if (args.has("--peers")) peers.emplace(dev);
  int status = 0;
  const bool progress = isatty(STDERR_FILENO);
  for (const Subject& sub : subjects) {
    examples::RunContext ctx = contextFor(args, sub, dev, a.config);
    if (a.config && a.config->values.empty() && ctx.config)
      table << "tuned config of " << sub.name() << ": " << ctx.config->str() << "\n";
    examples::Launch l = sub.example ? sub.example->prepare(ctx) : fileLaunchOf(args, sub, dev);
    if (!machinesChosen) {
      machines = perf::selectMachines(a.machines, onHost, false, err);
      own = perf::machineForDevice(rt::name(dev.kind()), dev.arch(), dev.name(), machines);
      machinesChosen = true;
    }
    if (progress) err << "benchmarking " << sub.name() << "...\r" << std::flush;
    CompiledKernel k = compile(l.kernel, dev, sub.example ? sub.example->optionsFor(ctx) : ctx.options);
    const Dim3 grid = examples::launchGrid(l, k, a.bench.launch);
    // A FILE.tir's buffers are as large as --arg says, not as the kernel
    // reads: one checked launch first (where the device checks), so a
    // buffer too small is a LaunchError naming the access and its line
    // instead of timed launches past its end.
    if (!sub.example && (onHost || dev.kind() == rt::DeviceKind::Emulator)) {
      LaunchOptions checked = a.bench.launch;
      checked.checkBounds = true;
      k.launchWith(grid, l.args, checked);
      dev.synchronize();
    }
    std::optional<perf::Work> declared;
    if (a.flops) declared = perf::Work{*a.flops, *a.bytes, "declared", {}};
    perf::BenchResult r = perf::benchmark(k, grid, l.args, a.bench, declared);
    r.name = sub.example ? sub.example->name : l.kernel.name();
    r.shape = sub.example ? examples::shapeStr(l.shape) : "";
    if (own && r.work.source == "ir") {
      perf::Roofline rl = perf::roofline(r.work.ir, *own);
      r.rooflineMachine = own->id;
      r.rooflineSeconds = rl.seconds;
      r.rooflineFraction = r.stats.median > 0 ? rl.seconds / r.stats.median : 0;
      r.rooflineBound = rl.bound;
    }
    if (progress) err << std::string(40 + sub.name().size(), ' ') << "\r" << std::flush;
    if (a.check && sub.example) {
      examples::CheckResult c = l.check();
      if (!c.ok) {
        err << "tessera: " << r.id() << ": the result after the benchmark does not match the reference (max abs error "
            << c.maxAbsError << ")" << (c.detail.empty() ? "" : ": " + c.detail) << "\n"
            << c.summary() << "\n";
        status = 1;
      }
    }
    std::optional<perf::BenchResult> peer;
    if (peers) peer = peers->run(l.gemm, r, a.bench);
    results.push_back(std::move(r));
    if (peer) results.push_back(std::move(*peer));
  }
  table << perf::formatTable(results);
  if (peers) table << peers->report();
  for (const perf::BenchResult& r : results)
    for (const std::string& n : r.work.ir.notes) table << "note: " << r.id() << ": work " << n << "\n";
  if (!own) table << "no roofline fraction: " << dev.name() << " is not a machine of the table\n";
  for (const perf::BenchResult& r : results)
    if (r.rooflineFraction > 1.05) {  // beyond the noise of the two measurements
      table << "note: " << r.id() << " ran faster than its roofline: the " << r.rooflineMachine
            << " peaks are too low (measured while the machine was busy?): tessera sol --remeasure-host\n";
      break;
    }
  if (!a.json.empty()) {
    std::string text = perf::toJson(results, {TESSERA_VERSION, args.commandLine()});
    if (a.json == "-") {
      out << text;
    } else {
      std::ofstream f(a.json, std::ios::binary | std::ios::trunc);
      if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())))
        args.fail("--json: cannot write '" + a.json + "'");
    }
  }
  if (!a.baseline.empty()) {
    bool regressed = false;
    table << "\nagainst the baseline " << a.baseline << ":\n"
          << perf::formatComparison(perf::compare(results, baseline, a.thresholdFloor), a.thresholdFloor, &regressed);
    if (regressed) status = 1;
  }
  if (!a.roofline.empty()) {
    perf::ChartFiles files = perf::writeRoofline(a.roofline, results, perf::onlyMachines(a.machines, machines),
                                                 "tessera bench on " + dev.name());
    table << "roofline chart: " << files.svg << (files.png.empty() ? "" : " and " + files.png) << "\n";
    if (!files.pngSkipped.empty()) table << "note: " << files.pngSkipped << "\n";
  }
  return status;
}

}  // namespace

cli::Command benchCommand() {
  return {"bench",
          kSynopsis,
          {kTargetOpt,
           kShapeOpt,
           kThreadsOpt,
           {"--budget-ms", "milliseconds"},
           {"--warmup-ms", "milliseconds"},
           {"--min-reps", "a count"},
           {"--max-reps", "a count"},
           {"--flush"},
           {"--flush-bytes", "a size in bytes"},
           {"--no-check"},
           {"--json", "a FILE to write the JSON report to (- for standard output)"},
           {"--baseline", "a JSON report of an earlier run (--json FILE)"},
           {"--threshold", "a percentage"},
           {"--roofline", "the FILE.svg to write the roofline chart to"},
           kMachinesOpt,
           {"--flops", "a flop count"},
           {"--bytes", "a byte count"},
           kSeedOpt,
           kPrecisionOpt,
           {"--config", "a config K=V,... (BLOCK_M=128,num_warps=8), or tuned"},
           {"--peers"},
           kCheckBoundsOpt,
           {"--profile"},
           kGridOpt,
           kArgOpt,
           kKernelOpt},
          1,
          -1,
          "a KERNEL name (`tessera list`) or a FILE.tir",
          runBench,
          benchOptionsHelp};
}

}  // namespace tessera::tools

// `tessera bench` and `tessera sol` (Perf.h).
#include "Perf.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "registry.h"
#include "tessera/perf/Bench.h"
#include "tessera/perf/GpuModel.h"
#include "tessera/perf/Peers.h"
#include "tessera/perf/TuneTable.h"
#include "tessera/perf/Roofline.h"
#include "tessera/perf/SpeedOfLight.h"
#include "tessera/support/Environment.h"

namespace tessera::tools {

const char* const kBenchSynopsis =
    "  tessera bench KERNEL[:SHAPE]...|FILE.tir [--target T] [--shape A,B,...] [--threads N]\n"
    "                  [--budget-ms MS] [--warmup-ms MS] [--min-reps N] [--max-reps N] [--flush]\n"
    "                  [--flush-bytes N] [--no-check] [--json FILE] [--baseline FILE] [--threshold PCT]\n"
    "                  [--roofline FILE.svg] [--machines ID,...] [--flops N] [--bytes N] [--seed S]\n"
    "                  [--precision accurate|approx] [--config K=V,...] [--peers] [--check-bounds]\n"
    "                  [--grid X,Y,Z --arg NAME=VALUE... --kernel NAME]\n";
const char* const kSolSynopsis =
    "  tessera sol [KERNEL[:SHAPE]...|FILE.tir] [--target T] [--shape A,B,...] [--machines ID,...]\n"
    "                  [--grid X,Y,Z] [--arg NAME=VALUE]... [--kernel NAME] [--remeasure-host] [--model]\n"
    "                  [--config K=V,...]\n";

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
         "  FILE.tir            a kernel from textual IR: --grid X[,Y[,Z]] and --arg NAME=VALUE for\n"
         "                      every argument (a scalar's value, a buffer's element count; buffers\n"
         "                      are zero-filled); --kernel NAME picks one of several kernels. On the\n"
         "                      CPU and the emulator its first launch is a checked one, so buffers\n"
         "                      smaller than the kernel reads are an error naming the access\n"
         "exit codes: 0 success; 1 a result check failed or a regression against --baseline;\n"
         "            2 a usage, compile or device error\n";
}

std::string solOptionsHelp() {
  return "sol:     the speed of light of one launch of each KERNEL (or FILE.tir with --grid and --arg):\n"
         "         its flops and compulsory bytes (counted from the IR) and, per machine, the roofline\n"
         "         time max(bytes / bandwidth, flops / peak) and what bounds it. Without a kernel: the\n"
         "         machine table. Machines: " +
         perf::machineIds() +
         ".\n"
         "         The host's FMA peak and triad bandwidth are measured once and remembered\n"
         "         (TESSERA_CACHE_DIR, else XDG_CACHE_HOME/tessera, else ~/.cache/tessera; docs/sol.md)\n"
         "  --machines ID,...   the machines to list (default all)\n"
         "  --remeasure-host    measure the host's peaks again\n"
         "  --model             also predict each launch with the GPU performance model on every GPU\n"
         "                      machine Tessera compiles for (or those of --machines): the kernel is\n"
         "                      compiled for the machine's target and its listing, registers, occupancy\n"
         "                      and work give the time (no GPU needed; docs/model.md)\n"
         "  --config K=V,...    trace each example with this point of its tune space for --target (as\n"
         "                      bench --config): the work and the model's prediction of that config\n"
         "  FILE.tir            --grid X[,Y[,Z]] and --arg NAME=VALUE (integer scalars: their value;\n"
         "                      buffers: their element count, which bounds the bytes counted)\n";
}

Device deviceForTarget(const Target& target) {
  Device d = Device::cpu();
  switch (target.kind) {
    case Target::Kind::CPU: d = Device::cpu(target.arch); break;
    case Target::Kind::EmuNVPTX: d = Device::emulator("nvptx:" + target.arch); break;
    case Target::Kind::EmuAMDGPU: d = Device::emulator("amdgpu:" + target.arch); break;
    case Target::Kind::NVPTX: d = Device::cuda(); break;
    case Target::Kind::AMDGPU: d = Device::hip(); break;
  }
  if ((target.kind == Target::Kind::NVPTX || target.kind == Target::Kind::AMDGPU) && d.arch() != target.str())
    throw DeviceError("target '" + target.str() + "' but the GPU present is " + d.name() + " (" + d.arch() +
                      "); pass --target " + d.arch());
  return d;
}

namespace {

struct PerfArgs {
  std::string command;
  std::vector<std::string> subjects;
  std::string target = "cpu";
  std::vector<int64_t> shape;
  unsigned threads = 0;
  uint64_t seed = 1;
  std::optional<std::string> precision;
  perf::BenchOptions bench;
  bool check = true;
  std::string json, baseline, roofline;
  double thresholdFloor = 0.02;
  std::vector<std::string> machines;  // empty: all
  std::optional<std::array<uint32_t, 3>> grid;
  std::vector<std::pair<std::string, std::string>> argValues;  // --arg NAME=VALUE, in order
  std::optional<double> flops, bytes;
  std::string kernelName;
  bool remeasure = false;
  bool model = false;
  bool peers = false;
  std::optional<perf::TuneConfig> config;
  bool help = false;
  std::string commandLine;
};

class ArgParser {
 public:
  ArgParser(std::string command, const std::vector<std::string>& args) : cmd_(std::move(command)), args_(args) {}

  [[noreturn]] void fail(const std::string& msg) const { throw CommandLineError(cmd_, msg); }

  PerfArgs parse() {
    PerfArgs a;
    a.command = cmd_;
    a.commandLine = "tessera " + cmd_;
    for (const std::string& s : args_) a.commandLine += " " + s;
    const bool bench = cmd_ == "bench";
    for (i_ = 0; i_ < args_.size(); ++i_) {
      std::string s = args_[i_];
      inline_.reset();
      if (s.rfind("--", 0) == 0 && s.find('=') != std::string::npos) {
        inline_ = s.substr(s.find('=') + 1);
        s = s.substr(0, s.find('='));
      }
      flag_ = s;
      if (s == "--help" || s == "-h") {
        a.help = true;
      } else if (s == "--target") {
        a.target = value("a target (cpu, cpu:x86-64-v3, nvptx:sm_90a, emu:nvptx:sm_80, ...)");
      } else if (s == "--shape") {
        a.shape = shapeList(value("a shape A,B,... (non-negative integers)"));
      } else if (s == "--machines" || s == "--machine") {
        a.machines = machineList(value("machine ids separated by commas"));
      } else if (s == "--grid") {
        a.grid = gridDims(value("a grid X[,Y[,Z]] of positive integers"));
      } else if (s == "--arg") {
        std::string v = value("NAME=VALUE");
        auto eq = v.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
          fail("--arg expects NAME=VALUE (a scalar argument's value or a buffer's element count), got '" + v + "'");
        a.argValues.emplace_back(v.substr(0, eq), v.substr(eq + 1));
      } else if (s == "--kernel") {
        a.kernelName = value("the name of a kernel in the file");
      } else if (s == "--remeasure-host" && !bench) {
        a.remeasure = true;
      } else if (s == "--model" && !bench) {
        a.model = true;
      } else if (bench && s == "--threads") {
        int64_t n = integer(value("a thread count"), "a thread count between 1 and 1024", 1, 1024);
        a.threads = static_cast<unsigned>(n);
      } else if (bench && s == "--budget-ms") {
        a.bench.budgetSeconds = number(value("milliseconds"), "a time in milliseconds (>= 0)", 0) / 1e3;
      } else if (bench && s == "--warmup-ms") {
        a.bench.warmupSeconds = number(value("milliseconds"), "a time in milliseconds (>= 0)", 0) / 1e3;
      } else if (bench && s == "--min-reps") {
        a.bench.minReps = static_cast<int>(integer(value("a count"), "a repetition count >= 1", 1, INT32_MAX));
      } else if (bench && s == "--max-reps") {
        a.bench.maxReps = static_cast<int>(integer(value("a count"), "a repetition count >= 1", 1, INT32_MAX));
      } else if (bench && s == "--flush") {
        a.bench.flushCache = true;
      } else if (bench && s == "--flush-bytes") {
        a.bench.flushCache = true;
        a.bench.flushBytes = byteCount(value("a size in bytes"));
      } else if (bench && s == "--no-check") {
        a.check = false;
      } else if (bench && s == "--json") {
        a.json = value("a FILE to write the JSON report to (- for standard output)");
      } else if (bench && s == "--baseline") {
        a.baseline = value("a JSON report of an earlier run (--json FILE)");
      } else if (bench && s == "--threshold") {
        a.thresholdFloor = number(value("a percentage"), "a percentage between 0 and 100", 0, 100) / 100;
      } else if (bench && s == "--roofline") {
        a.roofline = value("the FILE.svg to write the roofline chart to");
      } else if (bench && s == "--flops") {
        a.flops = number(value("a flop count"), "a flop count (>= 0) of one launch", 0);
      } else if (bench && s == "--bytes") {
        a.bytes = number(value("a byte count"), "a byte count (>= 0) of one launch", 0);
      } else if (bench && s == "--seed") {
        a.seed = static_cast<uint64_t>(integer(value("an integer seed"), "an integer seed >= 0", 0, INT64_MAX));
      } else if (bench && s == "--precision") {
        a.precision = value("accurate or approx");
        codegen::parsePrecision(*a.precision);  // a UsageError naming the choices
      } else if (bench && s == "--peers") {
        a.peers = true;
      } else if (bench && s == "--check-bounds") {
        a.bench.launch.checkBounds = true;
      } else if ((bench || cmd_ == "sol") && s == "--config") {
        const std::string v = value("a config K=V,... (BLOCK_M=128,num_warps=8), or tuned");
        try {
          a.config = v == "tuned" ? perf::TuneConfig{} : perf::TuneConfig::parse(v);
        } catch (const UsageError& e) {
          fail(std::string("--config: ") + e.what());
        }
      } else if (!s.empty() && s[0] == '-' && s != "-") {
        fail("unknown option " + s + " (`tessera help " + cmd_ + "` lists the options of " + cmd_ + ")");
      } else {
        a.subjects.push_back(args_[i_]);
      }
    }
    if (bench && a.bench.maxReps < a.bench.minReps)
      fail("--max-reps (" + std::to_string(a.bench.maxReps) + ") must be at least --min-reps (" +
           std::to_string(a.bench.minReps) + ")");
    if (bench && (a.flops.has_value() != a.bytes.has_value()))
      fail("--flops and --bytes declare the work together: give both (or neither, to count it from the IR)");
    if (bench && !a.help && a.subjects.empty()) fail("needs a KERNEL name (`tessera list`) or a FILE.tir");
    return a;
  }

 private:
  std::string value(const std::string& what) {
    if (inline_) return *inline_;
    if (i_ + 1 >= args_.size()) fail(flag_ + " needs a value: " + what);
    return args_[++i_];
  }
  int64_t integer(const std::string& s, const std::string& what, int64_t lo, int64_t hi) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
      fail(flag_ + " expects " + what + ", got '" + s + "'");
    return v;
  }
  double number(const std::string& s, const std::string& what, double lo, double hi = HUGE_VAL) {
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < lo || v > hi)
      fail(flag_ + " expects " + what + ", got '" + s + "'");
    return v;
  }
  size_t byteCount(const std::string& s) {
    std::string digits = s;
    uint64_t mul = 1;
    if (!digits.empty() && std::string("KMG").find(digits.back()) != std::string::npos) {
      mul = digits.back() == 'K' ? 1ull << 10 : digits.back() == 'M' ? 1ull << 20 : 1ull << 30;
      digits.pop_back();
    }
    int64_t v = integer(digits, "a size in bytes >= 1 (optionally ending in K, M or G)", 1, int64_t{1} << 40);
    if (static_cast<uint64_t>(v) * mul > (uint64_t{1} << 40))
      fail(flag_ + " expects a size of at most 1T bytes, got '" + s + "'");
    return static_cast<size_t>(static_cast<uint64_t>(v) * mul);
  }
  std::vector<int64_t> shapeList(const std::string& s) {
    std::vector<int64_t> out;
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ','))
      out.push_back(integer(part, "a shape A,B,... of non-negative integers", 0, INT64_MAX));
    if (out.empty()) fail(flag_ + " expects a shape A,B,... of non-negative integers, got '" + s + "'");
    return out;
  }
  std::array<uint32_t, 3> gridDims(const std::string& s) {
    std::vector<int64_t> d;
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ','))
      d.push_back(integer(part, "a grid X[,Y[,Z]] of integers 1..2^31-1", 1, INT32_MAX));
    if (d.empty() || d.size() > 3) fail(flag_ + " expects a grid X[,Y[,Z]] (one to three sizes), got '" + s + "'");
    std::array<uint32_t, 3> g{1, 1, 1};
    for (size_t i = 0; i < d.size(); ++i) g[i] = static_cast<uint32_t>(d[i]);
    return g;
  }
  std::vector<std::string> machineList(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ',')) {
      if (part.empty()) continue;
      if (part != "host" && !perf::findGpuMachine(part))
        fail(flag_ + ": unknown machine '" + part + "' (expected some of: " + perf::machineIds() + ")");
      out.push_back(part);
    }
    if (out.empty()) fail(flag_ + " expects machine ids separated by commas (" + perf::machineIds() + ")");
    return out;
  }

  std::string cmd_;
  const std::vector<std::string>& args_;
  size_t i_ = 0;
  std::string flag_;
  std::optional<std::string> inline_;
};

// ---- what is benchmarked -------------------------------------------------

/// One KERNEL[:SHAPE] of the command line: a bundled example with its
/// shape, or a FILE.tir.
struct Subject {
  const examples::Example* example = nullptr;
  std::vector<int64_t> shape;
  std::string file;
};

Subject resolveSubject(const std::string& s, const PerfArgs& a) {
  Subject sub;
  std::string name = s, shape;
  if (auto colon = s.find(':'); colon != std::string::npos && examples::find(s.substr(0, colon))) {
    name = s.substr(0, colon);
    shape = s.substr(colon + 1);
  }
  if (const examples::Example* ex = examples::find(name)) {
    if (!ex->prepare)
      throw CommandLineError(a.command, "'" + name +
                                            "' runs several launches (GEMMs and collectives across ranks), not one: "
                                            "run it with `tessera run " +
                                            name + "` or its program; " + a.command + " takes a single-launch kernel");
    sub.example = ex;
    sub.shape = a.shape;
    if (!shape.empty()) {
      sub.shape.clear();
      std::stringstream ss(shape);
      std::string part;
      while (std::getline(ss, part, ',')) {
        char* end = nullptr;
        long long v = std::strtoll(part.c_str(), &end, 10);
        if (part.empty() || *end || v < 0)
          throw CommandLineError(a.command, "'" + s + "': the shape after ':' is A,B,... (non-negative integers)");
        sub.shape.push_back(v);
      }
    }
    return sub;
  }
  std::ifstream f(s);
  if (!f) {
    std::string names;
    for (const auto& e : examples::all()) names += (names.empty() ? "" : ", ") + e.name;
    throw CommandLineError(a.command,
                           "'" + s + "' is neither a bundled kernel (" + names + ") nor a readable FILE.tir");
  }
  sub.file = s;
  return sub;
}

Kernel parseFile(const std::string& path, const std::string& kernelName) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  if (text.size() > (size_t{64} << 20)) throw UsageError("'" + path + "' is larger than 64 MiB; not a tile IR file");
  return parseKernel(text, path, kernelName);
}

/// The --arg value for argument `i` of `f`, by name or by index.
const std::string* argValue(const PerfArgs& a, const ir::Function& f, unsigned i) {
  for (const auto& [name, value] : a.argValues)
    if (name == f.arg(i)->nameHint || name == std::to_string(i)) return &value;
  return nullptr;
}

void checkArgNames(const PerfArgs& a, const ir::Function& f) {
  for (const auto& [name, value] : a.argValues) {
    bool known = false;
    std::string names;
    for (unsigned i = 0; i < f.numArgs(); ++i) {
      std::string n = f.arg(i)->nameHint.empty() ? std::to_string(i) : f.arg(i)->nameHint;
      names += (names.empty() ? "" : ", ") + n;
      known = known || name == f.arg(i)->nameHint || name == std::to_string(i);
    }
    if (!known)
      throw CommandLineError(a.command, "--arg " + name + ": kernel '" + f.name() +
                                            "' has no argument of that name (its arguments: " + names + ")");
  }
}

int64_t parseArgInt(const PerfArgs& a, const std::string& name, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno)
    throw CommandLineError(a.command, "--arg " + name + " expects an integer, got '" + v + "'");
  return x;
}

/// A launch of a kernel from a file: buffers of the --arg element counts
/// (zero-filled) on `dev`, scalars from --arg.
examples::Launch fileLaunch(const Subject& sub, const PerfArgs& a, const Device& dev) {
  examples::Launch l;
  l.kernel = parseFile(sub.file, a.kernelName);
  const ir::Function& f = l.kernel.ir();
  checkArgNames(a, f);
  if (!a.grid) throw CommandLineError(a.command, "a FILE.tir needs --grid X[,Y[,Z]]: the number of programs to launch");
  l.grid = Dim3((*a.grid)[0], (*a.grid)[1], (*a.grid)[2]);
  std::string missing;
  for (unsigned i = 0; i < f.numArgs(); ++i) {
    const ir::Type& t = f.arg(i)->type();
    std::string name = f.arg(i)->nameHint.empty() ? std::to_string(i) : f.arg(i)->nameHint;
    const std::string* v = argValue(a, f, i);
    if (!v) {
      missing += (missing.empty() ? "" : ", ") + name + (t.isPointer() ? " (elements)" : " (" + t.str() + ")");
      continue;
    }
    if (t.isPointer()) {
      int64_t n = parseArgInt(a, name, *v);
      if (n < 1)
        throw CommandLineError(a.command, "--arg " + name + ": a buffer needs at least one element, got " + *v);
      Buffer b = dev.alloc(t.dtype(), static_cast<size_t>(n));
      b.fillBytes(0);
      l.args.emplace_back(b);
    } else if (isFloat(t.dtype())) {
      char* end = nullptr;
      double x = std::strtod(v->c_str(), &end);
      if (v->empty() || *end)
        throw CommandLineError(a.command, "--arg " + name + " expects a number, got '" + *v + "'");
      if (t.dtype() == DType::F64)
        l.args.emplace_back(x);
      else
        l.args.emplace_back(static_cast<float>(x));
    } else {
      int64_t x = parseArgInt(a, name, *v);
      switch (t.dtype()) {
        case DType::I1: l.args.emplace_back(x != 0); break;
        case DType::I8: l.args.emplace_back(static_cast<int8_t>(x)); break;
        case DType::I16: l.args.emplace_back(static_cast<int16_t>(x)); break;
        case DType::I64: l.args.emplace_back(static_cast<int64_t>(x)); break;
        default: l.args.emplace_back(static_cast<int32_t>(x)); break;
      }
    }
  }
  if (!missing.empty())
    throw CommandLineError(a.command, "kernel '" + f.name() + "' needs --arg NAME=VALUE for: " + missing);
  l.check = [] {
    examples::CheckResult r;
    r.ok = true;
    r.detail = "no reference for a FILE.tir";
    return r;
  };
  return l;
}

examples::RunContext contextFor(const Subject& sub, const PerfArgs& a, const Device& dev) {
  examples::RunContext ctx;
  ctx.device = dev;
  ctx.shape = sub.shape;
  ctx.seed = a.seed;
  ctx.launch.threads = a.threads;
  if (!a.config) return ctx;
  // --config: names of the example's tune space only, so that a misspelt
  // parameter is an error rather than a silently ignored default.
  if (!sub.example || !sub.example->tuneSpace)
    throw CommandLineError(a.command, "--config: " + (sub.example ? "example " + sub.example->name : sub.file) +
                                          " declares no tune space (`tessera tune` lists the tunable examples)");
  const std::vector<int64_t> shape = sub.shape.empty() ? sub.example->prepare(ctx).shape : sub.shape;
  if (a.config->values.empty()) {
    // --config tuned: the best config `tessera tune` stored for this
    // device (or ranked with the performance model for its machine).
    const perf::TuneTable table = perf::TuneTable::fromStore(sub.example->name);
    const perf::TuneTableEntry* e = table.findFor(sub.example->name, shape, sub.example->dtype, dev);
    if (!e)
      throw CommandLineError(a.command, "--config tuned: nothing tuned for " + sub.example->name + " at " +
                                            examples::shapeStr(shape) + " on " + dev.name() + "; run `tessera tune " +
                                            sub.example->name + " --shape " + examples::shapeStr(shape) + " --device " +
                                            a.target + "` first (or with --model MACHINE)");
    return examples::withConfig(ctx, e->config);
  }
  perf::TuneSpace space = sub.example->tuneSpace(Target::parse(a.target), shape);
  std::string names;
  for (const auto& p : space.params) names += (names.empty() ? "" : ", ") + p.name;
  for (const auto& [k, v] : a.config->values)
    if (std::none_of(space.params.begin(), space.params.end(), [&](const auto& p) { return p.name == k; }))
      throw CommandLineError(a.command, "--config: " + sub.example->name + " on " + a.target + " has no parameter " +
                                            k + " (its parameters: " + names + ")");
  return examples::withConfig(ctx, *a.config);
}

std::string subjectName(const Subject& s) { return s.example ? s.example->name : s.file; }

/// The machines asked for (--machines), the host first when included;
/// measuring the host's peaks only when it is.
std::vector<perf::Machine> selectMachines(const PerfArgs& a, bool needHost, std::ostream& err) {
  bool wantHost = a.machines.empty() || std::find(a.machines.begin(), a.machines.end(), "host") != a.machines.end();
  std::vector<perf::Machine> out;
  if (wantHost || needHost) {
    perf::HostPeaks hp = perf::hostPeaks(a.remeasure);
    if (!hp.fromCache)
      err << "tessera: measured this host's peaks in " << perf::formatSeconds(hp.measureSeconds) << ": FMA "
          << perf::formatSI(hp.fmaFlops, "FLOP/s") << ", triad " << perf::formatSI(hp.triadBytes, "B/s")
          << (hp.cacheFile.empty() ? std::string() : "; remembered in " + hp.cacheFile) << "\n";
    if (!hp.warning.empty()) err << "tessera: warning: " << hp.warning << "\n";
    out.push_back(perf::hostMachine(hp));
  }
  for (const perf::Machine& m : perf::gpuMachines())
    if (a.machines.empty() || std::find(a.machines.begin(), a.machines.end(), m.id) != a.machines.end())
      out.push_back(m);
  return out;
}

std::vector<perf::Machine> onlyAsked(const PerfArgs& a, const std::vector<perf::Machine>& all) {
  if (a.machines.empty()) return all;
  std::vector<perf::Machine> out;
  for (const perf::Machine& m : all)
    if (std::find(a.machines.begin(), a.machines.end(), m.id) != a.machines.end()) out.push_back(m);
  return out;
}

/// --peers: each kernel's peer on its device, timed with the same harness
/// and options, and the lines that set the two side by side.
class Peers {
 public:
  explicit Peers(Device dev) : dev_(std::move(dev)) {}

  /// The peer of one benchmarked launch, or nothing (with a note saying why).
  std::optional<perf::BenchResult> run(const examples::Launch& l, const perf::BenchResult& k,
                                       const perf::BenchOptions& opts) {
    std::optional<perf::BenchResult> p;
    if (l.gemm)
      p = gemm(*l.gemm, k, opts);
    else
      p = copy(k, opts);
    if (p) lines_.push_back(compareLine(k, *p));
    return p;
  }

  /// "against the peers" and the notes, after the table.
  std::string report() const {
    std::string out;
    if (!lines_.empty())
      out += "\nagainst the peers (the same device and harness; speed = peer median / kernel median):\n";
    for (const std::string& l : lines_) out += "  " + l + "\n";
    for (const std::string& n : notes_) out += "note: " + n + "\n";
    return out;
  }

 private:
  std::optional<perf::BenchResult> gemm(perf::GemmProblem g, const perf::BenchResult& k,
                                        const perf::BenchOptions& opts) {
    if (dev_.kind() == rt::DeviceKind::CPU || dev_.kind() == rt::DeviceKind::Emulator) {
      note(k.id() + ": no GEMM peer on " + dev_.name() +
           (dev_.kind() == rt::DeviceKind::CPU ? " (tessera_gemm_bench compares the CPU GEMMs with OpenBLAS and oneDNN)"
                                               : " (the vendor BLAS runs on CUDA and HIP devices)"));
      return std::nullopt;
    }
    if (!blas_ && blasError_.empty()) {
      try {
        blas_ = std::make_unique<perf::VendorBlas>(dev_);
      } catch (const Error& e) {
        blasError_ = e.what();
      }
    }
    if (!blas_) {
      note(k.id() + ": no GEMM peer: " + blasError_);
      return std::nullopt;
    }
    // The peer writes its own C, so the kernel's output is checked as it left it.
    g.c = dev_.alloc(g.c.dtype(), g.c.count());
    const double flops = 2.0 * double(g.m) * double(g.n) * double(g.k);
    const double bytes = double(g.m * g.k + g.k * g.n) * double(byteSize(g.a.dtype())) +
                         double(g.m * g.n) * double(byteSize(g.c.dtype()));
    perf::BenchResult r = perf::benchmarkPeer(dev_, blas_->launchFn(g), opts, k.name + "/blas", k.shape,
                                              perf::Work{flops, bytes, "declared", {}});
    peerName_[r.id()] = blas_->name();
    return r;
  }

  std::optional<perf::BenchResult> copy(const perf::BenchResult& k, const perf::BenchOptions& opts) {
    // Half the compulsory bytes (read + written) are copied: the copy then
    // reads and writes as many bytes as the kernel must.
    const size_t n = static_cast<size_t>(k.work.bytes / 2) / 16 * 16;
    if (n == 0) {
      note(k.id() + ": no copy peer (no global-memory bytes counted)");
      return std::nullopt;
    }
    rt::Buffer src = dev_.alloc(DType::U8, n), dst = dev_.alloc(DType::U8, n);
    perf::BenchResult r = perf::benchmarkPeer(dev_, perf::deviceCopy(dst, src, n), opts, k.name + "/copy", k.shape,
                                              perf::Work{0, 2.0 * double(n), "declared", {}});
    peerName_[r.id()] = "device-to-device copy of " + perf::formatSI(double(n), "B");
    return r;
  }

  std::string compareLine(const perf::BenchResult& k, const perf::BenchResult& p) const {
    std::ostringstream o;
    o << k.id() << ": " << perf::formatSeconds(k.stats.median) << " against " << peerName_.at(p.id()) << ": "
      << perf::formatSeconds(p.stats.median) << " -> ";
    if (k.stats.median > 0 && p.stats.median > 0)
      o << std::setprecision(3) << p.stats.median / k.stats.median << "x";
    else
      o << "no ratio (a median of 0: the device's clock did not advance)";
    if (k.work.flops > 0 && p.work.flops > 0)
      o << " (" << perf::formatSI(k.flopsPerSecond(), "FLOP/s") << " vs "
        << perf::formatSI(p.flopsPerSecond(), "FLOP/s") << ")";
    else
      o << " (" << perf::formatSI(k.bytesPerSecond(), "B/s") << " vs " << perf::formatSI(p.bytesPerSecond(), "B/s")
        << ")";
    return o.str();
  }

  void note(const std::string& n) { notes_.push_back(n); }

  Device dev_;
  std::unique_ptr<perf::VendorBlas> blas_;
  std::string blasError_;
  std::map<std::string, std::string> peerName_;
  std::vector<std::string> lines_, notes_;
};

}  // namespace

// ---- bench ------------------------------------------------------------------

int runBench(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  PerfArgs a = ArgParser("bench", args).parse();
  if (a.help) {
    out << "usage:\n" << kBenchSynopsis << benchOptionsHelp();
    return 0;
  }
  std::vector<Subject> subjects;
  for (const std::string& s : a.subjects) subjects.push_back(resolveSubject(s, a));
  // Read the baseline first: a bad file is reported before minutes of timing.
  std::vector<perf::BenchResult> baseline;
  if (!a.baseline.empty()) {
    std::ifstream f(a.baseline, std::ios::binary);
    if (!f) throw CommandLineError("bench", "--baseline: cannot read '" + a.baseline + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    baseline = perf::fromJson(ss.str(), a.baseline);
  }
  Target target = Target::parse(a.target);
  Device dev = deviceForTarget(target);
  if (a.precision) setenv(tessera::env::name(tessera::env::Var::Precision), a.precision->c_str(), 1);
  a.bench.launch.threads = a.threads;

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
  std::optional<Peers> peers;
  if (a.peers) peers.emplace(dev);
  int status = 0;
  const bool progress = isatty(STDERR_FILENO);
  for (const Subject& sub : subjects) {
    examples::RunContext ctx = contextFor(sub, a, dev);
    if (a.config && a.config->values.empty() && ctx.config)
      table << "tuned config of " << subjectName(sub) << ": " << ctx.config->str() << "\n";
    examples::Launch l = sub.example ? sub.example->prepare(ctx) : fileLaunch(sub, a, dev);
    if (!machinesChosen) {
      machines = selectMachines(a, onHost, err);
      own = perf::machineForDevice(rt::name(dev.kind()), dev.arch(), dev.name(), machines);
      machinesChosen = true;
    }
    if (progress) err << "benchmarking " << subjectName(sub) << "...\r" << std::flush;
    CompiledKernel k = compile(l.kernel, dev, sub.example ? sub.example->optionsFor(ctx) : ctx.options);
    // A FILE.tir's buffers are as large as --arg says, not as the kernel
    // reads: one checked launch first (where the device checks), so a
    // buffer too small is a LaunchError naming the access and its line
    // instead of timed launches past its end.
    if (!sub.example && (onHost || dev.kind() == rt::DeviceKind::Emulator)) {
      LaunchOptions checked = a.bench.launch;
      checked.checkBounds = true;
      k.launchWith(l.grid, l.args, checked);
      dev.synchronize();
    }
    std::optional<perf::Work> declared;
    if (a.flops) declared = perf::Work{*a.flops, *a.bytes, "declared", {}};
    perf::BenchResult r = perf::benchmark(k, l.grid, l.args, a.bench, declared);
    r.name = sub.example ? sub.example->name : l.kernel.name();
    r.shape = sub.example ? examples::shapeStr(l.shape) : "";
    if (own && r.work.source == "ir") {
      perf::Roofline rl = perf::roofline(r.work.ir, *own);
      r.rooflineMachine = own->id;
      r.rooflineSeconds = rl.seconds;
      r.rooflineFraction = r.stats.median > 0 ? rl.seconds / r.stats.median : 0;
      r.rooflineBound = rl.bound;
    }
    if (progress) err << std::string(40 + subjectName(sub).size(), ' ') << "\r" << std::flush;
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
    if (peers) peer = peers->run(l, r, a.bench);
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
    std::string text = perf::toJson(results, {TESSERA_VERSION, a.commandLine});
    if (a.json == "-") {
      out << text;
    } else {
      std::ofstream f(a.json, std::ios::binary | std::ios::trunc);
      if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())))
        throw CommandLineError("bench", "--json: cannot write '" + a.json + "'");
    }
  }
  if (!a.baseline.empty()) {
    bool regressed = false;
    table << "\nagainst the baseline " << a.baseline << ":\n"
          << perf::formatComparison(perf::compare(results, baseline, a.thresholdFloor), a.thresholdFloor, &regressed);
    if (regressed) status = 1;
  }
  if (!a.roofline.empty()) {
    perf::ChartFiles files =
        perf::writeRoofline(a.roofline, results, onlyAsked(a, machines), "tessera bench on " + dev.name());
    table << "roofline chart: " << files.svg << (files.png.empty() ? "" : " and " + files.png) << "\n";
    if (!files.pngSkipped.empty()) table << "note: " << files.pngSkipped << "\n";
  }
  return status;
}

// ---- sol --------------------------------------------------------------------

/// `sol --model`: the subject compiled for each model machine's target
/// (its inputs in that target's emulator's memory), predicted there.
std::string modelReport(const Subject& sub, const PerfArgs& a) {
  std::vector<perf::ModelPrediction> preds;
  std::vector<std::string> skipped;
  for (const perf::Machine* m : perf::modelMachines()) {
    if (!a.machines.empty() && std::find(a.machines.begin(), a.machines.end(), m->id) == a.machines.end()) continue;
    Target t = Target::parse(m->target);
    Device dev = Device::emulator(m->target);
    try {
      if (sub.example) {
        examples::RunContext ctx = contextFor(sub, a, dev);
        examples::Launch l = sub.example->prepare(ctx);
        CompiledKernel k = compile(specializedFor(l.kernel, l.args), t, sub.example->optionsFor(ctx));
        preds.push_back(perf::predictGpu(k, l.grid, l.args, *m));
      } else {
        examples::Launch l = fileLaunch(sub, a, dev);
        preds.push_back(perf::predictGpu(compile(specializedFor(l.kernel, l.args), t), l.grid, l.args, *m));
      }
    } catch (const ResourceError& e) {
      skipped.push_back(m->id + ": " + e.what());
    }
  }
  if (preds.empty() && skipped.empty())
    throw CommandLineError("sol", "--model: none of the machines asked for has a target Tessera compiles for");
  std::string s = "  performance model (docs/model.md):\n" + perf::formatModelTable(preds);
  for (const std::string& why : skipped) s += "  cannot run on " + why + "\n";
  for (const perf::ModelPrediction& p : preds) s += p.str();
  return s;
}

int runSol(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  PerfArgs a = ArgParser("sol", args).parse();
  if (a.help) {
    out << "usage:\n" << kSolSynopsis << solOptionsHelp();
    return 0;
  }
  if (a.subjects.empty()) {
    out << perf::formatMachineTable(selectMachines(a, false, err));
    return 0;
  }
  Target target = Target::parse(a.target);
  // Inputs are generated where the target's code would read them; GPU
  // targets use the emulator's host memory, so no GPU is needed.
  Device dev = Device::cpu();
  if (target.kind == Target::Kind::CPU)
    dev = Device::cpu(target.arch);
  else if (target.kind == Target::Kind::NVPTX || target.kind == Target::Kind::EmuNVPTX)
    dev = Device::emulator("nvptx:" + target.arch);
  else
    dev = Device::emulator("amdgpu:" + target.arch);
  // Every launch's work first, so that a mistake is reported before the
  // host is measured.
  std::vector<std::pair<std::string, ir::WorkEstimate>> works;
  for (const std::string& s : a.subjects) {
    Subject sub = resolveSubject(s, a);
    ir::WorkEstimate w;
    std::string title;
    if (sub.example) {
      examples::Launch l = sub.example->prepare(contextFor(sub, a, dev));
      w = perf::launchWork(l.kernel, l.grid, l.args).ir;
      title = sub.example->name + "[" + examples::shapeStr(l.shape) + "], grid " + l.grid.str();
    } else {
      Kernel k = parseFile(sub.file, a.kernelName);
      const ir::Function& f = k.ir();
      checkArgNames(a, f);
      if (!a.grid) throw CommandLineError("sol", "a FILE.tir needs --grid X[,Y[,Z]]: the number of programs launched");
      ir::LaunchFacts facts;
      facts.grid = {(*a.grid)[0], (*a.grid)[1], (*a.grid)[2]};
      facts.scalars.resize(f.numArgs());
      facts.bufferBytes.resize(f.numArgs());
      for (unsigned i = 0; i < f.numArgs(); ++i) {
        const std::string* v = argValue(a, f, i);
        if (!v) continue;
        const ir::Type& t = f.arg(i)->type();
        std::string name = f.arg(i)->nameHint.empty() ? std::to_string(i) : f.arg(i)->nameHint;
        if (t.isPointer())
          facts.bufferBytes[i] =
              static_cast<uint64_t>(std::max<int64_t>(0, parseArgInt(a, name, *v))) * byteSize(t.dtype());
        else if (t.isIntLike())
          facts.scalars[i] = parseArgInt(a, name, *v);
      }
      w = perf::launchWork(k, facts).ir;
      title = f.name() + " (" + sub.file + "), grid " + Dim3((*a.grid)[0], (*a.grid)[1], (*a.grid)[2]).str();
    }
    works.emplace_back(title, std::move(w));
  }
  std::vector<perf::Machine> machines = selectMachines(a, false, err);
  for (size_t i = 0; i < works.size(); ++i) {
    out << (i ? "\n" : "") << perf::formatSolTable(works[i].first, works[i].second, machines);
    if (a.model) out << modelReport(resolveSubject(a.subjects[i], a), a);
  }
  return 0;
}

}  // namespace tessera::tools

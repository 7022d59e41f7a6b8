// tessera_gpu_bench: static GPU code quality, no GPU needed. Run by hand:
//
//   cmake --build build --target tessera_gpu_bench
//   build/bin/tessera_gpu_bench [--reps N] [--only NAME] [--targets T1,T2] [--json FILE] [--dump DIR]
//                               [--precision accurate|approx]
//
// For the bundled examples (their default GPU kernels, 4 warps) and the
// kernels of gpu_static_kernels.h, on nvptx:sm_80, nvptx:sm_90a,
// amdgpu:gfx942 and amdgpu:gfx1100, compiled as an aligned launch would
// specialise them (assumeAligned), one row per kernel and target:
//   regs   registers per thread (ptxas -v) / VGPRs (code object metadata)
//   spill  ptxas spill stores + loads / AMDGPU private segment, bytes
//   smem   shared memory (LDS) per block, bytes
//   occ    occupancy: NVIDIA warps per SM, AMD waves per SIMD (see
//          "occupancy" below)
//   coal   coalesced global accesses / contiguous ones, vec vectorised /
//          vectorisable ones, repl the largest avoidable replication
//          (ir/analysis/LayoutStats.h defines each)
//   conv   layout conversions through shared memory (+ values re-emitted in
//          another layout instead)
//   loop   instructions of the main loop (see "main loop" below), total
//          all instructions; SASS where nvdisasm exists (with only cuobjdump
//          the listing has no labels: no loop found), else PTX
//   ms     cold compile, tile IR -> PTX / code object: median of --reps
//          compiles with the cache cleared, after a warm-up compile; ptxas
//          the median time of ptxas -v on that PTX (NVIDIA)
// Every kernel is first run on the emulated target (emu:nvptx:sm_90a for
// nvptx:sm_90a, ...) against its C++ reference at its shapes, one of them
// ragged; a kernel that fails (or does not fit the target) reports no
// figures for that target. --dump DIR writes the listings and layout statistics the
// figures come from, the tile IR after every pass (layouts included) and
// the LLVM module handed to the backend. --precision approx compiles with the
// hardware approximations of exp, division and sqrt (docs/math.md), as
// Triton's code has them (bench/triton/compare.sh passes it).
//
//   build/bin/tessera_gpu_bench --measure TARGET KERNEL THREADS SHARED CODE [ASM]
// measures another compiler's output the same way (bench/triton/static_peer.py):
// CODE is its PTX (NVIDIA) or code object (AMD), ASM its AMDGCN assembly.
#include <algorithm>
#include <cctype>
#include <climits>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "codegen/gpu/GpuCompile.h"
#include "cli/CommandLine.h"
#include "gpu_static_kernels.h"
#include "registry.h"
#include "tessera/ir/analysis/LayoutStats.h"
#include "tessera/perf/CodeProfile.h"
#include "tessera/support/Targets.h"
#include "tessera/tessera.h"
#include "tessera/support/Environment.h"

namespace ts = tessera;

namespace {

// ------------------------------------------------------------ main loop
//
// The main loop and the instruction counts: tessera/perf/CodeProfile.h,
// the listing analysis the performance model shares. Kernels without a
// loop report -1.
using ts::perf::Listing;

// ------------------------------------------------------------ occupancy
//
// tessera::occupancy (support/Targets.h, the formula the resource reports
// print) applied to either compiler's registers, shared memory and threads:
// NVIDIA warps per SM, AMD waves per SIMD. The shared memory is the larger of
// the code's static allocation and what the launch passes (Triton's LDS is
// dynamic, absent from its code object's group segment).
int occupancyOf(const ts::codegen::Target& t, int regs, int64_t shared, int threads) {
  const ts::GpuArch* a = ts::findGpuArch(
      t.kind == ts::Target::Kind::NVPTX ? ts::GpuArch::Vendor::NVIDIA : ts::GpuArch::Vendor::AMD, t.arch);
  if (!a) throw ts::UsageError("no architecture row for " + t.str());
  return ts::occupancy(*a, regs, shared, threads).value;
}

// ------------------------------------------------------------ measurement

struct Row {
  Row(std::string n, std::string c, std::string t, std::string e = "")
      : name(std::move(n)), config(std::move(c)), target(std::move(t)), error(std::move(e)) {}
  std::string name, config, target, error;
  int regs = -1, occupancy = -1;
  int64_t spill = -1, shared = -1;
  std::optional<ts::ir::LayoutSummary> layout;
  ts::perf::CodeProfile instrs;
  std::string listing;  // sass, ptx, amdgcn
  double compileMs = -1, ptxasMs = -1;
  std::string stages;  // --stages: "stage ms" per compile stage, medians
};

// After one warm-up call (first use of a target initialises LLVM's backend).
double medianMs(int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  fn();
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

bool isNvidia(const ts::Target& t) { return t.kind == ts::Target::Kind::NVPTX; }

// --dump DIR: every listing the figures come from, to check the heuristics.
std::string dumpDir;
bool showStages = false;  // --stages
void dump(const Row& r, const std::string& stage, const std::string& text) {
  if (dumpDir.empty()) return;
  std::string f = r.name + "." + r.config + "." + r.target + "." + stage;
  for (char& c : f)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  std::ofstream(dumpDir + "/" + f) << text;
}

// Registers, spills, occupancy and the main loop of a compiled artifact
// (Tessera's own, or one assembled from another compiler's output).
void measureArtifact(const ts::codegen::Artifact& art, const std::string& amdgcn, int threads, Row& r, int reps) {
  ts::codegen::GpuResources res = ts::codegen::gpuResources(art);
  r.regs = res.registers;
  r.spill = res.spillBytes;
  if (isNvidia(art.target)) {
    r.ptxasMs = medianMs(reps, [&] { ts::codegen::gpuResources(art); });
    r.shared = std::max<int64_t>(res.sharedBytes, art.binary.sharedBytes);
    r.occupancy = occupancyOf(art.target, r.regs, r.shared, threads);
    std::string text;
    try {
      text = ts::codegen::sass(art);
      r.listing = "sass";
    } catch (const ts::DeviceError&) {  // no disassembler: PTX
      text = art.dumps.assembly;
      r.listing = "ptx";
    }
    r.instrs = ts::perf::profileListing(text, r.listing == "sass" ? Listing::SASS : Listing::PTX);
    dump(r, r.listing, text);
  } else {
    r.shared = std::max<int64_t>(res.sharedBytes, art.binary.sharedBytes);
    r.occupancy = occupancyOf(art.target, r.regs, r.shared, threads);
    r.instrs = ts::perf::profileListing(amdgcn, Listing::AMDGCN);
    r.listing = "amdgcn";
    dump(r, r.listing, amdgcn);
  }
}

Row measureTessera(const std::string& name, const std::string& config, const ts::Kernel& kernel, int numWarps,
                   const std::string& targetName, int reps) {
  Row r{name, config, targetName};
  try {
    ts::Target target = ts::Target::parse(targetName);
    ts::CompileOptions o;
    o.numWarps = numWarps;
    ts::Kernel k = ts::assumeAligned(kernel);
    std::map<std::string, std::vector<double>> stages;  // per compile stage, every rep's ms
    r.compileMs = medianMs(reps, [&] {
      ts::clearCache();
      ts::CompiledKernel c = ts::compile(k, target, o);
      std::istringstream log(c.artifact().dumps.extra.at("compile-times"));
      std::string stage, unit;
      for (double ms; log >> stage >> ms >> unit;) stages[stage].push_back(ms);
    });
    for (auto& [stage, ms] : stages) {
      std::sort(ms.begin(), ms.end());
      char buf[64];
      std::snprintf(buf, sizeof buf, " %s %.2f", stage.c_str(), ms[ms.size() / 2]);
      r.stages += buf;
    }
    ts::CompiledKernel ck = ts::compile(k, target, o);
    const ts::codegen::Artifact& art = ck.artifact();
    measureArtifact(art, isNvidia(target) ? "" : ck.dump(ts::Stage::AMDGCN), int(art.binary.threadsPerBlock), r, reps);
    std::string stats = ck.dump(ts::Stage::LayoutStats);
    r.layout = ts::ir::LayoutSummary::parse(stats);
    dump(r, "layout-stats", stats);
    if (!dumpDir.empty()) {  // the tile IR with its layouts and the module given to the backend
      dump(r, "tile-ir-passes", ck.dump(ts::Stage::TileIRPasses));
      dump(r, "llvm-gpu", ck.dump(ts::Stage::LLVMGpu));
    }
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ts::UsageError("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// ------------------------------------------------------------ output

std::string pct(int64_t part, int64_t whole) {
  return whole == 0 ? "-" : std::to_string(int(std::lround(100.0 * double(part) / double(whole)))) + "%";
}

std::string jsonRow(const Row& r) {
  char buf[1024];
  const auto& l = r.layout;
  std::snprintf(
      buf, sizeof buf,
      "{\"kernel\": \"%s\", \"config\": \"%s\", \"target\": \"%s\", \"error\": \"%s\", \"regs\": %d, "
      "\"spill\": %lld, \"shared\": %lld, \"occupancy\": %d, \"contiguous\": %lld, \"coalesced\": %lld, "
      "\"vectorisable\": %lld, \"vectorised\": %lld, \"replication\": %g, \"shared_conversions\": %lld, "
      "\"reemitted\": %lld, \"loop_instrs\": %d, \"loop_issue_only\": %d, \"total_instrs\": %d, \"listing\": \"%s\", "
      "\"compile_ms\": %.3f, \"ptxas_ms\": %.3f}",
      r.name.c_str(), r.config.c_str(), r.target.c_str(), r.error.empty() ? "" : "failed", r.regs, (long long)r.spill,
      (long long)r.shared, r.occupancy, l ? (long long)l->contiguous : -1LL, l ? (long long)l->coalesced : -1LL,
      l ? (long long)l->vectorisable : -1LL, l ? (long long)l->vectorised : -1LL, l ? l->maxExcessReplication : -1.0,
      l ? (long long)l->sharedConversions : -1LL, l ? (long long)l->reemitted : -1LL, r.instrs.loopInstructions(),
      r.instrs.loopIssueOnly, r.instrs.all.total(), r.listing.c_str(), r.compileMs, r.ptxasMs);
  return buf;
}

void printRow(const Row& r) {
  if (!r.error.empty()) {
    std::printf("%-10s %-26s %-14s FAILED: %s\n", r.name.c_str(), r.config.c_str(), r.target.c_str(), r.error.c_str());
    return;
  }
  const auto& l = r.layout;
  std::string conv = l ? std::to_string(l->sharedConversions) + "+" + std::to_string(l->reemitted) : "-";
  char repl[16];
  std::snprintf(repl, sizeof repl, "%gx", l ? l->maxExcessReplication : -1.0);
  // "all/others": where one warp also issues the TMA copies, what the
  // other warps run per iteration after the slash; "main|producer": a
  // warp-specialised kernel's consumer loop and its producer warp's loop.
  std::string loop = r.instrs.hasLoop ? std::to_string(r.instrs.loop.total()) : "-";
  if (r.instrs.loopIssueOnly > 0) loop += "/" + std::to_string(r.instrs.loop.total() - r.instrs.loopIssueOnly);
  if (r.instrs.hasProducerLoop) loop += "|" + std::to_string(r.instrs.producerLoop.total());
  char ptxas[16] = "-";
  if (r.ptxasMs >= 0) std::snprintf(ptxas, sizeof ptxas, "%.1f", r.ptxasMs);
  std::printf("%-10s %-26s %-14s %4d %6lld %6lld %4d %5s %5s %5s %7s %7s %6d %8.1f %6s\n", r.name.c_str(),
              r.config.c_str(), r.target.c_str(), r.regs, (long long)r.spill, (long long)r.shared, r.occupancy,
              l ? pct(l->coalesced, l->contiguous).c_str() : "-", l ? pct(l->vectorised, l->vectorisable).c_str() : "-",
              repl, conv.c_str(), loop.c_str(), r.instrs.all.total(), r.compileMs, ptxas);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, ',');)
    if (!p.empty()) r.push_back(p);
  return r;
}

// `--measure`: one JSON row for another compiler's output.
int measureMode(char** a) {
  ts::codegen::Artifact art;
  art.target = ts::Target::parse(a[0]);
  art.binary.signature.kernelName = art.binary.symbol = a[1];
  art.binary.threadsPerBlock = unsigned(std::stoul(a[2]));
  art.binary.sharedBytes = unsigned(std::stoul(a[3]));
  std::string code = readFile(a[4]), amdgcn;
  if (isNvidia(art.target)) {
    // Both: the resources read the assembly dump, the SASS listing the PTX
    // a launch would load (without it the peer's loop was counted in PTX).
    art.dumps.assembly = art.binary.ptx = code;
  } else {
    art.binary.codeObject.assign(code.begin(), code.end());
    amdgcn = readFile(a[5]);
  }
  Row r{"", "", a[0]};
  measureArtifact(art, amdgcn, int(art.binary.threadsPerBlock), r, 3);
  std::printf("%s\n", jsonRow(r).c_str());
  return 0;
}

struct Entry {
  std::string name, config;
  /// The kernel for a target: the examples' GPU defaults differ by vendor
  /// (gemmDefaultBlocks: 2 stages on AMD).
  std::function<ts::Kernel(const ts::Target&)> kernel;
  int numWarps;
  std::function<ts::examples::CheckResult(const ts::Device&)> check;  // at a ragged shape
  std::string gpuOnly;                                                // GpuBenchKernel::gpuOnly
};

std::vector<Entry> entries() {
  std::vector<Entry> r;
  for (const auto& ex : ts::examples::all()) {
    auto k = [&ex](const ts::Target& t) { return ts::examples::kernelFor(ex, t); };
    r.push_back({ex.name, "example default w4", k, 4,
                 [&ex](const ts::Device& d) {
                   ts::examples::RunContext ctx;
                   ctx.device = d;
                   ctx.shape = ex.testShapes.back();
                   return ex.run(ctx);
                 },
                 ""});
  }
  for (const auto& k : ts::bench::gpuBenchKernels())
    r.push_back({k.name, k.config, [kernel = k.kernel](const ts::Target&) { return kernel; }, k.numWarps,
                 [k](const ts::Device& d) {
                   ts::CompileOptions o;
                   o.numWarps = k.numWarps;
                   return k.check(d, o, k.testShapes.back());
                 },
                 k.gpuOnly});
  return r;
}

}  // namespace

const ts::tools::cli::Command kProgram{
    "tessera_gpu_bench",
    "  tessera_gpu_bench [--reps N] [--only NAME] [--targets T1,T2] [--json FILE] [--dump DIR] [--stages]\n"
    "                    [--precision accurate|approx]\n"
    "  tessera_gpu_bench --measure TARGET KERNEL THREADS SHARED CODE [ASM]\n",
    {{"--reps", "a count of compiles"},
     {"--only", "a kernel NAME"},
     {"--targets", "GPU targets T1,T2,..."},
     {"--json", "a FILE for the rows as JSON"},
     {"--dump", "a DIR for the listings"},
     {"--stages"},
     {"--precision", "accurate or approx"}},
    0,
    0,
    "",
    nullptr,
    [] {
      return std::string(
          "static GPU code quality, no GPU needed: per kernel and target its registers, spills, shared\n"
          "memory, occupancy, coalescing, vector widths, layout conversions, main-loop and total\n"
          "instructions and cold compile time (bench/gpu_static_bench.cpp explains each column)\n"
          "  --reps N            compiles timed per row (default 3)\n"
          "  --only NAME         one kernel\n"
          "  --targets T1,T2     the targets (default nvptx:sm_80,nvptx:sm_90a,amdgpu:gfx942,amdgpu:gfx1100)\n"
          "  --json FILE         the rows as JSON\n"
          "  --dump DIR          the listings, layout statistics and tile IR the figures come from\n"
          "  --stages            the compile's stage times\n"
          "  --precision approx  the hardware approximations of exp, division and sqrt (as Triton's code)\n"
          "  --measure ...       another compiler's output measured the same way (bench/triton)\n");
    }};

int main(int argc, char** argv) {
  try {
    if (argc >= 7 && std::strcmp(argv[1], "--measure") == 0) return measureMode(argv + 2);
    // Compile times are cold compiles: no persistent cache (clearCache()
    // empties the in-process one before each), as Triton's cold cache dir.
    ts::DiskCacheSettings noDisk = ts::diskCacheSettings();
    noDisk.enabled = false;
    ts::setDiskCacheSettings(noDisk);
    const ts::tools::cli::Args args = ts::tools::cli::parseProgram(kProgram, argc, argv);
    const int reps = static_cast<int>(args.integer("--reps", "a count >= 1", 1, INT32_MAX).value_or(3));
    const std::string only = args.value("--only", ""), json = args.value("--json", "");
    std::vector<std::string> targets = {"nvptx:sm_80", "nvptx:sm_90a", "nvptx:sm_100a", "amdgpu:gfx942",
                                        "amdgpu:gfx1100"};
    if (std::optional<std::string> t = args.value("--targets")) targets = split(*t);
    showStages = args.has("--stages");
    if (std::optional<std::string> d = args.value("--dump")) std::filesystem::create_directories(dumpDir = *d);
    if (std::optional<std::string> p = args.value("--precision")) {
      // Triton's exp, division and sqrt are the hardware approximations:
      // the like-for-like comparison compiles Tessera's with them too.
      ts::codegen::parsePrecision(*p);  // a UsageError naming the choices
      setenv(tessera::env::name(tessera::env::Var::Precision), p->c_str(), 1);
    }
    std::printf("%-10s %-26s %-14s %4s %6s %6s %4s %5s %5s %5s %7s %7s %6s %8s %6s\n", "kernel", "config", "target",
                "regs", "spill", "smem", "occ", "coal", "vec", "repl", "conv", "loop", "total", "ms", "ptxas");
    std::vector<std::string> rows;
    for (const Entry& e : entries()) {
      if (!only.empty() && e.name != only) continue;
      for (const std::string& t : targets) {
        if (!e.gpuOnly.empty() && (" " + e.gpuOnly + " ").find(" " + t + " ") == std::string::npos)
          continue;  // made for other GPUs
        // The code measured is first checked on the emulated target (the
        // very module the GPU backend is handed).
        std::string wrong;
        try {
          ts::examples::CheckResult c = e.check(ts::Device::emulator(t));
          if (!c.ok) wrong = "wrong result on emu:" + t + ": " + c.detail;
        } catch (const std::exception& ex) {
          wrong = std::string("emu:") + t + ": " + ex.what();
        }
        Row r = wrong.empty() ? measureTessera(e.name, e.config, e.kernel(ts::Target::parse(t)), e.numWarps, t, reps)
                              : Row{e.name, e.config, t, wrong};
        printRow(r);
        if (showStages && !r.stages.empty()) std::printf("  stages (median ms):%s\n", r.stages.c_str());
        std::fflush(stdout);
        rows.push_back(jsonRow(r));
      }
    }
    if (!json.empty()) {
      std::ofstream out(json);
      out << "[\n";
      for (size_t i = 0; i < rows.size(); ++i) out << "  " << rows[i] << (i + 1 < rows.size() ? ",\n" : "\n");
      out << "]\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera_gpu_bench: %s\n", e.what());
    return 2;
  }
}

// `tessera list`, `compile`, `run`, `export` and `opt`: a bundled kernel or
// a textual IR file compiled, printed, run against its reference or
// written out ahead of time; never launched when only compiled.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "Commands.h"
#include "Opt.h"
#include "Subjects.h"
#include "registry.h"
#include "tessera/perf/Launches.h"
#include "tessera/support/Environment.h"

namespace tessera::tools {

std::optional<int> numWarpsOf(const cli::Args& a) {
  std::optional<int64_t> n = a.integer("--num-warps", "an integer (the number of warps)", INT32_MIN, INT32_MAX);
  if (!n) return {};
  return static_cast<int>(*n);
}

void applyPrecision(const cli::Args& a) {
  std::optional<std::string> p = a.value("--precision");
  if (!p) return;
  codegen::parsePrecision(*p);  // a UsageError naming the choices
  setenv(tessera::env::name(tessera::env::Var::Precision), p->c_str(), 1);
}

unsigned threadsOf(const cli::Args& a) {
  return static_cast<unsigned>(a.integer("--threads", "a thread count between 1 and 1024", 1, 1024).value_or(0));
}

uint64_t seedOf(const cli::Args& a) {
  return static_cast<uint64_t>(a.integer("--seed", "an integer seed >= 0", 0, INT64_MAX).value_or(1));
}

Device deviceFor(const std::string& target) { return perf::deviceForTarget(Target::parse(target)); }

namespace {

// Reads FILE ("-" for standard input), at most 64 MiB: a device such as
// /dev/zero, or a huge file by mistake, must not read forever or exhaust memory.
std::string readInput(const cli::Args& a, const std::string& path, const std::string& whatElse) {
  std::error_code ec;
  if (path != "-" && std::filesystem::is_directory(path, ec))
    a.fail("'" + path + "' is a directory, not a FILE.tir" + whatElse);
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) a.fail("'" + path + "' is not a readable file" + whatElse);
    in = &file;
  }
  constexpr size_t kMaxInput = size_t{64} << 20;
  std::string text;
  char chunk[1 << 16];
  while (in->read(chunk, sizeof chunk) || in->gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in->gcount()));
    if (text.size() > kMaxInput)
      a.fail("'" + path + "' is larger than 64 MiB; tile IR files are far smaller (is it the right file?)");
  }
  return text;
}

/// --cluster X[,Y[,Z]]: programs per thread-block cluster along grid axes
/// 0, 1, 2 (the ones not given are 1).
std::array<int, 3> clusterOf(const cli::Args& a) {
  std::array<int, 3> c{1, 1, 1};
  std::optional<std::string> v = a.value("--cluster");
  if (!v) return c;
  size_t at = 0;
  for (int d = 0; d < 3 && at <= v->size(); ++d) {
    const size_t comma = std::min(v->find(',', at), v->size());
    const std::string part = v->substr(at, comma - at);
    char* end = nullptr;
    const long n = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || n < 1 || n > 1024)
      a.fail("--cluster: '" + *v + "' is not a cluster shape X[,Y[,Z]] of counts between 1 and 1024");
    c[static_cast<size_t>(d)] = static_cast<int>(n);
    at = comma + 1;
  }
  if (at <= v->size()) a.fail("--cluster: '" + *v + "' has more than three dimensions");
  return c;
}

/// --num-warps, else a bundled kernel's own (Example::gpuWarps) on a GPU
/// target, else the compiler's default; --cluster.
CompileOptions optionsFor(const cli::Args& a, const Target& target) {
  CompileOptions o;
  if (std::optional<int> n = numWarpsOf(a))
    o.numWarps = *n;
  else if (const auto* ex = examples::find(a.positional(0)); ex && target.isGpu())
    o.numWarps = ex->gpuWarps;
  o.cluster = clusterOf(a);
  return o;
}

int runList(const cli::Args&) {
  for (const auto& e : examples::all()) std::cout << e.name << "\t" << e.summary << "\n";
  return 0;
}

int runCompile(const cli::Args& a) {
  Stage stage = parseStage(a.value("--emit", "tile-ir"));
  Target target = Target::parse(a.value("--target", "cpu"));
  CompileOptions o = optionsFor(a, target);
  o.checkBounds = a.has("--check-bounds");  // the code a checked launch runs
  o.profile = a.has("--profile");           // the code a profiled launch runs
  applyPrecision(a);
  Kernel kern = loadKernel(a, a.positional(0), target);
  if (a.has("--assume-aligned")) kern = assumeAligned(kern);
  CompiledKernel k = compile(kern, target, o);
  for (const std::string& w : k.warnings()) std::cerr << w << "\n";
  std::string text = k.dump(stage);
  if (std::optional<std::string> out = a.value("-o")) {
    std::ofstream f(*out, std::ios::binary);
    if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())))
      a.fail("-o: cannot write '" + *out + "'");
    return 0;
  }
  if (stage == Stage::HSACO && isatty(STDOUT_FILENO))
    a.fail("stage hsaco is a binary code object; write it with -o FILE (or redirect standard output)");
  std::cout << text;
  return 0;
}

int runExport(const cli::Args& a) {
  std::optional<std::string> dir = a.value("-o");
  if (!dir) a.fail("needs -o DIR, the directory to write the files into");
  Target target = Target::parse(a.value("--target", "cpu"));
  CompileOptions o = optionsFor(a, target);
  applyPrecision(a);
  Kernel kern = loadKernel(a, a.positional(0), target);
  if (a.has("--assume-aligned")) kern = assumeAligned(kern);
  ExportResult r = exportKernel(kern, target, *dir, o);
  for (const std::string& f : r.files) std::cout << f << "\n";
  for (const std::string& s : r.skipped) std::cerr << "tessera: note: " << s << "\n";
  return 0;
}

int runRun(const cli::Args& a) {
  const std::string name = a.positional(0);
  const auto* ex = examples::find(name);
  if (!ex) a.fail("no bundled kernel named '" + name + "' (see `tessera list`)");
  examples::RunContext ctx;
  ctx.device = deviceFor(a.value("--target", "cpu"));
  ctx.shape = a.shape("--shape").value_or(std::vector<int64_t>{});
  ctx.seed = seedOf(a);
  ctx.launch.threads = threadsOf(a);
  ctx.launch.checkBounds = a.has("--check-bounds");
  if (std::optional<std::string> v = a.value("--config")) {
    // A point of the example's tune space, its names checked as bench's.
    std::optional<perf::TuneConfig> config;
    try {
      config = perf::TuneConfig::parse(*v);
    } catch (const UsageError& e) {
      a.fail(std::string("--config: ") + e.what());
    }
    const examples::RunContext c = contextFor(a, Subject{ex, ctx.shape, ""}, ctx.device, config);
    ctx.config = c.config;
    ctx.options = c.options;
  }
  // A profiled launch (the last one, where the kernel launches several
  // times): its trace to the file, its summary to stderr.
  rt::Profile profile;
  const std::optional<std::string> trace = a.value("--trace");
  if (trace) ctx.launch.profile = &profile;
  applyPrecision(a);
  const auto start = std::chrono::steady_clock::now();
  examples::CheckResult r = ex->run(ctx);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& w : r.warnings) std::cerr << w << "\n";
  if (trace) {
    if (profile.kernel.empty()) a.fail("--trace: " + name + " launched no profiled kernel");
    profile.writeChromeTrace(*trace);
    std::cerr << profile.summary() << "trace: " << *trace << "\n";
  }
  // The bound is per element (it scales with what each element sums), so
  // the verdict line gives the errors, and the lines after it the bound's
  // form and how close the worst element came to its own bound.
  std::cout << ex->name << " on " << ctx.device.name() << ": max abs error " << r.maxAbsError << ", max rel error "
            << r.maxRelError << " -> " << (r.ok ? "OK" : "MISMATCH") << "\n";
  if (std::string s = r.summary(); !s.empty()) std::cout << s << "\n";
  if (!r.detail.empty()) std::cout << r.detail << "\n";
  // Compile (or cache lookup), upload, launch, read back and the reference.
  std::cerr << "time: " << secs << " s\n";
  return r.ok ? 0 : 1;
}

int runOptCommand(const cli::Args& a) {
  OptRequest r;
  const std::string file = a.positional(0);
  r.text = readInput(a, file, "");
  r.bufferName = file == "-" ? "<stdin>" : file;
  for (const std::string& list : a.values("--passes")) {
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      std::string part = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (!part.empty()) r.passes.push_back(part);
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  if (std::string t = a.value("--target", "cpu"); t != "cpu") r.target = t;
  if (std::optional<int> n = numWarpsOf(a)) r.numWarps = *n;
  r.splitInputFile = a.has("--split-input-file");
  r.locations = a.has("--locations");
  return runOpt(r, std::cout, std::cerr);
}

}  // namespace

Kernel loadKernel(const cli::Args& a, const std::string& subject, const Target& target) {
  if (const auto* ex = examples::find(subject)) return examples::kernelFor(*ex, target);
  std::string names;
  for (const auto& e : examples::all()) names += " " + e.name;
  std::string text = readInput(a, subject, " (nor a bundled kernel: " + names.substr(1) + ")");
  std::optional<std::string> kernelName = a.value("--kernel");
  return parseKernel(text, subject == "-" ? "<stdin>" : subject, kernelName.value_or(""));
}

cli::Command listCommand() { return {"list", "  tessera list\n", {}, 0, 0, "", runList, generalHelp}; }

cli::Command compileCommand() {
  return {"compile",
          "  tessera compile KERNEL|FILE.tir|- [--target T] [--emit STAGE] [--kernel NAME] [-o FILE]\n"
          "                  [--assume-aligned] [--num-warps N] [--cluster X[,Y[,Z]]] [--precision accurate|approx]\n"
          "                  [--check-bounds] [--profile]\n",
          {kTargetOpt,
           {"--emit", "a STAGE (`tessera help compile` lists them)"},
           kKernelOpt,
           {"-o", "a FILE"},
           kAssumeAlignedOpt,
           kNumWarpsOpt,
           kClusterOpt,
           kPrecisionOpt,
           kCheckBoundsOpt,
           {"--profile"}},
          1,
          1,
          "a KERNEL name or a FILE.tir",
          runCompile,
          generalHelp};
}

cli::Command runCommand() {
  return {"run",
          "  tessera run KERNEL [--target T] [--shape A,B,...] [--threads N] [--seed S] [--check-bounds]\n"
          "                  [--precision accurate|approx] [--config K=V,...] [--trace FILE]\n",
          {kTargetOpt,
           kShapeOpt,
           kThreadsOpt,
           kSeedOpt,
           kCheckBoundsOpt,
           kPrecisionOpt,
           {"--config", "a config K=V,... of the example's tune space (BLOCK_M=128,WARP_SPECIALIZE=1)"},
           {"--trace", "a FILE to write the trace of a profiled launch to"}},
          1,
          1,
          "a KERNEL name (`tessera list`)",
          runRun,
          generalHelp};
}

cli::Command exportCommand() {
  return {"export",
          "  tessera export KERNEL|FILE.tir --target T -o DIR [--kernel NAME] [--num-warps N]\n"
          "                  [--cluster X[,Y[,Z]]] [--assume-aligned] [--precision accurate|approx]\n",
          {kTargetOpt,
           {"-o", "a DIR to write the files into"},
           kKernelOpt,
           kNumWarpsOpt,
           kClusterOpt,
           kAssumeAlignedOpt,
           kPrecisionOpt},
          1,
          1,
          "a KERNEL name or a FILE.tir",
          runExport,
          generalHelp};
}

cli::Command optCommand() {
  return {"opt",
          "  tessera opt FILE.tir|- [--passes P1,P2,...] [--target T] [--num-warps N] [--split-input-file]\n"
          "                  [--locations]\n",
          {{"--passes", "pass names P1,P2,..."}, kTargetOpt, kNumWarpsOpt, {"--split-input-file"}, {"--locations"}},
          1,
          1,
          "a FILE.tir (or - for standard input)",
          runOptCommand,
          generalHelp};
}

}  // namespace tessera::tools

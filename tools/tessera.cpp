// tessera: the command-line tool (`tessera help` lists the commands).
//
// `compile` prints one stage of a bundled kernel or of a textual IR file and
// never launches anything. `run` runs a bundled kernel on generated inputs
// on the target's device (the CPU, the SIMT emulator for emu: targets, the
// CUDA / HIP GPU for nvptx: / amdgpu: targets), checks it against its plain
// C++ reference, prints the largest error and exits 1 on a mismatch. `export`
// writes a kernel's compiled code and a launcher header (docs/aot.md). `opt`
// runs named passes on a .tir file. `cache` shows, explains and clears the
// persistent compile cache (docs/cache.md). `bench` times kernels and `sol`
// gives their speed of light (tools/Perf.cpp; docs/bench.md, docs/sol.md); `tune`
// searches a kernel's config space (tools/Tune.cpp; docs/tune.md).
// Exit codes: 0 success, 1 mismatch (or a benchmark regression), 2 a user
// error (one message), 3 an internal compiler error.
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "Opt.h"
#include "Perf.h"
#include "Tune.h"
#include "registry.h"
#include "tessera/ir/Pass.h"
#include "tessera/support/Targets.h"
#include "tessera/tessera.h"
#include "tessera/support/Environment.h"

namespace ts = tessera;

namespace {

std::string passList() {
  std::string r;
  for (const std::string& p : ts::ir::passNames()) r += (r.empty() ? "" : ", ") + p;
  return r;
}

// What each command takes: `tessera help COMMAND`, `COMMAND --help` and the
// full usage text are all made from this one table.
struct CommandHelp {
  const char* name;
  const char* synopsis;
  std::string (*options)() = nullptr;  // the command's own options, where it has them
  /// The flags the command takes (parsed by parseArgs), space-separated;
  /// any other flag is refused with these named. --help is always taken.
  const char* flags = "";
};
const CommandHelp kCommands[] = {
    {"list", "  tessera list\n"},
    {"compile",
     "  tessera compile KERNEL|FILE.tir|- [--target T] [--emit STAGE] [--kernel NAME] [-o FILE]\n"
     "                  [--assume-aligned] [--num-warps N] [--precision accurate|approx]\n",
     nullptr, "--target --emit --kernel -o --assume-aligned --num-warps --precision"},
    {"run",
     "  tessera run KERNEL [--target T] [--shape A,B,...] [--threads N] [--seed S] [--check-bounds]\n"
     "                  [--precision accurate|approx]\n",
     nullptr, "--target --shape --threads --seed --check-bounds --precision"},
    {"export",
     "  tessera export KERNEL|FILE.tir --target T -o DIR [--kernel NAME] [--num-warps N]\n"
     "                  [--assume-aligned] [--precision accurate|approx]\n",
     nullptr, "--target -o --kernel --num-warps --assume-aligned --precision"},
    {"opt",
     "  tessera opt FILE.tir|- [--passes P1,P2,...] [--target T] [--num-warps N] [--split-input-file]\n"
     "                  [--locations]\n",
     nullptr, "--passes --target --num-warps --split-input-file --locations"},
    {"cache",
     "  tessera cache stats [--entries] [--json] [--dir DIR]\n"
     "  tessera cache explain KERNEL|FILE.tir [--target T] [--kernel NAME] [--num-warps N]\n"
     "                  [--precision accurate|approx] [--check-bounds] [--assume-aligned] [--dir DIR]\n"
     "  tessera cache clear [--dir DIR]\n"},
    {"bench", ts::tools::kBenchSynopsis, ts::tools::benchOptionsHelp},
    {"sol", ts::tools::kSolSynopsis, ts::tools::solOptionsHelp},
    {"tune", ts::tools::kTuneSynopsis, ts::tools::tuneOptionsHelp},
    {"version", "  tessera --version | version\n"},
    {"help", "  tessera help [COMMAND] | COMMAND --help\n"},
};

// The options' explanations; GPU architectures come from Targets.def, passes
// from Passes.def.
std::string details() {
  return std::string(
             "targets: cpu (default: the host), cpu:CPU (an LLVM cpu: x86-64-v3 = AVX2, x86-64-v4 = AVX-512,\n"
             "         znver4, ...); nvptx:") +
         ts::gpuArchList(ts::GpuArch::Vendor::NVIDIA) + ", amdgpu:" + ts::gpuArchList(ts::GpuArch::Vendor::AMD) +
         ",\n" +
         "         emu:nvptx:SM, emu:amdgpu:GFX\n"
         "passes:  " +
         passList() + ", layout (needs --target)\n" +
         "stages:  tile-ir, tile-ir-passes, llvm, llvm-opt, asm, ptx, sass, amdgcn, hsaco, llvm-gpu,\n"
         "         resources, layout-stats (GPU: per global access its vector width, coalescing and\n"
         "         replication; layout conversions; docs/gpu.md)\n"
         "-o FILE: write the stage to FILE instead of standard output (binary stages such as hsaco\n"
         "         are refused on a terminal without it)\n"
         "export:  writes DIR/KERNEL.h (a typed launcher needing only libtessera_runtime) and the\n"
         "         code: KERNEL.o for cpu targets, KERNEL.ptx (+ .cubin where ptxas is found) for\n"
         "         nvptx, KERNEL.hsaco for amdgpu; prints the files written (docs/aot.md)\n"
         "--check-bounds: a checked launch: every global access is tested against its buffer\n"
         "         (CPU: a bounds-checked compile; the emulator always checks)\n"
         "--precision approx: the GPU's hardware approximations (ex2.approx, rsqrt.approx,\n"
         "         div.full, v_exp_f32, v_rcp_f32, ...) and FMA contraction instead of accurate\n"
         "         math (docs/math.md gives the errors)\n"
         "--assume-aligned: compile as a launch with 16-byte aligned buffers and integer\n"
         "         arguments that are multiples of 16 would (the launch-time specialisation\n"
         "         GPU devices make: {divisibility = 16} on every pointer and integer argument)\n"
         "cache:   compiled kernels are kept on disk between runs (`tessera help cache`)\n"
         "environment: TESSERA_DUMP_DIR=<dir> writes every stage of every compile;\n"
         "             TESSERA_CACHE=0 turns the compile cache off, TESSERA_CACHE_DIR=<dir> moves it;\n"
         "             TESSERA_NUM_THREADS=<n> sets the CPU worker threads;\n"
         "             TESSERA_CHECK_BOUNDS=1 makes every CPU launch a checked one;\n"
         "             TESSERA_PRECISION=approx|accurate sets every compile's precision;\n"
         "             TESSERA_HOST_CPU=<cpu> narrows the host to an LLVM cpu's features\n"
         "exit codes: 0 success; 1 `run` found a result outside its tolerance (`cache explain`: not\n"
         "            cached); 2 a usage, compile or device error (one message on standard error);\n"
         "            3 an internal compiler error\n";
}

std::string usage() {
  std::string r = "usage:\n";
  for (const CommandHelp& c : kCommands) r += c.synopsis;
  return r + details() +
         "bench, sol, tune: `tessera help bench`, `tessera help sol`, `tessera help tune` give their options\n";
}

std::string cacheHelp();

/// `tessera help COMMAND`: its synopsis and the option details; "" for an
/// unknown command.
std::string commandHelp(const std::string& name) {
  if (name == "cache") return cacheHelp();
  for (const CommandHelp& c : kCommands)
    if (name == c.name) return std::string("usage:\n") + c.synopsis + (c.options ? c.options() : "") + details();
  return {};
}

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string command, subject, target = "cpu", emit = "tile-ir", kernelName;
  std::vector<int64_t> shape;
  unsigned threads = 0;
  uint64_t seed = 1;
  bool assumeAligned = false;
  std::optional<int> numWarps;  // unset: the compiler's default
  bool checkBounds = false;
  std::optional<std::string> precision;  // unset: accurate, or TESSERA_PRECISION
  std::vector<std::string> passes;
  bool splitInputFile = false, locations = false;
  std::string output;  // -o FILE
  bool help = false;   // COMMAND --help
};

int64_t parseInt(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0) throw UsageError(flag + ": '" + s + "' is not an integer");
  return v;
}

/// Refuses a flag `command` does not take (an unchecked export, a run with
/// a stage to emit, ... would otherwise go ahead as if it had been used).
void checkTakes(const std::string& command, const std::string& flag) {
  if (flag == "--help" || flag == "-h") return;
  for (const CommandHelp& c : kCommands) {
    if (command != c.name) continue;
    std::stringstream ss(c.flags);
    std::string f, list;
    while (ss >> f) {
      if (f == flag) return;
      list += (list.empty() ? "" : ", ") + f;
    }
    bool elsewhere = false;  // a flag of another command, or none at all
    for (const CommandHelp& o : kCommands) {
      std::stringstream os(o.flags);
      while (os >> f) elsewhere = elsewhere || f == flag;
    }
    const std::string takes = list.empty() ? "it takes no options" : "it takes " + list;
    throw UsageError(elsewhere ? command + " does not take " + flag + " (" + takes + ")"
                               : "unknown option " + flag + " (" + command + ": " + takes + ")");
  }
  // An unknown command: reported as such once the arguments are read.
}

Args parseArgs(int argc, char** argv) {
  Args a;
  if (argc < 2) throw UsageError("missing command");
  a.command = argv[1];
  bool known = a.command == "--version" || a.command == "--help" || a.command == "-h";
  for (const CommandHelp& c : kCommands) known = known || a.command == c.name;
  if (!known) throw UsageError("unknown command '" + a.command + "'");
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    std::optional<std::string> inlineValue;  // --flag=value
    if (s.rfind("--", 0) == 0 && s.find('=') != std::string::npos) {
      inlineValue = s.substr(s.find('=') + 1);
      s = s.substr(0, s.find('='));
    }
    // "-" is standard input (compile -, opt -), not a flag.
    if (s != "-" && !s.empty() && s[0] == '-' && a.command != "help") checkTakes(a.command, s);
    auto value = [&]() -> std::string {
      if (inlineValue) return *inlineValue;
      if (i + 1 >= argc) throw UsageError(s + " needs a value");
      return argv[++i];
    };
    if (s == "--help" || s == "-h")
      a.help = true;
    else if (s == "-o") {
      if (i + 1 >= argc) throw UsageError("-o needs a FILE");
      a.output = argv[++i];
    } else if (s == "--target")
      a.target = value();
    else if (s == "--emit")
      a.emit = value();
    else if (s == "--kernel")
      a.kernelName = value();
    else if (s == "--assume-aligned")
      a.assumeAligned = true;
    else if (s == "--check-bounds")
      a.checkBounds = true;
    else if (s == "--precision") {
      a.precision = value();
      ts::codegen::parsePrecision(*a.precision);  // a UsageError naming the choices
    } else if (s == "--split-input-file")
      a.splitInputFile = true;
    else if (s == "--locations")
      a.locations = true;
    else if (s == "--passes") {
      std::stringstream ss(value());
      std::string part;
      while (std::getline(ss, part, ','))
        if (!part.empty()) a.passes.push_back(part);
    } else if (s == "--num-warps") {
      int64_t n = parseInt(s, value());
      // The target's limits are the compiler's to check (a CompileError
      // naming the values that work there); here only that it is an int.
      if (n < INT32_MIN || n > INT32_MAX) throw UsageError("--num-warps: " + std::to_string(n) + " is out of range");
      a.numWarps = static_cast<int>(n);
    } else if (s == "--threads") {
      int64_t n = parseInt(s, value());
      if (n < 1 || n > 1024) throw UsageError("--threads must be between 1 and 1024");
      a.threads = static_cast<unsigned>(n);
    } else if (s == "--seed")
      a.seed = static_cast<uint64_t>(parseInt(s, value()));
    else if (s == "--shape") {
      std::stringstream ss(value());
      std::string part;
      while (std::getline(ss, part, ',')) {
        // Non-negative: a shape component may be a selector (the GEMMs'
        // activation, 0 = none); each example checks its own shape.
        int64_t d = parseInt("--shape", part);
        if (d < 0) throw UsageError("--shape: components must not be negative");
        a.shape.push_back(d);
      }
    } else if (s != "-" && !s.empty() && s[0] == '-')
      throw UsageError("unknown option " + s);
    else if (a.subject.empty())
      a.subject = s;
    else
      throw UsageError("unexpected argument '" + s + "'");
  }
  return a;
}

// Reads FILE ("-" for standard input), at most 64 MiB: a device such as
// /dev/zero, or a huge file by mistake, must not read forever or exhaust memory.
std::string readInput(const std::string& path, const std::string& whatElse) {
  std::error_code ec;
  if (path != "-" && std::filesystem::is_directory(path, ec))
    throw UsageError("'" + path + "' is a directory, not a FILE.tir" + whatElse);
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) throw UsageError("'" + path + "' is not a readable file" + whatElse);
    in = &file;
  }
  constexpr size_t kMaxInput = size_t{64} << 20;
  std::string text;
  char chunk[1 << 16];
  while (in->read(chunk, sizeof chunk) || in->gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in->gcount()));
    if (text.size() > kMaxInput)
      throw UsageError("'" + path + "' is larger than 64 MiB; tile IR files are far smaller (is it the right file?)");
  }
  return text;
}

ts::Kernel loadKernel(const Args& a, const ts::Target& target) {
  if (a.subject.empty()) throw UsageError("compile needs a KERNEL name or a FILE.tir");
  if (const auto* ex = ts::examples::find(a.subject)) return ts::examples::kernelFor(*ex, target);
  std::string names;
  for (const auto& e : ts::examples::all()) names += " " + e.name;
  std::string text = readInput(a.subject, " (nor a bundled kernel: " + names.substr(1) + ")");
  return ts::parseKernel(text, a.subject == "-" ? "<stdin>" : a.subject, a.kernelName);
}

/// --num-warps, else a bundled kernel's own (Example::gpuWarps) on a GPU
/// target, else the compiler's default.
ts::CompileOptions optionsFor(const Args& a, const ts::Target& target) {
  ts::CompileOptions o;
  if (a.numWarps)
    o.numWarps = *a.numWarps;
  else if (const auto* ex = ts::examples::find(a.subject); ex && target.isGpu())
    o.numWarps = ex->gpuWarps;
  return o;
}

int cmdOpt(const Args& a) {
  if (a.subject.empty()) throw UsageError("opt needs a FILE.tir (or - for standard input)");
  ts::tools::OptRequest r;
  r.text = readInput(a.subject, "");
  r.bufferName = a.subject == "-" ? "<stdin>" : a.subject;
  r.passes = a.passes;
  if (a.target != "cpu") r.target = a.target;
  if (a.numWarps) r.numWarps = *a.numWarps;
  r.splitInputFile = a.splitInputFile;
  r.locations = a.locations;
  return ts::tools::runOpt(r, std::cout, std::cerr);
}

int cmdList() {
  for (const auto& e : ts::examples::all()) std::cout << e.name << "\t" << e.summary << "\n";
  return 0;
}

int cmdCompile(const Args& a) {
  ts::Stage stage = ts::parseStage(a.emit);
  ts::Target target = ts::Target::parse(a.target);
  ts::CompileOptions o = optionsFor(a, target);
  if (a.precision) setenv(tessera::env::name(tessera::env::Var::Precision), a.precision->c_str(), 1);
  ts::Kernel kern = loadKernel(a, target);
  if (a.assumeAligned) kern = ts::assumeAligned(kern);
  ts::CompiledKernel k = ts::compile(kern, target, o);
  for (const std::string& w : k.warnings()) std::cerr << w << "\n";
  std::string text = k.dump(stage);
  if (!a.output.empty()) {
    std::ofstream out(a.output, std::ios::binary);
    if (!out || !out.write(text.data(), static_cast<std::streamsize>(text.size())))
      throw UsageError("-o: cannot write '" + a.output + "'");
    return 0;
  }
  if (stage == ts::Stage::HSACO && isatty(STDOUT_FILENO))
    throw UsageError("stage hsaco is a binary code object; write it with -o FILE (or redirect standard output)");
  std::cout << text;
  return 0;
}

int cmdExport(const Args& a) {
  if (a.subject.empty()) throw UsageError("export needs a KERNEL name or a FILE.tir");
  if (a.output.empty()) throw UsageError("export needs -o DIR, the directory to write the files into");
  ts::Target target = ts::Target::parse(a.target);
  ts::CompileOptions o = optionsFor(a, target);
  if (a.precision) setenv(tessera::env::name(tessera::env::Var::Precision), a.precision->c_str(), 1);
  ts::Kernel kern = loadKernel(a, target);
  if (a.assumeAligned) kern = assumeAligned(kern);
  ts::ExportResult r = ts::exportKernel(kern, target, a.output, o);
  for (const std::string& f : r.files) std::cout << f << "\n";
  for (const std::string& s : r.skipped) std::cerr << "tessera: note: " << s << "\n";
  return 0;
}

int cmdRun(const Args& a) {
  if (a.subject.empty()) throw UsageError("run needs a KERNEL name");
  const auto* ex = ts::examples::find(a.subject);
  if (!ex) throw UsageError("no bundled kernel named '" + a.subject + "' (see `tessera list`)");
  ts::Target target = ts::Target::parse(a.target);
  ts::examples::RunContext ctx;
  ctx.device = ts::tools::deviceForTarget(target);
  ctx.shape = a.shape;
  ctx.seed = a.seed;
  ctx.launch.threads = a.threads;
  ctx.launch.checkBounds = a.checkBounds;
  if (a.precision) setenv(tessera::env::name(tessera::env::Var::Precision), a.precision->c_str(), 1);
  const auto start = std::chrono::steady_clock::now();
  ts::examples::CheckResult r = ex->run(ctx);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

// ---- tessera cache -----------------------------------------------------------

std::string cacheHelp() {
  for (const CommandHelp& c : kCommands)
    if (std::string(c.name) == "cache")
      return std::string("usage:\n") + c.synopsis +
             "stats:   the cache folder, how many kernels it keeps and their size against the limit;\n"
             "         --entries adds one line per entry (kernel, target, size, last use), --json prints\n"
             "         it all as JSON\n"
             "explain: whether `tessera compile KERNEL` with these options would load the kernel from\n"
             "         the cache, and if not, which parts of its key differ from the nearest entry (the\n"
             "         same kernel, fewest differences): ir (the first line that changed), target,\n"
             "         host-cpu, cpu-features, options (each field), tessera (the build), llvm.\n"
             "         Exit code 0 when cached, 1 when it would compile\n"
             "clear:   removes every entry and leftover temporary file\n"
             "--dir DIR: this folder instead of the one in force\n"
             "environment: TESSERA_CACHE=0 turns the cache off; TESSERA_CACHE_DIR=<dir> (default\n"
             "         $XDG_CACHE_HOME/tessera, else ~/.cache/tessera); TESSERA_CACHE_MAX_SIZE=<bytes>\n"
             "         with K, M or G (default 1G; least recently used entries are evicted);\n"
             "         TESSERA_CACHE_LOG=1 prints every lookup, and for a miss what differed\n"
             "exit codes: 0 success; 1 `explain`: not cached; 2 a usage error (docs/cache.md)\n";
  return {};
}

std::string jsonString(const std::string& s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      r += std::string("\\") + char(c);
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      r += buf;
    } else
      r += char(c);
  }
  return r + "\"";
}

std::string partOf(const ts::CacheEntry& e, const std::string& name) {
  for (const auto& p : e.parts)
    if (p.name == name) return p.value;
  return "";
}

std::string isoTime(int64_t ns) {
  std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

struct CacheArgs {
  std::string sub, subject, target = "cpu", kernelName, dir, precision;
  std::optional<int> numWarps;
  bool json = false, entries = false, help = false, checkBounds = false, assumeAligned = false;
};

CacheArgs parseCacheArgs(int argc, char** argv) {
  CacheArgs c;
  const std::string subs = "stats, explain or clear";
  int i = 2;
  if (i < argc && std::string(argv[i]).rfind("-", 0) != 0) c.sub = argv[i++];
  if (!c.sub.empty() && c.sub != "stats" && c.sub != "explain" && c.sub != "clear")
    throw UsageError("cache: unknown subcommand '" + c.sub + "' (expected " + subs + ")");
  // The flags each subcommand takes, for the message about one it does not.
  const std::string takes = c.sub == "stats"     ? "--entries, --json or --dir DIR"
                            : c.sub == "explain" ? "--target T, --kernel NAME, --num-warps N, --precision "
                                                   "accurate|approx, --check-bounds, --assume-aligned or --dir DIR"
                            : c.sub == "clear"   ? "--dir DIR"
                                                 : "--help";
  for (; i < argc; ++i) {
    std::string s = argv[i];
    std::optional<std::string> inlineValue;
    if (s.rfind("--", 0) == 0 && s.find('=') != std::string::npos) {
      inlineValue = s.substr(s.find('=') + 1);
      s = s.substr(0, s.find('='));
    }
    auto value = [&](const char* what) -> std::string {
      if (inlineValue) return *inlineValue;
      if (i + 1 >= argc) throw UsageError("cache " + c.sub + ": " + s + " needs " + what);
      return argv[++i];
    };
    auto only = [&](std::initializer_list<const char*> subsTaking) {
      for (const char* t : subsTaking)
        if (c.sub == t) return;
      throw UsageError("cache " + c.sub + ": unknown option " + s + " (expected " + takes + ")");
    };
    if (s == "--help" || s == "-h")
      c.help = true;
    else if (s == "--dir") {
      c.dir = value("a folder");
      if (c.dir.empty()) throw UsageError("cache " + c.sub + ": --dir needs a folder, not an empty string");
    } else if (s == "--json") {
      only({"stats"});
      c.json = true;
    } else if (s == "--entries") {
      only({"stats"});
      c.entries = true;
    } else if (s == "--target") {
      only({"explain"});
      c.target = value("a target (cpu, cpu:CPU, nvptx:SM, amdgpu:GFX)");
    } else if (s == "--kernel") {
      only({"explain"});
      c.kernelName = value("a kernel NAME");
    } else if (s == "--num-warps") {
      only({"explain"});
      int64_t n = parseInt(s, value("a number of warps"));
      if (n < INT32_MIN || n > INT32_MAX) throw UsageError("--num-warps: " + std::to_string(n) + " is out of range");
      c.numWarps = static_cast<int>(n);
    } else if (s == "--precision") {
      only({"explain"});
      c.precision = value("accurate or approx");
      ts::codegen::parsePrecision(c.precision);
    } else if (s == "--check-bounds") {
      only({"explain"});
      c.checkBounds = true;
    } else if (s == "--assume-aligned") {
      only({"explain"});
      c.assumeAligned = true;
    } else if (!s.empty() && s[0] == '-') {
      throw UsageError("cache" + (c.sub.empty() ? std::string() : " " + c.sub) + ": unknown option " + s +
                       " (expected " + takes + ")");
    } else if (c.sub == "explain" && c.subject.empty()) {
      c.subject = s;
    } else {
      throw UsageError("cache " + c.sub + ": unexpected argument '" + s + "'" +
                       (c.sub == "explain" ? " (explain takes one KERNEL or FILE.tir)" : " (it takes none)"));
    }
  }
  if (c.help) return c;
  if (c.sub.empty()) throw UsageError("cache needs a subcommand: " + subs);
  if (c.sub == "explain" && c.subject.empty())
    throw UsageError("cache explain needs a KERNEL name or a FILE.tir (the kernel to explain)");
  return c;
}

int cmdCache(int argc, char** argv) {
  CacheArgs c = parseCacheArgs(argc, argv);
  if (c.help) {
    std::cout << cacheHelp();
    return 0;
  }
  if (!c.dir.empty()) {
    ts::DiskCacheSettings s = ts::diskCacheSettings();
    s.dir = c.dir;
    s.enabled = true;
    s.origin = "--dir";
    ts::setDiskCacheSettings(s);
  }
  if (c.sub == "clear") {
    ts::DiskCacheSettings s = ts::diskCacheSettings();
    if (s.dir.empty()) throw UsageError("cache clear: no cache folder (" + s.origin + ")");
    uint64_t n = ts::clearDiskCache();
    std::cout << "removed " << n << " entr" << (n == 1 ? "y" : "ies") << " from " << s.dir << "\n";
    return 0;
  }
  if (c.sub == "stats") {
    ts::DiskCacheStats st = ts::diskCacheStats();
    std::vector<ts::CacheEntry> entries;
    if (c.entries || c.json) entries = ts::diskCacheEntries();
    if (c.json) {
      std::cout << "{\"dir\": " << jsonString(st.settings.dir) << ", \"origin\": " << jsonString(st.settings.origin)
                << ", \"enabled\": " << (st.settings.enabled ? "true" : "false")
                << ", \"exists\": " << (st.exists ? "true" : "false") << ", \"entries\": " << st.entries
                << ", \"bytes\": " << st.bytes << ", \"max_bytes\": " << st.settings.maxBytes
                << ", \"temp_files\": " << st.tempFiles << ",\n \"list\": [";
      for (size_t i = 0; i < entries.size(); ++i) {
        const auto& e = entries[i];
        std::cout << (i ? ",\n  " : "\n  ") << "{\"hash\": " << jsonString(e.hash)
                  << ", \"kernel\": " << jsonString(partOf(e, "kernel"))
                  << ", \"target\": " << jsonString(partOf(e, "target"))
                  << ", \"options\": " << jsonString(partOf(e, "options")) << ", \"bytes\": " << e.bytes
                  << ", \"last_used_ns\": " << e.mtimeNs << ", \"valid\": " << (e.valid ? "true" : "false")
                  << ", \"problem\": " << jsonString(e.problem) << "}";
      }
      std::cout << "]}\n";
      return 0;
    }
    std::cout << st.str();
    for (const auto& e : entries) {
      if (e.valid)
        std::cout << "  " << e.hash.substr(0, 16) << "  " << partOf(e, "kernel") << "  " << partOf(e, "target") << "  "
                  << partOf(e, "options") << "  " << e.bytes << " B  " << isoTime(e.mtimeNs) << "\n";
      else
        std::cout << "  " << e.hash.substr(0, 16) << "  (bad: " << e.problem << ")  " << e.bytes << " B\n";
    }
    return 0;
  }
  // explain
  ts::Target target = ts::Target::parse(c.target);
  ts::CompileOptions o;
  if (c.numWarps) o.numWarps = *c.numWarps;
  o.checkBounds = c.checkBounds;
  if (!c.precision.empty()) setenv(tessera::env::name(tessera::env::Var::Precision), c.precision.c_str(), 1);
  Args a;
  a.subject = c.subject;
  a.kernelName = c.kernelName;
  ts::Kernel kern = loadKernel(a, target);
  if (c.assumeAligned) kern = ts::assumeAligned(kern);
  ts::CacheExplanation x = ts::explainCompile(kern, target, o);
  std::cout << x.str();
  return x.cached ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && std::string(argv[1]) == "cache") {
      try {
        return cmdCache(argc, argv);
      } catch (const UsageError& e) {
        std::cerr << "tessera: " << e.what() << "\n" << cacheHelp();
        return 2;
      }
    }
    // bench and sol parse their own options (tools/Perf.cpp).
    if (argc >= 2 && (std::string(argv[1]) == "bench" || std::string(argv[1]) == "sol")) {
      std::vector<std::string> rest(argv + 2, argv + argc);
      return std::string(argv[1]) == "bench" ? ts::tools::runBench(rest, std::cout, std::cerr)
                                             : ts::tools::runSol(rest, std::cout, std::cerr);
    }
    // tune too (tools/Tune.cpp).
    if (argc >= 2 && std::string(argv[1]) == "tune")
      return ts::tools::runTune(std::vector<std::string>(argv + 2, argv + argc), std::cout, std::cerr);
    Args a = parseArgs(argc, argv);
    if (a.command == "--version" || a.command == "version") {
      std::cout << "tessera " << TESSERA_VERSION << "\n" << ts::codegen::toolchainVersions();
      return 0;
    }
    if (a.command == "help" || a.command == "--help" || a.command == "-h" || a.help) {
      std::string topic = a.command == "help" || a.command == "--help" || a.command == "-h" ? a.subject : a.command;
      if (topic.empty()) {
        std::cout << usage();
        return 0;
      }
      std::string h = commandHelp(topic);
      if (h.empty()) throw UsageError("no command named '" + topic + "'");
      std::cout << h;
      return 0;
    }
    if (a.command == "list") return cmdList();
    if (a.command == "compile") return cmdCompile(a);
    if (a.command == "run") return cmdRun(a);
    if (a.command == "opt") return cmdOpt(a);
    if (a.command == "export") return cmdExport(a);
    throw UsageError("unknown command '" + a.command + "'");
  } catch (const UsageError& e) {
    std::cerr << "tessera: " << e.what() << "\n" << usage();
    return 2;
  } catch (const ts::tools::CommandLineError& e) {
    std::cerr << "tessera: " << e.command << ": " << e.what() << "\nusage:\n"
              << (e.command == "bench"  ? ts::tools::kBenchSynopsis
                  : e.command == "tune" ? ts::tools::kTuneSynopsis
                                        : ts::tools::kSolSynopsis)
              << "(`tessera help " << e.command << "` explains the options)\n";
    return 2;
  } catch (const ts::InternalError& e) {
    std::cerr << "tessera: " << e.what() << "\n";
    return 3;
  } catch (const ts::Error& e) {
    std::cerr << "tessera: error: " << e.what() << "\n";
    return 2;
  }
}

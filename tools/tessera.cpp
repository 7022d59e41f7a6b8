// tessera: the command-line tool (`tessera help` lists the commands).
//
// `compile` prints one stage of a bundled kernel or of a textual IR file and
// never launches anything. `run` runs a bundled kernel on generated inputs
// on the target's device (the CPU, the SIMT emulator for emu: targets, the
// CUDA / HIP GPU for nvptx: / amdgpu: targets), checks it against its plain
// C++ reference, prints the largest error and exits 1 on a mismatch. `export`
// writes a kernel's compiled code and a launcher header (docs/aot.md). `opt`
// runs named passes on a .tir file. Exit codes: 0 success, 1 mismatch, 2 a
// user error (one message), 3 an internal compiler error.
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "Opt.h"
#include "registry.h"
#include "tessera/ir/Pass.h"
#include "tessera/support/Targets.h"
#include "tessera/tessera.h"

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
};
constexpr CommandHelp kCommands[] = {
    {"list", "  tessera list\n"},
    {"compile",
     "  tessera compile KERNEL|FILE.tir|- [--target T] [--emit STAGE] [--kernel NAME] [-o FILE]\n"
     "                  [--assume-aligned] [--num-warps N] [--precision accurate|approx]\n"},
    {"run",
     "  tessera run KERNEL [--target T] [--shape A,B,...] [--threads N] [--seed S] [--check-bounds]\n"
     "                  [--precision accurate|approx]\n"},
    {"export",
     "  tessera export KERNEL|FILE.tir --target T -o DIR [--kernel NAME] [--num-warps N]\n"
     "                  [--assume-aligned] [--precision accurate|approx]\n"},
    {"opt",
     "  tessera opt FILE.tir|- [--passes P1,P2,...] [--target T] [--num-warps N] [--split-input-file]\n"
     "                  [--locations]\n"},
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
         "environment: TESSERA_DUMP_DIR=<dir> writes every stage of every compile;\n"
         "             TESSERA_NUM_THREADS=<n> sets the CPU worker threads;\n"
         "             TESSERA_CHECK_BOUNDS=1 makes every CPU launch a checked one;\n"
         "             TESSERA_PRECISION=approx|accurate sets every compile's precision;\n"
         "             TESSERA_HOST_CPU=<cpu> narrows the host to an LLVM cpu's features\n"
         "exit codes: 0 success; 1 `run` found a result outside its tolerance; 2 a usage, compile or\n"
         "            device error (one message on standard error); 3 an internal compiler error\n";
}

std::string usage() {
  std::string r = "usage:\n";
  for (const CommandHelp& c : kCommands) r += c.synopsis;
  return r + details();
}

/// `tessera help COMMAND`: its synopsis and the option details; "" for an
/// unknown command.
std::string commandHelp(const std::string& name) {
  for (const CommandHelp& c : kCommands)
    if (name == c.name) return std::string("usage:\n") + c.synopsis + details();
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

Args parseArgs(int argc, char** argv) {
  Args a;
  if (argc < 2) throw UsageError("missing command");
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    std::optional<std::string> inlineValue;  // --flag=value
    if (s.rfind("--", 0) == 0 && s.find('=') != std::string::npos) {
      inlineValue = s.substr(s.find('=') + 1);
      s = s.substr(0, s.find('='));
    }
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
    } else if (!s.empty() && s[0] == '-')
      throw UsageError("unknown option " + s);
    else if (a.subject.empty() || (s == "-" && a.subject.empty()))
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
  ts::CompileOptions o;
  if (a.numWarps) o.numWarps = *a.numWarps;
  if (a.precision) setenv("TESSERA_PRECISION", a.precision->c_str(), 1);
  ts::Kernel kern = loadKernel(a, target);
  if (a.assumeAligned) kern = ts::assumeAligned(kern);
  ts::CompiledKernel k = ts::compile(kern, target, o);
  for (const std::string& w : k.artifact().warnings) std::cerr << w << "\n";
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
  ts::CompileOptions o;
  if (a.numWarps) o.numWarps = *a.numWarps;
  if (a.precision) setenv("TESSERA_PRECISION", a.precision->c_str(), 1);
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
  switch (target.kind) {
    case ts::Target::Kind::CPU: ctx.device = ts::Device::cpu(target.arch); break;
    case ts::Target::Kind::EmuNVPTX: ctx.device = ts::Device::emulator("nvptx:" + target.arch); break;
    case ts::Target::Kind::EmuAMDGPU: ctx.device = ts::Device::emulator("amdgpu:" + target.arch); break;
    case ts::Target::Kind::NVPTX: ctx.device = ts::Device::cuda(); break;
    case ts::Target::Kind::AMDGPU: ctx.device = ts::Device::hip(); break;
  }
  if ((target.kind == ts::Target::Kind::NVPTX || target.kind == ts::Target::Kind::AMDGPU) &&
      ctx.device.arch() != target.str())
    throw ts::DeviceError("run: target '" + target.str() + "' but the GPU present is " + ctx.device.name() + " (" +
                          ctx.device.arch() + "); pass --target " + ctx.device.arch());
  ctx.shape = a.shape;
  ctx.seed = a.seed;
  ctx.launch.threads = a.threads;
  ctx.launch.checkBounds = a.checkBounds;
  if (a.precision) setenv("TESSERA_PRECISION", a.precision->c_str(), 1);
  const auto start = std::chrono::steady_clock::now();
  ts::examples::CheckResult r = ex->run(ctx);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << ex->name << " on " << ctx.device.name() << ": max abs error " << r.maxAbsError << ", max rel error "
            << r.maxRelError << ", tolerance " << r.tolerance << " -> " << (r.ok ? "OK" : "MISMATCH") << "\n";
  if (!r.detail.empty()) std::cout << r.detail << "\n";
  // Compile (or cache lookup), upload, launch, read back and the reference.
  std::cerr << "time: " << secs << " s\n";
  return r.ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
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
  } catch (const ts::InternalError& e) {
    std::cerr << "tessera: " << e.what() << "\n";
    return 3;
  } catch (const ts::Error& e) {
    std::cerr << "tessera: error: " << e.what() << "\n";
    return 2;
  }
}

// tessera: the command-line tool (`tessera help` lists the commands).
//
// One table of commands (kCommands below; tools/cli/CommandLine.h) drives
// dispatch, parsing, help and the messages about a bad command line; each
// command's options and code live in its own file (CompileCommands.cpp:
// list, compile, run, export, opt; Cache.cpp; Bench.cpp; Sol.cpp;
// Tune.cpp). Exit codes: 0 success, 1 mismatch (or a benchmark regression,
// or `cache explain`: not cached), 2 a usage, compile or device error (one
// message), 3 an internal compiler error.
#include <iostream>
#include <string>
#include <vector>

#include "Commands.h"
#include "tessera/ir/Pass.h"
#include "tessera/support/Targets.h"

namespace tessera::tools {

namespace {

std::string passList() {
  std::string r;
  for (const std::string& p : ir::passNames()) r += (r.empty() ? "" : ", ") + p;
  return r;
}

// --emit's stages, from the one list of them (Stages.def).
std::string stageList() {
  std::string r = "stages (--emit STAGE):\n";
  auto row = [&](const char* spelling, const char* targets, const char* description) {
    std::string name = spelling;
    r += "  " + name + std::string(name.size() < 16 ? 16 - name.size() : 1, ' ') + targets + description + "\n";
  };
#define TESSERA_STAGE(Enum, spelling, targets, description) row(spelling, k##targets, description);
  const char *kAny = "", *kNVPTX = "nvptx: ", *kAMDGPU = "amdgpu: ", *kGPU = "GPU: ";
#include "tessera/Stages.def"
  return r;
}

}  // namespace

// The options' explanations; GPU architectures come from Targets.def, passes
// from Passes.def.
std::string generalHelp() {
  return std::string(
             "targets: cpu (default: the host), cpu:CPU (an LLVM cpu: x86-64-v3 = AVX2, x86-64-v4 = AVX-512,\n"
             "         znver4, ...); nvptx:") +
         gpuArchList(GpuArch::Vendor::NVIDIA) + ", amdgpu:" + gpuArchList(GpuArch::Vendor::AMD) + ",\n" +
         "         emu:nvptx:SM, emu:amdgpu:GFX\n"
         "passes:  " +
         passList() + ", layout (needs --target)\n" + stageList() +
         "-o FILE: write the stage to FILE instead of standard output (binary stages such as hsaco\n"
         "         are refused on a terminal without it)\n"
         "export:  writes DIR/KERNEL.h (a typed launcher needing only libtessera_runtime) and the\n"
         "         code: KERNEL.o for cpu targets, KERNEL.ptx (+ .cubin where ptxas is found) for\n"
         "         nvptx, KERNEL.hsaco for amdgpu; prints the files written (docs/aot.md)\n"
         "--check-bounds: a checked launch: every global access is tested against its buffer,\n"
         "         the first one outside it reported and not performed (a bounds-checked compile;\n"
         "         with compile: that compile's code)\n"
         "--trace FILE: (run) a profiled launch: each warp's scopes (the kernel's own, its pipeline\n"
         "         stages, warp-specialised roles and waits) timed and written to FILE as a trace\n"
         "         Perfetto opens; a summary per scope on stderr (docs/profiling.md). --profile:\n"
         "         (compile) the code such a launch runs\n"
         "--precision approx: the GPU's hardware approximations (ex2.approx, rsqrt.approx,\n"
         "         div.full, v_exp_f32, v_rcp_f32, ...) and FMA contraction instead of accurate\n"
         "         math (docs/math.md gives the errors)\n"
         "--assume-aligned: compile as a launch with 16-byte aligned buffers and integer\n"
         "         arguments that are multiples of 16 would (the launch-time specialisation\n"
         "         GPU devices make: {divisibility = 16} on every pointer and integer argument)\n"
         "shapes:  --shape A,B,C or AxBxC (non-negative integers; the same in every command, and after\n"
         "         KERNEL: in bench and sol); each kernel says what its components are\n"
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

}  // namespace tessera::tools

namespace {

namespace ts = tessera;
namespace cli = ts::tools::cli;

int runVersion(const cli::Args&) {
  std::cout << "tessera " << TESSERA_VERSION << "\n" << ts::codegen::toolchainVersions();
  return 0;
}

int runHelp(const cli::Args& a);

const std::vector<cli::Command>& commands() {
  static const std::vector<cli::Command> table = [] {
    std::vector<cli::Command> t = {ts::tools::listCommand(),   ts::tools::compileCommand(), ts::tools::runCommand(),
                                   ts::tools::exportCommand(), ts::tools::optCommand(),     ts::tools::cacheCommand(),
                                   ts::tools::benchCommand(),  ts::tools::solCommand(),     ts::tools::tuneCommand()};
    t.push_back({"version", "  tessera --version | version\n", {}, 0, 0, "", runVersion, ts::tools::generalHelp});
    t.push_back({"help",
                 "  tessera help [COMMAND] | COMMAND --help\n",
                 {},
                 0,
                 2,
                 "a COMMAND",
                 runHelp,
                 ts::tools::generalHelp});
    return t;
  }();
  return table;
}

std::string usage() {
  std::string r = "usage:\n";
  for (const cli::Command& c : commands()) r += c.synopsis;
  return r + ts::tools::generalHelp() +
         "bench, sol, tune: `tessera help bench`, `tessera help sol`, `tessera help tune` give their options\n";
}

/// A command's help: the top-level command's synopsis and explanations (a
/// subcommand's help is its group's, which explains them all).
std::string helpOf(const cli::Command& top) { return "usage:\n" + top.synopsis + (top.help ? top.help() : ""); }

int runHelp(const cli::Args& a) {
  if (a.positionals().empty()) {
    std::cout << usage();
    return 0;
  }
  for (const cli::Command& c : commands())
    if (c.name == a.positional(0)) {
      std::cout << helpOf(c);
      return 0;
    }
  throw cli::CommandLineError("", "no command named '" + a.positional(0) + "'");
}

int dispatch(const std::vector<std::string>& words) {
  cli::Parsed p = cli::parseCommandLine(commands(), words);
  if (p.chain.empty()) {
    std::cout << usage();
    return 0;
  }
  if (p.help) {
    std::cout << helpOf(*p.chain.front());
    return 0;
  }
  return p.chain.back()->run(*p.args);
}

/// The synopsis of the command an error is about ("cache explain": its
/// own line), or the whole usage when it is about none.
std::string usageAfterError(const std::string& command) {
  const cli::Command* found = nullptr;
  const std::vector<cli::Command>* level = &commands();
  size_t start = 0;
  while (start < command.size() && level) {
    size_t end = command.find(' ', start);
    const std::string name = command.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const cli::Command* next = nullptr;
    for (const cli::Command& c : *level)
      if (c.name == name) next = &c;
    if (!next) break;
    found = next;
    level = &next->subcommands;
    start = end == std::string::npos ? command.size() : end + 1;
  }
  if (!found) return usage();
  const std::string top = command.substr(0, command.find(' '));
  return "usage:\n" + found->synopsis + "(`tessera help " + top + "` explains the options)\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  if (!words.empty() && words[0] == "--version") words[0] = "version";
  try {
    return dispatch(words);
  } catch (const cli::CommandLineError& e) {
    std::cerr << "tessera: " << (e.command.empty() ? "" : e.command + ": ") << e.what() << "\n"
              << usageAfterError(e.command);
    return 2;
  } catch (const ts::InternalError& e) {
    std::cerr << "tessera: " << e.what() << "\n";
    return 3;
  } catch (const ts::Error& e) {
    std::cerr << "tessera: error: " << e.what() << "\n";
    return 2;
  }
}

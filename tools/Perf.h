// `tessera bench` and `tessera sol`: the benchmark harness and the speed-of-
// light table on the bundled examples and on textual IR (docs/bench.md,
// docs/sol.md). Each command parses its own options, so that a bad flag is
// reported with what that command expected.
#pragma once

#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::tools {

/// A bad command line of bench or sol: `tessera: COMMAND: MESSAGE`, then the
/// command's synopsis; exit status 2.
struct CommandLineError : std::runtime_error {
  CommandLineError(std::string cmd, const std::string& msg) : std::runtime_error(msg), command(std::move(cmd)) {}
  std::string command;
};

/// The synopses (`tessera help` lists them) and each command's options.
extern const char* const kBenchSynopsis;
extern const char* const kSolSynopsis;
std::string benchOptionsHelp();
std::string solOptionsHelp();

/// Runs `tessera bench ARGS...` / `tessera sol ARGS...` (args exclude the
/// command). Returns the exit status: 0, or 1 for a failed result check or
/// a regression against the baseline. Errors throw (CommandLineError,
/// tessera::Error).
int runBench(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runSol(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The device a target's code runs on: the CPU (pinned or not), the
/// emulator for emu: targets, the CUDA / HIP GPU (which must be of the
/// target's arch: a DeviceError otherwise). Shared with `tessera run`.
Device deviceForTarget(const Target& target);

}  // namespace tessera::tools

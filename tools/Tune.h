// `tessera tune`: the autotuner (tessera/perf/Tune.h) on the bundled
// examples that declare a config space (docs/tune.md).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::tools {

extern const char* const kTuneSynopsis;
std::string tuneOptionsHelp();

/// Runs `tessera tune ARGS...` (args exclude the command). Returns 0 when a
/// best config was found; errors throw (CommandLineError, tessera::Error --
/// perf::TuneError when every candidate was pruned or rejected).
int runTune(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera::tools

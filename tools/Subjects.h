// What `tessera bench` and `tessera sol` measure: KERNEL[:SHAPE] (a bundled
// example) or FILE.tir, and the options both read the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "Commands.h"
#include "registry.h"
#include "tessera/perf/Launches.h"
#include "tessera/perf/TuneTable.h"

namespace tessera::tools {

/// One KERNEL[:SHAPE] of the command line: a bundled example with its
/// shape (the one after ':', else --shape), or a FILE.tir.
struct Subject {
  const examples::Example* example = nullptr;
  std::vector<int64_t> shape;
  std::string file;
  std::string name() const { return example ? example->name : file; }
};

Subject resolveSubject(const cli::Args& a, const std::string& text);

/// --machines ID,... checked against the table (empty: all).
std::vector<std::string> machinesOf(const cli::Args& a);
/// A FILE.tir's launch as the options give it (--kernel, --grid, --arg).
perf::FileLaunchSpec fileSpecOf(const cli::Args& a, const std::string& path);
/// perf::fileLaunch, its UsageError reported as the command's.
examples::Launch fileLaunchOf(const cli::Args& a, const Subject& sub, const Device& dev);

/// The run context of an example on `dev`: its shape, --seed and --threads
/// where the command takes them, and `config` (bench --config) checked
/// against the example's tune space.
examples::RunContext contextFor(const cli::Args& a, const Subject& sub, const Device& dev,
                                const std::optional<perf::TuneConfig>& config = std::nullopt);

// The options bench and sol share.
inline const cli::Option kMachinesOpt{"--machines", "machine ids separated by commas", "--machine"};
inline const cli::Option kGridOpt{"--grid", "a grid X[,Y[,Z]] of positive integers"};
inline const cli::Option kArgOpt{"--arg", "NAME=VALUE"};

}  // namespace tessera::tools

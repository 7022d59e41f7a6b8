// What the performance tools launch and where: the device a target's code
// runs on, launches of a kernel from textual IR with its arguments given
// by name, and the machines a speed-of-light or roofline report is made
// for. `tessera run`, `bench`, `sol` and `tune` are argument handling and
// printing around these (docs/bench.md, docs/sol.md).
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/perf/SpeedOfLight.h"
#include "tessera/tessera.h"

namespace tessera::perf {

/// The device a target's code runs on: the CPU (pinned or not), the
/// emulator for emu: targets, the CUDA / HIP GPU (which must be of the
/// target's arch: a DeviceError naming the GPU present otherwise).
Device deviceForTarget(const Target& target);
/// Where inputs for a target's code are generated without running it: the
/// CPU for CPU targets, the emulator of the GPU target's arch otherwise (its
/// memory is the host's), so no GPU is needed.
Device inputDeviceForTarget(const Target& target);

/// A kernel of a textual IR file launched with given arguments: buffers
/// of a given element count (zero-filled), scalars of a given value, each
/// named by the kernel's argument name or its index.
struct FileLaunchSpec {
  std::string path;
  std::string kernelName;                                 // one of several kernels in the file; "": the only one
  std::optional<std::array<uint32_t, 3>> grid;            // required to launch
  std::vector<std::pair<std::string, std::string>> args;  // NAME=VALUE, in order
};

/// Parses the file (at most 64 MiB). UsageError for a file too large;
/// ParseError / VerifyError for its contents.
Kernel parseKernelFile(const std::string& path, const std::string& kernelName);

/// The launch of a FILE.tir on `dev`. UsageError naming the problem: no
/// grid, an argument name the kernel lacks (listing its arguments), a value
/// that is no number, a buffer of no elements, arguments without a value.
struct FileLaunch {
  Kernel kernel;
  Dim3 grid;
  std::vector<rt::Arg> args;
};
FileLaunch fileLaunch(const FileLaunchSpec& spec, const Device& dev);

/// The facts the work of one launch of a FILE.tir is counted from (no
/// buffer is allocated: a buffer's element count bounds the bytes counted).
struct FileLaunchFacts {
  Kernel kernel;
  ir::LaunchFacts facts;
  Dim3 grid;
};
FileLaunchFacts fileLaunchFacts(const FileLaunchSpec& spec);

/// The machines of `ids` (empty: all) for a report: the host first when
/// asked for (or `needHost`), its peaks measured once and remembered
/// (hostPeaks; `remeasure` measures again), then the GPU rows in table
/// order. What the host measurement did is written to `log`.
std::vector<Machine> selectMachines(const std::vector<std::string>& ids, bool needHost, bool remeasure,
                                    std::ostream& log);
/// `all` narrowed to `ids` (empty: all of them).
std::vector<Machine> onlyMachines(const std::vector<std::string>& ids, const std::vector<Machine>& all);

}  // namespace tessera::perf

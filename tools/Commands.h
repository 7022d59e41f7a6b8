// The commands of the `tessera` tool, each a row of the table in
// tools/tessera.cpp (tools/cli/CommandLine.h), and the options several of
// them share, spelt and described once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli/CommandLine.h"
#include "tessera/tessera.h"

namespace tessera::tools {

cli::Command listCommand();
cli::Command compileCommand();
cli::Command runCommand();
cli::Command exportCommand();
cli::Command optCommand();
cli::Command cacheCommand();  // stats, explain, clear
cli::Command benchCommand();
cli::Command solCommand();
cli::Command tuneCommand();

/// The options' explanations shared by the compile-family commands
/// (targets, passes, stages, environment, exit codes).
std::string generalHelp();

// Options several commands take.
inline const cli::Option kTargetOpt{"--target", "a target (cpu, cpu:x86-64-v3, nvptx:sm_90a, emu:nvptx:sm_80, ...)"};
inline const cli::Option kKernelOpt{"--kernel", "the NAME of a kernel in the file"};
inline const cli::Option kNumWarpsOpt{"--num-warps", "a number of warps N"};
inline const cli::Option kClusterOpt{"--cluster", "a cluster shape X[,Y[,Z]] (programs per thread-block cluster)"};
inline const cli::Option kPrecisionOpt{"--precision", "accurate or approx"};
inline const cli::Option kAssumeAlignedOpt{"--assume-aligned"};
inline const cli::Option kCheckBoundsOpt{"--check-bounds"};
inline const cli::Option kShapeOpt{"--shape", "a shape A,B,... or AxBx..."};
inline const cli::Option kThreadsOpt{"--threads", "a thread count N"};
inline const cli::Option kSeedOpt{"--seed", "an integer seed S"};

/// --num-warps: any int (the target's limits are the compiler's to check,
/// a CompileError naming the values that work there).
std::optional<int> numWarpsOf(const cli::Args& a);
/// --precision, checked (a UsageError naming the choices) and put in force
/// for the process's compiles (TESSERA_PRECISION).
void applyPrecision(const cli::Args& a);
/// --threads: 1..1024, 0 when not given (the device's default).
unsigned threadsOf(const cli::Args& a);
/// --seed: a non-negative integer, 1 when not given.
uint64_t seedOf(const cli::Args& a);

/// KERNEL or FILE.tir ("-": standard input) as `tessera compile` reads it.
Kernel loadKernel(const cli::Args& a, const std::string& subject, const Target& target);

/// The device a target's code runs on (perf::deviceForTarget), shared by
/// run, bench and tune.
Device deviceFor(const std::string& target);

}  // namespace tessera::tools

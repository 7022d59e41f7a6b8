// The perf tools' section of tessera_bench (perf_tools_bench.cpp): the
// benchmark harness's overhead per repetition, and the host peaks of
// `tessera sol` beside plain C++ peers measured in the same run.
#pragma once

namespace tessera::bench {

/// Prints the harness overhead (median [min, max] over trials) and the
/// measured host FMA peak and triad bandwidth with their C++ peers.
void perfToolsBench(int reps);

}  // namespace tessera::bench

// The attention section of tessera_bench (attention_bench.cpp): the
// flash_attention examples on the CPU against a plain C++ loop nest.
#pragma once

namespace tessera::bench {

/// Prints, per shape, Tessera's flash-attention forward and the C++ peer
/// (median [min, max] in ms and GFLOP/s), after checking both outputs.
void attentionBench(int reps);

}  // namespace tessera::bench

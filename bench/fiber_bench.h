// The fiber-switch section of tessera_bench: the SIMT emulator's context
// switch (runtime/emu/Fiber.h) in ns per switch.
#pragma once

namespace tessera::bench {

/// Prints ns per switch (median [min, max] of `reps` runs) of a ping-pong
/// between two emulator fibers, with a plain function call (the baseline)
/// and glibc's swapcontext measured in the same run.
void fiberSwitchBench(int reps);

}  // namespace tessera::bench

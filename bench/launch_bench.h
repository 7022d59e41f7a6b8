// The asynchronous-launch section of tessera_bench: the host-side cost of
// queueing a launch on a stream, against the synchronous launch, on the CPU
// device and the SIMT emulator.
#pragma once

namespace tessera::bench {

/// Prints, per device and grid, the time Kernel::launch takes to return
/// (median [min, max] of `reps` launches of an empty kernel): synchronous,
/// asynchronous on a Stream (the stream is synchronised between launches,
/// outside the timed region), and asynchronous plus its synchronize().
void asyncLaunchBench(int reps);

}  // namespace tessera::bench

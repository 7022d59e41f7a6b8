// The host threads a CPU launch runs on, for code that runs work of its own
// beside a kernel and must use as many threads as the kernel does (the
// benchmarks' copy peer, tessera/perf/Peers.h). Kernel launches count them
// with the same function (runtime/lib/CpuDevice.cpp).
#pragma once

#include <string>

namespace tessera::rt {

class Device;
struct LaunchOptions;

/// The host threads a launch with `opts` runs on `device`:
/// LaunchOptions::threads, or the device's default when it is 0
/// (Device::defaultThreads: TESSERA_NUM_THREADS, else every hardware thread
/// on the CPU; 1 on a GPU). Throws LaunchError naming `what` when the count
/// exceeds the pool's limit (1024) or TESSERA_NUM_THREADS is malformed.
unsigned launchThreads(const Device& device, const LaunchOptions& opts, const std::string& what);

}  // namespace tessera::rt

#include "launch_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_kernels.h"
#include "tessera/tessera.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median, min, max;  // microseconds
};

Stats summarize(std::vector<double>& t) {
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2] * 1e6, t.front() * 1e6, t.back() * 1e6};
}

/// Times `timed` alone, `reps` times, running `untimed` after each.
template <class F, class G>
Stats timeEach(int reps, F&& timed, G&& untimed) {
  std::vector<double> t;
  t.reserve(static_cast<size_t>(reps));
  timed();  // warm-up: the stream's worker starts, the caches fill
  untimed();
  for (int i = 0; i < reps; ++i) {
    const auto a = Clock::now();
    timed();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
    untimed();
  }
  return summarize(t);
}

void row(const char* what, Stats s) {
  std::printf("    %-26s %8.2f us [%8.2f, %9.2f]\n", what, s.median, s.min, s.max);
}

}  // namespace

void asyncLaunchBench(int reps) {
  std::printf(
      "\nasynchronous launch (LaunchOptions::stream) vs synchronous, empty kernel, host-side time of\n"
      "Kernel::launch, median [min, max] of %d\n",
      reps);
  for (Device dev : {Device::cpu(), Device::emulator("nvptx:sm_80")}) {
    auto k = compile(emptyKernel(), dev);
    Buffer buf = dev.alloc(DType::F32, 1);
    rt::Stream s = dev.createStream();
    // The emulator runs a block of GPU threads per program: a few programs
    // already cost milliseconds, so it gets fewer launches.
    const int n = dev.kind() == rt::DeviceKind::Emulator ? std::max(reps / 10, 20) : reps;
    for (unsigned programs : {1u, 64u}) {
      LaunchOptions sync, async;
      sync.threads = async.threads = 1;
      async.stream = s;
      std::printf("  %s, %u program(s), 1 thread\n", dev.name().c_str(), programs);
      row("synchronous launch", timeEach(n, [&] { k.launchWith({programs}, {buf}, sync); }, [] {}));
      row("asynchronous launch",
          timeEach(n, [&] { k.launchWith({programs}, {buf}, async); }, [&] { s.synchronize(); }));
      row("asynchronous + synchronize", timeEach(
                                            n,
                                            [&] {
                                              k.launchWith({programs}, {buf}, async);
                                              s.synchronize();
                                            },
                                            [] {}));
    }
  }
}

}  // namespace tessera::bench

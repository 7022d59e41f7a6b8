// tessera_bench: the spine's performance figures, measured against physical
// limits taken in the same run. Run by hand, never as a timed test:
//
//   cmake --build build --target tessera_bench && build/bin/tessera_bench [--quick] [--fibers] [--launch]
//                                                                          [--perf-tools] [--attention]
//
// Reports, each as median [min, max] over repetitions after warm-up:
//   * a STREAM-style triad a[i] = b[i] + s*c[i] (plain C++, -O3 -march=native)
//     with 1 and 2 threads: the bandwidth baseline;
//   * vector_add, softmax, layernorm, rmsnorm on 4096x4096 f32 with 1 and 2
//     threads, in GB/s counting one read and one write per element (vector
//     add: two reads and one write), and as a fraction of the triad;
//   * cold JIT compile latency per example (cache cleared) and a cache hit;
//   * launch overhead of an empty kernel: 1 program, and 64 programs on 2 threads;
//   * the host-side cost of an asynchronous launch (LaunchOptions::stream) on
//     the CPU and the emulator against the synchronous one (launch_bench.cpp;
//     --launch runs this section alone);
//   * the cost of checked launches (LaunchOptions::checkBounds) against the
//     same kernels unchecked, in the same run;
//   * the SIMT emulator's fiber switch in ns, against a function call and
//     glibc's swapcontext (fiber_bench.cpp; --fibers runs this section alone);
//   * the benchmark harness's overhead per repetition, and the host peaks
//     `tessera sol` measures beside plain C++ peers (perf_tools_bench.cpp;
//     --perf-tools runs this section alone);
//   * flash-attention forward (the flash_attention examples) against a plain
//     C++ loop nest with -ffast-math (attention_bench.cpp; --attention runs
//     this section alone).
// Every kernel's output is checked against a plain C++ reference first.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/CommandLine.h"
#include "attention_bench.h"
#include "bench_kernels.h"
#include "fiber_bench.h"
#include "launch_bench.h"
#include "perf_tools_bench.h"
#include "registry.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Clock = std::chrono::steady_clock;

namespace {

struct Stats {
  double median, min, max;
};

Stats measure(int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  fn();  // warm-up
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

// The baseline: a[i] = b[i] + s*c[i] over n floats on `threads` threads, 12
// bytes moved per element.
__attribute__((noinline)) void triadChunk(float* a, const float* b, const float* c, float s, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
}

// The same with non-temporal stores (no read-for-ownership of a's lines):
// the limit for kernels that stream their output, as Tessera's CPU backend
// does for large launches.
__attribute__((noinline)) void triadChunkNT(float* a, const float* b, const float* c, float s, size_t lo, size_t hi) {
  size_t i = lo;
  for (; i < hi && (reinterpret_cast<uintptr_t>(a + i) & 31); ++i) a[i] = b[i] + s * c[i];
  __m256 vs = _mm256_set1_ps(s);
  for (; i + 8 <= hi; i += 8)
    _mm256_stream_ps(a + i, _mm256_add_ps(_mm256_loadu_ps(b + i), _mm256_mul_ps(vs, _mm256_loadu_ps(c + i))));
  for (; i < hi; ++i) a[i] = b[i] + s * c[i];
  _mm_sfence();
}

Stats triad(size_t n, unsigned threads, int reps, bool nontemporal = false) {
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  auto run = [&] {
    ts::rt::parallelFor(static_cast<int64_t>(threads), threads, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t)
        (nontemporal ? triadChunkNT : triadChunk)(a.data(), b.data(), c.data(), 3.0f, n * t / threads,
                                                  n * (t + 1) / threads);
    });
  };
  Stats s = measure(reps, run);
  if (a[n / 2] != 7.0f) std::printf("triad: wrong result\n");
  return s;
}

double gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

void printRow(const char* what, unsigned threads, double bytes, Stats s, double triadGBs, double ntGBs) {
  double med = gbps(bytes, s.median), lo = gbps(bytes, s.max), hi = gbps(bytes, s.min);
  std::printf("  %-12s %uT  %7.2f ms  %6.1f GB/s [%5.1f, %5.1f]  %5.1f%% of triad, %5.1f%% of NT triad\n", what,
              threads, s.median * 1e3, med, lo, hi, 100.0 * med / triadGBs, 100.0 * med / ntGBs);
}

}  // namespace

// A kernel's inputs, launched once with `lo` and checked against its
// reference; nullopt (after saying so) when the result is wrong, since a
// benchmark of a wrong kernel is worthless.
static std::optional<tessera::bench::Setup> checkedSetup(const tessera::bench::MemoryBoundKernel& k,
                                                         const ts::Device& dev, int64_t rows, int64_t cols,
                                                         const ts::LaunchOptions& lo) {
  auto setup = k.setup(dev, rows, cols);
  setup.launch(lo);
  if (setup.check()) return setup;
  std::printf("  %-12s MISMATCH against the reference%s; not timed\n", k.name.c_str(),
              lo.checkBounds ? " (checked launch)" : "");
  return std::nullopt;
}

const tessera::tools::cli::Command kProgram{
    "tessera_bench",
    "  tessera_bench [--quick] [--fibers] [--launch] [--perf-tools] [--attention]\n",
    {{"--quick"}, {"--fibers"}, {"--launch"}, {"--perf-tools"}, {"--attention"}},
    0,
    0,
    "",
    nullptr,
    [] {
      return std::string(
          "the spine's performance figures against physical limits measured in the same run: the\n"
          "memory-bound kernels against a STREAM triad, JIT compile latency, launch overhead, checked\n"
          "launches, each kernel checked against its reference first (bench/bench_main.cpp)\n"
          "  --quick             fewer repetitions\n"
          "  --fibers            only the SIMT emulator's fiber switch\n"
          "  --launch            only the host-side cost of asynchronous launches\n"
          "  --perf-tools        only the benchmark harness's overhead and the host peaks\n"
          "  --attention         only flash attention against a plain C++ loop nest\n");
    }};

int main(int argc, char** argv) {
  const tessera::tools::cli::Args args = tessera::tools::cli::parseProgram(kProgram, argc, argv);
  const bool quick = args.has("--quick"), fibersOnly = args.has("--fibers"), launchOnly = args.has("--launch"),
             perfOnly = args.has("--perf-tools"), attentionOnly = args.has("--attention");
  const int reps = quick ? 5 : 15;
  if (fibersOnly) {
    tessera::bench::fiberSwitchBench(reps);
    return 0;
  }
  if (launchOnly) {
    tessera::bench::asyncLaunchBench(quick ? 200 : 2000);
    return 0;
  }
  if (perfOnly) {
    tessera::bench::perfToolsBench(reps);
    return 0;
  }
  if (attentionOnly) {
    tessera::bench::attentionBench(reps);
    return 0;
  }
  auto dev = ts::Device::cpu();
  std::printf("device: %s, host ISA %s\n", dev.name().c_str(), ts::codegen::hostIsa().c_str());

  // ---- bandwidth ----------------------------------------------------------
  const size_t triadN = size_t{64} << 20;  // 64 Mi floats per array (768 MiB moved)
  const int64_t rows = 4096, cols = 4096;
  std::printf("\nmemory-bound kernels, %lldx%lld f32 (median [min, max] of %d)\n", (long long)rows, (long long)cols,
              reps);
  for (unsigned threads : {1u, 2u}) {
    Stats t = triad(triadN, threads, reps);
    double triadGBs = gbps(12.0 * triadN, t.median);
    std::printf("  %-12s %uT  %7.2f ms  %6.1f GB/s [%5.1f, %5.1f]\n", "triad", threads, t.median * 1e3, triadGBs,
                gbps(12.0 * triadN, t.max), gbps(12.0 * triadN, t.min));
    Stats tn = triad(triadN, threads, reps, true);
    double ntGBs = gbps(12.0 * triadN, tn.median);
    std::printf("  %-12s %uT  %7.2f ms  %6.1f GB/s [%5.1f, %5.1f]  (non-temporal stores)\n", "NT triad", threads,
                tn.median * 1e3, ntGBs, gbps(12.0 * triadN, tn.max), gbps(12.0 * triadN, tn.min));
    for (const auto& k : tessera::bench::memoryBoundKernels()) {
      ts::LaunchOptions lo;
      lo.threads = threads;
      auto setup = checkedSetup(k, dev, rows, cols, lo);
      if (!setup) continue;
      Stats s = measure(reps, [&] { setup->launch(lo); });
      printRow(k.name.c_str(), threads, setup->bytes, s, triadGBs, ntGBs);
    }
  }

  // ---- compile latency ----------------------------------------------------
  std::printf("\nJIT compile latency, cold (cache cleared), median [min, max] of %d\n", reps);
  for (const auto& ex : ts::examples::all()) {
    ts::Kernel k = ex.kernel();
    Stats cold = measure(reps, [&] {
      ts::clearCache();
      ts::compile(k, dev);
    });
    Stats hit = measure(reps * 20, [&] { ts::compile(k, dev); });
    std::printf("  %-12s cold %6.2f ms [%6.2f, %6.2f]   cache hit %6.2f us [%6.2f, %6.2f]\n", ex.name.c_str(),
                cold.median * 1e3, cold.min * 1e3, cold.max * 1e3, hit.median * 1e6, hit.min * 1e6, hit.max * 1e6);
  }

  // ---- GPU compile latency (no GPU needed) ---------------------------------
  std::printf("\nGPU compile latency, cold: tile IR -> PTX (sm_90a; ptxas not included) and -> .hsaco (gfx942)\n");
  for (const auto& ex : ts::examples::all()) {
    auto timeTarget = [&](const char* t) {
      ts::Target target = ts::Target::parse(t);
      ts::Kernel k = ts::examples::kernelFor(ex, target);
      return measure(reps, [&] {
        ts::clearCache();
        ts::compile(k, target);
      });
    };
    Stats ptx = timeTarget("nvptx:sm_90a"), hsaco = timeTarget("amdgpu:gfx942");
    std::printf("  %-12s PTX %6.2f ms [%6.2f, %6.2f]   hsaco %6.2f ms [%6.2f, %6.2f]\n", ex.name.c_str(),
                ptx.median * 1e3, ptx.min * 1e3, ptx.max * 1e3, hsaco.median * 1e3, hsaco.min * 1e3, hsaco.max * 1e3);
  }

  // ---- fiber switch of the SIMT emulator -----------------------------------
  tessera::bench::fiberSwitchBench(reps);

  // ---- the perf tools: harness overhead, host peaks against C++ peers -------
  tessera::bench::perfToolsBench(reps);

  // ---- flash-attention forward against a C++ loop nest ----------------------
  tessera::bench::attentionBench(reps);

  // ---- SIMT emulator -------------------------------------------------------
  std::printf("\nSIMT emulator: softmax 1024x1024 f32 (compile excluded), median [min, max] of 3\n");
  if (const auto* softmax = ts::examples::find("softmax")) {
    for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
      ts::examples::RunContext ctx;
      ctx.device = ts::Device::emulator(arch);
      ctx.shape = {1024, 1024};
      bool ok = true;
      Stats s = measure(3, [&] { ok = ok && softmax->run(ctx).ok; });
      std::printf("  emu:%-16s %6.3f s [%6.3f, %6.3f] (includes input generation and the C++ reference)%s\n", arch,
                  s.median, s.min, s.max, ok ? "" : "  MISMATCH");
    }
  }

  // ---- launch overhead ----------------------------------------------------
  std::printf(
      "\nchecked launches (every global access tested against its buffer), %lldx%lld f32, 2 threads,\n"
      "median [min, max] of %d\n",
      (long long)rows, (long long)cols, reps);
  for (const auto& k : tessera::bench::memoryBoundKernels()) {
    ts::LaunchOptions plain, checked;
    plain.threads = checked.threads = 2;
    checked.checkBounds = true;
    auto setup = checkedSetup(k, dev, rows, cols, checked);
    if (!setup) continue;
    Stats u = measure(reps, [&] { setup->launch(plain); });
    Stats c = measure(reps, [&] { setup->launch(checked); });
    std::printf("  %-12s unchecked %7.2f ms [%7.2f, %7.2f]   checked %7.2f ms [%7.2f, %7.2f]   x%.2f\n", k.name.c_str(),
                u.median * 1e3, u.min * 1e3, u.max * 1e3, c.median * 1e3, c.min * 1e3, c.max * 1e3,
                c.median / u.median);
  }

  std::printf("\nlaunch overhead of an empty kernel, median [min, max] of 2000\n");
  {
    auto k = ts::compile(tessera::bench::emptyKernel(), dev);
    auto buf = dev.alloc(ts::DType::F32, 1);
    for (auto [programs, threads] : {std::pair{1u, 1u}, std::pair{64u, 2u}, std::pair{64u, 1u}}) {
      ts::LaunchOptions lo;
      lo.threads = threads;
      Stats s = measure(2000, [&] { k.launchWith({programs}, {buf}, lo); });
      std::printf("  %3u programs on %u thread(s): %6.2f us [%6.2f, %6.2f]\n", programs, threads, s.median * 1e6,
                  s.min * 1e6, s.max * 1e6);
    }
  }
  tessera::bench::asyncLaunchBench(quick ? 200 : 2000);
  return 0;
}

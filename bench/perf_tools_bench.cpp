// The perf tools' own figures (tessera_bench --perf-tools, and part of the
// full run):
//   * the benchmark harness's overhead per repetition on the CPU device: an
//     empty kernel timed by the harness against the same launches in a plain
//     loop, (harness time - plain time) per repetition, median [min, max]
//     over trials; and the harness's own in-run figure (wall time outside
//     the timed launches);
//   * the host peaks `tessera sol` measures (FMA chains in the library's
//     run-time-dispatched intrinsics, and a Tessera kernel of them; a
//     Tessera triad), each beside a plain C++ peer compiled -O3
//     -march=native and measured in the same run: independent FMA chains in
//     intrinsics on every thread, and the triad loop (with and without
//     non-temporal stores).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "perf_tools_bench.h"
#include "tessera/perf/Bench.h"
#include "tessera/perf/SpeedOfLight.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Clock = std::chrono::steady_clock;

namespace tessera::bench {

namespace {

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// ---- plain C++ peers ---------------------------------------------------------

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline float vfirst(Vec v) { return _mm512_cvtss_f32(v); }
#elif defined(__FMA__)
using Vec = __m256;
constexpr int kLanes = 8;
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vfirst(Vec v) { return _mm256_cvtss_f32(v); }
#else
#define TS_NO_FMA_PEER 1
#endif

#ifndef TS_NO_FMA_PEER
constexpr int kChains = 12;  // > latency (4) x FMA ports (2): every pipe busy

/// `iters` rounds of kChains independent vector FMAs; returns a value the
/// compiler must compute.
__attribute__((noinline)) float fmaChains(int64_t iters) {
  Vec acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = vset(1e-3f * float(j));
  const Vec a = vset(0.999999f), b = vset(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = vfma(acc[j], a, b);
  float s = 0;
  for (int j = 0; j < kChains; ++j) s += vfirst(acc[j]);
  return s;
}

/// FLOP/s of fmaChains on `threads` threads, best of `reps`.
double fmaPeer(unsigned threads, int reps) {
  int64_t iters = 1 << 16;
  auto run = [&](int64_t n) {
    std::vector<std::thread> ts;
    std::vector<float> sink(threads);
    auto t0 = Clock::now();
    for (unsigned t = 0; t < threads; ++t) ts.emplace_back([&, t] { sink[t] = fmaChains(n); });
    for (auto& th : ts) th.join();
    double s = seconds(t0, Clock::now());
    if (sink[0] == 12345.0f) std::printf(" ");
    return s;
  };
  while (run(iters) < 0.02 && iters < (int64_t{1} << 34)) iters *= 4;
  iters = static_cast<int64_t>(double(iters) * 0.1 / run(iters));
  double best = 1e300;
  for (int r = 0; r < reps; ++r) best = std::min(best, run(iters));
  return double(threads) * double(iters) * kChains * kLanes * 2 / best;
}
#endif

__attribute__((noinline)) void triadPlain(float* a, const float* b, const float* c, float s, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
}

__attribute__((noinline)) void triadStream(float* a, const float* b, const float* c, float s, size_t lo, size_t hi) {
  size_t i = lo;
  for (; i < hi && (reinterpret_cast<uintptr_t>(a + i) & 31); ++i) a[i] = b[i] + s * c[i];
  __m256 vs = _mm256_set1_ps(s);
  for (; i + 8 <= hi; i += 8)
    _mm256_stream_ps(a + i, _mm256_add_ps(_mm256_loadu_ps(b + i), _mm256_mul_ps(vs, _mm256_loadu_ps(c + i))));
  for (; i < hi; ++i) a[i] = b[i] + s * c[i];
  _mm_sfence();
}

/// Bytes/s of a triad over `n` floats per array (STREAM's count: 12 bytes per
/// element), best of `reps`.
double triadPeer(size_t n, unsigned threads, int reps, bool stream) {
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  auto run = [&] {
    std::vector<std::thread> ts;
    auto t0 = Clock::now();
    for (unsigned t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        (stream ? triadStream : triadPlain)(a.data(), b.data(), c.data(), 3.0f, n * t / threads, n * (t + 1) / threads);
      });
    for (auto& th : ts) th.join();
    return seconds(t0, Clock::now());
  };
  run();
  double best = 1e300;
  for (int r = 0; r < reps; ++r) best = std::min(best, run());
  if (a[n / 2] != 7.0f) std::printf("triad peer: wrong result\n");
  return 12.0 * double(n) / best;
}

// ---- harness overhead --------------------------------------------------------

void harnessOverhead(int trials) {
  Device dev = Device::cpu();
  Kernel empty = ts::kernel("empty", [](ts::Ptr<float>) {});
  CompiledKernel k = compile(empty, dev);
  Buffer buf = dev.alloc(DType::F32, 1);
  const int n = 2000;
  std::vector<double> diff, inRun, plainPer, harnessPer;
  for (int t = 0; t < trials; ++t) {
    // The kernel's own time: n launches in a plain loop.
    k.launch({1}, buf);
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) k.launch({1}, buf);
    double plain = seconds(t0, Clock::now()) / n;
    // The harness: the same n launches, its timed phase's wall time per repetition.
    perf::BenchOptions o;
    o.warmupSeconds = 0;
    o.minWarmup = 1;
    o.minReps = n;
    o.maxReps = n;
    o.budgetSeconds = 1e9;
    perf::BenchResult r = perf::benchmark(k, {1}, {buf}, o);
    double harness = r.wallSeconds / double(r.samples.size());
    diff.push_back(harness - plain);
    inRun.push_back(r.overheadPerRep);
    plainPer.push_back(plain);
    harnessPer.push_back(harness);
  }
  perf::Stats d = perf::summarize(diff), ir = perf::summarize(inRun), p = perf::summarize(plainPer),
              h = perf::summarize(harnessPer);
  std::printf("\nbenchmark harness overhead per repetition, CPU device, empty kernel (1 program), %d trials of %d\n",
              trials, n);
  std::printf("  launch in a plain loop          %7.3f us [%7.3f, %7.3f]\n", p.median * 1e6, p.min * 1e6, p.max * 1e6);
  std::printf("  the same in the harness          %7.3f us [%7.3f, %7.3f]\n", h.median * 1e6, h.min * 1e6, h.max * 1e6);
  std::printf("  harness - plain loop, per trial %7.3f us [%7.3f, %7.3f]   (target <= 2 us)\n", d.median * 1e6,
              d.min * 1e6, d.max * 1e6);
  std::printf("  fastest harness - fastest plain %7.3f us   (least disturbed by other load)\n", (h.min - p.min) * 1e6);
  std::printf("  harness's own figure (outside the timed launch) %7.3f us [%7.3f, %7.3f]\n", ir.median * 1e6,
              ir.min * 1e6, ir.max * 1e6);
}

}  // namespace

void perfToolsBench(int reps) {
  harnessOverhead(std::max(2 * reps + 1, 21));

  const unsigned threads = Device::cpu().defaultThreads();
  std::printf("\nhost peaks (tessera sol's host row) beside plain C++ peers, same run, %u threads\n", threads);
  perf::HostMeasureOptions mo;
  mo.repeats = std::max(3, reps / 3);
  perf::HostPeaks hp = perf::measureHostPeaks(mo);
  std::printf("  tessera sol's FMA peak %8.1f GFLOP/s   (%s; measured in %.2f s with the triad)\n", hp.fmaFlops / 1e9,
              hp.fmaMethod.c_str(), hp.measureSeconds);
  std::printf("  Tessera FMA kernel     %8.1f GFLOP/s   (what Tessera-generated FMA chains reach)\n",
              hp.tesseraFmaFlops / 1e9);
#ifndef TS_NO_FMA_PEER
  std::printf("  C++ FMA intrinsics     %8.1f GFLOP/s   (%d-lane vectors, %d chains per thread)\n",
              fmaPeer(threads, mo.repeats) / 1e9, kLanes, kChains);
#else
  std::printf("  C++ FMA intrinsics     (not built: no FMA in -march=native)\n");
#endif
  const size_t n = hp.triadArrayBytes / 4;
  std::printf("  Tessera triad          %8.1f GB/s     (3 x %.0f MiB arrays, STREAM's byte count)\n",
              hp.triadBytes / 1e9, double(hp.triadArrayBytes) / (1 << 20));
  std::printf("  C++ triad              %8.1f GB/s\n", triadPeer(n, threads, mo.repeats, false) / 1e9);
  std::printf("  C++ triad, NT stores   %8.1f GB/s\n", triadPeer(n, threads, mo.repeats, true) / 1e9);
}

}  // namespace tessera::bench

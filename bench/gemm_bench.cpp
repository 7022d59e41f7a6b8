// fp32 GEMM benchmark: Tessera's gemm_f32 kernel (examples/gemm_f32.cpp,
// no bias, no activation) against oneDNN (dnnl_sgemm) and OpenBLAS
// (cblas_sgemm), C = A @ B row-major, M = N = K.
//
// For every size and thread count: each library's result is verified on
// sampled entries against a double reference before timing; then one
// warm-up run and `reps` timed runs, reported as median [min, max] in
// GFLOP/s (2 M N K flops). The FMA peak of this CPU is measured in the same
// run (independent FMA chains on every worker thread), and each result is
// given as a fraction of it. Also the cold compile latency of the kernel.
//
// Usage: tessera_gemm_bench [--sizes 1024,2048,4096] [--threads 1,2]
//                           [--reps 5] [--blocks 64,64,64] [--tessera-only]
#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/CommandLine.h"
#include "gflops.h"
#include "registry.h"

#ifdef TESSERA_HAVE_DNNL
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef TESSERA_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace ts = tessera;
namespace ex = tessera::examples;

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

using tessera::bench::Stats;
using tessera::bench::timeRuns;

// ---- FMA peak: 10 independent accumulators per thread (more than the
// latency x throughput = 4 x 2 = 8 chains Zen 3 needs in flight).
#if defined(__AVX512F__)
using V = __m512;
constexpr int kLanes = 16;
inline V vset(float x) { return _mm512_set1_ps(x); }
inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
inline float vsum(V v) { return _mm512_reduce_add_ps(v); }
#else
using V = __m256;
constexpr int kLanes = 8;
inline V vset(float x) { return _mm256_set1_ps(x); }
inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
inline float vsum(V v) {
  float t[8];
  _mm256_storeu_ps(t, v);
  float s = 0;
  for (float x : t) s += x;
  return s;
}
#endif

double fmaLoop(long iters, float seed) {
  V a = vset(0.999999f), b = vset(seed * 1e-7f);
  V c[10];
  for (int i = 0; i < 10; ++i) c[i] = vset(float(i));
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 10; ++i) c[i] = vfma(c[i], a, b);
  V s = c[0];
  for (int i = 1; i < 10; ++i) s = vadd(s, c[i]);
  return vsum(s);
}

double measurePeak(int threads) {
  const long iters = 40'000'000;
  std::vector<double> best;
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<double> sink{0};
    auto t0 = Clock::now();
    std::vector<std::thread> ws;
    for (int t = 0; t < threads; ++t)
      ws.emplace_back([&, t] {
        double r = fmaLoop(iters, float(t + 1));
        double cur = sink.load();
        while (!sink.compare_exchange_weak(cur, cur + r)) {
        }
      });
    for (auto& w : ws) w.join();
    double s = seconds(t0, Clock::now());
    best.push_back(double(threads) * iters * 10 * kLanes * 2 / s * 1e-9);
    if (sink.load() == 12345.0) std::printf(" ");  // keep the result alive
  }
  return *std::max_element(best.begin(), best.end());
}

// ---- verification: sampled entries of C against a double reference.
bool verify(const char* who, const std::vector<float>& A, const std::vector<float>& B, const std::vector<float>& C,
            int n) {
  std::mt19937 rng(123);
  std::uniform_int_distribution<int> d(0, n - 1);
  const double factor = 2.0 * (n + 1) * std::ldexp(1.0, -24);
  for (int s = 0; s < 256; ++s) {
    int i = s < 4 ? (s & 1) * (n - 1) : d(rng), j = s < 4 ? (s >> 1) * (n - 1) : d(rng);  // corners, then random
    double want = 0, mag = 0;
    for (int k = 0; k < n; ++k) {
      double p = double(A[size_t(i) * n + k]) * B[size_t(k) * n + j];
      want += p;
      mag += std::fabs(p);
    }
    double got = C[size_t(i) * n + j];
    if (!(std::fabs(got - want) <= factor * mag + 1e-6)) {
      std::printf("  %s: WRONG RESULT at (%d, %d): got %.7g, want %.7g\n", who, i, j, got, want);
      return false;
    }
  }
  return true;
}

}  // namespace

const tessera::tools::cli::Command kProgram{
    "tessera_gemm_bench",
    "  tessera_gemm_bench [--sizes 1024,2048,4096] [--threads 1,2] [--reps 5] [--blocks 64,64,64]\n"
    "                     [--tessera-only]\n",
    {{"--sizes", "square sizes M = N = K, A,B,..."},
     {"--threads", "thread counts A,B,..."},
     {"--reps", "a count of timed runs"},
     {"--blocks", "BLOCK_M,BLOCK_N,BLOCK_K"},
     {"--tessera-only"}},
    0,
    0,
    "",
    nullptr,
    [] {
      return std::string(
          "fp32 GEMM (C = A @ B, row-major, M = N = K): Tessera's gemm_f32 against oneDNN and OpenBLAS\n"
          "where they were found at build time; GFLOP/s as median [min, max] and the fraction of this\n"
          "CPU's measured FMA peak, then the kernel's cold compile latency\n"
          "  --sizes A,B,...     the sizes (default 1024,2048,4096)\n"
          "  --threads A,B,...   the thread counts (default 1,2)\n"
          "  --reps N            timed runs per row (default 5)\n"
          "  --blocks M,N,K      the kernel's blocks (default: the example's CPU default)\n"
          "  --tessera-only      time Tessera's kernel alone\n");
    }};

int main(int argc, char** argv) {
  const tessera::tools::cli::Args args = tessera::tools::cli::parseProgram(kProgram, argc, argv);
  const std::vector<int> sizes = tessera::bench::positiveInts(args, "--sizes", {1024, 2048, 4096}),
                         threadCounts = tessera::bench::positiveInts(args, "--threads", {1, 2});
  const int reps = static_cast<int>(args.integer("--reps", "a count >= 1", 1, INT32_MAX).value_or(5));
  const ex::GemmBlocks blocks = tessera::bench::blocksFlag(args, ex::gemmDefaultBlocks(ts::Device::cpu()));
  const bool tesseraOnly = args.has("--tessera-only");
  (void)tesseraOnly;  // read only when a peer library was found

  try {
    // Cold compile latency: the first compile in the process (LLVM and the
    // JIT initialised on the way), then with the cache cleared.
    ts::Kernel kern = ex::gemmF32(blocks, ex::Activation::None, /*withBias=*/false);
    auto t0 = Clock::now();
    ts::CompiledKernel k = ts::compile(kern, ts::Device::cpu());
    double first = seconds(t0, Clock::now());
    std::vector<double> cold;
    for (int r = 0; r < 5; ++r) {
      ts::clearCache();
      auto t1 = Clock::now();
      k = ts::compile(kern, ts::Device::cpu());
      cold.push_back(seconds(t1, Clock::now()));
    }
    std::sort(cold.begin(), cold.end());
#ifdef TESSERA_HAVE_OPENBLAS
    // The kernels OpenBLAS picked for this CPU (OPENBLAS_CORETYPE overrides:
    // Debian's build picks AVX2 Haswell kernels on AVX-512 hosts, where
    // OPENBLAS_CORETYPE=SkylakeX is the fair peer).
    std::printf("OpenBLAS: %s\n", openblas_get_config());
#endif
    std::printf("gemm_f32 kernel, blocks %dx%dx%d, ISA %s\n", blocks.m, blocks.n, blocks.k,
                ts::codegen::hostIsa().c_str());
    std::printf("compile latency: first in process %.1f ms, cache cleared median %.1f ms (min %.1f)\n", first * 1e3,
                cold[cold.size() / 2] * 1e3, cold.front() * 1e3);

    std::printf("\n%-6s %-3s %-30s %-30s %-30s %-12s %-8s %-8s %-8s\n", "size", "thr", "tessera GF/s med [min,max]",
                "onednn GF/s med [min,max]", "openblas GF/s med [min,max]", "peak GF/s", "ts/dnnl", "ts/peak",
                "dnnl/pk");
    for (int th : threadCounts) {
      double peak = measurePeak(th);
      for (int n : sizes) {
        std::mt19937_64 rng(n);
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        std::vector<float> A(size_t(n) * n), B(size_t(n) * n), C(size_t(n) * n);
        for (auto& x : A) x = dist(rng);
        for (auto& x : B) x = dist(rng);
        double flops = 2.0 * n * n * double(n);
        auto fmt = [](const Stats& s) { return tessera::bench::str(s); };

        // Tessera.
        ts::Device dev = ts::Device::cpu();
        ts::Buffer dA = dev.upload(ts::DType::F32, A), dB = dev.upload(ts::DType::F32, B);
        ts::Buffer dC = dev.alloc(ts::DType::F32, C.size());
        ts::LaunchOptions lo;
        lo.threads = unsigned(th);
        ts::Dim3 grid = ex::gemmGrid(blocks, n, n);
        auto runTs = [&] { k.launchWith(grid, {dC, dA, dB, int32_t(n), int32_t(n), int32_t(n)}, lo); };
        runTs();
        Stats sTs;
        if (verify("tessera", A, B, dC.read<float>(), n)) sTs = timeRuns(runTs, reps, flops);

        Stats sDnnl, sBlas;
#ifdef TESSERA_HAVE_DNNL
        if (!tesseraOnly) {
          omp_set_num_threads(th);
          auto runDnnl = [&] {
            // Row-major: dnnl_sgemm takes row-major operands.
            dnnl_status_t st = dnnl_sgemm('N', 'N', n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
            if (st != dnnl_success) throw ts::Error("dnnl_sgemm failed");
          };
          std::fill(C.begin(), C.end(), NAN);
          runDnnl();
          if (verify("onednn", A, B, C, n)) sDnnl = timeRuns(runDnnl, reps, flops);
        }
#endif
#ifdef TESSERA_HAVE_OPENBLAS
        if (!tesseraOnly) {
          openblas_set_num_threads(th);
          auto runBlas = [&] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f,
                        C.data(), n);
          };
          std::fill(C.begin(), C.end(), NAN);
          runBlas();
          if (verify("openblas", A, B, C, n)) sBlas = timeRuns(runBlas, reps, flops);
        }
#endif
        char r1[16] = "-", r2[16] = "-", r3[16] = "-";
        if (sDnnl.median > 0 && sTs.median > 0) std::snprintf(r1, sizeof r1, "%.2f", sTs.median / sDnnl.median);
        if (sTs.median > 0) std::snprintf(r2, sizeof r2, "%.2f", sTs.median / peak);
        if (sDnnl.median > 0) std::snprintf(r3, sizeof r3, "%.2f", sDnnl.median / peak);
        std::printf("%-6d %-3d %-30s %-30s %-30s %-12.1f %-8s %-8s %-8s\n", n, th, fmt(sTs).c_str(), fmt(sDnnl).c_str(),
                    fmt(sBlas).c_str(), peak, r1, r2, r3);
        std::fflush(stdout);
      }
    }
#ifndef TESSERA_HAVE_DNNL
    std::printf("(built without oneDNN: libdnnl-dev / OpenMP not found)\n");
#endif
#ifndef TESSERA_HAVE_OPENBLAS
    std::printf("(built without OpenBLAS: libopenblas-dev not found)\n");
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

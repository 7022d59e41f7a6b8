// MoE grouped GEMM benchmark on the CPU: the moe_grouped_gemm example
// (examples/moe_grouped_gemm.cpp: all experts in one launch, tokens sorted
// by expert, f16 inputs, f32 accumulation, f16 out) against oneDNN with
// one dnnl_sgemm per expert (f32 copies of the same inputs, f32 out), the
// way a framework without a grouped kernel runs the layer.
//
// The routing is the example's: each token to a random expert. Both
// results are checked on sampled entries against a double reference from
// the f16 values before anything is timed; then one warm-up and `reps`
// timed runs, reported as median [min, max] GFLOP/s (2 tokens K N flops).
// Threads: the same count for both (LaunchOptions::threads, OpenMP).
//
// Usage: tessera_moe_bench [--shape tokens,experts,K,N] [--threads 2] [--reps 7]
//                          [--blocks 64,128,64]
#include <algorithm>
#include <climits>
#include <optional>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/CommandLine.h"
#include "gflops.h"
#include "registry.h"
#include "support.h"

#ifdef TESSERA_HAVE_DNNL
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>
#endif

namespace ts = tessera;
namespace ex = tessera::examples;

using tessera::bench::Stats;
using tessera::bench::str;

const tessera::tools::cli::Command kProgram{
    "tessera_moe_bench",
    "  tessera_moe_bench [--shape tokens,experts,K,N] [--threads 2] [--reps 7] [--blocks 64,128,64]\n",
    {{"--shape", "tokens,experts,K,N"},
     {"--threads", "a thread count"},
     {"--reps", "a count of timed runs"},
     {"--blocks", "BLOCK_M,BLOCK_N,BLOCK_K"}},
    0,
    0,
    "",
    nullptr,
    [] {
      return std::string(
          "the MoE grouped GEMM example (every expert in one launch) against one oneDNN sgemm per\n"
          "expert, both checked against a double reference first; GFLOP/s as median [min, max]\n"
          "  --shape T,E,K,N     tokens, experts, K and N (default 4096,8,1024,1024; AxBxCxD too)\n"
          "  --threads N         threads of both (default 2)\n"
          "  --reps N            timed runs (default 7)\n"
          "  --blocks M,N,K      the kernel's blocks (default 64,128,64)\n");
    }};

int main(int argc, char** argv) {
  const tessera::tools::cli::Args args = tessera::tools::cli::parseProgram(kProgram, argc, argv);
  const std::vector<int64_t> shape = args.shape("--shape").value_or(std::vector<int64_t>{4096, 8, 1024, 1024});
  if (shape.size() != 4) args.fail("--shape expects tokens,experts,K,N (four sizes)");
  const int threads = static_cast<int>(args.integer("--threads", "a thread count 1..1024", 1, 1024).value_or(2));
  const int reps = static_cast<int>(args.integer("--reps", "a count >= 1", 1, INT32_MAX).value_or(7));
  // The example's CPU default (moeBlocks there).
  const ex::GemmBlocks blocks = tessera::bench::blocksFlag(args, {64, 128, 64, 0});
  try {
    const int64_t T = shape[0], E = shape[1], K = shape[2], N = shape[3];
    std::mt19937_64 rng(1);
    std::vector<int32_t> count(size_t(E), 0);
    for (int64_t t = 0; t < T; ++t) ++count[size_t(std::uniform_int_distribution<int64_t>(0, E - 1)(rng))];
    std::vector<int32_t> offsets(size_t(E + 1), 0);
    for (int64_t e = 0; e < E; ++e) offsets[size_t(e + 1)] = offsets[size_t(e)] + count[size_t(e)];
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<uint16_t> x(size_t(T * K)), w(size_t(E * K * N));
    for (auto& v : x) v = ex::toHalf(dist(rng));
    for (auto& v : w) v = ex::toHalf(dist(rng));
    std::vector<float> xf(x.size()), wf(w.size()), cf(size_t(T * N));
    for (size_t i = 0; i < x.size(); ++i) xf[i] = ex::fromHalf(x[i]);
    for (size_t i = 0; i < w.size(); ++i) wf[i] = ex::fromHalf(w[i]);
    const double flops = 2.0 * double(T) * double(K) * double(N);

    // Sampled entries against a double reference; tolerance as the
    // example's check (f32 accumulation, then f16 rounding for Tessera).
    std::vector<int64_t> rows, cols;
    for (int s = 0; s < 256; ++s) {
      rows.push_back(std::uniform_int_distribution<int64_t>(0, T - 1)(rng));
      cols.push_back(std::uniform_int_distribution<int64_t>(0, N - 1)(rng));
    }
    auto verify = [&](const char* who, auto&& at) {
      for (size_t s = 0; s < rows.size(); ++s) {
        const int64_t t = rows[s], n = cols[s];
        const int64_t e = std::upper_bound(offsets.begin(), offsets.end(), int32_t(t)) - offsets.begin() - 1;
        double want = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(xf[size_t(t * K + k)]) * wf[size_t((e * K + k) * N + n)];
          want += p;
          mag += std::fabs(p);
        }
        const double got = at(t, n);
        if (!(std::fabs(got - want) <= 2.0 * double(K) * std::ldexp(mag, -24) + std::ldexp(std::fabs(want), -10)))
          return std::fprintf(stderr, "%s: wrong at (%lld, %lld): got %g, want %g\n", who, (long long)t, (long long)n,
                              got, want),
                 false;
      }
      return true;
    };

    ts::Device dev = ts::Device::cpu();
    ts::CompiledKernel k = ts::compile(ex::moeGroupedGemm(blocks, false), dev);
    ts::Buffer dOut = dev.alloc(ts::DType::F16, size_t(T * N));
    ts::Buffer dx = dev.upload(ts::DType::F16, x), dw = dev.upload(ts::DType::F16, w);
    ts::Buffer dUp = dev.upload(ts::DType::F16, std::vector<uint16_t>{0});
    ts::Buffer dOff = dev.upload(ts::DType::I32, offsets);
    ts::LaunchOptions lo;
    lo.threads = unsigned(threads);
    const ts::Dim3 grid = ex::moeGrid(blocks, T, E, N);
    auto runTs = [&] { k.launchWith(grid, {dOut, dx, dw, dUp, dOff, int32_t(E), int32_t(N), int32_t(K)}, lo); };
    runTs();
    Stats sTs;
    {
      std::vector<uint16_t> out = dOut.read<uint16_t>();
      if (verify("tessera", [&](int64_t t, int64_t n) { return double(ex::fromHalf(out[size_t(t * N + n)])); }))
        sTs = tessera::bench::timeRuns(runTs, reps, flops, /*warmUp=*/false);
    }
    Stats sDnnl;
#ifdef TESSERA_HAVE_DNNL
    omp_set_num_threads(threads);
    auto runDnnl = [&] {
      for (int64_t e = 0; e < E; ++e) {
        const int64_t m = count[size_t(e)], o = offsets[size_t(e)];
        if (m == 0) continue;
        if (dnnl_sgemm('N', 'N', m, N, K, 1.0f, xf.data() + o * K, K, wf.data() + e * K * N, N, 0.0f, cf.data() + o * N,
                       N) != dnnl_success)
          throw ts::Error("dnnl_sgemm failed");
      }
    };
    std::fill(cf.begin(), cf.end(), NAN);
    runDnnl();
    if (verify("onednn", [&](int64_t t, int64_t n) { return double(cf[size_t(t * N + n)]); }))
      sDnnl = tessera::bench::timeRuns(runDnnl, reps, flops, /*warmUp=*/false);
#endif
    std::printf("%-24s %-8s %-30s %-30s %-8s\n", "shape T,E,K,N", "threads", "tessera GF/s med [min,max]",
                "onednn per expert GF/s", "ts/dnnl");
    char shp[64], ratio[16] = "-";
    std::snprintf(shp, sizeof shp, "%lld,%lld,%lld,%lld", (long long)T, (long long)E, (long long)K, (long long)N);
    if (sTs.median > 0 && sDnnl.median > 0) std::snprintf(ratio, sizeof ratio, "%.2f", sTs.median / sDnnl.median);
    std::printf("%-24s %-8d %-30s %-30s %-8s\n", shp, threads, str(sTs).c_str(), str(sDnnl).c_str(), ratio);
#ifndef TESSERA_HAVE_DNNL
    std::printf("(built without oneDNN: libdnnl-dev / OpenMP not found)\n");
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

// Flash-attention forward on the CPU: the flash_attention examples
// (examples/flash_attention.cpp) against the loop nest a C++ programmer
// writes first, compiled with tessera_bench's flags (-O3 -march=native) and
// -ffast-math on this file, so that the peer's loops vectorise their
// reductions: scores, a max and a sum per query row, then the weighted sum
// of V, in f32 from the same f16 inputs, rows split over the same number of
// threads. Both outputs are checked against the example's double reference
// before anything is timed. FLOPs counted as 4 n_q n_k D per head (two
// matrix products), halved for the causal mask, for both.
#include "attention_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "registry.h"
#include "support.h"
#include "tessera/perf/Bench.h"
#include "tessera/tessera.h"

#ifdef TESSERA_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

#pragma GCC optimize("fast-math")

namespace tessera::bench {

namespace {

using Clock = std::chrono::steady_clock;

/// The peer: O = softmax(Q K^T / sqrt(D)) V per head and query row.
void attentionPeer(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                   std::vector<float>& o, int64_t heads, int64_t n, int64_t D, bool causal, unsigned threads) {
  const float scale = 1.0f / std::sqrt(float(D));
  auto work = [&](int64_t lo, int64_t hi) {
    std::vector<float> s(static_cast<size_t>(n));
    for (int64_t hr = lo; hr < hi; ++hr) {
      const int64_t h = hr / n, i = hr % n, last = causal ? i + 1 : n;
      const float* qi = &q[size_t(hr * D)];
      const float* kh = &k[size_t(h * n * D)];
      const float* vh = &v[size_t(h * n * D)];
      float m = -INFINITY;
      for (int64_t j = 0; j < last; ++j) {
        float d = 0;
        for (int64_t c = 0; c < D; ++c) d += qi[c] * kh[j * D + c];
        s[size_t(j)] = d * scale;
        m = std::max(m, s[size_t(j)]);
      }
      float l = 0;
      for (int64_t j = 0; j < last; ++j) l += (s[size_t(j)] = std::exp(s[size_t(j)] - m));
      float* oi = &o[size_t(hr * D)];
      for (int64_t c = 0; c < D; ++c) oi[c] = 0;
      for (int64_t j = 0; j < last; ++j)
        for (int64_t c = 0; c < D; ++c) oi[c] += s[size_t(j)] * vh[j * D + c];
      for (int64_t c = 0; c < D; ++c) oi[c] /= l;
    }
  };
  const int64_t rows = heads * n;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work, rows * t / threads, rows * (t + 1) / threads);
  for (auto& th : pool) th.join();
}

#ifdef TESSERA_HAVE_DNNL
/// The library peer: per head S = Q K^T / sqrt(D) and O = P V with
/// dnnl_sgemm, the row softmax (causal mask) between them in f32, rows over
/// the OpenMP threads oneDNN uses. It computes the whole n x n score matrix
/// (causal too) and writes it to memory: the matmul-based attention of a
/// framework without a fused kernel.
void attentionOneDnn(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                     std::vector<float>& o, std::vector<float>& s, int64_t heads, int64_t n, int64_t D, bool causal) {
  const float scale = 1.0f / std::sqrt(float(D));
  for (int64_t h = 0; h < heads; ++h) {
    const size_t off = size_t(h * n * D);
    if (dnnl_sgemm('N', 'T', n, n, D, scale, q.data() + off, D, k.data() + off, D, 0.0f, s.data(), n) != dnnl_success)
      throw Error("dnnl_sgemm failed");
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
      float* row = s.data() + i * n;
      const int64_t last = causal ? i + 1 : n;
      float m = -INFINITY;
      for (int64_t j = 0; j < last; ++j) m = std::max(m, row[j]);
      float l = 0;
      for (int64_t j = 0; j < last; ++j) l += row[j] = std::exp(row[j] - m);
      const float inv = 1.0f / l;
      for (int64_t j = 0; j < last; ++j) row[j] *= inv;
      for (int64_t j = last; j < n; ++j) row[j] = 0.0f;
    }
    if (dnnl_sgemm('N', 'N', n, D, n, 1.0f, s.data(), n, v.data() + off, D, 0.0f, o.data() + off, D) != dnnl_success)
      throw Error("dnnl_sgemm failed");
  }
}
#endif

struct Timing {
  double median, min, max;
};

Timing timePeer(int reps, const std::function<void()>& fn) {
  fn();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  perf::Stats s = perf::summarize(t);
  return {s.median, s.min, s.max};
}

}  // namespace

void attentionBench(int reps) {
  Device dev = Device::cpu();
  const unsigned threads = dev.defaultThreads();
  std::printf("\nflash-attention forward, f16 [heads, n, D] in, on %s (median [min, max] of %d)\n", dev.name().c_str(),
              reps);
  std::printf("%-34s %26s %10s %26s %10s %7s %26s %10s %7s\n", "shape", "Tessera ms", "GFLOP/s", "C++ loop nest ms",
              "GFLOP/s", "ratio", "oneDNN sgemm+softmax ms", "GFLOP/s", "ratio");
#ifdef TESSERA_HAVE_DNNL
  omp_set_num_threads(int(threads));
#endif
  for (bool causal : {false, true})
    for (int64_t n : {512, 2048}) {
      const int64_t heads = 8, D = 64;
      examples::RunContext ctx;
      ctx.device = dev;
      ctx.shape = {heads, n, D};
      examples::Launch l = examples::prepareAttention(ctx, causal, examples::attentionDefaultBlocks(dev));
      CompiledKernel k = compile(l.kernel, dev);
      const Dim3 grid = examples::launchGrid(l, k);
      k.launchWith(grid, l.args, {});
      examples::CheckResult ok = l.check();
      // The peer on the same inputs, as f32: the f16 values the kernel read.
      auto halves = [&](size_t i) {
        std::vector<float> f;
        for (uint16_t h : l.args[i].buffer.read<uint16_t>()) f.push_back(examples::fromHalf(h));
        return f;
      };
      std::vector<float> q = halves(1), kk = halves(2), v = halves(3), o(q.size());
      attentionPeer(q, kk, v, o, heads, n, D, causal, threads);
      std::vector<float> got;
      for (uint16_t h : l.args[0].buffer.read<uint16_t>()) got.push_back(examples::fromHalf(h));
      double peerErr = 0;
      for (size_t i = 0; i < o.size(); ++i) peerErr = std::max(peerErr, double(std::fabs(o[i] - got[i])));
      if (!ok.ok || !(peerErr < 1e-2)) {
        std::printf("  CHECK FAILED: %s, peer differs by %.3g\n", ok.detail.c_str(), peerErr);
        continue;
      }
      perf::BenchOptions bo;
      bo.minReps = reps;
      perf::BenchResult r = perf::benchmark(k, grid, l.args, bo);
      Timing p = timePeer(reps, [&] { attentionPeer(q, kk, v, o, heads, n, D, causal, threads); });
      const double flops = 4.0 * double(heads) * double(n) * double(n) * double(D) * (causal ? 0.5 : 1.0);
      char shape[64], ts[64], pc[64];
      std::snprintf(shape, sizeof shape, "%lldx%lldx%lld%s", (long long)heads, (long long)n, (long long)D,
                    causal ? " causal" : "");
      std::snprintf(ts, sizeof ts, "%.2f [%.2f, %.2f]", r.stats.median * 1e3, r.stats.min * 1e3, r.stats.max * 1e3);
      std::snprintf(pc, sizeof pc, "%.2f [%.2f, %.2f]", p.median * 1e3, p.min * 1e3, p.max * 1e3);
      char dc[64] = "-", dg[32] = "-", dr[32] = "-";
#ifdef TESSERA_HAVE_DNNL
      {
        std::vector<float> od(q.size()), sc(size_t(n * n));
        attentionOneDnn(q, kk, v, od, sc, heads, n, D, causal);
        double dErr = 0;
        for (size_t i = 0; i < od.size(); ++i) dErr = std::max(dErr, double(std::fabs(od[i] - got[i])));
        if (dErr < 1e-2) {
          Timing d = timePeer(reps, [&] { attentionOneDnn(q, kk, v, od, sc, heads, n, D, causal); });
          std::snprintf(dc, sizeof dc, "%.2f [%.2f, %.2f]", d.median * 1e3, d.min * 1e3, d.max * 1e3);
          std::snprintf(dg, sizeof dg, "%.1f", flops / d.median * 1e-9);
          std::snprintf(dr, sizeof dr, "%.2f", d.median / r.stats.median);
        } else {
          std::snprintf(dc, sizeof dc, "CHECK FAILED (%.3g)", dErr);
        }
      }
#endif
      std::printf("%-34s %26s %10.1f %26s %10.1f %7.2f %26s %10s %7s\n", shape, ts, flops / r.stats.median * 1e-9, pc,
                  flops / p.median * 1e-9, p.median / r.stats.median, dc, dg, dr);
    }
}

}  // namespace tessera::bench

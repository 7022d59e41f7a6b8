// gemm_f32: C = act(A @ B + bias), A M x K, B K x N, bias N, all f32.
//
// The output is cut into BLOCK_M x BLOCK_N tiles of C, handed out to the
// programs by a tile schedule (gemmTiles: ts::for_tiles in bands of 8 tile
// rows, persistent on GPUs; docs/gemm.md). Each tile walks K in steps of BLOCK_K,
// loading a BLOCK_M x BLOCK_K tile of A and a BLOCK_K x BLOCK_N tile of B
// (masked: lanes outside the matrices read 0, which adds nothing to the
// dot) and accumulating their product into an f32 tile carried by the loop.
// The epilogue adds the bias row, applies the activation and stores the
// tile under the (row < M) & (col < N) mask.
//
// Shape: {M, N, K} or {M, N, K, act} with act 0 = none, 1 = ReLU, 2 = GELU
// (exact erf form); default {300, 200, 150} with GELU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel gemmF32(GemmBlocks B, Activation act, bool withBias, const char* name) {
  // The body, shared by the signatures with and without bias.
  auto body = [=](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b, const ts::Tensor* bias, ts::Int M,
                  ts::Int N, ts::Int K) {
    gemmTiles(B, M, N, [&](const ts::Tensor& row, const ts::Tensor& col) {  // BLOCK_M x 1, 1 x BLOCK_N
      auto rk = ts::arange(B.k);
      auto acc = ts::for_range(0, K, B.k, ts::zeros({B.m, B.n}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
        auto ka = ts::expand_dims(k0 + rk, 0);  // 1 x BLOCK_K: columns of A
        auto kb = ts::expand_dims(k0 + rk, 1);  // BLOCK_K x 1: rows of B
        auto ta = ts::load(a + row * K + ka, (row < M) & (ka < K));
        auto tb = ts::load(b + kb * N + col, (kb < K) & (col < N));
        return ts::dot(ta, tb, acc);
      });
      ts::Tensor y = acc;
      if (bias) y = y + ts::load(*bias + col, col < N);  // broadcast over the rows
      if (act == Activation::ReLU) y = ts::maximum(y, 0.0f);
      if (act == Activation::GELU) y = 0.5f * y * (1.0f + ts::erf(y * 0.70710678118654752440f));
      ts::store(c + row * N + col, y, (row < M) & (col < N));
    });
  };
  if (!withBias)
    return ts::kernel(name, {"c", "a", "b", "M", "N", "K"},
                      [=](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b, ts::Int M, ts::Int N,
                          ts::Int K) { body(c, a, b, nullptr, M, N, K); });
  return ts::kernel(name, {"c", "a", "b", "bias", "M", "N", "K"},
                    [=](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b, ts::Ptr<const float> bias,
                        ts::Int M, ts::Int N, ts::Int K) {
                      ts::Tensor bt = bias;
                      body(c, a, b, &bt, M, N, K);
                    });
}

namespace {

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{300, 200, 150, 2} : ctx.shape;
  if (s.size() < 3 || s.size() > 4 || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[0] * s[2] > (1 << 28) ||
      s[2] * s[1] > (1 << 28) || s[0] * s[1] > (1 << 28) || (s.size() == 4 && (s[3] < 0 || s[3] > 2)))
    throw UsageError(
        "gemm_f32: the shape is {M, N, K} or {M, N, K, act} (act 0 none, 1 relu, 2 gelu), each >= 1, "
        "every matrix at most 2^28 elements");
  int64_t M = s[0], N = s[1], K = s[2];
  int act = s.size() == 4 ? int(s[3]) : 2;
  std::mt19937_64 rng(ctx.seed);
  std::vector<float> a = randomVector(size_t(M * K), rng), b = randomVector(size_t(K * N), rng);
  std::vector<float> bias = randomVector(size_t(N), rng);

  GemmBlocks B = gemmBlocksFor(ctx);
  Buffer da = ctx.device.upload(DType::F32, a), db = ctx.device.upload(DType::F32, b);
  Buffer dbias = ctx.device.upload(DType::F32, bias);
  Buffer dc = ctx.device.alloc(DType::F32, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Dim3 grid = gemmGrid(B, M, N);
  Launch launch{gemmF32(B, Activation(act)), grid, {dc, da, db, dbias, int32_t(M), int32_t(N), int32_t(K)}, s};
  launch.persistent = gemmPersistent(B);
  launch.gemm = perf::GemmProblem{da, db, dc, M, N, K};

  // Tolerance: a sum of K + 1 f32 terms in any order is within
  // (K + 1) * 2^-24 * sum |terms| of the exact value (first-order bound,
  // doubled for margin); GELU and ReLU have slope <= 1.13, and erf in f32 adds
  // a few ulp of the result, hence the 1e-6 relative and the absolute floor.
  // A missing or doubled product term (|a b| ~ 0.25 on average) or a wrong
  // index is far outside this.
  launch.check = [dc, a = std::move(a), b = std::move(b), bias = std::move(bias), M, N, K, act] {
    GemmReference ref = gemmReference(
        M, N, K, [&](int64_t i, int64_t kk) { return a[size_t(i * K + kk)]; },
        [&](int64_t kk, int64_t j) { return b[size_t(kk * N + j)]; }, bias, act);
    const double factor = 2.0 * double(K + 1) * std::ldexp(1.0, -24);
    return compareWith(
        dc.read<float>(), ref.want, factor, "c",
        "|got - want| <= 1.2 f sum_k |a b| + 1e-6 |want| + 1e-6, f = 2 (K + 1) 2^-24 = " + ElementCheck::fmt(factor),
        [&](size_t i) { return 1.2 * factor * ref.mag[i] + 1e-6 * std::fabs(ref.want[i]) + 1e-6; });
  };
  return launch;
}
}  // namespace

Example gemmF32Example() {
  Example e;
  e.name = "gemm_f32";
  e.summary = "C = act(A @ B + bias) in f32, BLOCK_M x BLOCK_N tiles over a 2-D grid, K loop with dot";
  e.kernel = [] { return gemmF32(gemmDefaultBlocks(Device::cpu()), Activation::GELU); };
  e.gpuKernel = [](const Target& t) { return gemmF32(gemmDefaultBlocks(t), Activation::GELU); };
  e.prepare = prepare;
  e.tuneSpace = [](const Target& t, const std::vector<int64_t>& shape) { return gemmTuneSpace(t, shape, false); };
  e.dtype = "f32";
  // Aligned, ragged in every dimension, a single element, and each activation.
  e.testShapes = {{64, 64, 64, 0}, {100, 77, 33, 1}, {1, 1, 1, 2}, {257, 129, 65, 2}, {128, 64, 200, 0}};
  return e;
}

}  // namespace tessera::examples

// Usage: gemm_f32 [--dump] [M N K [act]]
TESSERA_EXAMPLE_PROGRAM(gemmF32Example)

// gemm_f16: C (f16) = act(A (f16) @ B (f16) + bias (f32)), accumulated in f32.
//
// The tiling of gemm_f32 (one BLOCK_M x BLOCK_N tile of C per program, a K
// loop carrying an f32 accumulator): dot takes the f16 tiles and
// accumulates in f32 (each f16 x f16 product is exact in f32); the epilogue
// adds the bias row and applies the activation in f32, and only the final
// tile is rounded to f16 when stored.
//
// Two forms of the K loop (gemmMainLoop, examples/support.h), chosen by
// GemmBlocks::stages:
//  * GPU (stages >= 1): software-pipelined. ts::for_pipelined keeps `stages`
//    A and B tiles in flight in shared memory (ts::stage_copy: cp.async on
//    NVPTX sm_80+ where the launch proves the rows 16-byte aligned,
//    register-staged loads with deferred LDS stores on AMDGPU), so the
//    global loads of iteration k + stages - 1 overlap the tensor-core dot of
//    iteration k (docs/pipelining.md).
//  * CPU (stages = 0): plain masked loads in a for_range. The CPU lowers a
//    pipelined copy synchronously into a stack buffer and then loads the
//    tile from it: one extra copy of every tile per iteration for no
//    overlap (one thread, no asynchronous copy engine), while the plain
//    loads go straight into the dot's packed operand layouts
//    (docs/gemm.md). Hence two kernels, one loop body.
//
// Shape: {M, N, K} or {M, N, K, act} with act 0 = none, 1 = ReLU, 2 = GELU
// (exact erf form); default {300, 200, 150} with GELU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel gemmF16(GemmBlocks B, Activation act) {
  return ts::kernel(
      "gemm_f16", {"c", "a", "b", "bias", "M", "N", "K"},
      [=](ts::Ptr<ts::half> c, ts::Ptr<const ts::half> a, ts::Ptr<const ts::half> b, ts::Ptr<const float> bias,
          ts::Int M, ts::Int N, ts::Int K) {
        gemmTiles(B, M, N, [&](const ts::Tensor& row, const ts::Tensor& col) {  // BLOCK_M x 1, 1 x BLOCK_N
          ts::Tensor acc = gemmMainLoop(B, ts::f16, a, b, row, col, M, N, K);
          auto y = applyActivation(acc + ts::load(bias + col, col < N), act);  // bias broadcast over the rows
          ts::store(c + row * N + col, y.to(ts::f16), (row < M) & (col < N));
        });
      });
}

namespace {

Launch prepare(const RunContext& ctx) {
  GemmProblem P = gemmProblem(ctx, "gemm_f16");
  const int64_t M = P.M, N = P.N, K = P.K;
  std::mt19937_64 rng(ctx.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Inputs are f16 values; the reference uses exactly those values.
  std::vector<uint16_t> a(size_t(M * K)), b(size_t(K * N));
  for (auto& x : a) x = toHalf(dist(rng));
  for (auto& x : b) x = toHalf(dist(rng));
  std::vector<float> bias(static_cast<size_t>(N));
  for (auto& x : bias) x = dist(rng);

  GemmBlocks B = gemmBlocksFor(ctx);
  Buffer da = ctx.device.upload(DType::F16, a), db = ctx.device.upload(DType::F16, b);
  Buffer dbias = ctx.device.upload(DType::F32, bias);
  Buffer dc = ctx.device.alloc(DType::F16, size_t(M * N));
  dc.fillBytes(0xff);  // f16 NaN: an element the kernel fails to write cannot pass
  Dim3 grid = gemmGrid(B, M, N);
  Launch launch{
      gemmF16(B, Activation(P.act)), grid, {dc, da, db, dbias, int32_t(M), int32_t(N), int32_t(K)}, {M, N, K, P.act}};
  launch.persistent = gemmPersistent(B);
  launch.gemm = perf::GemmProblem{da, db, dc, M, N, K};

  // Reference in double: act(A @ B + bias) from the same f16 inputs.
  // Tolerance: the f32 accumulation of K + 1 terms is within
  // 2 (K + 1) 2^-24 sum|terms| of the exact sum (doubled first-order bound,
  // see gemm_f32); ReLU and GELU have slope <= 1.13 (hence 1.2x) and erf in
  // f32 adds a few ulp (1e-6 relative and absolute); then the rounding of
  // the result to f16: half an ulp, 2^-11 relative (1.01x for the error
  // already in the value being rounded), 2^-25 absolute in the subnormal
  // range. A missing or doubled product term (~0.25 on average) or a
  // missing bias (~0.5) is far outside it: the bound is ~0.003 for a result
  // of size ~5 at K = 150.
  launch.check = [dc, a = std::move(a), b = std::move(b), bias = std::move(bias), M, N, K, act = P.act] {
    std::vector<uint16_t> got = dc.read<uint16_t>();
    const double factor = 2.0 * double(K + 1) * std::ldexp(1.0, -24);
    ElementCheck check(factor, "c",
                       "|got - want| <= 1.2 f sum_k |a b| + (1e-6 + 1.01 2^-11) |want| + 1e-6 + 2^-25, "
                       "f = 2 (K + 1) 2^-24 = " +
                           ElementCheck::fmt(factor));
    GemmReference ref = gemmReference(
        M, N, K, [&](int64_t i, int64_t kk) { return fromHalf(a[size_t(i * K + kk)]); },
        [&](int64_t kk, int64_t j) { return fromHalf(b[size_t(kk * N + j)]); }, bias, act);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = ref.want[size_t(i * N + j)], mag = ref.mag[size_t(i * N + j)];
        double g = fromHalf(got[size_t(i * N + j)]);
        double bound = 1.2 * factor * mag + 1e-6 * std::fabs(want) + 1e-6 + std::ldexp(std::fabs(want), -11) * 1.01 +
                       std::ldexp(1.0, -25);
        check(g, want, bound, [&] { return "at (" + std::to_string(i) + ", " + std::to_string(j) + ")"; });
      }
    return check.result();
  };
  return launch;
}
}  // namespace

Example gemmF16Example() {
  Example e;
  e.name = "gemm_f16";
  e.summary = "C (f16) = act(A (f16) @ B (f16) + bias), f32 accumulation; GPU: K loop pipelined through shared memory";
  e.kernel = [] { return gemmF16(gemmDefaultBlocks(Device::cpu()), Activation::GELU); };
  e.gpuKernel = [](const Target& t) { return gemmF16(gemmDefaultBlocks(t), Activation::GELU); };
  e.prepare = prepare;
  e.tuneSpace = [](const Target& t, const std::vector<int64_t>& shape) { return gemmTuneSpace(t, shape, true); };
  e.dtype = "f16";
  // Aligned (N and K multiples of 16: cp.async on the emulated sm_80),
  // ragged in every dimension, a single element, K shorter than the
  // pipeline, and each activation.
  e.testShapes = {{64, 64, 64, 0}, {100, 77, 33, 1}, {1, 1, 1, 2}, {257, 129, 65, 2}, {45, 64, 48, 1}};
  return e;
}

}  // namespace tessera::examples

// Usage: gemm_f16 [--dump] [M N K [act]]
TESSERA_EXAMPLE_PROGRAM(gemmF16Example)

// gemm_bf16: C (f32) = act(A (bf16) @ B (bf16) + bias (f32)), accumulated in f32.
//
// The tiling of gemm_f32 (one BLOCK_M x BLOCK_N tile of C per program, a K
// loop carrying an f32 accumulator): dot takes the bf16 tiles and
// accumulates in f32 (each bf16 x bf16 product is exact in f32); the
// epilogue adds the bias row and applies the activation; the output stays
// f32, as in mixed-precision training.
//
// Two forms of the K loop, chosen by GemmBlocks::stages (as gemm_f16):
//  * GPU (stages >= 1): software-pipelined. ts::for_pipelined keeps `stages`
//    A and B tiles in flight in shared memory (ts::stage_copy: cp.async on
//    NVPTX sm_80+ where the launch proves the rows 16-byte aligned,
//    register-staged loads with deferred LDS stores on AMDGPU), so the
//    global loads of iteration k + stages - 1 overlap the tensor-core dot of
//    iteration k (docs/pipelining.md).
//  * CPU (stages = 0): plain masked loads in a for_range. The CPU lowers a
//    pipelined copy synchronously into a stack buffer and then loads the
//    tile from it: one extra copy of every tile per iteration for no
//    overlap, while the plain loads go straight into the dot's packed
//    operand layouts (docs/gemm.md). Hence two kernels, one loop body.
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

Kernel gemmBF16(GemmBlocks B, Activation act) {
  return ts::kernel(
      "gemm_bf16", {"c", "a", "b", "bias", "M", "N", "K"},
      [=](ts::Ptr<float> c, ts::Ptr<const ts::bfloat16> a, ts::Ptr<const ts::bfloat16> b, ts::Ptr<const float> bias,
          ts::Int M, ts::Int N, ts::Int K) {
        gemmTiles(B, M, N, [&](const ts::Tensor& row, const ts::Tensor& col) {  // BLOCK_M x 1, 1 x BLOCK_N
          ts::Tensor acc = gemmMainLoop(B, ts::bf16, a, b, row, col, M, N, K);
          auto y = applyActivation(acc + ts::load(bias + col, col < N), act);  // bias broadcast over the rows
          ts::store(c + row * N + col, y, (row < M) & (col < N));
        });
      });
}

namespace {

Launch prepare(const RunContext& ctx) {
  GemmProblem P = gemmProblem(ctx, "gemm_bf16");
  const int64_t M = P.M, N = P.N, K = P.K;
  std::mt19937_64 rng(ctx.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Inputs are bf16 values; the reference uses exactly those values.
  std::vector<uint16_t> a(size_t(M * K)), b(size_t(K * N));
  for (auto& x : a) x = toBf16(dist(rng));
  for (auto& x : b) x = toBf16(dist(rng));
  std::vector<float> bias(static_cast<size_t>(N));
  for (auto& x : bias) x = dist(rng);

  GemmBlocks B = gemmBlocksFor(ctx);
  Buffer da = ctx.device.upload(DType::BF16, a), db = ctx.device.upload(DType::BF16, b);
  Buffer dbias = ctx.device.upload(DType::F32, bias);
  Buffer dc = ctx.device.alloc(DType::F32, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Dim3 grid = gemmGrid(B, M, N);
  Launch launch{
      gemmBF16(B, Activation(P.act)), grid, {dc, da, db, dbias, int32_t(M), int32_t(N), int32_t(K)}, {M, N, K, P.act}};
  launch.persistent = gemmPersistent(B);
  launch.gemm = perf::GemmProblem{da, db, dc, M, N, K};

  // Reference in double: act(A @ B + bias) from the same bf16 inputs.
  // Tolerance as gemm_f32: the f32 accumulation of K + 1 terms is within
  // 2 (K + 1) 2^-24 sum|terms| of the exact sum (doubled first-order bound);
  // ReLU and GELU have slope <= 1.13 (hence 1.2x) and erf in f32 adds a few
  // ulp (1e-6 relative and absolute floor). A missing or doubled product
  // term (~0.25 on average) or a missing bias (~0.5) is far outside it.
  launch.check = [dc, a = std::move(a), b = std::move(b), bias = std::move(bias), M, N, K, act = P.act] {
    std::vector<float> got = dc.read<float>();
    const double factor = 2.0 * double(K + 1) * std::ldexp(1.0, -24);
    ElementCheck check(
        factor, "c",
        "|got - want| <= 1.2 f sum_k |a b| + 1e-6 |want| + 1e-6, f = 2 (K + 1) 2^-24 = " + ElementCheck::fmt(factor));
    GemmReference ref = gemmReference(
        M, N, K, [&](int64_t i, int64_t kk) { return bf16Value(a[size_t(i * K + kk)]); },
        [&](int64_t kk, int64_t j) { return bf16Value(b[size_t(kk * N + j)]); }, bias, act);
    checkMatrix(
        check, M, N, [&](int64_t i, int64_t j) { return double(got[size_t(i * N + j)]); },
        [&](int64_t i, int64_t j) { return ref.want[size_t(i * N + j)]; },
        [&](int64_t i, int64_t j, double want) {
          return 1.2 * factor * ref.mag[size_t(i * N + j)] + 1e-6 * std::fabs(want) + 1e-6;
        });
    return check.result();
  };
  return launch;
}
}  // namespace

Example gemmBF16Example() {
  Example e;
  e.name = "gemm_bf16";
  e.summary =
      "C (f32) = act(A (bf16) @ B (bf16) + bias), f32 accumulation; GPU: K loop pipelined through shared memory";
  e.kernel = [] { return gemmBF16(gemmDefaultBlocks(Device::cpu()), Activation::GELU); };
  e.gpuKernel = [](const Target& t) { return gemmBF16(gemmDefaultBlocks(t), Activation::GELU); };
  e.prepare = prepare;
  e.tuneSpace = [](const Target& t, const std::vector<int64_t>& shape) { return gemmTuneSpace(t, shape, true); };
  e.dtype = "bf16";
  // Aligned (N and K multiples of 16: cp.async on the emulated sm_80),
  // ragged in every dimension, a single element, K shorter than the
  // pipeline, and each activation.
  e.testShapes = {{64, 64, 64, 1}, {100, 77, 33, 0}, {1, 1, 1, 2}, {257, 129, 65, 2}, {45, 64, 48, 0}};
  return e;
}

}  // namespace tessera::examples

// Usage: gemm_bf16 [--dump] [M N K [act]]
TESSERA_EXAMPLE_PROGRAM(gemmBF16Example)

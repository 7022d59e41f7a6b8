// gemm_int8: C (bf16) = diag(scale_a) (A (i8) @ B (i8)) diag(scale_b): the
// W8A8 GEMM of int8 inference, with a scale per row of A (per token) and
// per column of B (per output channel), accumulated exactly in i32.
//
// The K loop is gemm_f16's (gemmMainLoop) with an i32 accumulator:
// pipelined through shared memory on GPUs, where the dot runs on the
// integer tensor cores (mma.sync m16n8k32 s8 on sm_80+, MFMA i8 on
// gfx90a/gfx942, WMMA iu8 on gfx1100), plain loads on the CPU. The
// epilogue converts the exact i32 sums to f32, applies both scales and
// rounds once to bf16.
//
// Shape: {M, N, K}; default {300, 200, 150}. K is at most 65536, so no i32
// sum can wrap (127 * 128 * 65536 < 2^31).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel gemmInt8(GemmBlocks B) {
  return ts::kernel(
      "gemm_int8", {"c", "a", "b", "scale_a", "scale_b", "M", "N", "K"},
      [=](ts::Ptr<ts::bfloat16> c, ts::Ptr<const int8_t> a, ts::Ptr<const int8_t> b, ts::Ptr<const float> scaleA,
          ts::Ptr<const float> scaleB, ts::Int M, ts::Int N, ts::Int K) {
        gemmTiles(B, M, N, [&](const ts::Tensor& row, const ts::Tensor& col) {  // BLOCK_M x 1, 1 x BLOCK_N
          ts::Tensor acc = gemmMainLoop(B, ts::i8, a, b, row, col, M, N, K);    // exact i32 sums
          auto sa = ts::load(scaleA + row, row < M);                            // per row of A
          auto sb = ts::load(scaleB + col, col < N);                            // per column of B
          ts::store(c + row * N + col, (acc.to(ts::f32) * sa * sb).to(ts::bf16), (row < M) & (col < N));
        });
      });
}

namespace {

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{300, 200, 150} : ctx.shape;
  if (s.size() != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[2] > 65536 || s[0] * s[2] > (1 << 28) ||
      s[2] * s[1] > (1 << 28) || s[0] * s[1] > (1 << 28))
    throw UsageError(
        "gemm_int8: shape is {M, N, K}, each at least 1, K at most 65536 (and each matrix under 2^28 "
        "elements)");
  const int64_t M = s[0], N = s[1], K = s[2];
  std::mt19937_64 rng(ctx.seed);
  // The whole i8 range, -128 and 127 included.
  std::uniform_int_distribution<int> q(-128, 127);
  std::vector<int8_t> a(size_t(M * K)), b(size_t(K * N));
  for (auto& x : a) x = int8_t(q(rng));
  for (auto& x : b) x = int8_t(q(rng));
  std::uniform_real_distribution<float> sc(0.001f, 0.02f);
  std::vector<float> sa(static_cast<size_t>(M)), sb(static_cast<size_t>(N));
  for (auto& x : sa) x = sc(rng);
  for (auto& x : sb) x = sc(rng);

  GemmBlocks B = gemmBlocksFor(ctx);
  Buffer da = ctx.device.upload(DType::I8, a), db = ctx.device.upload(DType::I8, b);
  Buffer dsa = ctx.device.upload(DType::F32, sa), dsb = ctx.device.upload(DType::F32, sb);
  Buffer dc = ctx.device.alloc(DType::BF16, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Dim3 grid = gemmGrid(B, M, N);
  Launch launch{gemmInt8(B), grid, {dc, da, db, dsa, dsb, int32_t(M), int32_t(N), int32_t(K)}, {M, N, K}};
  launch.persistent = gemmPersistent(B);

  // Reference: the exact integer sum (int64), then both scales in double.
  // The kernel's i32 sum is exact; its conversion to f32 (exact below 2^24,
  // else within 2^-24 relative) and two f32 products add at most 3 * 2^-24
  // relative, the final bf16 rounding at most 2^-8. One wrong product (up to
  // 2^14 before scaling) is far outside it unless the sum is huge.
  launch.check = [dc, a = std::move(a), b = std::move(b), sa = std::move(sa), sb = std::move(sb), M, N, K] {
    std::vector<uint16_t> got = dc.read<uint16_t>();
    ElementCheck check(std::ldexp(1.0, -8), "c", "|got - want| <= (2^-8 + 3 2^-24) |want|");
    checkMatrix(
        check, M, N, [&](int64_t i, int64_t j) { return bf16Value(got[size_t(i * N + j)]); },
        [&](int64_t i, int64_t j) {
          int64_t sum = 0;
          for (int64_t kk = 0; kk < K; ++kk) sum += int64_t(a[size_t(i * K + kk)]) * int64_t(b[size_t(kk * N + j)]);
          return double(sum) * double(sa[size_t(i)]) * double(sb[size_t(j)]);
        },
        [](int64_t, int64_t, double want) {
          return std::fabs(want) * (std::ldexp(1.0, -8) + 3 * std::ldexp(1.0, -24)) + 1e-30;
        });
    return check.result();
  };
  return launch;
}
}  // namespace

Example gemmInt8Example() {
  Example e;
  e.name = "gemm_int8";
  e.summary = "C (bf16) = diag(scale_a) (A (i8) @ B (i8)) diag(scale_b), per-row and per-column scales, exact i32 sums";
  e.kernel = [] { return gemmInt8(gemmDefaultBlocks(Device::cpu())); };
  e.gpuKernel = [](const Target& t) { return gemmInt8(gemmDefaultBlocks(t)); };
  e.prepare = prepare;
  // Aligned (K a multiple of 32: whole m16n8k32 steps, 16-byte rows for
  // cp.async), ragged in every dimension, a single element, K shorter than
  // the pipeline; N = 72, whose rows are not 16-byte multiples, so only A
  // is a tensor copy on sm_90a+ (a launch with seven register arguments
  // before the tensor map's parameter).
  e.testShapes = {{64, 64, 64}, {100, 77, 33}, {1, 1, 1}, {257, 129, 65}, {45, 64, 96}, {45, 72, 64}};
  return e;
}

}  // namespace tessera::examples

// Usage: gemm_int8 [--dump] [M N K]
TESSERA_EXAMPLE_PROGRAM(gemmInt8Example)

// gemm_fp8: C (bf16) = scale_a * scale_b * (A (f8e4m3) @ B (f8e4m3)), with
// per-tensor scales, accumulated in f32: the forward GEMM of fp8 training
// and inference (the scales come from each tensor's amax and live on the
// device, so the kernel reads them).
//
// The K loop is gemm_f16's (gemmMainLoop): pipelined through shared memory
// on GPUs, where the fp8 tiles take half the bytes of f16 ones per stage;
// plain loads on the CPU. dot on fp8 operands: on sm_89 and later it runs
// on the fp8 tensor cores (mma.sync m16n8k32 .e4m3, wgmma on sm_90a), on
// gfx950 on its OCP fp8 MFMAs (v_mfma_f32_16x16x32_fp8_fp8 at the default
// 32x32x32 tiles; the f8f6f4 32x32x64 / 16x16x128 forms on tiles whose K
// allows); elsewhere (the CPU, sm_80/86, gfx90a, gfx942, whose fp8 MFMAs
// read the FNUZ formats, gfx1100) every e4m3 value is an f16 value, so the
// `widen-fp8-dots` pass casts the tiles to f16 after they leave shared
// memory and the dot runs on the f16 tensor cores with the same products. The epilogue scales in f32 and rounds once
// to bf16.
//
// Shape: {M, N, K}; default {300, 200, 150}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel gemmFP8(GemmBlocks B) {
  return ts::kernel("gemm_fp8", {"c", "a", "b", "scales", "M", "N", "K"},
                    [=](ts::Ptr<ts::bfloat16> c, ts::Ptr<const ts::float8_e4m3> a, ts::Ptr<const ts::float8_e4m3> b,
                        ts::Ptr<const float> scales, ts::Int M, ts::Int N, ts::Int K) {
                      gemmTiles(
                          B, M, N, [&](const ts::Tensor& row, const ts::Tensor& col) {  // BLOCK_M x 1, 1 x BLOCK_N
                            ts::Tensor acc = gemmMainLoop(B, ts::f8e4m3, a, b, row, col, M, N, K);
                            auto scale = ts::load(scales) * ts::load(scales + 1);  // per-tensor: scale_a * scale_b
                            ts::store(c + row * N + col, (acc * scale).to(ts::bf16), (row < M) & (col < N));
                          });
                    });
}

namespace {

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{300, 200, 150} : ctx.shape;
  if (s.size() != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[0] * s[2] > (1 << 28) || s[2] * s[1] > (1 << 28) ||
      s[0] * s[1] > (1 << 28))
    throw UsageError("gemm_fp8: shape is {M, N, K}, each at least 1 (and each matrix under 2^28 elements)");
  const int64_t M = s[0], N = s[1], K = s[2];
  std::mt19937_64 rng(ctx.seed);
  // Values spread over e4m3's range (0.01 to 400 in magnitude, both signs),
  // as quantised activations and weights are once divided by their scale.
  std::uniform_real_distribution<double> lg(std::log(0.01), std::log(400.0));
  std::bernoulli_distribution neg(0.5);
  auto code = [&] { return fp8Encode(DType::F8E4M3, (neg(rng) ? -1 : 1) * std::exp(lg(rng))); };
  std::vector<uint8_t> a(size_t(M * K)), b(size_t(K * N));
  for (auto& x : a) x = code();
  for (auto& x : b) x = code();
  const std::vector<float> scales = {0.0078125f * 1.5f, 0.00390625f * 1.25f};

  GemmBlocks B = gemmBlocksFor(ctx);
  Buffer da = ctx.device.upload(DType::F8E4M3, a), db = ctx.device.upload(DType::F8E4M3, b);
  Buffer ds = ctx.device.upload(DType::F32, scales);
  Buffer dc = ctx.device.alloc(DType::BF16, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Dim3 grid = gemmGrid(B, M, N);
  Launch launch{gemmFP8(B), grid, {dc, da, db, ds, int32_t(M), int32_t(N), int32_t(K)}, {M, N, K}};
  launch.persistent = gemmPersistent(B);

  // Reference in double from the decoded fp8 values (fp8Decode is exact).
  // Tolerance: the f32 accumulation of K terms is within 2 K 2^-24
  // sum|terms| of the exact sum (as gemm_bf16), times the scale, plus the
  // final rounding to bf16 (half an ulp: at most 2^-8 relative). A wrong or missing
  // product (~100 in magnitude before scaling) is far outside it.
  launch.check = [dc, a = std::move(a), b = std::move(b), scales, M, N, K] {
    std::vector<uint16_t> got = dc.read<uint16_t>();
    const double scale = double(scales[0]) * double(scales[1]);
    const double factor = 2.0 * double(K) * std::ldexp(1.0, -24);
    ElementCheck check(factor, "c",
                       "|got - want| <= f s sum_k |a b| + 2^-8 |want|, s the scales' product, f = 2 K 2^-24 = " +
                           ElementCheck::fmt(factor));
    GemmReference ref = gemmReference(
        M, N, K, [&](int64_t i, int64_t kk) { return fp8Decode(DType::F8E4M3, a[size_t(i * K + kk)]); },
        [&](int64_t kk, int64_t j) { return fp8Decode(DType::F8E4M3, b[size_t(kk * N + j)]); }, {}, 0);
    checkMatrix(
        check, M, N, [&](int64_t i, int64_t j) { return bf16Value(got[size_t(i * N + j)]); },
        [&](int64_t i, int64_t j) { return scale * ref.want[size_t(i * N + j)]; },
        [&](int64_t i, int64_t j, double want) {
          return factor * scale * ref.mag[size_t(i * N + j)] + std::ldexp(std::fabs(want), -8) + 1e-30;
        });
    return check.result();
  };
  return launch;
}
}  // namespace

Example gemmFP8Example() {
  Example e;
  e.name = "gemm_fp8";
  e.summary = "C (bf16) = scale_a scale_b (A (f8e4m3) @ B (f8e4m3)), per-tensor scales, f32 accumulation";
  e.kernel = [] { return gemmFP8(gemmDefaultBlocks(Device::cpu())); };
  e.gpuKernel = [](const Target& t) { return gemmFP8(gemmDefaultBlocks(t)); };
  e.prepare = prepare;
  // Aligned (K a multiple of 16: the fp8 rows are 16-byte aligned for
  // cp.async on the emulated sm_80), ragged in every dimension, a single
  // element, K shorter than the pipeline.
  e.testShapes = {{64, 64, 64}, {100, 77, 33}, {1, 1, 1}, {257, 129, 65}, {45, 64, 48}};
  return e;
}

}  // namespace tessera::examples

// Usage: gemm_fp8 [--dump] [M N K]
TESSERA_EXAMPLE_PROGRAM(gemmFP8Example)

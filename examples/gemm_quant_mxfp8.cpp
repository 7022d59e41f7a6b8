// gemm_quant_mxfp8: C (f32) = quantise(A) @ B^T, the activations A (f32)
// quantised to MXFP8 (e4m3, blocks of 32 along K with e8m0 scales) inside
// the GEMM's K loop, tile by tile, and multiplied by weights B already held
// in MXFP8 ([N, K] codes and scales, as gemm_mxfp8 takes them): one pass
// over A instead of a quantisation kernel writing codes and scales for a
// GEMM to read back.
//
// The quantisation is examples/block_scaled.h's quantiseTile, the one the
// mxfp8_quantize kernel stores, so the GEMM multiplies exactly the codes and
// scales the plain C++ quantiser gives; the reference is the double GEMM of
// those quantised values. Shape: {M, N, K}; default {300, 200, 150}.
#include "block_scaled.h"

namespace tessera::examples {

namespace {

constexpr ScaledFormat kFormat = ScaledFormat::mxfp8_e4m3;

/// One BLOCK_M x BLOCK_N tile of C a program; BLOCK_K a multiple of 32.
/// Arguments: c, x (A, f32 M x K), b, b_scale, M, N, K.
Kernel gemmQuantMXFP8(GemmBlocks B) {
  const int bs = scaledElements(kFormat).block;
  return kernel(
      "gemm_quant_mxfp8", {"c", "x", "b", "b_scale", "M", "N", "K"},
      [=](Ptr<float> c, Ptr<const float> x, Ptr<const uint8_t> b, Ptr<const uint8_t> bsc, Int M, Int N, Int K) {
        auto row = expand_dims(program_id(0) * B.m + arange(B.m), 1);   // rows of A
        auto rowB = expand_dims(program_id(1) * B.n + arange(B.n), 1);  // rows of B
        auto col = expand_dims(program_id(1) * B.n + arange(B.n), 0);   // columns of C
        Int kBlocks = (K + (bs - 1)) / bs;
        Tensor acc = for_range(0, K, B.k, zeros({B.m, B.n}, f32), [&](Int k0, Tensor acc) {
          auto kk = expand_dims(k0 + arange(B.k), 0);
          auto ks = expand_dims(k0 / bs + arange(B.k / bs), 0);
          // Past M and K: zeros, which quantise to code 0 in blocks
          // whose amax they do not change.
          auto xa = load(x + row * K + kk, (row < M) & (kk < K), 0.0f);
          const QuantisedTile qa = quantiseTile(xa, kFormat, Tensor{}, B.m, B.k);
          auto tb = load(b + rowB * K + kk, (rowB < N) & (kk < K));
          auto sb = load(bsc + rowB * kBlocks + ks, (rowB < N) & (ks < kBlocks));
          return dot_scaled(qa.codes, qa.scales, kFormat, tb, sb, kFormat, acc);
        });
        store(c + row * N + col, acc, (row < M) & (col < N));
      });
}

Launch prepare(const RunContext& ctx) {
  const std::vector<int64_t> s = scaledGemmShape(ctx, "gemm_quant_mxfp8");
  const int64_t M = s[0], N = s[1], K = s[2];
  std::mt19937_64 rng(ctx.seed);
  const std::vector<float> x = scaledGemmValues(rng, M * K);
  const Quantised qa = quantise(kFormat, x, M, K), qb = quantise(kFormat, scaledGemmValues(rng, N * K), N, K);
  const GemmBlocks B = scaledGemmBlocks(ctx, kFormat);
  const Device& dev = ctx.device;
  Buffer dc = dev.alloc(DType::F32, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Dim3 grid(uint32_t((M + B.m - 1) / B.m), uint32_t((N + B.n - 1) / B.n));
  std::vector<rt::Arg> args{dc, dev.upload(DType::F32, x), dev.upload(DType::U8, qb.codes),
                            dev.upload(DType::U8, qb.scales)};
  for (int64_t v : {M, N, K}) args.push_back(int32_t(v));
  Launch launch{gemmQuantMXFP8(B), grid, std::move(args), {M, N, K}};
  launch.check = scaledGemmCheck(dc, qa, qb, M, N, K, kFormat);
  return launch;
}

}  // namespace

Example gemmQuantMXFP8Example() {
  Example e;
  e.name = "gemm_quant_mxfp8";
  e.summary = "C (f32) = mxfp8(A (f32)) @ B^T (mxfp8 e4m3): the activations quantised in the K loop, f32 accumulation";
  e.kernel = [] {
    GemmBlocks b = gemmDefaultBlocks(Device::cpu());
    b.stages = 0;
    return gemmQuantMXFP8(b);
  };
  e.gpuKernel = [](const Target& t) {
    GemmBlocks b = gemmDefaultBlocks(t);
    b.stages = 0;
    b.warpSpecialized = false;
    return gemmQuantMXFP8(b);
  };
  e.prepare = prepare;
  e.testShapes = {{64, 64, 64}, {100, 77, 50}, {1, 1, 1}, {33, 40, 129}};
  e.dtype = "mxfp8_e4m3";
  return e;
}

}  // namespace tessera::examples

// Usage: gemm_quant_mxfp8 [--dump] [M N K]
TESSERA_EXAMPLE_PROGRAM(gemmQuantMXFP8Example)

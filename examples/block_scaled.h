// What the block-scaled examples share (gemm_mxfp8, gemm_mxfp4, gemm_nvfp4,
// mx_quantize): the GEMM kernel over ts::dot_scaled, its launch, and the
// plain C++ quantiser and double reference the checks use. Header-only, as
// support.h, because each example program links only its own source file.
//
// Layouts (docs/dot_scaled.md): A is M x K, row-major, its codes one a byte
// (mxfp8) or two a byte along K (mxfp4, nvfp4: element 2j in the low nibble
// of byte j), rows of ceil(K / 2) bytes; B is given K-major, N x K, the
// same way (the layout of nn.Linear weights and of the block-scaled matrix
// instructions); the scales are M x ceil(K / bs) and N x ceil(K / bs),
// row-major, bs = 32 (MX, e8m0) or 16 (nvfp4, f8e4m3). K need not be a
// multiple of bs: the last block is partial and the codes past K are 0
// (+0), which the kernel's masked loads also give.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support.h"

namespace tessera::examples {

/// The element dtype and the largest element's exponent (OCP MX v1.0,
/// 6.3: emax_elem) of a block-scaled format.
struct ScaledElements {
  DType elem;
  bool packed;
  int block;
  int emax;  // floor(log2(max element))
};
inline ScaledElements scaledElements(ScaledFormat f) {
  switch (f) {
    case ScaledFormat::mxfp8_e4m3: return {DType::F8E4M3, false, 32, 8};
    case ScaledFormat::mxfp8_e5m2: return {DType::F8E5M2, false, 32, 15};
    case ScaledFormat::mxfp6_e2m3: return {DType::F6E2M3, false, 32, 2};
    case ScaledFormat::mxfp6_e3m2: return {DType::F6E3M2, false, 32, 4};
    case ScaledFormat::mxfp4: return {DType::F4E2M1, true, 32, 2};
    case ScaledFormat::nvfp4: return {DType::F4E2M1, true, 16, 2};
  }
  return {DType::F4E2M1, true, 32, 2};
}

inline uint8_t encodeElement(DType t, double x) { return isFp8(t) ? fp8Encode(t, x) : mxElementEncode(t, x); }
inline double decodeElement(DType t, uint8_t c) { return isFp8(t) ? fp8Decode(t, c) : mxElementDecode(t, c); }

/// A matrix quantised to a block-scaled format: rows x K values, its codes
/// (rows x ceil(K / 2) bytes when packed, else rows x K), its block scales
/// (rows x ceil(K / bs) codes) and, for nvfp4, the per-tensor scale.
struct Quantised {
  ScaledFormat format;
  int64_t rows = 0, k = 0;
  std::vector<uint8_t> codes, scales;
  float tensorScale = 1.0f;
  int64_t rowBytes() const { return scaledElements(format).packed ? (k + 1) / 2 : k; }
  int64_t scaleCols() const { return (k + scaledElements(format).block - 1) / scaledElements(format).block; }
  uint8_t code(int64_t r, int64_t i) const {
    if (!scaledElements(format).packed) return codes[size_t(r * k + i)];
    const uint8_t byte = codes[size_t(r * rowBytes() + i / 2)];
    return (i & 1) ? uint8_t(byte >> 4) : uint8_t(byte & 15);
  }
  double scale(int64_t r, int64_t i) const {
    const uint8_t s = scales[size_t(r * scaleCols() + i / scaledElements(format).block)];
    // nvfp4: UE4M3, f8e4m3 without the sign bit (docs/dot_scaled.md).
    return format == ScaledFormat::nvfp4 ? double(fp8Decode(DType::F8E4M3, uint8_t(s & 0x7F))) : double(e8m0Decode(s));
  }
  /// The value element (r, i) stands for: code x block scale (x the
  /// per-tensor scale for nvfp4), in double (exact).
  double value(int64_t r, int64_t i) const {
    return decodeElement(scaledElements(format).elem, code(r, i)) * scale(r, i) *
           (format == ScaledFormat::nvfp4 ? double(tensorScale) : 1.0);
  }
};

/// The plain C++ quantiser, the reference of the quantisation kernels.
/// MX (OCP MX v1.0, 6.3): per block, X = 2^(floor(log2(amax)) - emax_elem)
/// as an e8m0 code (clamped to 2^-127..2^127; NaN 0xFF for a block with a
/// NaN or an infinity), elements = round(x / X) to nearest even,
/// saturating. NVFP4: the per-tensor scale s = amax(x) / (6 x 448) (1 for
/// an all-zero tensor), then per block of 16 the f8e4m3 scale
/// e4m3(amax_block / 6 / s), and elements round(x / (scale x s)); the
/// divisions in f32, as the quantisation kernels do them (a block whose
/// divisor is 0, all of it below f8e4m3's smallest value, is all zeros).
inline Quantised quantise(ScaledFormat f, const std::vector<float>& x, int64_t rows, int64_t K) {
  const ScaledElements e = scaledElements(f);
  Quantised q;
  q.format = f;
  q.rows = rows;
  q.k = K;
  q.codes.assign(size_t(rows * q.rowBytes()), 0);
  q.scales.assign(size_t(rows * q.scaleCols()), 0);
  if (f == ScaledFormat::nvfp4) {
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    q.tensorScale = amax > 0 ? amax / 2688.0f : 1.0f;  // 6 x 448, in f32 as the kernels compute it
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < q.scaleCols(); ++b) {
      const int64_t k0 = b * e.block, k1 = std::min(K, k0 + e.block);
      float amax = 0;
      bool finite = true;
      for (int64_t i = k0; i < k1; ++i) {
        const float v = x[size_t(r * K + i)];
        finite = finite && std::isfinite(v);
        amax = std::max(amax, std::fabs(v));
      }
      float s;  // the block's divisor, in f32 as the kernels compute it
      uint8_t sc;
      if (f == ScaledFormat::nvfp4) {
        sc = fp8Encode(DType::F8E4M3, amax / 6.0f / q.tensorScale);
        s = fp8Decode(DType::F8E4M3, sc) * q.tensorScale;
      } else if (!finite) {
        sc = kE8M0NaN;
        s = NAN;
      } else {
        // floor(log2(amax)) from the f32's exponent field (a subnormal or
        // zero amax: the smallest scale).
        uint32_t bits;
        std::memcpy(&bits, &amax, 4);
        const int code = int((bits >> 23) & 0xFF) - e.emax;
        sc = uint8_t(std::clamp(code, 0, 254));
        s = e8m0Decode(sc);
      }
      q.scales[size_t(r * q.scaleCols() + b)] = sc;
      for (int64_t i = k0; i < k1; ++i) {
        const float v = s > 0 ? x[size_t(r * K + i)] / s : 0.0f;
        const uint8_t c = encodeElement(e.elem, v);
        if (e.packed)
          q.codes[size_t(r * q.rowBytes() + i / 2)] |= uint8_t((c & 15) << ((i & 1) * 4));
        else
          q.codes[size_t(r * K + i)] = c;
      }
    }
  return q;
}

/// C (f32, M x N) = A @ B^T over block-scaled A (M x K) and B (N x K),
/// BLOCK_M x BLOCK_N tiles in the GEMMs' schedule (gemmSchedule), K in steps of BLOCK_K (a multiple of
/// the block size). Arguments: c, a, a_scale, b, b_scale, [tensor_scale
/// (nvfp4: one f32, the product of A's and B's per-tensor scales),] M, N, K.
inline Kernel gemmScaled(const char* kname, GemmBlocks B, ScaledFormat f) {
  const ScaledElements e = scaledElements(f);
  const int pk = e.packed ? 2 : 1, bs = e.block;
  auto body = [=](Ptr<float> c, Ptr<const uint8_t> a, Ptr<const uint8_t> as, Ptr<const uint8_t> b,
                  Ptr<const uint8_t> bsc, Tensor tscale, Int M, Int N, Int K) {
    for_tiles(gemmSchedule(B, M, N), [&](const Tile& t) {
      auto row = expand_dims(t.row0 + arange(B.m), 1);   // BLOCK_M x 1: rows of A
      auto rowB = expand_dims(t.col0 + arange(B.n), 1);  // BLOCK_N x 1: rows of B
      auto col = expand_dims(t.col0 + arange(B.n), 0);   // 1 x BLOCK_N: columns of C
      // Bytes of a row of codes, ceil(K / pk), written so that K's alignment
      // carries over to the rows (the loads vectorise): K / 2 + K % 2.
      Int kBytes = K / pk + K % pk, kBlocks = (K + (bs - 1)) / bs;
      Tensor zero = zeros({B.m, B.n}, f32);
      auto kb = [&](Int k0) { return expand_dims(k0 / pk + arange(B.k / pk), 0); };  // bytes of codes
      auto ks = [&](Int k0) { return expand_dims(k0 / bs + arange(B.k / bs), 0); };  // blocks
      auto scales = [&](Int k0, auto&& dot) {
        auto sa = load(as + row * kBlocks + ks(k0), (row < M) & (ks(k0) < kBlocks));
        auto sb = load(bsc + rowB * kBlocks + ks(k0), (rowB < N) & (ks(k0) < kBlocks));
        return dot(sa, sb);
      };
      Tensor acc;
      if (B.stages >= 1) {
        // The codes staged through shared memory by the K loop's pipeline,
        // B as given (N x K), which tcgen05 reads in place, K-major.
        auto sA = alloc_shared(u8, {B.m, B.k / pk}), sB = alloc_shared(u8, {B.n, B.k / pk});
        acc = for_pipelined(0, K, B.k, Pipeline(B.stages), zero, [&](Int k0, Tensor acc) {
          auto ta = stage_copy(sA, a + row * kBytes + kb(k0), (row < M) & (kb(k0) < kBytes));
          auto tb = stage_copy(sB, b + rowB * kBytes + kb(k0), (rowB < N) & (kb(k0) < kBytes));
          return scales(k0, [&](Tensor sa, Tensor sb) { return dot_scaled(ta.load(), sa, f, tb.load(), sb, f, acc); });
        });
      } else {
        acc = for_range(0, K, B.k, zero, [&](Int k0, Tensor acc) {
          auto ta = load(a + row * kBytes + kb(k0), (row < M) & (kb(k0) < kBytes));
          auto tb = load(b + rowB * kBytes + kb(k0), (rowB < N) & (kb(k0) < kBytes));
          return scales(k0, [&](Tensor sa, Tensor sb) { return dot_scaled(ta, sa, f, tb, sb, f, acc); });
        });
      }
      // NVFP4's per-tensor scale once, in the epilogue: dot_scaled's
      // tensor_scale would apply it at every K step (the same product, up to
      // rounding, for one more pass over the accumulator per step).
      if (tscale.valid()) acc = acc * tscale;
      store(c + row * N + col, acc, (row < M) & (col < N));
    });
  };
  if (f == ScaledFormat::nvfp4)
    return kernel(
        kname, {"c", "a", "a_scale", "b", "b_scale", "tensor_scale", "M", "N", "K"},
        [=](Ptr<float> c, Ptr<const uint8_t> a, Ptr<const uint8_t> as, Ptr<const uint8_t> b, Ptr<const uint8_t> bsc,
            Ptr<const float> ts, Int M, Int N, Int K) { body(c, a, as, b, bsc, load(ts), M, N, K); });
  return kernel(kname, {"c", "a", "a_scale", "b", "b_scale", "M", "N", "K"},
                [=](Ptr<float> c, Ptr<const uint8_t> a, Ptr<const uint8_t> as, Ptr<const uint8_t> b,
                    Ptr<const uint8_t> bsc, Int M, Int N, Int K) { body(c, a, as, b, bsc, Tensor{}, M, N, K); });
}

/// The NVIDIA row of `t` (or of the architecture an emu: target runs);
/// null elsewhere.
inline const GpuArch* nvidiaRow(const Target& t) {
  const bool nv = t.kind == Target::Kind::NVPTX || t.kind == Target::Kind::EmuNVPTX;
  return nv ? findGpuArch(GpuArch::Vendor::NVIDIA, t.arch) : nullptr;
}

/// Whether `t` multiplies format `f` on tcgen05's block-scaled MMA
/// (sm_100a, sm_103a: kind::mxf8f6f4 for MXFP8, mxf4 and mxf4nvf4 for the
/// packed fp4 formats; fp6 runs decomposed there).
inline bool tcgen05Scaled(const Target& t, ScaledFormat f) {
  const GpuArch* row = nvidiaRow(t);
  return row && row->tcgen05 && f != ScaledFormat::mxfp6_e2m3 && f != ScaledFormat::mxfp6_e3m2;
}

/// Whether `t` (or the architecture an emu: target runs) multiplies fp4
/// codes of format `f` packed, natively (Targets.def's columns): sm_120a's
/// block-scaled mma.sync (kind::mxf4 and mxf4nvf4), sm_100a/sm_103a's
/// tcgen05 (the same kinds), gfx950's f8f6f4 MFMAs (MXFP4 only: they take
/// e8m0 scales).
inline bool nativePackedFp4(const Target& t, ScaledFormat f) {
  if (!scaledElements(f).packed) return false;
  if (const GpuArch* row = nvidiaRow(t)) return row->mmaBlockScale || tcgen05Scaled(t, f);
  const bool amd = t.kind == Target::Kind::AMDGPU || t.kind == Target::Kind::EmuAMDGPU;
  const GpuArch* row = amd ? findGpuArch(GpuArch::Vendor::AMD, t.arch) : nullptr;
  return row && row->f8f6f4MfmaK > 0 && f == ScaledFormat::mxfp4;
}

/// The blocks of the block-scaled GEMMs on `t`, from the GEMM defaults `b`
/// (BLOCK_K 64 on the CPU, 32 on GPUs: a multiple of both block sizes):
/// unpipelined (but on tcgen05), and BLOCK_K 128 where the target multiplies the fp4
/// format packed (nativePackedFp4) unless the tune config sets it: those
/// instructions read 64 (sm_120a, tcgen05) or, on the default tile's 16 x
/// 16 wave tiles, 128 (gfx950's 16x16x128) codes a row per step, and a
/// step of 32 runs in containers or decomposed. Where fp4 is decomposed,
/// the step stays 32: its bf16 tiles of 128 would spill (sm_90a: 1.5
/// KiB). On tcgen05 (tcgen05Scaled), whose block-scaled MMA is M = 128
/// only, BLOCK_M 128 on the 4 warps, and one instruction's K a step (32
/// fp8 codes, 64 fp4: 32 bytes a row), unless the config sets them: the
/// unaligned variant's byte copies of a 128 x 128 fp8 step spill 18 KiB on
/// sm_100a, of a 128 x 64 one 3.7 KiB, of 128 x 32 none (255 registers; the
/// aligned variant 75);
/// there the K loop keeps the GEMM defaults' pipeline, its codes staged
/// through shared memory and read in place by the MMAs, which stay in
/// flight across iterations (the accumulator in tensor memory).
inline GemmBlocks scaledBlocks(GemmBlocks b, const Target& t, ScaledFormat f, bool configK = false,
                               bool configM = false) {
  if (!tcgen05Scaled(t, f)) b.stages = 0;
  b.warpSpecialized = false;
  if ((nativePackedFp4(t, f) || tcgen05Scaled(t, f)) && !configK) b.k = scaledElements(f).packed ? 64 : 32;
  if (tcgen05Scaled(t, f) && !configM) b.m = 128;
  return b;
}

/// The blocks of a block-scaled GEMM launch on ctx.device, with what
/// ctx.config sets.
inline GemmBlocks scaledGemmBlocks(const RunContext& ctx, ScaledFormat f) {
  return scaledBlocks(gemmBlocksFor(ctx), deviceTarget(ctx.device), f, ctx.config && ctx.config->has("BLOCK_K"),
                      ctx.config && ctx.config->has("BLOCK_M"));
}

/// The {M, N, K} of a block-scaled GEMM example (default {300, 200, 150}).
inline std::vector<int64_t> scaledGemmShape(const RunContext& ctx, const char* kname) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{300, 200, 150} : ctx.shape;
  if (s.size() != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[0] * s[2] > (1 << 28) || s[2] * s[1] > (1 << 28) ||
      s[0] * s[1] > (1 << 28))
    throw UsageError(std::string(kname) +
                     ": shape is {M, N, K}, each at least 1 (and each matrix under 2^28 elements)");
  return s;
}

/// `n` values of magnitude 2^-6 .. 2^6 and either sign: each block's scale
/// differs.
inline std::vector<float> scaledGemmValues(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<double> lg(-6, 6);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = float((neg(rng) ? -1 : 1) * std::exp2(lg(rng)));
  return v;
}

/// The check of C (M x N, f32, on the device) = qa @ qb^T against the
/// double reference of the quantised values (exact). Tolerance: the f32
/// accumulation of K terms is within 2 K 2^-24 sum|terms| of the exact sum
/// in any order, as gemm_fp8's; for nvfp4 the per-tensor scale adds one
/// rounding.
inline std::function<CheckResult()> scaledGemmCheck(Buffer dc, Quantised qa, Quantised qb, int64_t M, int64_t N,
                                                    int64_t K, ScaledFormat f) {
  return [dc, qa, qb, M, N, K, f] {
    std::vector<float> got = dc.read<float>();
    const double factor = (f == ScaledFormat::nvfp4 ? 4.0 : 2.0) * double(K + 1) * std::ldexp(1.0, -24);
    ElementCheck check(factor, "c", "|got - want| <= f sum_k |a b|, f = " + ElementCheck::fmt(factor));
    GemmReference ref = gemmReference(
        M, N, K, [&](int64_t i, int64_t kk) { return qa.value(i, kk); },
        [&](int64_t kk, int64_t j) { return qb.value(j, kk); }, {}, 0);
    checkMatrix(
        check, M, N, [&](int64_t i, int64_t j) { return double(got[size_t(i * N + j)]); },
        [&](int64_t i, int64_t j) { return ref.want[size_t(i * N + j)]; },
        [&](int64_t i, int64_t j, double) { return factor * ref.mag[size_t(i * N + j)] + 1e-30; });
    return check.result();
  };
}

/// The launch of a block-scaled GEMM example on ctx's {M, N, K}: A and B
/// drawn in f32 over several binades, quantised on the host, uploaded.
inline Launch prepareScaledGemm(const RunContext& ctx, const char* kname, ScaledFormat f) {
  const std::vector<int64_t> s = scaledGemmShape(ctx, kname);
  const int64_t M = s[0], N = s[1], K = s[2];
  std::mt19937_64 rng(ctx.seed);
  const Quantised qa = quantise(f, scaledGemmValues(rng, M * K), M, K);
  const Quantised qb = quantise(f, scaledGemmValues(rng, N * K), N, K);
  GemmBlocks B = scaledGemmBlocks(ctx, f);
  const Device& dev = ctx.device;
  Buffer da = dev.upload(DType::U8, qa.codes), dsa = dev.upload(DType::U8, qa.scales);
  Buffer db = dev.upload(DType::U8, qb.codes), dsb = dev.upload(DType::U8, qb.scales);
  Buffer dc = dev.alloc(DType::F32, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Dim3 grid = gemmGrid(B, M, N);
  std::vector<rt::Arg> args{dc, da, dsa, db, dsb};
  if (f == ScaledFormat::nvfp4)
    args.push_back(dev.upload(DType::F32, std::vector<float>{qa.tensorScale * qb.tensorScale}));
  for (int64_t v : {M, N, K}) args.push_back(int32_t(v));
  Launch launch{gemmScaled(kname, B, f), grid, std::move(args), {M, N, K}};
  launch.persistent = gemmPersistent(B);
  launch.check = scaledGemmCheck(dc, qa, qb, M, N, K, f);
  return launch;
}

/// A block-scaled GEMM example: its kernels for the CPU and GPU defaults,
/// the launch, and shapes aligned and ragged in M, N and K, with K a
/// multiple of the block, of neither the block nor the tile, and odd.
inline Example scaledGemmExample(const char* kname, ScaledFormat f, const char* summary) {
  Example e;
  e.name = kname;
  e.summary = summary;
  e.kernel = [kname, f] { return gemmScaled(kname, gemmDefaultBlocks(Device::cpu()), f); };
  e.gpuKernel = [kname, f](const Target& t) { return gemmScaled(kname, scaledBlocks(gemmDefaultBlocks(t), t, f), f); };
  e.prepare = [kname, f](const RunContext& ctx) { return prepareScaledGemm(ctx, kname, f); };
  e.testShapes = {{64, 64, 64}, {100, 77, 50}, {1, 1, 1}, {45, 64, 96}, {33, 40, 129}};
  e.dtype = name(f);
  return e;
}

/// The codes of MX element dtype `elem` (f4e2m1, f6e2m3, f6e3m2; in the
/// low bits of a byte) of f32 values `q` (already divided by their scale):
/// MxFormats.h's mxElementEncode in tile arithmetic. The quantum of q's
/// binade (the subnormal quantum below the normals) is a power of two, so
/// q / quantum is exact and ts::rint rounds it to nearest even; the code is
/// the binade's first code plus that, saturated at the largest magnitude,
/// as are infinities and NaNs (MX elements have neither).
inline Tensor roundToMxElement(const Tensor& q, DType elem) {
  const MxElementFormat f = mxElementFormat(elem);
  const int man = static_cast<int>(f.manBits), minE = 1 - f.bias;
  Tensor bits = q.bitcast(i32);
  Tensor e = ((bits >> 23) & 255) - 127;  // floor(log2 |q|) of a normal f32
  Tensor te = maximum(e, minE);
  Tensor huge = e > 16;  // saturates; keeps inf and NaN out of the arithmetic
  Tensor scaled = where(huge, 0.0f, abs(q)) * ((man - te + 127) << 23).bitcast(f32);  // |q| 2^(man - te)
  Tensor code = (te + (f.bias - 1)) * (1 << man) + rint(scaled).to(i32);
  code = where(huge, int(f.maxCode), minimum(code, int(f.maxCode)));
  Tensor sign = (bits >> 31) & 1;
  return (code | (sign << static_cast<int>(f.expBits + f.manBits))).to(u8);
}

/// A tile quantised in the kernel: its codes and its block scales.
struct QuantisedTile {
  Tensor codes;   // u8, R x C (R x C/2 when packed)
  Tensor scales;  // u8, R x C/bs
};

/// Quantises tile t (f32, R x C, C a multiple of 2 bs) to format f, block
/// by block along C. MX: per block X = 2^(floor(log2 amax) - emax_elem) as
/// e8m0 (the exponent field of amax, minus 2 for f4e2m1 and f6e2m3, 4 for
/// f6e3m2, 8 for f8e4m3, 15 for f8e5m2; NaN 0xFF for a block with a NaN or
/// an infinity, whose max is NaN or inf), the elements x / X rounded to
/// nearest even and saturated (fp8: the casts of Fp8.h; fp6 and fp4:
/// roundToMxElement). nvfp4: the f8e4m3 scale e4m3(amax / 6 / ts) with
/// ts the per-tensor scale (NVFP4's second level: amax(x) / (6 x 448), from
/// the previous step or a reduction). The quantisation kernels and the
/// fused quantise-and-multiply GEMM share it.
inline QuantisedTile quantiseTile(const Tensor& t, ScaledFormat f, const Tensor& ts, int R, int C) {
  const ScaledElements e = scaledElements(f);
  const int bs = e.block, nb = C / bs;
  auto xb = reshape(t, {R, nb, bs});
  Tensor amax = max(abs(xb), 2);  // R x nb
  Tensor sc, div;
  if (ts.valid()) {
    sc = (amax / 6.0f / ts).to(f8e4m3).bitcast(u8);
    div = sc.bitcast(f8e4m3).to(f32) * ts;
  } else {
    Tensor ef = (amax.bitcast(i32) >> 23) & 255;
    sc = where(ef == 255, 255, minimum(maximum(ef - e.emax, 0), 254)).to(u8);
    div = mx_decode(sc, e8m0);
  }
  auto d = expand_dims(div, 2);
  auto q = reshape(where(d > 0.0f, xb / d, 0.0f), {R, C});
  if (isFp8(e.elem)) return {q.to(e.elem).bitcast(u8), sc};  // the cast rounds to nearest even and saturates
  Tensor codes = roundToMxElement(q, e.elem);
  return {e.packed ? pack_fp4(codes) : codes, sc};
}

/// Quantises x (f32, rows x cols, row-major) to f (quantiseTile): codes
/// (rows x ceil(cols / 2) bytes, two a byte, or rows x cols) and block
/// scales (rows x ceil(cols / bs)); a BLOCK_R x BLOCK_C tile a program
/// (BLOCK_C a multiple of 2 bs). Arguments: codes, scales, x,
/// [tensor_scale,] rows, cols.
inline Kernel quantiseKernel(const char* kname, int BR, int BC, ScaledFormat f) {
  const int bs = scaledElements(f).block, nb = BC / bs;
  const bool packed = scaledElements(f).packed;
  auto body = [=](Ptr<uint8_t> codes, Ptr<uint8_t> scales, Ptr<const float> x, Tensor ts, Int rows, Int cols) {
    auto r = expand_dims(program_id(0) * BR + arange(BR), 1);
    auto c = expand_dims(program_id(1) * BC + arange(BC), 0);
    auto t = load(x + r * cols + c, (r < rows) & (c < cols), 0.0);
    const QuantisedTile q = quantiseTile(t, f, ts, BR, BC);
    Int nblocks = (cols + (bs - 1)) / bs;
    if (packed) {
      Int cbytes = (cols + 1) / 2;
      auto cb = expand_dims(program_id(1) * (BC / 2) + arange(BC / 2), 0);
      store(codes + r * cbytes + cb, q.codes, (r < rows) & (cb < cbytes));
    } else {
      store(codes + r * cols + c, q.codes, (r < rows) & (c < cols));
    }
    auto j = expand_dims(program_id(1) * nb + arange(nb), 0);
    store(scales + r * nblocks + j, q.scales, (r < rows) & (j < nblocks));
  };
  if (f == ScaledFormat::nvfp4)
    return kernel(kname, {"codes", "scales", "x", "tensor_scale", "rows", "cols"},
                  [=](Ptr<uint8_t> codes, Ptr<uint8_t> scales, Ptr<const float> x, Ptr<const float> ts, Int rows,
                      Int cols) { body(codes, scales, x, load(ts), rows, cols); });
  return kernel(kname, {"codes", "scales", "x", "rows", "cols"},
                [=](Ptr<uint8_t> codes, Ptr<uint8_t> scales, Ptr<const float> x, Int rows, Int cols) {
                  body(codes, scales, x, Tensor{}, rows, cols);
                });
}

/// `n` values of random sign over 24 binades (2^-12 .. 2^12), the inputs of
/// the quantisation examples.
inline std::vector<float> binadeValues(uint64_t seed, int64_t n) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> lg(-12, 12);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = float((neg(rng) ? -1 : 1) * std::exp2(lg(rng)));
  return x;
}

/// The launch of a quantisation example on ctx's {rows, cols} (default {37,
/// 1000}): values over several binades, a NaN and an infinity in blocks of
/// their own (mxfp4: those blocks' scales are NaN) where the shape has
/// room; the check: the scales and codes equal the plain C++ quantiser's
/// bit for bit (the elements of a NaN-scaled block are NaN whatever their
/// codes, as the spec defines, so they are not compared).
inline Launch prepareQuantise(const RunContext& ctx, const char* kname, ScaledFormat f) {
  auto [rows, cols] = rowsCols(ctx, kname);
  const bool gpu = ctx.device.kind() != rt::DeviceKind::CPU;
  const int BR = gpu ? 4 : 16, BC = gpu ? 64 : 256;
  std::vector<float> x = binadeValues(ctx.seed, rows * cols);
  // Zeros, a tiny block and (MX) non-finite values in blocks of their own.
  if (cols >= 128) {
    for (int i = 0; i < 32; ++i) x[size_t(i)] = 0;
    for (int i = 32; i < 64; ++i) x[size_t(i)] = 1e-30f * float(i);
    if (f != ScaledFormat::nvfp4) {
      x[70] = NAN;
      x[100] = -INFINITY;
    }
  }
  const Quantised want = quantise(f, x, rows, cols);
  const Device& dev = ctx.device;
  Buffer dx = dev.upload(DType::F32, x);
  Buffer dcodes = dev.alloc(DType::U8, size_t(rows * want.rowBytes()));
  Buffer dscales = dev.alloc(DType::U8, size_t(rows * want.scaleCols()));
  dcodes.fillBytes(0xAB);  // neither a code pair nor a scale the quantiser gives here
  dscales.fillBytes(0xAB);
  std::vector<rt::Arg> args{dcodes, dscales, dx};
  if (f == ScaledFormat::nvfp4) args.push_back(dev.upload(DType::F32, std::vector<float>{want.tensorScale}));
  args.push_back(int32_t(rows));
  args.push_back(int32_t(cols));
  Dim3 grid(uint32_t((rows + BR - 1) / BR), uint32_t((cols + BC - 1) / BC));
  Launch launch{quantiseKernel(kname, BR, BC, f), grid, std::move(args), {rows, cols}};
  launch.check = [dcodes, dscales, want, f] {
    std::vector<uint8_t> codes = dcodes.read<uint8_t>(), scales = dscales.read<uint8_t>();
    // Codes are integers: a bound of 0.5 is equality.
    ElementCheck check(0.5, "codes and scales",
                       "bit for bit against the C++ quantiser: |got - want| <= 0.5 on integer codes");
    for (int64_t r = 0; r < want.rows; ++r)
      for (int64_t b = 0; b < want.scaleCols(); ++b) {
        const size_t at = size_t(r * want.scaleCols() + b);
        check(scales[at], want.scales[at], 0.5,
              [&] { return "scale at (" + std::to_string(r) + ", " + std::to_string(b) + ")"; });
      }
    for (int64_t r = 0; r < want.rows; ++r)
      for (int64_t i = 0; i < want.rowBytes(); ++i) {
        const int64_t b = (scaledElements(f).packed ? 2 * i : i) / scaledElements(f).block;
        if (f != ScaledFormat::nvfp4 && want.scales[size_t(r * want.scaleCols() + b)] == kE8M0NaN) continue;
        const size_t at = size_t(r * want.rowBytes() + i);
        check(codes[at], want.codes[at], 0.5,
              [&] { return "code byte at (" + std::to_string(r) + ", " + std::to_string(i) + ")"; });
      }
    return check.result();
  };
  return launch;
}

/// A quantisation or dequantisation example over {rows, cols}: `kernel`
/// with its CPU blocks (16 x 256) or GPU ones (4 x 64), `prepare` its
/// launch and check.
inline Example rowsExample(const char* kname, ScaledFormat f, const char* summary,
                           Kernel (*kernel)(const char*, int, int, ScaledFormat),
                           Launch (*prepare)(const RunContext&, const char*, ScaledFormat)) {
  Example e;
  e.name = kname;
  e.summary = summary;
  e.kernel = [=] { return kernel(kname, 16, 256, f); };
  e.gpuKernel = [=](const Target&) { return kernel(kname, 4, 64, f); };
  e.prepare = [=](const RunContext& ctx) { return prepare(ctx, kname, f); };
  e.testShapes = {{37, 1000}, {1, 1}, {3, 129}, {8, 512}};
  e.dtype = name(f);
  return e;
}

inline Example quantiseExample(const char* kname, ScaledFormat f, const char* summary) {
  return rowsExample(kname, f, summary, quantiseKernel, prepareQuantise);
}

/// The inverse of quantiseKernel: out (f32, rows x cols) = each code's value
/// times its block's scale (times the per-tensor scale for nvfp4), from the
/// codes (unpacked with ts::unpack_fp4 where packed) and scales, decoded
/// exactly by ts::mx_decode. Arguments: out, codes, scales, [tensor_scale,]
/// rows, cols.
inline Kernel dequantiseKernel(const char* kname, int BR, int BC, ScaledFormat f) {
  const ScaledElements e = scaledElements(f);
  const int bs = e.block, nb = BC / bs;
  auto body = [=](Ptr<float> out, Ptr<const uint8_t> codes, Ptr<const uint8_t> scales, Tensor ts, Int rows, Int cols) {
    auto r = expand_dims(program_id(0) * BR + arange(BR), 1);
    auto c = expand_dims(program_id(1) * BC + arange(BC), 0);
    Tensor q;
    if (e.packed) {
      Int cbytes = (cols + 1) / 2;
      auto cb = expand_dims(program_id(1) * (BC / 2) + arange(BC / 2), 0);
      q = unpack_fp4(load(codes + r * cbytes + cb, (r < rows) & (cb < cbytes)));
    } else {
      q = load(codes + r * cols + c, (r < rows) & (c < cols));
    }
    Int nblocks = (cols + (bs - 1)) / bs;
    auto j = expand_dims(program_id(1) * nb + arange(nb), 0);
    auto sc = load(scales + r * nblocks + j, (r < rows) & (j < nblocks));
    Tensor s = ts.valid() ? (sc & 0x7F).bitcast(f8e4m3).to(f32) * ts : mx_decode(sc, e8m0);  // nvfp4: UE4M3
    auto sb = reshape(broadcast_to(expand_dims(s, 2), {BR, nb, bs}), {BR, BC});
    store(out + r * cols + c, mx_decode(q, e.elem) * sb, (r < rows) & (c < cols));
  };
  if (f == ScaledFormat::nvfp4)
    return kernel(kname, {"out", "codes", "scales", "tensor_scale", "rows", "cols"},
                  [=](Ptr<float> out, Ptr<const uint8_t> codes, Ptr<const uint8_t> scales, Ptr<const float> ts,
                      Int rows, Int cols) { body(out, codes, scales, load(ts), rows, cols); });
  return kernel(kname, {"out", "codes", "scales", "rows", "cols"},
                [=](Ptr<float> out, Ptr<const uint8_t> codes, Ptr<const uint8_t> scales, Int rows, Int cols) {
                  body(out, codes, scales, Tensor{}, rows, cols);
                });
}

/// The launch of a dequantisation example on ctx's {rows, cols}: the plain
/// C++ quantiser's codes and scales of values over several binades; the
/// check against each element's value in double (Quantised::value): exact
/// for MX (a code times a power of two), one f32 rounding for nvfp4's
/// per-tensor scale (|got - want| <= 2^-22 |want|).
inline Launch prepareDequantise(const RunContext& ctx, const char* kname, ScaledFormat f) {
  auto [rows, cols] = rowsCols(ctx, kname);
  const bool gpu = ctx.device.kind() != rt::DeviceKind::CPU;
  const int BR = gpu ? 4 : 16, BC = gpu ? 64 : 256;
  std::vector<float> x = binadeValues(ctx.seed, rows * cols);
  const Quantised q = quantise(f, x, rows, cols);
  const Device& dev = ctx.device;
  Buffer dout = dev.alloc(DType::F32, size_t(rows * cols));
  dout.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  std::vector<rt::Arg> args{dout, dev.upload(DType::U8, q.codes), dev.upload(DType::U8, q.scales)};
  if (f == ScaledFormat::nvfp4) args.push_back(dev.upload(DType::F32, std::vector<float>{q.tensorScale}));
  args.push_back(int32_t(rows));
  args.push_back(int32_t(cols));
  Dim3 grid(uint32_t((rows + BR - 1) / BR), uint32_t((cols + BC - 1) / BC));
  Launch launch{dequantiseKernel(kname, BR, BC, f), grid, std::move(args), {rows, cols}};
  launch.check = [dout, q] {
    std::vector<float> got = dout.read<float>();
    const double rel = std::ldexp(1.0, -22);
    ElementCheck check(rel, "out", "|got - want| <= 2^-22 |want| (exact for MX)");
    checkMatrix(
        check, q.rows, q.k, [&](int64_t i, int64_t j) { return double(got[size_t(i * q.k + j)]); },
        [&](int64_t i, int64_t j) { return q.value(i, j); },
        [&](int64_t, int64_t, double want) { return rel * std::fabs(want); });
    return check.result();
  };
  return launch;
}

inline Example dequantiseExample(const char* kname, ScaledFormat f, const char* summary) {
  return rowsExample(kname, f, summary, dequantiseKernel, prepareDequantise);
}

}  // namespace tessera::examples

// Block-scaled dots (ts::dot_scaled) and the MX code helpers in kernels:
//  * ts::mx_decode of every code of f4e2m1, f6e2m3, f6e3m2, e8m0, f8e4m3 and
//    f8e5m2, bit for bit against the host codecs (MxFormats.h, Fp8.h), on every backend (the
//    pinned CPU paths and emulated sm_80, gfx942, gfx1100);
//  * pack_fp4 / unpack_fp4 round trips on every backend;
//  * dot_scaled of every format (and mixed pairs: mxfp8 x mxfp4, nvfp4 x
//    mxfp6) against a double reference of the dequantised operands, on
//    shapes that are and are not multiples of the tile and of the block
//    (masked K tails), with and without a per-tensor scale, on every backend
//    and on emulated sm_90a, sm_100a, sm_120a;
//  * the DSL emits one dot_scaled op, which the decompose-scaled-dots pass
//    rewrites; the decomposition is never silent: the compile's warning
//    names the line, the target and the cost, and
//    CompileOptions::nativeScaledDotsOnly makes it a CompileError;
//  * bad input: a DslError naming the user's line and the legal values;
//  * MXFP8, MXFP4 and NVFP4 on sm_100a/sm_103a run natively (tcgen05.mma
//    .block_scale, scales through tensor memory) where the tile is 128 rows;
//  * the MX formats (fp8, fp6, fp4, mixed) on sm_120a run natively (mma.sync
//    .kind::mxf8f6f4.block_scale), with no warning, in the emulator against
//    the same reference;
//  * the kernels assemble with ptxas for sm_100a and sm_120a with no spills
//    and link with LLD for gfx942.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../amd_code_object.h"
#include "../cpu_paths.h"
#include "../ptxas_report.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using ts::ScaledFormat;

namespace {

std::vector<ts::Device> devices() { return testpaths::cpuPathsAndEmulators(); }

/// out[i] = the f32 value of code in[i] of `format`.
ts::Kernel decodeKernel(ts::DType format) {
  return ts::kernel("mx_decode", [=](ts::Ptr<float> out, ts::Ptr<const uint8_t> in) {
    auto i = ts::arange(256);
    ts::store(out + i, ts::mx_decode(ts::load(in + i), format));
  });
}

TEST_CASE("dot_scaled: mx_decode gives every code's value bit for bit on every backend", "[mx][emu]") {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[size_t(c)] = uint8_t(c);
  for (const ts::Device& dev : devices()) {
    for (ts::DType t : {ts::f4e2m1, ts::f6e2m3, ts::f6e3m2, ts::e8m0, ts::f8e4m3, ts::f8e5m2}) {
      INFO(dev.name() << " " << ts::name(t));
      ts::CompiledKernel k = ts::compile(decodeKernel(t), dev);
      ts::Buffer out = dev.alloc(ts::f32, 256);
      k.launch({1}, out, dev.upload(ts::u8, codes));
      std::vector<float> got = out.read<float>();
      const unsigned n = t == ts::e8m0 || ts::isFp8(t) ? 256 : 1u << ts::mxElementFormat(t).bits();
      for (unsigned c = 0; c < n; ++c) {
        const float want = ts::isFp8(t) ? ts::fp8Decode(t, uint8_t(c)) : ts::mxDecode(t, uint8_t(c));
        uint32_t gb, wb;
        std::memcpy(&gb, &got[c], 4);
        std::memcpy(&wb, &want, 4);
        INFO("code " << c << ": got " << got[c] << ", want " << want);
        if (std::isnan(want))
          CHECK(std::isnan(got[c]));
        else
          CHECK(gb == wb);
      }
    }
  }
}

TEST_CASE("dot_scaled: pack_fp4 and unpack_fp4 round-trip on every backend", "[mx][emu]") {
  ts::Kernel k = ts::kernel("fp4_pack", [](ts::Ptr<uint8_t> packed, ts::Ptr<uint8_t> back, ts::Ptr<const uint8_t> in) {
    auto r = ts::expand_dims(ts::arange(8), 1), c = ts::expand_dims(ts::arange(32), 0),
         h = ts::expand_dims(ts::arange(16), 0);
    auto p = ts::pack_fp4(ts::load(in + r * 32 + c));
    ts::store(packed + r * 16 + h, p);
    ts::store(back + r * 32 + c, ts::unpack_fp4(p));
  });
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[size_t(i)] = uint8_t((i * 7 + 3) & 15);
  for (const ts::Device& dev : devices()) {
    INFO(dev.name());
    ts::Buffer packed = dev.alloc(ts::u8, 128), back = dev.alloc(ts::u8, 256);
    ts::compile(k, dev).launch({1}, packed, back, dev.upload(ts::u8, codes));
    std::vector<uint8_t> p = packed.read<uint8_t>(), b = back.read<uint8_t>();
    for (int i = 0; i < 128; ++i)
      REQUIRE(int(p[size_t(i)]) == int(codes[size_t(2 * i)] | (codes[size_t(2 * i + 1)] << 4)));
    CHECK(b == codes);
  }
}

// ---------------------------------------------------------------- the dot

struct Fmt {
  ScaledFormat f;
  ts::DType elem;
  bool packed;
  int block;
};
Fmt fmtOf(ScaledFormat f) {
  switch (f) {
    case ScaledFormat::mxfp8_e4m3: return {f, ts::f8e4m3, false, 32};
    case ScaledFormat::mxfp8_e5m2: return {f, ts::f8e5m2, false, 32};
    case ScaledFormat::mxfp6_e2m3: return {f, ts::f6e2m3, false, 32};
    case ScaledFormat::mxfp6_e3m2: return {f, ts::f6e3m2, false, 32};
    case ScaledFormat::mxfp4: return {f, ts::f4e2m1, true, 32};
    case ScaledFormat::nvfp4: return {f, ts::f4e2m1, true, 16};
  }
  return {};
}

/// C = A @ B^T (+ C0), A: M x K codes of fa, B: N x K codes of fb, their
/// scales M x ceil(K/bsa) and N x ceil(K/bsb); one BM x BN tile a program.
ts::Kernel scaledGemm(ScaledFormat fa, ScaledFormat fb, int BM, int BN, int BK, bool tensorScale) {
  const Fmt a = fmtOf(fa), b = fmtOf(fb);
  return ts::kernel("scaled_gemm", [=](ts::Ptr<float> c, ts::Ptr<const uint8_t> pa, ts::Ptr<const uint8_t> psa,
                                       ts::Ptr<const uint8_t> pb, ts::Ptr<const uint8_t> psb, ts::Float gs, ts::Int M,
                                       ts::Int N, ts::Int K) {
    const int pka = a.packed ? 2 : 1, pkb = b.packed ? 2 : 1;
    auto row = ts::expand_dims(ts::program_id(0) * BM + ts::arange(BM), 1);
    auto rowB = ts::expand_dims(ts::program_id(1) * BN + ts::arange(BN), 1);
    auto col = ts::expand_dims(ts::program_id(1) * BN + ts::arange(BN), 0);
    ts::Int ka = (K + (pka - 1)) / pka, kb = (K + (pkb - 1)) / pkb;
    ts::Int sa = (K + (a.block - 1)) / a.block, sb = (K + (b.block - 1)) / b.block;
    auto c0 = ts::load(c + row * N + col, (row < M) & (col < N));
    auto acc = ts::for_range(0, K, BK, c0, [&](ts::Int k0, ts::Tensor acc) {
      auto ia = ts::expand_dims(k0 / pka + ts::arange(BK / pka), 0),
           ib = ts::expand_dims(k0 / pkb + ts::arange(BK / pkb), 0);
      auto ja = ts::expand_dims(k0 / a.block + ts::arange(BK / a.block), 0);
      auto jb = ts::expand_dims(k0 / b.block + ts::arange(BK / b.block), 0);
      auto ta = ts::load(pa + row * ka + ia, (row < M) & (ia < ka));
      auto tb = ts::load(pb + rowB * kb + ib, (rowB < N) & (ib < kb));
      auto tsa = ts::load(psa + row * sa + ja, (row < M) & (ja < sa));
      auto tsb = ts::load(psb + rowB * sb + jb, (rowB < N) & (jb < sb));
      if (tensorScale) return ts::dot_scaled(ta, tsa, fa, tb, tsb, fb, acc, gs);
      return ts::dot_scaled(ta, tsa, fa, tb, tsb, fb, acc);
    });
    ts::store(c + row * N + col, acc, (row < M) & (col < N));
  });
}

/// Random codes of finite values and scales over a range of binades, the
/// kernel's result against the double reference of the dequantised values.
void checkScaledGemm(const ts::Device& dev, ScaledFormat fa, ScaledFormat fb, int BM, int BN, int BK, int M, int N,
                     int K, bool tensorScale) {
  const Fmt a = fmtOf(fa), b = fmtOf(fb);
  std::mt19937 rng(uint32_t(M * 131 + N * 7 + K));
  auto elemCode = [&](const Fmt& f) {
    std::uniform_int_distribution<int> d(0, 255);
    for (;;) {
      uint8_t c = uint8_t(d(rng));
      if (ts::isFp8(f.elem)) {
        const float v = ts::fp8Decode(f.elem, c);
        if (std::isfinite(v) && std::fabs(v) <= 64) return c;
      } else {
        return uint8_t(c & ((1u << ts::mxElementFormat(f.elem).bits()) - 1));
      }
    }
  };
  auto scaleCode = [&](const Fmt& f) {
    // e8m0: 2^-8 .. 2^8; UE4M3 (nvfp4): normal values 2^-4 .. 2^4, the
    // sign bit, which UE4M3 ignores, set at random.
    if (f.block == 32) return uint8_t(std::uniform_int_distribution<int>(119, 135)(rng));
    return uint8_t(std::uniform_int_distribution<int>(0x18, 0x5F)(rng) | (rng() & 1) << 7);
  };
  auto make = [&](const Fmt& f, int rows, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales,
                  std::vector<double>& vals) {
    const int rowBytes = f.packed ? (K + 1) / 2 : K, sc = (K + f.block - 1) / f.block;
    codes.assign(size_t(rows * rowBytes), 0);
    scales.resize(size_t(rows * sc));
    vals.assign(size_t(rows * K), 0);
    for (auto& s : scales) s = scaleCode(f);
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < K; ++k) {
        const uint8_t c = elemCode(f);
        if (f.packed)
          codes[size_t(r * rowBytes + k / 2)] |= uint8_t(c << ((k & 1) * 4));
        else
          codes[size_t(r * rowBytes + k)] = c;
        const double e = ts::isFp8(f.elem) ? ts::fp8Decode(f.elem, c) : ts::mxElementDecode(f.elem, c);
        const uint8_t s = scales[size_t(r * sc + k / f.block)];
        vals[size_t(r * K + k)] =
            e * (f.block == 32 ? double(ts::e8m0Decode(s)) : double(ts::fp8Decode(ts::f8e4m3, uint8_t(s & 0x7F))));
      }
  };
  std::vector<uint8_t> ca, sa, cb, sb;
  std::vector<double> va, vb;
  make(a, M, ca, sa, va);
  make(b, N, cb, sb, vb);
  const float gs = tensorScale ? 0.375f : 1.0f;
  std::vector<float> c0(size_t(M * N));
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = float(int(i % 7) - 3) * 0.25f;
  ts::Buffer bc = dev.upload(ts::f32, c0);
  ts::compile(scaledGemm(fa, fb, BM, BN, BK, tensorScale), dev)
      .launch(ts::Dim3(unsigned((M + BM - 1) / BM), unsigned((N + BN - 1) / BN)), bc, dev.upload(ts::u8, ca),
              dev.upload(ts::u8, sa), dev.upload(ts::u8, cb), dev.upload(ts::u8, sb), gs, int32_t(M), int32_t(N),
              int32_t(K));
  std::vector<float> got = bc.read<float>();
  int bad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = va[size_t(i * K + k)] * vb[size_t(j * K + k)];
        ref += p;
        mag += std::fabs(p);
      }
      ref = ref * gs + c0[size_t(i * N + j)];
      const double g = got[size_t(i * N + j)];
      // The f32 sums of K products in any order, plus the per-step scaling
      // and the addition of the running accumulator.
      const double tol = 4.0 * (K + 2) * 0x1p-24 * (mag * gs + std::fabs(ref)) + 1e-30;
      if (!(std::fabs(g - ref) <= tol) && ++bad <= 5)
        FAIL_CHECK(ts::name(fa) << " x " << ts::name(fb) << " " << M << "x" << N << "x" << K << " C[" << i << "][" << j
                                << "] = " << g << ", expected " << ref);
    }
  CHECK(bad == 0);
}

/// One GEMM of checkScaledGemm (no per-tensor scale): the formats, the
/// tile and the problem.
struct ScaledCase {
  ScaledFormat fa, fb;
  int BM, BN, BK, M, N, K;
};
void checkScaledGemms(const ts::Device& dev, std::initializer_list<ScaledCase> cases) {
  for (const ScaledCase& c : cases) checkScaledGemm(dev, c.fa, c.fb, c.BM, c.BN, c.BK, c.M, c.N, c.K, false);
}

TEST_CASE("dot_scaled: every format matches the double reference on aligned and ragged shapes, every backend",
          "[mx][dot][emu]") {
  for (const ts::Device& dev : devices()) {
    INFO(dev.name());
    const bool gpu = dev.kind() != ts::rt::DeviceKind::CPU;
    const int BM = gpu ? 32 : 64, BN = 32, BK = gpu ? 32 : 64;
    for (ScaledFormat f : {ScaledFormat::mxfp8_e4m3, ScaledFormat::mxfp8_e5m2, ScaledFormat::mxfp6_e2m3,
                           ScaledFormat::mxfp6_e3m2, ScaledFormat::mxfp4, ScaledFormat::nvfp4}) {
      // Whole tiles and blocks; ragged M, N and a K that is a multiple of
      // neither the tile nor the block (and odd: half a byte of fp4).
      checkScaledGemm(dev, f, f, BM, BN, BK, 64, 64, 128, f == ScaledFormat::nvfp4);
      checkScaledGemm(dev, f, f, BM, BN, BK, 45, 37, 77, f == ScaledFormat::nvfp4);
    }
    checkScaledGemm(dev, ScaledFormat::mxfp8_e4m3, ScaledFormat::mxfp4, BM, BN, BK, 33, 40, 96, false);
    checkScaledGemm(dev, ScaledFormat::nvfp4, ScaledFormat::mxfp6_e3m2, BM, BN, BK, 20, 70, 50, true);
  }
}

TEST_CASE("dot_scaled: mxfp4 and nvfp4 on emulated sm_90a, sm_100a and sm_120a match the reference",
          "[mx][dot][emu][blackwell]") {
  for (const char* arch : {"nvptx:sm_90a", "nvptx:sm_100a", "nvptx:sm_120a"}) {
    INFO(arch);
    const ts::Device dev = ts::Device::emulator(arch);
    checkScaledGemm(dev, ScaledFormat::mxfp4, ScaledFormat::mxfp4, 64, 64, 32, 100, 70, 97, false);
    checkScaledGemm(dev, ScaledFormat::nvfp4, ScaledFormat::nvfp4, 64, 64, 32, 64, 64, 64, true);
    checkScaledGemm(dev, ScaledFormat::mxfp8_e4m3, ScaledFormat::mxfp8_e5m2, 64, 64, 32, 64, 64, 64, false);
  }
}

// ------------------------------------------------ native on sm_120a

TEST_CASE("dot_scaled: the MX formats run on sm_120a's block-scaled mma.sync, silently, matching the reference",
          "[mx][dot][emu][blackwell]") {
  const ScaledFormat e4 = ScaledFormat::mxfp8_e4m3, e5 = ScaledFormat::mxfp8_e5m2, f6a = ScaledFormat::mxfp6_e2m3,
                     f6b = ScaledFormat::mxfp6_e3m2, f4 = ScaledFormat::mxfp4;
  auto ptxName = [&](ScaledFormat f) {
    return f == e4 ? "e4m3" : f == e5 ? "e5m2" : f == f6a ? "e2m3" : f == f6b ? "e3m2" : "e2m1";
  };
  // The instruction, its element pair, no warning and no decomposition; K
  // steps of 32 (the scales one byte at a time), 64 and 128 (four k-steps'
  // scales in one 32-bit register, selected by byte-id). fp4 x fp4 with a
  // K step of 64 or 128 stays packed: kind::mxf4's m16n8k64, scale_vec::2X.
  for (auto [fa, fb, BK] :
       {std::tuple{e4, e4, 32}, std::tuple{e4, e5, 64}, std::tuple{e5, e4, 128}, std::tuple{e5, e5, 128},
        std::tuple{f6a, f6b, 32}, std::tuple{f4, f4, 32}, std::tuple{f4, e4, 64}, std::tuple{f6b, f4, 32},
        std::tuple{f4, f4, 64}, std::tuple{f4, f4, 128}}) {
    const std::string pair = std::string(ptxName(fa)) + "." + ptxName(fb);
    INFO(pair << " BK " << BK);
    ts::CompileOptions strict;
    strict.nativeScaledDotsOnly = true;  // a decomposition would be an error
    ts::CompiledKernel ck =
        ts::compile(scaledGemm(fa, fb, 64, 64, BK, false), ts::Target::parse("nvptx:sm_120a"), strict);
    CHECK(ck.warnings().empty());
    const std::string ptx = ck.dump(tessera::Stage::PTX);
    const bool packed = fa == f4 && fb == f4 && BK >= 64;
    CHECK(ptx.find(packed ? "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32"
                            ".ue8m0"
                          : "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32." + pair +
                                ".f32.ue8m0") != std::string::npos);
    for (const auto& [stage, ir] : ck.artifact().dumps.tileIR)
      if (stage == "decompose-scaled-dots") CHECK((ir.find("packed = 1") != std::string::npos) == packed);
    CHECK(ptx.find("cvt.rn.bf16") == std::string::npos);
    for (const auto& [stage, ir] : ck.artifact().dumps.tileIR)
      if (stage == "decompose-scaled-dots") CHECK(ir.find("xbf16>") == std::string::npos);
    // ptxas takes it, without spills at the zoo's K step of 32 (this test
    // kernel's byte-masked loads of 64 x 64 and 64 x 128 tiles spill on 4
    // warps: 608 and 1880 bytes for fp8; its K step of 128 decomposed on
    // sm_100a, 2392).
    if (::access("/usr/local/cuda/bin/ptxas", X_OK) == 0) {
      testptx::PtxasFigures f = testptx::ptxasFigures(ck);
      INFO(f.report);
      if (BK == 32) CHECK(f.spillBytes == 0);
    } else {
      WARN("SKIP: ptxas not found (install the CUDA toolkit at /usr/local/cuda); PTX not assembled");
    }
    // sm_90a has no block-scaled mma.sync: decomposed, with the warning.
    CHECK(ts::compile(scaledGemm(fa, fb, 64, 64, BK, false), ts::Target::parse("nvptx:sm_90a")).warnings().size() == 1);
  }
  // A K step of 96 (not a power of two): pad-tiles pads it to 128, and the
  // padded scale blocks to a finite scale, so it runs natively too; with
  // fp4, whose unpacking reshapes K, it runs decomposed, with the warning.
  CHECK(ts::compile(scaledGemm(e4, e5, 64, 64, 96, false), ts::Target::parse("nvptx:sm_120a"))
            .dump(tessera::Stage::PTX)
            .find("block_scale") != std::string::npos);
  {
    int decomposed = 0;
    for (const std::string& w :
         ts::compile(scaledGemm(f4, f4, 64, 64, 96, false), ts::Target::parse("nvptx:sm_120a")).warnings())
      decomposed += w.find("runs decomposed") != std::string::npos;
    CHECK(decomposed == 1);
  }
  // nvfp4's instruction is m16n8k64 only: a K step of 32 runs decomposed.
  CHECK(ts::compile(scaledGemm(ScaledFormat::nvfp4, ScaledFormat::nvfp4, 64, 64, 32, true),
                    ts::Target::parse("nvptx:sm_120a"))
            .warnings()
            .size() == 1);
  // The emulator runs the instruction (Matrix.cpp) against the double
  // reference: whole tiles and blocks, ragged M, N and K (masked codes and
  // scales read as zero; an odd K of fp4), tiles of 2x2 and 1x1 warps.
  const ts::Device dev = ts::Device::emulator("nvptx:sm_120a");
  checkScaledGemms(dev, {{e4, e4, 64, 64, 128, 128, 64, 256},
                         {e5, e4, 64, 32, 64, 45, 37, 77},
                         {e4, e5, 32, 32, 32, 33, 40, 96},
                         {e5, e5, 64, 64, 128, 100, 70, 130},
                         {f6a, f6a, 64, 64, 64, 64, 64, 128},
                         {f6b, e4, 32, 32, 32, 45, 37, 77},
                         {f4, f4, 64, 64, 128, 100, 70, 97},
                         {f4, f4, 32, 32, 64, 64, 64, 192},
                         {f4, f4, 64, 64, 32, 64, 64, 64},
                         {e4, f4, 32, 32, 32, 33, 40, 96},
                         {f4, f6b, 64, 32, 64, 64, 64, 64},
                         // The K step of 96 above: padded, native.
                         {e4, e5, 64, 64, 96, 64, 64, 200}});
  // Padded scale blocks never reach the instruction as NaN: here the
  // padded lanes of both scale tiles compute the e8m0 NaN code (255).
  {
    ts::Kernel k = ts::kernel("nan_pad", [](ts::Ptr<float> c, ts::Ptr<const uint8_t> a, ts::Ptr<const uint8_t> s) {
      auto r = ts::expand_dims(ts::arange(64), 1), h = ts::expand_dims(ts::arange(96), 0);
      auto j = ts::expand_dims(ts::arange(3), 0);
      auto ta = ts::load(a + r * 96 + h);
      auto sc = ts::where(j < 3, ts::load(s + r * 3 + j), 255);
      auto d = ts::dot_scaled(ta, sc, e4, ta, sc, e4);
      ts::store(c + r * 64 + ts::expand_dims(ts::arange(64), 0), d);
    });
    std::vector<uint8_t> codes(64 * 96), scales(64 * 3, 127);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = ts::fp8Encode(ts::f8e4m3, double(int(i % 5) - 2));
    ts::Buffer out = dev.alloc(ts::f32, 64 * 64);
    ts::compile(k, dev).launch(ts::Dim3(1), out, dev.upload(ts::u8, codes), dev.upload(ts::u8, scales));
    const std::vector<float> got = out.read<float>();
    int bad = 0;
    for (int i = 0; i < 64; ++i)
      for (int n = 0; n < 64; ++n) {
        double ref = 0;
        for (int x = 0; x < 96; ++x) ref += double((i * 96 + x) % 5 - 2) * double((n * 96 + x) % 5 - 2);
        if (!(got[size_t(i * 64 + n)] == ref) && ++bad <= 3)
          FAIL_CHECK("nan_pad C[" << i << "][" << n << "] = " << got[size_t(i * 64 + n)] << ", expected " << ref);
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("dot_scaled: NVFP4 x NVFP4 runs on sm_120a's mma.sync kind::mxf4nvf4, silently, matching the reference",
          "[mx][dot][emu][blackwell]") {
  const ScaledFormat nv = ScaledFormat::nvfp4;
  // K steps of 64 and 128, with and without the per-tensor scale: packed
  // (half the bytes staged), UE4M3 scales four a register, nothing decoded.
  for (int BK : {64, 128})
    for (bool tensorScale : {false, true}) {
      INFO("BK " << BK << (tensorScale ? " with" : " without") << " the per-tensor scale");
      ts::CompileOptions strict;
      strict.nativeScaledDotsOnly = true;
      ts::CompiledKernel ck =
          ts::compile(scaledGemm(nv, nv, 64, 64, BK, tensorScale), ts::Target::parse("nvptx:sm_120a"), strict);
      CHECK(ck.warnings().empty());
      const std::string ptx = ck.dump(tessera::Stage::PTX);
      CHECK(ptx.find("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32."
                     "ue4m3") != std::string::npos);
      CHECK(ptx.find("cvt.rn.bf16") == std::string::npos);
      for (const auto& [stage, ir] : ck.artifact().dumps.tileIR)
        if (stage == "decompose-scaled-dots") {
          CHECK(ir.find("packed = 1") != std::string::npos);
          CHECK(ir.find("scale_elem = ue4m3") != std::string::npos);
          CHECK(ir.find("xbf16>") == std::string::npos);
        }
      if (::access("/usr/local/cuda/bin/ptxas", X_OK) == 0) {
        // ptxas takes it; at a K step of 64 without spills (128: this test
        // kernel's byte-masked loads spill, as the MX ones above).
        testptx::PtxasFigures f = testptx::ptxasFigures(ck);
        INFO(f.report);
        if (BK == 64) CHECK(f.spillBytes == 0);
      } else {
        WARN("SKIP: ptxas not found (install the CUDA toolkit at /usr/local/cuda); PTX not assembled");
      }
    }
  // An NVFP4 operand beside an MX one has two kinds of scale: decomposed,
  // with the warning (as on every target without the instruction).
  for (const char* t : {"nvptx:sm_120a", "nvptx:sm_100a", "amdgpu:gfx950"}) {
    INFO(t);
    CHECK(ts::compile(scaledGemm(nv, ScaledFormat::mxfp4, 64, 64, 64, true), ts::Target::parse(t)).warnings().size() ==
          1);
    CHECK(ts::compile(scaledGemm(nv, nv, 64, 64, 64, true), ts::Target::parse(t)).warnings().size() ==
          (std::string(t) == "nvptx:sm_120a" ? 0u : 1u));
  }
  // The emulator runs the instruction against the double reference (the
  // scales' sign bits set at random: UE4M3 ignores them): whole tiles,
  // ragged M, N and K (an odd K: half a byte), tiles of 2x2 and 1x1 warps,
  // with and without the per-tensor scale.
  const ts::Device dev = ts::Device::emulator("nvptx:sm_120a");
  checkScaledGemms(
      dev, {{nv, nv, 64, 64, 64, 128, 64, 256}, {nv, nv, 64, 32, 128, 45, 37, 77}, {nv, nv, 32, 32, 64, 33, 40, 200}});
  checkScaledGemm(dev, nv, nv, 64, 64, 128, 100, 70, 130, true);
  checkScaledGemm(dev, nv, nv, 32, 32, 64, 64, 64, 64, true);
}

// ------------------------------------------------ native on sm_100a

TEST_CASE(
    "dot_scaled: MXFP8, MXFP4 and NVFP4 run on sm_100a's block-scaled tcgen05.mma, silently, matching the "
    "reference",
    "[mx][dot][emu][blackwell]") {
  const ScaledFormat e4 = ScaledFormat::mxfp8_e4m3, e5 = ScaledFormat::mxfp8_e5m2, f4 = ScaledFormat::mxfp4,
                     nv = ScaledFormat::nvfp4, f6 = ScaledFormat::mxfp6_e2m3;
  // tcgen05's block-scaled MMA is M = 128 only: a 128-row tile on 4 warps.
  // Each kind, its scales copied to tensor memory (tcgen05.cp), nothing
  // decoded, no warning; K steps of 32 (one scale of each atom used), 64
  // and 128 (all four, by the scale-factor IDs).
  struct Case {
    ScaledFormat fa, fb;
    int BK;
    const char* inst;
  };
  const char* mx8 = "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32";
  const char* mx4 = "tcgen05.mma.cta_group::1.kind::mxf4.block_scale.block32";
  const char* nv4 = "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16";
  for (const char* arch : {"nvptx:sm_100a", "nvptx:sm_103a"})
    for (const Case& c : {Case{e4, e4, 32, mx8}, Case{e4, e5, 64, mx8}, Case{e5, e5, 128, mx8}, Case{f4, f4, 64, mx4},
                          Case{f4, f4, 128, mx4}, Case{nv, nv, 64, nv4}, Case{nv, nv, 128, nv4}}) {
      INFO(arch << " " << ts::name(c.fa) << " x " << ts::name(c.fb) << " BK " << c.BK);
      ts::CompileOptions strict;
      strict.nativeScaledDotsOnly = true;  // a decomposition would be an error
      ts::CompiledKernel ck =
          ts::compile(scaledGemm(c.fa, c.fb, 128, 64, c.BK, c.fa == nv), ts::Target::parse(arch), strict);
      CHECK(ck.warnings().empty());
      const std::string ptx = ck.dump(tessera::Stage::PTX);
      CHECK(ptx.find(c.inst) != std::string::npos);
      CHECK(ptx.find("tcgen05.cp.cta_group::1.32x128b.warpx4") != std::string::npos);
      CHECK(ptx.find("cvt.rn.bf16") == std::string::npos);
      if (::access("/usr/local/cuda/bin/ptxas", X_OK) == 0) {
        testptx::PtxasFigures f = testptx::ptxasFigures(ck);
        INFO(f.report);
        CHECK(f.report.find("registers") != std::string::npos);
      } else {
        WARN("SKIP: ptxas not found (install the CUDA toolkit at /usr/local/cuda); PTX not assembled");
      }
    }
  // What tcgen05 does not take runs decomposed, with the warning: the M =
  // 64 shape (a 64-row tile on 4 warps), fp6 (its padded shared-memory
  // format), fp4 beside fp8, fp4 in K steps of 32 (half an instruction).
  const ts::Target b200 = ts::Target::parse("nvptx:sm_100a");
  for (auto [fa, fb, BM, BK] : {std::tuple{e4, e4, 64, 64}, std::tuple{f6, f6, 128, 64}, std::tuple{e4, f4, 128, 64},
                                std::tuple{f4, f4, 128, 32}}) {
    INFO(ts::name(fa) << " x " << ts::name(fb) << " " << BM << " rows, BK " << BK);
    const std::vector<std::string> w = ts::compile(scaledGemm(fa, fb, BM, 64, BK, false), b200).warnings();
    REQUIRE(w.size() == 1);
    CHECK(w[0].find("runs decomposed") != std::string::npos);
  }
  // The emulator runs the copies and the MMAs (runtime/emu/Tcgen05.cpp)
  // against the double reference: whole tiles and blocks, ragged M, N and
  // K (masked codes and scales read as zero; an odd K of fp4), N of 32,
  // 64 and 128.
  const ts::Device dev = ts::Device::emulator("nvptx:sm_100a");
  checkScaledGemms(dev, {{e4, e4, 128, 64, 128, 128, 64, 256},
                         {e5, e4, 128, 32, 64, 45, 37, 77},
                         {e4, e5, 128, 128, 32, 200, 130, 96},
                         {f4, f4, 128, 64, 128, 100, 70, 97},
                         {f4, f4, 128, 64, 64, 128, 64, 192}});
  checkScaledGemm(dev, nv, nv, 128, 64, 64, 130, 64, 200, false);
  checkScaledGemm(dev, nv, nv, 128, 32, 128, 100, 70, 130, true);
}

// ------------------------------------------------ never silent

TEST_CASE("dot_scaled: the compile warns with the line, the target and the cost, and nativeScaledDotsOnly refuses",
          "[mx][dot][errors]") {
  int line = 0;
  ts::Kernel k = ts::kernel("warned", [&](ts::Ptr<float> c, ts::Ptr<const uint8_t> a, ts::Ptr<const uint8_t> s) {
    auto r = ts::expand_dims(ts::arange(32), 1), h = ts::expand_dims(ts::arange(16), 0),
         j = ts::expand_dims(ts::arange(1), 0);
    auto ta = ts::load(a + r * 16 + h), tsc = ts::load(s + r + j);
    line = __LINE__ + 1;
    auto d = ts::dot_scaled(ta, tsc, ScaledFormat::mxfp4, ta, tsc, ScaledFormat::mxfp4);
    ts::store(c + r * 32 + ts::expand_dims(ts::arange(32), 0), d);
  });
  for (const char* target : {"cpu", "nvptx:sm_90a", "nvptx:sm_100a", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    INFO(target);
    ts::CompiledKernel ck = ts::compile(k, ts::Target::parse(target));
    REQUIRE(ck.warnings().size() == 1);
    const std::string& w = ck.warnings()[0];
    INFO(w);
    CHECK(w.find("dot_scaled_test.cpp:" + std::to_string(line)) != std::string::npos);
    CHECK(w.find("warning: dot_scaled mxfp4 x mxfp4 on " + ts::Target::parse(target).str()) != std::string::npos);
    CHECK(w.find("runs decomposed as a bf16 dot") != std::string::npos);
    CHECK(w.find("~4x below a native target") != std::string::npos);
    ts::CompileOptions strict;
    strict.nativeScaledDotsOnly = true;
    try {
      ts::compile(k, ts::Target::parse(target), strict);
      FAIL("no error");
    } catch (const ts::CompileError& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("dot_scaled_test.cpp:" + std::to_string(line) + ":") != std::string::npos);
      CHECK(m.find("error: dot_scaled mxfp4 x mxfp4") != std::string::npos);
      CHECK(m.find("nativeScaledDotsOnly") != std::string::npos);
    }
  }
  // The traced kernel holds one dot_scaled op (the compile sees the
  // block-scaled dot whole); the decompose-scaled-dots stage leaves none,
  // and a bf16 dot in its place.
  const auto& stages = ts::compile(k, ts::Target::parse("cpu")).artifact().dumps.tileIR;
  REQUIRE(stages.size() >= 2);
  CHECK(stages[0].first == "input");
  CHECK(stages[0].second.find("dot_scaled(") != std::string::npos);
  CHECK(stages[0].second.find("{a_format = mxfp4, b_format = mxfp4}") != std::string::npos);
  CHECK(stages[1].first == "decompose-scaled-dots");
  CHECK(stages[1].second.find("dot_scaled(") == std::string::npos);
  CHECK(stages[1].second.find("xbf16>") != std::string::npos);
  // fp8 operands: the native rate given up is 2x.
  ts::Kernel k8 = ts::kernel("warned8", [](ts::Ptr<float> c, ts::Ptr<const uint8_t> a, ts::Ptr<const uint8_t> s) {
    auto r = ts::expand_dims(ts::arange(32), 1), h = ts::expand_dims(ts::arange(32), 0),
         j = ts::expand_dims(ts::arange(1), 0);
    auto ta = ts::load(a + r * 32 + h), tsc = ts::load(s + r + j);
    auto d = ts::dot_scaled(ta, tsc, ScaledFormat::mxfp8_e4m3, ta, tsc, ScaledFormat::mxfp8_e5m2);
    ts::store(c + r * 32 + ts::expand_dims(ts::arange(32), 0), d);
  });
  // sm_120a runs the same mxfp4 dot natively: no warning.
  CHECK(ts::compile(k, ts::Target::parse("nvptx:sm_120a")).warnings().empty());
  ts::CompiledKernel ck = ts::compile(k8, ts::Target::parse("emu:nvptx:sm_90a"));
  REQUIRE(ck.warnings().size() == 1);
  CHECK(ck.warnings()[0].find("dot_scaled mxfp8_e4m3 x mxfp8_e5m2 on emu:nvptx:sm_90a") != std::string::npos);
  CHECK(ck.warnings()[0].find("~2x below a native target") != std::string::npos);
}

// ------------------------------------------------ bad input

/// The DslError of tracing `body`, which must name this file's `line`.
template <class F>
std::string errorAt(const int& line, F&& body) {
  try {
    ts::kernel("bad", body);
  } catch (const ts::DslError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("dot_scaled_test.cpp:" + std::to_string(line) + ":") != std::string::npos);
    return m;
  }
  FAIL("no DslError");
  return {};
}

TEST_CASE("dot_scaled: bad input is a DslError naming the line and the legal values", "[mx][dot][errors]") {
  using P = ts::Ptr<const uint8_t>;
  auto tile = [](P p, int r, int c) {
    return ts::load(p + ts::expand_dims(ts::arange(r), 1) * c + ts::expand_dims(ts::arange(c), 0));
  };
  int line = 0;
  // K not a multiple of the block.
  std::string m = errorAt(line, [&](P a, P s) {
    auto x = tile(a, 16, 40), sx = tile(s, 16, 2);
    line = __LINE__ + 1;
    ts::dot_scaled(x, sx, ScaledFormat::mxfp8_e4m3, x, sx, ScaledFormat::mxfp8_e4m3);
  });
  CHECK(m.find("K = 40") != std::string::npos);
  CHECK(m.find("not a multiple of its block of 32") != std::string::npos);
  CHECK(m.find("pad K with zero codes") != std::string::npos);
  // Scales of the wrong shape and of the wrong dtype.
  m = errorAt(line, [&](P a, P s) {
    auto x = tile(a, 16, 32), sx = tile(s, 16, 4);
    line = __LINE__ + 1;
    ts::dot_scaled(x, sx, ScaledFormat::mxfp8_e4m3, x, sx, ScaledFormat::mxfp8_e4m3);
  });
  CHECK(m.find("a_scale must be a u8 tile [16x1] of e8m0 codes, one per block of 32 along K") != std::string::npos);
  m = errorAt(line, [&](P a, ts::Ptr<const float> s) {
    auto x = tile(a, 16, 32);
    auto sx = ts::load(s + ts::expand_dims(ts::arange(16), 1) + ts::expand_dims(ts::arange(1), 0));
    line = __LINE__ + 1;
    ts::dot_scaled(x, sx, ScaledFormat::mxfp8_e4m3, x, sx, ScaledFormat::mxfp8_e4m3);
  });
  CHECK(m.find("a_scale must be a u8 tile") != std::string::npos);
  CHECK(m.find("got tile<16x1xf32>") != std::string::npos);
  // Codes that are not bytes.
  m = errorAt(line, [&](ts::Ptr<const float> a, P s) {
    auto x = ts::load(a + ts::expand_dims(ts::arange(16), 1) * 32 + ts::expand_dims(ts::arange(32), 0)),
         sx = tile(s, 16, 1);
    line = __LINE__ + 1;
    ts::dot_scaled(x, sx, ScaledFormat::mxfp8_e4m3, x, sx, ScaledFormat::mxfp8_e4m3);
  });
  CHECK(m.find("a must be a u8 tile [M, K] of mxfp8_e4m3 codes") != std::string::npos);
  // K of a and b differ (b given [K, N] instead of [N, K]).
  m = errorAt(line, [&](P a, P s) {
    auto x = tile(a, 16, 32), sx = tile(s, 16, 1), y = tile(a, 32, 64), sy = tile(s, 32, 2);
    line = __LINE__ + 1;
    ts::dot_scaled(x, sx, ScaledFormat::mxfp8_e4m3, y, sy, ScaledFormat::mxfp8_e4m3);
  });
  CHECK(m.find("a holds K = 32") != std::string::npos);
  CHECK(m.find("b is given K-major, [N, K]") != std::string::npos);
  // A per-tensor scale without an nvfp4 operand; an unknown format.
  m = errorAt(line, [&](P a, P s) {
    auto x = tile(a, 16, 32), sx = tile(s, 16, 1);
    line = __LINE__ + 1;
    ts::dot_scaled(x, sx, ScaledFormat::mxfp8_e4m3, x, sx, ScaledFormat::mxfp8_e4m3, {}, 0.5);
  });
  CHECK(m.find("a per-tensor scale applies to nvfp4 operands only") != std::string::npos);
  m = errorAt(line, [&](P a, P s) {
    auto x = tile(a, 16, 32), sx = tile(s, 16, 1);
    line = __LINE__ + 1;
    ts::dot_scaled(x, sx, ScaledFormat(42), x, sx, ScaledFormat::mxfp8_e4m3);
  });
  CHECK(m.find("unknown format 42; the formats are mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, nvfp4") !=
        std::string::npos);
  // An odd contiguous extent of fp4 codes to pack.
  m = errorAt(line, [&](P a, P) {
    line = __LINE__ + 1;
    ts::pack_fp4(tile(a, 4, 7));
  });
  CHECK(m.find("the last (contiguous) extent of tile<4x7xu8> is odd") != std::string::npos);
  // The MX dtypes are no kernel value's dtype.
  m = errorAt(line, [&](P a, P) {
    line = __LINE__ + 1;
    tile(a, 4, 8).to(ts::f4e2m1);
  });
  CHECK(m.find("f4e2m1 is a host format") != std::string::npos);
  m = errorAt(line, [&](P a, P) {
    line = __LINE__ + 1;
    ts::mx_decode(tile(a, 4, 8), ts::f8e4m3fnuz);
  });
  CHECK(m.find("f8e4m3fnuz is not an MX element or scale format") != std::string::npos);
}

// ------------------------------------------------ assembles and links

// ------------------------------------------------ native on gfx950

TEST_CASE("dot_scaled: fp8 and fp4 run on gfx950's v_mfma_scale, silently, matching the reference",
          "[mx][dot][emu][gfx950]") {
  const ScaledFormat e4 = ScaledFormat::mxfp8_e4m3, e5 = ScaledFormat::mxfp8_e5m2, f6 = ScaledFormat::mxfp6_e2m3,
                     f4 = ScaledFormat::mxfp4;
  const ts::Target gfx950 = ts::Target::parse("amdgpu:gfx950");
  auto code = [&](ScaledFormat f) { return f == e4 ? 0 : f == e5 ? 1 : 4; };
  // The instruction with the pair's cbsz / blgp (the instruction's A is
  // B), scale VGPRs, no warning; 32x32x64 where each wave owns 32 x 32
  // tiles (64 x 64 on 4 waves), 16x16x128 on 64 x 32 (a K step of 128).
  for (auto [fa, fb, BM, BN, BK] :
       {std::tuple{e4, e4, 64, 64, 64}, std::tuple{e4, e5, 64, 64, 128}, std::tuple{f4, f4, 64, 64, 64},
        std::tuple{e5, f4, 64, 64, 128}, std::tuple{f4, e4, 64, 32, 128}, std::tuple{e4, e4, 64, 32, 128}}) {
    INFO(ts::name(fa) << " x " << ts::name(fb) << " " << BM << "x" << BN << "x" << BK);
    ts::CompileOptions strict;
    strict.nativeScaledDotsOnly = true;  // a decomposition would be an error
    ts::CompiledKernel ck = ts::compile(scaledGemm(fa, fb, BM, BN, BK, false), gfx950, strict);
    CHECK(ck.warnings().empty());
    const std::string isa = ck.dump(tessera::Stage::AMDGCN);
    const std::string form = BN == 64 ? "v_mfma_scale_f32_32x32x64_f8f6f4" : "v_mfma_scale_f32_16x16x128_f8f6f4";
    const size_t at = isa.find(form);
    REQUIRE(at != std::string::npos);
    const std::string line = isa.substr(at, isa.find('\n', at) - at);
    INFO(line);
    auto field = [&](const char* f, int v) {
      return v == 0 ? line.find(f) == std::string::npos : line.find(f + std::to_string(v)) != std::string::npos;
    };
    CHECK(field("cbsz:", code(fb)));
    CHECK(field("blgp:", code(fa)));
    std::string report = testamd::checkCodeObject(ck, 64);
    CHECK(report.find("private segment (spills/stack) 0 bytes") != std::string::npos);
  }
  // fp6 (its operand order in the registers not established) and K steps
  // the two forms do not divide run decomposed, with the warning.
  CHECK(ts::compile(scaledGemm(f6, e4, 64, 64, 64, false), gfx950).warnings().size() == 1);
  CHECK(ts::compile(scaledGemm(e4, e4, 64, 64, 32, false), gfx950).warnings().size() == 1);
  // The emulator runs the instruction (Matrix.cpp: the scale of lane i + T b
  // for block b of the k-step; fp4 two a byte) against the double
  // reference: whole tiles and blocks, ragged M, N and K (masked codes and
  // scales), both forms, mixed pairs.
  const ts::Device dev = ts::Device::emulator("amdgpu:gfx950");
  checkScaledGemms(dev, {{e4, e4, 64, 64, 64, 128, 64, 256},
                         {e5, e4, 64, 64, 128, 45, 37, 77},
                         {e4, e5, 64, 32, 128, 100, 70, 130},
                         {f4, f4, 64, 64, 64, 100, 70, 97},
                         {f4, f4, 64, 32, 128, 64, 64, 256},
                         {e4, f4, 64, 64, 128, 33, 40, 96},
                         {f4, e5, 64, 64, 64, 64, 64, 64}});
}

std::vector<ts::Kernel> gpuKernels() {
  return {scaledGemm(ScaledFormat::mxfp4, ScaledFormat::mxfp4, 64, 64, 32, false),
          scaledGemm(ScaledFormat::nvfp4, ScaledFormat::nvfp4, 64, 64, 32, true),
          scaledGemm(ScaledFormat::mxfp8_e4m3, ScaledFormat::mxfp6_e2m3, 64, 64, 32, false)};
}

TEST_CASE("dot_scaled: the PTX assembles with ptxas for sm_100a and sm_120a without spills", "[mx][gpu][ptxas]") {
  if (::access("/usr/local/cuda/bin/ptxas", X_OK) != 0) {
    WARN("SKIP: ptxas not found (install the CUDA toolkit at /usr/local/cuda); PTX not assembled");
    return;
  }
  for (const ts::Kernel& kernel : gpuKernels())
    for (const char* sm : {"sm_100a", "sm_120a"}) {
      INFO(kernel.name() << " on " << sm);
      testptx::PtxasFigures f =
          testptx::ptxasFigures(ts::compile(kernel, ts::Target::parse(std::string("nvptx:") + sm)));
      INFO(f.report);
      CHECK(f.spillBytes == 0);
    }
}

TEST_CASE("dot_scaled: the AMDGPU code links with LLD for gfx942 and gfx1100", "[mx][gpu][amdgpu]") {
  for (const ts::Kernel& kernel : gpuKernels())
    for (auto [gfx, wave] : {std::pair{"gfx942", 64}, std::pair{"gfx1100", 32}}) {
      INFO(kernel.name() << " on " << gfx);
      testamd::checkCodeObject(ts::compile(kernel, ts::Target::parse(std::string("amdgpu:") + gfx)), wave);
    }
}

}  // namespace

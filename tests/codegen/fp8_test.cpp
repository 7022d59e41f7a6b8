// The 8-bit storage floats (f8e4m3, f8e5m2, f8e4m3fnuz, f8e5m2fnuz):
//  * the host codec of support/Fp8.h against values written out from the
//    format definitions and against a brute-force nearest search over all
//    256 codes (ties to the even code, saturation, NaN, -0);
//  * conversions in kernels, from f32, f16, bf16, f64 and integers and back
//    and between fp8 formats, bit for bit against the host codec on every
//    backend (the pinned CPU paths and emulated sm_80, gfx942, gfx1100):
//    every code, every midpoint between neighbours, infinities, NaN,
//    subnormal sources and random values;
//  * dot on fp8 operands (e4m3 x e4m3, e4m3 x e5m2) with a per-tensor scale,
//    against a plain C++ GEMM on tile-multiple and ragged shapes: widened to
//    f16 on the CPU and sm_80, native on the fp8 tensor cores of emulated
//    sm_89 / sm_90a (mma.sync e4m3/e5m2) and gfx942 (MFMA fp8/bf8 on the
//    FNUZ formats), and on the FMA loop where no instruction fits the tile;
//  * which PTX instruction each sm gets, and ptxas's spill count;
//  * the errors: arithmetic on fp8 in the DSL and in the IR;
//  * the kernels assemble (ptxas sm_80/sm_89/sm_90a) and link (LLD
//    gfx942/gfx1100).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <algorithm>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

#include "../amd_code_object.h"
#include "../ptxas_report.h"
#include "../cpu_paths.h"
#include "tessera/ir/Parser.h"
#include "tessera/ir/Verifier.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr ts::DType kFormats[] = {ts::f8e4m3, ts::f8e5m2, ts::f8e4m3fnuz, ts::f8e5m2fnuz};

// ------------------------------------------------ the formats, written out

struct Known {
  uint8_t code;
  double value;
};

/// Values read off each format's definition (OCP OFP8 for e4m3/e5m2; the
/// FNUZ formats: bias one higher, 0x80 the only NaN).
std::vector<Known> known(ts::DType t) {
  if (t == ts::f8e4m3)
    return {{0x00, 0.0},   {0x01, 0x1p-9}, {0x07, 7 * 0x1p-9}, {0x08, 0x1p-6}, {0x38, 1.0},
            {0x39, 1.125}, {0x7E, 448.0},  {0xB8, -1.0},       {0xFE, -448.0}, {0x40, 2.0}};
  if (t == ts::f8e5m2)
    return {{0x00, 0.0},  {0x01, 0x1p-16}, {0x03, 3 * 0x1p-16}, {0x04, 0x1p-14},  {0x3C, 1.0},
            {0x3D, 1.25}, {0x7B, 57344.0}, {0xBC, -1.0},        {0x7C, INFINITY}, {0xFC, -INFINITY}};
  if (t == ts::f8e4m3fnuz)
    return {{0x00, 0.0}, {0x01, 0x1p-10}, {0x08, 0x1p-7}, {0x40, 1.0}, {0x41, 1.125}, {0x7F, 240.0}, {0xC0, -1.0}};
  return {{0x00, 0.0}, {0x01, 0x1p-17}, {0x04, 0x1p-15}, {0x40, 1.0}, {0x41, 1.25}, {0x7F, 57344.0}, {0xC0, -1.0}};
}

bool isNanCode(ts::DType t, uint8_t c) {
  if (t == ts::f8e4m3fnuz || t == ts::f8e5m2fnuz) return c == 0x80;
  if (t == ts::f8e4m3) return (c & 0x7F) == 0x7F;
  return (c & 0x7F) > 0x7C;  // e5m2: exponent all ones, mantissa non-zero
}

/// The finite codes with their values, by brute force over all 256.
std::vector<std::pair<uint8_t, double>> finiteCodes(ts::DType t) {
  std::vector<std::pair<uint8_t, double>> r;
  for (int c = 0; c < 256; ++c) {
    double v = ts::fp8Decode(t, uint8_t(c));
    if (std::isfinite(v)) r.emplace_back(uint8_t(c), v);
  }
  return r;
}

/// Reference rounding: the nearest finite code; ties to the code with an
/// even mantissa (an even code); beyond the largest finite value, and for
/// infinities, the largest of that sign; NaN to the canonical NaN; -0 to
/// -0 where the format has one.
uint8_t nearestCode(ts::DType t, double x) {
  const bool fnuz = t == ts::f8e4m3fnuz || t == ts::f8e5m2fnuz;
  if (std::isnan(x)) return fnuz ? 0x80 : t == ts::f8e4m3 ? 0x7F : 0x7E;
  if (x == 0) return std::signbit(x) && !fnuz ? 0x80 : 0x00;
  uint8_t best = 0;
  double bestErr = INFINITY;
  // Beyond the largest finite value (by more than half its quantum, tested
  // by the search below for the values near it): saturate.
  double mx = 0;
  for (auto [c, v] : finiteCodes(t)) mx = std::max(mx, v);
  if (std::fabs(x) > 2 * mx) x = x > 0 ? INFINITY : -INFINITY;
  for (auto [c, v] : finiteCodes(t)) {
    if (v == 0 && std::signbit(v)) continue;
    if (std::isinf(x)) {
      if ((v > 0) == (x > 0) && std::fabs(v) >= std::fabs(ts::fp8Decode(t, best)) && v != 0) best = c;
      continue;
    }
    double err = std::fabs(v - x);
    if (err < bestErr || (err == bestErr && (c & 1) == 0)) best = c, bestErr = err;
  }
  // A result of zero keeps x's sign (except in FNUZ).
  if (ts::fp8Decode(t, best) == 0) return x < 0 && !fnuz ? 0x80 : 0x00;
  return best;
}

/// Inputs: every finite value, the midpoints of neighbours (exact ties),
/// points just beside them, values beyond the range, specials, subnormal
/// f32s and random values over the whole range.
std::vector<float> probeValues(ts::DType t) {
  std::vector<double> pos;
  for (auto [c, v] : finiteCodes(t))
    if (v >= 0 && !std::signbit(v)) pos.push_back(v);
  std::sort(pos.begin(), pos.end());
  std::vector<float> r;
  for (size_t i = 0; i < pos.size(); ++i) {
    r.push_back(float(pos[i]));
    if (i + 1 < pos.size()) {
      double mid = (pos[i] + pos[i + 1]) / 2;
      r.push_back(float(mid));
      r.push_back(std::nextafter(float(mid), 0.f));
      r.push_back(std::nextafter(float(mid), INFINITY));
    }
  }
  double mx = pos.back(), q = mx - pos[pos.size() - 2];
  for (double v : {mx + q / 2, mx + q / 2 + q / 8, mx * 4, 1e30, pos[1] / 2, pos[1] / 4, pos[1] * 0.51})
    r.push_back(float(v));
  for (float v : {INFINITY, 1e-40f, 1e-45f, std::numeric_limits<float>::min()}) r.push_back(v);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> lg(std::log2(pos[1]) - 2, std::log2(mx) + 1);
  for (int i = 0; i < 300; ++i) r.push_back(float(std::exp2(lg(rng))));
  std::vector<float> both = r;
  for (float v : r) both.push_back(-v);
  both.push_back(0.f);
  both.push_back(-0.f);
  both.push_back(NAN);
  both.push_back(-NAN);
  return both;
}

TEST_CASE("fp8 codec: the formats' values, and every code decodes monotonically", "[fp8]") {
  for (ts::DType t : kFormats) {
    INFO(ts::name(t));
    for (auto [c, v] : known(t)) {
      INFO("code " << int(c));
      CHECK(ts::fp8Decode(t, c) == v);
      if (std::isfinite(v)) CHECK(int(ts::fp8Encode(t, v)) == int(c));
    }
    int nans = 0;
    for (int c = 0; c < 256; ++c) {
      nans += std::isnan(ts::fp8Decode(t, uint8_t(c)));
      CHECK(std::isnan(ts::fp8Decode(t, uint8_t(c))) == isNanCode(t, uint8_t(c)));
    }
    CHECK(nans == (t == ts::f8e4m3 ? 2 : t == ts::f8e5m2 ? 6 : 1));
    for (int c = 0; c + 1 < 128; ++c) {
      float a = ts::fp8Decode(t, uint8_t(c)), b = ts::fp8Decode(t, uint8_t(c + 1));
      if (std::isnan(b)) break;
      CHECK(a < b);  // positive codes in value order
      const bool fnuz = t == ts::f8e4m3fnuz || t == ts::f8e5m2fnuz;
      if (c == 0 && fnuz)
        CHECK(std::isnan(ts::fp8Decode(t, 0x80)));  // no -0: its code is the NaN
      else
        CHECK(ts::fp8Decode(t, uint8_t(c | 0x80)) == -a);
    }
  }
}

TEST_CASE("fp8 codec: encoding is the nearest code, ties to even, saturating", "[fp8]") {
  for (ts::DType t : kFormats) {
    INFO(ts::name(t));
    for (float x : probeValues(t)) {
      INFO("x = " << x);
      CHECK(int(ts::fp8Encode(t, x)) == int(nearestCode(t, x)));
    }
  }
}

// ------------------------------------------------------ kernels, bit exact

std::vector<ts::Device> devices() { return testpaths::cpuPathsAndEmulators(); }

template <class T>
constexpr ts::DType dtypeOf() {
  return ts::dsl::DTypeOf<T>::value;
}

/// out[i] = in[i] converted from From to To.
template <class From, class To>
ts::Kernel convertKernel(int B) {
  return ts::kernel("fp8_convert", [=](ts::Ptr<To> out, ts::Ptr<const From> in, ts::Int n) {
    auto i = ts::program_id(0) * B + ts::arange(B);
    ts::store(out + i, ts::load(in + i, i < n).to(dtypeOf<To>()), i < n);
  });
}

/// Runs convertKernel on `x` (host elements of From's storage type) on
/// `dev`; returns the output elements.
template <class From, class To, class HostIn, class HostOut = HostIn>
std::vector<HostOut> convertOn(const ts::Device& dev, const std::vector<HostIn>& x, int B = 64) {
  ts::CompiledKernel k = ts::compile(convertKernel<From, To>(B), dev);
  ts::Buffer bi = dev.upload(dtypeOf<From>(), x);
  ts::Buffer bo = dev.alloc(dtypeOf<To>(), x.size());
  k.launch(ts::Dim3(unsigned((x.size() + B - 1) / B)), bo, bi, int32_t(x.size()));
  return bo.read<HostOut>();
}

template <class F8>
void checkFromF32(const ts::Device& dev) {
  const ts::DType t = dtypeOf<F8>();
  std::vector<float> x = probeValues(t);
  std::vector<uint8_t> got = convertOn<float, F8, float, uint8_t>(dev, x);
  REQUIRE(got.size() == x.size());
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (got[i] != ts::fp8Encode(t, x[i]) && ++bad <= 8)
      FAIL_CHECK(ts::name(t) << " x = " << x[i] << ": got code " << int(got[i]) << ", expected "
                             << int(ts::fp8Encode(t, x[i])));
  CHECK(bad == 0);
}

template <class F8>
void checkToF32(const ts::Device& dev) {
  const ts::DType t = dtypeOf<F8>();
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[size_t(c)] = uint8_t(c);
  std::vector<float> got = convertOn<F8, float, uint8_t, float>(dev, codes);
  for (int c = 0; c < 256; ++c) {
    float want = ts::fp8Decode(t, uint8_t(c));
    INFO(ts::name(t) << " code " << c << " got " << got[size_t(c)] << " expected " << want);
    if (std::isnan(want))
      CHECK(std::isnan(got[size_t(c)]));
    else
      CHECK(std::memcmp(&got[size_t(c)], &want, 4) == 0);  // -0 stays -0
  }
}

TEST_CASE("fp8: f32 -> fp8 -> f32 in kernels, bit for bit against the codec on every backend", "[fp8][emu]") {
  for (const ts::Device& dev : devices()) {
    INFO(dev.name());
    checkFromF32<ts::float8_e4m3>(dev);
    checkFromF32<ts::float8_e5m2>(dev);
    checkFromF32<ts::float8_e4m3fnuz>(dev);
    checkFromF32<ts::float8_e5m2fnuz>(dev);
    checkToF32<ts::float8_e4m3>(dev);
    checkToF32<ts::float8_e5m2>(dev);
    checkToF32<ts::float8_e4m3fnuz>(dev);
    checkToF32<ts::float8_e5m2fnuz>(dev);
  }
}

// f16 and bf16 bits, by the compiler's _Float16 and by rounding f32 bits
// to nearest even (independent of Tessera's own conversions).
uint16_t halfBits(double v) {
  _Float16 h = static_cast<_Float16>(v);
  uint16_t r;
  std::memcpy(&r, &h, 2);
  return r;
}
double halfValue(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<double>(h);
}
uint16_t bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
double bf16Value(uint16_t bits) {
  uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST_CASE("fp8: conversions from f16, bf16, f64, integers and between formats round once", "[fp8][emu]") {
  std::vector<double> vals;
  for (float v : probeValues(ts::f8e5m2)) vals.push_back(v);
  // Values where rounding through f32 first would differ from rounding
  // once: just above an e4m3 midpoint by less than an f32 ulp.
  for (double m : {1.0625, 3.25, 0.0078125 * 1.5, 300.0})
    for (double d : {0x1p-40, -0x1p-40}) vals.push_back(m + d * m);
  for (const ts::Device& dev : devices()) {
    INFO(dev.name());
    // f64 -> e4m3: one rounding, from the f64 value.
    std::vector<uint8_t> g = convertOn<double, ts::float8_e4m3, double, uint8_t>(dev, vals);
    for (size_t i = 0; i < vals.size(); ++i) {
      INFO("f64 " << vals[i]);
      CHECK(int(g[i]) == int(nearestCode(ts::f8e4m3, vals[i])));
    }
    // f16 -> e5m2 (f16 subnormals included) and bf16 -> e4m3fnuz.
    std::vector<uint16_t> h, bh;
    for (double v : vals) h.push_back(halfBits(v)), bh.push_back(bf16Bits(float(v)));
    for (uint16_t s : {uint16_t(0x0001), uint16_t(0x0003), uint16_t(0x0200), uint16_t(0x8101)}) h.push_back(s);
    std::vector<uint8_t> gh = convertOn<ts::half, ts::float8_e5m2, uint16_t, uint8_t>(dev, h);
    for (size_t i = 0; i < h.size(); ++i) {
      double v = halfValue(h[i]);
      INFO("f16 " << v);
      CHECK(int(gh[i]) == int(nearestCode(ts::f8e5m2, v)));
    }
    std::vector<uint8_t> gb = convertOn<ts::bfloat16, ts::float8_e4m3fnuz, uint16_t, uint8_t>(dev, bh);
    for (size_t i = 0; i < bh.size(); ++i) {
      double v = bf16Value(bh[i]);
      INFO("bf16 " << v);
      CHECK(int(gb[i]) == int(nearestCode(ts::f8e4m3fnuz, v)));
    }
    // Integers: i32 (beyond f32's exact range too) and back to i32,
    // saturating.
    std::vector<int32_t> ints = {0, 1, -1, 17, 19, -300, 448, 449, 464, 465, 100000, 16777217, -2147483647 - 1};
    std::vector<uint8_t> gi = convertOn<int32_t, ts::float8_e4m3, int32_t, uint8_t>(dev, ints);
    for (size_t i = 0; i < ints.size(); ++i) {
      INFO("i32 " << ints[i]);
      CHECK(int(gi[i]) == int(nearestCode(ts::f8e4m3, double(ints[i]))));
    }
    std::vector<uint8_t> codes(256);
    for (int c = 0; c < 256; ++c) codes[size_t(c)] = uint8_t(c);
    std::vector<int32_t> back = convertOn<ts::float8_e5m2, int32_t, uint8_t, int32_t>(dev, codes);
    for (int c = 0; c < 256; ++c) {
      double v = ts::fp8Decode(ts::f8e5m2, uint8_t(c));
      int32_t want = std::isnan(v) ? 0 : v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : int32_t(v);
      INFO("e5m2 code " << c);
      CHECK(back[size_t(c)] == want);
    }
    // Between formats: e5m2 -> e4m3 (rounds, saturates) and e4m3 -> e5m2.
    std::vector<uint8_t> x52 = convertOn<ts::float8_e5m2, ts::float8_e4m3, uint8_t, uint8_t>(dev, codes);
    std::vector<uint8_t> x43 = convertOn<ts::float8_e4m3, ts::float8_e5m2fnuz, uint8_t, uint8_t>(dev, codes);
    for (int c = 0; c < 256; ++c) {
      INFO("code " << c);
      CHECK(int(x52[size_t(c)]) == int(nearestCode(ts::f8e4m3, ts::fp8Decode(ts::f8e5m2, uint8_t(c)))));
      CHECK(int(x43[size_t(c)]) == int(nearestCode(ts::f8e5m2fnuz, ts::fp8Decode(ts::f8e4m3, uint8_t(c)))));
    }
  }
}

// ---------------------------------------------------------------- dot

/// C = scale * (A @ B), A: M x K of A8, B: K x N of B8, C: M x N f32, one
/// BM x BN tile per program, K in steps of BK.
template <class A8, class B8>
ts::Kernel fp8Gemm(int BM, int BN, int BK) {
  return ts::kernel("fp8_gemm", [=](ts::Ptr<float> c, ts::Ptr<const A8> a, ts::Ptr<const B8> b, ts::Float scale,
                                    ts::Int M, ts::Int N, ts::Int K) {
    auto r2 = ts::expand_dims(ts::program_id(0) * BM + ts::arange(BM), 1);
    auto c2 = ts::expand_dims(ts::program_id(1) * BN + ts::arange(BN), 0);
    auto acc = ts::for_range(0, K, BK, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
      auto kk = k0 + ts::arange(BK);
      auto ta = ts::load(a + r2 * K + ts::expand_dims(kk, 0), (r2 < M) & (ts::expand_dims(kk, 0) < K), 0.0);
      auto tb = ts::load(b + ts::expand_dims(kk, 1) * N + c2, (ts::expand_dims(kk, 1) < K) & (c2 < N), 0.0);
      return ts::dot(ta, tb, acc);
    });
    ts::store(c + r2 * N + c2, acc * scale, (r2 < M) & (c2 < N));
  });
}

template <class A8, class B8>
void checkGemm(const ts::Device& dev, int BM, int BN, int BK, int M, int N, int K) {
  const ts::DType ta = dtypeOf<A8>(), tb = dtypeOf<B8>();
  std::mt19937 rng(uint32_t(M * 131 + N * 7 + K));
  // Codes of finite values of moderate size, so that the f32 sums of
  // products are exact up to reassociation (a wrong element or a lost
  // product is off by far more than the tolerance).
  auto codes = [&](ts::DType t, size_t n) {
    std::vector<uint8_t> v(n);
    std::uniform_int_distribution<int> d(0, 255);
    for (auto& c : v) {
      do c = uint8_t(d(rng));
      while (!std::isfinite(ts::fp8Decode(t, c)) || std::fabs(ts::fp8Decode(t, c)) > 64);
    }
    return v;
  };
  std::vector<uint8_t> a = codes(ta, size_t(M) * K), b = codes(tb, size_t(K) * N);
  const float scale = 0.375f;
  ts::CompiledKernel k = ts::compile(fp8Gemm<A8, B8>(BM, BN, BK), dev);
  ts::Buffer bc = dev.alloc(ts::f32, size_t(M) * N);
  k.launch(ts::Dim3(unsigned((M + BM - 1) / BM), unsigned((N + BN - 1) / BN)), bc, dev.upload(ta, a), dev.upload(tb, b),
           scale, int32_t(M), int32_t(N), int32_t(K));
  std::vector<float> c = bc.read<float>();
  int bad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int kk = 0; kk < K; ++kk) {
        double p = double(ts::fp8Decode(ta, a[size_t(i) * K + kk])) * ts::fp8Decode(tb, b[size_t(kk) * N + j]);
        ref += p;
        mag += std::fabs(p);
      }
      ref *= scale;
      double got = c[size_t(i) * N + j];
      // The f32 sum of K products is within K 2^-24 sum|products| of the
      // exact sum in any order (tensor cores, FMA loops).
      if (std::fabs(got - ref) > std::max(1e-6, (K + 1) * 0x1p-24) * mag * scale + 1e-30 && ++bad <= 5)
        FAIL_CHECK(ts::name(ta) << " x " << ts::name(tb) << " " << M << "x" << N << "x" << K << " C[" << i << "][" << j
                                << "] = " << got << ", expected " << ref);
    }
  CHECK(bad == 0);
}

TEST_CASE("fp8: dot of e4m3 x e4m3 and e4m3 x e5m2 with a per-tensor scale matches a C++ GEMM", "[fp8][dot][emu]") {
  for (const ts::Device& dev : devices()) {
    INFO(dev.name());
    const bool gpu = dev.kind() != ts::rt::DeviceKind::CPU;
    const int BM = gpu ? 32 : 64, BN = 32, BK = 32;
    for (auto [M, N, K] : {std::tuple{64, 64, 64}, std::tuple{45, 37, 50}, std::tuple{1, 70, 33}}) {
      checkGemm<ts::float8_e4m3, ts::float8_e4m3>(dev, BM, BN, BK, M, N, K);
      checkGemm<ts::float8_e4m3, ts::float8_e5m2>(dev, BM, BN, BK, M, N, K);
    }
    checkGemm<ts::float8_e5m2fnuz, ts::float8_e4m3fnuz>(dev, BM, BN, BK, 40, 24, 72);
  }
}

// ------------------------------------------------ native fp8 tensor cores

/// True where the compiled kernel's dot kept its fp8 operands (widen-fp8-dots
/// left it: no f16 tile in the final tile IR) and the GPU module calls
/// `mma` (an LLVM intrinsic name).
bool nativeDot(const ts::CompiledKernel& k, const std::string& mma) {
  return k.dump(ts::Stage::TileIR).find("xf16>") == std::string::npos &&
         k.dump(ts::Stage::LLVMGpu).find(mma) != std::string::npos;
}

/// The widened dot: f16 operands in the tile IR.
bool widenedDot(const ts::CompiledKernel& k) { return k.dump(ts::Stage::TileIR).find("xf16>") != std::string::npos; }

template <class A8, class B8>
void checkNativeGemm(const std::string& target, const std::string& mma) {
  const ts::Device dev = ts::Device::emulator(target);
  // 64x64x64 tiles (4 warps 2x2, two k-steps of 32 per tile) and 32x32x32
  // (one k-step); whole tiles with several K iterations (the loop-carried
  // accumulator), one tile, ragged M, N, K.
  for (auto [BM, BN, BK] : {std::tuple{64, 64, 64}, std::tuple{32, 32, 32}}) {
    INFO(target << " " << ts::name(dtypeOf<A8>()) << " x " << ts::name(dtypeOf<B8>()) << " tile " << BM << "x" << BN
                << "x" << BK);
    REQUIRE(nativeDot(ts::compile(fp8Gemm<A8, B8>(BM, BN, BK), dev), mma));
    for (auto [M, N, K] :
         {std::tuple{128, 128, 192}, std::tuple{BM, BN, BK}, std::tuple{100, 70, 50}, std::tuple{33, 17, 7}})
      checkGemm<A8, B8>(dev, BM, BN, BK, M, N, K);
  }
}

TEST_CASE(
    "fp8: sm_89 and sm_90a run OCP fp8 dots on mma.sync m16n8k32 / wgmma m64nNk32 e4m3/e5m2 (emulated), "
    "matching a C++ GEMM",
    "[fp8][dot][emu]") {
  // sm_90a: the 64x64 tiles (4 warps, one warpgroup along M) take wgmma
  // m64n64k32 (A from registers, B K-major), the 32x32 tiles mma.sync.
  for (bool e5m2A : {false, true}) {
    const std::string what = e5m2A ? "e5m2.e4m3" : "e4m3.e4m3";
    INFO(what);
    ts::Kernel k = e5m2A ? fp8Gemm<ts::float8_e5m2, ts::float8_e4m3>(64, 64, 64)
                         : fp8Gemm<ts::float8_e4m3, ts::float8_e4m3>(64, 64, 64);
    const std::string gpu = ts::compile(k, ts::Device::emulator("nvptx:sm_90a")).dump(ts::Stage::LLVMGpu);
    CHECK(gpu.find("wgmma.mma_async.sync.aligned.m64n64k32.f32." + what) != std::string::npos);
  }
  for (const char* sm : {"nvptx:sm_89", "nvptx:sm_90a"}) {
    checkNativeGemm<ts::float8_e4m3, ts::float8_e4m3>(sm, "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32");
    checkNativeGemm<ts::float8_e4m3, ts::float8_e5m2>(sm, "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e5m2.f32");
  }
  checkNativeGemm<ts::float8_e5m2, ts::float8_e4m3>("nvptx:sm_89", "llvm.nvvm.mma.m16n8k32.row.col.f32.e5m2.e4m3.f32");
  checkNativeGemm<ts::float8_e5m2, ts::float8_e5m2>("nvptx:sm_90a", "llvm.nvvm.mma.m16n8k32.row.col.f32.e5m2.e5m2.f32");
  // sm_80 has no fp8 mma, and the FNUZ formats are not NVIDIA's: widened.
  CHECK(widenedDot(
      ts::compile(fp8Gemm<ts::float8_e4m3, ts::float8_e4m3>(64, 64, 64), ts::Device::emulator("nvptx:sm_80"))));
  CHECK(widenedDot(
      ts::compile(fp8Gemm<ts::float8_e4m3fnuz, ts::float8_e4m3fnuz>(64, 64, 64), ts::Device::emulator("nvptx:sm_89"))));
}

TEST_CASE("fp8: gfx942 runs FNUZ fp8 dots on MFMA 16x16x32 fp8/bf8 (emulated), matching a C++ GEMM",
          "[fp8][dot][emu][amdgpu]") {
  // MFMA takes Tessera's B as its first operand: e4m3fnuz x e5m2fnuz is bf8_fp8.
  const char* gfx = "amdgpu:gfx942";
  checkNativeGemm<ts::float8_e4m3fnuz, ts::float8_e4m3fnuz>(gfx, "llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8");
  checkNativeGemm<ts::float8_e4m3fnuz, ts::float8_e5m2fnuz>(gfx, "llvm.amdgcn.mfma.f32.16x16x32.bf8.fp8");
  checkNativeGemm<ts::float8_e5m2fnuz, ts::float8_e4m3fnuz>(gfx, "llvm.amdgcn.mfma.f32.16x16x32.fp8.bf8");
  checkNativeGemm<ts::float8_e5m2fnuz, ts::float8_e5m2fnuz>(gfx, "llvm.amdgcn.mfma.f32.16x16x32.bf8.bf8");
  // The OCP formats on gfx942, and gfx90a / gfx1100 (no fp8 matrix
  // instructions): widened.
  CHECK(widenedDot(ts::compile(fp8Gemm<ts::float8_e4m3, ts::float8_e4m3>(64, 64, 64), ts::Device::emulator(gfx))));
  for (const char* other : {"amdgpu:gfx90a", "amdgpu:gfx1100"})
    CHECK(widenedDot(
        ts::compile(fp8Gemm<ts::float8_e4m3fnuz, ts::float8_e5m2fnuz>(64, 64, 64), ts::Device::emulator(other))));
}

namespace {

// gfx950's fp8 MFMAs by tile (4 waves): a 64 x 64 tile gives every wave a
// 32 x 32 one, v_mfma_f32_32x32x64_f8f6f4 where K is a multiple of 64; a
// 32 x 32 tile 16 x 16 wave tiles, v_mfma_f32_16x16x128_f8f6f4 at K 128,
// v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} at K 32 and 64 (the instruction's
// first format is B's: e4m3 x e5m2 is bf8_fp8).
struct Gfx950Tile {
  int m, n, k;
  const char* mma;  // the intrinsic, without the 16x16x32 forms' formats
};
const Gfx950Tile kGfx950Tiles[] = {{64, 64, 64, "llvm.amdgcn.mfma.scale.f32.32x32x64.f8f6f4"},
                                   {64, 64, 128, "llvm.amdgcn.mfma.scale.f32.32x32x64.f8f6f4"},
                                   {32, 32, 128, "llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4"},
                                   {32, 32, 64, "llvm.amdgcn.mfma.f32.16x16x32."},
                                   {32, 32, 32, "llvm.amdgcn.mfma.f32.16x16x32."}};

template <class A8, class B8>
void checkGfx950Gemm() {
  const ts::Device dev = ts::Device::emulator("amdgpu:gfx950");
  const bool aE5m2 = dtypeOf<A8>() == ts::DType::F8E5M2, bE5m2 = dtypeOf<B8>() == ts::DType::F8E5M2;
  const std::string k32 = std::string(bE5m2 ? "bf8" : "fp8") + "." + (aE5m2 ? "bf8" : "fp8");
  for (const Gfx950Tile& t : kGfx950Tiles) {
    INFO(ts::name(dtypeOf<A8>()) << " x " << ts::name(dtypeOf<B8>()) << " tile " << t.m << "x" << t.n << "x" << t.k);
    std::string mma = t.mma;
    if (mma.back() == '.') mma += k32;
    REQUIRE(nativeDot(ts::compile(fp8Gemm<A8, B8>(t.m, t.n, t.k), dev), mma));
    // Whole tiles over several K iterations, one tile, ragged M, N, K.
    for (auto [M, N, K] :
         {std::tuple{128, 128, 256}, std::tuple{t.m, t.n, t.k}, std::tuple{100, 70, 150}, std::tuple{33, 17, 7}})
      checkGemm<A8, B8>(dev, t.m, t.n, t.k, M, N, K);
  }
}

}  // namespace

TEST_CASE("fp8: gfx950 runs OCP fp8 dots on its fp8 MFMAs (emulated), matching a C++ GEMM",
          "[fp8][dot][emu][amdgpu][gfx950]") {
  checkGfx950Gemm<ts::float8_e4m3, ts::float8_e4m3>();
  checkGfx950Gemm<ts::float8_e4m3, ts::float8_e5m2>();
  checkGfx950Gemm<ts::float8_e5m2, ts::float8_e4m3>();
  checkGfx950Gemm<ts::float8_e5m2, ts::float8_e5m2>();
  // The FNUZ formats are not gfx950's: widened.
  CHECK(widenedDot(ts::compile(fp8Gemm<ts::float8_e4m3fnuz, ts::float8_e4m3fnuz>(64, 64, 64),
                               ts::Device::emulator("amdgpu:gfx950"))));
}

TEST_CASE("fp8: the gfx950 AMDGCN has the unscaled f8f6f4 and fp8 MFMAs and links without scratch",
          "[fp8][gpu][amdgpu][gfx950]") {
  for (const Gfx950Tile& t : kGfx950Tiles) {
    INFO("tile " << t.m << "x" << t.n << "x" << t.k);
    ts::CompiledKernel k =
        ts::compile(fp8Gemm<ts::float8_e4m3, ts::float8_e5m2>(t.m, t.n, t.k), ts::Target::parse("amdgpu:gfx950"));
    const std::string amdgcn = k.dump(ts::Stage::AMDGCN);
    const std::string mma = std::string(t.mma);
    const char* want = mma.find("32x32x64") != std::string::npos    ? "v_mfma_f32_32x32x64_f8f6f4"
                       : mma.find("16x16x128") != std::string::npos ? "v_mfma_f32_16x16x128_f8f6f4"
                                                                    : "v_mfma_f32_16x16x32_bf8_fp8";
    CHECK(amdgcn.find(want) != std::string::npos);
    // Zero scales: the unscaled instruction, no v_mfma_ld_scale prefix.
    CHECK(amdgcn.find("v_mfma_scale") == std::string::npos);
    // The mixed formats through cbsz (B's, e5m2: 1) on the f8f6f4 forms.
    if (mma.find("f8f6f4") != std::string::npos) CHECK(amdgcn.find("cbsz:1") != std::string::npos);
    const std::string report = testamd::checkCodeObject(k, 64);
    CHECK(report.find("private segment (spills/stack) 0 bytes") != std::string::npos);
  }
}

TEST_CASE("fp8: gfx1200 runs OCP fp8 dots on WMMA 16x16x16 fp8/bf8 (emulated), matching a C++ GEMM",
          "[fp8][dot][emu][amdgpu][gfx1200]") {
  // RDNA4's WMMA takes Tessera's B as its first operand, as MFMA does:
  // e4m3 x e5m2 is bf8_fp8.
  const char* gfx = "amdgpu:gfx1200";
  checkNativeGemm<ts::float8_e4m3, ts::float8_e4m3>(gfx, "llvm.amdgcn.wmma.f32.16x16x16.fp8.fp8");
  checkNativeGemm<ts::float8_e4m3, ts::float8_e5m2>(gfx, "llvm.amdgcn.wmma.f32.16x16x16.bf8.fp8");
  checkNativeGemm<ts::float8_e5m2, ts::float8_e4m3>(gfx, "llvm.amdgcn.wmma.f32.16x16x16.fp8.bf8");
  checkNativeGemm<ts::float8_e5m2, ts::float8_e5m2>(gfx, "llvm.amdgcn.wmma.f32.16x16x16.bf8.bf8");
  // The FNUZ formats are not RDNA4's: widened.
  CHECK(widenedDot(
      ts::compile(fp8Gemm<ts::float8_e4m3fnuz, ts::float8_e5m2fnuz>(64, 64, 64), ts::Device::emulator(gfx))));
}

TEST_CASE("fp8: the gfx1200 AMDGCN has the fp8 WMMAs and links without scratch", "[fp8][gpu][amdgpu][gfx1200]") {
  for (bool mixed : {false, true}) {
    INFO((mixed ? "e5m2 x e4m3" : "e4m3 x e4m3"));
    ts::Kernel kernel = mixed ? fp8Gemm<ts::float8_e5m2, ts::float8_e4m3>(64, 64, 64)
                              : fp8Gemm<ts::float8_e4m3, ts::float8_e4m3>(64, 64, 64);
    ts::CompiledKernel k = ts::compile(kernel, ts::Target::parse("amdgpu:gfx1200"));
    const std::string amdgcn = k.dump(ts::Stage::AMDGCN);
    CHECK(amdgcn.find(mixed ? "v_wmma_f32_16x16x16_fp8_bf8" : "v_wmma_f32_16x16x16_fp8_fp8") != std::string::npos);
    CHECK(amdgcn.find("v_wmma_f32_16x16x16_f16") == std::string::npos);
    const std::string report = testamd::checkCodeObject(k, 32);
    CHECK(report.find("private segment (spills/stack) 0 bytes") != std::string::npos);
  }
}

TEST_CASE("fp8: the gfx942 AMDGCN has the fp8 MFMA and links, gfx90a and gfx1100 the f16 matrix instructions",
          "[fp8][gpu][amdgpu]") {
  for (auto [gfx, wave] : {std::pair{"gfx90a", 64}, std::pair{"gfx942", 64}, std::pair{"gfx1100", 32}})
    for (bool mixed : {false, true}) {
      INFO(gfx << (mixed ? " e5m2fnuz x e4m3fnuz" : " e4m3fnuz x e4m3fnuz"));
      ts::Kernel kernel = mixed ? fp8Gemm<ts::float8_e5m2fnuz, ts::float8_e4m3fnuz>(64, 64, 64)
                                : fp8Gemm<ts::float8_e4m3fnuz, ts::float8_e4m3fnuz>(64, 64, 64);
      ts::CompiledKernel k = ts::compile(kernel, ts::Target::parse(std::string("amdgpu:") + gfx));
      const std::string amdgcn = k.dump(ts::Stage::AMDGCN);
      const bool fp8 = std::string(gfx) == "gfx942";
      CHECK((amdgcn.find(mixed ? "v_mfma_f32_16x16x32_fp8_bf8" : "v_mfma_f32_16x16x32_fp8_fp8") != std::string::npos) ==
            fp8);
      // Widened, the dot takes the f16 instruction: MFMA 32x32x8 on gfx90a
      // (each of the 4 waves owns a 32 x 32 tile), WMMA 16x16x16 on gfx1100.
      const char* f16Mma = std::string(gfx) == "gfx1100" ? "16x16x16" : "32x32x8";
      CHECK((amdgcn.find(f16Mma) != std::string::npos) == !fp8);
      testamd::checkCodeObject(k, wave);
    }
}

TEST_CASE("fp8: a native fp8 dot whose tile fits no instruction takes the FMA loop, decoding exactly",
          "[fp8][dot][emu]") {
  // K tile 16 is below mma.m16n8k32's 32: the dot stays fp8 (the table takes
  // it) and the FMA loop decodes the codes.
  const ts::Device dev = ts::Device::emulator("nvptx:sm_89");
  ts::CompiledKernel k = ts::compile(fp8Gemm<ts::float8_e4m3, ts::float8_e5m2>(32, 32, 16), dev);
  CHECK_FALSE(widenedDot(k));
  CHECK(k.dump(ts::Stage::LLVMGpu).find("llvm.nvvm.mma") == std::string::npos);
  for (auto [M, N, K] : {std::tuple{64, 64, 48}, std::tuple{45, 37, 50}})
    checkGemm<ts::float8_e4m3, ts::float8_e5m2>(dev, 32, 32, 16, M, N, K);
}

TEST_CASE("fp8: the sm_89 PTX has the fp8 mma.sync, sm_90a the fp8 wgmma, sm_80 / sm_86 the f16 mma, ptxas: no spills",
          "[fp8][gpu][ptxas]") {
  const bool ptxas = ::access("/usr/local/cuda/bin/ptxas", X_OK) == 0;
  if (!ptxas) WARN("SKIPPED the ptxas checks: ptxas not found (install the CUDA toolkit at /usr/local/cuda)");
  for (const char* sm : {"sm_80", "sm_86", "sm_89", "sm_90a"})
    for (auto [BK, mixed] : {std::pair{64, false}, std::pair{32, true}}) {
      const bool fp8 = std::string(sm) == "sm_89" || std::string(sm) == "sm_90a";
      ts::Kernel kernel = mixed ? fp8Gemm<ts::float8_e4m3, ts::float8_e5m2>(64, 64, BK)
                                : fp8Gemm<ts::float8_e4m3, ts::float8_e4m3>(64, 64, BK);
      INFO(sm << (mixed ? " e4m3 x e5m2" : " e4m3 x e4m3") << " 64x64x" << BK);
      ts::CompiledKernel k = ts::compile(kernel, ts::Target::parse(std::string("nvptx:") + sm));
      const std::string ptx = k.dump(ts::Stage::PTX);
      // sm_90a: the 64x64 tile over 4 warps is one warpgroup along M: wgmma.
      const bool wgmma = std::string(sm) == "sm_90a";
      const std::string native = wgmma   ? (mixed ? "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2"
                                                  : "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3")
                                 : mixed ? "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"
                                         : "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32";
      CHECK((ptx.find(native) != std::string::npos) == fp8);
      CHECK((ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != std::string::npos) == !fp8);
      if (!ptxas) continue;
      testptx::PtxasFigures f = testptx::ptxasFigures(k);
      INFO(f.report);
      // The native path spills nothing. (sm_86 holds the widened f16
      // 64x64x64 dot to fewer registers than sm_80 does and spills: the f16
      // path's known limit, docs/gpu.md.)
      if (std::string(sm) != "sm_86") CHECK(f.spillBytes == 0);
    }
}

// ---------------------------------------------------------------- errors

TEST_CASE("fp8: arithmetic on fp8 is an error naming the line, and the IR verifier says what to do", "[fp8][errors]") {
  auto bad = [] {
    return ts::kernel("fp8_add", [](ts::Ptr<ts::float8_e4m3> p) {
      auto x = ts::load(p + ts::arange(16));
      ts::store(p + ts::arange(16), x + x);
    });
  };
  const int line = __LINE__ - 3;
  try {
    bad();
    FAIL("no error");
  } catch (const ts::DslError& e) {
    std::string w = e.what();
    INFO(w);
    CHECK(w.find("fp8_test.cpp:" + std::to_string(line)) != std::string::npos);
    CHECK(w.find("f8e4m3") != std::string::npos);
    CHECK(w.find("8-bit storage float") != std::string::npos);
  }
  const char* ir = R"(kernel @k(%p: ptr<f8e5m2, global>) {
  %0 = load(%p) : f8e5m2
  %1 = add(%0, %0) : f8e5m2
  store(%p, %1)
  return()
}
)";
  try {
    ts::ir::verify(*ts::ir::parseModule(ir));
    FAIL("no error");
  } catch (const ts::Error& e) {
    std::string w = e.what();
    INFO(w);
    CHECK(w.find("is not defined on the 8-bit storage float f8e5m2") != std::string::npos);
    CHECK(w.find("cast to f16, bf16 or f32 first") != std::string::npos);
  }
}

// ------------------------------------------------ assembles and links

std::vector<ts::Kernel> gpuKernels() {
  return {convertKernel<float, ts::float8_e4m3>(128), convertKernel<ts::float8_e5m2, float>(128),
          convertKernel<double, ts::float8_e4m3fnuz>(128), fp8Gemm<ts::float8_e4m3, ts::float8_e5m2>(64, 64, 32)};
}

TEST_CASE("fp8: the PTX assembles with ptxas for sm_80, sm_89 and sm_90a without spills", "[fp8][gpu][ptxas]") {
  if (::access("/usr/local/cuda/bin/ptxas", X_OK) != 0) {
    WARN("SKIP: ptxas not found (install the CUDA toolkit at /usr/local/cuda); PTX not assembled");
    return;
  }
  for (const ts::Kernel& kernel : gpuKernels())
    for (const char* sm : {"sm_80", "sm_89", "sm_90a"}) {
      INFO(kernel.name() << " on " << sm);
      testptx::PtxasFigures f =
          testptx::ptxasFigures(ts::compile(kernel, ts::Target::parse(std::string("nvptx:") + sm)));
      INFO(f.report);
      CHECK(f.spillBytes == 0);
    }
}

TEST_CASE("fp8: the AMDGPU code links with LLD for gfx942, gfx1100 and gfx1200", "[fp8][gpu][amdgpu]") {
  for (const ts::Kernel& kernel : gpuKernels())
    for (auto [gfx, wave] : {std::pair{"gfx942", 64}, std::pair{"gfx1100", 32}, std::pair{"gfx1200", 32}}) {
      INFO(kernel.name() << " on " << gfx);
      testamd::checkCodeObject(ts::compile(kernel, ts::Target::parse(std::string("amdgpu:") + gfx)), wave);
    }
}

}  // namespace

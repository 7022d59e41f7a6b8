// The OCP MX v1.0 host codecs of support/MxFormats.h (f4e2m1, f6e2m3,
// f6e3m2, e8m0), against values written out from the specification's
// tables and against a brute-force nearest search over every code:
//  * every code decodes to the value the spec gives it (the f4e2m1 table
//    in full; the fp6 formats' extremes and every code through an
//    independent formula), and encode(decode(c)) == c for every code;
//  * every f32 boundary: each midpoint between neighbouring values goes to
//    the even code, the f32 values just above and below it to the nearer
//    one, beyond the largest value and infinities saturate, values below
//    half the smallest subnormal become (signed) zero, NaN is +max;
//  * e8m0: 2^(c - 127) and NaN, ties between powers of two to the even
//    code, saturation at both ends, NaN for negatives and infinities;
//  * conversions from bf16 and f16 sources (exact in f32) and back to them.
// DLPack's codes for them: tests/runtime/dlpack_checks_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tessera/support/MxFormats.h"

namespace ts = tessera;

namespace {

constexpr ts::DType kElements[] = {ts::DType::F4E2M1, ts::DType::F6E2M3, ts::DType::F6E3M2};

unsigned codeCount(ts::DType t) { return 1u << ts::mxElementFormat(t).bits(); }

/// The code nearest to x by brute force over every code: the smallest
/// distance, a tie to the code with an even mantissa (low bit 0); saturating
/// beyond the largest magnitude.
uint8_t nearestCode(ts::DType t, double x) {
  const ts::MxElementFormat f = ts::mxElementFormat(t);
  const double mx = ts::mxElementDecode(t, f.maxCode);
  const bool neg = std::signbit(x);
  double a = std::fabs(x);
  if (a > mx) a = mx;
  uint8_t best = 0;
  double bestD = std::numeric_limits<double>::infinity();
  for (unsigned c = 0; c <= f.maxCode; ++c) {
    const double d = std::fabs(ts::mxElementDecode(t, uint8_t(c)) - a);
    if (d < bestD || (d == bestD && (c & 1) == 0)) best = uint8_t(c), bestD = d;
  }
  return neg ? uint8_t(best | f.signBit()) : best;
}

/// A bf16 value: an f32 whose low 16 bits are zero.
bool bf16Exact(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return (b & 0xFFFF) == 0;
}

float nextUp(float x) { return std::nextafter(x, std::numeric_limits<float>::infinity()); }
float nextDown(float x) { return std::nextafter(x, -std::numeric_limits<float>::infinity()); }

}  // namespace

TEST_CASE("mx codecs: f4e2m1's sixteen codes are the spec's table", "[mx]") {
  const double spec[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (unsigned c = 0; c < 16; ++c) {
    INFO("code " << c);
    const double want = (c & 8) ? -spec[c & 7] : spec[c & 7];
    CHECK(double(ts::mxElementDecode(ts::DType::F4E2M1, uint8_t(c))) == want);
    CHECK(std::signbit(ts::mxElementDecode(ts::DType::F4E2M1, uint8_t(c))) == ((c & 8) != 0));
  }
}

TEST_CASE("mx codecs: the fp6 formats' extremes and every code by the spec's formula", "[mx]") {
  // E2M3: bias 1, max 7.5, min normal 1.0, min subnormal 0.125.
  CHECK(ts::mxElementDecode(ts::DType::F6E2M3, 0x1F) == 7.5f);
  CHECK(ts::mxElementDecode(ts::DType::F6E2M3, 0x08) == 1.0f);
  CHECK(ts::mxElementDecode(ts::DType::F6E2M3, 0x01) == 0.125f);
  CHECK(ts::mxElementDecode(ts::DType::F6E2M3, 0x3F) == -7.5f);
  // E3M2: bias 3, max 28, min normal 0.25, min subnormal 0.0625.
  CHECK(ts::mxElementDecode(ts::DType::F6E3M2, 0x1F) == 28.0f);
  CHECK(ts::mxElementDecode(ts::DType::F6E3M2, 0x04) == 0.25f);
  CHECK(ts::mxElementDecode(ts::DType::F6E3M2, 0x01) == 0.0625f);
  CHECK(ts::mxElementDecode(ts::DType::F6E3M2, 0x3F) == -28.0f);
  struct F {
    ts::DType t;
    int e, m, bias;
  };
  for (F f : {F{ts::DType::F6E2M3, 2, 3, 1}, F{ts::DType::F6E3M2, 3, 2, 3}, F{ts::DType::F4E2M1, 2, 1, 1}}) {
    for (unsigned c = 0; c < (1u << (1 + f.e + f.m)); ++c) {
      const unsigned s = c >> (f.e + f.m), e = (c >> f.m) & ((1u << f.e) - 1), m = c & ((1u << f.m) - 1);
      // OCP MX v1.0, 5.3: (-1)^S 2^(E - bias) (1 + 2^-m M), subnormal (-1)^S 2^(1 - bias) (0 + 2^-m M).
      const double v = e ? std::pow(2.0, int(e) - f.bias) * (1 + m / std::pow(2.0, f.m))
                         : std::pow(2.0, 1 - f.bias) * (m / std::pow(2.0, f.m));
      INFO(ts::name(f.t) << " code " << c);
      CHECK(double(ts::mxElementDecode(f.t, uint8_t(c))) == (s ? -v : v));
    }
  }
}

TEST_CASE("mx codecs: every element code round-trips and decodes monotonically", "[mx]") {
  for (ts::DType t : kElements) {
    const ts::MxElementFormat f = ts::mxElementFormat(t);
    for (unsigned c = 0; c < codeCount(t); ++c) {
      INFO(ts::name(t) << " code " << c);
      CHECK(int(ts::mxElementEncode(t, ts::mxElementDecode(t, uint8_t(c)))) == int(c));
      CHECK(int(ts::mxEncode(t, ts::mxDecode(t, uint8_t(c)))) == int(c));
      // Exact in f16 and bf16: the value survives a round trip through them.
      const float v = ts::mxElementDecode(t, uint8_t(c));
      CHECK(float(_Float16(v)) == v);
      CHECK(bf16Exact(v));
    }
    for (unsigned c = 1; c <= f.maxCode; ++c)
      CHECK(ts::mxElementDecode(t, uint8_t(c)) > ts::mxElementDecode(t, uint8_t(c - 1)));
  }
}

TEST_CASE("mx codecs: every f32 boundary rounds to nearest, ties to even, saturating", "[mx]") {
  for (ts::DType t : kElements) {
    const ts::MxElementFormat f = ts::mxElementFormat(t);
    const float mx = ts::mxElementDecode(t, f.maxCode);
    for (int sign : {1, -1}) {
      const uint8_t sb = sign < 0 ? f.signBit() : 0;
      for (unsigned c = 0; c < f.maxCode; ++c) {
        const float lo = sign * ts::mxElementDecode(t, uint8_t(c)), hi = sign * ts::mxElementDecode(t, uint8_t(c + 1));
        const float mid = (lo + hi) / 2;  // exact in f32
        INFO(ts::name(t) << " between codes " << c << " and " << c + 1 << ", sign " << sign);
        const unsigned even = (c & 1) == 0 ? c : c + 1;
        CHECK(int(ts::mxElementEncode(t, mid)) == int(even | sb));
        CHECK(int(ts::mxElementEncode(t, sign > 0 ? nextDown(mid) : nextUp(mid))) == int(c | sb));
        CHECK(int(ts::mxElementEncode(t, sign > 0 ? nextUp(mid) : nextDown(mid))) == int((c + 1) | sb));
        CHECK(int(ts::mxElementEncode(t, mid)) == int(nearestCode(t, mid)));
      }
      // Beyond the largest value: saturate (the next f32, the would-be next
      // code's midpoint, huge values, infinity).
      CHECK(int(ts::mxElementEncode(t, sign * nextUp(mx))) == int(f.maxCode | sb));
      CHECK(int(ts::mxElementEncode(t, sign * mx * 1.25)) == int(f.maxCode | sb));
      CHECK(int(ts::mxElementEncode(t, sign * 3.0e38)) == int(f.maxCode | sb));
      CHECK(int(ts::mxElementEncode(t, sign * std::numeric_limits<double>::infinity())) == int(f.maxCode | sb));
      CHECK(int(ts::mxElementEncode(t, sign * std::numeric_limits<double>::max())) == int(f.maxCode | sb));
      // Below half the smallest subnormal: zero of the sign; exactly half:
      // the tie goes to zero (even); just above: the smallest subnormal.
      const float tiny = ts::mxElementDecode(t, 1);
      CHECK(int(ts::mxElementEncode(t, sign * tiny / 2)) == int(sb));
      CHECK(int(ts::mxElementEncode(t, sign * nextUp(tiny / 2))) == int(1 | sb));
      CHECK(int(ts::mxElementEncode(t, sign * 1e-30)) == int(sb));
      CHECK(int(ts::mxElementEncode(t, sign * std::numeric_limits<float>::denorm_min())) == int(sb));
      CHECK(int(ts::mxElementEncode(t, sign * 0.0)) == int(sb));
    }
    // NaN has no encoding: +max, so it is never a silent zero.
    CHECK(int(ts::mxElementEncode(t, std::nan(""))) == int(f.maxCode));
  }
}

TEST_CASE("mx codecs: random f32 values encode to the brute-force nearest code", "[mx]") {
  uint32_t s = 12345;
  for (int i = 0; i < 200000; ++i) {
    s = s * 1664525u + 1013904223u;
    // Magnitudes 2^-8 .. 2^6 with random mantissas and signs.
    const float x = std::ldexp(1.0f + float(s >> 9) / float(1u << 23), int((s >> 3) % 15) - 8) * ((s & 1) ? -1 : 1);
    for (ts::DType t : kElements) {
      INFO(ts::name(t) << " x = " << x);
      REQUIRE(int(ts::mxElementEncode(t, x)) == int(nearestCode(t, x)));
    }
  }
}

TEST_CASE("mx codecs: bf16 and f16 sources convert through their exact f32 values", "[mx]") {
  for (unsigned bits = 0; bits < 0x10000; ++bits) {
    const uint32_t w = bits << 16;
    float fb;
    std::memcpy(&fb, &w, 4);  // a bf16 value
    const _Float16 h = std::bit_cast<_Float16>(uint16_t(bits));
    for (ts::DType t : kElements) {
      if (!std::isnan(fb)) REQUIRE(int(ts::mxElementEncode(t, fb)) == int(nearestCode(t, fb)));
      if (!std::isnan(float(h))) REQUIRE(int(ts::mxElementEncode(t, float(h))) == int(nearestCode(t, float(h))));
    }
  }
}

TEST_CASE("mx codecs: e8m0 is 2^(c - 127), NaN 0xFF, and rounds between powers to the even code", "[mx]") {
  for (unsigned c = 0; c < 255; ++c) {
    INFO("code " << c);
    const float v = ts::e8m0Decode(uint8_t(c));
    CHECK(double(v) == std::ldexp(1.0, int(c) - 127));
    CHECK(int(ts::e8m0Encode(v)) == int(c));
    CHECK(int(ts::mxEncode(ts::DType::E8M0, v)) == int(c));
    CHECK(bf16Exact(v));  // every scale is a bf16 value (2^-127 a subnormal)
    if (c < 254) {
      const double mid = 1.5 * std::ldexp(1.0, int(c) - 127);
      CHECK(int(ts::e8m0Encode(mid)) == int((c & 1) ? c + 1 : c));
      CHECK(int(ts::e8m0Encode(std::nextafter(mid, 0.0))) == int(c));
      CHECK(int(ts::e8m0Encode(std::nextafter(mid, 1e300))) == int(c + 1));
    }
  }
  CHECK(std::isnan(ts::e8m0Decode(0xFF)));
  CHECK(ts::e8m0Decode(0) == 0x1p-127f);
  CHECK(ts::e8m0Decode(127) == 1.0f);
  CHECK(ts::e8m0Decode(254) == 0x1p127f);
  // Saturation at both ends; zero is the smallest scale; no sign, no inf.
  CHECK(int(ts::e8m0Encode(0.0)) == 0);
  CHECK(int(ts::e8m0Encode(-0.0)) == 0);
  CHECK(int(ts::e8m0Encode(0x1p-140)) == 0);
  CHECK(int(ts::e8m0Encode(std::numeric_limits<float>::denorm_min())) == 0);
  CHECK(int(ts::e8m0Encode(0x1.8p-128)) == 0);  // tie between 2^-128 (none) and 2^-127
  CHECK(int(ts::e8m0Encode(0x1.fp127)) == 0xFE);
  CHECK(int(ts::e8m0Encode(double(std::numeric_limits<float>::max()))) == 0xFE);
  CHECK(int(ts::e8m0Encode(1e300)) == 0xFE);
  CHECK(int(ts::e8m0Encode(std::numeric_limits<double>::infinity())) == 0xFF);
  CHECK(int(ts::e8m0Encode(-std::numeric_limits<double>::infinity())) == 0xFF);
  CHECK(int(ts::e8m0Encode(-1.0)) == 0xFF);
  CHECK(int(ts::e8m0Encode(std::nan(""))) == 0xFF);
}

TEST_CASE("mx codecs: the dtypes' table rows", "[mx]") {
  CHECK(ts::bitWidth(ts::DType::F4E2M1) == 4);
  CHECK(ts::bitWidth(ts::DType::F6E2M3) == 6);
  CHECK(ts::bitWidth(ts::DType::F6E3M2) == 6);
  CHECK(ts::bitWidth(ts::DType::E8M0) == 8);
  for (ts::DType t : {ts::DType::F4E2M1, ts::DType::F6E2M3, ts::DType::F6E3M2, ts::DType::E8M0}) {
    CHECK(ts::isMx(t));
    CHECK_FALSE(ts::isFloat(t));
    CHECK_FALSE(ts::isInteger(t));
    CHECK(ts::byteSize(t) == 1);
    CHECK(ts::parseDType(ts::name(t)) == t);
  }
}

// The OCP Microscaling (MX v1.0, 2023) formats (DTypes.def, class Mx) and
// their host conversions: the definition ts::dot_scaled's decoding, the
// quantisation examples and their references match bit for bit.
//
// Elements (no infinities, no NaN; sign bit on top, then exponent, then
// mantissa, in the code's low bits):
//   f4e2m1  bias 1, max 6     (0x7), min subnormal 0.5    (0x1)
//   f6e2m3  bias 1, max 7.5   (0x1F), min subnormal 0.125  (0x01)
//   f6e3m2  bias 3, max 28    (0x1F), min subnormal 0.0625 (0x01)
// Scale: e8m0 is 2^(c - 127) for c in 0..254 (2^-127 .. 2^127: no sign, no
// zero) and NaN for 0xFF.
//
//   to an element  round to nearest, ties to even; beyond the largest
//                  finite value (infinities included) saturate to +-max,
//                  as the spec's conversions do; -0 stays -0. NaN has no
//                  encoding: the spec leaves it to the implementation and
//                  Tessera gives +max, so a NaN is never silently a zero
//                  (the quantisers also make the block's scale NaN, which
//                  makes every element of the block NaN).
//   to e8m0        a power of two is exact; others round to nearest with
//                  ties to the even code (the rounding of a float with no
//                  mantissa bits: 1.5 x 2^e goes to whichever of 2^e and
//                  2^(e+1) has the even code); below 2^-127 (+0 included,
//                  the scale of an all-zero block) saturate to 2^-127 (0x00),
//                  finite values above 2^127 to 2^127 (0xFE); NaN, infinities
//                  and negative numbers (-0 is +0) give NaN (0xFF).
//   from any       exact: every element value is an f16, bf16 and f32 value;
//                  every e8m0 value is a bf16 and f32 value (2^-127 as a
//                  subnormal), not an f16 one.
#pragma once

#include <cmath>
#include <cstdint>

#include "tessera/support/DType.h"
#include "tessera/support/Fp8.h"

namespace tessera {

struct MxElementFormat {
  unsigned expBits = 2, manBits = 1;
  int bias = 1;
  uint8_t maxCode = 0x7;  // the largest finite magnitude's code (all ones)
  unsigned bits() const { return 1 + expBits + manBits; }
  uint8_t signBit() const { return uint8_t(1u << (expBits + manBits)); }
};

/// The format of an MX element dtype (f4e2m1, f6e2m3 or f6e3m2).
inline MxElementFormat mxElementFormat(DType t) {
  switch (t) {
    case DType::F6E2M3: return {2, 3, 1, 0x1F};
    case DType::F6E3M2: return {3, 2, 3, 0x1F};
    default: return {2, 1, 1, 0x7};  // F4E2M1
  }
}

/// The value of element code `c` (its low bits() bits; the others ignored).
inline float mxElementDecode(DType t, uint8_t c) {
  const MxElementFormat f = mxElementFormat(t);
  c &= uint8_t((1u << f.bits()) - 1);
  const bool neg = (c & f.signBit()) != 0;
  const unsigned mag = c & (f.signBit() - 1u);
  const unsigned e = mag >> f.manBits, m = mag & ((1u << f.manBits) - 1);
  return minifloatValue(neg, e, m, f.manBits, f.bias);
}

/// `x` rounded to an element code (rules at the top of this file).
inline uint8_t mxElementEncode(DType t, double x) {
  const MxElementFormat f = mxElementFormat(t);
  if (std::isnan(x)) return f.maxCode;
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  uint32_t code = 0;
  if (std::isinf(a)) {
    code = f.maxCode;
  } else if (a != 0) {
    // The quantum at a's binade (the subnormal quantum below the normals);
    // binades above the format's saturate below.
    const int e = std::ilogb(a);
    const int minE = 1 - f.bias;
    const int te = e < minE ? minE : e;
    if (te > 16) {
      code = f.maxCode;
    } else {
      const double q = std::nearbyint(std::ldexp(a, int(f.manBits) - te));  // ties to even (default rounding)
      code = uint32_t((te + f.bias - 1) * (1 << f.manBits) + q);
    }
    if (code > f.maxCode) code = f.maxCode;
  }
  if (neg) code |= f.signBit();
  return uint8_t(code);
}

inline constexpr uint8_t kE8M0NaN = 0xFF;

/// The value of e8m0 code `c`: 2^(c - 127), NaN for 0xFF.
inline float e8m0Decode(uint8_t c) { return c == kE8M0NaN ? NAN : std::ldexp(1.0f, int(c) - 127); }

/// `x` rounded to an e8m0 code (rules at the top of this file).
inline uint8_t e8m0Encode(double x) {
  if (std::isnan(x) || std::isinf(x) || x < 0) return kE8M0NaN;
  if (x == 0) return 0;
  int e = std::ilogb(x);
  const double m = std::ldexp(x, -e);  // in [1, 2)
  // Nearest of 2^e and 2^(e+1): the midpoint is 1.5 x 2^e; a tie goes to
  // the even code (e + 127 even).
  if (m > 1.5 || (m == 1.5 && ((e + 127) & 1) != 0)) ++e;
  if (e < -127) return 0;
  if (e > 127) return 0xFE;
  return uint8_t(e + 127);
}

/// Any MX dtype's code from / to a value (an element or the e8m0 scale).
inline float mxDecode(DType t, uint8_t c) { return t == DType::E8M0 ? e8m0Decode(c) : mxElementDecode(t, c); }
inline uint8_t mxEncode(DType t, double x) { return t == DType::E8M0 ? e8m0Encode(x) : mxElementEncode(t, x); }

}  // namespace tessera

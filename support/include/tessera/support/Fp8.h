// The 8-bit float formats (DTypes.def) and their host conversions, the
// definition every backend's generated code matches bit for bit:
//   to fp8    round to nearest, ties to even; beyond the largest finite
//             value (infinities included) saturate to +-max; NaN becomes
//             the format's canonical NaN (0x7F e4m3, 0x7E e5m2, 0x80 FNUZ);
//             -0 stays -0 except in the FNUZ formats, which have no -0.
//   from fp8  exact (every fp8 value is an f16, bf16 and f32 value).
// Host code uses it to fill and read fp8 buffers (ts::fp8Encode/Decode).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tessera/support/DType.h"

namespace tessera {

struct Fp8Format {
  unsigned expBits = 4, manBits = 3;
  int bias = 7;
  bool fnuz = false;       // no -0, no inf, the one NaN 0x80
  bool hasInf = false;     // IEEE-like infinities (e5m2): 0x7C
  uint8_t maxCode = 0x7E;  // the largest finite magnitude's code
  uint8_t nanCode = 0x7F;  // the NaN produced by conversions
};

/// The format of an fp8 dtype (isFp8(t) must hold).
inline Fp8Format fp8Format(DType t) {
  switch (t) {
    case DType::F8E5M2: return {5, 2, 15, false, true, 0x7B, 0x7E};
    case DType::F8E4M3FNUZ: return {4, 3, 8, true, false, 0x7F, 0x80};
    case DType::F8E5M2FNUZ: return {5, 2, 16, true, false, 0x7F, 0x80};
    default: return {4, 3, 7, false, false, 0x7E, 0x7F};  // F8E4M3
  }
}

/// A small float's value from its fields (exponent field e, mantissa field
/// m of manBits bits, bias): normal (1 + m / 2^M) 2^(e - bias), subnormal
/// (e = 0) m / 2^M 2^(1 - bias). Shared by the fp8 and the OCP MX formats
/// (MxFormats.h).
inline float minifloatValue(bool neg, unsigned e, unsigned m, unsigned manBits, int bias) {
  float v = e ? std::ldexp(float((1u << manBits) | m), int(e) - bias - int(manBits))
              : std::ldexp(float(m), 1 - bias - int(manBits));
  return neg ? -v : v;
}

/// The value of fp8 code `c`.
inline float fp8Decode(DType t, uint8_t c) {
  const Fp8Format f = fp8Format(t);
  const bool neg = (c & 0x80) != 0;
  const unsigned mag = c & 0x7F;
  if (f.fnuz && c == 0x80) return NAN;
  if (!f.fnuz && !f.hasInf && mag == 0x7F) return NAN;
  const unsigned e = mag >> f.manBits, m = mag & ((1u << f.manBits) - 1);
  if (f.hasInf && e == (1u << f.expBits) - 1) return m ? NAN : (neg ? -INFINITY : INFINITY);
  return minifloatValue(neg, e, m, f.manBits, f.bias);
}

/// `x` rounded to fp8 (rules at the top of this file).
inline uint8_t fp8Encode(DType t, double x) {
  const Fp8Format f = fp8Format(t);
  if (std::isnan(x)) return f.nanCode;
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  uint32_t code = 0;
  if (a != 0) {
    // The quantum at a's binade (the subnormal quantum below the normals).
    int e = std::ilogb(a);
    if (std::isinf(a)) e = 1 << 20;
    const int minE = 1 - f.bias;
    const int te = e < minE ? minE : e;
    if (te > 64) {
      code = 0xFF;  // saturates below
    } else {
      double q = std::nearbyint(std::ldexp(a, int(f.manBits) - te));  // ties to even (default rounding)
      code = uint32_t((te + f.bias - 1) * (1 << f.manBits) + q);
    }
    if (code > f.maxCode) code = f.maxCode;
  }
  if (neg && !(f.fnuz && code == 0)) code |= 0x80;
  return uint8_t(code);
}

}  // namespace tessera

// A plain C++ Philox-4x32-10 and the conversions of ts::randint / rand /
// randn (docs/dsl.md, "Random numbers"): the reference the DSL's random
// numbers and the examples that use them are checked against. Written from
// the Philox paper and Random123's definitions, independent of the DSL.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tessera::examples::philox {

/// Philox-4x32 with 10 rounds on counter `c` and key `k`: Random123's
/// philox4x32_10 (the key is raised after every round; the last raise is
/// unused).
inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c[0];
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return c;
}

/// ts::randint4x for a seed (its 64 bits: a signed seed sign-extended) and
/// an offset (its low and high 32-bit words; hi is 0 for offsets of 32 bits
/// or fewer).
inline std::array<uint32_t, 4> randint4x(uint64_t seed, uint32_t offsetLo, uint32_t offsetHi = 0) {
  return philox4x32_10({offsetLo, offsetHi, 0, 0}, {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

inline uint32_t randint(uint64_t seed, uint32_t offsetLo, uint32_t offsetHi = 0) {
  return randint4x(seed, offsetLo, offsetHi)[0];
}

/// Random bits -> f32 in [0, 1): x as i32, ~x where negative, converted
/// to float (rounded to nearest) and multiplied by 0x1.fffffep-32 in f32.
inline float uniform(uint32_t bits) {
  int32_t x;
  std::memcpy(&x, &bits, 4);
  if (x < 0) x = ~x;
  return static_cast<float>(x) * 0x1.fffffep-32f;
}

inline float rand(uint64_t seed, uint32_t offsetLo, uint32_t offsetHi = 0) {
  return uniform(randint(seed, offsetLo, offsetHi));
}

/// ts::randn's definition evaluated in double from the same f32 uniforms:
/// sqrt(-2 ln max(u1, 1e-7f)) * cos(f32(2 pi) * u2), the angle rounded to
/// f32 as the kernel rounds it. The kernel computes in f32 (log and cos to
/// within about 1 ulp), so it agrees to f32 rounding, not bitwise.
inline double randn(uint64_t seed, uint32_t offsetLo, uint32_t offsetHi = 0) {
  const auto w = randint4x(seed, offsetLo, offsetHi);
  const float u1 = std::fmax(uniform(w[0]), 1.0e-7f);
  const float th = 6.283185307179586f * uniform(w[1]);
  return std::sqrt(-2.0 * std::log(double(u1))) * std::cos(double(th));
}

}  // namespace tessera::examples::philox

// Arguments reach a kernel exactly as CUDA kernelParams: args[i] points at
// the i-th value in the parameter's exact width. Host entry points written
// here in plain C++ read them back and store what they saw into buffers.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tessera/runtime/Runtime.h"

using namespace tessera;
using namespace tessera::rt;

namespace {

template <typename T>
T* ptrArg(void* const* args, int i) {
  return *static_cast<T* const*>(args[i]);
}

constexpr int kProbeArgs = 9;
constexpr unsigned kWidth[kProbeArgs] = {1, 1, 2, 4, 8, 2, 2, 4, 8};

// (ptr<i8> out, i1, i8, i16, i32, i64, f16, bf16, f32, f64): copies the
// first width bytes of each scalar slot into an 8-byte record of out.
void probeEntry(void* const* args, int64_t, int64_t, const int32_t*) {
  uint8_t* out = ptrArg<uint8_t>(args, 0);
  for (int k = 0; k < kProbeArgs; ++k) std::memcpy(out + 8 * k, args[k + 1], kWidth[k]);
}

Kernel probeKernel() {
  Binary bin;
  bin.signature.kernelName = "probe";
  bin.signature.args.push_back({ArgSpec::Kind::Pointer, DType::I8, "out"});
  const DType ts[kProbeArgs] = {DType::I1,  DType::I8,   DType::I16, DType::I32, DType::I64,
                                DType::F16, DType::BF16, DType::F32, DType::F64};
  for (int k = 0; k < kProbeArgs; ++k)
    bin.signature.args.push_back({ArgSpec::Kind::Scalar, ts[k], "s" + std::to_string(k)});
  bin.hostEntry = &probeEntry;
  return Device::cpu().load(bin);
}

template <typename T>
std::vector<uint8_t> bytesOf(T v) {
  std::vector<uint8_t> r(8, 0);
  std::memcpy(r.data(), &v, sizeof v);
  return r;
}

std::vector<uint8_t> record(const std::vector<uint8_t>& all, int k) {
  return {all.begin() + 8 * k, all.begin() + 8 * k + 8};
}

// Independent reference for float -> f16: search the table of every finite
// half for the nearest value, ties to the even bit pattern.
uint16_t refHalf(float f) {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (uint32_t h = 0; h < 0x7c00; ++h) {
      uint32_t e = h >> 10, m = h & 0x3ff;
      t.push_back(e == 0 ? std::ldexp(double(m), -24) : std::ldexp(1.0 + m / 1024.0, int(e) - 15));
    }
    return t;
  }();
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(double(f));
  if (std::isinf(f) || a >= 65520.0) return sign | 0x7c00;
  auto it = std::lower_bound(table.begin(), table.end(), a);
  size_t hi = size_t(it - table.begin());
  if (hi == 0) return sign;
  if (hi == table.size()) return sign | 0x7bff;
  size_t lo = hi - 1;
  double dlo = a - table[lo], dhi = table[hi] - a;
  size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return uint16_t(sign | pick);
}

// The same for bf16: the finite bf16 values are the floats whose low 16 bits
// are zero.
uint16_t refBf16(float f) {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (uint32_t h = 0; h < 0x7f80; ++h) {
      uint32_t bits = h << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      t.push_back(v);
    }
    return t;
  }();
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(double(f));
  double maxv = table.back(), limit = maxv + (std::ldexp(1.0, 128) - maxv) / 2;
  if (std::isinf(f) || a >= limit) return sign | 0x7f80;
  auto it = std::lower_bound(table.begin(), table.end(), a);
  size_t hi = size_t(it - table.begin());
  if (hi == 0) return sign;
  if (hi == table.size()) return sign | 0x7f7f;
  size_t lo = hi - 1;
  double dlo = a - table[lo], dhi = table[hi] - a;
  size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return uint16_t(sign | pick);
}

// (ptr<i16> out, <dtype> x): stores the 16 bits it received.
void bits16Entry(void* const* args, int64_t, int64_t, const int32_t*) {
  std::memcpy(ptrArg<uint16_t>(args, 0), args[1], 2);
}

Kernel bits16Kernel(DType t) {
  Binary bin;
  bin.signature = {"bits16", {{ArgSpec::Kind::Pointer, DType::I16, "out"}, {ArgSpec::Kind::Scalar, t, "x"}}, {}};
  bin.hostEntry = &bits16Entry;
  return Device::cpu().load(bin);
}

std::vector<float> roundingCases() {
  std::vector<float> v = {0.f,
                          -0.f,
                          1.f,
                          1.f + std::ldexp(1.f, -11),                         // tie: 1 and 1+2^-10 -> 1 (even)
                          1.f + 3 * std::ldexp(1.f, -11),                     // tie: -> 1+2^-9 (even)
                          1.f + std::ldexp(1.f, -11) + std::ldexp(1.f, -20),  // just above a tie
                          1.f + std::ldexp(1.f, -8),                          // bf16 tie: -> 1 (even)
                          1.f + 3 * std::ldexp(1.f, -8),                      // bf16 tie: -> 1+2^-6 (even)
                          1.f + std::ldexp(1.f, -8) + std::ldexp(1.f, -9),
                          65504.f,
                          65519.f,
                          65520.f,  // tie to infinity
                          65536.f,
                          1e10f,
                          -70000.f,
                          std::ldexp(1.f, -24),                         // smallest subnormal
                          std::ldexp(1.f, -25),                         // tie with zero -> 0
                          std::ldexp(1.5f, -25),                        // above the tie -> smallest subnormal
                          std::ldexp(1.5f, -24),                        // tie between subnormals 1 and 2 -> 2
                          std::ldexp(2.5f, -24),                        // tie between 2 and 3 -> 2
                          std::ldexp(1.f, -14),                         // smallest normal
                          std::ldexp(1.f, -14) - std::ldexp(1.f, -25),  // rounds up into the normals
                          std::ldexp(1023.5f, -24),                     // tie at the top of the subnormals
                          1e-30f,
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(),
                          3.14159265f,
                          -2.71828182f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  // Random floats over the interesting exponent range, and random bit patterns.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> ex(-27, 17);
  for (int i = 0; i < 1500; ++i) v.push_back((i % 2 ? -1.f : 1.f) * std::ldexp(mant(rng), ex(rng)));
  // Exact midpoints between neighbouring f16 and bf16 values: the ties that
  // random sampling would almost never hit.
  for (int i = 0; i < 300; ++i) {
    uint32_t h = rng() % 0x7bff;  // a finite half below the largest
    auto dec = [](uint32_t x) {
      uint32_t e = x >> 10, m = x & 0x3ff;
      return e == 0 ? std::ldexp(double(m), -24) : std::ldexp(1.0 + m / 1024.0, int(e) - 15);
    };
    v.push_back(float((dec(h) + dec(h + 1)) / 2) * (i % 2 ? -1.f : 1.f));
    uint32_t b = (rng() % 0x7f7f) << 16, b1 = b + 0x10000;
    float lo, hi;
    std::memcpy(&lo, &b, 4);
    std::memcpy(&hi, &b1, 4);
    v.push_back(float((double(lo) + double(hi)) / 2));
  }
  for (int i = 0; i < 500; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isnan(f)) v.push_back(f);
  }
  return v;
}

}  // namespace

TEST_CASE("every scalar dtype arrives bit-exact in its width", "[runtime][marshal]") {
  Kernel k = probeKernel();
  Buffer out = Device::cpu().alloc(DType::I8, 8 * kProbeArgs);

  const int64_t i64 = int64_t(0x8123456789ABCDEFull);
  const double f64 = 3.141592653589793;
  const float f32 = -1.17549435e-38f * 3.0f;
  out.fillBytes(0xEE);
  k.launch({1}, {out, true, int8_t{-5}, int16_t{-12345}, int32_t{-2000000000}, i64, 1.5f, -2.0f, f32, f64});
  auto got = out.read<uint8_t>();
  auto expect = [&](int k, std::vector<uint8_t> want) {
    // Bytes past the width were not written by the probe: still 0xEE.
    for (unsigned b = kWidth[k]; b < 8; ++b) want[b] = 0xEE;
    INFO("argument " << k + 1);
    CHECK(record(got, k) == want);
  };
  expect(0, bytesOf(uint8_t{1}));
  expect(1, bytesOf(int8_t{-5}));
  expect(2, bytesOf(int16_t{-12345}));
  expect(3, bytesOf(int32_t{-2000000000}));
  expect(4, bytesOf(i64));
  expect(5, bytesOf(uint16_t{0x3e00}));  // 1.5 in f16
  expect(6, bytesOf(uint16_t{0xc000}));  // -2 in bf16
  expect(7, bytesOf(f32));
  expect(8, bytesOf(f64));

  // Accepted conversions land in the parameter's width: false, an int for
  // i8 / i16 / i64 (sign-extended), a float for f64 (its exact value).
  out.fillBytes(0);
  k.launch({1}, {out, false, -128, 32767, int8_t{-1}, -7, 0.1f, 0.1f, -0.0f, 0.1f});
  got = out.read<uint8_t>();
  CHECK(record(got, 0) == bytesOf(uint8_t{0}));
  CHECK(record(got, 1) == bytesOf(int8_t{-128}));
  CHECK(record(got, 2) == bytesOf(int16_t{32767}));
  CHECK(record(got, 3) == bytesOf(int32_t{-1}));
  CHECK(record(got, 4) == bytesOf(int64_t{-7}));
  CHECK(record(got, 5) == bytesOf(uint16_t{0x2e66}));  // 0.1f -> f16
  CHECK(record(got, 6) == bytesOf(uint16_t{0x3dcd}));  // 0.1f -> bf16
  CHECK(record(got, 7) == bytesOf(uint32_t{0x80000000u}));
  CHECK(record(got, 8) == bytesOf(double(0.1f)));
}

TEST_CASE("f16 and bf16 scalars round to nearest even", "[runtime][marshal]") {
  Kernel kh = bits16Kernel(DType::F16), kb = bits16Kernel(DType::BF16);
  Buffer out = Device::cpu().alloc(DType::I16, 1);
  for (float f : roundingCases()) {
    INFO("value " << f << " (bits 0x" << std::hex << [&] {
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    }() << ")");
    kh.launch({1}, {out, f});
    REQUIRE(out.read<uint16_t>()[0] == refHalf(f));
    kb.launch({1}, {out, f});
    REQUIRE(out.read<uint16_t>()[0] == refBf16(f));
  }
  // NaN stays NaN (exponent all ones, mantissa non-zero).
  kh.launch({1}, {out, std::numeric_limits<float>::quiet_NaN()});
  uint16_t h = out.read<uint16_t>()[0];
  CHECK((h & 0x7c00) == 0x7c00);
  CHECK((h & 0x03ff) != 0);
  kb.launch({1}, {out, -std::numeric_limits<float>::quiet_NaN()});
  h = out.read<uint16_t>()[0];
  CHECK((h & 0x7f80) == 0x7f80);
  CHECK((h & 0x007f) != 0);
}

namespace {
// (ptr<i64> out, ptr<f32> a, ptr<f16> b, ptr<i1> c): stores the addresses it
// received and the first element of a.
void addrEntry(void* const* args, int64_t, int64_t, const int32_t*) {
  int64_t* out = ptrArg<int64_t>(args, 0);
  float* a = ptrArg<float>(args, 1);
  out[0] = int64_t(reinterpret_cast<uintptr_t>(a));
  out[1] = int64_t(reinterpret_cast<uintptr_t>(ptrArg<uint16_t>(args, 2)));
  out[2] = int64_t(reinterpret_cast<uintptr_t>(ptrArg<uint8_t>(args, 3)));
  std::memcpy(&out[3], a, 4);
}
}  // namespace

TEST_CASE("pointer arguments carry the buffer address plus the element offset", "[runtime][marshal]") {
  Device cpu = Device::cpu();
  Binary bin;
  bin.signature = {"addr",
                   {{ArgSpec::Kind::Pointer, DType::I64, "out"},
                    {ArgSpec::Kind::Pointer, DType::F32, "a"},
                    {ArgSpec::Kind::Pointer, DType::F16, "b"},
                    {ArgSpec::Kind::Pointer, DType::I1, "c"}},
                   {}};
  bin.hostEntry = &addrEntry;
  Kernel k = cpu.load(bin);
  Buffer out = cpu.alloc(DType::I64, 4);
  Buffer a = cpu.upload(DType::F32, std::vector<float>{10.f, 11.f, 12.f, 13.f, 14.f});
  Buffer b = cpu.alloc(DType::F16, 8), c = cpu.alloc(DType::I1, 4);
  Arg aOff(a), bOff(b), cOff(c);
  aOff.offset = 3;
  bOff.offset = 5;
  cOff.offset = 2;
  k.launch({1}, {out, aOff, bOff, cOff});
  auto got = out.read<int64_t>();
  auto addr = [](const Buffer& x) { return int64_t(reinterpret_cast<uintptr_t>(x.data())); };
  CHECK(got[0] == addr(a) + 12);
  CHECK(got[1] == addr(b) + 10);
  CHECK(got[2] == addr(c) + 2);
  float first;
  std::memcpy(&first, &got[3], 4);
  CHECK(first == 13.f);

  k.launch({1}, {out, a, b, c});  // no offset: the base addresses
  got = out.read<int64_t>();
  CHECK(got[0] == addr(a));
  CHECK(got[1] == addr(b));
  CHECK(got[2] == addr(c));
}

namespace {
// 20 scalar i32 parameters: more than fit in the launcher's inline storage.
void sumEntry(void* const* args, int64_t, int64_t, const int32_t*) {
  int64_t s = 0;
  for (int i = 1; i <= 20; ++i) s += *static_cast<const int32_t*>(args[i]) * int64_t(i);
  *ptrArg<int64_t>(args, 0) = s;
}
}  // namespace

TEST_CASE("many arguments", "[runtime][marshal]") {
  Binary bin;
  bin.signature.kernelName = "sum";
  bin.signature.args.push_back({ArgSpec::Kind::Pointer, DType::I64, "out"});
  for (int i = 1; i <= 20; ++i)
    bin.signature.args.push_back({ArgSpec::Kind::Scalar, DType::I32, "x" + std::to_string(i)});
  bin.hostEntry = &sumEntry;
  Kernel k = Device::cpu().load(bin);
  Buffer out = Device::cpu().alloc(DType::I64, 1);
  std::vector<Arg> args{out};
  int64_t want = 0;
  for (int i = 1; i <= 20; ++i) {
    args.push_back(int32_t(1000 * i - 7));
    want += int64_t(1000 * i - 7) * i;
  }
  k.launch({1}, args);
  CHECK(out.read<int64_t>()[0] == want);
}

// Every cast pair among i8/i32/i64/f16/bf16/f32/f64 against an independent
// reference (our own round-to-nearest-even for f16/bf16).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "cpu_test_util.h"

using namespace cputest;

namespace {
const DType kTypes[] = {DType::I8, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64};
constexpr int64_t N = 16;

int64_t intMin(DType t) { return t == DType::I8 ? INT8_MIN : t == DType::I32 ? INT32_MIN : INT64_MIN; }
int64_t intMax(DType t) { return t == DType::I8 ? INT8_MAX : t == DType::I32 ? INT32_MAX : INT64_MAX; }

// A source element: its bytes in memory and its exact value.
struct Elem {
  uint64_t bits = 0;
  double value = 0;    // exact for floats and for ints |v| <= 2^53
  int64_t ivalue = 0;  // integer sources
};

Elem makeSource(DType t, double v) {
  Elem e;
  switch (t) {
    case DType::I8:
    case DType::I32:
    case DType::I64: {
      int64_t i = static_cast<int64_t>(v);
      e.ivalue = i;
      e.value = static_cast<double>(i);
      e.bits = static_cast<uint64_t>(i);
      break;
    }
    case DType::F16:
      e.bits = f64ToF16(v);
      e.value = f16ToF32(static_cast<uint16_t>(e.bits));
      break;
    case DType::BF16:
      e.bits = f64ToBf16(v);
      e.value = bf16ToF32(static_cast<uint16_t>(e.bits));
      break;
    case DType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(&e.bits, &f, 4);
      e.value = f;
      break;
    }
    case DType::F64:
      std::memcpy(&e.bits, &v, 8);
      e.value = v;
      break;
    default: break;
  }
  return e;
}

// Reference result bits of casting `e` (of type `from`) to `to`.
uint64_t reference(const Elem& e, DType from, DType to) {
  bool srcInt = isInteger(from);
  switch (to) {
    case DType::I8:
    case DType::I32:
    case DType::I64: {
      int64_t r;
      if (srcInt) {
        r = e.ivalue;  // sign-extended; truncation below wraps
      } else if (std::isnan(e.value)) {
        r = 0;
      } else {
        double t = std::trunc(e.value);
        if (t <= static_cast<double>(intMin(to)))
          r = intMin(to);
        else if (t >= static_cast<double>(intMax(to)))
          r = intMax(to);
        else
          r = static_cast<int64_t>(t);
      }
      uint64_t mask = to == DType::I8 ? 0xff : to == DType::I32 ? 0xffffffffull : ~0ull;
      return static_cast<uint64_t>(r) & mask;
    }
    case DType::F16: return f64ToF16(e.value);
    case DType::BF16: return f64ToBf16(e.value);
    case DType::F32: {
      float f = srcInt ? static_cast<float>(e.ivalue) : static_cast<float>(e.value);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    case DType::F64: {
      double d = srcInt ? static_cast<double>(e.ivalue) : e.value;
      uint64_t u;
      std::memcpy(&u, &d, 8);
      return u;
    }
    default: return 0;
  }
}

bool isNanBits(uint64_t bits, DType t) {
  switch (t) {
    case DType::F16: return (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff);
    case DType::BF16: return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f);
    case DType::F32: return (bits & 0x7f800000) == 0x7f800000 && (bits & 0x7fffff);
    case DType::F64: return std::isnan(std::bit_cast<double>(bits));
    default: return false;
  }
}

std::vector<double> sourceValues(DType t) {
  if (isInteger(t)) {
    std::vector<double> all{0,
                            1,
                            -1,
                            5,
                            -7,
                            100,
                            127,
                            -128,
                            255,
                            1000,
                            -32769,
                            65519,
                            65520,
                            16777217,
                            -2147483648.0,
                            2147483647.0,
                            4294967296.0 + 3,
                            -9007199254740991.0};
    std::vector<double> r;
    for (double v : all)
      if (v >= static_cast<double>(intMin(t)) && v <= static_cast<double>(intMax(t))) r.push_back(v);
    return r;
  }
  return {0.0,      -0.0,      1.0,   -1.0,     2.5,     -2.5, 0.1,  100.7,
          -128.5,   127.9,     300.2, 65504.0,  70000.3, -3e9, 1e20, std::numeric_limits<double>::quiet_NaN(),
          INFINITY, -INFINITY, 1e-7,  3.0000001};
}
}  // namespace

TEST_CASE("cpu: every cast pair among i8/i32/i64/f16/bf16/f32/f64", "[codegen][cpu]") {
  for (DType from : kTypes) {
    auto vals = sourceValues(from);
    std::vector<Elem> src;
    for (size_t i = 0; i < N; ++i) src.push_back(makeSource(from, vals[i % vals.size()]));
    std::vector<uint8_t> inBytes(N * 8);
    for (size_t i = 0; i < N; ++i) std::memcpy(&inBytes[i * byteSize(from)], &src[i].bits, byteSize(from));
    for (DType to : kTypes) {
      if (from == to) continue;
      K k("cast");
      Value* out = k.arg(ptr(to), "out");
      Value* in = k.arg(ptr(from), "in");
      Value* offs = k.b.arange(0, N);
      k.b.store(k.at(out, offs), k.b.cast(k.b.load(k.at(in, offs)), to));
      auto a = build(k);
      std::vector<uint8_t> outBytes(N * 8, 0xcd);
      void* po = outBytes.data();
      void* pi = inBytes.data();
      run(*a, {&po, &pi});
      for (size_t i = 0; i < N; ++i) {
        uint64_t got = 0;
        std::memcpy(&got, &outBytes[i * byteSize(to)], byteSize(to));
        uint64_t want = reference(src[i], from, to);
        INFO(name(from) << " -> " << name(to) << " lane " << i << " value " << src[i].value << " got 0x" << std::hex
                        << got << " want 0x" << want);
        if (isFloat(to) && isNanBits(want, to))
          REQUIRE(isNanBits(got, to));
        else
          REQUIRE(got == want);
      }
    }
  }
}

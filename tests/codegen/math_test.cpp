// Accuracy and special-value tests of the vector math emitters
// (codegen/llvm/VectorMath.*), run through the host JIT at vector widths
// 16, 8 and 1. The reference is the double-precision <cmath> function; the
// error of a result is |got - ref| in units of the float ulp of ref (the
// spacing of floats at ref's binade; 2^-149 for denormals and zero). The
// measured maxima are printed and quoted in docs/math.md.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tessera/codegen/Testing.h"
#include "tessera/support/Error.h"
#include "../cpu_paths.h"

using tessera::codegen::testing::evalUnaryF32;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

float fromBits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t toBits(float f) { return std::bit_cast<uint32_t>(f); }

/// Spacing of floats in the binade of y (y finite); 2^-149 at and below FLT_MIN.
double ulpOf(double y) {
  y = std::fabs(y);
  if (y < FLT_MIN) return std::ldexp(1.0, -149);
  if (y > FLT_MAX) y = FLT_MAX;
  return std::ldexp(1.0, std::ilogb(y) - 23);
}

/// Floats mapped to integers in their total order (-0 and +0 both 0), so
/// that the difference is the number of floats between two values;
/// +-inf are one step beyond +-FLT_MAX.
int64_t ordinal(float f) {
  uint32_t u = toBits(f);
  int64_t mag = u & 0x7fffffffu;
  return (u >> 31) ? -mag : mag;
}

struct Fn {
  const char* name;
  double (*ref)(double);
  double bound;  // max error in ulps
};

const Fn kFns[] = {
    {"exp", [](double x) { return std::exp(x); }, 2.0},
    {"exp2", [](double x) { return std::exp2(x); }, 2.0},
    {"log", [](double x) { return std::log(x); }, 2.0},
    {"log2", [](double x) { return std::log2(x); }, 2.0},
    {"tanh", [](double x) { return std::tanh(x); }, 4.0},
    {"erf", [](double x) { return std::erf(x); }, 4.0},
    {"sin", [](double x) { return std::sin(x); }, 1.5},
    {"cos", [](double x) { return std::cos(x); }, 1.5},
    {"sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 2.0},
    {"log1p", [](double x) { return std::log1p(x); }, 1.5},
    {"expm1", [](double x) { return std::expm1(x); }, 1.5},
};

/// Every float of one sign with a fixed stride through the bit patterns:
/// denormals, tiny, moderate and huge magnitudes in proportion to their
/// binades (+-inf are in the special-value tests). The stride is odd so
/// all mantissa bits vary.
void addBitSweep(std::vector<float>& v, uint32_t count) {
  const uint32_t stride = 0x7f800000u / count | 1u;
  for (uint32_t u = 0; u < 0x7f800000u; u += stride) {
    v.push_back(fromBits(u));
    v.push_back(fromBits(u | 0x80000000u));
  }
}

/// `count` values evenly spaced in value over [lo, hi].
void addLinearSweep(std::vector<float>& v, double lo, double hi, int count) {
  for (int k = 0; k <= count; ++k) v.push_back(static_cast<float>(lo + (hi - lo) * k / count));
}

/// Every float in [lo, hi] (lo, hi > 0).
void addAllFloats(std::vector<float>& v, float lo, float hi) {
  for (uint32_t u = toBits(lo); u <= toBits(hi); ++u) v.push_back(fromBits(u));
}

std::vector<float> sweepFor(const std::string& fn) {
  std::vector<float> v;
  addBitSweep(v, 1000000);
  if (fn == "exp") {
    addLinearSweep(v, -104.0, 89.0, 1000000);
    addAllFloats(v, 88.5f, 88.8f);  // the overflow threshold
  } else if (fn == "exp2") {
    addLinearSweep(v, -151.0, 129.0, 1000000);
    addAllFloats(v, 127.9f, 128.1f);
  } else if (fn == "log" || fn == "log2") {
    addLinearSweep(v, 0.0, 4.0, 1000000);
    addAllFloats(v, 0.999f, 1.001f);  // results near 0: relative accuracy
  } else if (fn == "tanh") {
    addLinearSweep(v, -10.0, 10.0, 1000000);
    addAllFloats(v, 0.6f, 0.65f);  // the switch between the two methods
  } else if (fn == "erf") {
    addLinearSweep(v, -5.0, 5.0, 1000000);
    addAllFloats(v, 0.98f, 1.02f);  // the switch between the two methods
  } else if (fn == "sin" || fn == "cos") {
    addLinearSweep(v, -10.0, 10.0, 1000000);
    addLinearSweep(v, -1.1e6, 1.1e6, 1000000);
    addAllFloats(v, 1047000.0f, 1050000.0f);  // the switch to the Payne-Hanek reduction at 2^20
    addAllFloats(v, 0x1p-12f, 0x1.0004p-12f);
  } else if (fn == "sigmoid") {
    addLinearSweep(v, -110.0, 30.0, 1000000);
  } else if (fn == "log1p") {
    addLinearSweep(v, -1.0, 4.0, 1000000);
    addLinearSweep(v, -0.01, 0.01, 1000000);
  } else if (fn == "expm1") {
    addLinearSweep(v, -20.0, 89.0, 1000000);
    addLinearSweep(v, -1.0, 1.0, 1000000);
    addAllFloats(v, 16.5f, 17.5f);  // the switch at n = 24 / 25
  }
  return v;
}

struct Stats {
  double maxUlp = 0;
  int64_t maxDist = 0;
  float worstX = 0;
  size_t bad = 0;  // NaN/inf disagreements
  float badX = 0;
};

Stats measure(const Fn& fn, const std::vector<float>& in, const std::vector<float>& out) {
  Stats s;
  for (size_t k = 0; k < in.size(); ++k) {
    const float x = in[k], got = out[k];
    const double ref = fn.ref(x);
    const float reff = static_cast<float>(ref);
    if (std::isnan(ref) || std::isnan(got)) {
      if (std::isnan(ref) != std::isnan(got)) {
        ++s.bad;
        s.badX = x;
      }
      continue;
    }
    const int64_t dist = std::llabs(ordinal(got) - ordinal(reff));
    // Past FLT_MAX the real-valued error is meaningless; the ordinal
    // distance (inf is one step beyond FLT_MAX) measures it instead.
    const double ulp = (std::isinf(got) || std::isinf(reff)) ? static_cast<double>(dist)
                                                             : std::fabs(static_cast<double>(got) - ref) / ulpOf(ref);
    if (ulp > s.maxUlp) {
      s.maxUlp = ulp;
      s.worstX = x;
    }
    s.maxDist = std::max(s.maxDist, dist);
  }
  return s;
}

bool sameBits(float a, float b) { return (std::isnan(a) && std::isnan(b)) || toBits(a) == toBits(b); }

}  // namespace

TEST_CASE("vector math: accuracy over dense sweeps", "[codegen][math]") {
  // Every vector path the host can run (AVX2, and AVX-512 where present).
  for (const std::string& cpu : testpaths::runnableCpus())
    for (const Fn& fn : kFns) {
      const std::vector<float> in = sweepFor(fn.name);
      std::vector<float> first;
      for (unsigned width : {16u, 8u, 1u}) {
        std::vector<float> out = evalUnaryF32(fn.name, in, width, cpu);
        REQUIRE(out.size() == in.size());
        Stats s = measure(fn, in, out);
        char line[200];
        std::snprintf(line, sizeof line,
                      "%-10s %-5s width %2u: max error %.3f ulp (ordinal distance %lld) at x = %.9g, "
                      "%zu values",
                      cpu.c_str(), fn.name, width, s.maxUlp, static_cast<long long>(s.maxDist),
                      static_cast<double>(s.worstX), in.size());
        std::printf("%s\n", line);
        INFO(line);
        INFO("NaN mismatches: " << s.bad << " (e.g. x = " << s.badX << ")");
        CHECK(s.bad == 0);
        CHECK(s.maxUlp <= fn.bound);
        CHECK(static_cast<double>(s.maxDist) <= fn.bound);
        // The emitted IR has no fast-math freedom, so every width must compute
        // bit-identical results.
        if (first.empty()) {
          first = out;
        } else {
          size_t diff = 0;
          for (size_t k = 0; k < in.size(); ++k) diff += !sameBits(first[k], out[k]);
          CHECK(diff == 0);
        }
      }
    }
}

namespace {

/// Evaluates fn on xs at widths 16, 8 and 1 and checks each result with
/// `expect(x, got)`.
void checkSpecials(const std::string& fn, const std::vector<float>& xs,
                   const std::function<bool(float, float)>& expect) {
  for (const std::string& cpu : testpaths::runnableCpus())
    for (unsigned width : {16u, 8u, 1u}) {
      std::vector<float> out = evalUnaryF32(fn, xs, width, cpu);
      for (size_t k = 0; k < xs.size(); ++k) {
        INFO(fn << "(" << xs[k] << ") = " << out[k] << " at width " << width << " on " << cpu);
        CHECK(expect(xs[k], out[k]));
      }
    }
}

bool isPosZero(float f) { return f == 0 && !std::signbit(f); }
bool isNegZero(float f) { return f == 0 && std::signbit(f); }

}  // namespace

TEST_CASE("vector math: exp special values", "[codegen][math]") {
  checkSpecials("exp", {kInf}, [](float, float y) { return y == kInf; });
  checkSpecials("exp", {-kInf, -104.0f, -1000.0f, -FLT_MAX}, [](float, float y) { return isPosZero(y); });
  checkSpecials("exp", {kNaN, -kNaN}, [](float, float y) { return std::isnan(y); });
  checkSpecials("exp", {0.0f, -0.0f, kDenormMin, -kDenormMin, FLT_MIN}, [](float, float y) { return y == 1.0f; });
  // Overflow threshold: ln(FLT_MAX) = 88.72283905; 88.7228317 (0x42b17217)
  // is the largest float whose exp is finite, the next one overflows.
  checkSpecials("exp", {fromBits(0x42b17217u)}, [](float, float y) { return std::isfinite(y) && y > 3.4e38f; });
  checkSpecials("exp", {fromBits(0x42b17218u), 89.0f, 100.0f, FLT_MAX}, [](float, float y) { return y == kInf; });
  // Gradual underflow is exact: results are the correctly rounded denormals.
  checkSpecials("exp", {-87.5f, -95.0f, -103.0f, -103.9f},
                [](float x, float y) { return y == static_cast<float>(std::exp(static_cast<double>(x))); });
  // ln(2^-150) = -103.972077: just above, the result rounds up to the
  // smallest denormal; just below, to +0.
  checkSpecials("exp", {-103.972f}, [](float, float y) { return y == kDenormMin; });
  checkSpecials("exp", {-103.9721f}, [](float, float y) { return isPosZero(y); });
}

TEST_CASE("vector math: exp2 special values", "[codegen][math]") {
  checkSpecials("exp2", {kInf, 128.0f, 1000.0f}, [](float, float y) { return y == kInf; });
  checkSpecials("exp2", {-kInf, -150.0f, -151.0f, -1000.0f}, [](float, float y) { return isPosZero(y); });
  checkSpecials("exp2", {kNaN}, [](float, float y) { return std::isnan(y); });
  // Integers give exact powers of two, denormals included.
  std::vector<float> ints;
  for (int k = -149; k <= 127; ++k) ints.push_back(static_cast<float>(k));
  checkSpecials("exp2", ints,
                [](float x, float y) { return y == static_cast<float>(std::ldexp(1.0, static_cast<int>(x))); });
  checkSpecials("exp2", {127.99999f}, [](float, float y) { return std::isfinite(y); });
}

TEST_CASE("vector math: log and log2 special values", "[codegen][math]") {
  for (const char* fn : {"log", "log2"}) {
    checkSpecials(fn, {0.0f, -0.0f}, [](float, float y) { return y == -kInf; });
    checkSpecials(fn, {kInf}, [](float, float y) { return y == kInf; });
    checkSpecials(fn, {-kInf, -1.0f, -kDenormMin, -FLT_MAX, kNaN, -kNaN}, [](float, float y) { return std::isnan(y); });
    checkSpecials(fn, {1.0f}, [](float, float y) { return isPosZero(y); });
  }
  // Denormal inputs (rescaled internally) and the extremes.
  checkSpecials("log", {kDenormMin, 3 * kDenormMin, FLT_MIN / 3, FLT_MIN, FLT_MAX}, [](float x, float y) {
    const double r = std::log(static_cast<double>(x));
    return std::fabs(y - r) <= 2 * ulpOf(r);
  });
  // log2 of every power of two is exact.
  std::vector<float> pows;
  for (int k = -149; k <= 127; ++k) pows.push_back(std::ldexp(1.0f, k));
  checkSpecials("log2", pows, [](float x, float y) { return y == std::ilogb(x); });
}

TEST_CASE("vector math: tanh and erf special values", "[codegen][math]") {
  for (const char* fn : {"tanh", "erf"}) {
    checkSpecials(fn, {0.0f}, [](float, float y) { return isPosZero(y); });
    checkSpecials(fn, {-0.0f}, [](float, float y) { return isNegZero(y); });
    checkSpecials(fn, {kInf, 10.0f, 100.0f, FLT_MAX}, [](float, float y) { return y == 1.0f; });
    checkSpecials(fn, {-kInf, -10.0f, -100.0f, -FLT_MAX}, [](float, float y) { return y == -1.0f; });
    checkSpecials(fn, {kNaN, -kNaN}, [](float, float y) { return std::isnan(y); });
  }
  // Saturation thresholds: 1 - tanh(x) and erfc(x) fall below ulp(1)/2.
  checkSpecials("tanh", {9.1f, -9.1f}, [](float x, float y) { return y == std::copysign(1.0f, x); });
  checkSpecials("erf", {3.92f, -3.92f}, [](float x, float y) { return y == std::copysign(1.0f, x); });
  // Tiny arguments: tanh x = x exactly; erf x = x + x*c0 in one rounding,
  // so within half an ulp plus the rounding of c0 (2/sqrt(pi) - 1 as a
  // float, which makes x*(1 + c0) an exact tie for powers of two).
  const std::vector<float> tiny = {kDenormMin, -kDenormMin, 1e-40f, FLT_MIN, -FLT_MIN, 1e-20f};
  checkSpecials("tanh", tiny, [](float x, float y) { return y == x; });
  checkSpecials("erf", tiny, [](float x, float y) {
    const double r = std::erf(static_cast<double>(x));
    return std::fabs(y - r) <= 0.51 * ulpOf(r);
  });
  // Oddness over a range of magnitudes.
  std::vector<float> xs;
  for (float x = 1e-6f; x < 12.0f; x *= 1.37f) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  for (const char* fn : {"tanh", "erf"}) {
    std::vector<float> out = evalUnaryF32(fn, xs, 8);
    for (size_t k = 0; k < xs.size(); k += 2) {
      INFO(fn << "(" << xs[k] << ")");
      CHECK(out[k + 1] == -out[k]);
    }
  }
}

TEST_CASE("vector math: evaluation harness", "[codegen][math]") {
  SECTION("unknown function and bad width are user errors") {
    CHECK_THROWS_AS(evalUnaryF32("tan", {1.0f}), tessera::CompileError);
    CHECK_THROWS_WITH(evalUnaryF32("tan", {1.0f}), Catch::Contains("tan"));
    CHECK_THROWS_WITH(evalUnaryF32("pow", {1.0f}), Catch::Contains("unknown math function 'pow'"));
    CHECK_THROWS_WITH(evalUnaryF32("sqrt", {1.0f}), Catch::Contains("unknown math function 'sqrt'"));
    CHECK_THROWS_AS(evalUnaryF32("exp", {1.0f}, 0), tessera::CompileError);
  }
  SECTION("lengths that are not multiples of the vector width") {
    for (size_t n : {size_t(1), size_t(7), size_t(15), size_t(17), size_t(33)}) {
      std::vector<float> in(n);
      for (size_t k = 0; k < n; ++k) in[k] = 0.25f * static_cast<float>(k) - 2.0f;
      for (unsigned width : {16u, 8u, 1u}) {
        std::vector<float> out = evalUnaryF32("exp", in, width);
        REQUIRE(out.size() == n);
        for (size_t k = 0; k < n; ++k) {
          const double r = std::exp(static_cast<double>(in[k]));
          INFO("n = " << n << ", width = " << width << ", k = " << k);
          CHECK(std::fabs(out[k] - r) <= 2 * ulpOf(r));
        }
      }
    }
    CHECK(evalUnaryF32("exp", {}, 16).empty());
  }
}

TEST_CASE("vector math: sin, cos, sigmoid, log1p and expm1 special values", "[codegen][math]") {
  checkSpecials("sin", {0.0f}, [](float, float y) { return isPosZero(y); });
  checkSpecials("sin", {-0.0f}, [](float, float y) { return isNegZero(y); });
  checkSpecials("cos", {0.0f, -0.0f}, [](float, float y) { return y == 1.0f; });
  for (const char* fn : {"sin", "cos"})
    checkSpecials(fn, {kInf, -kInf, kNaN, -kNaN}, [](float, float y) { return std::isnan(y); });
  // Tiny and denormal arguments: sin x = x exactly.
  checkSpecials("sin", {kDenormMin, -kDenormMin, 1e-40f, FLT_MIN, -1e-20f}, [](float x, float y) { return y == x; });
  // Huge arguments, against the double-precision reference (an exact
  // reduction gives them to the polynomial error).
  checkSpecials("sin", {FLT_MAX, -FLT_MAX, 1e30f, 3.0e38f, 16777216.0f, 1e10f}, [](float x, float y) {
    const double r = std::sin(static_cast<double>(x));
    return std::fabs(y - r) <= 2 * ulpOf(r);
  });
  checkSpecials("cos", {FLT_MAX, -FLT_MAX, 1e30f, 3.0e38f, 16777216.0f, 1e10f}, [](float x, float y) {
    const double r = std::cos(static_cast<double>(x));
    return std::fabs(y - r) <= 2 * ulpOf(r);
  });
  checkSpecials("sigmoid", {kInf, 100.0f, FLT_MAX}, [](float, float y) { return y == 1.0f; });
  checkSpecials("sigmoid", {-kInf, -110.0f, -FLT_MAX}, [](float, float y) { return isPosZero(y); });
  checkSpecials("sigmoid", {0.0f, -0.0f}, [](float, float y) { return y == 0.5f; });
  checkSpecials("sigmoid", {kNaN}, [](float, float y) { return std::isnan(y); });
  // Denormal results of sigmoid (x < -87.3) are exact to the bound, not flushed.
  checkSpecials("sigmoid", {-90.0f, -100.0f, -103.0f}, [](float x, float y) {
    const double r = 1 / (1 + std::exp(-static_cast<double>(x)));
    return y > 0 && std::fabs(y - r) <= 2 * ulpOf(r);
  });
  checkSpecials("log1p", {0.0f}, [](float, float y) { return isPosZero(y); });
  checkSpecials("log1p", {-0.0f}, [](float, float y) { return isNegZero(y); });
  checkSpecials("log1p", {-1.0f}, [](float, float y) { return y == -kInf; });
  checkSpecials("log1p", {-1.5f, -kInf, -FLT_MAX, kNaN}, [](float, float y) { return std::isnan(y); });
  checkSpecials("log1p", {kInf}, [](float, float y) { return y == kInf; });
  checkSpecials("log1p", {kDenormMin, -kDenormMin, 1e-30f, -1e-20f}, [](float x, float y) { return y == x; });
  checkSpecials("expm1", {0.0f}, [](float, float y) { return isPosZero(y); });
  checkSpecials("expm1", {-0.0f}, [](float, float y) { return isNegZero(y); });
  checkSpecials("expm1", {-kInf, -20.0f, -1000.0f, -FLT_MAX}, [](float, float y) { return y == -1.0f; });
  checkSpecials("expm1", {kInf, 89.0f, FLT_MAX}, [](float, float y) { return y == kInf; });
  checkSpecials("expm1", {kNaN}, [](float, float y) { return std::isnan(y); });
  checkSpecials("expm1", {kDenormMin, -kDenormMin, 1e-30f, -1e-20f}, [](float x, float y) { return y == x; });
  // Oddness of sin, evenness of cos, bitwise.
  std::vector<float> xs;
  for (float x = 1e-6f; x < 1e30f; x *= 1.93f) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  std::vector<float> s = evalUnaryF32("sin", xs, 8), c = evalUnaryF32("cos", xs, 8);
  for (size_t k = 0; k < xs.size(); k += 2) {
    INFO("x = " << xs[k]);
    CHECK(s[k + 1] == -s[k]);
    CHECK(c[k + 1] == c[k]);
  }
}

// Accuracy and special values of the f64 vector math emitters
// (codegen/llvm/VectorMath64.cpp) and of pow (f32 and f64), run through the
// host JIT at vector widths 8, 4 and 1 (8 and 1 for pow). References are
// the long double <cmath> functions (64-bit significand: their own error is
// below 2^-10 ulp of a double). The measured maxima are printed; the
// per-backend table of docs/math.md is measured by math_backends_test.cpp.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tessera/codegen/Testing.h"
#include "tessera/support/Error.h"
#include "../cpu_paths.h"
#include "ulp.h"

using tessera::codegen::testing::evalBinaryF32;
using tessera::codegen::testing::evalBinaryF64;
using tessera::codegen::testing::evalUnaryF64;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kDenormMin = std::numeric_limits<double>::denorm_min();

struct Fn64 {
  const char* name;
  long double (*ref)(long double);
  double bound;  // ulp
};

long double sigmoidRef(long double x) { return 1.0L / (1.0L + std::exp(-x)); }

const Fn64 kFns64[] = {
    {"exp", [](long double x) { return std::exp(x); }, 1.5},
    {"exp2", [](long double x) { return std::exp2(x); }, 1.5},
    {"log", [](long double x) { return std::log(x); }, 1.5},
    {"log2", [](long double x) { return std::log2(x); }, 1.5},
    {"tanh", [](long double x) { return std::tanh(x); }, 1.5},
    {"erf", [](long double x) { return std::erf(x); }, 1.5},
    {"sin", [](long double x) { return std::sin(x); }, 1.5},
    {"cos", [](long double x) { return std::cos(x); }, 1.5},
    {"sigmoid", sigmoidRef, 1.5},
    {"log1p", [](long double x) { return std::log1p(x); }, 1.5},
    {"expm1", [](long double x) { return std::expm1(x); }, 1.5},
};

/// Doubles of both signs with a fixed odd stride through the bit patterns
/// below infinity: denormals to DBL_MAX in proportion to their binades.
void addBitSweep(std::vector<double>& v, uint64_t count) {
  const uint64_t stride = 0x7ff0000000000000ull / count | 1u;
  for (uint64_t u = 0; u < 0x7ff0000000000000ull; u += stride) {
    v.push_back(std::bit_cast<double>(u));
    v.push_back(std::bit_cast<double>(u | 0x8000000000000000ull));
  }
}

void addLinear(std::vector<double>& v, double lo, double hi, int count) {
  for (int k = 0; k <= count; ++k) v.push_back(lo + (hi - lo) * k / count);
}

/// `count` doubles around `at`, one ulp apart.
void addAround(std::vector<double>& v, double at, int count) {
  double x = at;
  for (int k = 0; k < count / 2; ++k) x = std::nextafter(x, -kInf);
  for (int k = 0; k < count; ++k, x = std::nextafter(x, kInf)) v.push_back(x);
}

std::vector<double> sweep64(const std::string& fn) {
  std::vector<double> v;
  addBitSweep(v, 400000);
  if (fn == "exp" || fn == "sigmoid") {
    addLinear(v, -746, 710, 400000);
    addAround(v, 709.782712893384, 2000);  // overflow threshold
    addAround(v, -745.1332191019412, 2000);
  } else if (fn == "exp2") {
    addLinear(v, -1076, 1025, 400000);
    addAround(v, 1024, 2000);
  } else if (fn == "log" || fn == "log2") {
    addLinear(v, 0, 4, 400000);
    addAround(v, 1.0, 20000);
  } else if (fn == "tanh") {
    addLinear(v, -20, 20, 400000);
    addAround(v, 0.625, 20000);
  } else if (fn == "erf") {
    addLinear(v, -7, 7, 400000);
    for (double at : {1.0, 2.5, 6.0}) addAround(v, at, 20000);
  } else if (fn == "sin" || fn == "cos") {
    addLinear(v, -10, 10, 400000);
    addLinear(v, -2e9, 2e9, 200000);
    addAround(v, 0x1p30, 20000);  // the switch to Payne-Hanek
    // Among the doubles closest to a multiple of pi/2 (the hardest
    // reductions), and multiples of large powers of two.
    v.push_back(6381956970095103.0 * 0x1p797);
    v.push_back(5491268867107799.0 * 0x1p-1);
    for (int e = 30; e <= 1023; e += 7) v.push_back(std::ldexp(1.0, e) * 1.2345678901234567);
  } else if (fn == "log1p") {
    addLinear(v, -1, 4, 400000);
    addLinear(v, -0.01, 0.01, 200000);
  } else if (fn == "expm1") {
    addLinear(v, -40, 710, 400000);
    addLinear(v, -1, 1, 200000);
    addAround(v, 37.0, 20000);  // the switch at n = 53 / 54
  }
  return v;
}

template <typename T>
bool sameBits(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<ulptest::Bits<T>>(a) == std::bit_cast<ulptest::Bits<T>>(b);
}

}  // namespace

TEST_CASE("vector math f64: accuracy over dense sweeps", "[codegen][math]") {
  for (const std::string& cpu : testpaths::runnableCpus())
    for (const Fn64& fn : kFns64) {
      const std::vector<double> in = sweep64(fn.name);
      std::vector<double> first;
      for (unsigned width : {8u, 4u, 1u}) {
        std::vector<double> out = evalUnaryF64(fn.name, in, width, cpu);
        REQUIRE(out.size() == in.size());
        ulptest::MaxError<double> m;
        for (size_t k = 0; k < in.size(); ++k)
          m.add(ulptest::errorUlp(out[k], fn.ref(in[k])), in[k], out[k], fn.ref(in[k]));
        std::printf("%-10s %-7s f64 width %u: %s\n", cpu.c_str(), fn.name, width, m.str().c_str());
        INFO(fn.name << " width " << width << " on " << cpu << ": " << m.str());
        CHECK(m.ulp <= fn.bound);
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

void checkSpecials64(const std::string& fn, const std::vector<double>& xs,
                     const std::function<bool(double, double)>& expect) {
  for (unsigned width : {4u, 1u}) {
    std::vector<double> out = evalUnaryF64(fn, xs, width);
    for (size_t k = 0; k < xs.size(); ++k) {
      INFO(fn << "(" << xs[k] << ") = " << out[k] << " at width " << width);
      CHECK(expect(xs[k], out[k]));
    }
  }
}
bool isPosZero(double f) { return f == 0 && !std::signbit(f); }
bool isNegZero(double f) { return f == 0 && std::signbit(f); }

}  // namespace

TEST_CASE("vector math f64: special values", "[codegen][math]") {
  auto nan = [](double, double y) { return std::isnan(y); };
  checkSpecials64("exp", {kInf, 710.0, DBL_MAX}, [](double, double y) { return y == kInf; });
  checkSpecials64("exp", {-kInf, -746.0, -DBL_MAX}, [](double, double y) { return isPosZero(y); });
  checkSpecials64("exp", {0.0, -0.0, kDenormMin}, [](double, double y) { return y == 1.0; });
  checkSpecials64("exp2", {-1074.0, -1022.0, 0.0, 1.0, 1023.0},
                  [](double x, double y) { return y == std::ldexp(1.0, static_cast<int>(x)); });
  checkSpecials64("exp2", {1024.0, kInf}, [](double, double y) { return y == kInf; });
  for (const char* fn : {"log", "log2"}) {
    checkSpecials64(fn, {0.0, -0.0}, [](double, double y) { return y == -kInf; });
    checkSpecials64(fn, {kInf}, [](double, double y) { return y == kInf; });
    checkSpecials64(fn, {-1.0, -kDenormMin, -kInf, kNaN}, nan);
    checkSpecials64(fn, {1.0}, [](double, double y) { return isPosZero(y); });
  }
  checkSpecials64("log2", {kDenormMin, 0x1p-1022, 0.5, 2.0, 0x1p1023},
                  [](double x, double y) { return y == std::ilogb(x); });
  for (const char* fn : {"tanh", "erf", "sin", "log1p", "expm1"}) {
    checkSpecials64(fn, {0.0}, [](double, double y) { return isPosZero(y); });
    checkSpecials64(fn, {-0.0}, [](double, double y) { return isNegZero(y); });
    checkSpecials64(fn, {kNaN}, nan);
  }
  checkSpecials64("tanh", {kInf, 20.0, DBL_MAX}, [](double, double y) { return y == 1.0; });
  checkSpecials64("erf", {-kInf, -6.0, -DBL_MAX}, [](double, double y) { return y == -1.0; });
  checkSpecials64("sin", {kInf, -kInf}, nan);
  checkSpecials64("cos", {kInf, -kInf, kNaN}, nan);
  checkSpecials64("cos", {0.0, -0.0, kDenormMin}, [](double, double y) { return y == 1.0; });
  checkSpecials64("sin", {kDenormMin, -0x1p-1030, 1e-200}, [](double x, double y) { return y == x; });
  checkSpecials64("log1p", {-1.0}, [](double, double y) { return y == -kInf; });
  checkSpecials64("log1p", {-1.5, -kInf}, nan);
  checkSpecials64("expm1", {-kInf, -40.0, -DBL_MAX}, [](double, double y) { return y == -1.0; });
  checkSpecials64("expm1", {kInf, 710.0}, [](double, double y) { return y == kInf; });
  checkSpecials64("sigmoid", {kInf, 40.0}, [](double, double y) { return y == 1.0; });
  checkSpecials64("sigmoid", {-kInf, -746.0}, [](double, double y) { return isPosZero(y); });
  checkSpecials64("sigmoid", {0.0, -0.0}, [](double, double y) { return y == 0.5; });
}

// ---- pow ------------------------------------------------------------------------------

namespace {

/// (x, y) pairs for pow: random magnitudes over the whole range with
/// exponents that keep the result finite, bases near 1 with large
/// exponents, integer exponents of negative bases, and a grid.
template <typename T>
void powPairs(std::vector<T>& xs, std::vector<T>& ys, int n) {
  std::mt19937_64 rng(12);
  const double maxLog2 = std::is_same_v<T, float> ? 128 : 1024;
  std::uniform_real_distribution<double> u(0, 1);
  for (int k = 0; k < n; ++k) {
    // |x| = 2^e, e uniform; y chosen so that |y log2 x| < maxLog2 * 1.1.
    double e = (u(rng) * 2 - 1) * (maxLog2 - 1);
    T x = static_cast<T>(std::exp2(e));
    double lim = maxLog2 * 1.1 / std::max(std::fabs(e), 1e-3);
    T y = static_cast<T>((u(rng) * 2 - 1) * std::min(lim, 1e6));
    xs.push_back(x);
    ys.push_back(y);
    // Near 1, large exponents.
    T x1 = static_cast<T>(1 + (u(rng) * 2 - 1) * 1e-3);
    xs.push_back(x1);
    ys.push_back(
        static_cast<T>((u(rng) * 2 - 1) * maxLog2 / std::max(std::fabs(std::log2(static_cast<double>(x1))), 1e-9)));
    // Negative bases with integer exponents.
    xs.push_back(-static_cast<T>(u(rng) * 10));
    ys.push_back(static_cast<T>(std::round((u(rng) * 2 - 1) * 30)));
  }
  for (int i = 0; i <= 200; ++i)
    for (int j = 0; j <= 200; ++j) {
      xs.push_back(static_cast<T>(i * 0.02));
      ys.push_back(static_cast<T>(-20 + j * 0.2));
    }
}

struct PowCase {
  double x, y, want;  // want: NaN means NaN; the sign of zeros and infinities is checked
};

const PowCase kPowSpecials[] = {
    {kNaN, 0.0, 1.0},    {kNaN, -0.0, 1.0},   {1.0, kNaN, 1.0},    {1.0, kInf, 1.0},
    {-1.0, kInf, 1.0},   {-1.0, -kInf, 1.0},  {kNaN, 1.0, kNaN},   {2.0, kNaN, kNaN},
    {-2.0, 0.5, kNaN},   {-2.0, 3.0, -8.0},   {-2.0, 2.0, 4.0},    {-2.0, -3.0, -0.125},
    {0.0, -3.0, kInf},   {-0.0, -3.0, -kInf}, {-0.0, -2.0, kInf},  {-0.0, -0.5, kInf},
    {0.0, -kInf, kInf},  {-0.0, -kInf, kInf}, {0.0, 3.0, 0.0},     {-0.0, 3.0, -0.0},
    {-0.0, 2.0, 0.0},    {-0.0, 0.5, 0.0},    {0.5, -kInf, kInf},  {2.0, -kInf, 0.0},
    {0.5, kInf, 0.0},    {2.0, kInf, kInf},   {-0.5, kInf, 0.0},   {-2.0, kInf, kInf},
    {-kInf, -3.0, -0.0}, {-kInf, -2.0, 0.0},  {-kInf, -0.5, 0.0},  {-kInf, 3.0, -kInf},
    {-kInf, 2.0, kInf},  {-kInf, 0.5, kInf},  {kInf, -1.0, 0.0},   {kInf, 0.5, kInf},
    {2.0, 10.0, 1024.0}, {3.0, 5.0, 243.0},   {10.0, 3.0, 1000.0}, {0.5, 2.0, 0.25},
    {4.0, 0.5, 2.0},     {-1.0, 1e30, 1.0},   {-1.0, 3.0, -1.0},   {2.0, -1074.0, kDenormMin},
};

template <typename T>
bool powMatches(T got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return static_cast<double>(got) == static_cast<T>(want) && std::signbit(got) == std::signbit(want);
}

}  // namespace

TEST_CASE("vector math: pow accuracy, f32 and f64", "[codegen][math]") {
  for (const std::string& cpu : testpaths::runnableCpus()) {
    {
      std::vector<float> xs, ys;
      powPairs(xs, ys, 300000);
      std::vector<float> first;
      for (unsigned width : {16u, 8u, 1u}) {
        std::vector<float> out = evalBinaryF32("pow", xs, ys, width, cpu);
        ulptest::MaxError<float> m;
        for (size_t k = 0; k < xs.size(); ++k) {
          long double ref = std::pow(static_cast<long double>(xs[k]), static_cast<long double>(ys[k]));
          m.add(ulptest::errorUlp(out[k], ref), xs[k], out[k], ref, ys[k]);
        }
        std::printf("%-10s pow     f32 width %2u: %s (y = %.9g)\n", cpu.c_str(), width, m.str().c_str(),
                    static_cast<double>(m.y));
        INFO("f32 pow width " << width << ": " << m.str() << ", y = " << m.y);
        CHECK(m.ulp <= 1.5);
        if (first.empty()) first = out;
        size_t diff = 0;
        for (size_t k = 0; k < xs.size(); ++k) diff += !sameBits(first[k], out[k]);
        CHECK(diff == 0);
      }
    }
    {
      std::vector<double> xs, ys;
      powPairs(xs, ys, 300000);
      std::vector<double> first;
      for (unsigned width : {8u, 1u}) {
        std::vector<double> out = evalBinaryF64("pow", xs, ys, width, cpu);
        ulptest::MaxError<double> m;
        for (size_t k = 0; k < xs.size(); ++k) {
          long double ref = std::pow(static_cast<long double>(xs[k]), static_cast<long double>(ys[k]));
          m.add(ulptest::errorUlp(out[k], ref), xs[k], out[k], ref, ys[k]);
        }
        std::printf("%-10s pow     f64 width %u: %s (y = %.17g)\n", cpu.c_str(), width, m.str().c_str(), m.y);
        INFO("f64 pow width " << width << ": " << m.str() << ", y = " << m.y);
        CHECK(m.ulp <= 1.5);
        if (first.empty()) first = out;
        size_t diff = 0;
        for (size_t k = 0; k < xs.size(); ++k) diff += !sameBits(first[k], out[k]);
        CHECK(diff == 0);
      }
    }
  }
}

TEST_CASE("vector math: pow special values (C's pow)", "[codegen][math]") {
  std::vector<float> xf, yf;
  std::vector<double> xd, yd;
  for (const PowCase& c : kPowSpecials) {
    xf.push_back(static_cast<float>(c.x));
    yf.push_back(static_cast<float>(c.y));
    xd.push_back(c.x);
    yd.push_back(c.y);
  }
  std::vector<float> of = evalBinaryF32("pow", xf, yf, 8);
  std::vector<double> od = evalBinaryF64("pow", xd, yd, 4);
  for (size_t k = 0; k < std::size(kPowSpecials); ++k) {
    const PowCase& c = kPowSpecials[k];
    INFO("pow(" << c.x << ", " << c.y << "): f32 " << of[k] << ", f64 " << od[k] << ", want " << c.want);
    CHECK(powMatches(od[k], c.want));
    // 2^-1074 is 0 in f32.
    if (c.y != -1074.0) CHECK(powMatches(of[k], c.want));
  }
}

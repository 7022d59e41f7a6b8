// Errors in ulps, for the math tests: |got - ref| in units of the spacing of
// T at ref's binade (the smallest denormal spacing at and below the
// smallest normal), with ref computed in a wider type; infinities are
// compared by ordinal distance (inf is one step beyond the largest finite
// value), NaN must match NaN. One definition for f32 and f64, the host
// harness tests (math_test.cpp) and the kernel tests on every backend.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

namespace ulptest {

template <typename T>
using Bits = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;

template <typename T>
constexpr int kMantissa = std::numeric_limits<T>::digits - 1;  // 23, 52

/// Spacing of T in the binade of y.
template <typename T>
long double ulpOf(long double y) {
  y = std::fabs(y);
  const long double minNormal = std::numeric_limits<T>::min();
  if (y < minNormal) return std::ldexp(1.0L, std::numeric_limits<T>::min_exponent - 1 - kMantissa<T>);
  if (y > std::numeric_limits<T>::max()) y = std::numeric_limits<T>::max();
  return std::ldexp(1.0L, std::ilogb(y) - kMantissa<T>);
}

/// T in its total order as an integer (-0 and +0 both 0), so the difference
/// of two is the number of values between them.
template <typename T>
int64_t ordinal(T f) {
  auto u = std::bit_cast<Bits<T>>(f);
  const Bits<T> sign = Bits<T>(1) << (sizeof(T) * 8 - 1);
  int64_t mag = static_cast<int64_t>(u & ~sign);
  return (u & sign) ? -mag : mag;
}

/// The error of `got` against the exact value `ref`, in ulps of T; +inf
/// when one is NaN and the other is not.
template <typename T>
double errorUlp(T got, long double ref) {
  if (std::isnan(ref) || std::isnan(got))
    return std::isnan(ref) == std::isnan(got) ? 0.0 : std::numeric_limits<double>::infinity();
  const T refT = static_cast<T>(ref);
  if (std::isinf(got) || std::isinf(refT)) return static_cast<double>(std::llabs(ordinal(got) - ordinal(refT)));
  return static_cast<double>(std::fabs(static_cast<long double>(got) - ref) / ulpOf<T>(ref));
}

/// The largest error seen and where.
template <typename T>
struct MaxError {
  double ulp = 0;
  T x = 0, y = 0;  // the argument(s) of the worst case
  long double ref = 0;
  T got = 0;
  size_t count = 0;
  void add(double e, T xv, T got_, long double refv, T yv = 0) {
    ++count;
    if (e > ulp || (std::isinf(e) && !std::isinf(ulp))) {
      ulp = e;
      x = xv;
      y = yv;
      got = got_;
      ref = refv;
    }
  }
  std::string str() const {
    char line[256];
    std::snprintf(line, sizeof line, "max %.3f ulp at x = %.17g%s (got %.17g, exact %.17Lg) over %zu values", ulp,
                  static_cast<double>(x), "", static_cast<double>(got), ref, count);
    return line;
  }
};

}  // namespace ulptest

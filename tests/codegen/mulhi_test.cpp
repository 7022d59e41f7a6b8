// mulhi (ts::mulhi, ts::umulhi) on every backend against the exact product
// in 128-bit C++ arithmetic: every integer type, signed and unsigned, with
// random operands and the extremes (0, 1, -1, the minimum and maximum).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../cpu_paths.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int kBlock = 128;

std::vector<ts::Device> devices() { return testpaths::cpuPathsAndEmulators(); }

/// The high half of the exact product, by T's signedness.
template <class T>
T mulhiRef(T a, T b) {
  constexpr int w = sizeof(T) * 8;
  if constexpr (std::is_signed_v<T>)
    return static_cast<T>((static_cast<__int128>(a) * b) >> w);
  else
    return static_cast<T>((static_cast<unsigned __int128>(a) * b) >> w);
}

/// The high half of the product of the bits read as unsigned.
template <class T>
T umulhiRef(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(mulhiRef<U>(static_cast<U>(a), static_cast<U>(b)));
}

template <class T>
void checkType() {
  using L = std::numeric_limits<T>;
  std::vector<T> a, b;
  const T edge[] = {T(0), T(1), T(-1), L::min(), L::max(), T(L::max() / 2 + 1), T(2)};
  for (T x : edge)
    for (T y : edge) {
      a.push_back(x);
      b.push_back(y);
    }
  std::mt19937_64 rng(sizeof(T) * 2 + std::is_signed_v<T>);
  while (a.size() < 3 * kBlock + 5) {
    a.push_back(static_cast<T>(rng()));
    b.push_back(static_cast<T>(rng()));
  }
  const int n = static_cast<int>(a.size());
  auto kern =
      ts::kernel("mulhi", [](ts::Ptr<T> hi, ts::Ptr<T> uhi, ts::Ptr<const T> pa, ts::Ptr<const T> pb, ts::Int cnt) {
        auto i = ts::program_id(0) * kBlock + ts::arange(kBlock);
        auto m = i < cnt;
        auto x = ts::load(pa + i, m);
        auto y = ts::load(pb + i, m);
        ts::store(hi + i, ts::mulhi(x, y), m);
        ts::store(uhi + i, ts::umulhi(x, y), m);
      });
  const ts::DType d = ts::dsl::DTypeOf<T>::value;
  for (const ts::Device& dev : devices()) {
    INFO(dev.name() << ", " << ts::name(d));
    ts::CompiledKernel k = ts::compile(kern, dev);
    ts::Buffer hi = dev.alloc(d, a.size()), uhi = dev.alloc(d, a.size());
    k.launch(ts::Dim3((n + kBlock - 1) / kBlock), hi, uhi, dev.upload(d, a), dev.upload(d, b), int32_t(n));
    std::vector<T> got = hi.read<T>(), ugot = uhi.read<T>();
    for (int i = 0; i < n; ++i) {
      INFO("mulhi(" << +a[size_t(i)] << ", " << +b[size_t(i)] << ")");
      REQUIRE(got[size_t(i)] == mulhiRef(a[size_t(i)], b[size_t(i)]));
      REQUIRE(ugot[size_t(i)] == umulhiRef(a[size_t(i)], b[size_t(i)]));
    }
  }
}

}  // namespace

TEST_CASE("mulhi: the high half of the exact product on every backend and integer type", "[mulhi][emu]") {
  checkType<int8_t>();
  checkType<int16_t>();
  checkType<int32_t>();
  checkType<int64_t>();
  checkType<uint8_t>();
  checkType<uint16_t>();
  checkType<uint32_t>();
  checkType<uint64_t>();
}

TEST_CASE("mulhi: worked values of the reference semantics", "[mulhi]") {
  CHECK(mulhiRef<uint32_t>(0xffffffffu, 2) == 1);
  CHECK(mulhiRef<int32_t>(-1, 2) == -1);
  CHECK(umulhiRef<int32_t>(-1, 2) == 1);
  CHECK(mulhiRef<int64_t>(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min()) == int64_t{1}
                                                                                                           << 62);
  CHECK(mulhiRef<uint64_t>(~uint64_t{0}, ~uint64_t{0}) == ~uint64_t{0} - 1);
}

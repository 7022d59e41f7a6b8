// Counter-based random numbers (ts::randint, randint4x, rand, randn):
// Philox-4x32-10 with Triton's conventions. The plain C++ reference
// (examples/philox.h) is first checked against Random123's published
// known-answer vectors; then every backend (the pinned CPUs, emulated sm_80,
// gfx942 and gfx1100) must give the reference's bits for ragged sizes,
// seeds of every integer type (negative, above INT32_MAX and INT64_MAX,
// literals) and 32- and 64-bit offsets (crossing 2^32 and wrapping).
// randn uses log, sqrt and cos, whose f32 code is the same on every backend
// (docs/math.md), so it is compared bitwise across backends and within a
// stated tolerance against the definition evaluated in double. Last, the
// moments of a million draws.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../cpu_paths.h"
#include "philox.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ref = tessera::examples::philox;

namespace {

constexpr int kBlock = 128;

std::vector<ts::Device> devices() { return testpaths::cpuPathsAndEmulators(); }

// Every generator on the counters base + i, i < n (masked: the last
// program is ragged). Outputs: the four words of randint4x, randint, rand
// and randn. Seed and Base are kernel scalar types (ts::Int, ts::Long, ...).
template <class Seed, class Base>
ts::Kernel allGenerators() {
  return ts::kernel("philox_all",
                    [](ts::Ptr<uint32_t> w0, ts::Ptr<uint32_t> w1, ts::Ptr<uint32_t> w2, ts::Ptr<uint32_t> w3,
                       ts::Ptr<uint32_t> ri, ts::Ptr<float> ru, ts::Ptr<float> rn, Seed seed, Base base, ts::Int n) {
                      auto i = ts::program_id(0) * kBlock + ts::arange(kBlock);
                      auto m = i < n;
                      auto offs = base + i.to(Base::kDType);
                      auto [a, b, c, d] = ts::randint4x(seed, offs);
                      ts::store(w0 + i, a, m);
                      ts::store(w1 + i, b, m);
                      ts::store(w2 + i, c, m);
                      ts::store(w3 + i, d, m);
                      ts::store(ri + i, ts::randint(seed, offs), m);
                      ts::store(ru + i, ts::rand(seed, offs), m);
                      ts::store(rn + i, ts::randn(seed, offs), m);
                    });
}

struct Outputs {
  std::vector<uint32_t> w[4], ri;
  std::vector<float> ru, rn;
};

template <class Seed, class Base, class SeedC, class BaseC>
Outputs runAll(const ts::Device& dev, SeedC seed, BaseC base, int n) {
  ts::CompiledKernel k = ts::compile(allGenerators<Seed, Base>(), dev);
  std::vector<ts::Buffer> u;
  for (int j = 0; j < 5; ++j) u.push_back(dev.alloc(ts::DType::U32, size_t(n)));
  ts::Buffer fu = dev.alloc(ts::DType::F32, size_t(n)), fn = dev.alloc(ts::DType::F32, size_t(n));
  k.launch(ts::Dim3((n + kBlock - 1) / kBlock), u[0], u[1], u[2], u[3], u[4], fu, fn, seed, base, int32_t(n));
  Outputs o;
  for (int j = 0; j < 4; ++j) o.w[j] = u[size_t(j)].read<uint32_t>();
  o.ri = u[4].read<uint32_t>();
  o.ru = fu.read<float>();
  o.rn = fn.read<float>();
  return o;
}

/// The relative error bound of randn against its definition in double:
/// log (0.8 ulp, halved by the square root), sqrt (0.5), cos (0.84, its
/// argument the same f32 angle) and the last product (0.5) add up to 2.3
/// units of 2^-23 relative; 3 leaves room, and the test asserts the
/// measured maximum stays below it.
constexpr double kRandnRelTol = 3.0 * 0x1p-23;

/// Checks one backend's outputs against the reference for counters
/// (lo(base + i), hi(base + i)); returns the largest relative error of randn.
template <class Counter>
double checkAgainstReference(const Outputs& o, uint64_t seedBits, int n, Counter counter) {
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    auto [lo, hi] = counter(i);
    const auto want = ref::randint4x(seedBits, lo, hi);
    INFO("element " << i << ", counter (" << lo << ", " << hi << ")");
    for (int j = 0; j < 4; ++j) REQUIRE(o.w[j][size_t(i)] == want[size_t(j)]);
    REQUIRE(o.ri[size_t(i)] == want[0]);
    REQUIRE(std::bit_cast<uint32_t>(o.ru[size_t(i)]) == std::bit_cast<uint32_t>(ref::uniform(want[0])));
    const double n0 = ref::randn(seedBits, lo, hi);
    const double err = std::fabs(double(o.rn[size_t(i)]) - n0);
    REQUIRE(err <= kRandnRelTol * std::fabs(n0) + 0x1p-149);
    if (n0 != 0) worst = std::max(worst, err / std::fabs(n0));
  }
  return worst;
}

/// Every backend's randn bits equal the first backend's.
void sameRandnEverywhere(const std::vector<std::vector<float>>& perBackend, const std::vector<ts::Device>& devs) {
  for (size_t d = 1; d < perBackend.size(); ++d)
    for (size_t i = 0; i < perBackend[0].size(); ++i) {
      INFO(devs[d].name() << " against " << devs[0].name() << ", element " << i);
      REQUIRE(std::bit_cast<uint32_t>(perBackend[d][i]) == std::bit_cast<uint32_t>(perBackend[0][i]));
    }
}

}  // namespace

TEST_CASE("random: the Philox-4x32-10 reference gives Random123's known answers", "[random][reference]") {
  using W = std::array<uint32_t, 4>;
  CHECK(ref::philox4x32_10({0, 0, 0, 0}, {0, 0}) == W{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(ref::philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}) == W{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(ref::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        W{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  // The seed's words are the key (low first), the offset's the counter.
  CHECK(ref::randint4x(0x299f31d0a4093822ull, 0x243f6a88, 0x85a308d3) ==
        ref::philox4x32_10({0x243f6a88, 0x85a308d3, 0, 0}, {0xa4093822, 0x299f31d0}));
  // The uniform conversion: [0, 1), both signs of the i32 folded.
  CHECK(ref::uniform(0) == 0.0f);
  CHECK(ref::uniform(0xffffffffu) == 0.0f);
  CHECK(ref::uniform(0x7fffffffu) == 0x1.fffffep-1f);
  CHECK(ref::uniform(0x80000000u) == 0x1.fffffep-1f);
  CHECK(ref::uniform(1) == 0x1.fffffep-32f);
}

TEST_CASE("random: randint4x, randint and rand give the reference's bits on every backend", "[random][emu]") {
  const std::vector<ts::Device> devs = devices();
  for (int n : {1, 100, 1000}) {
    std::vector<std::vector<float>> randn;
    for (const ts::Device& dev : devs) {
      INFO(dev.name() << ", n = " << n);
      double worst = 0;
      {
        INFO("i32 seed 12345, i32 offsets from 0");
        Outputs o = runAll<ts::Int, ts::Int>(dev, int32_t(12345), int32_t(0), n);
        worst = std::max(worst, checkAgainstReference(
                                    o, 12345, n, [](int i) { return std::pair<uint32_t, uint32_t>(uint32_t(i), 0); }));
        randn.push_back(o.rn);
      }
      {
        // A negative seed is sign-extended (key hi = 0xffffffff); i32
        // offsets near INT32_MAX wrap (as i32 addition does) and the
        // counter's second word stays 0.
        INFO("i32 seed -7, i32 offsets wrapping past INT32_MAX");
        const int32_t base = INT32_MAX - 600;
        Outputs o = runAll<ts::Int, ts::Int>(dev, int32_t(-7), base, n);
        worst = std::max(worst, checkAgainstReference(o, uint64_t(int64_t(-7)), n, [&](int i) {
                           return std::pair<uint32_t, uint32_t>(uint32_t(base) + uint32_t(i), 0);
                         }));
      }
      {
        INFO("i64 seed above INT32_MAX, i64 offsets crossing 2^32");
        const int64_t seed = 0x1234567890ll, base = (int64_t{1} << 32) - 500;
        Outputs o = runAll<ts::Long, ts::Long>(dev, seed, base, n);
        worst = std::max(worst, checkAgainstReference(o, uint64_t(seed), n, [&](int i) {
                           uint64_t off = uint64_t(base + i);
                           return std::pair<uint32_t, uint32_t>(uint32_t(off), uint32_t(off >> 32));
                         }));
      }
      {
        INFO("u64 seed above INT64_MAX, negative i64 offsets");
        const uint64_t seed = 0xfedcba9876543210ull;
        const int64_t base = -int64_t(n) / 2;
        Outputs o = runAll<ts::ULong, ts::Long>(dev, seed, base, n);
        worst = std::max(worst, checkAgainstReference(o, seed, n, [&](int i) {
                           uint64_t off = uint64_t(base + i);
                           return std::pair<uint32_t, uint32_t>(uint32_t(off), uint32_t(off >> 32));
                         }));
      }
      {
        INFO("u32 seed above INT32_MAX (zero-extended), u32 offsets");
        const uint32_t seed = 0xdeadbeefu, base = 0xfffffff0u;
        Outputs o = runAll<ts::UInt, ts::UInt>(dev, seed, base, n);
        worst = std::max(worst, checkAgainstReference(o, seed, n, [&](int i) {
                           return std::pair<uint32_t, uint32_t>(base + uint32_t(i), 0);
                         }));
      }
      INFO("randn's largest relative error: " << worst);
      CHECK(worst < kRandnRelTol);
    }
    sameRandnEverywhere(randn, devs);
  }
}

TEST_CASE("random: literal seeds, i64 and unsigned, are the key's bits", "[random][emu]") {
  const int count = 300;
  auto kern = ts::kernel("philox_literals", [](ts::Ptr<uint32_t> a, ts::Ptr<uint32_t> b, ts::Ptr<uint32_t> c,
                                               ts::Ptr<float> d, ts::Int n) {
    auto i = ts::program_id(0) * kBlock + ts::arange(kBlock);
    auto m = i < n;
    ts::store(a + i, ts::randint(-1, i), m);  // sign-extended: key (ffffffff, ffffffff)
    ts::store(b + i, ts::randint(0x9E3779B97F4A7C15ull, i), m);
    ts::store(c + i, ts::randint(int64_t{1} << 40, i.to(ts::i64) + (int64_t{3} << 32)), m);
    ts::store(d + i, ts::rand(42, i), m);
  });
  for (const ts::Device& dev : devices()) {
    INFO(dev.name());
    ts::CompiledKernel k = ts::compile(kern, dev);
    ts::Buffer a = dev.alloc(ts::DType::U32, count), b = dev.alloc(ts::DType::U32, count);
    ts::Buffer c = dev.alloc(ts::DType::U32, count), d = dev.alloc(ts::DType::F32, count);
    k.launch(ts::Dim3((count + kBlock - 1) / kBlock), a, b, c, d, int32_t(count));
    auto va = a.read<uint32_t>(), vb = b.read<uint32_t>(), vc = c.read<uint32_t>();
    auto vd = d.read<float>();
    for (int i = 0; i < count; ++i) {
      INFO("element " << i);
      REQUIRE(va[size_t(i)] == ref::randint(~uint64_t{0}, uint32_t(i)));
      REQUIRE(vb[size_t(i)] == ref::randint(0x9E3779B97F4A7C15ull, uint32_t(i)));
      REQUIRE(vc[size_t(i)] == ref::randint(uint64_t{1} << 40, uint32_t(i), 3));
      REQUIRE(vd[size_t(i)] == ref::rand(42, uint32_t(i)));
    }
  }
}

TEST_CASE("random: a 2-D tile of offsets draws per element", "[random][emu]") {
  // Offsets r * cols + c of an R x C tile: the same numbers as a flat range.
  const int R = 8, C = 32;
  auto kern = ts::kernel("philox_2d", [](ts::Ptr<float> out, ts::Long seed, ts::Int rows, ts::Int cols) {
    auto r = ts::expand_dims(ts::arange(R), 1);
    auto c = ts::expand_dims(ts::arange(C), 0);
    auto m = (r < rows) & (c < cols);
    auto off = r * cols + c;
    ts::store(out + off, ts::rand(seed, off), m);
  });
  const int rows = 7, cols = 29;
  for (const ts::Device& dev : devices()) {
    INFO(dev.name());
    ts::CompiledKernel k = ts::compile(kern, dev);
    ts::Buffer o = dev.alloc(ts::DType::F32, rows * cols);
    k.launch(ts::Dim3(1), o, int64_t(77), int32_t(rows), int32_t(cols));
    auto v = o.read<float>();
    for (int i = 0; i < rows * cols; ++i) REQUIRE(v[size_t(i)] == ref::rand(77, uint32_t(i)));
  }
}

TEST_CASE("random: a million draws of rand and randn have the right moments", "[random]") {
  // Deterministic (a fixed seed), but a wrong conversion or a broken
  // round shows: each moment must lie within 5 standard errors.
  const int n = 1 << 20;
  const int B = 1024;
  auto kern = ts::kernel("philox_moments", [](ts::Ptr<float> u, ts::Ptr<float> g, ts::Long seed) {
    auto i = ts::program_id(0) * B + ts::arange(B);
    ts::store(u + i, ts::rand(seed, i));
    ts::store(g + i, ts::randn(seed, i));
  });
  ts::Device dev = ts::Device::cpu(testpaths::kAvx2Cpu);
  ts::CompiledKernel k = ts::compile(kern, dev);
  ts::Buffer u = dev.alloc(ts::DType::F32, n), g = dev.alloc(ts::DType::F32, n);
  k.launch(ts::Dim3(n / B), u, g, int64_t(20260101));
  auto vu = u.read<float>(), vg = g.read<float>();
  auto moments = [](const std::vector<float>& v) {
    double s = 0, s2 = 0;
    for (float x : v) s += x;
    const double mean = s / double(v.size());
    for (float x : v) s2 += (x - mean) * (x - mean);
    return std::pair<double, double>(mean, s2 / double(v.size() - 1));
  };
  const double N = n;
  auto [mu, vu2] = moments(vu);
  // U[0, 1): mean 1/2 (sd sqrt(1/12 / N)), variance 1/12 (sd sqrt((1/80 - 1/144) / N)).
  CHECK(std::fabs(mu - 0.5) < 5 * std::sqrt(1.0 / 12 / N));
  CHECK(std::fabs(vu2 - 1.0 / 12) < 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / N));
  CHECK(*std::min_element(vu.begin(), vu.end()) >= 0.0f);
  CHECK(*std::max_element(vu.begin(), vu.end()) < 1.0f);
  // 16 equal bins: chi-square with 15 degrees of freedom below 40 (p < 1e-3).
  std::vector<double> bins(16);
  for (float x : vu) bins[std::min<size_t>(15, size_t(x * 16))] += 1;
  double chi2 = 0;
  for (double c : bins) chi2 += (c - N / 16) * (c - N / 16) / (N / 16);
  CHECK(chi2 < 40);
  // N(0, 1): mean 0 (sd 1/sqrt(N)), variance 1 (sd sqrt(2 / N)); the
  // fraction beyond 2 sigma is 4.55 % (sd sqrt(p(1-p) / N)).
  auto [mg, vg2] = moments(vg);
  CHECK(std::fabs(mg) < 5 / std::sqrt(N));
  CHECK(std::fabs(vg2 - 1) < 5 * std::sqrt(2 / N));
  double tail = 0;
  for (float x : vg) tail += std::fabs(x) > 2;
  const double p = 0.0455003;
  CHECK(std::fabs(tail / N - p) < 5 * std::sqrt(p * (1 - p) / N));
}

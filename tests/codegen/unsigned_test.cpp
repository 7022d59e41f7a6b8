// The unsigned integer types u8, u16, u32 and u64 on every backend (the
// pinned CPU and both emulated GPU vendors) against plain C++ unsigned
// arithmetic: wrapping add/sub/mul/neg, unsigned division and remainder,
// logical right shift, unsigned comparisons and min/max, conversions to and
// from signed integers and floats (zero-extension, saturation to [0, max],
// NaN -> 0), reductions and atomic max with unsigned order, pointer offsets
// above INT32_MAX as u32, and the DSL's rules (no implicit signed/unsigned
// mix, literal ranges).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int kBlock = 64;
const char* const kBackends[] = {"cpu:x86-64-v3", "emu:nvptx:sm_80", "emu:amdgpu:gfx942"};

ts::Device deviceFor(const std::string& backend) {
  if (backend.rfind("cpu:", 0) == 0) return ts::Device::cpu(backend.substr(4));
  return ts::Device::emulator(backend.substr(4));
}

template <typename U>
constexpr ts::DType dtypeOf() {
  return ts::dsl::DTypeOf<U>::value;
}

constexpr int kOps = 16;

/// out[k n + i] = op_k(a[i], b[i]) for the 16 ops below; b is never 0.
template <typename U>
ts::Kernel opsKernel() {
  return ts::kernel("unsigned_ops", [](ts::Ptr<U> out, ts::Ptr<const U> pa, ts::Ptr<const U> pb, ts::Int n) {
    auto i = ts::program_id(0) * kBlock + ts::arange(kBlock);
    auto m = i < n;
    auto a = ts::load(pa + i, m);
    auto b = ts::load(pb + i, m, 1);
    const ts::DType d = dtypeOf<U>();
    const int w = static_cast<int>(sizeof(U) * 8);
    std::vector<ts::Tensor> r = {
        a + b,
        a - b,
        a * b,
        a / b,
        a % b,
        a >> (b % w),
        a << (b % w),
        (a & b) | (a ^ b),
        ts::minimum(a, b),
        ts::maximum(a, b),
        (a < b).to(d),
        (a >= b).to(d),
        -a,
        ts::abs(a),
        a.to(ts::i8).to(d),               // truncate, then sign-extend back
        a.to(ts::f64).to(ts::f32).to(d),  // exact below 2^24, rounded above, saturated back
    };
    for (int k = 0; k < kOps; ++k) ts::store(out + k * n + i, r[static_cast<size_t>(k)], m);
  });
}

template <typename U>
std::vector<U> reference(const std::vector<U>& a, const std::vector<U>& b) {
  const size_t n = a.size();
  std::vector<U> r(kOps * n);
  const unsigned w = sizeof(U) * 8;
  for (size_t i = 0; i < n; ++i) {
    const U x = a[i], y = b[i];
    const U sh = static_cast<U>(y % w);
    float f = static_cast<float>(static_cast<double>(x));
    // float -> U saturates; float(2^w - 1) rounds up to 2^w for u32/u64.
    const long double lim = std::ldexp(1.0L, static_cast<int>(w));
    U fromF = static_cast<long double>(f) >= lim ? std::numeric_limits<U>::max() : static_cast<U>(f);
    const U vals[kOps] = {
        static_cast<U>(x + y),
        static_cast<U>(x - y),
        static_cast<U>(static_cast<std::conditional_t<(sizeof(U) < 4), uint32_t, U>>(x) * y),
        static_cast<U>(x / y),
        static_cast<U>(x % y),
        static_cast<U>(x >> sh),
        static_cast<U>(static_cast<std::conditional_t<(sizeof(U) < 4), uint32_t, U>>(x) << sh),
        static_cast<U>((x & y) | (x ^ y)),
        std::min(x, y),
        std::max(x, y),
        static_cast<U>(x < y),
        static_cast<U>(x >= y),
        static_cast<U>(U(0) - x),
        x,
        static_cast<U>(static_cast<int64_t>(static_cast<int8_t>(x))),
        fromF,
    };
    for (int k = 0; k < kOps; ++k) r[static_cast<size_t>(k) * n + i] = vals[k];
  }
  return r;
}

template <typename U>
void checkOps() {
  const int n = 3 * kBlock + 5;
  std::mt19937_64 rng(sizeof(U));
  std::vector<U> a(n), b(n);
  const U max = std::numeric_limits<U>::max();
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<U>(rng());
    b[i] = static_cast<U>(rng());
    if (i % 7 == 0) b[i] = static_cast<U>(b[i] % 13);  // small divisors and shifts
    if (b[i] == 0) b[i] = 1;
  }
  // The edges: 0, 1, the top bit alone, all ones.
  const U top = static_cast<U>(U(1) << (sizeof(U) * 8 - 1));
  const U edges[] = {U(0), U(1), top, max, static_cast<U>(top - 1)};
  for (int k = 0; k < 5; ++k)
    for (int j = 0; j < 5; ++j) {
      a[static_cast<size_t>(k * 5 + j)] = edges[k];
      b[static_cast<size_t>(k * 5 + j)] = edges[j] == 0 ? U(1) : edges[j];
    }
  std::vector<U> want = reference(a, b);
  for (const char* backend : kBackends) {
    INFO(backend << " " << ts::name(dtypeOf<U>()));
    ts::Device dev = deviceFor(backend);
    ts::CompiledKernel k = ts::compile(opsKernel<U>(), dev);
    ts::Buffer out = dev.alloc(dtypeOf<U>(), static_cast<size_t>(kOps * n));
    k.launch(ts::Dim3((n + kBlock - 1) / kBlock), out, dev.upload(dtypeOf<U>(), a), dev.upload(dtypeOf<U>(), b),
             int32_t(n));
    std::vector<U> got = out.read<U>();
    for (int op = 0; op < kOps; ++op) {
      size_t bad = 0, first = 0;
      for (int i = 0; i < n; ++i) {
        size_t at = static_cast<size_t>(op * n + i);
        if (got[at] != want[at] && bad++ == 0) first = static_cast<size_t>(i);
      }
      INFO("op " << op << ": first mismatch at a = " << uint64_t(a[first]) << ", b = " << uint64_t(b[first]) << ": got "
                 << uint64_t(got[static_cast<size_t>(op * n) + first]) << ", want "
                 << uint64_t(want[static_cast<size_t>(op * n) + first]));
      CHECK(bad == 0);
    }
  }
}

}  // namespace

TEST_CASE("unsigned arithmetic, shifts, comparisons and conversions on every backend", "[codegen][unsigned][emu]") {
  checkOps<uint8_t>();
  checkOps<uint16_t>();
  checkOps<uint32_t>();
  checkOps<uint64_t>();
}

TEST_CASE("unsigned conversions: zero-extension, float saturation, NaN", "[codegen][unsigned][emu]") {
  auto k = ts::kernel("conv", [](ts::Ptr<uint32_t> u, ts::Ptr<int64_t> wide, ts::Ptr<float> f, ts::Ptr<int32_t> s,
                                 ts::Ptr<const float> x, ts::Ptr<const uint32_t> v, ts::Int n) {
    auto i = ts::arange(kBlock);
    auto m = i < n;
    ts::store(u + i, ts::load(x + i, m).to(ts::u32), m);       // saturating, NaN -> 0
    ts::store(wide + i, ts::load(v + i, m).to(ts::i64), m);    // zero-extends
    ts::store(f + i, ts::load(v + i, m).to(ts::f32), m);       // unsigned -> float
    ts::store(s + i, ts::load(v + i, m).bitcast(ts::i32), m);  // the same bits
  });
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-1.0f, -0.0f, 0.5f, 1.5f, 4294967040.0f, 4294967296.0f, 1e30f, inf, -inf, NAN, 3e9f};
  std::vector<uint32_t> v = {0u,   1u,          0x7fffffffu, 0x80000000u, 0xffffffffu, 3000000000u,
                             123u, 0xfffffffeu, 16777217u,   5u,          0u};
  const int n = static_cast<int>(x.size());
  for (const char* backend : kBackends) {
    INFO(backend);
    ts::Device dev = deviceFor(backend);
    ts::CompiledKernel ck = ts::compile(k, dev);
    ts::Buffer u = dev.alloc(ts::u32, n), w = dev.alloc(ts::i64, n), f = dev.alloc(ts::f32, n),
               s = dev.alloc(ts::i32, n);
    ck.launch(ts::Dim3(1), u, w, f, s, dev.upload(ts::f32, x), dev.upload(ts::u32, v), int32_t(n));
    std::vector<uint32_t> uv = u.read<uint32_t>();
    std::vector<int64_t> wv = w.read<int64_t>();
    std::vector<float> fv = f.read<float>();
    std::vector<int32_t> sv = s.read<int32_t>();
    const uint32_t wantU[] = {0u, 0u, 0u, 1u, 4294967040u, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0u, 0u, 3000000000u};
    for (int i = 0; i < n; ++i) {
      INFO("i = " << i);
      CHECK(uv[i] == wantU[i]);
      CHECK(wv[i] == static_cast<int64_t>(v[i]));
      CHECK(fv[i] == static_cast<float>(v[i]));
      CHECK(sv[i] == static_cast<int32_t>(v[i]));
    }
  }
}

TEST_CASE("unsigned reductions, atomic max and u32 pointer offsets", "[codegen][unsigned][emu]") {
  auto k = ts::kernel("ured", [](ts::Ptr<uint32_t> mx, ts::Ptr<uint32_t> mn, ts::Ptr<uint32_t> sum, ts::Ptr<int32_t> am,
                                 ts::Ptr<uint32_t> amax, ts::Ptr<const uint32_t> in) {
    auto v = ts::load(in + ts::arange(kBlock));
    ts::store(mx, ts::max(v, 0));
    ts::store(mn, ts::min(v, 0));
    ts::store(sum, ts::sum(v, 0));
    ts::store(am, ts::argmax(v, 0));
    ts::atomic_max(amax + ts::arange(kBlock) * 0, v);
  });
  std::vector<uint32_t> in(kBlock);
  std::mt19937 rng(3);
  for (auto& x : in) x = rng() % 1000;
  in[17] = 0xfffffff0u;  // the maximum only when compared unsigned
  in[40] = 0x80000000u;
  uint64_t s = 0;
  for (auto x : in) s += x;
  for (const char* backend : kBackends) {
    INFO(backend);
    ts::Device dev = deviceFor(backend);
    ts::CompiledKernel ck = ts::compile(k, dev);
    std::vector<ts::Buffer> outs;
    for (int j = 0; j < 5; ++j) outs.push_back(dev.upload(j == 3 ? ts::i32 : ts::u32, std::vector<uint32_t>{5u}));
    ck.launch(ts::Dim3(1), outs[0], outs[1], outs[2], outs[3], outs[4], dev.upload(ts::u32, in));
    CHECK(outs[0].read<uint32_t>()[0] == 0xfffffff0u);
    CHECK(outs[1].read<uint32_t>()[0] == *std::min_element(in.begin(), in.end()));
    CHECK(outs[2].read<uint32_t>()[0] == static_cast<uint32_t>(s));
    CHECK(outs[3].read<int32_t>()[0] == 17);
    CHECK(outs[4].read<uint32_t>()[0] == 0xfffffff0u);
  }
  // A u32 offset above INT32_MAX is a positive element offset: (base - 2^31
  // + 2^31 + i) on a pointer moved back first.
  auto off = ts::kernel("uoff", [](ts::Ptr<float> out, ts::Ptr<const float> in, ts::UInt big) {
    auto i = ts::arange(kBlock);
    auto p = in - 2147483648LL;                             // i64 offset back by 2^31 elements (no access)
    ts::store(out + i, ts::load(p + big + i.to(ts::u32)));  // big = 2^31: u32, zero-extended
  });
  std::vector<float> src(kBlock);
  for (int i = 0; i < kBlock; ++i) src[i] = static_cast<float>(i) * 0.5f;
  for (const char* backend : kBackends) {
    INFO(backend);
    ts::Device dev = deviceFor(backend);
    ts::CompiledKernel ck = ts::compile(off, dev);
    ts::Buffer o = dev.alloc(ts::f32, kBlock);
    ck.launch(ts::Dim3(1), o, dev.upload(ts::f32, src), uint32_t{2147483648u});
    CHECK(o.read<float>() == src);
  }
}

TEST_CASE("the DSL keeps signed and unsigned apart and checks unsigned literals", "[dsl][unsigned]") {
  auto traceError = [](auto body) -> std::string {
    try {
      ts::kernel("bad", body);
    } catch (const ts::DslError& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(traceError([](ts::Ptr<float>) { ts::arange(4).to(ts::u32) + ts::arange(4); }),
             Catch::Contains("cannot mix signed i32 and unsigned u32 operands"));
  CHECK_THAT(traceError([](ts::Ptr<float>) { ts::arange(4).to(ts::u8) + 256; }),
             Catch::Contains("integer literal 256 does not fit the operand type u8"));
  CHECK_THAT(traceError([](ts::Ptr<float>) { ts::arange(4).to(ts::u32) + -1; }),
             Catch::Contains("integer literal -1 does not fit the operand type u32"));
  CHECK_THAT(traceError([](ts::Ptr<float>) { ts::arange(4).to(ts::i64) + 0xffffffffffffffffull; }),
             Catch::Contains("integer literal 18446744073709551615 does not fit the operand type i64"));
  // Literals above INT32_MAX (u32) and INT64_MAX (u64) are fine next to unsigned handles.
  auto k = ts::kernel("ok", [](ts::Ptr<uint64_t> out) {
    auto x = ts::arange(4).to(ts::u32) * 0xcd9e8d57u;
    ts::store(out + ts::arange(4), x.to(ts::u64) ^ 0xd2511f53d2511f53ull);
  });
  CHECK(k.text().find("u64") != std::string::npos);
}

// The atomics of IR.h ("Atomics") on every backend (the pinned CPU paths and
// the emulated NVIDIA, AMD wave64 and wave32 GPUs) against plain C++:
//  * every atomic_rmw kind on i32, u32, i64, f32 and f64 with many programs
//    and lanes contending for a few addresses: the final values against a
//    sequential fold, and the old values returned against what atomicity
//    implies (xchg and add hand out a permutation of the values a sequential
//    order would have seen);
//  * atomic_cas: exactly one program claims each slot, float compares by
//    bits (-0 and +0 differ, a NaN matches its own bits), masked tiles;
//  * fence and acq_rel: the last program to arrive (counted by an atomic)
//    sums the partials every program released, the pattern of stream-K and
//    "threadfence" reductions;
//  * the DSL's errors for kinds and orders that mean nothing.
// The orders and scopes reaching the GPU code are checked in
// tests/lit/gpu/atomics.tir.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include <unistd.h>

#include "../../codegen/gpu/GpuCompile.h"
#include "../cpu_paths.h"

namespace ts = tessera;
using ts::ir::AtomicKind;

namespace {

constexpr int kBlock = 64;
constexpr int kSlots = 7;

template <typename T>
constexpr ts::DType dtypeOf() {
  return ts::dsl::DTypeOf<T>::value;
}

/// olds[i] = atomic_<kind>(slots + i % kSlots, vals[i]) for i < n.
template <typename T>
ts::Kernel rmwKernel(AtomicKind kind) {
  return ts::kernel(std::string("rmw_") + ts::ir::name(kind),
                    [=](ts::Ptr<T> slots, ts::Ptr<T> olds, ts::Ptr<const T> vals, ts::Int n) {
                      auto i = ts::program_id(0) * kBlock + ts::arange(kBlock);
                      auto m = i < n;
                      auto v = ts::load(vals + i, m);
                      auto p = slots + i % kSlots;
                      ts::Tensor old;
                      switch (kind) {
                        case AtomicKind::Add: old = ts::atomic_add(p, v, m); break;
                        case AtomicKind::Min: old = ts::atomic_min(p, v, m); break;
                        case AtomicKind::Max: old = ts::atomic_max(p, v, m); break;
                        case AtomicKind::And: old = ts::atomic_and(p, v, m); break;
                        case AtomicKind::Or: old = ts::atomic_or(p, v, m); break;
                        case AtomicKind::Xor: old = ts::atomic_xor(p, v, m); break;
                        case AtomicKind::Xchg: old = ts::atomic_xchg(p, v, m); break;
                      }
                      ts::store(olds + i, old, m);
                    });
}

template <typename T>
T fold(AtomicKind kind, T a, T b) {
  switch (kind) {
    case AtomicKind::Add: return static_cast<T>(a + b);
    case AtomicKind::Min: return std::min(a, b);
    case AtomicKind::Max: return std::max(a, b);
    case AtomicKind::Xchg: return b;
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    if (kind == AtomicKind::And) return a & b;
    if (kind == AtomicKind::Or) return a | b;
    return a ^ b;
  }
  return a;
}

/// Values for `kind`: small positive integers or quarters for add (every
/// sum exact, every partial sum distinct), wide bit patterns for the bitwise
/// kinds, signed spreads for min/max/xchg (distinct, so the permutation check
/// of xchg is meaningful).
template <typename T>
std::vector<T> valuesFor(AtomicKind kind, int n, std::mt19937& rng) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    T x;
    if (kind == AtomicKind::Add) {
      x = std::is_integral_v<T> ? static_cast<T>(1 + rng() % 9)
                                : static_cast<T>(static_cast<double>(1 + rng() % 31) / 4);
    } else if constexpr (std::is_integral_v<T>) {
      if (kind == AtomicKind::And || kind == AtomicKind::Or || kind == AtomicKind::Xor)
        x = static_cast<T>((static_cast<uint64_t>(rng()) << 32) | rng());
      else
        x = static_cast<T>(static_cast<int64_t>(i * 37 % 1009) - (std::is_signed_v<T> ? 500 : 0));
      if (kind == AtomicKind::And) x = static_cast<T>(x | (x >> 1) | (x << 1));  // keep some bits set
    } else {
      x = static_cast<T>((i * 37 % 1009) - 500) / 8;
    }
    v[static_cast<size_t>(i)] = x;
  }
  return v;
}

template <typename T>
void checkKind(AtomicKind kind, const ts::Device& dev) {
  INFO("kind " << ts::ir::name(kind) << " on " << ts::name(dtypeOf<T>()));
  const int n = 300;  // 5 programs, the last one partly masked off
  const int programs = (n + kBlock - 1) / kBlock;
  std::mt19937 rng(11 + static_cast<unsigned>(kind));
  std::vector<T> vals = valuesFor<T>(kind, n, rng);
  std::vector<T> init(kSlots);
  for (int s = 0; s < kSlots; ++s) {
    init[static_cast<size_t>(s)] = static_cast<T>(s * 3);
    if constexpr (std::is_integral_v<T>)
      if (kind == AtomicKind::And) init[static_cast<size_t>(s)] = static_cast<T>(~T(0));
  }
  ts::CompiledKernel ck = ts::compile(rmwKernel<T>(kind), dev);
  ts::Buffer slots = dev.upload(dtypeOf<T>(), init);
  ts::Buffer olds = dev.upload(dtypeOf<T>(), std::vector<T>(kBlock * programs, T(77)));
  ck.launch(ts::Dim3(programs), slots, olds, dev.upload(dtypeOf<T>(), vals), n);
  std::vector<T> fin = slots.read<T>(), old = olds.read<T>();
  for (int s = 0; s < kSlots; ++s) {
    INFO("slot " << s);
    T want = init[static_cast<size_t>(s)];
    std::vector<T> in, out;  // values going in; old values coming out
    for (int i = s; i < n; i += kSlots) {
      want = fold(kind, want, vals[static_cast<size_t>(i)]);
      in.push_back(vals[static_cast<size_t>(i)]);
      out.push_back(old[static_cast<size_t>(i)]);
    }
    // (The last exchange wins, in whatever order they ran.)
    if (kind != AtomicKind::Xchg) CHECK(fin[static_cast<size_t>(s)] == want);
    if (kind == AtomicKind::Xchg) {
      // Some sequential order: the olds and the final value are the initial
      // value and the values, each exactly once.
      in.push_back(init[static_cast<size_t>(s)]);
      out.push_back(fin[static_cast<size_t>(s)]);
      std::sort(in.begin(), in.end());
      std::sort(out.begin(), out.end());
      CHECK(in == out);
    } else if (kind == AtomicKind::Add) {
      // All values positive: the olds in increasing order are the running
      // sums of some order of the values, starting at the initial value.
      std::sort(out.begin(), out.end());
      CHECK(out.front() == init[static_cast<size_t>(s)]);
      std::vector<T> steps;
      for (size_t k = 0; k + 1 < out.size(); ++k) steps.push_back(static_cast<T>(out[k + 1] - out[k]));
      steps.push_back(static_cast<T>(fin[static_cast<size_t>(s)] - out.back()));
      std::sort(steps.begin(), steps.end());
      std::sort(in.begin(), in.end());
      CHECK(steps == in);
    }
  }
  for (int i = n; i < kBlock * programs; ++i) CHECK(old[static_cast<size_t>(i)] == T(77));  // masked off: no store
}

template <typename T>
void checkAllKinds(const ts::Device& dev) {
  for (AtomicKind k : {AtomicKind::Add, AtomicKind::Min, AtomicKind::Max, AtomicKind::Xchg}) checkKind<T>(k, dev);
  if constexpr (std::is_integral_v<T>)
    for (AtomicKind k : {AtomicKind::And, AtomicKind::Or, AtomicKind::Xor}) checkKind<T>(k, dev);
}

}  // namespace

TEST_CASE("atomics: every kind, integers and floats, contended, on every backend", "[codegen][atomics][emu]") {
  for (const ts::Device& dev : testpaths::cpuPathsAndEmulators()) {
    INFO(dev.name());
    checkAllKinds<int32_t>(dev);
    checkAllKinds<uint32_t>(dev);
    checkAllKinds<int64_t>(dev);
    checkAllKinds<float>(dev);
    checkAllKinds<double>(dev);
  }
}

TEST_CASE("atomics: min and max order -0 below +0 and propagate NaN", "[codegen][atomics][emu]") {
  auto k = ts::kernel("minmax_special", [](ts::Ptr<float> mn, ts::Ptr<float> mx, ts::Ptr<const float> in) {
    auto i = ts::arange(4);
    auto v = ts::load(in + i);
    ts::atomic_min(mn + i, v);
    ts::atomic_max(mx + i, v);
  });
  const float nan = std::nanf("");
  // slot:        0     1     2    3
  std::vector<float> init{+0.0f, -0.0f, 1.0f, nan};
  std::vector<float> in{-0.0f, +0.0f, nan, 2.0f};
  for (const ts::Device& dev : testpaths::cpuPathsAndEmulators()) {
    INFO(dev.name());
    ts::CompiledKernel ck = ts::compile(k, dev);
    ts::Buffer mn = dev.upload(ts::f32, init), mx = dev.upload(ts::f32, init);
    ck.launch(ts::Dim3(1), mn, mx, dev.upload(ts::f32, in));
    std::vector<float> a = mn.read<float>(), b = mx.read<float>();
    CHECK((a[0] == 0.0f && std::signbit(a[0])));   // min(+0, -0) = -0
    CHECK((b[0] == 0.0f && !std::signbit(b[0])));  // max(+0, -0) = +0
    CHECK((a[1] == 0.0f && std::signbit(a[1])));
    CHECK((b[1] == 0.0f && !std::signbit(b[1])));
    CHECK(std::isnan(a[2]));
    CHECK(std::isnan(b[2]));
    CHECK(std::isnan(a[3]));
    CHECK(std::isnan(b[3]));
  }
}

TEST_CASE("atomics: compare-and-swap claims each slot once, compares floats by bits, masks tiles",
          "[codegen][atomics][emu]") {
  constexpr int kPrograms = 37, kClaimSlots = 4;
  auto claim = ts::kernel("cas_claim", [](ts::Ptr<int32_t> slots, ts::Ptr<int32_t> olds) {
    auto pid = ts::program_id(0);
    ts::store(olds + pid, ts::atomic_cas(slots + pid % kClaimSlots, -1, pid));
  });
  auto bits = ts::kernel("cas_bits", [](ts::Ptr<float> f, ts::Ptr<float> olds, ts::Ptr<const float> cmp,
                                        ts::Ptr<int32_t> t, ts::Ptr<int32_t> tolds) {
    auto i = ts::arange(4);
    ts::store(olds + i, ts::atomic_cas(f + i, ts::load(cmp + i), 5.0f));
    // A tile: element j holds j for even j and -j for odd j; swapping where
    // it still holds j, with lanes j % 3 == 0 masked off.
    auto j = ts::arange(kBlock);
    ts::store(tolds + j, ts::atomic_cas(t + j, j, j + 1000, j % 3 != 0, ts::MemOrder::Relaxed, ts::MemScope::Program));
  });
  const float nan = std::bit_cast<float>(0x7fc01234u);
  for (const ts::Device& dev : testpaths::cpuPathsAndEmulators()) {
    INFO(dev.name());
    {
      ts::CompiledKernel ck = ts::compile(claim, dev);
      ts::Buffer slots = dev.upload(ts::i32, std::vector<int32_t>(kClaimSlots, -1));
      ts::Buffer olds = dev.alloc(ts::i32, kPrograms);
      ck.launch(ts::Dim3(kPrograms), slots, olds);
      std::vector<int32_t> s = slots.read<int32_t>(), o = olds.read<int32_t>();
      for (int slot = 0; slot < kClaimSlots; ++slot) {
        INFO("slot " << slot);
        const int32_t winner = s[static_cast<size_t>(slot)];
        REQUIRE(winner >= 0);
        CHECK(winner % kClaimSlots == slot);
        for (int p = slot; p < kPrograms; p += kClaimSlots)
          CHECK(o[static_cast<size_t>(p)] == (p == winner ? -1 : winner));
      }
    }
    {
      ts::CompiledKernel ck = ts::compile(bits, dev);
      // 0: -0 vs cmp +0 fails; 1: -0 vs -0 swaps; 2: NaN vs its own bits
      // swaps; 3: 1 vs 2 fails.
      std::vector<float> init{-0.0f, -0.0f, nan, 1.0f}, cmp{+0.0f, -0.0f, nan, 2.0f};
      std::vector<int32_t> t(kBlock);
      for (int j = 0; j < kBlock; ++j) t[static_cast<size_t>(j)] = j % 2 ? -j : j;
      ts::Buffer f = dev.upload(ts::f32, init), olds = dev.alloc(ts::f32, 4);
      ts::Buffer tb = dev.upload(ts::i32, t), tolds = dev.alloc(ts::i32, kBlock);
      ck.launch(ts::Dim3(1), f, olds, dev.upload(ts::f32, cmp), tb, tolds);
      std::vector<float> fv = f.read<float>(), ov = olds.read<float>();
      CHECK((fv[0] == 0.0f && std::signbit(fv[0])));
      CHECK(fv[1] == 5.0f);
      CHECK(fv[2] == 5.0f);
      CHECK(fv[3] == 1.0f);
      CHECK(std::bit_cast<uint32_t>(ov[2]) == 0x7fc01234u);
      CHECK((ov[0] == 0.0f && std::signbit(ov[0])));
      std::vector<int32_t> tv = tb.read<int32_t>(), to = tolds.read<int32_t>();
      for (int j = 0; j < kBlock; ++j) {
        INFO("element " << j);
        const bool on = j % 3 != 0, match = j % 2 == 0;
        CHECK(tv[static_cast<size_t>(j)] == (on && match ? j + 1000 : t[static_cast<size_t>(j)]));
        CHECK(to[static_cast<size_t>(j)] == (on ? t[static_cast<size_t>(j)] : 0));
      }
    }
  }
}

TEST_CASE("atomics: the last program sums what every program released (fence, acq_rel counter)",
          "[codegen][atomics][emu]") {
  constexpr int kMaxPrograms = 64;
  auto k = ts::kernel("last_block_sum", [](ts::Ptr<int64_t> out, ts::Ptr<int64_t> partials, ts::Ptr<int32_t> counter,
                                           ts::Ptr<const int32_t> in, ts::Int n) {
    auto pid = ts::program_id(0);
    auto i = pid * kBlock + ts::arange(kBlock);
    ts::store(partials + pid, ts::sum(ts::load(in + i, i < n).to(ts::i64), 0));
    ts::fence(ts::MemOrder::Release);
    auto arrived = ts::atomic_add(counter, 1, {}, ts::MemOrder::AcqRel);
    ts::if_else(arrived == ts::num_programs(0) - 1, [&] {
      auto j = ts::arange(kMaxPrograms);
      ts::store(out, ts::sum(ts::load(partials + j, j < ts::num_programs(0)), 0));
      ts::store(counter, 0);  // ready for the next launch
    });
  });
  std::vector<int32_t> in(kBlock * kMaxPrograms - 29);
  std::mt19937 rng(5);
  for (auto& x : in) x = static_cast<int32_t>(rng() % 2000001) - 1000000;
  const int n = static_cast<int>(in.size());
  const int programs = (n + kBlock - 1) / kBlock;
  int64_t want = 0;
  for (int32_t x : in) want += x;
  for (const ts::Device& dev : testpaths::cpuPathsAndEmulators()) {
    INFO(dev.name());
    ts::CompiledKernel ck = ts::compile(k, dev);
    ts::Buffer input = dev.upload(ts::i32, in), counter = dev.upload(ts::i32, std::vector<int32_t>{0});
    ts::Buffer partials = dev.alloc(ts::i64, kMaxPrograms);
    for (int rep = 0; rep < 8; ++rep) {
      INFO("launch " << rep);
      ts::Buffer out = dev.upload(ts::i64, std::vector<int64_t>{-1});
      ck.launch(ts::Dim3(programs), out, partials, counter, input, n);
      CHECK(out.read<int64_t>()[0] == want);
      CHECK(counter.read<int32_t>()[0] == 0);
    }
  }
}

TEST_CASE("atomics: every kind assembles with ptxas and links with LLD, without spills", "[codegen][atomics][gpu]") {
  std::vector<ts::Kernel> kernels;
  for (AtomicKind k : {AtomicKind::Add, AtomicKind::Min, AtomicKind::Max, AtomicKind::Xchg}) {
    kernels.push_back(rmwKernel<float>(k));
    kernels.push_back(rmwKernel<double>(k));
  }
  for (AtomicKind k : {AtomicKind::And, AtomicKind::Or, AtomicKind::Xor, AtomicKind::Min})
    kernels.push_back(rmwKernel<uint32_t>(k));
  kernels.push_back(rmwKernel<int64_t>(AtomicKind::Max));
  const bool ptxas = access("/usr/local/cuda/bin/ptxas", X_OK) == 0 || system("command -v ptxas >/dev/null 2>&1") == 0;
  if (!ptxas) WARN("SKIP: ptxas (CUDA toolkit) not found: the NVIDIA targets are only compiled to PTX");
  for (const char* target : {"nvptx:sm_80", "nvptx:sm_90a", "amdgpu:gfx90a", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    for (const ts::Kernel& k : kernels) {
      INFO(target << " " << k.name());
      ts::CompiledKernel ck = ts::compile(k, ts::Target::parse(target));  // AMDGPU: linked by LLD
      if (std::string(target).rfind("nvptx", 0) == 0 && !ptxas) continue;
      ts::codegen::GpuResources r = ts::codegen::gpuResources(ck.artifact());
      INFO(r.text);
      CHECK(r.spillBytes == 0);
    }
  }
}

TEST_CASE("atomics: kinds and orders that mean nothing are errors at the user's line", "[dsl][atomics]") {
  // Traced outside the CHECK macros, so that source lines are the lines
  // written here.
  auto error = [](const std::function<void()>& trace) -> std::string {
    try {
      trace();
    } catch (const ts::Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  int line = 0;
  auto at = [&] { return Catch::Contains("atomics_test.cpp:" + std::to_string(line)); };
  std::string e = error([&] {
    ts::kernel("and_f32", [&](ts::Ptr<float> p) {
      line = __LINE__ + 1;
      ts::atomic_and(p, 1.0f);
    });
  });
  CHECK_THAT(e, at() && Catch::Contains("atomic_and: not defined on f32"));
  e = error([&] {
    ts::kernel("relaxed_fence", [&](ts::Ptr<float> p) {
      line = __LINE__ + 1;
      ts::fence(ts::MemOrder::Relaxed);
    });
  });
  CHECK_THAT(e, at() && Catch::Contains("a relaxed fence orders nothing"));
  e = error([&] {
    ts::kernel("cas_mixed", [&](ts::Ptr<int32_t> p, ts::Ptr<const float> f) {
      line = __LINE__ + 1;
      ts::atomic_cas(p, ts::load(f), 1);
    });
  });
  CHECK_THAT(e, at() && Catch::Contains("atomic_cas (cmp): value of type f32 through a pointer to i32"));
  e = error([&] {
    ts::kernel("xor_readonly", [&](ts::Ptr<const int32_t> p) {
      line = __LINE__ + 1;
      ts::atomic_xor(p, 1);
    });
  });
  CHECK_THAT(e, at() && Catch::Contains("atomic_xor: pointer derived from a Ptr<const T> parameter is read-only"));
}

// CPU backend fusion rules: loads sunk into their consumer's chunk loop,
// cheap values recomputed per consumer, values materialised inside the loop
// of the reduction that first reads them. Each case checks the program-order
// semantics that the fusion must keep, against plain C++.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "cpu_test_util.h"

using namespace cputest;

namespace {
std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) * scale + 0.25f;
  return v;
}
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("cpu fusion: a load is not moved past a store to the same buffer", "[codegen][cpu][fusion]") {
  // x = load(p); store(p, 0); store(q, x + 1): q must get the OLD p.
  for (int64_t n : {5, 64, 1000}) {
    for (const std::string& isa : runnableIsas()) {
      const int64_t B = 1024;
      K k("load_store_use");
      Value* p = k.arg(ptr(DType::F32), "p");
      Value* q = k.arg(ptr(DType::F32), "q");
      Value* len = k.arg(i32(), "n");
      Value* offs = k.b.arange(0, B);
      Value* mask = k.b.cmp("lt", offs, k.b.splat(len, {B}));
      Value* x = k.b.load(k.at(p, offs), mask);
      k.b.store(k.at(p, offs), k.b.splat(k.cf(0.0), {B}), mask);
      k.b.store(k.at(q, offs), k.b.binary(OpCode::Add, x, k.b.splat(k.cf(1.0), {B})), mask);
      auto a = build(k, isa);
      std::vector<float> pv = ramp(n, 3.0f), qv(static_cast<size_t>(n), -7.0f), old = pv;
      float* pp = pv.data();
      float* pq = qv.data();
      int32_t ni = static_cast<int32_t>(n);
      run(*a, {&pp, &pq, &ni});
      INFO("n " << n << " isa " << isa);
      for (int64_t i = 0; i < n; ++i) {
        REQUIRE(pv[size_t(i)] == 0.0f);
        REQUIRE(qv[size_t(i)] == old[size_t(i)] + 1.0f);
      }
    }
  }
}

TEST_CASE("cpu fusion: a reduction does not read a value past a store", "[codegen][cpu][fusion]") {
  // x = load(p); store(p, 0); s = sum(x): s is the sum of the OLD p.
  const int64_t B = 256;
  for (const std::string& isa : runnableIsas()) {
    K k("load_store_reduce");
    Value* p = k.arg(ptr(DType::F32), "p");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* offs = k.b.arange(0, B);
    Value* x = k.b.load(k.at(p, offs));
    k.b.store(k.at(p, offs), k.b.splat(k.cf(0.0), {B}));
    k.b.store(out, k.b.reduce("sum", x, 0));
    auto a = build(k, isa);
    std::vector<float> pv = ramp(B, 2.0f);
    double want = std::accumulate(pv.begin(), pv.end(), 0.0);
    float got = -1;
    float* pp = pv.data();
    float* po = &got;
    run(*a, {&pp, &po});
    INFO("isa " << isa);
    REQUIRE(std::fabs(got - want) <= 1e-4 * (1 + std::fabs(want)));
    for (float v : pv) REQUIRE(v == 0.0f);
  }
}

TEST_CASE("cpu fusion: a store whose addresses overlap a fused load keeps program order", "[codegen][cpu][fusion]") {
  // store(p + 1 + i, load(p + i)): the whole tile is read before any of it is
  // written, so p shifts by one element (a chunk-by-chunk fusion would
  // propagate p[0] through every chunk boundary).
  for (int64_t n : {9, 64, 1000}) {
    for (const std::string& isa : runnableIsas()) {
      const int64_t B = 1024;
      K k("shift");
      Value* p = k.arg(ptr(DType::F32), "p");
      Value* len = k.arg(i32(), "n");
      Value* offs = k.b.arange(0, B);
      Value* mask = k.b.cmp("lt", offs, k.b.splat(k.b.binary(OpCode::Sub, len, k.ci(1)), {B}));
      Value* x = k.b.load(k.at(p, offs), mask);
      Value* p1 = k.b.ptrAdd(p, k.ci(1));
      k.b.store(k.at(p1, offs), x, mask);
      auto a = build(k, isa);
      std::vector<float> pv = ramp(n, 5.0f), old = pv;
      float* pp = pv.data();
      int32_t ni = static_cast<int32_t>(n);
      run(*a, {&pp, &ni});
      INFO("n " << n << " isa " << isa);
      REQUIRE(pv[0] == old[0]);
      for (int64_t i = 1; i < n; ++i) REQUIRE(pv[size_t(i)] == old[size_t(i - 1)]);
    }
  }
}

TEST_CASE("cpu fusion: vector add is one loop, correct in place and out of place", "[codegen][cpu][fusion]") {
  // offs = pid*B + arange has four uses and the mask three: both are
  // recomputed per consumer, both loads are sunk into the store's loop.
  const int64_t B = 256;
  for (const std::string& isa : runnableIsas()) {
    K k("vadd");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* x = k.arg(ptr(DType::F32), "x");
    Value* y = k.arg(ptr(DType::F32), "y");
    Value* len = k.arg(i32(), "n");
    Value* pid = k.b.programId(0);
    Value* offs = k.b.binary(OpCode::Add, k.b.splat(k.b.binary(OpCode::Mul, pid, k.ci(B)), {B}), k.b.arange(0, B));
    Value* mask = k.b.cmp("lt", offs, k.b.splat(len, {B}));
    Value* s = k.b.binary(OpCode::Add, k.b.load(k.at(x, offs), mask), k.b.load(k.at(y, offs), mask));
    k.b.store(k.at(out, offs), s, mask);
    auto a = build(k, isa);
    // No tile is stored on the stack on the fused path: the only arrays are
    // those of the overlap fallback (one per load).
    CHECK(count(a->dumps.llvm, "alloca [") == 2);
    CHECK(count(a->dumps.llvm, "store.fused") >= 1);
    for (int64_t n : {1, 255, 256, 1000}) {
      int32_t grid = static_cast<int32_t>((n + B - 1) / B);
      int32_t ni = static_cast<int32_t>(n);
      std::vector<float> xv = ramp(n, 1.0f), yv = ramp(n, -2.0f), ov(size_t(n), 0.0f);
      float *px = xv.data(), *py = yv.data(), *po = ov.data();
      run(*a, {&po, &px, &py, &ni}, {grid, 1, 1});
      INFO("n " << n << " isa " << isa);
      for (int64_t i = 0; i < n; ++i) REQUIRE(ov[size_t(i)] == xv[size_t(i)] + yv[size_t(i)]);
      // In place (out aliases x): the overlap test takes the unfused path.
      std::vector<float> x0 = xv;
      po = xv.data();
      run(*a, {&po, &px, &py, &ni}, {grid, 1, 1});
      for (int64_t i = 0; i < n; ++i) REQUIRE(xv[size_t(i)] == x0[size_t(i)] + yv[size_t(i)]);
    }
  }
}

TEST_CASE("cpu fusion: identical load and store addresses need no overlap test", "[codegen][cpu][fusion]") {
  const int64_t B = 512;
  K k("scale_in_place");
  Value* p = k.arg(ptr(DType::F32), "p");
  Value* offs = k.b.arange(0, B);
  Value* x = k.b.load(k.at(p, offs));
  k.b.store(k.at(p, offs), k.b.binary(OpCode::Mul, x, k.b.splat(k.cf(3.0), {B})));
  auto a = build(k);
  CHECK(count(a->dumps.llvm, "alloca [") == 0);
  CHECK(count(a->dumps.llvm, "store.overlap") == 0);
  std::vector<float> pv = ramp(B, 1.5f), old = pv;
  float* pp = pv.data();
  run(*a, {&pp});
  for (int64_t i = 0; i < B; ++i) REQUIRE(pv[size_t(i)] == old[size_t(i)] * 3.0f);
}

TEST_CASE("cpu fusion: a value first read by a reduction is materialised in its loop", "[codegen][cpu][fusion]") {
  // Softmax-shaped: x feeds a max and then exp(x - max) feeds a sum and the
  // store. x and e are each written once, inside the loop of the reduction
  // that reads them first; masked-off lanes load -inf.
  const int64_t B = 128;
  for (int64_t n : {1, 100, 128}) {
    for (const std::string& isa : runnableIsas()) {
      K k("softmax_row");
      Value* out = k.arg(ptr(DType::F32), "out");
      Value* in = k.arg(ptr(DType::F32), "in");
      Value* len = k.arg(i32(), "n");
      Value* offs = k.b.arange(0, B);
      Value* mask = k.b.cmp("lt", offs, k.b.splat(len, {B}));
      Value* x = k.b.load(k.at(in, offs), mask, k.b.splat(k.cf(-INFINITY), {B}));
      Value* e = k.b.unary(OpCode::Exp, k.b.binary(OpCode::Sub, x, k.b.splat(k.b.reduce("max", x, 0), {B})));
      Value* y = k.b.binary(OpCode::Div, e, k.b.splat(k.b.reduce("sum", e, 0), {B}));
      k.b.store(k.at(out, offs), y, mask);
      auto a = build(k, isa);
      std::vector<float> xv = ramp(n, 6.0f), ov(size_t(n), -1.0f);
      float *pi = xv.data(), *po = ov.data();
      int32_t ni = static_cast<int32_t>(n);
      run(*a, {&po, &pi, &ni});
      double m = -INFINITY, s = 0;
      for (float v : xv) m = std::max<double>(m, v);
      for (float v : xv) s += std::exp(double(v) - m);
      INFO("n " << n << " isa " << isa);
      for (int64_t i = 0; i < n; ++i) {
        double want = std::exp(double(xv[size_t(i)]) - m) / s;
        REQUIRE(std::fabs(ov[size_t(i)] - want) <= 1e-6 * want + 1e-12);
      }
    }
  }
}

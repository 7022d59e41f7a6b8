// CPU backend fast paths: chunk loops versioned on one all-lanes-on test per
// tile, streaming (non-temporal) stores for large launches, and reductions
// across chunk boundaries. Every case runs the fast and the general version
// of the same kernel (shapes below, at and above the tile size) against
// plain C++.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "cpu_test_util.h"

using namespace cputest;

namespace {
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

float value(int64_t r, int64_t c) { return std::sin(0.13f * float(c) + 0.71f * float(r)) * 3.0f + 0.5f; }

// Row-wise: y = where(mask, x - mean, 0) * 2 + 1 stored under the mask, and
// the row's max and sum of squares of the centred values: a masked load
// deferred into a reduction, a select on the mask, a masked store, over
// rows of `cols` elements read through a tile of B lanes.
std::shared_ptr<codegen::Artifact> rowKernel(int64_t B, const std::string& isa) {
  K k("rowwise");
  Value* y = k.arg(ptr(DType::F32), "y");
  Value* stats = k.arg(ptr(DType::F32), "stats");
  Value* x = k.arg(ptr(DType::F32), "x");
  Value* cols = k.arg(i32(), "cols");
  Value* row = k.b.programId(0);
  Value* c = k.b.arange(0, B);
  Value* mask = k.b.cmp("lt", c, k.b.splat(cols, {B}));
  Value* base = k.b.splat(k.b.binary(OpCode::Mul, row, cols), {B});
  Value* offs = k.b.binary(OpCode::Add, base, c);
  Value* v = k.b.load(k.at(x, offs), mask, k.b.splat(k.cf(0.0), {B}));
  Value* n = k.b.cast(cols, DType::F32);
  Value* mean = k.b.binary(OpCode::Div, k.b.reduce("sum", v, 0), n);
  Value* xc = k.b.select(mask, k.b.binary(OpCode::Sub, v, k.b.splat(mean, {B})), k.b.splat(k.cf(0.0), {B}));
  Value* ss = k.b.reduce("sum", k.b.binary(OpCode::Mul, xc, xc), 0);
  Value* mx = k.b.reduce("max", k.b.select(mask, v, k.b.splat(k.cf(-INFINITY), {B})), 0);
  Value* out =
      k.b.binary(OpCode::Add, k.b.binary(OpCode::Mul, xc, k.b.splat(k.cf(2.0), {B})), k.b.splat(k.cf(1.0), {B}));
  k.b.store(k.at(y, offs), out, mask);
  Value* s0 = k.b.ptrAdd(stats, k.b.binary(OpCode::Mul, row, k.ci(3)));
  k.b.store(s0, mean);
  k.b.store(k.b.ptrAdd(s0, k.ci(1)), ss);
  k.b.store(k.b.ptrAdd(s0, k.ci(2)), mx);
  return build(k, isa);
}
}  // namespace

TEST_CASE("cpu fast path: rows shorter than, equal to and longer than the tile agree with C++",
          "[codegen][cpu][fastpath]") {
  // cols >= B takes the all-on version (the tile covers the first B
  // elements of each row), cols < B the general one; y must stay untouched
  // past cols.
  const int64_t B = 256, rows = 3;
  for (const std::string& isa : runnableIsas()) {
    auto a = rowKernel(B, isa);
    REQUIRE(a->dumps.llvm.find("mask.on") != std::string::npos);  // the kernel is versioned
    for (int64_t cols : {1, 7, 100, 255, 256, 257, 700}) {
      INFO("isa " << isa << " cols " << cols);
      std::vector<float> xv(size_t(rows * cols)), yv(size_t(rows * cols), -99.0f), st(size_t(rows * 3), 0.0f);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) xv[size_t(r * cols + c)] = value(r, c);
      float *py = yv.data(), *ps = st.data(), *px = xv.data();
      int32_t ci = static_cast<int32_t>(cols);
      run(*a, {&py, &ps, &px, &ci}, {int32_t(rows), 1, 1});
      int64_t used = std::min(cols, B);
      for (int64_t r = 0; r < rows; ++r) {
        double sum = 0, ss = 0, mx = -INFINITY;
        for (int64_t c = 0; c < used; ++c) sum += xv[size_t(r * cols + c)];
        double mean = sum / double(cols);
        for (int64_t c = 0; c < used; ++c) {
          double d = xv[size_t(r * cols + c)] - mean;
          ss += d * d;
          mx = std::max(mx, double(xv[size_t(r * cols + c)]));
        }
        REQUIRE(std::fabs(st[size_t(3 * r)] - mean) <= 1e-5 * (1 + std::fabs(mean)));
        REQUIRE(std::fabs(st[size_t(3 * r + 1)] - ss) <= 1e-5 * (1 + ss));
        REQUIRE(st[size_t(3 * r + 2)] == float(mx));
        for (int64_t c = 0; c < cols; ++c) {
          float got = yv[size_t(r * cols + c)];
          if (c >= B) {
            REQUIRE(got == -99.0f);  // beyond the tile: never written
          } else {
            double want = (xv[size_t(r * cols + c)] - float(mean)) * 2.0 + 1.0;
            REQUIRE(std::fabs(got - want) <= 1e-5 * (1 + std::fabs(want)));
          }
        }
      }
    }
  }
}

TEST_CASE("cpu fast path: the all-on test respects 32-bit wrap-around of the offsets", "[codegen][cpu][fastpath]") {
  // offs = start + arange(B) wraps past INT32_MAX into negative numbers,
  // which are < bound: the IR's (wrapping) semantics turn those lanes on.
  // A bound test done on unwrapped numbers would get them wrong.
  const int64_t B = 64;
  for (const std::string& isa : runnableIsas()) {
    K k("wrap");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* start = k.arg(i32(), "start");
    Value* bound = k.arg(i32(), "bound");
    Value* offs = k.b.binary(OpCode::Add, k.b.splat(start, {B}), k.b.arange(0, B));
    Value* mask = k.b.cmp("lt", offs, k.b.splat(bound, {B}));
    k.b.store(k.at(out, k.b.arange(0, B)), k.b.splat(k.cf(1.0), {B}), mask);
    auto a = build(k, isa);
    const int32_t imax = std::numeric_limits<int32_t>::max();
    for (auto [s, b] : std::vector<std::pair<int32_t, int32_t>>{
             {0, 1000}, {0, 10}, {imax - 10, imax}, {imax - 100, imax}, {imax - 63, imax}, {-5, 3}, {-100, -90}}) {
      INFO("isa " << isa << " start " << s << " bound " << b);
      std::vector<float> ov(B, 0.0f);
      float* po = ov.data();
      int32_t si = s, bi = b;
      run(*a, {&po, &si, &bi});
      for (int64_t i = 0; i < B; ++i) {
        int32_t lane = static_cast<int32_t>(static_cast<uint32_t>(s) + static_cast<uint32_t>(i));
        REQUIRE(ov[size_t(i)] == (lane < b ? 1.0f : 0.0f));
      }
    }
  }
}

TEST_CASE("cpu fast path: a mask made of two bounds (2-D tile) versions both", "[codegen][cpu][fastpath]") {
  // mask = (r < M)[:, None] & (c < N)[None, :]: all on only when both are.
  const int64_t R = 8, C = 32;
  for (const std::string& isa : runnableIsas()) {
    K k("mask2d");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* in = k.arg(ptr(DType::F32), "in");
    Value* M = k.arg(i32(), "M");
    Value* N = k.arg(i32(), "N");
    Value* r = k.b.broadcast(k.b.expandDims(k.b.arange(0, R), 1), {R, C});
    Value* c = k.b.broadcast(k.b.expandDims(k.b.arange(0, C), 0), {R, C});
    Value* mask =
        k.b.binary(OpCode::And, k.b.cmp("lt", r, k.b.splat(M, {R, C})), k.b.cmp("lt", c, k.b.splat(N, {R, C})));
    Value* offs = k.b.binary(OpCode::Add, k.b.binary(OpCode::Mul, r, k.b.splat(N, {R, C})), c);
    Value* v = k.b.load(k.at(in, offs), mask, k.b.splat(k.cf(0.0), {R, C}));
    k.b.store(k.at(out, offs), k.b.binary(OpCode::Mul, v, k.b.splat(k.cf(3.0), {R, C})), mask);
    auto a = build(k, isa);
    REQUIRE(a->dumps.llvm.find("mask.on") != std::string::npos);
    for (auto [m, n] : std::vector<std::pair<int, int>>{{8, 32}, {8, 40}, {20, 32}, {5, 32}, {8, 17}, {3, 3}}) {
      INFO("isa " << isa << " M " << m << " N " << n);
      std::vector<float> iv(size_t(m * n)), ov(size_t(m * n), -1.0f);
      for (size_t i = 0; i < iv.size(); ++i) iv[i] = float(i) * 0.5f - 3.0f;
      float *po = ov.data(), *pi = iv.data();
      int32_t mi = m, ni = n;
      run(*a, {&po, &pi, &mi, &ni});
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          float want = (i < R && j < C) ? iv[size_t(i * n + j)] * 3.0f : -1.0f;
          REQUIRE(ov[size_t(i * n + j)] == want);
        }
    }
  }
}

TEST_CASE("cpu fast path: max and min reductions propagate NaN from any chunk and order zeros",
          "[codegen][cpu][fastpath]") {
  const int64_t B = 256;
  for (const std::string& isa : runnableIsas()) {
    for (const char* kind : {"max", "min"}) {
      K k(std::string("nan_") + kind);
      Value* out = k.arg(ptr(DType::F32), "out");
      Value* x = k.arg(ptr(DType::F32), "x");
      Value* cols = k.arg(i32(), "cols");
      Value* c = k.b.arange(0, B);
      Value* mask = k.b.cmp("lt", c, k.b.splat(cols, {B}));
      double fill = std::string(kind) == "max" ? -INFINITY : INFINITY;
      Value* v = k.b.load(k.at(x, c), mask, k.b.splat(k.cf(fill), {B}));
      k.b.store(out, k.b.reduce(kind, v, 0));
      auto a = build(k, isa);
      for (int64_t cols : {int64_t{256}, int64_t{300}, int64_t{200}}) {
        for (int64_t pos :
             {int64_t{0}, int64_t{7}, int64_t{8}, int64_t{31}, int64_t{32}, int64_t{130}, int64_t{199}, int64_t{255}}) {
          if (pos >= cols) continue;
          INFO("isa " << isa << " " << kind << " cols " << cols << " NaN at " << pos);
          std::vector<float> xv(static_cast<size_t>(cols));
          for (int64_t i = 0; i < cols; ++i) xv[size_t(i)] = value(0, i);
          xv[size_t(pos)] = std::numeric_limits<float>::quiet_NaN();
          float got = 0;
          float *po = &got, *px = xv.data();
          int32_t ci = static_cast<int32_t>(cols);
          run(*a, {&po, &px, &ci});
          REQUIRE(std::isnan(got));
        }
        // Signed zeros: max(-0, +0) = +0, min(-0, +0) = -0, wherever they sit.
        std::vector<float> xv(static_cast<size_t>(cols), std::string(kind) == "max" ? -0.0f : 0.0f);
        for (int64_t i = 0; i < cols; i += 3) xv[size_t(i)] = std::string(kind) == "max" ? -5.0f : 5.0f;
        int64_t z = std::min<int64_t>(cols, B) - 1;  // the last lane read, in the last chunk
        if (z % 3 == 0) --z;
        xv[size_t(z)] = std::string(kind) == "max" ? 0.0f : -0.0f;
        float got = 1;
        float *po = &got, *px = xv.data();
        int32_t ci = static_cast<int32_t>(cols);
        run(*a, {&po, &px, &ci});
        INFO("isa " << isa << " " << kind << " zeros, cols " << cols);
        REQUIRE(got == 0.0f);
        REQUIRE(std::signbit(got) == (std::string(kind) == "min"));
      }
    }
  }
}

TEST_CASE("cpu fast path: large launches use streaming stores, correct when aligned, misaligned and in place",
          "[codegen][cpu][fastpath]") {
  // out = x * 2 + y over n elements, B per program. 3 Mi floats (12 MiB)
  // exceed the streaming threshold; 4 Ki do not.
  const int64_t B = 1024;
  auto kernel = [&](const std::string& isa, bool dumpAsm) {
    K k("saxpy_like");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* x = k.arg(ptr(DType::F32), "x");
    Value* y = k.arg(ptr(DType::F32), "y");
    Value* len = k.arg(i32(), "n");
    Value* offs =
        k.b.binary(OpCode::Add, k.b.splat(k.b.binary(OpCode::Mul, k.b.programId(0), k.ci(B)), {B}), k.b.arange(0, B));
    Value* mask = k.b.cmp("lt", offs, k.b.splat(len, {B}));
    Value* v =
        k.b.binary(OpCode::Add, k.b.binary(OpCode::Mul, k.b.load(k.at(x, offs), mask), k.b.splat(k.cf(2.0), {B})),
                   k.b.load(k.at(y, offs), mask));
    k.b.store(k.at(out, offs), v, mask);
    return build(k, isa, dumpAsm);
  };
  // The streaming version exists for both ISAs (AVX-512 only compiled here
  // unless the host has it).
  REQUIRE(count(kernel(kAvx2Cpu, true)->dumps.assembly, "vmovntps\t%ymm") >= 1);
  REQUIRE(count(kernel(kAvx512Cpu, true)->dumps.assembly, "vmovntps\t%zmm") >= 1);
  for (const std::string& isa : runnableIsas()) {
    auto a = kernel(isa, false);
    for (int64_t n : {int64_t{4096} + 3, int64_t{3} << 20, (int64_t{3} << 20) + 5}) {
      for (int mode = 0; mode < 3; ++mode) {  // 0: aligned, 1: out misaligned by one float, 2: in place (out == x)
        INFO("isa " << isa << " n " << n << " mode " << mode);
        std::vector<float> xv(static_cast<size_t>(n) + 16), yv(static_cast<size_t>(n)),
            ov(static_cast<size_t>(n) + 16, -1.0f);
        for (int64_t i = 0; i < n; ++i) {
          xv[size_t(i)] = float(i % 1000) * 0.25f;
          yv[size_t(i)] = float(i % 7) - 3.0f;
        }
        std::vector<float> want(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) want[size_t(i)] = xv[size_t(i)] * 2.0f + yv[size_t(i)];
        float* px = xv.data();
        float* py = yv.data();
        float* po = mode == 0 ? ov.data() : mode == 1 ? ov.data() + 1 : px;
        int32_t ni = static_cast<int32_t>(n);
        int32_t programs = static_cast<int32_t>((n + B - 1) / B);
        run(*a, {&po, &px, &py, &ni}, {programs, 1, 1});
        for (int64_t i = 0; i < n; ++i) REQUIRE(po[i] == want[size_t(i)]);
        if (mode != 2) REQUIRE(po[n] == -1.0f);  // nothing written past n
      }
    }
  }
}

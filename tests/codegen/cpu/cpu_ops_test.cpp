// CPU backend, op by op, against plain C++ references.
#include <catch2/catch.hpp>

#include <climits>
#include <cmath>
#include <limits>

#include "cpu_test_util.h"

using namespace cputest;

namespace {
// Offsets of a row-major M x N tile: expand_dims(arange(M),1)*N + expand_dims(arange(N),0).
Value* offsets2d(K& k, int64_t M, int64_t N) {
  auto& b = k.b;
  Value* r = b.broadcast(b.expandDims(b.binary(OpCode::Mul, b.arange(0, M), b.splat(k.ci(N), {M})), 1), {M, N});
  Value* c = b.broadcast(b.expandDims(b.arange(0, N), 0), {M, N});
  return b.binary(OpCode::Add, r, c);
}
}  // namespace

TEST_CASE("cpu: reductions along both axes of a 2-D tile", "[codegen][cpu]") {
  const std::pair<int64_t, int64_t> shapes[] = {{8, 32}, {5, 12}, {3, 7}, {16, 64}};
  for (auto [M, N] : shapes) {
    std::vector<float> in(M * N);
    for (int64_t i = 0; i < M * N; ++i) in[i] = std::cos(1.3f * static_cast<float>(i)) * 10.0f;
    in[N + 1] = in[N + 3] = 50.0f;  // a tie for the maximum: argmax must give the first
    for (const char* kind : {"sum", "max", "min", "argmax"}) {
      for (int axis : {0, 1}) {
        for (const std::string& isa : runnableIsas()) {
          bool arg = std::string(kind) == "argmax";
          K k("reduce");
          Value* out = k.arg(ptr(arg ? DType::I32 : DType::F32), "out");
          Value* inp = k.arg(ptr(DType::F32), "in");
          Value* x = k.b.load(k.at(inp, offsets2d(k, M, N)));
          Value* r = k.b.reduce(kind, x, axis);
          int64_t L = axis == 0 ? N : M;
          k.b.store(k.at(out, k.b.arange(0, L)), r);
          auto a = build(k, isa);
          std::vector<float> of(L, -1);
          std::vector<int32_t> oi(L, -1);
          void* po = arg ? static_cast<void*>(oi.data()) : static_cast<void*>(of.data());
          float* pi = in.data();
          run(*a, {&po, &pi});
          INFO(kind << " axis " << axis << " shape " << M << "x" << N << " isa " << isa);
          for (int64_t o = 0; o < L; ++o) {
            int64_t R = axis == 0 ? M : N;
            double s = 0, mx = -INFINITY, mn = INFINITY;
            int32_t am = 0;
            for (int64_t j = 0; j < R; ++j) {
              float v = axis == 0 ? in[j * N + o] : in[o * N + j];
              s += v;
              if (v > mx) {
                mx = v;
                am = static_cast<int32_t>(j);
              }
              mn = std::min<double>(mn, v);
            }
            if (arg)
              REQUIRE(oi[o] == am);
            else if (std::string(kind) == "sum")
              REQUIRE(std::fabs(of[o] - s) <= 1e-4 * (1 + std::fabs(s)));
            else
              REQUIRE(of[o] == static_cast<float>(std::string(kind) == "max" ? mx : mn));
          }
        }
      }
    }
  }
}

TEST_CASE("cpu: max/min/argmax propagate NaN", "[codegen][cpu]") {
  const int64_t N = 32;
  for (const char* kind : {"max", "min", "argmax"}) {
    bool arg = std::string(kind) == "argmax";
    K k("nanred");
    Value* out = k.arg(ptr(arg ? DType::I32 : DType::F32), "out");
    Value* inp = k.arg(ptr(DType::F32), "in");
    Value* r = k.b.reduce(kind, k.b.load(k.at(inp, k.b.arange(0, N))), 0);
    k.b.store(out, r);
    auto a = build(k);
    std::vector<float> in(N, 1.0f);
    in[20] = NAN;
    in[27] = NAN;
    float of = 0;
    int32_t oi = -1;
    void* po = arg ? static_cast<void*>(&oi) : static_cast<void*>(&of);
    float* pi = in.data();
    run(*a, {&po, &pi});
    INFO(kind);
    if (arg)
      CHECK(oi == 20);
    else
      CHECK(std::isnan(of));
  }
}

TEST_CASE("cpu: broadcast, expand_dims, transpose, reshape", "[codegen][cpu]") {
  const int64_t M = 6, N = 8;
  std::vector<float> in(M * N);
  for (int64_t i = 0; i < M * N; ++i) in[i] = static_cast<float>(i) * 1.5f - 3.0f;
  for (const std::string& isa : runnableIsas()) {
    INFO("isa " << isa);
    // out1 = transpose(x) (N x M), out2 = reshape(x, 12x4) + 1,
    // out3 = broadcast(x[:, 0:1]) style via column sums: x + broadcast(row vector of column 0) ...
    K k("shapes");
    Value* o1 = k.arg(ptr(DType::F32), "o1");
    Value* o2 = k.arg(ptr(DType::F32), "o2");
    Value* o3 = k.arg(ptr(DType::F32), "o3");
    Value* inp = k.arg(ptr(DType::F32), "in");
    auto& b = k.b;
    Value* x = b.load(k.at(inp, offsets2d(k, M, N)));
    b.store(k.at(o1, offsets2d(k, N, M)), b.transpose(x, {1, 0}));
    Value* rs = b.reshape(x, {12, 4});
    b.store(k.at(o2, offsets2d(k, 12, 4)), b.binary(OpCode::Add, rs, b.constant(Type::tile(f32(), {12, 4}), 1.0)));
    // Row maxima broadcast along rows plus column sums broadcast along columns.
    Value* rowMax = b.broadcast(b.expandDims(b.reduce("max", x, 1), 1), {M, N});
    Value* colSum = b.broadcast(b.expandDims(b.reduce("sum", x, 0), 0), {M, N});
    b.store(k.at(o3, offsets2d(k, M, N)), b.binary(OpCode::Sub, rowMax, colSum));
    auto a = build(k, isa);
    std::vector<float> r1(M * N), r2(M * N), r3(M * N);
    float *p1 = r1.data(), *p2 = r2.data(), *p3 = r3.data(), *pi = in.data();
    run(*a, {&p1, &p2, &p3, &pi});
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        REQUIRE(r1[j * M + i] == in[i * N + j]);
        float rm = -INFINITY, cs = 0;
        for (int64_t t = 0; t < N; ++t) rm = std::max(rm, in[i * N + t]);
        for (int64_t t = 0; t < M; ++t) cs += in[t * N + j];
        REQUIRE(std::fabs(r3[i * N + j] - (rm - cs)) <= 1e-4f * (1 + std::fabs(cs)));
      }
    for (int64_t i = 0; i < M * N; ++i) REQUIRE(r2[i] == in[i] + 1.0f);
  }
}

TEST_CASE("cpu: integer div, rem and shifts", "[codegen][cpu]") {
  const int64_t N = 16;
  std::vector<int32_t> a{7, -7, 7, -7, 100, INT_MIN, 0, 1, 123456789, -5, 9, INT_MAX, 3, -1, 64, 13};
  std::vector<int32_t> d{2, 2, -2, -2, 7, -1, 5, 0, 1000, 3, 0, -1, 3, 1, 8, 4};
  std::vector<int32_t> s{0, 1, 2, 3, 4, 5, 31, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  K k("intops");
  Value* oq = k.arg(ptr(DType::I32), "q");
  Value* orr = k.arg(ptr(DType::I32), "r");
  Value* osl = k.arg(ptr(DType::I32), "sl");
  Value* osr = k.arg(ptr(DType::I32), "sr");
  Value* pa = k.arg(ptr(DType::I32), "a");
  Value* pd = k.arg(ptr(DType::I32), "d");
  Value* ps = k.arg(ptr(DType::I32), "s");
  auto& b = k.b;
  Value* offs = b.arange(0, N);
  Value* va = b.load(k.at(pa, offs));
  Value* vd = b.load(k.at(pd, offs));
  Value* vs = b.load(k.at(ps, offs));
  b.store(k.at(oq, offs), b.binary(OpCode::Div, va, vd));
  b.store(k.at(orr, offs), b.binary(OpCode::Rem, va, vd));
  b.store(k.at(osl, offs), b.binary(OpCode::Shl, va, vs));
  b.store(k.at(osr, offs), b.binary(OpCode::Shr, va, vs));
  auto art = build(k);
  std::vector<int32_t> q(N), r(N), sl(N), sr(N);
  int32_t *p1 = q.data(), *p2 = r.data(), *p3 = sl.data(), *p4 = sr.data();
  int32_t *p5 = a.data(), *p6 = d.data(), *p7 = s.data();
  run(*art, {&p1, &p2, &p3, &p4, &p5, &p6, &p7});  // must not trap on /0 or INT_MIN/-1
  for (int64_t i = 0; i < N; ++i) {
    INFO("lane " << i << ": " << a[i] << " / " << d[i]);
    if (d[i] != 0 && !(a[i] == INT_MIN && d[i] == -1)) {
      REQUIRE(q[i] == a[i] / d[i]);
      REQUIRE(r[i] == a[i] % d[i]);
    }
    REQUIRE(sl[i] == static_cast<int32_t>(static_cast<uint32_t>(a[i]) << s[i]));
    REQUIRE(sr[i] == (a[i] >> s[i]));  // arithmetic
  }
}

TEST_CASE("cpu: for loop carrying a tile and a scalar", "[codegen][cpu]") {
  const int64_t B = 40;
  for (int32_t iters : {0, 1, 5}) {
    K k("loop");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* cnt = k.arg(ptr(DType::I32), "cnt");
    Value* in = k.arg(ptr(DType::F32), "in");
    Value* n = k.arg(i32(), "n");
    auto& b = k.b;
    Value* zero = b.constant(Type::tile(f32(), {B}), 0.0);
    auto res = b.forLoop(k.ci(0), n, k.ci(1), {zero, k.ci(0)}, [&](Builder& ib, Value* iv, std::vector<Value*> c) {
      Value* offs = ib.binary(OpCode::Add, ib.splat(ib.binary(OpCode::Mul, iv, ib.constant(i32(), int64_t{B})), {B}),
                              ib.arange(0, B));
      Value* x = ib.load(ib.ptrAdd(ib.splat(in, {B}), offs));
      // acc = acc * 0.5 + x reads the carried tile while producing the next one.
      Value* acc = ib.binary(OpCode::Add, ib.binary(OpCode::Mul, c[0], ib.constant(Type::tile(f32(), {B}), 0.5)), x);
      return std::vector<Value*>{acc, ib.binary(OpCode::Add, c[1], iv)};
    });
    b.store(k.at(out, b.arange(0, B)), res[0]);
    b.store(cnt, res[1]);
    auto a = build(k);
    std::vector<float> inv(B * 5), o(B, -1);
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = static_cast<float>(i % 17) - 4.0f;
    int32_t c = -1;
    float *po = o.data(), *pi = inv.data();
    int32_t* pc = &c;
    run(*a, {&po, &pc, &pi, &iters});
    int32_t cref = 0;
    for (int32_t i = 0; i < iters; ++i) cref += i;
    CHECK(c == cref);
    for (int64_t j = 0; j < B; ++j) {
      float acc = 0;
      for (int32_t i = 0; i < iters; ++i) acc = acc * 0.5f + inv[i * B + j];
      REQUIRE(o[j] == acc);
    }
  }
}

TEST_CASE("cpu: if/else with a tile result", "[codegen][cpu]") {
  const int64_t B = 32;
  K k("ifelse");
  Value* out = k.arg(ptr(DType::F32), "out");
  Value* in = k.arg(ptr(DType::F32), "in");
  auto& b = k.b;
  Value* pid = b.programId(0);
  Value* offs = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, pid, k.ci(B)), {B}), b.arange(0, B));
  Value* x = b.load(k.at(in, offs));
  Value* even = b.cmp("eq", b.binary(OpCode::Rem, pid, k.ci(2)), k.ci(0));
  Value* tileT = x;
  auto r = b.ifElse(
      even, {x->type()},
      [&](Builder& ib) {
        return std::vector<Value*>{ib.binary(OpCode::Mul, tileT, ib.constant(Type::tile(f32(), {B}), 2.0))};
      },
      [&](Builder& ib) {
        return std::vector<Value*>{ib.binary(OpCode::Add, tileT, ib.constant(Type::tile(f32(), {B}), 100.0))};
      });
  b.store(k.at(out, offs), r[0]);
  auto a = build(k);
  std::vector<float> inv(B * 4), o(B * 4);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = static_cast<float>(i);
  float *po = o.data(), *pi = inv.data();
  run(*a, {&po, &pi}, {4, 1, 1});
  for (int p = 0; p < 4; ++p)
    for (int j = 0; j < B; ++j) {
      float v = inv[p * B + j];
      REQUIRE(o[p * B + j] == (p % 2 == 0 ? v * 2 : v + 100));
    }
}

TEST_CASE("cpu: atomics from a multi-program grid", "[codegen][cpu]") {
  const int64_t B = 16;
  const int32_t P = 8;
  K k("atomics");
  Value* sumF = k.arg(ptr(DType::F32), "sumf");
  Value* maxF = k.arg(ptr(DType::F32), "maxf");
  Value* sumI = k.arg(ptr(DType::I32), "sumi");
  Value* maxI = k.arg(ptr(DType::I32), "maxi");
  Value* n = k.arg(i32(), "n");
  auto& b = k.b;
  Value* pid = b.programId(0);
  Value* idx = b.arange(0, B);
  Value* mask = b.cmp("lt", idx, b.splat(n, {B}));
  // value(pid, j) = (pid * 7 + j * 3) % 11 - 5
  Value* vi = b.binary(OpCode::Sub,
                       b.binary(OpCode::Rem,
                                b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, pid, k.ci(7)), {B}),
                                         b.binary(OpCode::Mul, idx, b.splat(k.ci(3), {B}))),
                                b.splat(k.ci(11), {B})),
                       b.splat(k.ci(5), {B}));
  Value* vf = b.cast(vi, DType::F32);
  b.atomic(AtomicKind::Add, k.at(sumF, idx), vf, mask);
  b.atomic(AtomicKind::Max, k.at(maxF, idx), vf, mask);
  b.atomic(AtomicKind::Add, k.at(sumI, idx), vi, mask);
  b.atomic(AtomicKind::Max, k.at(maxI, idx), vi, mask);
  auto a = build(k);
  std::vector<float> sf(B, 0), mf(B, -100);
  std::vector<int32_t> si(B, 0), mi(B, -100);
  float *p1 = sf.data(), *p2 = mf.data();
  int32_t *p3 = si.data(), *p4 = mi.data();
  int32_t nn = 13;
  run(*a, {&p1, &p2, &p3, &p4, &nn}, {P, 1, 1});
  for (int j = 0; j < B; ++j) {
    int s = 0, m = -100;
    for (int p = 0; p < P; ++p) {
      int v = (p * 7 + j * 3) % 11 - 5;
      s += v;
      m = std::max(m, v);
    }
    if (j >= nn) s = 0, m = -100;
    INFO("lane " << j);
    REQUIRE(sf[j] == static_cast<float>(s));
    REQUIRE(si[j] == s);
    REQUIRE(mf[j] == static_cast<float>(m));
    REQUIRE(mi[j] == m);
  }
}

TEST_CASE("cpu: alloc + local_store + local_load", "[codegen][cpu]") {
  const int64_t M = 4, N = 12;
  for (MemSpace space : {MemSpace::Shared, MemSpace::Local}) {
    K k("local");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* in = k.arg(ptr(DType::F32), "in");
    auto& b = k.b;
    Value* buf = b.alloc(space, DType::F32, {M, N});
    Value* offs = offsets2d(k, M, N);
    Value* x = b.load(k.at(in, offs));
    b.localStore(buf, x);
    b.barrier();
    Value* y = b.localLoad(buf);
    // A second store after the load must not change `y`.
    b.localStore(buf, b.constant(Type::tile(f32(), {M, N}), 0.0));
    Value* z = b.localLoad(buf);
    b.store(k.at(out, offs),
            b.binary(OpCode::Add, b.binary(OpCode::Mul, y, b.constant(Type::tile(f32(), {M, N}), 3.0)), z));
    auto a = build(k);
    std::vector<float> inv(M * N), o(M * N);
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = static_cast<float>(i) - 20;
    float *po = o.data(), *pi = inv.data();
    run(*a, {&po, &pi});
    for (size_t i = 0; i < inv.size(); ++i) REQUIRE(o[i] == inv[i] * 3);
  }
}

TEST_CASE("cpu: dot 16x16x16 in f32 and f16", "[codegen][cpu]") {
  const int64_t S = 16;
  for (DType in : {DType::F32, DType::F16}) {
    K k("dot");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* pa = k.arg(ptr(in), "a");
    Value* pb = k.arg(ptr(in), "b");
    auto& b = k.b;
    Value* offs = offsets2d(k, S, S);
    Value* av = b.load(k.at(pa, offs));
    Value* bv = b.load(k.at(pb, offsets2d(k, S, S)));
    Value* acc = b.constant(Type::tile(f32(), {S, S}), 1.0);
    b.store(k.at(out, offsets2d(k, S, S)), b.dot(av, bv, acc));
    auto art = build(k);
    std::vector<float> af(S * S), bf(S * S), o(S * S);
    std::vector<uint16_t> ah(S * S), bh(S * S);
    for (int64_t i = 0; i < S * S; ++i) {
      af[i] = static_cast<float>((i * 7) % 13) * 0.25f - 1.0f;
      bf[i] = static_cast<float>((i * 5) % 11) * 0.5f - 2.0f;
      ah[i] = f64ToF16(af[i]);  // exact: small multiples of 1/4
      bh[i] = f64ToF16(bf[i]);
    }
    void* pA = in == DType::F32 ? static_cast<void*>(af.data()) : static_cast<void*>(ah.data());
    void* pB = in == DType::F32 ? static_cast<void*>(bf.data()) : static_cast<void*>(bh.data());
    float* po = o.data();
    run(*art, {&po, &pA, &pB});
    for (int64_t m = 0; m < S; ++m)
      for (int64_t n2 = 0; n2 < S; ++n2) {
        double r = 1.0;
        for (int64_t kk = 0; kk < S; ++kk) r += static_cast<double>(af[m * S + kk]) * bf[kk * S + n2];
        REQUIRE(std::fabs(o[m * S + n2] - r) <= 1e-5 * (1 + std::fabs(r)));
      }
  }
}

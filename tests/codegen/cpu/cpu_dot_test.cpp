// The CPU dot microkernel (codegen/cpu/CpuDot.cpp) on ir::Builder-built
// kernels: every operand dtype, tile shapes that are and are not multiples
// of the register block (6 x 16 on AVX2, 14 x 32 on AVX-512), a non-zero
// accumulator, loop-carried accumulators (updated in place) and the AVX-512
// code path compiled for inspection.
//
// Inputs are small multiples of 1/4 (floats) or arbitrary i8: every product
// and partial sum is exact in f32 / i32, so results must match a double /
// int64 reference exactly, whatever the summation order.
#include <catch2/catch.hpp>

#include <random>

#include "cpu_test_util.h"

using namespace cputest;

namespace {

/// Row-major offsets of an M x N tile with row stride N, built by `b` (the
/// builder of the block the offsets are used in).
Value* offsets2d(Builder& b, int64_t M, int64_t N) {
  Value* r =
      b.broadcast(b.expandDims(b.binary(OpCode::Mul, b.arange(0, M), b.splat(b.constant(i32(), N), {M})), 1), {M, N});
  Value* c = b.broadcast(b.expandDims(b.arange(0, N), 0), {M, N});
  return b.binary(OpCode::Add, r, c);
}

struct Shape3 {
  int64_t M, K, N;
};

// Host data for one dtype: values as doubles plus their in-memory encoding.
struct Operand {
  std::vector<double> v;
  std::vector<uint8_t> bytes;
};

Operand makeOperand(DType d, size_t n, std::mt19937& rng) {
  Operand o;
  o.v.resize(n);
  std::uniform_int_distribution<int> q(-8, 8);  // multiples of 1/4 in [-2, 2]
  std::uniform_int_distribution<int> i8(-128, 127);
  for (auto& x : o.v) x = d == DType::I8 ? i8(rng) : q(rng) * 0.25;
  size_t es = d == DType::F32 ? 4 : d == DType::I8 ? 1 : 2;
  o.bytes.resize(n * es);
  for (size_t i = 0; i < n; ++i) {
    if (d == DType::F32) {
      float f = static_cast<float>(o.v[i]);
      std::memcpy(&o.bytes[i * 4], &f, 4);
    } else if (d == DType::F16 || d == DType::BF16) {
      uint16_t h = d == DType::F16 ? f64ToF16(o.v[i]) : f64ToBf16(o.v[i]);
      std::memcpy(&o.bytes[i * 2], &h, 2);
    } else {
      o.bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(o.v[i]));
    }
  }
  return o;
}

/// out = dot(load a, load b, load c): checks every element exactly.
void checkDot(DType in, Shape3 s, const std::string& isa, uint32_t seed) {
  const auto [M, Kd, N] = s;
  DType accD = in == DType::I8 ? DType::I32 : DType::F32;
  K k("dot");
  Value* out = k.arg(ptr(accD), "out");
  Value* pa = k.arg(ptr(in), "a");
  Value* pb = k.arg(ptr(in), "b");
  Value* pc = k.arg(ptr(accD), "c");
  auto& b = k.b;
  Value* av = b.load(k.at(pa, offsets2d(k.b, M, Kd)));
  Value* bv = b.load(k.at(pb, offsets2d(k.b, Kd, N)));
  Value* cv = b.load(k.at(pc, offsets2d(k.b, M, N)));
  b.store(k.at(out, offsets2d(k.b, M, N)), b.dot(av, bv, cv));
  auto art = build(k, isa);

  std::mt19937 rng(seed);
  Operand A = makeOperand(in, size_t(M * Kd), rng), B = makeOperand(in, size_t(Kd * N), rng);
  Operand C = makeOperand(accD == DType::I32 ? DType::I8 : DType::F32, size_t(M * N), rng);  // non-zero acc
  std::vector<int32_t> ci(size_t(M * N));
  std::vector<float> cf(size_t(M * N));
  for (size_t i = 0; i < ci.size(); ++i) {
    ci[i] = static_cast<int32_t>(C.v[i]) * 1000;  // beyond i8: the accumulator is really i32
    cf[i] = static_cast<float>(C.v[i]);
  }
  std::vector<uint8_t> o(size_t(M * N) * 4, 0xff);
  void* po = o.data();
  void* pA = A.bytes.data();
  void* pB = B.bytes.data();
  void* pC = accD == DType::I32 ? static_cast<void*>(ci.data()) : static_cast<void*>(cf.data());
  run(*art, {&po, &pA, &pB, &pC});
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double want = accD == DType::I32 ? ci[size_t(m * N + n)] : cf[size_t(m * N + n)];
      for (int64_t kk = 0; kk < Kd; ++kk) want += A.v[size_t(m * Kd + kk)] * B.v[size_t(kk * N + n)];
      double got;
      if (accD == DType::I32) {
        int32_t g;
        std::memcpy(&g, &o[size_t(m * N + n) * 4], 4);
        got = g;
      } else {
        float g;
        std::memcpy(&g, &o[size_t(m * N + n) * 4], 4);
        got = g;
      }
      INFO(name(in) << " " << M << "x" << Kd << "x" << N << " on " << isa << " at (" << m << ", " << n << ")");
      REQUIRE(got == want);
    }
}

// Multiples of the AVX2 block (6 x 16) and of the AVX-512 one (14 x 32),
// remainders in M, N or both, K = 1, a single element, vectors only partly
// used (N < 8), and a large tile.
const Shape3 kShapes[] = {{6, 16, 16}, {12, 32, 32}, {14, 8, 32},  {1, 1, 1},    {7, 5, 17},   {13, 9, 33},
                          {5, 3, 9},   {6, 1, 3},    {64, 64, 64}, {31, 17, 47}, {2, 70, 100}, {100, 2, 8}};

}  // namespace

TEST_CASE("cpu dot: f32, f16, bf16 and i8 over aligned and ragged tile shapes", "[codegen][cpu][dot]") {
  uint32_t seed = 1;
  for (const std::string& isa : runnableIsas())
    for (DType in : {DType::F32, DType::F16, DType::BF16, DType::I8})
      for (Shape3 s : kShapes) checkDot(in, s, isa, seed++);
}

TEST_CASE("cpu dot: bf16 and i8 on AMX tiles, whole and ragged tiles, K over one unrolled chunk",
          "[codegen][cpu][dot]") {
  // Compiled for sapphirerapids on every host (the tile instructions are
  // there); run, exactly against the reference, where the host has AMX.
  K k("amx");
  Value* out = k.arg(ptr(DType::I32), "out");
  Value* pa = k.arg(ptr(DType::I8), "a");
  Value* pb = k.arg(ptr(DType::I8), "b");
  Value* av = k.b.load(k.at(pa, offsets2d(k.b, 20, 70)));
  Value* bv = k.b.load(k.at(pb, offsets2d(k.b, 70, 24)));
  k.b.store(k.at(out, offsets2d(k.b, 20, 24)), k.b.dot(av, bv, k.b.constant(Type::tile(i32(), {20, 24}), int64_t{0})));
  auto art = build(k, kAmxCpu, /*dumpAsm=*/true);
  CHECK(art->dumps.assembly.find("tdpbssd") != std::string::npos);
  CHECK(art->dumps.assembly.find("ldtilecfg") != std::string::npos);
  const std::vector<std::string> cpus = runnableTileCpus();
  if (cpus.empty()) WARN("SKIP: this host has no AMX tiles (or the OS grants no tile state): AMX dots not run");
  // Whole tiles (16 rows, 32 bf16 / 64 i8 of K), ragged M, N and K, K over
  // 16 tile steps (bf16: 512; i8: 1024) so C is stored and reloaded between
  // unrolled chunks, and tiny tiles.
  const Shape3 shapes[] = {{16, 32, 16}, {32, 64, 32}, {64, 64, 64},  {7, 5, 17},    {31, 17, 47}, {33, 65, 33},
                           {2, 70, 100}, {100, 2, 8},  {17, 600, 18}, {5, 1100, 20}, {1, 1, 1},    {48, 130, 40}};
  uint32_t seed = 100;
  for (const std::string& cpu : cpus)
    for (DType in : {DType::BF16, DType::I8})
      for (Shape3 s : shapes) checkDot(in, s, cpu, seed++);
}

TEST_CASE("cpu dot: loop-carried accumulator over K chunks, with ragged tiles", "[codegen][cpu][dot]") {
  // c = sum over chunks j of A[:, jKc..] B[jKc.., :], the accumulator carried
  // by a `for` (the dot updates it in place) and starting from ones.
  for (Shape3 s : {Shape3{64, 16, 64}, Shape3{13, 5, 21}}) {
    const auto [M, Kc, N] = s;
    const int64_t chunks = 4, Kt = Kc * chunks;
    K k("dotloop");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* pa = k.arg(ptr(DType::F32), "a");
    Value* pb = k.arg(ptr(DType::F32), "b");
    auto& b = k.b;
    Value* ones = b.constant(Type::tile(f32(), {M, N}), 1.0);
    auto res = b.forLoop(k.ci(0), k.ci(chunks), k.ci(1), {ones}, [&](Builder& lb, Value* j, std::vector<Value*> c) {
      // A chunk j: rows m, columns j*Kc + kk of the M x Kt matrix.
      auto ci = [&](int64_t v) { return lb.constant(i32(), v); };
      auto at = [&](Value* p, Value* offs) { return lb.ptrAdd(lb.splat(p, offs->type().shape()), offs); };
      // Element (m, kk) of chunk j is A[m * Kt + j * Kc + kk] = offsets2d(M, Kc) + m * (Kt - Kc) + j * Kc.
      Value* aoff = lb.binary(OpCode::Add, offsets2d(lb, M, Kc), lb.splat(lb.binary(OpCode::Mul, j, ci(Kc)), {M, Kc}));
      Value* arow =
          lb.broadcast(lb.expandDims(lb.binary(OpCode::Mul, lb.arange(0, M), lb.splat(ci(Kt - Kc), {M})), 1), {M, Kc});
      Value* av = lb.load(at(pa, lb.binary(OpCode::Add, aoff, arow)));
      Value* boff =
          lb.binary(OpCode::Add, offsets2d(lb, Kc, N), lb.splat(lb.binary(OpCode::Mul, j, ci(Kc * N)), {Kc, N}));
      Value* bv = lb.load(at(pb, boff));
      return std::vector<Value*>{lb.dot(av, bv, c[0])};
    });
    b.store(k.at(out, offsets2d(k.b, M, N)), res[0]);
    auto art = build(k, kAvx2Cpu, /*dumpAsm=*/true);
    // The operand loads of the loop prefetch the next iteration's tiles.
    CHECK(art->dumps.assembly.find("prefetcht0") != std::string::npos);
    // The AVX-512 form of the same kernel (packing, prefetches, 14 x 32
    // blocks) compiles on any host; it runs where the host has AVX-512.
    codegen::CompileOptions o512;
    o512.dumpAssembly = true;
    auto art512 = codegen::compile(*k.f, cpuTarget(kAvx512Cpu), o512);
    CHECK(art512->dumps.assembly.find("vfmadd231ps\t%zmm") != std::string::npos);
    CHECK(art512->dumps.assembly.find("prefetcht0") != std::string::npos);
    std::mt19937 rng(5);
    Operand A = makeOperand(DType::F32, size_t(M * Kt), rng), B = makeOperand(DType::F32, size_t(Kt * N), rng);
    std::vector<float> o(size_t(M * N), NAN);
    void* po = o.data();
    void* pA = A.bytes.data();
    void* pB = B.bytes.data();
    run(*art, {&po, &pA, &pB});
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double want = 1;
        for (int64_t kk = 0; kk < Kt; ++kk) want += A.v[size_t(m * Kt + kk)] * B.v[size_t(kk * N + n)];
        INFO(M << "x" << Kc << "x" << N << " at (" << m << ", " << n << ")");
        REQUIRE(o[size_t(m * N + n)] == want);
      }
  }
}

TEST_CASE("cpu dot: an accumulator yielded into another carried slot is not overwritten", "[codegen][cpu][dot]") {
  // Carried (x, y): next = (y, dot(a, b, x)). Updating x in place would
  // clobber the value the yield copies into y's slot. With A = B = I
  // (identity), dot(a, b, x) = I + x: after 3 iterations from (0, 10):
  // (0, 10) -> (10, 1) -> (1, 11) -> (11, 2).
  const int64_t S = 8;
  K k("swap");
  Value* px = k.arg(ptr(DType::F32), "x");
  Value* py = k.arg(ptr(DType::F32), "y");
  Value* pi = k.arg(ptr(DType::F32), "eye");
  auto& b = k.b;
  Value* eye = b.load(k.at(pi, offsets2d(k.b, S, S)));
  Value* x0 = b.constant(Type::tile(f32(), {S, S}), 0.0);
  Value* y0 = b.constant(Type::tile(f32(), {S, S}), 10.0);
  auto res = b.forLoop(k.ci(0), k.ci(3), k.ci(1), {x0, y0}, [&](Builder& lb, Value*, std::vector<Value*> c) {
    return std::vector<Value*>{c[1], lb.dot(eye, eye, c[0])};
  });
  b.store(k.at(px, offsets2d(k.b, S, S)), res[0]);
  b.store(k.at(py, offsets2d(k.b, S, S)), res[1]);
  auto art = build(k);
  std::vector<float> x(S * S), y(S * S), e(S * S, 0.0f);
  for (int64_t i = 0; i < S; ++i) e[size_t(i * S + i)] = 1.0f;
  void* pX = x.data();
  void* pY = y.data();
  void* pE = e.data();
  run(*art, {&pX, &pY, &pE});
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j) {
      INFO(i << ", " << j);
      REQUIRE(x[size_t(i * S + j)] == (i == j ? 11.0f : 10.0f));
      REQUIRE(y[size_t(i * S + j)] == (i == j ? 2.0f : 0.0f));
    }
}

TEST_CASE("cpu dot: the AVX-512 microkernel compiles to zmm FMAs, AVX2 to ymm FMAs", "[codegen][cpu][dot]") {
  for (const char* isa : {kAvx512Cpu, kAvx2Cpu}) {
    K k("dotisa");
    Value* out = k.arg(ptr(DType::F32), "out");
    Value* pa = k.arg(ptr(DType::F32), "a");
    Value* pb = k.arg(ptr(DType::F32), "b");
    auto& b = k.b;
    Value* av = b.load(k.at(pa, offsets2d(k.b, 30, 64)));
    Value* bv = b.load(k.at(pb, offsets2d(k.b, 64, 70)));
    b.store(k.at(out, offsets2d(k.b, 30, 70)), b.dot(av, bv, b.constant(Type::tile(f32(), {30, 70}), 0.0)));
    k.b.ret();
    codegen::CompileOptions o;
    o.dumpAssembly = true;
    // Compiling for AVX-512 must work on any host (inspection only).
    auto art = codegen::compile(*k.f, cpuTarget(isa), o);
    const std::string& s = art->dumps.assembly;
    INFO(isa);
    if (std::string(isa) == kAvx512Cpu) {
      CHECK(s.find("vfmadd231ps\t%zmm") != std::string::npos);
      CHECK(s.find("{1to16}") != std::string::npos);  // embedded broadcast of A
    } else {
      CHECK(s.find("vfmadd231ps\t%ymm") != std::string::npos);
      CHECK(s.find("zmm") == std::string::npos);
    }
  }
}

TEST_CASE("cpu dot: operands that are not single-use loads take the general packing", "[codegen][cpu][dot]") {
  // out1 = dot(a, 2b, 0), out2 = dot(a, b, 0) + a-independent: `a` has two
  // uses (no padded rows) and `2b` is computed (no packing at the load); the
  // second dot's B is a single-use load again. Shapes are ragged.
  for (const std::string& isa : runnableIsas())
    for (Shape3 s : {Shape3{13, 9, 33}, Shape3{7, 64, 100}, Shape3{6, 1, 20}}) {
      const auto [M, Kd, N] = s;
      K k("dotgeneral");
      Value* out1 = k.arg(ptr(DType::F32), "out1");
      Value* out2 = k.arg(ptr(DType::F32), "out2");
      Value* pa = k.arg(ptr(DType::F32), "a");
      Value* pb = k.arg(ptr(DType::F32), "b");
      auto& b = k.b;
      Value* av = b.load(k.at(pa, offsets2d(k.b, M, Kd)));
      Value* bv = b.load(k.at(pb, offsets2d(k.b, Kd, N)));
      Value* b2 = b.binary(OpCode::Mul, bv, b.constant(Type::tile(f32(), {Kd, N}), 2.0));
      Value* zero = b.constant(Type::tile(f32(), {M, N}), 0.0);
      b.store(k.at(out1, offsets2d(k.b, M, N)), b.dot(av, b2, zero));
      Value* bv2 = b.load(k.at(pb, offsets2d(k.b, Kd, N)));
      b.store(k.at(out2, offsets2d(k.b, M, N)), b.dot(av, bv2, zero));
      auto art = build(k, isa);
      std::mt19937 rng(11);
      Operand A = makeOperand(DType::F32, size_t(M * Kd), rng), B = makeOperand(DType::F32, size_t(Kd * N), rng);
      std::vector<float> o1(size_t(M * N), NAN), o2(size_t(M * N), NAN);
      void* p1 = o1.data();
      void* p2 = o2.data();
      void* pA = A.bytes.data();
      void* pB = B.bytes.data();
      run(*art, {&p1, &p2, &pA, &pB});
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double want = 0;
          for (int64_t kk = 0; kk < Kd; ++kk) want += A.v[size_t(m * Kd + kk)] * B.v[size_t(kk * N + n)];
          INFO(isa << " " << M << "x" << Kd << "x" << N << " at (" << m << ", " << n << ")");
          REQUIRE(o1[size_t(m * N + n)] == 2 * want);
          REQUIRE(o2[size_t(m * N + n)] == want);
        }
    }
}

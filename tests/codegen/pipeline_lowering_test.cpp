// Lowering of software-pipelined loops: a tile GEMM whose K loop is written
// with ts::for_pipelined / ts::stage_copy, compiled through the `pipeline`
// pass (buffer_slot, copy {async = 1}, async_commit, async_wait, barriers)
// and run on the CPU and on the SIMT emulator for both GPU vendors.
//
// On nvptx:sm_80 the async copies are cp.async (docs/pipelining.md) where
// the launch's divisibility facts prove them aligned (N, K multiples of 16)
// and program-order copies elsewhere; on amdgpu:gfx942 register-staged
// copies whose LDS stores are deferred. Both emulators perform a copy only
// when its group is retired, so a schedule bug shows up here.
//
// Inputs are small integers, so every product and partial sum is exact in
// f32 (and the f16 inputs are exact in f16): results are compared exactly,
// and reading any other iteration's slot (or a stale one) changes them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int64_t BM = 32, BN = 32, BK = 16;

/// C[M,N] = A[M,K] @ B[K,N] with f32 accumulation; A and B of type T
/// (float or ts::half); the K loop keeps `stages` tiles in flight.
template <class T>
ts::Kernel pipelinedGemm(int64_t stages) {
  const ts::DType dt = std::is_same_v<T, float> ? ts::f32 : ts::f16;
  return ts::kernel("pl_gemm", {"c", "a", "b", "M", "N", "K"},
                    [=](ts::Ptr<float> c, ts::Ptr<const T> a, ts::Ptr<const T> b, ts::Int M, ts::Int N, ts::Int K) {
                      auto row = ts::expand_dims(ts::program_id(0) * BM + ts::arange(BM), 1);  // BM x 1
                      auto col = ts::expand_dims(ts::program_id(1) * BN + ts::arange(BN), 0);  // 1 x BN
                      auto rk = ts::arange(BK);
                      auto sa = ts::alloc_shared(dt, {BM, BK});
                      auto sb = ts::alloc_shared(dt, {BK, BN});
                      auto acc = ts::for_pipelined(
                          0, K, BK, stages, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k, ts::Tensor acc) {
                            auto ka = ts::expand_dims(k + rk, 0);  // 1 x BK: columns of A
                            auto kb = ts::expand_dims(k + rk, 1);  // BK x 1: rows of B
                            auto ta = ts::stage_copy(sa, a + row * K + ka, (row < M) & (ka < K));
                            auto tb = ts::stage_copy(sb, b + kb * N + col, (kb < K) & (col < N));
                            return ts::dot(ta.load(), tb.load(), acc);
                          });
                      ts::store(c + row * N + col, acc, (row < M) & (col < N));
                    });
}

uint16_t toHalf(float f) {  // exact for the small integers used here
  if (f == 0) return 0;
  uint32_t sign = f < 0 ? 0x8000 : 0;
  int e;
  float m = std::frexp(std::fabs(f), &e);  // |f| = m * 2^e, m in [0.5, 1)
  uint32_t exp = static_cast<uint32_t>(e - 1 + 15);
  uint32_t man = static_cast<uint32_t>(std::lround((m * 2 - 1) * 1024));
  return static_cast<uint16_t>(sign | exp << 10 | man);
}

struct Shape {
  int64_t M, N, K;
};

/// Compiles and runs the kernel on `dev` and compares with a plain loop.
template <class T>
void runGemm(const ts::Device& dev, int64_t stages, Shape s) {
  const int64_t M = s.M, N = s.N, K = s.K;
  INFO(dev.name() << ", " << (std::is_same_v<T, float> ? "f32" : "f16") << ", stages = " << stages
                  << ", M x N x K = " << M << " x " << N << " x " << K);
  std::mt19937 rng(static_cast<uint32_t>(M * 131 + N * 17 + K + stages));
  std::uniform_int_distribution<int> d(-4, 4);
  std::vector<float> a(size_t(M * K)), b(size_t(K * N));
  for (auto& x : a) x = float(d(rng));
  for (auto& x : b) x = float(d(rng));
  // Reference in int64: exact.
  std::vector<float> ref(size_t(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int64_t(a[size_t(i * K + k)]) * int64_t(b[size_t(k * N + j)]);
      ref[size_t(i * N + j)] = float(acc);
    }

  ts::CompiledKernel k = ts::compile(pipelinedGemm<T>(stages), dev);
  // The schedule was built (not the loop as written) and lowered.
  std::string tile = k.dump(ts::Stage::TileIR);
  REQUIRE_THAT(tile, Catch::Matchers::Contains("pipelined = " + std::to_string(stages) + "}"));
  REQUIRE_THAT(tile, Catch::Matchers::Contains("async = 1"));

  ts::Buffer da, db;
  if constexpr (std::is_same_v<T, float>) {
    da = dev.upload(ts::DType::F32, a);
    db = dev.upload(ts::DType::F32, b);
  } else {
    std::vector<uint16_t> ha(a.size()), hb(b.size());
    for (size_t i = 0; i < a.size(); ++i) ha[i] = toHalf(a[i]);
    for (size_t i = 0; i < b.size(); ++i) hb[i] = toHalf(b[i]);
    da = dev.upload(ts::DType::F16, ha);
    db = dev.upload(ts::DType::F16, hb);
  }
  ts::Buffer dc = dev.alloc(ts::DType::F32, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel does not store fails the comparison
  ts::Dim3 grid(uint32_t((M + BM - 1) / BM), uint32_t((N + BN - 1) / BN));
  k.launch(grid, dc, da, db, int32_t(M), int32_t(N), int32_t(K));
  std::vector<float> got = dc.read<float>();
  REQUIRE(got.size() == ref.size());
  size_t bad = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == ref[i])) {
      ++bad;
      if (first == got.size()) first = i;
    }
  if (bad) {
    INFO(bad << " wrong elements; first at (" << first / size_t(N) << ", " << first % size_t(N) << "): got "
             << got[first] << ", expected " << ref[first]);
    CHECK(bad == 0);
  }
}

template <class T>
void runAll(const ts::Device& dev, std::initializer_list<Shape> shapes,
            std::initializer_list<int64_t> stageCounts = {1, 2, 3}) {
  for (int64_t stages : stageCounts)
    for (Shape s : shapes) runGemm<T>(dev, stages, s);
}

}  // namespace

TEST_CASE("pipelined GEMM on the CPU", "[codegen][pipeline]") {
  ts::Device cpu = ts::Device::cpu();
  // Ragged (K = 50: four iterations, the last one partly masked), aligned,
  // and K shorter than the pipeline depth (the prologue's copies of
  // iterations past the end are fully masked).
  runAll<float>(cpu, {{45, 37, 50}, {64, 64, 64}, {33, 20, 16}});
  runAll<ts::half>(cpu, {{45, 37, 50}, {64, 64, 64}});
}

TEST_CASE("on the CPU the stages become prefetches of the next iteration's tiles", "[codegen][pipeline]") {
  // Each staged copy in the pipelined loop also prefetches the addresses the
  // same copy reads in the next iteration (docs/gemm.md).
  ts::CompiledKernel k = ts::compile(pipelinedGemm<float>(3), ts::Device::cpu());
  std::string ir = k.dump(ts::Stage::LLVMOptimized), as = k.dump(ts::Stage::Assembly);
  CHECK(ir.find("@llvm.prefetch") != std::string::npos);
  CHECK(as.find("prefetcht0") != std::string::npos);
}

TEST_CASE("pipelined GEMM on the emulator (nvptx:sm_80)", "[codegen][pipeline][emu]") {
  // Emulation is slow: every stage count on the ragged shape, the aligned
  // shape with the deepest pipeline.
  ts::Device dev = ts::Device::emulator("nvptx:sm_80");
  runAll<float>(dev, {{45, 37, 50}});
  runAll<float>(dev, {{64, 64, 64}}, {3});
  runAll<ts::half>(dev, {{45, 37, 50}}, {1, 3});
  // N and K multiples of 16 (the launch specialises on them): the copies are
  // proven aligned and become cp.async (16-byte chunks for f16, 16 and 8 for
  // f32), rows past M masked by the ignore-src predicate; K = 48 is 3 iterations, so with
  // 3 stages the prologue covers all but one.
  runAll<ts::half>(dev, {{45, 64, 48}, {64, 32, 80}}, {2, 3});
  runAll<float>(dev, {{45, 64, 48}}, {2});
}

TEST_CASE("pipelined GEMM on the emulator (amdgpu:gfx942)", "[codegen][pipeline][emu]") {
  ts::Device dev = ts::Device::emulator("amdgpu:gfx942");
  runAll<float>(dev, {{45, 37, 50}}, {2, 3});
  runAll<ts::half>(dev, {{45, 37, 50}}, {1, 3});
  runAll<ts::half>(dev, {{64, 64, 64}}, {2});
  // Aligned N and K: register-staged copies with vector loads.
  runAll<ts::half>(dev, {{45, 64, 48}, {64, 32, 80}}, {2, 3});
}

TEST_CASE("an empty K range runs no iteration and stores zeros", "[codegen][pipeline]") {
  // n = 0: the prologue's copies are all masked and the loop does not run.
  for (int64_t stages : {1, 3}) {
    INFO("stages = " << stages);
    ts::Device cpu = ts::Device::cpu();
    ts::CompiledKernel k = ts::compile(pipelinedGemm<float>(stages), cpu);
    ts::Buffer da = cpu.alloc(ts::DType::F32, 1), db = cpu.alloc(ts::DType::F32, 1);
    ts::Buffer dc = cpu.alloc(ts::DType::F32, 40 * 40);
    dc.fillBytes(0xff);
    k.launch(ts::Dim3(2, 2), dc, da, db, int32_t(40), int32_t(40), int32_t(0));
    for (float x : dc.read<float>()) REQUIRE(x == 0.0f);
  }
}

// Non-power-of-two tile dims on GPU targets (ir/passes/PadTiles.cpp): padded
// to the next power of two with masks, so they are spread over the threads
// like any other dim. Checked by running kernels whose tiles are 3 x 100,
// 24 x 40 x 36 (FMA dot) and a pipelined tensor-core GEMM with 48 x 40 x 24
// blocks on both emulated vendors and the CPU against plain C++ references,
// by the registers ptxas reports, and by the warning a reshape that cannot
// be padded gets.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "../../../codegen/gpu/GpuCompile.h"
#include "registry.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int kR = 3, kW = 100;  // rows x cols of the row-statistics tile

// Per row of x (M x n, n <= kW): y = 2x + 1, and the row's sum, max, min
// and argmax.
ts::Kernel rowStats() {
  return ts::kernel("row_stats", [](ts::Ptr<float> y, ts::Ptr<float> s, ts::Ptr<float> mx, ts::Ptr<float> mn,
                                    ts::Ptr<int32_t> am, ts::Ptr<const float> x, ts::Int M, ts::Int n) {
    auto rows = ts::program_id(0) * kR + ts::arange(kR);
    auto r2 = ts::expand_dims(rows, 1);
    auto c2 = ts::expand_dims(ts::arange(kW), 0);
    auto m = (r2 < M) & (c2 < n);
    auto p = x + r2 * n + c2;
    auto v = ts::load(p, m, 0.0f);
    ts::store(y + r2 * n + c2, v * 2.0f + 1.0f, m);
    auto rm = rows < M;
    const float inf = std::numeric_limits<float>::infinity();
    ts::store(s + rows, ts::sum(v, 1), rm);
    ts::store(mx + rows, ts::max(ts::load(p, m, -inf), 1), rm);
    ts::store(mn + rows, ts::min(ts::load(p, m, inf), 1), rm);
    ts::store(am + rows, ts::argmax(ts::load(p, m, -inf), 1), rm);
  });
}

constexpr int kBM = 24, kBN = 40, kBK = 36;

// C = A @ B in f32 on the FMA path, 24 x 40 blocks, K in steps of 36.
ts::Kernel oddDot() {
  return ts::kernel(
      "odd_dot", [](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b, ts::Int M, ts::Int N, ts::Int K) {
        auto r2 = ts::expand_dims(ts::program_id(0) * kBM + ts::arange(kBM), 1);
        auto c2 = ts::expand_dims(ts::program_id(1) * kBN + ts::arange(kBN), 0);
        auto acc = ts::for_range(0, K, kBK, ts::zeros({kBM, kBN}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
          auto kk = k0 + ts::arange(kBK);
          auto ta = ts::load(a + r2 * K + ts::expand_dims(kk, 0), (r2 < M) & (ts::expand_dims(kk, 0) < K), 0.0f);
          auto tb = ts::load(b + ts::expand_dims(kk, 1) * N + c2, (ts::expand_dims(kk, 1) < K) & (c2 < N), 0.0f);
          return ts::dot(ta, tb, acc);
        });
        ts::store(c + r2 * N + c2, acc, (r2 < M) & (c2 < N));
      });
}

std::vector<float> smallInts(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<float> v(n);
  for (auto& x : v) x = float(d(rng));
  return v;
}

std::vector<ts::Device> devices() {
  return {ts::Device::cpu(), ts::Device::emulator("nvptx:sm_80"), ts::Device::emulator("amdgpu:gfx942"),
          ts::Device::emulator("amdgpu:gfx1100")};
}

}  // namespace

TEST_CASE("pad-tiles: a 3 x 100 tile's elementwise math and reductions match the reference", "[gpu][pad][emu]") {
  for (const ts::Device& dev : devices()) {
    ts::CompiledKernel k = ts::compile(rowStats(), dev);
    for (auto [M, n] : {std::pair{6, 100}, std::pair{7, 77}}) {
      INFO(dev.name() << ", M = " << M << ", n = " << n);
      auto x = smallInts(size_t(M * n), 5);
      ts::Buffer bx = dev.upload(ts::DType::F32, x);
      ts::Buffer y = dev.alloc(ts::DType::F32, size_t(M * n)), s = dev.alloc(ts::DType::F32, size_t(M));
      ts::Buffer mx = dev.alloc(ts::DType::F32, size_t(M)), mn = dev.alloc(ts::DType::F32, size_t(M));
      ts::Buffer am = dev.alloc(ts::DType::I32, size_t(M));
      k.launch(ts::Dim3(uint32_t((M + kR - 1) / kR)), y, s, mx, mn, am, bx, int32_t(M), int32_t(n));
      auto gy = y.read<float>(), gs = s.read<float>(), gmx = mx.read<float>(), gmn = mn.read<float>();
      auto gam = am.read<int32_t>();
      for (int i = 0; i < M * n; ++i) REQUIRE(gy[size_t(i)] == 2 * x[size_t(i)] + 1);
      for (int r = 0; r < M; ++r) {
        float sum = 0, hi = -INFINITY, lo = INFINITY;
        int arg = 0;
        for (int j = 0; j < n; ++j) {
          float v = x[size_t(r * n + j)];
          sum += v;
          lo = std::min(lo, v);
          if (v > hi) hi = v, arg = j;
        }
        INFO("row " << r);
        CHECK(gs[size_t(r)] == sum);
        CHECK(gmx[size_t(r)] == hi);
        CHECK(gmn[size_t(r)] == lo);
        CHECK(gam[size_t(r)] == arg);
      }
    }
  }
}

TEST_CASE("pad-tiles: a 24 x 40 x 36 FMA dot matches the reference", "[gpu][pad][emu]") {
  struct P {
    int M, N, K;
  };
  for (const ts::Device& dev : devices()) {
    ts::CompiledKernel k = ts::compile(oddDot(), dev);
    for (P p : {P{48, 80, 72}, P{50, 77, 41}}) {
      INFO(dev.name() << ", M N K = " << p.M << " " << p.N << " " << p.K);
      auto a = smallInts(size_t(p.M * p.K), 1), b = smallInts(size_t(p.K * p.N), 2);
      ts::Buffer ba = dev.upload(ts::DType::F32, a), bb = dev.upload(ts::DType::F32, b);
      ts::Buffer c = dev.alloc(ts::DType::F32, size_t(p.M * p.N));
      k.launch(ts::Dim3(uint32_t((p.M + kBM - 1) / kBM), uint32_t((p.N + kBN - 1) / kBN)), c, ba, bb, int32_t(p.M),
               int32_t(p.N), int32_t(p.K));
      auto got = c.read<float>();
      for (int i = 0; i < p.M; ++i)
        for (int j = 0; j < p.N; ++j) {
          float want = 0;  // small integers: exact in any order
          for (int kk = 0; kk < p.K; ++kk) want += a[size_t(i * p.K + kk)] * b[size_t(kk * p.N + j)];
          INFO("at " << i << ", " << j);
          REQUIRE(got[size_t(i * p.N + j)] == want);
        }
    }
  }
}

TEST_CASE("pad-tiles: a pipelined tensor-core GEMM with 48 x 40 x 24 blocks matches the reference", "[gpu][pad][emu]") {
  namespace ex = ts::examples;
  ex::GemmBlocks blocks{48, 40, 24, 2};
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    ts::Device dev = ts::Device::emulator(arch);
    ts::CompiledKernel k = ts::compile(ex::gemmF16(blocks, ex::Activation::None), dev);
    // The padded 64 x 64 x 32 dot takes the tensor cores.
    const std::string arch_(arch);
    const char* insn = arch_ == "nvptx:sm_80"     ? "llvm.nvvm.mma"
                       : arch_ == "amdgpu:gfx942" ? "amdgcn.mfma"
                                                  : "amdgcn.wmma";
    CHECK(k.dump(ts::Stage::LLVMGpu).find(insn) != std::string::npos);
    const int M = 53, N = 70, K = 50;
    INFO(arch);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> d(-3, 3);
    std::vector<_Float16> a(size_t(M * K)), b(size_t(K * N));
    for (auto& v : a) v = _Float16(d(rng));
    for (auto& v : b) v = _Float16(d(rng));
    std::vector<float> bias(static_cast<size_t>(N));
    for (auto& v : bias) v = float(d(rng));
    ts::Buffer ba = dev.upload(ts::DType::F16, a), bb = dev.upload(ts::DType::F16, b);
    ts::Buffer bbias = dev.upload(ts::DType::F32, bias), c = dev.alloc(ts::DType::F16, size_t(M * N));
    k.launch(ex::gemmGrid(blocks, M, N), c, ba, bb, bbias, int32_t(M), int32_t(N), int32_t(K));
    auto got = c.read<_Float16>();
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        float want = bias[size_t(j)];  // |sums| <= 450 with integer terms: exact in f32 and f16
        for (int kk = 0; kk < K; ++kk) want += float(a[size_t(i * K + kk)]) * float(b[size_t(kk * N + j)]);
        INFO("at " << i << ", " << j);
        REQUIRE(float(got[size_t(i * N + j)]) == want);
      }
  }
}

TEST_CASE("pad-tiles: padded tiles are spread over the threads", "[gpu][pad]") {
  if (access("/usr/local/cuda/bin/ptxas", X_OK) != 0 && system("command -v ptxas >/dev/null 2>&1") != 0) {
    WARN("SKIP: ptxas (CUDA toolkit) not found");
    return;
  }
  // Unpadded, every thread holds a whole 100-wide dim (a 100-wide row max
  // took 120 registers on sm_90a where its padded form takes 15) and the
  // 24 x 40 x 36 dot spilled 26 KB. Padded here: 38 and 184 registers, no
  // spills.
  for (auto [kernel, maxRegs] : {std::pair{rowStats(), 48}, std::pair{oddDot(), 255}}) {
    ts::CompiledKernel k = ts::compile(kernel, ts::Target::parse("nvptx:sm_90a"));
    ts::codegen::GpuResources r = ts::codegen::gpuResources(k.artifact());
    INFO(r.text);
    CHECK(r.spillBytes == 0);
    CHECK(r.registers <= maxRegs);
    CHECK(k.artifact().warnings.empty());
  }
}

TEST_CASE("pad-tiles: a reshape that cannot be padded leaves the kernel unpadded, with a warning", "[gpu][pad]") {
  int line = 0;
  ts::Kernel k = ts::kernel("reshape_10x10", [&](ts::Ptr<float> out, ts::Ptr<const float> in) {
    auto i = ts::expand_dims(ts::arange(10), 1) * 10 + ts::expand_dims(ts::arange(10), 0);
    line = __LINE__ + 1;
    auto flat = ts::reshape(ts::load(in + i), {100});
    ts::store(out + ts::arange(100), flat * 2.0f);
  });
  ts::Device dev = ts::Device::emulator("nvptx:sm_80");
  ts::CompiledKernel ck = ts::compile(k, dev);
  REQUIRE(ck.artifact().warnings.size() == 1);
  const std::string& w = ck.artifact().warnings[0];
  CHECK_THAT(w, Catch::Contains("gpu_pad_test.cpp:" + std::to_string(line)));
  CHECK_THAT(w, Catch::Contains("warning: reshape of tile<10x10xf32> to tile<100xf32>"));
  // Still correct, only costly.
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[size_t(i)] = float(i);
  ts::Buffer in = dev.upload(ts::DType::F32, x), out = dev.alloc(ts::DType::F32, 100);
  ck.launch(ts::Dim3(1), out, in);
  auto got = out.read<float>();
  for (int i = 0; i < 100; ++i) REQUIRE(got[size_t(i)] == 2.0f * float(i));
  // The CPU needs no padding and warns about nothing.
  CHECK(ts::compile(k, ts::Device::cpu()).artifact().warnings.empty());
}

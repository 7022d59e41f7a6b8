// Kernels written as users write them, where an earlier release refused a
// valid kernel or a valid launch: each runs on the CPU and the emulated GPUs
// of both vendors against an independent reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "registry.h"
#include "support.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;

namespace tessera::examples::ref {
std::vector<double> attention(const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
                              const std::vector<uint16_t>& v, int64_t heads, int64_t n, int64_t D, bool causal,
                              float (*value)(uint16_t) = fromHalf);
}

namespace {

const char* const kTargets[] = {"cpu",
                                "emu:nvptx:sm_80",
                                "emu:nvptx:sm_90a",
                                "emu:amdgpu:gfx942",
                                "emu:amdgpu:gfx950",
                                "emu:amdgpu:gfx1100",
                                "emu:amdgpu:gfx1200"};

ts::Device deviceFor(const std::string& t) {
  return t == "cpu" ? ts::Device::cpu() : ts::Device::emulator(t.substr(4));
}

std::vector<uint16_t> halves(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> r(n);
  for (auto& h : r) {
    _Float16 x = static_cast<_Float16>(d(rng));
    std::memcpy(&h, &x, 2);
  }
  return r;
}

/// A causal flash-attention forward as a user writes it: K loaded in its
/// own [keys, D] order and transposed in registers, the causal mask built
/// from a 64 x 1 tile of query rows and a 1 x 64 tile of key columns. With
/// 8 warps on NVIDIA, the mask's broadcast once took its operand's layout,
/// a slice of a 3-D parent that left 4 positions for 256 threads: 1024
/// values per thread, refused by the register budget check.
ts::Kernel userCausalAttention(int BM, int BN, int D) {
  const float scale = 1.0f / std::sqrt(float(D));
  return ts::kernel("user_causal_attention", {"o", "q", "k", "v", "S"},
                    [=](ts::Ptr<ts::half> o, ts::Ptr<const ts::half> q, ts::Ptr<const ts::half> k,
                        ts::Ptr<const ts::half> v, ts::Int S) {
                      auto base = ts::program_id(1) * S * D;
                      auto rows = ts::expand_dims(ts::program_id(0) * BM + ts::arange(BM), 1);  // BM x 1
                      auto d0 = ts::expand_dims(ts::arange(D), 0);
                      auto qt = ts::load(q + base + rows * D + d0, rows < S);
                      auto init = std::tuple{ts::full({BM}, -ts::inf, ts::f32), ts::zeros({BM}, ts::f32),
                                             ts::zeros({BM, D}, ts::f32)};
                      auto [mi, li, acc] =
                          ts::for_range(0, S, BN, init, [&](ts::Int n0, ts::Tensor mi, ts::Tensor li, ts::Tensor acc) {
                            auto keys = ts::expand_dims(n0 + ts::arange(BN), 1);  // BN x 1
                            auto kt = ts::transpose(ts::load(k + base + keys * D + d0, keys < S), {1, 0});
                            auto s = ts::dot(qt, kt, ts::zeros({BM, BN}, ts::f32));
                            auto col = ts::expand_dims(n0 + ts::arange(BN), 0);  // 1 x BN
                            auto mask = (col < S) & (col <= rows);
                            s = ts::where(mask, s * scale, -ts::inf);
                            auto mnew = ts::maximum(mi, ts::max(s, 1));
                            auto p = ts::exp(s - ts::expand_dims(mnew, 1));
                            auto alpha = ts::exp(mi - mnew);
                            auto vt = ts::load(v + base + keys * D + d0, keys < S);
                            return std::tuple{mnew, li * alpha + ts::sum(p, 1),
                                              ts::dot(p.to(ts::f16), vt, acc * ts::expand_dims(alpha, 1))};
                          });
                      ts::store(o + base + rows * D + d0, (acc / ts::expand_dims(li, 1)).to(ts::f16), rows < S);
                    });
}

}  // namespace

TEST_CASE("an 8-warp causal attention with a transposed K matches its reference on every target",
          "[examples][outside]") {
  const int BM = 64, BN = 64, D = 64, heads = 2;
  ts::Kernel kernel = userCausalAttention(BM, BN, D);
  for (const char* target : kTargets) {
    // A sequence length that is and one that is not a multiple of the tile.
    for (int n : {128, 100}) {
      INFO(target << ", S = " << n);
      std::mt19937 rng{uint32_t(n)};
      const size_t count = size_t(heads) * n * D;
      std::vector<uint16_t> q = halves(count, rng), k = halves(count, rng), v = halves(count, rng);
      ts::Device dev = deviceFor(target);
      ts::CompileOptions o;
      o.numWarps = 8;
      ts::CompiledKernel c = ts::compile(kernel, dev, o);
      ts::Buffer out = dev.alloc(ts::DType::F16, count);
      out.fillBytes(0xff);  // NaN: an element never written cannot pass
      c.launch({uint32_t((n + BM - 1) / BM), uint32_t(heads)}, out, dev.upload(ts::DType::F16, q),
               dev.upload(ts::DType::F16, k), dev.upload(ts::DType::F16, v), int32_t(n));
      std::vector<float> got;
      for (uint16_t h : out.read<uint16_t>()) got.push_back(ex::fromHalf(h));
      // As examples/flash_attention.cpp: 4 ulp of f16 on outputs in [-1, 1];
      // a masked key let through or a key block missed moves one by ~0.1.
      const double bound = std::ldexp(1.0, -9);
      ex::CheckResult r = ex::compareWith(got, ex::ref::attention(q, k, v, heads, n, D, true), bound, "o",
                                          "|got - want| <= 2^-9", [=](size_t) { return bound; });
      INFO(r.detail << "\n" << r.summary());
      CHECK(r.ok);
    }
  }
}

namespace {

/// C = A B + bias of the gemm_f16 example's kernel with an empty M, N or
/// K, on the grid a user computes (cdiv(M, BLOCK_M) x cdiv(N, BLOCK_N)):
/// K = 0 is the epilogue of a zero accumulator, M or N = 0 an empty grid
/// that runs nothing and leaves C as it was.
void checkEmpty(const std::string& target, ex::GemmBlocks blocks, int warps, int M, int N, int K) {
  const int rows = std::max(M, 64), cols = std::max(N, 128);  // C as allocated
  INFO(target << ": " << blocks.m << "x" << blocks.n << "x" << blocks.k << " s" << blocks.stages
              << (blocks.warpSpecialized ? " warp-specialised" : "") << ", M N K = " << M << " " << N << " " << K);
  ts::Device dev = deviceFor(target);
  ts::CompileOptions o;
  o.numWarps = warps;
  ts::CompiledKernel c = ts::compile(ex::gemmF16(blocks, ex::Activation::None), dev, o);
  // 16-byte aligned buffers and sizes: on sm_90a the launch specialises to
  // the TMA variant, whose tensor maps cannot describe an empty dimension.
  std::vector<_Float16> a(size_t(std::max(M, 1)) * std::max(K, 8), _Float16(1.0f));
  std::vector<_Float16> b(size_t(std::max(K, 8)) * std::max(N, 8), _Float16(1.0f));
  std::vector<float> bias(static_cast<size_t>(cols));
  for (int j = 0; j < cols; ++j) bias[size_t(j)] = float(j % 7) - 3.0f;
  ts::Buffer cb = dev.alloc(ts::DType::F16, size_t(rows) * cols);
  cb.fillBytes(0x11);  // what an empty grid must leave
  c.launch(ex::gemmGrid(blocks, M, N), cb, dev.upload(ts::DType::F16, a), dev.upload(ts::DType::F16, b),
           dev.upload(ts::DType::F32, bias), int32_t(M), int32_t(N), int32_t(K));
  std::vector<uint16_t> got = cb.read<uint16_t>();
  size_t bad = 0;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      const uint16_t g = got[size_t(i) * cols + j];
      const bool untouched = M == 0 || N == 0 || i >= M || j >= N;
      const bool ok = untouched ? g == 0x1111 : ex::fromHalf(g) == bias[size_t(j)];
      if (!ok && bad++ < 3)
        FAIL_CHECK("C[" << i << "][" << j << "] = 0x" << std::hex << g << std::dec << " (" << ex::fromHalf(g)
                        << "), want " << (untouched ? "untouched" : "the bias"));
    }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("a GEMM with an empty M, N or K gives the epilogue of a zero product, with TMA and warp specialisation too",
          "[examples][outside]") {
  for (const char* target : kTargets)
    for (auto [M, N, K] : {std::tuple{64, 128, 0}, std::tuple{0, 128, 64}, std::tuple{64, 0, 64}})
      checkEmpty(target, {64, 64, 32, 2, false}, 4, M, N, K);
  // sm_90a: TMA slots, then TMA issued by a producer warp.
  for (bool ws : {false, true})
    for (auto [M, N, K] : {std::tuple{64, 128, 0}, std::tuple{0, 128, 64}, std::tuple{64, 0, 64}})
      checkEmpty("emu:nvptx:sm_90a", {64, 64, 64, 3, ws}, 4, M, N, K);
}

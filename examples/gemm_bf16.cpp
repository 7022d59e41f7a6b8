// gemm_bf16: C (f32) = A (bf16) @ B (bf16) + bias (f32), accumulated in f32.
//
// The tiling of gemm_f32 (one BLOCK_M x BLOCK_N tile of C per program, a K
// loop carrying an f32 accumulator): dot takes the bf16 tiles and
// accumulates in f32 (each bf16 x bf16 product is exact in f32); the output
// stays f32, as in mixed-precision training.
//
// Shape: {M, N, K}; default {300, 200, 150}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel gemmBF16(GemmBlocks B) {
  return ts::kernel("gemm_bf16", {"c", "a", "b", "bias", "M", "N", "K"},
                    [=](ts::Ptr<float> c, ts::Ptr<const ts::bfloat16> a, ts::Ptr<const ts::bfloat16> b,
                        ts::Ptr<const float> bias, ts::Int M, ts::Int N, ts::Int K) {
                      auto row = ts::expand_dims(ts::program_id(0) * B.m + ts::arange(B.m), 1);
                      auto col = ts::expand_dims(ts::program_id(1) * B.n + ts::arange(B.n), 0);
                      auto rk = ts::arange(B.k);
                      auto acc = ts::for_range(0, K, B.k, ts::zeros({B.m, B.n}, ts::f32),
                                               [&](ts::Int k0, ts::Tensor acc) {
                                                 auto ka = ts::expand_dims(k0 + rk, 0);
                                                 auto kb = ts::expand_dims(k0 + rk, 1);
                                                 auto ta = ts::load(a + row * K + ka, (row < M) & (ka < K));
                                                 auto tb = ts::load(b + kb * N + col, (kb < K) & (col < N));
                                                 return ts::dot(ta, tb, acc);  // bf16 x bf16 -> f32
                                               });
                      auto y = acc + ts::load(bias + col, col < N);
                      ts::store(c + row * N + col, y, (row < M) & (col < N));
                    });
}

namespace {

// bf16 is the top half of an f32: round to nearest even (inputs are finite).
uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

CheckResult run(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{300, 200, 150} : ctx.shape;
  if (s.size() != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[0] * s[2] > (1 << 28) || s[2] * s[1] > (1 << 28) ||
      s[0] * s[1] > (1 << 28))
    throw Error("gemm_bf16: the shape is {M, N, K}, each >= 1, every matrix at most 2^28 elements");
  int64_t M = s[0], N = s[1], K = s[2];
  std::mt19937_64 rng(ctx.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Inputs are bf16 values; the reference uses exactly those values.
  std::vector<uint16_t> a(size_t(M * K)), b(size_t(K * N));
  for (auto& x : a) x = toBf16(dist(rng));
  for (auto& x : b) x = toBf16(dist(rng));
  std::vector<float> bias(static_cast<size_t>(N));
  for (auto& x : bias) x = dist(rng);

  GemmBlocks B = gemmDefaultBlocks(ctx.device);
  CompiledKernel k = compile(gemmBF16(B), ctx.device, ctx.options);
  Buffer da = ctx.device.upload(DType::BF16, a), db = ctx.device.upload(DType::BF16, b);
  Buffer dbias = ctx.device.upload(DType::F32, bias);
  Buffer dc = ctx.device.alloc(DType::F32, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Dim3 grid(uint32_t((M + B.m - 1) / B.m), uint32_t((N + B.n - 1) / B.n));
  k.launchWith(grid, {dc, da, db, dbias, int32_t(M), int32_t(N), int32_t(K)}, ctx.launch);
  std::vector<float> got = dc.read<float>();

  // Reference in double. Tolerance: the f32 accumulation of K + 1 terms,
  // 2 (K + 1) 2^-24 sum|terms| (see gemm_f32), with an absolute floor of
  // 1e-7 for results that cancel. A missing product term is ~0.25 on average.
  const double factor = 2.0 * double(K + 1) * std::ldexp(1.0, -24);
  ElementCheck check(factor, "c");
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = bias[size_t(j)], mag = std::fabs(want);
      for (int64_t kk = 0; kk < K; ++kk) {
        double p = double(fromBf16(a[size_t(i * K + kk)])) * double(fromBf16(b[size_t(kk * N + j)]));
        want += p;
        mag += std::fabs(p);
      }
      double g = got[size_t(i * N + j)];
      check(g, want, factor * mag + 1e-7, [&] { return "at (" + std::to_string(i) + ", " + std::to_string(j) + ")"; });
    }
  return check.result();
}
}  // namespace

Example gemmBF16Example() {
  Example e;
  e.name = "gemm_bf16";
  e.summary = "C (f32) = A (bf16) @ B (bf16) + bias, f32 accumulation, dot over a K loop";
  e.kernel = [] { return gemmBF16(gemmDefaultBlocks(Device::cpu())); };
  e.gpuKernel = [] { return gemmBF16(gemmDefaultBlocks(Device::emulator("nvptx:sm_80"))); };
  e.run = run;
  e.testShapes = {{64, 64, 64}, {100, 77, 33}, {1, 1, 1}, {257, 129, 65}};
  return e;
}

}  // namespace tessera::examples

#ifdef TESSERA_EXAMPLE_MAIN
// Usage: gemm_bf16 [--dump] [M N K]
int main(int argc, char** argv) {
  return tessera::examples::exampleMain(argc, argv, tessera::examples::gemmBF16Example());
}
#endif

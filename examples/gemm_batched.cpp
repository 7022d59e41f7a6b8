// gemm_batched: C[z] = A[z] @ B[z] for z in [0, batch), f32.
//
// The tiling of gemm_f32 on a 3-D grid: axes 0 and 1 pick the BLOCK_M x
// BLOCK_N tile of C, axis 2 picks the matrix of the batch. The matrices of a
// batch are stored one after another (A is batch x M x K, and so on), so
// program z offsets its base pointers by z times the matrix size.
//
// Shape: {batch, M, N, K}; default {6, 100, 90, 80}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel gemmBatched(GemmBlocks B) {
  return ts::kernel(
      "gemm_batched", {"c", "a", "b", "M", "N", "K"},
      [=](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b, ts::Int M, ts::Int N, ts::Int K) {
        auto z = ts::program_id(2);  // which matrix of the batch
        auto az = a + z * (M * K), bz = b + z * (K * N);
        auto cz = c + z * (M * N);
        auto row = ts::expand_dims(ts::program_id(0) * B.m + ts::arange(B.m), 1);
        auto col = ts::expand_dims(ts::program_id(1) * B.n + ts::arange(B.n), 0);
        auto rk = ts::arange(B.k);
        auto acc = ts::for_range(0, K, B.k, ts::zeros({B.m, B.n}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
          auto ka = ts::expand_dims(k0 + rk, 0);
          auto kb = ts::expand_dims(k0 + rk, 1);
          auto ta = ts::load(az + row * K + ka, (row < M) & (ka < K));
          auto tb = ts::load(bz + kb * N + col, (kb < K) & (col < N));
          return ts::dot(ta, tb, acc);
        });
        ts::store(cz + row * N + col, acc, (row < M) & (col < N));
      });
}

namespace {

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{6, 100, 90, 80} : ctx.shape;
  if (s.size() != 4 || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[3] < 1 || s[0] > 65535 || s[0] * s[1] * s[3] > (1 << 28) ||
      s[0] * s[3] * s[2] > (1 << 28) || s[0] * s[1] * s[2] > (1 << 28))
    throw UsageError(
        "gemm_batched: the shape is {batch, M, N, K}, each >= 1, batch <= 65535, every batched "
        "operand at most 2^28 elements");
  int64_t Z = s[0], M = s[1], N = s[2], K = s[3];
  std::mt19937_64 rng(ctx.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(size_t(Z * M * K)), b(size_t(Z * K * N));
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);

  GemmBlocks B = gemmDefaultBlocks(ctx.device);
  Buffer da = ctx.device.upload(DType::F32, a), db = ctx.device.upload(DType::F32, b);
  Buffer dc = ctx.device.alloc(DType::F32, size_t(Z * M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Dim3 grid(uint32_t((M + B.m - 1) / B.m), uint32_t((N + B.n - 1) / B.n), uint32_t(Z));
  Launch launch{gemmBatched(B), grid, {dc, da, db, int32_t(M), int32_t(N), int32_t(K)}, s};

  // Reference in double. Tolerance as gemm_f32: f32 accumulation of K terms
  // is within 2 K 2^-24 sum|a b| (doubled first-order bound) plus a 1e-7
  // floor. Every batch has its own random data, so a wrong batch offset is
  // an error of order 1.
  launch.check = [dc, a = std::move(a), b = std::move(b), Z, M, N, K] {
    std::vector<float> got = dc.read<float>();
    const double factor = 2.0 * double(K + 1) * std::ldexp(1.0, -24);
    ElementCheck check(factor, "c",
                       "|got - want| <= f sum_k |a b| + 1e-7, f = 2 (K + 1) 2^-24 = " + ElementCheck::fmt(factor));
    for (int64_t z = 0; z < Z; ++z)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double want = 0, mag = 0;
          for (int64_t kk = 0; kk < K; ++kk) {
            double p = double(a[size_t((z * M + i) * K + kk)]) * double(b[size_t((z * K + kk) * N + j)]);
            want += p;
            mag += std::fabs(p);
          }
          double g = got[size_t((z * M + i) * N + j)];
          check(g, want, factor * mag + 1e-7, [&] {
            return "at batch " + std::to_string(z) + " (" + std::to_string(i) + ", " + std::to_string(j) + ")";
          });
        }
    return check.result();
  };
  return launch;
}
}  // namespace

Example gemmBatchedExample() {
  Example e;
  e.name = "gemm_batched";
  e.summary = "C[z] = A[z] @ B[z] in f32 over a 3-D grid (batch on axis 2)";
  e.kernel = [] { return gemmBatched(gemmDefaultBlocks(Device::cpu())); };
  e.gpuKernel = [](const Target& t) { return gemmBatched(gemmDefaultBlocks(t)); };
  e.prepare = prepare;
  e.testShapes = {{2, 64, 64, 64}, {3, 100, 77, 33}, {1, 1, 1, 1}, {2, 257, 129, 65}, {5, 7, 9, 3}};
  return e;
}

}  // namespace tessera::examples

// Usage: gemm_batched [--dump] [batch M N K]
TESSERA_EXAMPLE_PROGRAM(gemmBatchedExample)

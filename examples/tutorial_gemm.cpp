// tutorial_gemm: C (f32) = A (f16) @ B (f16), software-pipelined (docs/tutorial.md, step 3).
//
// Program (i, j) owns the BM x BN tile of C at rows i*BM.., columns j*BN...
// The K loop is ts::for_pipelined: its body is written as the plain loop
// (copy this iteration's A and B tiles into shared memory, read them back,
// multiply-accumulate), and the compiler overlaps the copies of the next
// STAGES-1 iterations with the dot of this one (cp.async on NVIDIA, loads
// issued early into registers on AMD, a plain copy on the CPU). ts::dot on
// f16 tiles with an f32 accumulator maps onto the tensor cores (mma.sync on
// sm_80+, MFMA on gfx90a/gfx942, WMMA on gfx1100).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel tutorialGemm(int BM, int BN, int BK, int STAGES) {
  auto body = [=](ts::Ptr<float> c, ts::Ptr<const ts::half> a, ts::Ptr<const ts::half> b, ts::Int M, ts::Int N,
                  ts::Int K) {
    auto rm = ts::expand_dims(ts::program_id(0) * BM + ts::arange(BM), 1);  // BM x 1: rows of A and C
    auto rn = ts::expand_dims(ts::program_id(1) * BN + ts::arange(BN), 0);  // 1 x BN: columns of B and C
    auto ka = ts::expand_dims(ts::arange(BK), 0);                           // 1 x BK
    auto kb = ts::expand_dims(ts::arange(BK), 1);                           // BK x 1

    // One stage's tiles; stage_copy turns them into STAGES slots.
    auto sa = ts::alloc_shared(ts::f16, {BM, BK});
    auto sb = ts::alloc_shared(ts::f16, {BK, BN});
    auto acc = ts::for_pipelined(0, K, BK, STAGES, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k, ts::Tensor acc) {
      // Masked lanes (outside A or B) are not read and give 0: they add nothing.
      auto ta = ts::stage_copy(sa, a + rm * K + (k + ka), (rm < M) & (k + ka < K));
      auto tb = ts::stage_copy(sb, b + (k + kb) * N + rn, (k + kb < K) & (rn < N));
      return ts::dot(ta.load(), tb.load(), acc);  // f16 x f16 -> f32 accumulator
    });
    ts::store(c + rm * N + rn, acc, (rm < M) & (rn < N));
  };
  return ts::kernel("tutorial_gemm", {"c", "a", "b", "M", "N", "K"}, body);
}

namespace {
constexpr int kBM = 32, kBN = 32, kBK = 32, kStages = 3;

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{300, 200, 150} : ctx.shape;
  if (s.size() != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[0] * s[2] > (1 << 28) || s[2] * s[1] > (1 << 28) ||
      s[0] * s[1] > (1 << 28))
    throw UsageError("tutorial_gemm: the shape is {M, N, K}, each >= 1, every matrix at most 2^28 elements");
  const int64_t M = s[0], N = s[1], K = s[2];
  std::mt19937_64 rng(ctx.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> a(size_t(M * K)), b(size_t(K * N));  // f16 bits
  for (auto& x : a) x = toHalf(dist(rng));
  for (auto& x : b) x = toHalf(dist(rng));

  Buffer da = ctx.device.upload(DType::F16, a), db = ctx.device.upload(DType::F16, b);
  Buffer dc = ctx.device.alloc(DType::F32, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Dim3 grid(uint32_t((M + kBM - 1) / kBM), uint32_t((N + kBN - 1) / kBN));
  Launch launch{tutorialGemm(kBM, kBN, kBK, kStages), grid, {dc, da, db, int32_t(M), int32_t(N), int32_t(K)}, s};

  // Products of f16 values are exact in f32; the f32 sum of K terms is within
  // 2 K 2^-24 sum|terms| of the exact sum (doubled first-order bound). A
  // missing or doubled product (~0.25) is far outside it.
  launch.check = [dc, a = std::move(a), b = std::move(b), M, N, K] {
    std::vector<float> got = dc.read<float>();
    const double factor = 2.0 * double(K) * std::ldexp(1.0, -24);
    ElementCheck check(factor, "c", "|got - want| <= f sum_k |a b|, f = 2 K 2^-24 = " + ElementCheck::fmt(factor));
    GemmReference ref = gemmReference(
        M, N, K, [&](int64_t i, int64_t kk) { return fromHalf(a[size_t(i * K + kk)]); },
        [&](int64_t kk, int64_t j) { return fromHalf(b[size_t(kk * N + j)]); }, {}, 0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = ref.want[size_t(i * N + j)], bound = factor * ref.mag[size_t(i * N + j)] + 1e-30;
        check(got[size_t(i * N + j)], want, bound,
              [&] { return "at (" + std::to_string(i) + ", " + std::to_string(j) + ")"; });
      }
    return check.result();
  };
  return launch;
}
}  // namespace

Example tutorialGemmExample() {
  Example e;
  e.name = "tutorial_gemm";
  e.summary = "C (f32) = A (f16) @ B (f16), K loop software-pipelined through shared memory (tutorial step 3)";
  e.kernel = [] { return tutorialGemm(kBM, kBN, kBK, kStages); };
  e.prepare = prepare;
  // Multiples of the 32 x 32 x 32 tiles; ragged in every dimension; a single
  // element; K shorter than the pipeline (one iteration, two stages empty).
  e.testShapes = {{64, 64, 128}, {37, 45, 70}, {1, 1, 1}, {33, 17, 20}};
  return e;
}

}  // namespace tessera::examples

// Usage: tutorial_gemm [--dump] [M N K]
TESSERA_EXAMPLE_PROGRAM(tutorialGemmExample)

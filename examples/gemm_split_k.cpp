// gemm_split_k: C = A @ B in f32 (A M x K, B K x N) for outputs with few
// tiles and a long K, where one program per tile would leave most of a
// machine idle: every BLOCK_M x BLOCK_N tile of C is computed by SPLITS
// programs, each walking its own contiguous range of the K steps, and the
// partial tiles are joined in the same launch.
//
// The schedule is ts::Tiles(...).splitK(SPLITS, K, BLOCK_K) over
// ts::for_tiles with an epilogue (docs/dsl.md, "Split-K and stream-K"):
// the body returns each split's f32 accumulator, the construct stores it
// in the split's workspace slot and counts it in on the tile's i32 flag,
// and the split that arrives last adds the slots in split order and runs
// the epilogue, which stores the tile. The adds' order is fixed, so C is
// bitwise the same whichever split finishes last, and the flags are left
// zero for the next launch.
//
// Shape: {M, N, K} or {M, N, K, SPLITS}; default {128, 128, 4096} with 4
// splits.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel gemmSplitK(GemmBlocks B, int splits) {
  return ts::kernel("gemm_split_k", {"c", "a", "b", "workspace", "flags", "M", "N", "K"},
                    [=](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b, ts::Ptr<float> ws,
                        ts::Ptr<int32_t> flags, ts::Int M, ts::Int N, ts::Int K) {
                      ts::for_tiles(
                          ts::Tiles(M, N, B.m, B.n).splitK(splits, K, B.k).workspace(ws, flags),
                          [&](const ts::Tile& t) {  // one split: the K elements [t.kBegin, t.kEnd)
                            auto row = ts::expand_dims(t.row0 + ts::arange(B.m), 1),
                                 col = ts::expand_dims(t.col0 + ts::arange(B.n), 0);
                            auto rk = ts::arange(B.k);
                            return ts::for_range(
                                t.kBegin, t.kEnd, B.k, ts::zeros({B.m, B.n}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
                                  auto ka = ts::expand_dims(k0 + rk, 0), kb = ts::expand_dims(k0 + rk, 1);
                                  auto ta = ts::load(a + row * K + ka, (row < t.rowEnd) & (ka < t.kEnd));
                                  auto tb = ts::load(b + kb * N + col, (kb < t.kEnd) & (col < t.colEnd));
                                  return ts::dot(ta, tb, acc);
                                });
                          },
                          [&](const ts::Tile& t, const ts::Tensor& acc) {  // once per tile: the splits' sum
                            auto row = ts::expand_dims(t.row0 + ts::arange(B.m), 1),
                                 col = ts::expand_dims(t.col0 + ts::arange(B.n), 0);
                            ts::store(c + row * N + col, acc, (row < t.rowEnd) & (col < t.colEnd));
                          });
                    });
}

namespace {

constexpr int kDefaultSplits = 4;

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{128, 128, 4096, kDefaultSplits} : ctx.shape;
  if (s.size() < 3 || s.size() > 4 || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[0] * s[2] > (1 << 28) ||
      s[2] * s[1] > (1 << 28) || s[0] * s[1] > (1 << 28) || (s.size() == 4 && (s[3] < 1 || s[3] > 64)))
    throw UsageError(
        "gemm_split_k: the shape is {M, N, K} or {M, N, K, splits} (splits 1 .. 64), each >= 1, every matrix at "
        "most 2^28 elements");
  const int64_t M = s[0], N = s[1], K = s[2];
  const int splits = s.size() == 4 ? int(s[3]) : kDefaultSplits;
  std::mt19937_64 rng(ctx.seed);
  std::vector<float> a = randomVector(size_t(M * K), rng), b = randomVector(size_t(K * N), rng);

  const GemmBlocks B = gemmBlocksFor(ctx);
  const int64_t tiles = Tiles::count(M, N, B.m, B.n);
  Buffer da = ctx.device.upload(DType::F32, a), db = ctx.device.upload(DType::F32, b);
  Buffer dc = ctx.device.alloc(DType::F32, size_t(M * N));
  dc.fillBytes(0xff);  // NaN: an element the kernel fails to write cannot pass
  Buffer ws = ctx.device.alloc(DType::F32, size_t(Tiles::splitKWorkspace(tiles, splits, B.m, B.n)));
  Buffer flags = ctx.device.upload(DType::I32, std::vector<int32_t>(size_t(tiles), 0));
  // One program per split of every tile.
  Launch launch{gemmSplitK(B, splits),
                Dim3(uint32_t(tiles * splits)),
                {dc, da, db, ws, flags, int32_t(M), int32_t(N), int32_t(K)},
                s};
  launch.gemm = perf::GemmProblem{da, db, dc, M, N, K};
  launch.schedule = Tiles(M, N, B.m, B.n).splitK(splits, K, B.k);

  // Tolerance as gemm_f32's: a sum of K f32 terms in any order is within
  // K 2^-24 sum |terms| of the exact value (doubled for margin); a missing
  // or doubled split (a K range of |a b| ~ 0.25 terms) is far outside it.
  // A flag left set means a split never counted in or the join never ran.
  launch.check = [dc, flags, a = std::move(a), b = std::move(b), M, N, K] {
    GemmReference ref = gemmReference(
        M, N, K, [&](int64_t i, int64_t kk) { return a[size_t(i * K + kk)]; },
        [&](int64_t kk, int64_t j) { return b[size_t(kk * N + j)]; }, {}, 0);
    const double factor = 2.0 * double(K + 1) * std::ldexp(1.0, -24);
    CheckResult r =
        compareWith(dc.read<float>(), ref.want, factor, "c",
                    "|got - want| <= 1.2 f sum_k |a b| + 1e-6, f = 2 (K + 1) 2^-24 = " + ElementCheck::fmt(factor),
                    [&](size_t i) { return 1.2 * factor * ref.mag[i] + 1e-6; });
    for (int32_t f : flags.read<int32_t>())
      if (f != 0 && r.ok) {
        r.ok = false;
        r.detail = "a tile's flag was left at " + std::to_string(f) + " (the last split resets it)";
      }
    return r;
  };
  return launch;
}

}  // namespace

Example gemmSplitKExample() {
  Example e;
  e.name = "gemm_split_k";
  e.summary = "C = A @ B in f32 with each tile's K split over SPLITS programs, joined in split order in the launch";
  e.kernel = [] { return gemmSplitK(gemmDefaultBlocks(Device::cpu()), kDefaultSplits); };
  e.gpuKernel = [](const Target& t) { return gemmSplitK(gemmDefaultBlocks(t), kDefaultSplits); };
  e.prepare = prepare;
  e.dtype = "f32";
  // Aligned; ragged with more tiles than one; a single element in two
  // splits; K shorter than one step, so all splits but one are empty.
  e.testShapes = {{64, 64, 256, 4}, {70, 37, 301, 3}, {1, 1, 1, 2}, {40, 9, 20, 8}};
  return e;
}

}  // namespace tessera::examples

// Usage: gemm_split_k [--dump] [M N K [splits]]
TESSERA_EXAMPLE_PROGRAM(gemmSplitKExample)

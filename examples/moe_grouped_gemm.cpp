// moe_grouped_gemm: the expert GEMMs of a mixture-of-experts layer in one
// launch. Tokens arrive sorted by the expert they were routed to: x is
// [tokens, K] f16, expert e owns rows offsets[e] .. offsets[e+1] - 1, and
// multiplies them by its own weights w[e] ([experts, K, N] f16):
//
//   out[t] = x[t] @ w[e(t)]                                    (moe_grouped_gemm)
//   out[t] = silu(x[t] @ w_gate[e(t)]) * (x[t] @ w_up[e(t)])   (moe_grouped_gemm_swiglu)
//
// with f32 accumulation and an f16 result; silu(g) = g * sigmoid(g). The
// SwiGLU variant is the usual first half of an expert MLP, both products
// accumulated in the same K loop so x is read once.
//
// The tiles come from a ragged tile schedule (ts::for_tiles over
// ts::Tiles(...).ragged(offsets, experts), tessera/dsl/Tiles.h): each
// expert's rows are cut into tiles of their own, so no tile straddles two
// experts, and an expert with no tokens has no tiles, so no program works
// on it. The grid is one axis of Tiles::raggedBound programs (moeGrid);
// a program finds its tile's expert by a scan over the offsets, and one
// past the last tile does nothing else. On the GPUs the K loop is a
// 3-stage for_pipelined inside the schedule's branch: its copy pointers
// depend on the tile's rows and expert, values computed before the loop,
// so the schedule may compute them stages - 1 iterations ahead. On the CPU
// it is a plain for_range (a staged copy there is one more copy of each
// tile: support.h, gemmMainLoop).
//
// Shape: {tokens, experts, K, N}; default {512, 8, 256, 256}. Tokens are
// routed at random, with expert 1 left empty where there are several.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel moeGroupedGemm(GemmBlocks B, bool swiglu) {
  const int BM = B.m, BN = B.n, BK = B.k;
  return ts::kernel(
      swiglu ? "moe_grouped_gemm_swiglu" : "moe_grouped_gemm",
      {"out", "x", "w", "w_up", "offsets", "experts", "N", "K"},
      [=](ts::Ptr<ts::half> out, ts::Ptr<const ts::half> x, ts::Ptr<const ts::half> w, ts::Ptr<const ts::half> wUp,
          ts::Ptr<const int32_t> offsets, ts::Int experts, ts::Int N, ts::Int K) {
        ts::for_tiles(ts::Tiles(0, N, BM, BN).ragged(offsets, experts), [&](const ts::Tile& t) {
          auto row = ts::expand_dims(t.row0 + ts::arange(BM), 1);  // BM x 1: this expert's tokens
          auto col = ts::expand_dims(t.col0 + ts::arange(BN), 0);  // 1 x BN
          auto end = t.rowEnd;
          auto rk = ts::arange(BK);
          auto wOff = t.group.to(ts::i64) * K * N;  // expert e's [K, N] weights
          auto zero = ts::zeros({BM, BN}, ts::f32);
          auto ptrA = [&](ts::Int k0) { return x + row * K + ts::expand_dims(k0 + rk, 0); };
          auto maskA = [&](ts::Int k0) { return (row < end) & (ts::expand_dims(k0 + rk, 0) < K); };
          auto ptrB = [&](auto base, ts::Int k0) { return base + wOff + ts::expand_dims(k0 + rk, 1) * N + col; };
          auto maskB = [&](ts::Int k0) { return (ts::expand_dims(k0 + rk, 1) < K) & (col < N); };
          std::tuple<ts::Tensor, ts::Tensor> gu;
          if (B.stages >= 1) {
            auto sa = ts::alloc_shared(ts::f16, {BM, BK});  // one stage each; stage_copy makes `stages` slots
            auto sg = ts::alloc_shared(ts::f16, {BK, BN});
            auto su = swiglu ? ts::alloc_shared(ts::f16, {BK, BN}) : sg;  // (unused without SwiGLU)
            gu = ts::for_pipelined(
                0, K, BK, B.stages, std::tuple{zero, zero}, [&](ts::Int k0, ts::Tensor g, ts::Tensor u) {
                  auto a = ts::stage_copy(sa, ptrA(k0), maskA(k0)).load();
                  auto gNew = ts::dot(a, ts::stage_copy(sg, ptrB(w, k0), maskB(k0)).load(), g);
                  if (!swiglu) return std::tuple{gNew, u};
                  return std::tuple{gNew, ts::dot(a, ts::stage_copy(su, ptrB(wUp, k0), maskB(k0)).load(), u)};
                });
          } else {
            gu = ts::for_range(0, K, BK, std::tuple{zero, zero}, [&](ts::Int k0, ts::Tensor g, ts::Tensor u) {
              auto a = ts::load(ptrA(k0), maskA(k0));  // BM x BK
              auto gNew = ts::dot(a, ts::load(ptrB(w, k0), maskB(k0)), g);
              if (!swiglu) return std::tuple{gNew, u};
              return std::tuple{gNew, ts::dot(a, ts::load(ptrB(wUp, k0), maskB(k0)), u)};
            });
          }
          auto [g, u] = gu;
          auto y = swiglu ? g * ts::sigmoid(g) * u : g;
          ts::store(out + row * N + col, y.to(ts::f16), (row < end) & (col < N));
        });
      });
}

Dim3 moeGrid(GemmBlocks B, int64_t tokens, int64_t experts, int64_t N) {
  return Dim3(uint32_t(std::max<int64_t>(1, Tiles::raggedBound(tokens, experts, N, B.m, B.n))));
}

namespace ref {
/// Plain C++ in double, token by token with its expert found from the
/// offsets; `mag` bounds the f32 accumulation error of each output
/// (sum |x w| of each product it depends on, scaled by its slope).
void moe(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, const std::vector<uint16_t>& wUp,
         const std::vector<int32_t>& offsets, int64_t K, int64_t N, bool swiglu, std::vector<double>& want,
         std::vector<double>& mag) {
  const int64_t T = offsets.back();
  want.assign(size_t(T * N), 0.0);
  mag.assign(size_t(T * N), 0.0);
  int64_t e = 0;
  for (int64_t t = 0; t < T; ++t) {
    while (offsets[size_t(e + 1)] <= t) ++e;
    for (int64_t n = 0; n < N; ++n) {
      double g = 0, u = 0, mg = 0, mu = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double xv = fromHalf(x[size_t(t * K + k)]);
        const size_t wi = size_t((e * K + k) * N + n);
        g += xv * fromHalf(w[wi]);
        mg += std::fabs(xv * fromHalf(w[wi]));
        if (swiglu) {
          u += xv * fromHalf(wUp[wi]);
          mu += std::fabs(xv * fromHalf(wUp[wi]));
        }
      }
      const size_t o = size_t(t * N + n);
      if (!swiglu) {
        want[o] = g;
        mag[o] = mg;
        continue;
      }
      const double s = 1.0 / (1.0 + std::exp(-g)), silu = g * s;
      want[o] = silu * u;
      mag[o] = 1.1 * std::fabs(u) * mg + std::fabs(silu) * mu;  // |silu'| <= 1.1
    }
  }
}
}  // namespace ref

namespace {

GemmBlocks moeBlocks(const Target& t) {
  // 64 rows: an expert holds tokens / experts rows on average, and a
  // 128-row tile of a 32-row expert computes 4x the work it keeps
  // (tessera_moe_bench: 0.25x oneDNN at 1024 tokens over 32 experts with
  // 128 rows, 0.57x with 64; docs/bench.md).
  if (t.kind == Target::Kind::CPU) return {64, 128, 64, 0};
  return {32, 32, 32, 3};
}
GemmBlocks moeBlocks(const Device& d) {
  if (d.kind() == rt::DeviceKind::CPU) return moeBlocks(Target::parse("cpu"));
  return moeBlocks(Target::parse(d.kind() == rt::DeviceKind::Emulator ? "emu:" + d.arch() : d.arch()));
}

Launch prepare(const RunContext& ctx, bool swiglu) {
  const char* name = swiglu ? "moe_grouped_gemm_swiglu" : "moe_grouped_gemm";
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{512, 8, 256, 256} : ctx.shape;
  if (s.size() != 4 || s[0] < 1 || s[1] < 1 || s[1] > 65535 || s[2] < 1 || s[3] < 1 ||
      s[1] * s[2] * s[3] > (int64_t{1} << 28) || s[0] * std::max(s[2], s[3]) > (int64_t{1} << 28))
    throw Error(std::string(name) +
                ": the shape is {tokens, experts, K, N}, all >= 1, experts <= 65535, experts * K * N and "
                "tokens * max(K, N) at most 2^28");
  const int64_t T = s[0], E = s[1], K = s[2], N = s[3];
  std::mt19937_64 rng(ctx.seed);
  // Routing: each token to a random expert (expert 1 empty when E > 2),
  // then sorted by expert, as the dispatch step leaves them.
  std::vector<int32_t> count(static_cast<size_t>(E), 0);
  for (int64_t t = 0; t < T; ++t) {
    int64_t e = std::uniform_int_distribution<int64_t>(0, E - 1)(rng);
    if (E > 2 && e == 1) e = 0;
    ++count[size_t(e)];
  }
  std::vector<int32_t> offsets(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) offsets[size_t(e + 1)] = offsets[size_t(e)] + count[size_t(e)];
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto halves = [&](size_t n) {
    std::vector<uint16_t> h(n);
    for (auto& v : h) v = toHalf(dist(rng));
    return h;
  };
  std::vector<uint16_t> x = halves(size_t(T * K)), w = halves(size_t(E * K * N));
  std::vector<uint16_t> wUp = swiglu ? halves(w.size()) : std::vector<uint16_t>{0};
  const GemmBlocks B = moeBlocks(ctx.device);
  const Device& dev = ctx.device;
  Buffer dout = dev.alloc(DType::F16, size_t(T * N));
  dout.fillBytes(0xff);  // NaN: an output never written cannot pass
  Launch launch{moeGroupedGemm(B, swiglu),
                moeGrid(B, T, E, N),
                {dout, dev.upload(DType::F16, x), dev.upload(DType::F16, w), dev.upload(DType::F16, wUp),
                 dev.upload(DType::I32, offsets), int32_t(E), int32_t(N), int32_t(K)},
                {T, E, K, N}};
  // Tolerance as gemm_f16's: the f32 accumulation of K products is within
  // 2 K 2^-24 sum|terms| (doubled first-order bound), carried through silu
  // and the product by the slopes in `mag`; sigmoid in f32 adds a few ulp
  // (1e-6 relative); then the rounding to f16 (2^-11 relative, 2^-25
  // absolute). A product term missed or taken from another expert's
  // weights moves an output by ~0.25 on average, far outside.
  launch.check = [dout, x = std::move(x), w = std::move(w), wUp = std::move(wUp), offsets = std::move(offsets), K, N,
                  swiglu] {
    std::vector<double> want, mag;
    ref::moe(x, w, wUp, offsets, K, N, swiglu, want, mag);
    std::vector<uint16_t> got = dout.read<uint16_t>();
    const double factor = 2.0 * double(K) * std::ldexp(1.0, -24);
    ElementCheck check(factor, "out",
                       "|got - want| <= f sum_k |a b| + (1e-6 + 1.01 2^-11) |want| + 1e-6 + 2^-25, f = 2 K 2^-24 = " +
                           ElementCheck::fmt(factor));
    for (size_t i = 0; i < want.size(); ++i)
      check(fromHalf(got[i]), want[i],
            factor * mag[i] + 1e-6 * std::fabs(want[i]) + 1e-6 + std::ldexp(std::fabs(want[i]), -11) * 1.01 +
                std::ldexp(1.0, -25),
            [&] { return "at (" + std::to_string(i / size_t(N)) + ", " + std::to_string(i % size_t(N)) + ")"; });
    return check.result();
  };
  return launch;
}

Example make(bool swiglu) {
  Example e;
  e.name = swiglu ? "moe_grouped_gemm_swiglu" : "moe_grouped_gemm";
  e.summary = swiglu ? "MoE expert GEMMs with a fused SwiGLU: silu(x @ w_gate[e]) * (x @ w_up[e]), tokens sorted by "
                       "expert, one launch"
                     : "MoE grouped GEMM: x @ w[e] for tokens sorted by expert (an offsets array), f16 in, f32 "
                       "accumulation, one launch";
  e.kernel = [swiglu] { return moeGroupedGemm(moeBlocks(Target::parse("cpu")), swiglu); };
  e.gpuKernel = [swiglu](const Target& t) { return moeGroupedGemm(moeBlocks(t), swiglu); };
  e.prepare = [swiglu](const RunContext& ctx) { return prepare(ctx, swiglu); };
  // One token; ragged experts with an empty one; a single expert with
  // aligned sizes; many small experts.
  e.testShapes = {{1, 1, 16, 16}, {77, 4, 40, 33}, {64, 1, 64, 64}, {100, 16, 24, 48}};
  return e;
}

}  // namespace

Example moeGroupedGemmExample() { return make(false); }
Example moeGroupedGemmSwigluExample() { return make(true); }

}  // namespace tessera::examples

// Usage: moe_grouped_gemm [--dump] [tokens experts K N]
TESSERA_EXAMPLE_PROGRAM(moeGroupedGemmExample)

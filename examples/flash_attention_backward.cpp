// flash_attention_backward: the gradients dQ, dK, dV of
// O = softmax(Q K^T / sqrt(D)) V, f16 [heads, n, D], given dO and what the
// forward pass keeps (O and the rows' log-sum-exp L = m + log l of the
// scaled scores), as FlashAttention-2's backward computes them, without
// ever holding the n x n matrices:
//
//   P = exp(S - L),  dV = P^T dO,  dP = dO V^T,  Delta = rowsum(dO * O),
//   dS = P * (dP - Delta),  dQ = dS K / sqrt(D),  dK = dS^T Q / sqrt(D).
//
// One launch, two kinds of program, both free of atomics (deterministic):
// program (j, h) with j < ceil(n / BLOCK_N) owns BLOCK_N keys of head h and
// walks the query blocks, recomputing P^T for its keys and accumulating dV
// and dK (two dots each step, all in the transposed BLOCK_N x BLOCK_M
// space, so no tile is transposed: Q^T and dO^T are read transposed by the
// addressing); the others own BLOCK_M query rows each and walk the key
// blocks accumulating dQ. Delta is computed where it is needed, from dO and
// O. The causal variant skips the blocks the mask empties (dK, dV: query
// blocks before the keys' diagonal; dQ: key blocks past the rows').
//
// Shape: {heads, n, D} with D one of 16, 32, 64, 128; default {2, 200, 64}.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel flashAttentionBackward(AttentionBlocks B, int D, bool causal) {
  const float scale = 1.0f / std::sqrt(float(D));
  const int BM = B.m, BN = B.n;
  return ts::kernel(
      causal ? "flash_attention_backward_causal" : "flash_attention_backward",
      {"dq", "dk", "dv", "q", "k", "v", "o", "do", "lse", "n"},
      [=](ts::Ptr<ts::half> dq, ts::Ptr<ts::half> dk, ts::Ptr<ts::half> dv, ts::Ptr<const ts::half> q,
          ts::Ptr<const ts::half> k, ts::Ptr<const ts::half> v, ts::Ptr<const ts::half> o, ts::Ptr<const ts::half> dout,
          ts::Ptr<const float> lse, ts::Int n) {
        auto h = ts::program_id(1);
        auto base = h * n * D;                        // this head's [n, D] slices
        auto d0 = ts::expand_dims(ts::arange(D), 0);  // 1 x D
        auto d1 = ts::expand_dims(ts::arange(D), 1);  // D x 1
        auto keyBlocks = (n + (BN - 1)) / BN;
        auto j = ts::program_id(0);
        // dO's rows r (BM x 1) and their Delta = rowsum(dO * O).
        auto rows = [&](ts::Tensor r) {
          auto dor = ts::load(dout + base + r * D + d0, r < n);                                           // BM x D
          auto delta = ts::sum(dor.to(ts::f32) * ts::load(o + base + r * D + d0, r < n).to(ts::f32), 1);  // [BM]
          return std::tuple{dor, delta};
        };
        ts::if_else(
            j < keyBlocks,
            [&] {
              // dK and dV of keys cn (BN x 1), in the transposed space:
              // S^T = K Q^T is BN x BM.
              auto cn = ts::expand_dims(j * BN + ts::arange(BN), 1);
              auto kr = ts::load(k + base + cn * D + d0, cn < n);  // BN x D
              auto vr = ts::load(v + base + cn * D + d0, cn < n);  // BN x D
              ts::Tensor lo = j * 0;
              if (causal) lo = j * BN / BM * BM;  // the first query block that sees these keys
              auto zero = ts::zeros({BN, D}, ts::f32);
              auto [dka, dva] =
                  ts::for_range(lo, n, BM, std::tuple{zero, zero}, [&](ts::Int m0, ts::Tensor dka, ts::Tensor dva) {
                    auto rq = ts::expand_dims(m0 + ts::arange(BM), 1);  // BM x 1: query rows
                    auto rt = ts::expand_dims(m0 + ts::arange(BM), 0);  // 1 x BM: the same, as columns
                    auto [dor, delta] = rows(rq);
                    auto l = ts::load(lse + h * n + rt, rt < n);             // 1 x BM
                    auto qr = ts::load(q + base + rq * D + d0, rq < n);      // BM x D
                    auto qT = ts::load(q + base + rt * D + d1, rt < n);      // D x BM: Q^T by the addressing
                    auto doT = ts::load(dout + base + rt * D + d1, rt < n);  // D x BM
                    auto sT = ts::dot(kr, qT, ts::zeros({BN, BM}, ts::f32)) * scale;
                    auto valid = causal ? (cn < n) & (rt < n) & (cn <= rt) : (cn < n) & (rt < n);
                    auto pT = ts::where(valid, ts::exp(sT - l), 0.0f);  // P^T, BN x BM
                    auto dvNew = ts::dot(pT.to(ts::f16), dor, dva);
                    auto dpT = ts::dot(vr, doT, ts::zeros({BN, BM}, ts::f32));  // dP^T = V dO^T
                    auto dsT = pT * (dpT - ts::expand_dims(delta, 0));
                    return std::tuple{ts::dot(dsT.to(ts::f16), qr, dka), dvNew};
                  });
              ts::store(dk + base + cn * D + d0, (dka * scale).to(ts::f16), cn < n);
              ts::store(dv + base + cn * D + d0, dva.to(ts::f16), cn < n);
            },
            [&] {
              // dQ of query rows rq (BM x 1): S = Q K^T is BM x BN.
              auto i = j - keyBlocks;
              auto rq = ts::expand_dims(i * BM + ts::arange(BM), 1);
              auto [dor, delta] = rows(rq);
              auto l = ts::load(lse + h * n + rq, rq < n);  // BM x 1
              auto qr = ts::load(q + base + rq * D + d0, rq < n);
              ts::Tensor hi = n;
              if (causal) hi = ts::minimum(n, (i + 1) * BM);  // no key block past the rows' diagonal
              auto dqa = ts::for_range(0, hi, BN, ts::zeros({BM, D}, ts::f32), [&](ts::Int n0, ts::Tensor dqa) {
                auto ct = ts::expand_dims(n0 + ts::arange(BN), 0);   // 1 x BN: key columns
                auto cr = ts::expand_dims(n0 + ts::arange(BN), 1);   // BN x 1: the same, as rows
                auto kT = ts::load(k + base + ct * D + d1, ct < n);  // D x BN
                auto vT = ts::load(v + base + ct * D + d1, ct < n);  // D x BN
                auto s = ts::dot(qr, kT, ts::zeros({BM, BN}, ts::f32)) * scale;
                auto valid = causal ? (ct < n) & (rq < n) & (ct <= rq) : (ct < n) & (rq < n);
                auto p = ts::where(valid, ts::exp(s - l), 0.0f);
                auto dp = ts::dot(dor, vT, ts::zeros({BM, BN}, ts::f32));
                auto ds = p * (dp - ts::expand_dims(delta, 1));
                return ts::dot(ds.to(ts::f16), ts::load(k + base + cr * D + d0, cr < n), dqa);
              });
              ts::store(dq + base + rq * D + d0, (dqa * scale).to(ts::f16), rq < n);
            });
      });
}

namespace ref {
/// The forward pass and the gradients in double, from the f16 inputs:
/// `o` (rounded to f16) and `lse` (to f32) are what the kernel is given;
/// want and bound hold dQ, dK, dV one after the other ([3][heads][n][D]).
/// A bound is the f16 rounding of P and dS in their dots (2^-10 of the sum
/// of |terms|), 1e-5 relative for P from an f32 exp of an f32 L, the
/// outputs' own f16 rounding, and 1e-6 absolute: a term missed, counted
/// twice or masked wrongly moves an output by a whole term, far more.
void backward(const std::vector<uint16_t>& q, const std::vector<uint16_t>& k, const std::vector<uint16_t>& v,
              const std::vector<uint16_t>& dout, int64_t heads, int64_t n, int64_t D, bool causal,
              std::vector<uint16_t>& o, std::vector<float>& lse, std::vector<double>& want,
              std::vector<double>& bound) {
  const size_t count = size_t(heads * n * D);
  const double scale = 1.0 / std::sqrt(double(D));
  o.assign(count, 0);
  lse.assign(size_t(heads * n), 0.0f);
  want.assign(3 * count, 0.0);
  bound.assign(3 * count, 0.0);
  auto at = [&](const std::vector<uint16_t>& x, int64_t h, int64_t r, int64_t d) {
    return double(fromHalf(x[size_t((h * n + r) * D + d)]));
  };
  const size_t nn = size_t(n * n);
  std::vector<double> P(nn), dS(nn), err(nn), delta(static_cast<size_t>(n));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t last = causal ? i : n - 1;
      double m = -INFINITY;
      for (int64_t jj = 0; jj <= last; ++jj) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += at(q, h, i, d) * at(k, h, jj, d);
        P[size_t(i * n + jj)] = s * scale;
        m = std::max(m, s * scale);
      }
      double l = 0;
      for (int64_t jj = 0; jj <= last; ++jj) l += std::exp(P[size_t(i * n + jj)] - m);
      lse[size_t(h * n + i)] = float(m + std::log(l));
      for (int64_t jj = 0; jj < n; ++jj)
        P[size_t(i * n + jj)] = jj <= last ? std::exp(P[size_t(i * n + jj)] - m) / l : 0;
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (int64_t jj = 0; jj <= last; ++jj) acc += P[size_t(i * n + jj)] * at(v, h, jj, d);
        o[size_t((h * n + i) * D + d)] = toHalf(float(acc));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      delta[size_t(i)] = 0;
      for (int64_t d = 0; d < D; ++d) delta[size_t(i)] += at(dout, h, i, d) * at(o, h, i, d);
      for (int64_t jj = 0; jj < n; ++jj) {
        double dp = 0, mag = 0;
        for (int64_t d = 0; d < D; ++d) {
          dp += at(dout, h, i, d) * at(v, h, jj, d);
          mag += std::fabs(at(dout, h, i, d) * at(v, h, jj, d));
        }
        const double p = P[size_t(i * n + jj)];
        dS[size_t(i * n + jj)] = p * (dp - delta[size_t(i)]);
        err[size_t(i * n + jj)] =
            std::ldexp(std::fabs(dS[size_t(i * n + jj)]), -10) + 1e-5 * p * (mag + std::fabs(delta[size_t(i)]));
      }
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t d = 0; d < D; ++d) {
        double gq = 0, bq = 0, gk = 0, bk = 0, gv = 0, bv = 0;
        for (int64_t c = 0; c < n; ++c) {
          gq += dS[size_t(r * n + c)] * at(k, h, c, d);  // dQ[r] = dS[r, :] K
          bq += err[size_t(r * n + c)] * std::fabs(at(k, h, c, d));
          gk += dS[size_t(c * n + r)] * at(q, h, c, d);  // dK[r] = dS[:, r]^T Q
          bk += err[size_t(c * n + r)] * std::fabs(at(q, h, c, d));
          gv += P[size_t(c * n + r)] * at(dout, h, c, d);  // dV[r] = P[:, r]^T dO
          bv += std::ldexp(P[size_t(c * n + r)] * std::fabs(at(dout, h, c, d)), -10);
        }
        const size_t e = size_t((h * n + r) * D + d);
        const double g[3] = {gq * scale, gk * scale, gv}, b[3] = {bq * scale, bk * scale, bv};
        for (int w = 0; w < 3; ++w) {
          want[size_t(w) * count + e] = g[w];
          bound[size_t(w) * count + e] = b[w] + std::ldexp(std::fabs(g[w]), -11) * 1.01 + 1e-6;
        }
      }
  }
}
}  // namespace ref

namespace {

Launch prepare(const RunContext& ctx, bool causal) {
  const char* name = causal ? "flash_attention_backward_causal" : "flash_attention_backward";
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{2, 200, 64} : ctx.shape;
  if (s.size() != 3 || s[0] < 1 || s[0] > 65535 || s[1] < 1 || s[1] > 4096 ||
      (s[2] != 16 && s[2] != 32 && s[2] != 64 && s[2] != 128) || s[0] * s[1] * s[1] > (int64_t{1} << 24))
    throw Error(std::string(name) +
                ": the shape is {heads, n, D} with 1 <= heads <= 65535, 1 <= n <= 4096, D one of 16, 32, 64, 128, "
                "and heads * n * n at most 2^24 (the reference holds n x n matrices)");
  const int64_t heads = s[0], n = s[1], D = s[2];
  const AttentionBlocks B =
      ctx.device.kind() == rt::DeviceKind::CPU ? AttentionBlocks{} : AttentionBlocks{32, 32};  // as the kernels
  std::mt19937_64 rng(ctx.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const size_t count = size_t(heads * n * D);
  auto halves = [&] {
    std::vector<uint16_t> x(count);
    for (auto& e : x) e = toHalf(dist(rng));
    return x;
  };
  std::vector<uint16_t> q = halves(), k = halves(), v = halves(), dout = halves(), o;
  std::vector<float> lse;
  std::vector<double> want, bound;
  ref::backward(q, k, v, dout, heads, n, D, causal, o, lse, want, bound);
  const Device& dev = ctx.device;
  Buffer g[3] = {dev.alloc(DType::F16, count), dev.alloc(DType::F16, count), dev.alloc(DType::F16, count)};
  for (Buffer& b : g) b.fillBytes(0xff);  // NaN: an output never written cannot pass
  const int64_t programs = (n + B.n - 1) / B.n + (n + B.m - 1) / B.m;
  Launch launch{flashAttentionBackward(B, int(D), causal),
                Dim3(uint32_t(programs), uint32_t(heads)),
                {g[0], g[1], g[2], dev.upload(DType::F16, q), dev.upload(DType::F16, k), dev.upload(DType::F16, v),
                 dev.upload(DType::F16, o), dev.upload(DType::F16, dout), dev.upload(DType::F32, lse), int32_t(n)},
                {heads, n, D}};
  launch.check = [g0 = g[0], g1 = g[1], g2 = g[2], want = std::move(want), bound = std::move(bound), count] {
    std::vector<float> got;
    for (const Buffer* b : {&g0, &g1, &g2})
      for (uint16_t x : b->read<uint16_t>()) got.push_back(fromHalf(x));
    const char* names[3] = {"dq", "dk", "dv"};
    ElementCheck check(std::ldexp(1.0, -10), "dq, dk, dv",
                       "|got - want| <= the reference's propagated f16/f32 rounding bound per element");
    for (size_t i = 0; i < got.size(); ++i)
      check(got[i], want[i], bound[i],
            [&] { return std::string(names[i / count]) + " at " + std::to_string(i % count); });
    return check.result();
  };
  return launch;
}

Example make(bool causal) {
  Example e;
  e.name = causal ? "flash_attention_backward_causal" : "flash_attention_backward";
  e.summary = causal ? "flash-attention backward with a causal mask: dQ, dK, dV from dO, O and the log-sum-exp, "
                       "f16 [heads, n, D], one launch without atomics"
                     : "flash-attention backward: dQ, dK, dV from dO, O and the log-sum-exp, f16 [heads, n, D], "
                       "one launch without atomics";
  e.kernel = [causal] { return flashAttentionBackward(AttentionBlocks{}, 64, causal); };
  // 32 x 32 blocks on 8 warps: no spills and no scratch on any GPU target
  // (64 x 64 on 8 warps spills on sm_80 / sm_90a and gfx1100; 4 warps spill
  // at either size).
  e.gpuKernel = [causal](const Target&) { return flashAttentionBackward(AttentionBlocks{32, 32}, 64, causal); };
  e.gpuWarps = 8;
  e.prepare = [causal](const RunContext& ctx) { return prepare(ctx, causal); };
  // One row; ragged n with two heads (a partial block of keys and of
  // queries); an aligned n with D = 128; D = 16.
  e.testShapes = {{1, 1, 64}, {2, 77, 64}, {1, 128, 128}, {1, 40, 16}};
  return e;
}

}  // namespace

Example flashAttentionBackwardExample() { return make(false); }
Example flashAttentionBackwardCausalExample() { return make(true); }

}  // namespace tessera::examples

// Usage: flash_attention_backward [--dump] [heads n D]
TESSERA_EXAMPLE_PROGRAM(flashAttentionBackwardExample)

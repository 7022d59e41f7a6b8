// flash_attention: O = softmax(Q K^T / sqrt(D)) V for every head, forward,
// f16 Q, K, V and O of shape [heads, n, D], without ever holding the n x n
// score matrix (FlashAttention's online softmax).
//
// Program (i, h) owns BLOCK_M query rows of head h. It loops over the keys
// BLOCK_N at a time: S = Q K^T for that block (a tensor-core dot on GPUs,
// f32 accumulation), then the online softmax keeps per row the running
// maximum m and the running sum l of exp(s - m); when a block raises the
// maximum, what was summed so far (l and the output accumulator) is rescaled
// by exp(m_old - m_new), and the block's probabilities P, rounded to f16,
// feed the second dot P V into the f32 accumulator. At the end O = acc / l.
// The two dots are chained through ops of the same loop body, so the layout
// pass puts every warp along the query rows: the row max and sum reduce
// inside a warp and, on NVIDIA, S's accumulator fragment is already P's
// operand fragment (docs/gpu.md, "Chained dots").
//
// The causal variant (flash_attention_causal) masks keys after the query
// (col > row) and stops the loop at the block's diagonal: the key blocks
// past it would be masked entirely. Its program i owns the query block
// ceil(n / BLOCK_M) - 1 - i: the blocks with the most keys come first in
// the order GPUs dispatch programs (axis 0 fastest), so the last programs
// to start are the lightest (longest first). The launch must then be
// exactly ceil(n / BLOCK_M) programs on axis 0.
//
// Shape: {heads, n, D} with D one of 16, 32, 64, 128; default {4, 300, 64}.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

namespace {

/// The kernel over T (ts::half or ts::bfloat16) elements.
template <typename T>
Kernel attentionOf(AttentionBlocks B, int D, bool causal, const std::string& name, DType el) {
  const float scale = 1.0f / std::sqrt(float(D));
  const int BM = B.m, BN = B.n;
  return ts::kernel(name, {"o", "q", "k", "v", "n"},
                    [=](ts::Ptr<T> o, ts::Ptr<const T> q, ts::Ptr<const T> k, ts::Ptr<const T> v, ts::Int n) {
                      auto base = ts::program_id(1) * n * D;  // this head's [n, D] slices
                      // The query block. Causal: the last first (longest first).
                      ts::Tensor m = ts::program_id(0);
                      if (causal) m = ts::num_programs(0) - 1 - m;
                      auto rm = ts::expand_dims(m * BM + ts::arange(BM), 1);  // query rows, BM x 1
                      auto d0 = ts::expand_dims(ts::arange(D), 0);            // 1 x D
                      auto d1 = ts::expand_dims(ts::arange(D), 1);            // D x 1
                      auto qt = ts::load(q + base + rm * D + d0, rm < n);     // BM x D, loaded once
                      ts::Tensor hi = n;
                      if (causal) hi = ts::minimum(n, (m + 1) * BM);  // no key block past the diagonal
                      auto init = std::tuple{ts::full({BM}, -ts::inf, ts::f32), ts::zeros({BM}, ts::f32),
                                             ts::zeros({BM, D}, ts::f32)};
                      auto [mi, li, acc] =
                          ts::for_range(0, hi, BN, init, [&](ts::Int n0, ts::Tensor mi, ts::Tensor li, ts::Tensor acc) {
                            auto cn = ts::expand_dims(n0 + ts::arange(BN), 0);  // key columns, 1 x BN
                            auto kt =
                                ts::load(k + base + cn * D + d1, cn < n);  // D x BN: K transposed by the addressing
                            auto s = ts::dot(qt, kt, ts::zeros({BM, BN}, ts::f32)) * scale;
                            auto valid = causal ? (cn < n) & (cn <= rm) : ts::broadcast_to(cn < n, {BM, BN});
                            s = ts::where(valid, s, -ts::inf);  // masked keys weigh exp(-inf) = 0
                            auto mnew = ts::maximum(mi, ts::max(s, 1));
                            auto p = ts::exp(s - ts::expand_dims(mnew, 1));
                            auto alpha = ts::exp(mi - mnew);  // rescales what was summed under the old maximum
                            auto cn2 = ts::expand_dims(n0 + ts::arange(BN), 1);  // BN x 1
                            auto vt = ts::load(v + base + cn2 * D + d0, cn2 < n);
                            auto accNew = ts::dot(p.to(el), vt, acc * ts::expand_dims(alpha, 1));
                            return std::tuple{mnew, li * alpha + ts::sum(p, 1), accNew};
                          });
                      ts::store(o + base + rm * D + d0, (acc / ts::expand_dims(li, 1)).to(el), rm < n);
                    });
}

}  // namespace

Kernel flashAttention(AttentionBlocks B, int D, bool causal, DType dtype) {
  const std::string name =
      std::string(causal ? "flash_attention_causal" : "flash_attention") + (dtype == DType::BF16 ? "_bf16" : "");
  if (dtype == DType::BF16) return attentionOf<ts::bfloat16>(B, D, causal, name, DType::BF16);
  return attentionOf<ts::half>(B, D, causal, name, DType::F16);
}

namespace ref {
/// Plain C++ reference in double: for each head and query row, the scores
/// against every key (up to the row itself when causal), their softmax, and
/// its weighted sum of V. Inputs are the f16 bit patterns the kernel reads.
std::vector<double> attention(const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
                              const std::vector<uint16_t>& v, int64_t heads, int64_t n, int64_t D, bool causal,
                              float (*value)(uint16_t) = fromHalf) {
  auto fromHalf = value;  // the inputs' element type (f16 or bf16 bits)
  std::vector<double> out(size_t(heads * n * D));
  std::vector<double> s(static_cast<size_t>(n));
  const double scale = 1.0 / std::sqrt(double(D));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < n; ++i) {
      const size_t qi = size_t((h * n + i) * D);
      const int64_t last = causal ? i : n - 1;
      double m = -INFINITY;
      for (int64_t j = 0; j <= last; ++j) {
        double dotv = 0;
        for (int64_t d = 0; d < D; ++d)
          dotv += double(fromHalf(q[qi + size_t(d)])) * fromHalf(k[size_t((h * n + j) * D + d)]);
        s[size_t(j)] = dotv * scale;
        m = std::max(m, s[size_t(j)]);
      }
      double l = 0;
      for (int64_t j = 0; j <= last; ++j) l += std::exp(s[size_t(j)] - m);
      for (int64_t d = 0; d < D; ++d) {
        double o = 0;
        for (int64_t j = 0; j <= last; ++j) o += std::exp(s[size_t(j)] - m) * fromHalf(v[size_t((h * n + j) * D + d)]);
        out[qi + size_t(d)] = o / l;
      }
    }
  return out;
}
}  // namespace ref

Launch prepareAttention(const RunContext& ctx, bool causal, AttentionBlocks B, DType dtype) {
  const bool bf16 = dtype == DType::BF16;
  const std::string nameStr =
      std::string(causal ? "flash_attention_causal" : "flash_attention") + (bf16 ? "_bf16" : "");
  const char* name = nameStr.c_str();
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{4, 300, 64} : ctx.shape;
  if (s.size() != 3 || s[0] < 1 || s[0] > 65535 || s[1] < 1 || s[1] > (1 << 16) ||
      (s[2] != 16 && s[2] != 32 && s[2] != 64 && s[2] != 128) || s[0] * s[1] * s[2] > (int64_t{1} << 26))
    throw Error(std::string(name) +
                ": the shape is {heads, n, D} with 1 <= heads <= 65535, 1 <= n <= 65536, D one of 16, 32, 64, 128, "
                "and heads * n * D at most 2^26");
  const int64_t heads = s[0], n = s[1], D = s[2];
  std::mt19937_64 rng(ctx.seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const size_t count = size_t(heads * n * D);
  auto halves = [&] {
    std::vector<uint16_t> h(count);
    for (auto& x : h) x = bf16 ? toBf16(dist(rng)) : toHalf(dist(rng));
    return h;
  };
  std::vector<uint16_t> q = halves(), k = halves(), v = halves();
  Buffer dq = ctx.device.upload(dtype, q), dk = ctx.device.upload(dtype, k), dv = ctx.device.upload(dtype, v),
         dout = ctx.device.alloc(dtype, count);
  dout.fillBytes(0xff);  // NaN: an output never written cannot pass
  Launch launch{flashAttention(B, int(D), causal, dtype),
                Dim3(uint32_t((n + B.m - 1) / B.m), uint32_t(heads)),
                {dout, dq, dk, dv, int32_t(n)},
                {heads, n, D}};
  // Outputs are convex combinations of values in [-1, 1]. Errors: P rounded
  // to the element type for the second dot (u relative on every weight; u =
  // 2^-11 for f16, 2^-8 for bf16), O rounded to it (u), f32 exponentials
  // and sums (far below); 4 u (2^-9, 2^-6) covers them with margin, while a
  // key block missed or counted twice, or a masked key let through, moves
  // an output by about 0.1.
  launch.check = [dout, q = std::move(q), k = std::move(k), v = std::move(v), heads, n, D, causal, bf16] {
    float (*value)(uint16_t) = bf16 ? bf16Value : fromHalf;
    std::vector<float> got;
    for (uint16_t h : dout.read<uint16_t>()) got.push_back(value(h));
    const double bound = std::ldexp(1.0, bf16 ? -6 : -9);
    return compareWith(got, ref::attention(q, k, v, heads, n, D, causal, value), bound, "o",
                       "|got - want| <= " + ElementCheck::fmt(bound) + " (4 ulp of the element type)",
                       [=](size_t) { return bound; });
  };
  return launch;
}

namespace {

/// 64 x 64 blocks elsewhere: on NVIDIA and CDNA a 64-row block with 4 warps
/// gives each warp 16 query rows (one mma/MFMA row of tiles) and keeps S, P
/// and the accumulator in registers without spills for D up to 128
/// (docs/gpu.md); the CPU runs the same tiles with its FMA dot. The bf16
/// variants are the f16 kernel's code on bf16 operands and output.
Example make(bool causal, DType dtype) {
  const bool bf16 = dtype == DType::BF16;
  Example e;
  e.name = std::string(causal ? "flash_attention_causal" : "flash_attention") + (bf16 ? "_bf16" : "");
  e.summary = std::string(causal ? "flash-attention forward with a causal mask" : "flash-attention forward") +
              (bf16 ? " on bf16 [heads, n, D] (the f16 kernel's code on bf16 operands and output)"
                    : ", f16 [heads, n, D], online softmax in f32" + std::string(causal ? "" : ", two chained dots"));
  e.kernel = [causal, dtype] { return flashAttention(AttentionBlocks{}, 64, causal, dtype); };
  e.gpuKernel = [causal, dtype](const Target& t) {
    return flashAttention(attentionDefaultBlocks(t), 64, causal, dtype);
  };
  e.prepare = [causal, dtype](const RunContext& ctx) {
    return prepareAttention(ctx, causal, attentionDefaultBlocks(ctx.device), dtype);
  };
  // One head of one row; ragged n with two heads; an aligned n with D = 128.
  e.testShapes = {{1, 1, 64}, {2, 77, 64}, {1, 128, 128}};
  return e;
}

}  // namespace

Example flashAttentionExample() { return make(false, DType::F16); }
Example flashAttentionCausalExample() { return make(true, DType::F16); }
Example flashAttentionBF16Example() { return make(false, DType::BF16); }
Example flashAttentionCausalBF16Example() { return make(true, DType::BF16); }

}  // namespace tessera::examples

// Usage: flash_attention [--dump] [heads n D]
TESSERA_EXAMPLE_PROGRAM(flashAttentionExample)

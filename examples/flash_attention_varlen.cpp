// flash_attention_varlen: causal flash-attention forward over a batch of
// sequences of different lengths packed end to end, as training and
// prefill pack them: q, k, v and o are [heads, total, D] f16 (token t of
// the batch is row t of each head; the rows of sequence b are
// cu_seqlens[b] .. cu_seqlens[b+1] - 1), and each token attends to the
// tokens of its own sequence up to itself. A head's rows are D elements
// apart, as in flash_attention: with the tokens-major [total, heads, D]
// some APIs take, the rows' stride heads x D is a run-time value and the
// kernel as traced (before a launch proves its alignment) needs more
// registers than sm_80 and sm_90a have (144 and 40 bytes of spills).
//
// The tiles come from a ragged schedule (ts::Tiles(0, heads, BLOCK_M, 1)
// .ragged(cu_seqlens, batch)): a tile is BLOCK_M query rows of one
// sequence and one head, never straddling two sequences, and a sequence
// of no tokens has no tile. The tile's group is found on the device from
// cu_seqlens, so the host never reads the lengths. Its keys run from the
// sequence's first token to the tile's last row (t.row0 - t.m * BLOCK_M
// is the sequence's start, t.rowEnd its end), with flash_attention's
// online softmax. Tiles::reversed() numbers the last sequence's tiles
// first, each sequence's last query block first: with the sequences
// sorted shortest to longest (as the example generates them, and as
// length-sorted batches come), the longest first, so a persistent grid
// (on GPUs: AttentionBlocks::persistent) starts the heaviest tiles and
// ends on the lightest. AttentionBlocks::dynamic keeps one program per
// tile, launched longest first, the programs that started taking the
// queued tiles where the GPU cancels programs (Tiles::dynamic). Neither is
// the default: on sm_100a (aligned) the tile loop takes the kernel from 95
// registers to 132, and on sm_120a to 128 with 16 bytes of spills.
//
// Shape: {batch, max_len, heads, D} with D one of 16, 32, 64, 128; default
// {6, 200, 2, 64}. Lengths are drawn from [0, max_len] (the first sequence
// is empty when batch >= 3) and sorted ascending.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel flashAttentionVarlen(AttentionBlocks B, int D) {
  const float scale = 1.0f / std::sqrt(float(D));
  const int BM = B.m, BN = B.n;
  return ts::kernel(
      "flash_attention_varlen", {"o", "q", "k", "v", "cu_seqlens", "batch", "heads", "total"},
      [=](ts::Ptr<ts::half> o, ts::Ptr<const ts::half> q, ts::Ptr<const ts::half> k, ts::Ptr<const ts::half> v,
          ts::Ptr<const int32_t> cu, ts::Int batch, ts::Int heads, ts::Int total) {
        auto tiles = ts::Tiles(0, heads, BM, 1)
                         .ragged(cu, batch)
                         .reversed()
                         .persistent(B.persistent)
                         .dynamic(B.dynamic && !B.persistent);
        ts::for_tiles(tiles, [&](const ts::Tile& t) {
          auto start = t.row0 - t.m * BM, end = t.rowEnd;         // the sequence's tokens
          auto base = t.col0 * total * D;                         // this head's [total, D] slice
          auto rm = ts::expand_dims(t.row0 + ts::arange(BM), 1);  // query rows, BM x 1
          auto d0 = ts::expand_dims(ts::arange(D), 0);            // 1 x D
          auto d1 = ts::expand_dims(ts::arange(D), 1);            // D x 1
          auto qt = ts::load(q + base + rm * D + d0, rm < end);
          // Causal: no key block past the tile's last row.
          auto hi = ts::minimum(end, t.row0 + BM);
          auto init =
              std::tuple{ts::full({BM}, -ts::inf, ts::f32), ts::zeros({BM}, ts::f32), ts::zeros({BM, D}, ts::f32)};
          auto [mi, li, acc] =
              ts::for_range(start, hi, BN, init, [&](ts::Int n0, ts::Tensor mi, ts::Tensor li, ts::Tensor acc) {
                auto cn = ts::expand_dims(n0 + ts::arange(BN), 0);  // key tokens, 1 x BN
                auto kt = ts::load(k + base + cn * D + d1, cn < end);
                auto s = ts::dot(qt, kt, ts::zeros({BM, BN}, ts::f32)) * scale;
                // Keys of this sequence up to the query. Rows past the
                // sequence (not stored) keep its keys, so no row is all -inf.
                s = ts::where((cn < end) & (cn <= rm), s, -ts::inf);
                auto mnew = ts::maximum(mi, ts::max(s, 1));
                auto p = ts::exp(s - ts::expand_dims(mnew, 1));
                auto alpha = ts::exp(mi - mnew);
                auto cn2 = ts::expand_dims(n0 + ts::arange(BN), 1);  // BN x 1
                auto vt = ts::load(v + base + cn2 * D + d0, cn2 < end);
                auto accNew = ts::dot(p.to(ts::f16), vt, acc * ts::expand_dims(alpha, 1));
                return std::tuple{mnew, li * alpha + ts::sum(p, 1), accNew};
              });
          ts::store(o + base + rm * D + d0, (acc / ts::expand_dims(li, 1)).to(ts::f16), rm < end);
        });
      });
}

namespace {

/// flash_attention's blocks with at most 32 keys a step on GPUs: at 64 x 64
/// the kernel as traced (before a launch proves its alignment) holds 255
/// registers on sm_80 with 32 bytes of spills, its ragged tile's bounds
/// staying live beside flash_attention's.
AttentionBlocks varlenBlocks(const Target& t) {
  AttentionBlocks b = attentionDefaultBlocks(t);
  if (t.kind != Target::Kind::CPU) b.n = std::min(b.n, 32);
  return b;
}

/// Plain C++ reference in double: per sequence, head and token, the causal
/// softmax of the scores against the sequence's tokens up to it, and its
/// weighted sum of V. [heads, total, D] f16 bit patterns.
std::vector<double> varlenReference(const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
                                    const std::vector<uint16_t>& v, const std::vector<int32_t>& cu, int64_t heads,
                                    int64_t D) {
  const int64_t total = cu.back();
  std::vector<double> out(size_t(total * heads * D));
  const double scale = 1.0 / std::sqrt(double(D));
  auto at = [&](int64_t tok, int64_t h, int64_t d) { return size_t((h * total + tok) * D + d); };
  std::vector<double> s;
  for (size_t b = 0; b + 1 < cu.size(); ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = cu[b]; i < cu[b + 1]; ++i) {
        s.assign(size_t(i - cu[b] + 1), 0.0);
        double m = -INFINITY;
        for (int64_t j = cu[b]; j <= i; ++j) {
          double dotv = 0;
          for (int64_t d = 0; d < D; ++d) dotv += double(fromHalf(q[at(i, h, d)])) * fromHalf(k[at(j, h, d)]);
          s[size_t(j - cu[b])] = dotv * scale;
          m = std::max(m, s[size_t(j - cu[b])]);
        }
        double l = 0;
        for (double x : s) l += std::exp(x - m);
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = cu[b]; j <= i; ++j) acc += std::exp(s[size_t(j - cu[b])] - m) * fromHalf(v[at(j, h, d)]);
          out[at(i, h, d)] = acc / l;
        }
      }
  return out;
}

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{6, 200, 2, 64} : ctx.shape;
  if (s.size() != 4 || s[0] < 1 || s[0] > 4096 || s[1] < 0 || s[1] > (1 << 16) || s[2] < 1 || s[2] > 256 ||
      (s[3] != 16 && s[3] != 32 && s[3] != 64 && s[3] != 128) || s[0] * s[1] * s[2] * s[3] > (int64_t{1} << 26))
    throw Error(
        "flash_attention_varlen: the shape is {batch, max_len, heads, D} with 1 <= batch <= 4096, 0 <= max_len <= "
        "65536, 1 <= heads <= 256, D one of 16, 32, 64, 128, and batch * max_len * heads * D at most 2^26");
  const int64_t batch = s[0], maxLen = s[1], heads = s[2], D = s[3];
  std::mt19937_64 rng(ctx.seed);
  std::vector<int32_t> lens(static_cast<size_t>(batch));
  std::uniform_int_distribution<int32_t> len(0, int32_t(maxLen));
  for (auto& x : lens) x = len(rng);
  if (batch >= 3) lens[0] = 0;  // an empty sequence: no tile
  std::sort(lens.begin(), lens.end());
  std::vector<int32_t> cu(size_t(batch + 1), 0);
  for (size_t b = 0; b < lens.size(); ++b) cu[b + 1] = cu[b] + lens[b];
  const int64_t total = cu.back();
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto halves = [&] {
    std::vector<uint16_t> h(size_t(total * heads * D));
    for (auto& x : h) x = toHalf(dist(rng));
    return h;
  };
  std::vector<uint16_t> q = halves(), k = halves(), v = halves();
  const Device& dev = ctx.device;
  // Buffers of at least one element: a batch of empty sequences is legal.
  auto upload = [&](const std::vector<uint16_t>& h) {
    return h.empty() ? dev.alloc(DType::F16, 1) : dev.upload(DType::F16, h);
  };
  Buffer dout = dev.alloc(DType::F16, std::max<size_t>(1, size_t(total * heads * D)));
  dout.fillBytes(0xff);  // NaN: an output never written cannot pass
  const AttentionBlocks B = varlenBlocks(deviceTarget(dev));
  Launch launch{flashAttentionVarlen(B, int(D)),
                Dim3(uint32_t(std::max<int64_t>(1, Tiles::raggedBound(total, batch, heads, B.m, 1)))),
                {dout, upload(q), upload(k), upload(v), dev.upload(DType::I32, cu), int32_t(batch), int32_t(heads),
                 int32_t(total)},
                {batch, maxLen, heads, D}};
  launch.persistent = B.persistent;
  // As flash_attention: outputs are convex combinations of values in
  // [-1, 1], 4 ulp of f16 (2^-9) covers P's and O's rounding, while a key
  // of another sequence or past the query let in moves an output by ~0.1.
  launch.check = [dout, q = std::move(q), k = std::move(k), v = std::move(v), cu = std::move(cu), heads, D, total] {
    std::vector<float> got;
    for (uint16_t h : dout.read<uint16_t>()) got.push_back(fromHalf(h));
    got.resize(size_t(total * heads * D));
    const double bound = std::ldexp(1.0, -9);
    return compareWith(got, varlenReference(q, k, v, cu, heads, D), bound, "o",
                       "|got - want| <= " + ElementCheck::fmt(bound) + " (4 ulp of f16)",
                       [=](size_t) { return bound; });
  };
  return launch;
}

}  // namespace

Example flashAttentionVarlenExample() {
  Example e;
  e.name = "flash_attention_varlen";
  e.summary =
      "causal flash-attention forward over packed sequences of different lengths (cu_seqlens), on a ragged tile "
      "schedule, longest sequence first";
  e.kernel = [] { return flashAttentionVarlen(AttentionBlocks{}, 64); };
  e.gpuKernel = [](const Target& t) { return flashAttentionVarlen(varlenBlocks(t), 64); };
  e.prepare = prepare;
  // One token; ragged lengths with an empty sequence; lengths across
  // several query blocks with D = 32; a batch of empty sequences.
  e.testShapes = {{1, 1, 1, 64}, {4, 70, 2, 64}, {3, 150, 1, 32}, {3, 0, 1, 16}};
  return e;
}

}  // namespace tessera::examples

// Usage: flash_attention_varlen [--dump] [batch max_len heads D]
TESSERA_EXAMPLE_PROGRAM(flashAttentionVarlenExample)

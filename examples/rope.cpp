// rope: rotary position embedding of queries or keys, as inference engines
// apply it: x is [tokens, heads, D] (f32), each token has a position, and
// the rotation angles come from a precomputed cache indexed by position
// (cos_cache and sin_cache, [max_position, D/2]).
//
// The NeoX ("rotate half") form: the head's first and second halves are
// the two coordinates of D/2 planes; plane i of a token at position p turns
// by p * base^(-2i/D):
//   out[i]       = x[i] * cos - x[i + D/2] * sin
//   out[i + D/2] = x[i + D/2] * cos + x[i] * sin
// A program takes BLOCK rows of the flattened [tokens * heads, D] input.
// Each row loads its token's position, then that position's row of the two
// caches: a load whose address depends on loaded data, as a paged or
// batched engine's positions are.
//
// Shape: {tokens, heads, D} with D one of 16, 32, 64, 128, 256; default
// {300, 8, 128}. Positions are drawn from [0, 4096).
#include <cmath>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

namespace {
constexpr int64_t kMaxPosition = 4096;
constexpr double kBase = 10000.0;
}  // namespace

Kernel rope(int BLOCK, int D) {
  const int H2 = D / 2;
  return ts::kernel("rope", {"out", "x", "positions", "cos_cache", "sin_cache", "rows", "heads"},
                    [=](ts::Ptr<float> out, ts::Ptr<const float> x, ts::Ptr<const int32_t> positions,
                        ts::Ptr<const float> cosCache, ts::Ptr<const float> sinCache, ts::Int rows, ts::Int heads) {
                      auto r = ts::expand_dims(ts::program_id(0) * BLOCK + ts::arange(BLOCK), 1);  // BLOCK x 1
                      auto i = ts::expand_dims(ts::arange(H2), 0);                                 // 1 x D/2
                      auto m = r < rows;
                      auto pos = ts::load(positions + r / heads, m);  // the row's token's position
                      auto cs = pos * H2 + i;                         // that position's cache row
                      auto c = ts::load(cosCache + cs, m), s = ts::load(sinCache + cs, m);
                      auto xo = r * D + i;
                      auto x1 = ts::load(x + xo, m), x2 = ts::load(x + xo + H2, m);
                      ts::store(out + xo, x1 * c - x2 * s, m);
                      ts::store(out + xo + H2, x2 * c + x1 * s, m);
                    });
}

namespace ref {
/// The rotation in double from the position and plane index alone (not from
/// the caches the kernel reads, so a wrong cache row cannot pass).
std::vector<double> rope(const std::vector<float>& x, const std::vector<int32_t>& positions, int64_t tokens,
                         int64_t heads, int64_t D) {
  std::vector<double> out(x.size());
  const int64_t h2 = D / 2;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < h2; ++i) {
        const double angle = double(positions[size_t(t)]) * std::pow(kBase, -2.0 * double(i) / double(D));
        const size_t o = size_t((t * heads + h) * D + i);
        const double x1 = x[o], x2 = x[o + size_t(h2)];
        out[o] = x1 * std::cos(angle) - x2 * std::sin(angle);
        out[o + size_t(h2)] = x2 * std::cos(angle) + x1 * std::sin(angle);
      }
  return out;
}
}  // namespace ref

namespace {

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{300, 8, 128} : ctx.shape;
  if (s.size() != 3 || s[0] < 1 || s[1] < 1 || (s[2] != 16 && s[2] != 32 && s[2] != 64 && s[2] != 128 && s[2] != 256) ||
      s[0] * s[1] * s[2] > (int64_t{1} << 26))
    throw Error(
        "rope: the shape is {tokens, heads, D} with tokens, heads >= 1, D one of 16, 32, 64, 128, 256, "
        "and tokens * heads * D at most 2^26");
  const int64_t tokens = s[0], heads = s[1], D = s[2], h2 = D / 2;
  std::mt19937_64 rng(ctx.seed);
  std::vector<float> x = randomVector(size_t(tokens * heads * D), rng);
  std::vector<int32_t> positions(static_cast<size_t>(tokens));
  for (auto& p : positions) p = int32_t(std::uniform_int_distribution<int64_t>(0, kMaxPosition - 1)(rng));
  // The caches, as an engine builds them once: f32 roundings of the angles'
  // cosines and sines.
  std::vector<float> cosCache(size_t(kMaxPosition * h2)), sinCache(cosCache.size());
  for (int64_t p = 0; p < kMaxPosition; ++p)
    for (int64_t i = 0; i < h2; ++i) {
      const double angle = double(p) * std::pow(kBase, -2.0 * double(i) / double(D));
      cosCache[size_t(p * h2 + i)] = float(std::cos(angle));
      sinCache[size_t(p * h2 + i)] = float(std::sin(angle));
    }
  const int block = 16;
  const int64_t rows = tokens * heads;
  Buffer dout = ctx.device.alloc(DType::F32, x.size());
  dout.fillBytes(0xff);  // NaN: an element never written cannot pass
  Launch launch{
      rope(block, int(D)),
      Dim3(uint32_t((rows + block - 1) / block)),
      {dout, ctx.device.upload(DType::F32, x), ctx.device.upload(DType::I32, positions),
       ctx.device.upload(DType::F32, cosCache), ctx.device.upload(DType::F32, sinCache), int32_t(rows), int32_t(heads)},
      {tokens, heads, D}};
  // Per element two products and a sum in f32 (3 u of the magnitudes), and
  // cos and sin rounded to f32 in the cache (u each): 5 u of |x1| + |x2|,
  // u = 2^-24. A wrong position or plane moves an element by O(|x|).
  launch.check = [dout, x = std::move(x), positions = std::move(positions), tokens, heads, D] {
    const double u = std::ldexp(1.0, -24);
    const int64_t h2 = D / 2;
    auto bound = [&](size_t e) {
      const size_t col = e % size_t(D), base = e - col;
      const size_t i = col % size_t(h2);
      return 5 * u * (std::fabs(double(x[base + i])) + std::fabs(double(x[base + i + size_t(h2)])));
    };
    return compareWith(dout.read<float>(), ref::rope(x, positions, tokens, heads, D), 5 * u, "out",
                       "|got - want| <= 5u (|x1| + |x2|), u = 2^-24", bound);
  };
  return launch;
}

}  // namespace

Example ropeExample() {
  Example e;
  e.name = "rope";
  e.summary = "rotary position embedding, [tokens, heads, D] f32, angles from a cache indexed by each token's position";
  e.kernel = [] { return rope(16, 128); };
  e.prepare = prepare;
  // One token and head; ragged tokens and several heads; a small and a
  // large head dimension.
  e.testShapes = {{1, 1, 128}, {37, 3, 64}, {5, 2, 16}, {9, 4, 256}};
  return e;
}

}  // namespace tessera::examples

// Usage: rope [--dump] [tokens heads D]
TESSERA_EXAMPLE_PROGRAM(ropeExample)

// dropout_residual_layernorm: the "add & norm" of a transformer block,
// fused. Per row r of x and residual (rows x cols):
//   h = residual + dropout(x),  dropout(x) = keep ? x / (1 - p) : 0,
//   keep = ts::rand(seed, r * cols + c) > p,
//   y = (h - mean(h)) * rstd * weight + bias,  rstd = 1 / sqrt(var(h) + eps),
// writing h (the next block's residual) and y. The mask is a function of
// (seed, element index) only: a backward pass regenerates it from the seed
// instead of storing it, and it is the same on every backend and the same
// as Triton's tl.rand with that seed and offsets.
//
// One program per row, the whole row in one tile (BLOCK = next power of two
// >= cols); the offsets are i64, so rows * cols may pass 2^31. The variance
// is computed in two passes over the tile, as in layernorm.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

#include "philox.h"
#include "support.h"
#include "tessera/support/Environment.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel dropoutResidualLayernorm(int BLOCK) {
  return ts::kernel("dropout_residual_layernorm",
                    {"y", "h", "x", "residual", "weight", "bias", "cols", "eps", "p", "seed"},
                    [=](ts::Ptr<float> y, ts::Ptr<float> h, ts::Ptr<const float> x, ts::Ptr<const float> residual,
                        ts::Ptr<const float> weight, ts::Ptr<const float> bias, ts::Int cols, ts::Float eps,
                        ts::Float p, ts::Long seed) {
                      auto c = ts::arange(BLOCK);
                      auto mask = c < cols;
                      auto offs = ts::program_id(0).to(ts::i64) * cols + c;  // i64: the element's index in x
                      auto keep = ts::rand(seed, offs) > p;
                      auto xv = ts::load(x + offs, mask, 0.0f);
                      auto hv = ts::load(residual + offs, mask, 0.0f) + ts::where(keep, xv / (1.0f - p), 0.0f);
                      ts::store(h + offs, hv, mask);
                      auto n = cols.to(ts::f32);
                      auto mu = ts::sum(hv, 0) / n;  // masked-off lanes hold 0
                      auto hc = ts::where(mask, hv - mu, 0.0f);
                      auto r = ts::rsqrt(ts::sum(hc * hc, 0) / n + eps);
                      ts::store(y + offs, hc * r * ts::load(weight + c, mask) + ts::load(bias + c, mask), mask);
                    });
}

namespace ref {
/// Plain C++ reference: h exactly as the kernel computes it in f32 (the
/// mask from the reference Philox), and y from that h in double.
void dropoutResidualLayernorm(const std::vector<float>& x, const std::vector<float>& residual,
                              const std::vector<float>& w, const std::vector<float>& b, int64_t rows, int64_t cols,
                              float p, double eps, int64_t seed, std::vector<float>& h, std::vector<double>& y) {
  h.assign(size_t(rows * cols), 0);
  y.assign(size_t(rows * cols), 0);
  const float q = 1.0f - p;
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const auto off = uint64_t(r * cols + c);
      const bool keep = philox::rand(uint64_t(seed), uint32_t(off), uint32_t(off >> 32)) > p;
      const float d = keep ? x[size_t(off)] / q : 0.0f;
      h[size_t(off)] = residual[size_t(off)] + d;
      m += h[size_t(off)];
    }
    m /= double(cols);
    for (int64_t c = 0; c < cols; ++c) v += (h[size_t(r * cols + c)] - m) * (h[size_t(r * cols + c)] - m);
    v /= double(cols);
    const double rs = 1.0 / std::sqrt(v + eps);
    for (int64_t c = 0; c < cols; ++c)
      y[size_t(r * cols + c)] = (h[size_t(r * cols + c)] - m) * rs * w[size_t(c)] + b[size_t(c)];
  }
}
}  // namespace ref

namespace {
constexpr float kEps = 1e-5f;
constexpr float kDropP = 0.1f;

Launch prepare(const RunContext& ctx) {
  auto [rows, cols] = rowsCols(ctx, "dropout_residual_layernorm");
  std::mt19937_64 rng(ctx.seed);
  std::vector<float> x = randomVector(size_t(rows * cols), rng);
  std::vector<float> res = randomVector(size_t(rows * cols), rng, 2.0f, 4.0f);  // offset mean, as in layernorm
  std::vector<float> w = randomVector(size_t(cols), rng, 0.5f, 1.5f);
  std::vector<float> b = randomVector(size_t(cols), rng);
  // A seed above INT32_MAX, so both key words matter.
  const int64_t seed = int64_t(0x5eed00000000ull + ctx.seed * 0x9E3779B9ull);

  Buffer dx = ctx.device.upload(DType::F32, x), dres = ctx.device.upload(DType::F32, res);
  Buffer dw = ctx.device.upload(DType::F32, w), db = ctx.device.upload(DType::F32, b);
  Buffer dy = ctx.device.alloc(DType::F32, size_t(rows * cols)), dh = ctx.device.alloc(DType::F32, size_t(rows * cols));
  Launch launch{dropoutResidualLayernorm(nextPow2(cols)),
                Dim3(uint32_t(rows)),
                {dy, dh, dx, dres, dw, db, int32_t(cols), kEps, kDropP, seed},
                {rows, cols}};
  // The precision the compile will use: TESSERA_PRECISION overrides the
  // options (as `tessera run --precision` sets it).
  const char* env = tessera::env::get(tessera::env::Var::Precision);
  const bool approx =
      (env && *env ? codegen::parsePrecision(env) : ctx.options.precision) == codegen::Precision::Approximate;
  launch.check = [dy, dh, x = std::move(x), res = std::move(res), w = std::move(w), b = std::move(b), rows = rows,
                  cols = cols, seed, approx] {
    std::vector<float> h;
    std::vector<double> y;
    ref::dropoutResidualLayernorm(x, res, w, b, rows, cols, kDropP, kEps, seed, h, y);
    // h is exact: the same mask bits and the same two f32 roundings (the
    // division, the addition) as the reference, so any dropped or kept
    // element out of place shows. With Precision::Approximate the division
    // is the GPU's approximate one (within 2 ulp, docs/math.md): h may then
    // differ by 2 ulp of the quotient plus the addition's half ulp, still far
    // below a dropped (or wrongly kept) element's x / (1 - p). y: as layernorm
    // (f32 sums of up to a few thousand terms), relative 2e-5 plus absolute
    // 2e-5.
    const std::vector<double> hw(h.begin(), h.end());
    CheckResult r = compareWith(
        dh.read<float>(), hw, 0, "h",
        approx ? "|got - want| <= 2.5 2^-23 (|x| / (1 - p) + |want|)" : "got == want (exact)", [&](size_t i) {
          return approx ? std::ldexp(2.5, -23) * (std::fabs(double(x[i])) / (1.0 - kDropP) + std::fabs(hw[i])) : 0.0;
        });
    r.tolerance = 2e-5;
    return merge(r, compare(dy.read<float>(), y, 2e-5, 2e-5, "y"));
  };
  return launch;
}
}  // namespace

Example dropoutResidualLayernormExample() {
  Example e;
  e.name = "dropout_residual_layernorm";
  e.summary = "fused dropout (ts::rand, Philox) + residual add + LayerNorm, writing the sum and the normalised rows";
  e.kernel = [] { return dropoutResidualLayernorm(1024); };
  e.prepare = prepare;
  e.testShapes = {{1, 1}, {7, 1000}, {64, 1024}, {3, 4097}, {2, 3}};
  return e;
}

}  // namespace tessera::examples

// Usage: dropout_residual_layernorm [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(dropoutResidualLayernormExample)

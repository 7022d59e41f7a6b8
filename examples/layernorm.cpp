// layernorm: y[r, :] = (x[r, :] - mean) * rstd * weight + bias, with
//   mean = sum(x) / cols,  var = sum((x - mean)^2) / cols,  rstd = 1/sqrt(var + eps),
// also writing mean[r] and rstd[r] (what a backward pass needs).
//
// One program per row, the whole row in one tile (BLOCK = next power of two
// >= cols). The variance is computed in two passes over the tile (first the
// mean, then the centred squares), which avoids the cancellation of
// E[x^2] - E[x]^2. Masked-off lanes are forced to 0 so they add nothing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel layernorm(int BLOCK) {
  return ts::kernel("layernorm", {"y", "mean", "rstd", "x", "weight", "bias", "cols", "eps"},
                    [=](ts::Ptr<float> y, ts::Ptr<float> mean, ts::Ptr<float> rstd, ts::Ptr<const float> x,
                        ts::Ptr<const float> weight, ts::Ptr<const float> bias, ts::Int cols, ts::Float eps) {
                      auto row = ts::program_id(0);
                      auto c = ts::arange(BLOCK);
                      auto mask = c < cols;
                      auto n = cols.to(ts::f32);
                      auto v = ts::load(x + row * cols + c, mask, 0.0f);
                      auto mu = ts::sum(v, 0) / n;
                      auto xc = ts::where(mask, v - mu, 0.0f);  // centred; 0 in the masked-off lanes
                      auto var = ts::sum(xc * xc, 0) / n;
                      auto r = ts::rsqrt(var + eps);
                      auto w = ts::load(weight + c, mask);
                      auto b = ts::load(bias + c, mask);
                      ts::store(y + row * cols + c, xc * r * w + b, mask);
                      ts::store(mean + row, mu);
                      ts::store(rstd + row, r);
                    });
}

namespace ref {
/// Plain C++ reference, in double: y (rows x cols), mean and rstd (rows).
void layernorm(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b, int64_t rows,
               int64_t cols, double eps, std::vector<double>& y, std::vector<double>& mean, std::vector<double>& rstd) {
  y.assign(size_t(rows * cols), 0);
  mean.assign(size_t(rows), 0);
  rstd.assign(size_t(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[size_t(r * cols)];
    double m = 0, v = 0;
    for (int64_t c = 0; c < cols; ++c) m += xr[c];
    m /= double(cols);
    for (int64_t c = 0; c < cols; ++c) v += (xr[c] - m) * (xr[c] - m);
    v /= double(cols);
    double rs = 1.0 / std::sqrt(v + eps);
    for (int64_t c = 0; c < cols; ++c) y[size_t(r * cols + c)] = (xr[c] - m) * rs * w[size_t(c)] + b[size_t(c)];
    mean[size_t(r)] = m;
    rstd[size_t(r)] = rs;
  }
}
}  // namespace ref

namespace {
constexpr float kEps = 1e-5f;

Launch prepare(const RunContext& ctx) {
  auto [rows, cols] = rowsCols(ctx, "layernorm");
  std::mt19937_64 rng(ctx.seed);
  // An offset mean (around 3) makes a one-pass variance visibly wrong.
  std::vector<float> x = randomVector(size_t(rows * cols), rng, 2.0f, 4.0f);
  std::vector<float> w = randomVector(size_t(cols), rng, 0.5f, 1.5f);
  std::vector<float> b = randomVector(size_t(cols), rng);

  Buffer dx = ctx.device.upload(DType::F32, x), dw = ctx.device.upload(DType::F32, w);
  Buffer db = ctx.device.upload(DType::F32, b);
  Buffer dy = ctx.device.alloc(DType::F32, size_t(rows * cols));
  Buffer dmean = ctx.device.alloc(DType::F32, size_t(rows)), drstd = ctx.device.alloc(DType::F32, size_t(rows));
  Launch launch{layernorm(nextPow2(cols)),
                Dim3(uint32_t(rows)),
                {dy, dmean, drstd, dx, dw, db, int32_t(cols), kEps},
                {rows, cols}};

  launch.check = [dy, dmean, drstd, x = std::move(x), w = std::move(w), b = std::move(b), rows = rows, cols = cols] {
    std::vector<double> y, mean, rstd;
    ref::layernorm(x, w, b, rows, cols, kEps, y, mean, rstd);
    // f32 sums of up to a few thousand terms (relative error ~1e-6 after
    // reassociation) feed every output: relative 2e-5 plus an absolute 2e-5
    // (y is O(1) and may cross zero, where relative error is meaningless).
    CheckResult r = compare(dy.read<float>(), y, 2e-5, 2e-5, "y");
    r = merge(r, compare(dmean.read<float>(), mean, 0, 2e-5, "mean"));
    r = merge(r, compare(drstd.read<float>(), rstd, 0, 2e-5, "rstd"));
    return r;
  };
  return launch;
}
}  // namespace

Example layernormExample() {
  Example e;
  e.name = "layernorm";
  e.summary = "row-wise LayerNorm with weight and bias, also writing mean and rstd";
  e.kernel = [] { return layernorm(1024); };
  e.prepare = prepare;
  e.testShapes = {{1, 1}, {7, 1000}, {64, 1024}, {3, 4097}, {2, 3}};
  return e;
}

}  // namespace tessera::examples

// Usage: layernorm [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(layernormExample)

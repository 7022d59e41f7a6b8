// rmsnorm: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight.
//
// One program per row, the whole row in one tile (BLOCK = next power of two
// >= cols). Masked-off lanes load 0, so they add nothing to the sum of
// squares, which is divided by the true column count.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel rmsnorm(int BLOCK, const char* name) {
  return ts::kernel(
      name, {"y", "x", "weight", "cols", "eps"},
      [=](ts::Ptr<float> y, ts::Ptr<const float> x, ts::Ptr<const float> weight, ts::Int cols, ts::Float eps) {
        auto row = ts::program_id(0);
        auto c = ts::arange(BLOCK);
        auto mask = c < cols;
        auto v = ts::load(x + row * cols + c, mask, 0.0f);
        auto ms = ts::sum(v * v, 0) / cols.to(ts::f32);
        auto w = ts::load(weight + c, mask);
        ts::store(y + row * cols + c, v * ts::rsqrt(ms + eps) * w, mask);
      });
}

namespace ref {
/// Plain C++ reference, in double.
std::vector<double> rmsnorm(const std::vector<float>& x, const std::vector<float>& w, int64_t rows, int64_t cols,
                            double eps) {
  std::vector<double> y(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[size_t(r * cols)];
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += double(xr[c]) * xr[c];
    double rs = 1.0 / std::sqrt(ss / double(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) y[size_t(r * cols + c)] = xr[c] * rs * w[size_t(c)];
  }
  return y;
}
}  // namespace ref

Launch rmsnormLaunch(const RunContext& ctx, const char* name,
                     const std::function<std::pair<Kernel, Dim3>(int64_t rows, int64_t cols)>& kernelFor) {
  constexpr float kEps = 1e-6f;
  auto [rows, cols] = rowsCols(ctx, name);
  std::mt19937_64 rng(ctx.seed);
  std::vector<float> x = randomVector(size_t(rows * cols), rng, -2.0f, 2.0f);
  std::vector<float> w = randomVector(size_t(cols), rng, 0.5f, 1.5f);

  Buffer dx = ctx.device.upload(DType::F32, x), dw = ctx.device.upload(DType::F32, w);
  Buffer dy = ctx.device.alloc(DType::F32, size_t(rows * cols));
  auto [kernel, grid] = kernelFor(rows, cols);
  Launch launch{std::move(kernel), grid, {dy, dx, dw, int32_t(cols), kEps}, {rows, cols}};

  // One reassociated f32 sum of squares (relative error ~1e-6) scales every
  // output: relative 1e-5 plus an absolute 1e-6 for outputs near zero.
  launch.check = [dy, x = std::move(x), w = std::move(w), rows = rows, cols = cols] {
    return compare(dy.read<float>(), ref::rmsnorm(x, w, rows, cols, kEps), 1e-6, 1e-5);
  };
  return launch;
}

namespace {
Launch prepare(const RunContext& ctx) {
  return rmsnormLaunch(ctx, "rmsnorm", [](int64_t rows, int64_t cols) {
    return std::pair{rmsnorm(nextPow2(cols)), Dim3(uint32_t(rows))};
  });
}
}  // namespace

Example rmsnormExample() {
  Example e;
  e.name = "rmsnorm";
  e.summary = "row-wise RMSNorm with weight, one program per row";
  e.kernel = [] { return rmsnorm(1024); };
  e.prepare = prepare;
  e.testShapes = {{1, 1}, {7, 1000}, {64, 1024}, {3, 4097}, {2, 3}};
  return e;
}

}  // namespace tessera::examples

// Usage: rmsnorm [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(rmsnormExample)

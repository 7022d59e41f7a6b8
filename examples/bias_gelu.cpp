// bias_gelu: out[r, c] = gelu(x[r, c] + bias[c]) with the exact (erf) GELU,
//   gelu(v) = v/2 * (1 + erf(v / sqrt(2))).
//
// A 2-D grid: program (r, j) handles columns [j*BLOCK, (j+1)*BLOCK) of row r,
// so wide rows are split over several programs. The bias row is shared by
// all rows; the mask switches off the columns past the end of a row.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel biasGelu(int BLOCK) {
  return ts::kernel("bias_gelu", {"out", "x", "bias", "cols"},
                    [=](ts::Ptr<float> out, ts::Ptr<const float> x, ts::Ptr<const float> bias, ts::Int cols) {
                      auto row = ts::program_id(0);
                      auto c = ts::program_id(1) * BLOCK + ts::arange(BLOCK);  // this block's columns
                      auto mask = c < cols;
                      auto v = ts::load(x + row * cols + c, mask) + ts::load(bias + c, mask);
                      auto y = 0.5f * v * (1.0f + ts::erf(v * 0.70710678118654752440f));
                      ts::store(out + row * cols + c, y, mask);
                    });
}

namespace ref {
/// Plain C++ reference, in double.
std::vector<double> biasGelu(const std::vector<float>& x, const std::vector<float>& bias, int64_t rows, int64_t cols) {
  std::vector<double> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double v = double(x[size_t(r * cols + c)]) + double(bias[size_t(c)]);
      out[size_t(r * cols + c)] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    }
  return out;
}
}  // namespace ref

namespace {
constexpr int kBlock = 256;

Launch prepare(const RunContext& ctx) {
  auto [rows, cols] = rowsCols(ctx, "bias_gelu");
  std::mt19937_64 rng(ctx.seed);
  std::vector<float> x = randomVector(size_t(rows * cols), rng, -4.0f, 4.0f);  // both tails of erf
  std::vector<float> bias = randomVector(size_t(cols), rng);

  Buffer dx = ctx.device.upload(DType::F32, x), db = ctx.device.upload(DType::F32, bias);
  Buffer dout = ctx.device.alloc(DType::F32, size_t(rows * cols));
  Dim3 grid(uint32_t(rows), uint32_t((cols + kBlock - 1) / kBlock));
  Launch launch{biasGelu(kBlock), grid, {dout, dx, db, int32_t(cols)}, {rows, cols}};

  // f32 arithmetic plus erf accurate to a few ulp: relative 1e-5 (about 80
  // ulp). For v << 0, 1 + erf(v/sqrt2) cancels: the f32 result carries an
  // absolute error of about |v|/2 * (a few ulp of 1) = up to ~1.2e-6 for
  // |v| <= 5, hence the absolute floor of 2e-6. A wrong index or formula
  // gives errors of order 0.1.
  launch.check = [dout, x = std::move(x), bias = std::move(bias), rows = rows, cols = cols] {
    return compare(dout.read<float>(), ref::biasGelu(x, bias, rows, cols), 2e-6, 1e-5);
  };
  return launch;
}
}  // namespace

Example biasGeluExample() {
  Example e;
  e.name = "bias_gelu";
  e.summary = "out = gelu(x + bias) (exact erf GELU), 2-D grid of row x column blocks";
  e.kernel = [] { return biasGelu(kBlock); };
  e.prepare = prepare;
  e.testShapes = {{1, 1}, {7, 1000}, {64, 1024}, {3, 4097}, {5, 256}};
  return e;
}

}  // namespace tessera::examples

// Usage: bias_gelu [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(biasGeluExample)

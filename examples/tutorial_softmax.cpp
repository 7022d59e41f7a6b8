// tutorial_softmax: row-wise softmax for rows of any length (docs/tutorial.md, step 2).
//
// examples/softmax.cpp holds a whole row in one tile, so a row must fit a
// tile. This version walks the row in chunks of BLOCK with ts::for_range and
// is still one fused kernel: pass 1 keeps a running maximum m and a running
// sum s of exp(x - m) (the "online softmax": when the maximum grows, the old
// sum is rescaled by exp(m_old - m_new)); pass 2 writes exp(x - m) / s.
// Global memory is read twice and written once, with no temporary buffer.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel tutorialSoftmax(int BLOCK) {
  auto body = [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int cols) {
    auto x_row = in + ts::program_id(0) * cols;  // this program's row
    auto y_row = out + ts::program_id(0) * cols;
    auto c = ts::arange(BLOCK);

    // Pass 1: the running maximum m and sum s, carried by the loop (f32 scalars).
    auto init = std::tuple{ts::full({}, -ts::inf, ts::f32), ts::zeros({}, ts::f32)};
    auto [m, s] = ts::for_range(0, cols, BLOCK, init, [&](ts::Int j, ts::Tensor m, ts::Tensor s) {
      auto mask = j + c < cols;                          // the last chunk is partial
      auto x = ts::load(x_row + j + c, mask, -ts::inf);  // masked lanes: exp(-inf) = 0
      auto m_new = ts::maximum(m, ts::max(x, 0));
      auto s_new = s * ts::exp(m - m_new) + ts::sum(ts::exp(x - m_new), 0);  // rescale, then add
      return std::tuple{m_new, s_new};
    });

    // Pass 2: normalise; one division per row, a multiply per element.
    auto inv = 1.0f / s;
    ts::for_range(0, cols, BLOCK, [&, m = m](ts::Int j) {
      auto mask = j + c < cols;
      auto x = ts::load(x_row + j + c, mask);
      ts::store(y_row + j + c, ts::exp(x - m) * inv, mask);
    });
  };
  return ts::kernel("tutorial_softmax", {"out", "in", "cols"}, body);
}

namespace {
constexpr int kBlock = 256;

/// Plain C++ reference, in double.
std::vector<double> reference(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<double> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[size_t(r * cols)];
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(xr[c]));
    for (int64_t c = 0; c < cols; ++c) s += std::exp(double(xr[c]) - m);
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * cols + c)] = std::exp(double(xr[c]) - m) / s;
  }
  return out;
}

Launch prepare(const RunContext& ctx) {
  auto [rows, cols] = rowsCols(ctx, "tutorial_softmax");
  std::mt19937_64 rng(ctx.seed);
  // Values grow along the row (+0.01 per column), so later chunks raise the
  // running maximum and the rescaling of the sum is exercised; odd rows sit
  // near +80, where exp() without the maximum subtracted would overflow.
  std::vector<float> x = randomVector(size_t(rows * cols), rng, -5.0f, 5.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[size_t(r * cols + c)] += 0.01f * float(c) + (r % 2 ? 80.0f : -80.0f);

  Buffer din = ctx.device.upload(DType::F32, x);
  Buffer dout = ctx.device.alloc(DType::F32, size_t(rows * cols));
  Launch launch{tutorialSoftmax(kBlock), Dim3(uint32_t(rows)), {dout, din, int32_t(cols)}, {rows, cols}};

  // exp() to a few ulp, the sum of up to a few thousand terms reassociated,
  // and one rescaling rounding per chunk: relative 2e-5; the absolute floor
  // covers entries that underflow towards zero.
  launch.check = [dout, x = std::move(x), rows = rows, cols = cols] {
    return compare(dout.read<float>(), reference(x, rows, cols), 1e-12, 2e-5);
  };
  return launch;
}
}  // namespace

Example tutorialSoftmaxExample() {
  Example e;
  e.name = "tutorial_softmax";
  e.summary = "softmax for rows of any length: online max and sum over chunks of the row (tutorial step 2)";
  e.kernel = [] { return tutorialSoftmax(kBlock); };
  e.prepare = prepare;
  // One element; whole chunks (256, 768); ragged rows (1000, 4097).
  e.testShapes = {{1, 1}, {3, 256}, {4, 768}, {5, 1000}, {2, 4097}};
  return e;
}

}  // namespace tessera::examples

// Usage: tutorial_softmax [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(tutorialSoftmaxExample)

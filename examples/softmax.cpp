// softmax: out[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)).
//
// One program per row, and the whole row in one tile of BLOCK lanes (BLOCK
// is the next power of two >= cols, chosen from the shape). Subtracting the
// row maximum keeps exp() from overflowing (numerically stable softmax);
// masked-off lanes load -inf so they neither win the max nor add to the sum
// (exp(-inf) = 0).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel softmax(int BLOCK) {
  return ts::kernel("softmax", {"out", "in", "cols"}, [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int cols) {
    auto row = ts::program_id(0);
    auto c = ts::arange(BLOCK);
    auto mask = c < cols;
    auto x = ts::load(in + row * cols + c, mask, -ts::inf);
    auto e = ts::exp(x - ts::max(x, 0));
    // One division per row, then a multiply per element: x86 divides 8 floats
    // in several cycles, multiplies them in one (the result differs from
    // e / sum by at most an ulp or so, well within the reference tolerance).
    ts::store(out + row * cols + c, e * (1.0f / ts::sum(e, 0)), mask);
  });
}

namespace ref {
/// Plain C++ reference, in double.
std::vector<double> softmax(const std::vector<float>& x, int64_t rows, int64_t cols) {
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
}  // namespace ref

namespace {

Launch prepare(const RunContext& ctx) {
  auto [rows, cols] = rowsCols(ctx, "softmax");
  std::mt19937_64 rng(ctx.seed);
  // Rows alternate around +80 and -80 (+-20): exp(100) overflows f32, so the
  // positive rows need the max subtraction; in the negative rows a masked
  // lane that wrongly read 0 instead of -inf would win the max and add
  // exp(0) = 1 to the sum, so they catch masking bugs.
  std::vector<float> x = randomVector(size_t(rows * cols), rng, -20.0f, 20.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[size_t(r * cols + c)] += (r % 2 ? 80.0f : -80.0f);

  Buffer din = ctx.device.upload(DType::F32, x);
  Buffer dout = ctx.device.alloc(DType::F32, size_t(rows * cols));
  // BLOCK: the next power of two >= cols, or a tune config's (docs/tune.md).
  const int64_t block = ctx.config ? ctx.config->getOr("BLOCK", nextPow2(cols)) : nextPow2(cols);
  Launch launch{softmax(int(block)), Dim3(uint32_t(rows)), {dout, din, int32_t(cols)}, {rows, cols}};

  // exp() to a few ulp and a reassociated f32 sum of up to a few thousand
  // terms: relative 1e-5; the absolute floor 1e-12 covers entries that
  // underflow towards zero (exp of -40 and below is tiny).
  launch.check = [dout, x = std::move(x), rows = rows, cols = cols] {
    return compare(dout.read<float>(), ref::softmax(x, rows, cols), 1e-12, 1e-5);
  };
  return launch;
}
}  // namespace

Example softmaxExample() {
  Example e;
  e.name = "softmax";
  e.summary = "row-wise numerically stable softmax, one program per row";
  e.kernel = [] { return softmax(1024); };
  e.prepare = prepare;
  e.testShapes = {{1, 1}, {7, 1000}, {64, 1024}, {3, 4097}, {2, 3}};
  // BLOCK from 256 to 16384 lanes (and, on GPUs, 1 to 8 warps); the row
  // must fit one tile, and a tile past 4x the row is lanes that only mask.
  e.tuneSpace = [](const Target& t, const std::vector<int64_t>& shape) {
    perf::TuneSpace s;
    s.param("BLOCK", {256, 512, 1024, 2048, 4096, 8192, 16384});
    if (t.kind != Target::Kind::CPU) s.param("num_warps", {1, 2, 4, 8});
    const int64_t cols = shape.size() == 2 ? shape[1] : 1;
    s.constrain("BLOCK >= cols (" + std::to_string(cols) + "): a row is one tile",
                [cols](const perf::TuneConfig& c) { return c.get("BLOCK") >= cols; });
    s.constrain("BLOCK <= 4 x cols rounded up to a power of two",
                [cols](const perf::TuneConfig& c) { return c.get("BLOCK") <= 4 * nextPow2(cols); });
    return s;
  };
  e.dtype = "f32";
  return e;
}

}  // namespace tessera::examples

// Usage: softmax [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(softmaxExample)

// vector_add: out[i] = a[i] + b[i] over n elements.
//
// The simplest Tessera kernel: a 1-D grid of programs, each adding one block
// of BLOCK consecutive elements. The last block is partial when n is not a
// multiple of BLOCK; a mask switches its out-of-range lanes off, so they
// neither read nor write memory.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

/// The kernel; BLOCK is a meta-parameter, fixed when the kernel is traced.
Kernel vectorAdd(int BLOCK) {
  return ts::kernel("vector_add", {"out", "a", "b", "n"},
                    [=](ts::Ptr<float> out, ts::Ptr<const float> a, ts::Ptr<const float> b, ts::Int n) {
                      auto offs = ts::program_id(0) * BLOCK + ts::arange(BLOCK);  // this block's indices
                      auto mask = offs < n;                                       // the tail guard
                      auto x = ts::load(a + offs, mask);
                      auto y = ts::load(b + offs, mask);
                      ts::store(out + offs, x + y, mask);
                    });
}

namespace ref {
/// Plain C++ reference, in double.
std::vector<double> vectorAdd(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = double(a[i]) + double(b[i]);
  return out;
}
}  // namespace ref

namespace {
constexpr int kBlock = 1024;

Launch prepare(const RunContext& ctx) {
  std::vector<int64_t> shape = ctx.shape.empty() ? std::vector<int64_t>{100003} : ctx.shape;
  if (shape.size() != 1 || shape[0] < 1 || shape[0] > INT32_MAX)
    throw UsageError("vector_add: the shape is {n} with 1 <= n < 2^31");
  const int64_t n = shape[0];

  std::mt19937_64 rng(ctx.seed);
  std::vector<float> a = randomVector(size_t(n), rng), b = randomVector(size_t(n), rng);

  Buffer da = ctx.device.upload(DType::F32, a), db = ctx.device.upload(DType::F32, b);
  Buffer dout = ctx.device.alloc(DType::F32, size_t(n));
  Dim3 grid(uint32_t((n + kBlock - 1) / kBlock));  // one program per block, the last one partial
  Launch launch{vectorAdd(kBlock), grid, {dout, da, db, int32_t(n)}, {n}};

  // One f32 addition is correctly rounded: the result is within half an ulp
  // (2^-24 relative) of the exact sum the reference computes.
  launch.check = [dout, a = std::move(a), b = std::move(b)] {
    return compare(dout.read<float>(), ref::vectorAdd(a, b), 0.0, 0x1p-24);
  };
  return launch;
}
}  // namespace

Example vectorAddExample() {
  Example e;
  e.name = "vector_add";
  e.summary = "out = a + b, BLOCK elements per program, masked tail";
  e.kernel = [] { return vectorAdd(kBlock); };
  e.prepare = prepare;
  e.testShapes = {{1}, {1000}, {1024}, {3 * 1024}, {100003}};
  return e;
}

}  // namespace tessera::examples

// Usage: vector_add [--dump] [n]
TESSERA_EXAMPLE_PROGRAM(vectorAddExample)

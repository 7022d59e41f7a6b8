#include "bench_kernels.h"

#include <cmath>
#include <cstdio>
#include <random>

#include "registry.h"

namespace tessera::bench {
namespace {

namespace ex = tessera::examples;

std::vector<float> randomVector(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

int nextPow2(int64_t n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// Checks are done on a sample of rows (first, middle, last) in double: enough
// to catch a wrong kernel without making the benchmark wait on the reference.
std::vector<int64_t> sampleRows(int64_t rows) { return {0, rows / 2, rows - 1}; }

bool close(double got, double want, double atol, double rtol, const char* what) {
  if (std::fabs(got - want) <= atol + rtol * std::fabs(want)) return true;
  std::printf("  %s: got %.9g, want %.9g\n", what, got, want);
  return false;
}

Setup vectorAdd(const Device& dev, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  const int BLOCK = 4096;
  auto a = randomVector(size_t(n), -1, 1, 1), b = randomVector(size_t(n), -1, 1, 2);
  auto k = compile(ex::vectorAdd(BLOCK), dev);
  Buffer da = dev.alloc(DType::F32, size_t(n)), db = dev.alloc(DType::F32, size_t(n)),
         dout = dev.alloc(DType::F32, size_t(n));
  da.write(a);
  db.write(b);
  Setup s;
  s.launch = [=](const LaunchOptions& lo) {
    k.launchWith(Dim3(uint32_t((n + BLOCK - 1) / BLOCK)), {dout, da, db, int32_t(n)}, lo);
  };
  s.check = [=] {
    auto out = dout.read<float>();
    for (int64_t i = 0; i < n; i += 7)
      if (!close(out[size_t(i)], double(a[size_t(i)]) + b[size_t(i)], 0, 1e-6, "vector_add")) return false;
    return true;
  };
  s.bytes = 12.0 * double(n);  // two reads and one write per element
  return s;
}

Setup softmax(const Device& dev, int64_t rows, int64_t cols) {
  auto x = randomVector(size_t(rows * cols), -8, 8, 3);
  auto k = compile(ex::softmax(nextPow2(cols)), dev);
  Buffer din = dev.alloc(DType::F32, x.size()), dout = dev.alloc(DType::F32, x.size());
  din.write(x);
  Setup s;
  s.launch = [=](const LaunchOptions& lo) { k.launchWith(Dim3(uint32_t(rows)), {dout, din, int32_t(cols)}, lo); };
  s.check = [=] {
    auto out = dout.read<float>();
    for (int64_t r : sampleRows(rows)) {
      const float* xr = &x[size_t(r * cols)];
      double m = -INFINITY, sum = 0;
      for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(xr[c]));
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(xr[c]) - m);
      for (int64_t c = 0; c < cols; ++c)
        if (!close(out[size_t(r * cols + c)], std::exp(double(xr[c]) - m) / sum, 1e-9, 1e-5, "softmax")) return false;
    }
    return true;
  };
  s.bytes = 8.0 * double(rows * cols);
  return s;
}

Setup layernorm(const Device& dev, int64_t rows, int64_t cols) {
  auto x = randomVector(size_t(rows * cols), -2, 3, 4), w = randomVector(size_t(cols), 0.5, 1.5, 5),
       b = randomVector(size_t(cols), -1, 1, 6);
  const float eps = 1e-5f;
  auto k = compile(ex::layernorm(nextPow2(cols)), dev);
  Buffer dx = dev.alloc(DType::F32, x.size()), dy = dev.alloc(DType::F32, x.size()),
         dm = dev.alloc(DType::F32, size_t(rows)), dr = dev.alloc(DType::F32, size_t(rows)),
         dw = dev.alloc(DType::F32, w.size()), db = dev.alloc(DType::F32, b.size());
  dx.write(x);
  dw.write(w);
  db.write(b);
  Setup s;
  s.launch = [=](const LaunchOptions& lo) {
    k.launchWith(Dim3(uint32_t(rows)), {dy, dm, dr, dx, dw, db, int32_t(cols), eps}, lo);
  };
  s.check = [=] {
    auto y = dy.read<float>();
    for (int64_t r : sampleRows(rows)) {
      const float* xr = &x[size_t(r * cols)];
      double m = 0, v = 0;
      for (int64_t c = 0; c < cols; ++c) m += xr[c];
      m /= double(cols);
      for (int64_t c = 0; c < cols; ++c) v += (xr[c] - m) * (xr[c] - m);
      double rs = 1.0 / std::sqrt(v / double(cols) + eps);
      for (int64_t c = 0; c < cols; ++c)
        if (!close(y[size_t(r * cols + c)], (xr[c] - m) * rs * w[size_t(c)] + b[size_t(c)], 2e-5, 1e-5, "layernorm"))
          return false;
    }
    return true;
  };
  s.bytes = 8.0 * double(rows * cols);
  return s;
}

Setup rmsnorm(const Device& dev, int64_t rows, int64_t cols) {
  auto x = randomVector(size_t(rows * cols), -2, 2, 7), w = randomVector(size_t(cols), 0.5, 1.5, 8);
  const float eps = 1e-6f;
  auto k = compile(ex::rmsnorm(nextPow2(cols)), dev);
  Buffer dx = dev.alloc(DType::F32, x.size()), dy = dev.alloc(DType::F32, x.size()),
         dw = dev.alloc(DType::F32, w.size());
  dx.write(x);
  dw.write(w);
  Setup s;
  s.launch = [=](const LaunchOptions& lo) { k.launchWith(Dim3(uint32_t(rows)), {dy, dx, dw, int32_t(cols), eps}, lo); };
  s.check = [=] {
    auto y = dy.read<float>();
    for (int64_t r : sampleRows(rows)) {
      const float* xr = &x[size_t(r * cols)];
      double ms = 0;
      for (int64_t c = 0; c < cols; ++c) ms += double(xr[c]) * xr[c];
      double rs = 1.0 / std::sqrt(ms / double(cols) + eps);
      for (int64_t c = 0; c < cols; ++c)
        if (!close(y[size_t(r * cols + c)], xr[c] * rs * w[size_t(c)], 2e-5, 1e-5, "rmsnorm")) return false;
    }
    return true;
  };
  s.bytes = 8.0 * double(rows * cols);
  return s;
}

}  // namespace

const std::vector<MemoryBoundKernel>& memoryBoundKernels() {
  static const std::vector<MemoryBoundKernel> list = {
      {"vector_add", vectorAdd},
      {"softmax", softmax},
      {"layernorm", layernorm},
      {"rmsnorm", rmsnorm},
  };
  return list;
}

Kernel emptyKernel() {
  return tessera::kernel("empty", {"unused"}, [](Ptr<float>) {});
}

}  // namespace tessera::bench

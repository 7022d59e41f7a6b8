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

#include "registry.h"

namespace ts = tessera;

namespace tessera::examples {

Kernel layernorm(int BLOCK) {
  return ts::kernel(
      "layernorm", {"y", "mean", "rstd", "x", "weight", "bias", "cols", "eps"},
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
               int64_t cols, double eps, std::vector<double>& y, std::vector<double>& mean,
               std::vector<double>& rstd) {
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

/// Deterministic values in [lo, hi).
std::vector<float> randomVector(size_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// |got - want| <= atol + rtol * |want| everywhere; reports the largest errors.
CheckResult compare(const std::vector<float>& got, const std::vector<double>& want, double atol, double rtol,
                    const char* what = "out") {
  CheckResult r;
  r.ok = got.size() == want.size();
  r.tolerance = rtol;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= atol + rtol * std::fabs(want[i]))) {  // NaN-safe
      if (r.ok) r.detail = std::string(what) + ": first mismatch at " + std::to_string(i) + ": got " +
                           std::to_string(got[i]) + ", want " + std::to_string(want[i]);
      r.ok = false;
    }
    r.maxAbsError = std::max(r.maxAbsError, std::isnan(err) ? INFINITY : err);
    if (std::fabs(want[i]) > 1e-30) r.maxRelError = std::max(r.maxRelError, err / std::fabs(want[i]));
  }
  return r;
}

/// Merges the checks of several outputs.
[[maybe_unused]] CheckResult merge(CheckResult a, const CheckResult& b) {
  if (a.ok && !b.ok) a.detail = b.detail;
  a.ok = a.ok && b.ok;
  a.maxAbsError = std::max(a.maxAbsError, b.maxAbsError);
  a.maxRelError = std::max(a.maxRelError, b.maxRelError);
  return a;
}

/// The smallest power of two >= n: the tile width that holds a whole row.
[[maybe_unused]] int nextPow2(int64_t n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

/// {rows, cols} from the context, or the default.
std::pair<int64_t, int64_t> rowsCols(const RunContext& ctx, const char* name) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{37, 1000} : ctx.shape;
  if (s.size() != 2 || s[0] < 1 || s[1] < 1 || s[0] > 65535 || s[1] > (1 << 20))
    throw Error(std::string(name) + ": the shape is {rows, cols} with 1 <= rows <= 65535, 1 <= cols <= 2^20");
  return {s[0], s[1]};
}

CheckResult run(const RunContext& ctx) {
  auto [rows, cols] = rowsCols(ctx, "layernorm");
  std::mt19937_64 rng(ctx.seed);
  // An offset mean (around 3) makes a one-pass variance visibly wrong.
  std::vector<float> x = randomVector(size_t(rows * cols), rng, 2.0f, 4.0f);
  std::vector<float> w = randomVector(size_t(cols), rng, 0.5f, 1.5f);
  std::vector<float> b = randomVector(size_t(cols), rng);

  CompiledKernel k = compile(layernorm(nextPow2(cols)), ctx.device, ctx.options);
  Buffer dx = ctx.device.upload(DType::F32, x), dw = ctx.device.upload(DType::F32, w);
  Buffer db = ctx.device.upload(DType::F32, b);
  Buffer dy = ctx.device.alloc(DType::F32, size_t(rows * cols));
  Buffer dmean = ctx.device.alloc(DType::F32, size_t(rows)), drstd = ctx.device.alloc(DType::F32, size_t(rows));
  k.launchWith(Dim3(uint32_t(rows)), {dy, dmean, drstd, dx, dw, db, int32_t(cols), kEps}, ctx.launch);

  std::vector<double> y, mean, rstd;
  ref::layernorm(x, w, b, rows, cols, kEps, y, mean, rstd);
  // f32 sums of up to a few thousand terms (relative error ~1e-6 after
  // reassociation) feed every output: relative 2e-5 plus an absolute 2e-5
  // (y is O(1) and may cross zero, where relative error is meaningless).
  CheckResult r = compare(dy.read<float>(), y, 2e-5, 2e-5, "y");
  r = merge(r, compare(dmean.read<float>(), mean, 0, 2e-5, "mean"));
  r = merge(r, compare(drstd.read<float>(), rstd, 0, 2e-5, "rstd"));
  return r;
}
}  // namespace

Example layernormExample() {
  Example e;
  e.name = "layernorm";
  e.summary = "row-wise LayerNorm with weight and bias, also writing mean and rstd";
  e.kernel = [] { return layernorm(1024); };
  e.run = run;
  e.testShapes = {{1, 1}, {7, 1000}, {64, 1024}, {3, 4097}, {2, 3}};
  return e;
}

}  // namespace tessera::examples

#ifdef TESSERA_EXAMPLE_MAIN
// Usage: layernorm [--dump] [rows cols]
int main(int argc, char** argv) {
  namespace ex = tessera::examples;
  try {
    ex::RunContext ctx;  // CPU device, default options
    bool dump = false;
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--dump") dump = true;
      else ctx.shape.push_back(std::stoll(argv[i]));
    }
    ex::CheckResult r = ex::layernormExample().run(ctx);
    std::printf("layernorm: max abs error %.3g, max rel error %.3g (tolerance %.3g): %s\n", r.maxAbsError,
                r.maxRelError, r.tolerance, r.ok ? "PASS" : "FAIL");
    if (!r.ok) std::printf("  %s\n", r.detail.c_str());
    if (dump) {  // the example's default kernel: TileIR, optimised LLVM IR and host assembly
      auto k = tessera::compile(ex::layernormExample().kernel(), ctx.device, ctx.options);
      for (auto s : {tessera::Stage::TileIR, tessera::Stage::LLVMOptimized, tessera::Stage::Assembly})
        std::printf("==== %s ====\n%s\n", tessera::name(s), k.dump(s).c_str());
    }
    return r.ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
#endif

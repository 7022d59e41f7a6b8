// cross_entropy: the loss of a language model's last layer and its
// gradient in one kernel, as training libraries fuse them: for logits
// [rows, V] (f32) and a target class per row,
//   loss[r]     = logsumexp(x[r, :]) - x[r, target[r]]
//   grad[r, j]  = scale * (softmax(x[r, :])[j] - (j == target[r]))
// with scale = 1 / rows for a mean loss. A row whose target is
// ignore_index (-100, PyTorch's convention: padding) has loss 0 and a zero
// gradient.
//
// One program per row. The vocabulary is too wide for one tile (32k-256k
// classes), so the row is read twice in BLOCK-wide chunks: pass 1 keeps per
// lane a running maximum m and a running sum s of exp(x - m), rescaled when
// m grows (the online softmax of flash attention, per lane), then combines
// the lanes into logsumexp; pass 2 writes the gradient from it. The target
// logit is one scalar load whose address depends on the loaded target.
//
// Shape: {rows, V}; default {37, 5000}.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "support.h"

namespace ts = tessera;

namespace tessera::examples {

namespace {
constexpr int32_t kIgnoreIndex = -100;
}  // namespace

Kernel crossEntropy(int BLOCK) {
  return ts::kernel("cross_entropy", {"loss", "grad", "logits", "targets", "V", "scale"},
                    [=](ts::Ptr<float> loss, ts::Ptr<float> grad, ts::Ptr<const float> logits,
                        ts::Ptr<const int32_t> targets, ts::Int V, ts::Float scale) {
                      auto row = ts::program_id(0);
                      auto x0 = logits + row * V;
                      auto t = ts::load(targets + row);
                      auto valid = t != kIgnoreIndex;
                      // Pass 1. Lanes start at a finite -1e30, not -inf: a lane that only
                      // ever sees masked (-inf) elements then adds exp(-inf) = 0 instead of
                      // exp(-inf - -inf) = NaN.
                      auto init = std::tuple{ts::full({BLOCK}, -1e30, ts::f32), ts::zeros({BLOCK}, ts::f32)};
                      auto [m, s] = ts::for_range(0, V, BLOCK, init, [&](ts::Int c0, ts::Tensor m, ts::Tensor s) {
                        auto c = c0 + ts::arange(BLOCK);
                        auto x = ts::load(x0 + c, c < V, -ts::inf);
                        auto mnew = ts::maximum(m, x);
                        return std::tuple{mnew, s * ts::exp(m - mnew) + ts::exp(x - mnew)};
                      });
                      auto mx = ts::max(m, 0);
                      auto lse = mx + ts::log(ts::sum(s * ts::exp(m - mx), 0));
                      auto xt = ts::load(x0 + ts::where(valid, t, 0));  // the target's logit (row 0's for ignored rows)
                      ts::store(loss + row, ts::where(valid, lse - xt, 0.0f));
                      // Pass 2: the gradient, zero for an ignored row.
                      auto g = ts::where(valid, scale, 0.0f);
                      ts::for_range(0, V, BLOCK, [&](ts::Int c0) {
                        auto c = c0 + ts::arange(BLOCK);
                        auto x = ts::load(x0 + c, c < V);
                        auto onehot = (c == t).to(ts::f32);
                        ts::store(grad + row * V + c, (ts::exp(x - lse) - onehot) * g, c < V);
                      });
                    });
}

namespace ref {
/// Plain C++ reference in double: loss per row and the gradient.
void crossEntropy(const std::vector<float>& x, const std::vector<int32_t>& targets, int64_t rows, int64_t V,
                  double scale, std::vector<double>& loss, std::vector<double>& grad) {
  loss.assign(size_t(rows), 0.0);
  grad.assign(size_t(rows * V), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets[size_t(r)];
    if (t == kIgnoreIndex) continue;
    const float* xr = &x[size_t(r * V)];
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < V; ++j) m = std::max(m, double(xr[j]));
    for (int64_t j = 0; j < V; ++j) s += std::exp(double(xr[j]) - m);
    const double lse = m + std::log(s);
    loss[size_t(r)] = lse - xr[t];
    for (int64_t j = 0; j < V; ++j)
      grad[size_t(r * V + j)] = scale * (std::exp(double(xr[j]) - lse) - (j == t ? 1.0 : 0.0));
  }
}
}  // namespace ref

namespace {

Launch prepare(const RunContext& ctx) {
  RunContext shaped = ctx;
  if (shaped.shape.empty()) shaped.shape = {37, 5000};  // several chunks per row
  auto [rows, V] = rowsCols(shaped, "cross_entropy");
  std::mt19937_64 rng(ctx.seed);
  // Logits spread over +-10 (probabilities from 1e-9 to near 1).
  std::vector<float> x = randomVector(size_t(rows * V), rng, -10.0f, 10.0f);
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (auto& t : targets) t = int32_t(std::uniform_int_distribution<int64_t>(0, V - 1)(rng));
  if (rows >= 3) targets[1] = kIgnoreIndex;  // a padding row
  const double scale = 1.0 / double(rows);
  const int block = 1024;
  Buffer dloss = ctx.device.alloc(DType::F32, size_t(rows)), dgrad = ctx.device.alloc(DType::F32, x.size());
  dloss.fillBytes(0xff);  // NaN: an output never written cannot pass
  dgrad.fillBytes(0xff);
  Launch launch{crossEntropy(block),
                Dim3(uint32_t(rows)),
                {dloss, dgrad, ctx.device.upload(DType::F32, x), ctx.device.upload(DType::I32, targets), int32_t(V),
                 float(scale)},
                {rows, V}};
  // Errors, u = 2^-24: logsumexp from f32 exponentials (a few u each,
  // relative) summed over V terms in some order: its sum is off by at most
  // (V + 8) u relatively, logsumexp by that much absolutely, plus the f32
  // rounding of a value up to ~|max| + log V. The gradient's exp(x - lse)
  // carries the error of lse and of the subtraction (|x - lse| u) relative
  // to p, then a product with the scale.
  launch.check = [dloss, dgrad, x = std::move(x), targets = std::move(targets), rows = rows, V = V, scale] {
    std::vector<double> loss, grad;
    ref::crossEntropy(x, targets, rows, V, scale, loss, grad);
    const double u = std::ldexp(1.0, -24), sumErr = double(V + 8) * u;
    std::vector<double> lse(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < V; ++j) m = std::max(m, double(x[size_t(r * V + j)]));
      for (int64_t j = 0; j < V; ++j) s += std::exp(double(x[size_t(r * V + j)]) - m);
      lse[size_t(r)] = m + std::log(s);
    }
    CheckResult a =
        compareWith(dloss.read<float>(), loss, sumErr, "loss",
                    "|got - want| <= 2 e + 4u (|lse| + |want|), e = " + ElementCheck::fmt(sumErr) +
                        " (the f32 sum's error), u = 2^-24",
                    [&](size_t r) { return 2 * sumErr + 4 * u * (std::fabs(lse[r]) + std::fabs(loss[r])); });
    CheckResult b = compareWith(
        dgrad.read<float>(), grad, sumErr, "grad",
        "|got - want| <= s (p (2 e + 4u (|x| + |lse| + 4)) + 2u), p = exp(x - lse), s the scale, e = " +
            ElementCheck::fmt(sumErr) + ", u = 2^-24",
        [&](size_t e) {
          const size_t r = e / size_t(V);
          const double p = std::exp(double(x[e]) - lse[r]);
          return scale * (p * (2 * sumErr + 4 * u * (std::fabs(double(x[e])) + std::fabs(lse[r]) + 4)) + 2 * u);
        });
    return merge(a, b);
  };
  return launch;
}

}  // namespace

Example crossEntropyExample() {
  Example e;
  e.name = "cross_entropy";
  e.summary = "cross-entropy loss and its gradient in one kernel, [rows, V] f32 logits, two chunked passes per row";
  e.kernel = [] { return crossEntropy(1024); };
  e.prepare = prepare;
  // One class; a vocabulary narrower than a chunk; ragged several chunks
  // (with an ignored row); an aligned one.
  e.testShapes = {{1, 1}, {4, 33}, {3, 5000}, {2, 2048}};
  return e;
}

}  // namespace tessera::examples

// Usage: cross_entropy [--dump] [rows V]
TESSERA_EXAMPLE_PROGRAM(crossEntropyExample)

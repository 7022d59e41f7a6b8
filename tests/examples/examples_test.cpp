// Every bundled example, on every test shape, on the CPU, against its plain
// C++ reference; and each reference against hand-computed values, so that a
// wrong reference cannot make a wrong kernel pass.
#include <catch2/catch.hpp>

#include <cmath>

#include "registry.h"
#include "support.h"
#include "../cpu_paths.h"

namespace ts = tessera;
namespace ex = tessera::examples;

// The references are defined in examples/<name>.cpp.
namespace tessera::examples::ref {
std::vector<double> rope(const std::vector<float>& x, const std::vector<int32_t>& positions, int64_t tokens,
                         int64_t heads, int64_t D);
void crossEntropy(const std::vector<float>& x, const std::vector<int32_t>& targets, int64_t rows, int64_t V,
                  double scale, std::vector<double>& loss, std::vector<double>& grad);
std::vector<double> attention(const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
                              const std::vector<uint16_t>& v, int64_t heads, int64_t n, int64_t D, bool causal,
                              float (*value)(uint16_t) = fromHalf);
std::vector<double> vectorAdd(const std::vector<float>& a, const std::vector<float>& b);
std::vector<double> biasGelu(const std::vector<float>& x, const std::vector<float>& bias, int64_t rows, int64_t cols);
std::vector<double> softmax(const std::vector<float>& x, int64_t rows, int64_t cols);
void layernorm(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b, int64_t rows,
               int64_t cols, double eps, std::vector<double>& y, std::vector<double>& mean, std::vector<double>& rstd);
std::vector<double> rmsnorm(const std::vector<float>& x, const std::vector<float>& w, int64_t rows, int64_t cols,
                            double eps);
}  // namespace tessera::examples::ref

namespace {
void requireNear(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-9) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i);
    CHECK(std::fabs(got[i] - want[i]) <= tol);
  }
}

std::string shapeStr(const std::vector<int64_t>& s) {
  std::string r;
  for (auto d : s) {
    if (!r.empty()) r += "x";
    r += std::to_string(d);
  }
  return r;
}
}  // namespace

TEST_CASE("the registry lists the examples in order", "[examples]") {
  std::vector<std::string> names;
  for (const auto& e : ex::all()) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"vector_add",
                                          "bias_gelu",
                                          "softmax",
                                          "layernorm",
                                          "rmsnorm",
                                          "rmsnorm_cluster",
                                          "gemm_f32",
                                          "gemm_f16",
                                          "gemm_bf16",
                                          "gemm_fp8",
                                          "gemm_int8",
                                          "gemm_batched",
                                          "gemm_split_k",
                                          "tutorial_softmax",
                                          "tutorial_gemm",
                                          "tp_mlp",
                                          "sp_rmsnorm",
                                          "dropout_residual_layernorm",
                                          "flash_attention",
                                          "flash_attention_causal",
                                          "flash_attention_bf16",
                                          "flash_attention_causal_bf16",
                                          "flash_attention_varlen",
                                          "flash_attention_backward",
                                          "flash_attention_backward_causal",
                                          "rope",
                                          "cross_entropy",
                                          "paged_decode_attention",
                                          "moe_grouped_gemm",
                                          "moe_grouped_gemm_swiglu",
                                          "gemm_mxfp8",
                                          "gemm_mxfp4",
                                          "gemm_nvfp4",
                                          "mx_quantize",
                                          "nvfp4_quantize",
                                          "mxfp8_quantize",
                                          "mxfp6_quantize",
                                          "gemm_quant_mxfp8",
                                          "mx_dequantize"});
  REQUIRE(ex::find("softmax") != nullptr);
  CHECK(ex::find("nope") == nullptr);
  for (const auto& e : ex::all()) {
    INFO(e.name);
    ts::Kernel k = e.kernel();
    CHECK(k.name() == e.name);
    CHECK_FALSE(e.summary.empty());
    CHECK(e.testShapes.size() >= 3);
  }
}

TEST_CASE("every example matches its reference on every test shape (CPU)", "[examples][cpu]") {
  // The host's own code, then each vector path the host can run (AVX2, and
  // AVX-512 on AVX-512 hosts), pinned so both paths are executed.
  for (const ts::Device& dev : testpaths::cpuDevices())
    for (const auto& e : ex::all()) {
      for (const auto& shape : e.testShapes) {
        for (uint64_t seed : {1u, 7u}) {
          ex::RunContext ctx;
          ctx.device = dev;
          ctx.shape = shape;
          ctx.seed = seed;
          INFO(e.name << " on " << dev.name() << " shape " << shapeStr(shape) << " seed " << seed);
          ex::CheckResult r = e.run(ctx);
          INFO(r.detail << " max abs " << r.maxAbsError << " max rel " << r.maxRelError);
          REQUIRE(r.ok);
          CHECK(r.tolerance > 0);
        }
      }
    }
}

TEST_CASE("every example passes a checked launch on the CPU (no false reports)", "[examples][cpu][checked]") {
  for (const auto& e : ex::all())
    for (const auto& shape : e.testShapes) {
      ex::RunContext ctx;
      ctx.shape = shape;
      ctx.launch.checkBounds = true;
      INFO(e.name << " shape " << shapeStr(shape));
      ex::CheckResult r = e.run(ctx);
      INFO(r.detail);
      REQUIRE(r.ok);
    }
}

TEST_CASE("examples run with their default shapes and reject malformed ones", "[examples][cpu]") {
  for (const auto& e : ex::all()) {
    INFO(e.name);
    ex::RunContext ctx;
    ctx.launch.threads = 1;  // a single worker gives the same answers
    CHECK(e.run(ctx).ok);
    ctx.shape = {2, 3, 4, 5, 6, 7};  // no example takes a rank-6 problem shape
    CHECK_THROWS_AS(e.run(ctx), ts::Error);
    ctx.shape = {0};
    CHECK_THROWS_AS(e.run(ctx), ts::Error);
  }
}

TEST_CASE("reference: vector_add", "[examples][reference]") {
  requireNear(ex::ref::vectorAdd({1.0f, 2.0f, -3.5f}, {0.5f, -2.0f, 1.25f}), {1.5, 0.0, -2.25});
}

TEST_CASE("reference: bias_gelu uses the exact erf GELU", "[examples][reference]") {
  // gelu(v) = v * Phi(v); Phi(1) = 0.8413447460685429, Phi(-1) = 0.15865525393145707.
  auto y = ex::ref::biasGelu({0.0f, 0.5f, -1.0f, 2.0f}, {0.0f, 0.5f}, 2, 2);
  requireNear(y, {0.0, 0.8413447460685429, -0.15865525393145707, 2.5 * 0.99379033467422384}, 1e-12);
}

TEST_CASE("reference: flash_attention, causal and not", "[examples][reference]") {
  // One head, two rows, D = 1 (scale 1): q = 1, keys 0 and 1, values 1 and -1.
  // Both keys: weights 1/(1+e) and e/(1+e), output (1-e)/(1+e) = -tanh(1/2).
  // Causal row 0 sees only key 0: output 1.
  auto h = [](float x) { return ex::toHalf(x); };
  std::vector<uint16_t> q{h(1), h(1)}, k{h(0), h(1)}, v{h(1), h(-1)};
  const double both = -std::tanh(0.5);
  requireNear(ex::ref::attention(q, k, v, 1, 2, 1, false), {both, both}, 1e-12);
  requireNear(ex::ref::attention(q, k, v, 1, 2, 1, true), {1.0, both}, 1e-12);
  // D = 4 scales the scores by 1/2: q.k = 4 for key 1 gives score 2.
  std::vector<uint16_t> q4(8, h(1)), k4{h(0), h(0), h(0), h(0), h(1), h(1), h(1), h(1)};
  std::vector<uint16_t> v4{h(1), h(1), h(1), h(1), h(-1), h(-1), h(-1), h(-1)};
  const double w = std::exp(2.0) / (1 + std::exp(2.0));
  auto got = ex::ref::attention(q4, k4, v4, 1, 2, 4, false);
  requireNear(got, std::vector<double>(8, (1 - w) - w), 1e-12);
}

TEST_CASE("reference: rope turns plane i by position * 10000^(-2i/D)", "[examples][reference]") {
  // D = 4: planes (x0, x2) at angle p and (x1, x3) at p / 100.
  const double p = 3;
  auto y = ex::ref::rope({1, 2, 0, 0}, {3}, 1, 1, 4);
  requireNear(y, {std::cos(p), 2 * std::cos(p / 100), std::sin(p), 2 * std::sin(p / 100)}, 1e-12);
  // Position 0 is the identity; each head of a token turns alike.
  requireNear(ex::ref::rope({1, 2, 3, 4, 5, 6, 7, 8}, {0}, 1, 2, 4), {1, 2, 3, 4, 5, 6, 7, 8}, 0);
  auto two = ex::ref::rope({1, 0, 0, 0, 1, 0, 0, 0}, {1}, 1, 2, 4);
  requireNear(two, {std::cos(1.0), 0, std::sin(1.0), 0, std::cos(1.0), 0, std::sin(1.0), 0}, 1e-12);
}

TEST_CASE("reference: cross_entropy loss and gradient, and the ignored row", "[examples][reference]") {
  // Logits 0 and ln 3: softmax 1/4, 3/4. Target 1: loss -ln(3/4); target 0:
  // loss ln 4. Gradient (p - onehot) * scale with scale 1/2.
  const float ln3 = std::log(3.0f);
  std::vector<double> loss, grad;
  ex::ref::crossEntropy({0.0f, ln3, 0.0f, ln3, 5.0f, 7.0f}, {1, 0, -100}, 3, 2, 0.5, loss, grad);
  const double p0 = 1 / (1 + std::exp(double(ln3)));  // 1/4 up to ln 3's rounding to f32
  requireNear(loss, {-std::log(1 - p0), -std::log(p0), 0.0}, 1e-9);
  requireNear(grad, {0.5 * p0, 0.5 * (1 - p0 - 1), 0.5 * (p0 - 1), 0.5 * (1 - p0), 0.0, 0.0}, 1e-9);
}

TEST_CASE("reference: softmax", "[examples][reference]") {
  float ln3 = std::log(3.0f);
  auto y = ex::ref::softmax({0.0f, ln3, 1.0f, 1.0f, 1000.0f, 0.0f}, 3, 2);
  requireNear(y, {0.25, 0.75, 0.5, 0.5, 1.0, 0.0}, 1e-7);
  // Rows sum to one even for large inputs (the max is subtracted).
  auto z = ex::ref::softmax({100.0f, 101.0f, 102.0f, 103.0f}, 1, 4);
  double s = 0;
  for (double v : z) s += v;
  CHECK(std::fabs(s - 1.0) < 1e-12);
  CHECK(std::fabs(z[3] / z[2] - std::exp(1.0)) < 1e-9);
}

TEST_CASE("reference: layernorm", "[examples][reference]") {
  // x = 1 2 3 4: mean 2.5, var 1.25, rstd 1/sqrt(1.25) = 0.8944271909999159.
  std::vector<double> y, mean, rstd;
  ex::ref::layernorm({1, 2, 3, 4}, {2, 2, 2, 2}, {1, 1, 1, 1}, 1, 4, 0.0, y, mean, rstd);
  const double r = 0.8944271909999159;
  requireNear(mean, {2.5});
  requireNear(rstd, {r});
  requireNear(y, {-1.5 * r * 2 + 1, -0.5 * r * 2 + 1, 0.5 * r * 2 + 1, 1.5 * r * 2 + 1});
  // eps enters under the square root: a constant row gives rstd = 1/sqrt(eps).
  ex::ref::layernorm({5, 5}, {1, 1}, {0, 0}, 1, 2, 0.25, y, mean, rstd);
  requireNear(rstd, {2.0});
  requireNear(y, {0.0, 0.0});
}

TEST_CASE("reference: rmsnorm", "[examples][reference]") {
  // x = 3 4: mean square 12.5, 1/sqrt(12.5) = 0.28284271247461906.
  auto y = ex::ref::rmsnorm({3, 4}, {1, 2}, 1, 2, 0.0);
  requireNear(y, {3 * 0.28284271247461906, 8 * 0.28284271247461906});
  auto z = ex::ref::rmsnorm({1, 1}, {1, 1}, 1, 2, 3.0);  // 1/sqrt(1 + 3) = 0.5
  requireNear(z, {0.5, 0.5});
}

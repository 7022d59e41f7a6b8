// The GEMM examples on the CPU: every test shape and several seeds against
// the plain C++ references, other block sizes (tiles smaller than, equal to
// and larger than the problem), and the references themselves against
// hand-computed values.
#include <catch2/catch.hpp>

#include <cmath>

#include "support.h"
#include "../cpu_paths.h"

namespace ts = tessera;
namespace ex = tessera::examples;

namespace {
/// The examples' reference on row-major float matrices.
ex::GemmReference reference(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& bias,
                            int64_t M, int64_t N, int64_t K, int act) {
  return ex::gemmReference(
      M, N, K, [&](int64_t i, int64_t k) { return a[size_t(i * K + k)]; },
      [&](int64_t k, int64_t j) { return b[size_t(k * N + j)]; }, bias, act);
}
}  // namespace

TEST_CASE("gemm examples match their references on every test shape (CPU)", "[examples][gemm][cpu]") {
  for (const char* name : {"gemm_f32", "gemm_f16", "gemm_bf16", "gemm_batched"}) {
    const ex::Example* e = ex::find(name);
    REQUIRE(e != nullptr);
    CHECK(e->kernel().name() == name);
    for (const auto& shape : e->testShapes)
      for (uint64_t seed : {3u, 11u}) {
        ex::RunContext ctx;
        ctx.shape = shape;
        ctx.seed = seed;
        ctx.launch.threads = 2;
        INFO(name << " shape #" << (&shape - e->testShapes.data()) << " seed " << seed);
        ex::CheckResult r = e->run(ctx);
        INFO(r.detail << " max abs " << r.maxAbsError);
        REQUIRE(r.ok);
      }
  }
}

TEST_CASE("gemm_f32 with other block sizes and each activation", "[examples][gemm][cpu]") {
  // The example runs with the device default blocks; here the kernel is
  // compiled with others and checked against the reference directly.
  const ex::GemmBlocks blocks[] = {{16, 16, 16}, {32, 64, 16}, {6, 16, 8}, {128, 128, 64}, {64, 32, 128}};
  const int64_t M = 70, N = 45, K = 37;
  std::vector<float> a(M * K), b(K * N), bias(N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float((i * 37) % 17) / 8.0f - 1.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float((i * 11) % 13) / 6.0f - 1.0f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = float(i % 5) - 2.0f;
  for (const ts::Device& dev : testpaths::cpuDevices())
    for (const auto& B : blocks)
      for (int act : {0, 1, 2}) {
        INFO(dev.name() << " blocks " << B.m << "x" << B.n << "x" << B.k << " act " << act);
        auto k = ts::compile(ex::gemmF32(B, ex::Activation(act)), dev);
        ts::Buffer da = dev.upload(ts::DType::F32, a), db = dev.upload(ts::DType::F32, b);
        ts::Buffer dbias = dev.upload(ts::DType::F32, bias), dc = dev.alloc(ts::DType::F32, size_t(M * N));
        k.launch(ts::Dim3(uint32_t((M + B.m - 1) / B.m), uint32_t((N + B.n - 1) / B.n)), dc, da, db, dbias, int32_t(M),
                 int32_t(N), int32_t(K));
        ex::GemmReference r = reference(a, b, bias, M, N, K, act);
        const std::vector<double>& want = r.want;
        const std::vector<double>& mag = r.mag;
        auto got = dc.read<float>();
        for (size_t i = 0; i < want.size(); ++i) {
          INFO("element " << i);
          REQUIRE(std::fabs(got[i] - want[i]) <= 1e-5 * mag[i] + 1e-5 * std::fabs(want[i]) + 1e-6);
        }
      }
}

TEST_CASE("the gemm reference against hand-computed values", "[examples][gemm]") {
  // [1 2; 3 4] @ [5 6; 7 8] = [19 22; 43 50]; + bias [1, -100].
  ex::GemmReference r = reference({1, 2, 3, 4}, {5, 6, 7, 8}, {1, -100}, 2, 2, 2, 0);
  CHECK(r.want == std::vector<double>{20, -78, 44, -50});
  CHECK(r.mag == std::vector<double>{20, 122, 44, 150});
  r = reference({1, 2, 3, 4}, {5, 6, 7, 8}, {1, -100}, 2, 2, 2, 1);  // ReLU
  CHECK(r.want == std::vector<double>{20, 0, 44, 0});
  r = reference({1}, {-1}, {}, 1, 1, 1, 2);  // GELU(-1) = -0.5 (1 - erf(1/sqrt 2))
  CHECK(r.want[0] == Approx(-0.15865525393145705).epsilon(1e-12));
}

TEST_CASE("gemm examples reject malformed shapes", "[examples][gemm]") {
  ex::RunContext ctx;
  ctx.shape = {10, 10};
  CHECK_THROWS_AS(ex::find("gemm_f32")->run(ctx), ts::Error);
  ctx.shape = {0, 10, 10};
  CHECK_THROWS_AS(ex::find("gemm_f16")->run(ctx), ts::Error);
  ctx.shape = {10, 10, 10};
  CHECK_THROWS_AS(ex::find("gemm_batched")->run(ctx), ts::Error);
}

TEST_CASE("the f16 / bf16 GEMM references apply the activation of the shape", "[examples][gemm]") {
  // activationRef is what gemm_f16 / gemm_bf16 compare against:
  // GELU(1) = Phi(1) = 0.8413447460685429, GELU(-1) = -0.15865525393145707.
  CHECK(ex::activationRef(-2.5, 0) == -2.5);
  CHECK(ex::activationRef(-2.5, 1) == 0.0);
  CHECK(ex::activationRef(3.0, 1) == 3.0);
  CHECK(ex::activationRef(1.0, 2) == Approx(0.8413447460685429).epsilon(1e-14));
  CHECK(ex::activationRef(-1.0, 2) == Approx(-0.15865525393145707).epsilon(1e-14));
  ex::RunContext ctx;
  ctx.shape = {4, 4, 4, 3};  // act out of range
  CHECK_THROWS_AS(ex::find("gemm_f16")->run(ctx), ts::Error);
  CHECK_THROWS_AS(ex::find("gemm_bf16")->run(ctx), ts::Error);
  // The default shape is GELU; {M, N, K} means act = 2.
  ctx.shape = {4, 4, 4};
  CHECK(ex::gemmProblem(ctx, "t").act == 2);
  ctx.shape = {4, 4, 4, 0};
  CHECK(ex::gemmProblem(ctx, "t").act == 0);
}

// The GEMM examples on the CPU: every test shape and several seeds against
// the plain C++ references, other block sizes (tiles smaller than, equal to
// and larger than the problem), and the references themselves against
// hand-computed values.
#include <catch2/catch.hpp>

#include <cmath>

#include "support.h"
#include "host_threads_check.h"
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
        k.launch(ex::gemmGrid(B, M, N), dc, da, db, dbias, int32_t(M), int32_t(N), int32_t(K));
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

TEST_CASE("GEMM examples on a persistent grid: any grid computes every tile once", "[examples][gemm][tiles][emu]") {
  // The defaults: bands of 8 tile rows, one tile a program; the GPU tune
  // spaces offer the persistent grid.
  for (const char* t : {"cpu", "nvptx:sm_80", "nvptx:sm_90a", "amdgpu:gfx942", "emu:amdgpu:gfx1100"}) {
    INFO(t);
    const ex::GemmBlocks b = ex::gemmDefaultBlocks(ts::Target::parse(t));
    CHECK_FALSE(b.persistent);
    CHECK(b.group == 8);
  }
  const ex::Example* e = ex::find("gemm_f16");
  REQUIRE(e != nullptr);
  bool offered = false;
  for (const auto& p : e->tuneSpace(ts::Target::parse("nvptx:sm_80"), {257, 129, 65}).params)
    offered = offered || (p.name == "PERSISTENT" && p.values == std::vector<int64_t>{0, 1});
  CHECK(offered);
  ex::RunContext ctx;
  ctx.device = ts::Device::emulator("nvptx:sm_80");
  ctx.shape = {257, 129, 65, 2};  // 9 x 5 tiles of 32 x 32, ragged in every dimension
  ctx.config = ts::perf::TuneConfig::parse("PERSISTENT=1");
  ex::Launch l = e->prepare(ctx);
  REQUIRE(l.persistent);
  CHECK(l.grid.x == 45);
  CHECK((l.grid.y == 1 && l.grid.z == 1));
  ts::CompiledKernel k = ts::compile(l.kernel, ctx.device, e->optionsFor(ctx));
  // The emulator runs a block per worker thread: that many programs at once.
  ts::LaunchOptions three;
  three.threads = 3;
  CHECK(k.residentPrograms(l.args, three) == 3);
  CHECK(ex::launchGrid(l, k, three).x == 3);
  // One program, a few, the resident count, more programs than tiles: the
  // output is checked against the reference each time (it is NaN before).
  for (uint32_t programs : {1u, 3u, 7u, 45u, 64u}) {
    INFO(programs << " programs");
    l = e->prepare(ctx);
    k.launchWith(ts::Dim3(programs), l.args, three);
    ex::CheckResult r = l.check();
    INFO(r.detail);
    CHECK(r.ok);
  }
}

TEST_CASE("GEMM examples on a dynamic schedule: Blackwell offers it, and its programs take cancelled tiles",
          "[examples][gemm][tiles][emu]") {
  const ex::Example* e = ex::find("gemm_f16");
  REQUIRE(e != nullptr);
  auto offers = [&](const char* t) {
    for (const auto& p : e->tuneSpace(ts::Target::parse(t), {257, 129, 65}).params)
      if (p.name == "DYNAMIC") return p.values == std::vector<int64_t>{0, 1};
    return false;
  };
  CHECK(offers("nvptx:sm_100a"));
  CHECK(offers("emu:nvptx:sm_120a"));
  CHECK_FALSE(offers("nvptx:sm_90a"));
  CHECK_FALSE(offers("amdgpu:gfx942"));
  for (const char* arch : {"nvptx:sm_100a", "nvptx:sm_120a"}) {
    INFO(arch);
    ex::RunContext ctx;
    ctx.device = ts::Device::emulator(arch);
    ctx.shape = {257, 129, 65, 2};  // ragged in every dimension
    ctx.config = ts::perf::TuneConfig::parse("DYNAMIC=1");
    ex::Launch l = e->prepare(ctx);
    CHECK_FALSE(l.persistent);
    CHECK_THAT(ts::compile(l.kernel, ts::Target::parse(arch), e->optionsFor(ctx)).dump(ts::Stage::PTX),
               Catch::Contains("clusterlaunchcontrol.try_cancel"));
    examples_test::checkOnHostThreads(ts::compile(l.kernel, ctx.device, e->optionsFor(ctx)), *e, ctx, {1, 2});
  }
}

TEST_CASE("resident programs on the CPU are the launch's worker threads", "[examples][gemm][tiles][cpu]") {
  ts::Device cpu = ts::Device::cpu();
  ts::CompiledKernel k = ts::compile(ex::gemmF32(ex::gemmDefaultBlocks(cpu), ex::Activation::None), cpu);
  ts::LaunchOptions o;
  o.threads = 5;
  CHECK(k.residentPrograms({}, o) == 5);
  CHECK(k.residentPrograms() == cpu.defaultThreads());
  // Compiled for inspection only: no device to ask.
  const ts::Target sm80 = ts::Target::parse("nvptx:sm_80");
  CHECK_THROWS_AS(ts::compile(ex::gemmF32(ex::gemmDefaultBlocks(sm80), ex::Activation::None), sm80).residentPrograms(),
                  ts::UsageError);
}

TEST_CASE("flash_attention_varlen on a dynamic schedule: longest first, the started programs take queued tiles",
          "[examples][attention][tiles][emu]") {
  const ex::Example* e = ex::find("flash_attention_varlen");
  REQUIRE(e != nullptr);
  for (const char* arch : {"nvptx:sm_100a", "nvptx:sm_120a", "nvptx:sm_90a"}) {
    INFO(arch);
    ex::RunContext ctx;
    ctx.device = ts::Device::emulator(arch);
    ctx.shape = {5, 90, 2, 32};  // lengths in [0, 90], the first empty, sorted
    ex::AttentionBlocks b = ex::attentionDefaultBlocks(ctx.device);
    b.n = 32;
    b.dynamic = true;
    ts::CompiledKernel k = ts::compile(ex::flashAttentionVarlen(b, 32), ctx.device);
    const bool cancels = ex::cancelsPrograms(ts::Target::parse(arch));
    const std::string ptx = ts::compile(ex::flashAttentionVarlen(b, 32), ts::Target::parse(arch)).dump(ts::Stage::PTX);
    CHECK((ptx.find("clusterlaunchcontrol.try_cancel") != std::string::npos) == cancels);
    examples_test::checkOnHostThreads(k, *e, ctx, {1, 2});
  }
}

TEST_CASE("flash_attention_varlen: a persistent ragged grid of any size computes every tile once",
          "[examples][attention][tiles][emu]") {
  const ex::Example* e = ex::find("flash_attention_varlen");
  REQUIRE(e != nullptr);
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942"}) {
    INFO(arch);
    ex::RunContext ctx;
    ctx.device = ts::Device::emulator(arch);
    ctx.shape = {5, 90, 2, 32};  // lengths in [0, 90], the first empty, sorted
    ex::Launch l = e->prepare(ctx);
    ex::AttentionBlocks b = ex::attentionDefaultBlocks(ctx.device);
    b.persistent = true;
    ts::CompiledKernel k = ts::compile(ex::flashAttentionVarlen(b, 32), ctx.device);
    for (uint32_t programs : {1u, 2u, 5u, 64u}) {
      INFO(programs << " programs");
      l = e->prepare(ctx);
      k.launchWith(ts::Dim3(programs), l.args, {});
      ex::CheckResult r = l.check();
      INFO(r.detail);
      CHECK(r.ok);
    }
  }
}

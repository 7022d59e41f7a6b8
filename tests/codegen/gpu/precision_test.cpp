// CompileOptions::precision: accurate math by default, the GPU's hardware
// approximations on request. Checked three ways: the instructions each choice
// selects (PTX / AMDGCN text), the emulator running the approximate code on
// both vendors within the bounds docs/math.md states, and the option's
// spellings (environment variable) with a clear error for a bad one.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int kBlock = 256;

// out_k[i] = op_k(x[i], y[i]) for exp, log, sqrt, rsqrt and division.
ts::Kernel mathKernel() {
  return ts::kernel("approx_math", [](ts::Ptr<float> e, ts::Ptr<float> l, ts::Ptr<float> s, ts::Ptr<float> r,
                                      ts::Ptr<float> d, ts::Ptr<const float> x, ts::Ptr<const float> y, ts::Int n) {
    auto i = ts::program_id(0) * kBlock + ts::arange(kBlock);
    auto m = i < n;
    auto xv = ts::load(x + i, m, 0.0f);
    auto yv = ts::load(y + i, m, 1.0f);
    ts::store(e + i, ts::exp(xv), m);
    ts::store(l + i, ts::log(yv), m);
    ts::store(s + i, ts::sqrt(yv), m);
    ts::store(r + i, ts::rsqrt(yv), m);
    ts::store(d + i, xv / yv, m);
  });
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

ts::CompileOptions approx() {
  ts::CompileOptions o;
  o.precision = ts::codegen::Precision::Approximate;
  return o;
}

}  // namespace

TEST_CASE("approximate precision selects the hardware instructions, accurate never does", "[codegen][precision]") {
  ts::Kernel k = mathKernel();
  std::string fast = ts::compile(k, ts::Target::parse("nvptx:sm_80"), approx()).dump(ts::Stage::PTX);
  for (const char* insn : {"ex2.approx.f32", "lg2.approx.f32", "sqrt.approx.f32", "rsqrt.approx.f32", "div.full.f32"}) {
    INFO(insn);
    CHECK(has(fast, insn));
  }
  std::string exact = ts::compile(k, ts::Target::parse("nvptx:sm_80")).dump(ts::Stage::PTX);
  for (const char* insn : {"ex2.approx", "lg2.approx", "sqrt.approx", "rsqrt.approx", "div.full", "div.approx"}) {
    INFO(insn);
    CHECK_FALSE(has(exact, insn));
  }
  CHECK(has(exact, "div.rn.f32"));
  CHECK(has(exact, "sqrt.rn.f32"));

  for (const char* arch : {"amdgpu:gfx942", "amdgpu:gfx1100"}) {
    INFO(arch);
    std::string amd = ts::compile(k, ts::Target::parse(arch), approx()).dump(ts::Stage::AMDGCN);
    for (const char* insn : {"v_exp_f32", "v_log_f32", "v_sqrt_f32", "v_rsq_f32", "v_rcp_f32"}) {
      INFO(insn);
      CHECK(has(amd, insn));
    }
  }
}

TEST_CASE("approximate math runs on both emulated vendors within the documented bounds", "[codegen][precision][emu]") {
  const int n = 3 * kBlock + 17;  // not a multiple of the block
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dx(-80.0f, 80.0f), dy(-10.0f, 10.0f);
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = dx(rng);
    y[i] = std::exp2(dy(rng));  // 2^-10 .. 2^10
  }
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    INFO(arch);
    ts::Device dev = ts::Device::emulator(arch);
    ts::CompiledKernel k = ts::compile(mathKernel(), dev, approx());
    std::vector<ts::Buffer> outs;
    for (int j = 0; j < 5; ++j) outs.push_back(dev.alloc(ts::DType::F32, n));
    ts::Buffer bx = dev.upload(ts::DType::F32, x), by = dev.upload(ts::DType::F32, y);
    k.launch(ts::Dim3(uint32_t((n + kBlock - 1) / kBlock)), outs[0], outs[1], outs[2], outs[3], outs[4], bx, by,
             int32_t(n));
    std::vector<std::vector<float>> got;
    for (auto& b : outs) got.push_back(b.read<float>());
    double worst[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) {
      const double X = x[i], Y = y[i];
      const double want[5] = {std::exp(X), std::log(Y), std::sqrt(Y), 1 / std::sqrt(Y), X / Y};
      for (int j = 0; j < 5; ++j) {
        double err = std::fabs(got[j][i] - want[j]);
        // log is bounded absolutely (its result crosses 0 at y = 1).
        double rel = j == 1 ? err : err / std::fabs(want[j]);
        // exp: 2 ulp of exp2 plus the rounding of x * log2(e), which grows
        // with |x| (docs/math.md); the others: 2 ulp, log 2^-21 absolute.
        double bound = j == 0 ? 0x1p-22 + std::fabs(X) * 0x1p-23 : j == 1 ? 0x1p-21 : 0x1p-22;
        worst[j] = std::max(worst[j], rel / bound);
      }
    }
    for (int j = 0; j < 5; ++j) {
      INFO("op " << j << ": worst error / bound = " << worst[j]);
      CHECK(worst[j] <= 1.0);
    }
  }
}

TEST_CASE("TESSERA_PRECISION sets the precision and rejects unknown values", "[codegen][precision]") {
  ts::Kernel k = mathKernel();
  setenv("TESSERA_PRECISION", "approx", 1);
  std::string ptx = ts::compile(k, ts::Target::parse("nvptx:sm_90a")).dump(ts::Stage::PTX);
  setenv("TESSERA_PRECISION", "fastest", 1);
  CHECK_THROWS_WITH(ts::compile(k, ts::Target::parse("nvptx:sm_90a")),
                    Catch::Contains("unknown precision 'fastest' (expected accurate or approx)"));
  unsetenv("TESSERA_PRECISION");
  CHECK(has(ptx, "ex2.approx.f32"));
  CHECK_FALSE(has(ts::compile(k, ts::Target::parse("nvptx:sm_90a")).dump(ts::Stage::PTX), "ex2.approx"));
}

namespace {
// out_k[i] = sin, cos, sigmoid of x[i].
ts::Kernel trigKernel() {
  return ts::kernel("approx_trig",
                    [](ts::Ptr<float> s, ts::Ptr<float> c, ts::Ptr<float> g, ts::Ptr<const float> x, ts::Int n) {
                      auto i = ts::program_id(0) * kBlock + ts::arange(kBlock);
                      auto m = i < n;
                      auto xv = ts::load(x + i, m, 0.0f);
                      ts::store(s + i, ts::sin(xv), m);
                      ts::store(c + i, ts::cos(xv), m);
                      ts::store(g + i, ts::sigmoid(xv), m);
                    });
}
}  // namespace

TEST_CASE("approximate sin cos and sigmoid use the hardware instructions within their documented errors",
          "[codegen][precision][emu]") {
  ts::Kernel k = trigKernel();
  std::string fast = ts::compile(k, ts::Target::parse("nvptx:sm_80"), approx()).dump(ts::Stage::PTX);
  for (const char* insn : {"sin.approx.f32", "cos.approx.f32", "ex2.approx.f32", "div.full.f32"}) {
    INFO(insn);
    CHECK(has(fast, insn));
  }
  std::string exact = ts::compile(k, ts::Target::parse("nvptx:sm_80")).dump(ts::Stage::PTX);
  for (const char* insn : {"sin.approx", "cos.approx", "ex2.approx", "div.full"}) {
    INFO(insn);
    CHECK_FALSE(has(exact, insn));
  }
  for (const char* arch : {"amdgpu:gfx942", "amdgpu:gfx1100"}) {
    INFO(arch);
    std::string amd = ts::compile(k, ts::Target::parse(arch), approx()).dump(ts::Stage::AMDGCN);
    for (const char* insn : {"v_sin_f32", "v_cos_f32", "v_exp_f32", "v_rcp_f32"}) {
      INFO(insn);
      CHECK(has(amd, insn));
    }
    CHECK_FALSE(has(ts::compile(k, ts::Target::parse(arch)).dump(ts::Stage::AMDGCN), "v_sin_f32"));
  }
  const int n = 2 * kBlock + 5;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dx(-100 * 3.14159265f, 100 * 3.14159265f);
  std::vector<float> x(n);
  for (float& v : x) v = dx(rng);
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942"}) {
    INFO(arch);
    ts::Device dev = ts::Device::emulator(arch);
    ts::CompiledKernel ck = ts::compile(k, dev, approx());
    std::vector<ts::Buffer> outs;
    for (int j = 0; j < 3; ++j) outs.push_back(dev.alloc(ts::DType::F32, n));
    ck.launch(ts::Dim3(uint32_t((n + kBlock - 1) / kBlock)), outs[0], outs[1], outs[2], dev.upload(ts::DType::F32, x),
              int32_t(n));
    std::vector<float> s = outs[0].read<float>(), c = outs[1].read<float>(), g = outs[2].read<float>();
    double worst[3] = {0, 0, 0};
    for (int i = 0; i < n; ++i) {
      const double X = x[i];
      // sin/cos: absolute error 2^-20.5 on [-100 pi, 100 pi] (docs/math.md);
      // sigmoid: relative 2^-21 + |x| 2^-24.
      worst[0] = std::max(worst[0], std::fabs(s[i] - std::sin(X)) / 0x1.6a09e6p-21);
      worst[1] = std::max(worst[1], std::fabs(c[i] - std::cos(X)) / 0x1.6a09e6p-21);
      const double sg = 1 / (1 + std::exp(-X));
      // (Relative in the normal range; below it the hardware may flush.)
      if (sg >= FLT_MIN)
        worst[2] = std::max(worst[2], std::fabs(g[i] - sg) / sg / (0x1p-21 + std::fabs(X) * 0x1p-24));
      else
        worst[2] = std::max(worst[2], std::fabs(g[i]) / double(FLT_MIN));
    }
    for (int j = 0; j < 3; ++j) {
      INFO("op " << j << ": worst error / bound = " << worst[j]);
      CHECK(worst[j] <= 1.0);
    }
  }
}

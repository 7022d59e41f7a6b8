// sm_90a's wgmma on the kernels as users write them: the pipelined GEMM of
// examples/gemm_f16.cpp (A and B read by wgmma straight from their shared
// slots: A K-major in warpgroup row order, B N-major) and flash attention
// (chained dots: the second's A from registers) on the
// emulated H100, checked against an exact reference and against the
// emulated A100's mma.sync path bit for bit: the emulator computes a wgmma
// with mma.sync's products and sums (runtime/emu/Matrix.cpp), so a layout,
// descriptor or swizzle error anywhere shows as a differing element.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "registry.h"
#include "tessera/ir/Pass.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;

namespace {

struct GemmShape {
  int M, N, K;
};

/// C (f16) = A B for small-integer f16 inputs (every sum exact in f32 and
/// f16) on `dev`, returned as floats; `kernel` is examples/gemm_f16.cpp's
/// (ex::gemmF16(blocks)) or a rewrite of it.
std::vector<float> runGemm(const ts::Device& dev, const ts::Kernel& kernel, ex::GemmBlocks blocks, int warps,
                           GemmShape s, const std::vector<_Float16>& a, const std::vector<_Float16>& b,
                           std::string* llvm, std::string* tileIR = nullptr) {
  ts::CompileOptions o;
  o.numWarps = warps;
  ts::CompiledKernel k = ts::compile(kernel, dev, o);
  if (llvm) *llvm = k.dump(ts::Stage::LLVMGpu);
  if (tileIR) *tileIR = k.dump(ts::Stage::TileIRPasses);
  std::vector<float> bias(size_t(s.N), 0.0f);
  ts::Buffer ba = dev.upload(ts::DType::F16, a), bb = dev.upload(ts::DType::F16, b);
  ts::Buffer bbias = dev.upload(ts::DType::F32, bias), c = dev.alloc(ts::DType::F16, size_t(s.M) * s.N);
  c.fillBytes(0xff);
  k.launch(ex::gemmGrid(blocks, s.M, s.N), c, ba, bb, bbias, int32_t(s.M), int32_t(s.N), int32_t(s.K));
  std::vector<float> out;
  for (_Float16 h : c.read<_Float16>()) out.push_back(float(h));
  return out;
}

}  // namespace

TEST_CASE("wgmma: the pipelined f16 GEMM on emulated sm_90a equals the reference and sm_80 exactly",
          "[gpu][wgmma][emu]") {
  struct Cfg {
    ex::GemmBlocks blocks;
    int warps;
  };
  // 64 x 64 x 32 (one warpgroup, B rows of 128 bytes), 64 x 128 x 64 (B in
  // two 64-column blocks), 128 x 32 x 16 (two warpgroups, 64-byte swizzle).
  for (Cfg c : {Cfg{{64, 64, 32, 3}, 4}, Cfg{{64, 128, 64, 2}, 4}, Cfg{{128, 32, 16, 3}, 8}})
    for (GemmShape s : {GemmShape{128, 128, 96}, GemmShape{70, 150, 41}}) {
      INFO(c.blocks.m << "x" << c.blocks.n << "x" << c.blocks.k << " s" << c.blocks.stages << " w" << c.warps
                      << ", M N K = " << s.M << " " << s.N << " " << s.K);
      std::mt19937 rng(uint32_t(s.M + s.K));
      std::uniform_int_distribution<int> d(-3, 3);
      std::vector<_Float16> a(size_t(s.M) * s.K), b(size_t(s.K) * s.N);
      for (auto& v : a) v = _Float16(d(rng));
      for (auto& v : b) v = _Float16(d(rng));
      std::string llvm90, tir90;
      const ts::Kernel kernel = ex::gemmF16(c.blocks, ex::Activation::None);
      std::vector<float> h100 =
          runGemm(ts::Device::emulator("nvptx:sm_90a"), kernel, c.blocks, c.warps, s, a, b, &llvm90, &tir90);
      std::vector<float> a100 =
          runGemm(ts::Device::emulator("nvptx:sm_80"), kernel, c.blocks, c.warps, s, a, b, nullptr);
      CHECK(llvm90.find("wgmma.mma_async") != std::string::npos);
      // The dot stays in flight into the next iteration (async-dots): the
      // loop waits for the previous one's group only; the emulator reports
      // a refill of a slot an MMA in flight still reads as a race.
      CHECK(tir90.find("{async = 1, layout") != std::string::npos);
      CHECK(llvm90.find("wgmma.wait_group.sync.aligned 1;") != std::string::npos);
      // A and B read by descriptor from their slots (imm-trans-a 0: A
      // K-major; imm-trans-b 1: B K x N), no ldmatrix.
      CHECK(llvm90.find("p, 1, 1, 0, 1;") != std::string::npos);
      CHECK(llvm90.find("ldmatrix") == std::string::npos);
      for (int i = 0; i < s.M; ++i)
        for (int j = 0; j < s.N; ++j) {
          float want = 0;  // |sums| <= 9 K: exact in f32 and f16
          for (int kk = 0; kk < s.K; ++kk) want += float(a[size_t(i) * s.K + kk]) * float(b[size_t(kk) * s.N + j]);
          INFO("at " << i << ", " << j);
          REQUIRE(h100[size_t(i) * s.N + j] == want);
          REQUIRE(a100[size_t(i) * s.N + j] == want);
        }
    }
}

TEST_CASE("a GEMM whose dot is kept in flight (async-dots) is exact on the CPU and every emulated GPU",
          "[gpu][wgmma][emu][async-dots]") {
  // The async schedule run on targets whose dots complete at once: the CPU
  // and emulated sm_80 / gfx942 lower `dot {async}` as a dot and dot_wait
  // as its operands; emulated sm_90a keeps the wgmma in flight.
  const ex::GemmBlocks blocks{64, 64, 32, 3};
  std::unique_ptr<ts::ir::Function> f = ts::ir::clone(ex::gemmF16(blocks, ex::Activation::None).ir());
  ts::ir::createPipelineSchedulePass()->run(*f);
  ts::ir::createAsyncDotsPass()->run(*f);
  const ts::Kernel kernel(std::shared_ptr<const ts::ir::Function>(std::move(f)));
  REQUIRE(kernel.text().find("dot_wait() {pending = 1") != std::string::npos);
  for (GemmShape s : {GemmShape{128, 64, 128}, GemmShape{70, 90, 41}}) {
    std::mt19937 rng(uint32_t(s.M * 7 + s.K));
    std::uniform_int_distribution<int> d(-3, 3);
    std::vector<_Float16> a(size_t(s.M) * s.K), b(size_t(s.K) * s.N);
    for (auto& v : a) v = _Float16(d(rng));
    for (auto& v : b) v = _Float16(d(rng));
    for (const char* dev : {"cpu", "emu:nvptx:sm_80", "emu:amdgpu:gfx942", "emu:nvptx:sm_90a"}) {
      INFO(dev << ", M N K = " << s.M << " " << s.N << " " << s.K);
      const std::string name(dev);
      ts::Device device = name == "cpu" ? ts::Device::cpu() : ts::Device::emulator(name.substr(4));
      std::string llvm;
      std::vector<float> c = runGemm(device, kernel, blocks, 4, s, a, b, name == "cpu" ? nullptr : &llvm);
      if (name == "emu:nvptx:sm_90a") CHECK(llvm.find("wgmma.wait_group.sync.aligned 1;") != std::string::npos);
      for (int i = 0; i < s.M; ++i)
        for (int j = 0; j < s.N; ++j) {
          float want = 0;
          for (int kk = 0; kk < s.K; ++kk) want += float(a[size_t(i) * s.K + kk]) * float(b[size_t(kk) * s.N + j]);
          INFO("at " << i << ", " << j);
          REQUIRE(c[size_t(i) * s.N + j] == want);
        }
    }
  }
}

TEST_CASE("wgmma: flash attention on emulated sm_90a is bit-identical to sm_80", "[gpu][wgmma][emu]") {
  for (bool causal : {false, true}) {
    std::vector<std::vector<uint16_t>> outs;
    for (const char* arch : {"nvptx:sm_90a", "nvptx:sm_80"}) {
      ts::Device dev = ts::Device::emulator(arch);
      ex::RunContext ctx;
      ctx.device = dev;
      ctx.shape = {2, 150, 64};
      ctx.seed = 5;
      ex::Launch l = ex::prepareAttention(ctx, causal, ex::AttentionBlocks{64, 64});
      ts::CompiledKernel k = ts::compile(l.kernel, dev);
      if (std::string(arch) == "nvptx:sm_90a") {
        // Both dots (n = 150 is not a multiple of 16, so K^T and V pass
        // through registers and are staged N-major; with aligned facts K^T
        // is copied K-major: tests/lit/gpu/attention_dot_operands.tir).
        std::string ll = k.dump(ts::Stage::LLVMGpu);
        CHECK(ll.find("wgmma.mma_async") != std::string::npos);
        CHECK(ll.find("mma.sync") == std::string::npos);
      }
      k.launchWith(l.grid, l.args, {});
      INFO(arch << (causal ? " causal" : ""));
      ex::CheckResult r = l.check();
      INFO(r.detail);
      CHECK(r.ok);
      outs.push_back(l.args[0].buffer.read<uint16_t>());
    }
    CHECK(outs[0] == outs[1]);
  }
}

TEST_CASE("wgmma: too many stages for sm_90a's 227 KiB is a ResourceError naming the stage count that fits",
          "[gpu][wgmma]") {
  // 128 x 256 x 64 f16 tiles take 48 KiB a stage: 4 stages fit, 5 do not.
  ts::CompileOptions o;
  o.numWarps = 8;
  const ts::Target t = ts::Target::parse("nvptx:sm_90a");
  CHECK_NOTHROW(ts::compile(ex::gemmF16({128, 256, 64, 4}, ex::Activation::None), t, o));
  try {
    ts::compile(ex::gemmF16({128, 256, 64, 5}, ex::Activation::None), t, o);
    FAIL("5 stages of 48 KiB compiled for sm_90a");
  } catch (const ts::ResourceError& e) {
    INFO(e.what());
    CHECK_THAT(e.what(), Catch::Contains("sm_90a") && Catch::Contains("5 pipeline slots") &&
                             Catch::Contains("with stages = 4 instead of 5"));
  }
}

TEST_CASE("wgmma: a pipelined K loop nested in a branch keeps its MMAs in flight (MoE grouped GEMM, emulated sm_90a)",
          "[gpu][wgmma][emu][async-dots]") {
  // moe_grouped_gemm with 64 x 64 x 32 tiles (one warpgroup: wgmma takes the
  // dot): its for_pipelined sits in the ragged tile schedule's branch that
  // skips the programs past the last tile. The example's launch (sized for
  // its 32 x 32 tiles) runs the larger tiles too: the extra programs find
  // no tile.
  for (bool swiglu : {false, true}) {
    INFO((swiglu ? "swiglu" : "plain"));
    ts::Device dev = ts::Device::emulator("nvptx:sm_90a");
    ex::RunContext ctx;
    ctx.device = dev;
    ctx.shape = {100, 3, 96, 80};
    const ex::Example* e = ex::find(swiglu ? "moe_grouped_gemm_swiglu" : "moe_grouped_gemm");
    REQUIRE(e != nullptr);
    ex::Launch l = e->prepare(ctx);
    l.kernel = ex::moeGroupedGemm({64, 64, 32, 3}, swiglu);
    ts::CompiledKernel k = ts::compile(l.kernel, dev);
    const std::string tir = k.dump(ts::Stage::TileIRPasses), llvm = k.dump(ts::Stage::LLVMGpu);
    CHECK(tir.find("dot_wait() {pending = " + std::string(swiglu ? "2" : "1")) != std::string::npos);
    CHECK(llvm.find(std::string("wgmma.wait_group.sync.aligned ") + (swiglu ? "2;" : "1;")) != std::string::npos);
    k.launchWith(l.grid, l.args, {});
    ex::CheckResult r = l.check();
    INFO(r.detail);
    CHECK(r.ok);
  }
}

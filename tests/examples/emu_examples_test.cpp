// Every bundled example, on every test shape, run through the GPU lowering
// (NVPTX, AMDGPU wave64 and wave32) on the SIMT emulator, against its plain
// C++ reference. The examples compile with compile(kernel, ctx.device), so
// this is the very code a GPU would run, checked for races and out-of-bounds
// accesses on every launch (an EmulatorError fails the test).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>

#include "registry.h"
#include "tessera/runtime/Emulator.h"

namespace ts = tessera;
namespace ex = tessera::examples;

namespace {

const char* const kArchs[] = {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"};

std::string shapeStr(const std::vector<int64_t>& s) {
  std::string r;
  for (auto d : s) r += (r.empty() ? "" : "x") + std::to_string(d);
  return r;
}

// Runs example `e` on `dev` at every one of its test shapes against its
// reference (the registry's shapes: 1 element, ragged (1000, 4097, 3) and
// aligned (1024) rows, several rows per launch).
void checkTestShapes(const ts::Device& dev, const ex::Example& e) {
  for (const auto& shape : e.testShapes) {
    INFO(e.name << " " << shapeStr(shape) << " on " << dev.name());
    ex::RunContext ctx;
    ctx.device = dev;
    ctx.shape = shape;
    ctx.launch.threads = 2;
    ex::CheckResult r = e.run(ctx);
    INFO(r.detail << " (max abs error " << r.maxAbsError << ", max rel error " << r.maxRelError << ")");
    REQUIRE(r.ok);
  }
}

}  // namespace

TEST_CASE("every example matches its reference on every test shape (emulated GPUs)", "[examples][emu]") {
  for (const char* arch : kArchs) {
    ts::Device dev = ts::Device::emulator(arch);
    for (const auto& e : ex::all()) checkTestShapes(dev, e);
  }
}

namespace {
/// The examples whose kernels have dots: the GEMMs, the attentions, the MLP.
bool hasDots(const ex::Example& e) {
  return e.name.find("gemm") != std::string::npos || e.name.find("attention") != std::string::npos ||
         e.name.find("mlp") != std::string::npos;
}
}  // namespace

TEST_CASE("every example matches its reference on every test shape (emulated gfx950)", "[examples][emu][gfx950]") {
  // CDNA4: the f16/bf16 dots are MFMA 32x32x16 / 16x16x32 (K multiples of
  // 32) or 16x16x16; 160 KiB of LDS per workgroup.
  ts::Device dev = ts::Device::emulator("amdgpu:gfx950");
  for (const auto& e : ex::all()) checkTestShapes(dev, e);
}

TEST_CASE("gemm_fp8 on emulated gfx950 matches its reference on each of its fp8 MFMAs", "[examples][emu][gfx950]") {
  // The default blocks (32x32x32, 4 waves of 16 x 16) take
  // v_mfma_f32_16x16x32_fp8_fp8; K blocks of 128 the f8f6f4 16x16x128, and
  // 64 x 64 blocks (32 x 32 wave tiles) with K 64 or 128 the f8f6f4
  // 32x32x64. Every test shape, multiples of the blocks and not.
  ts::Device dev = ts::Device::emulator("amdgpu:gfx950");
  const ex::Example e = ex::gemmFP8Example();
  struct Blocks {
    int m, n, k;
    const char* mma;
  };
  for (Blocks b : {Blocks{32, 32, 32, "llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8"},
                   Blocks{32, 32, 128, "llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4"},
                   Blocks{64, 64, 64, "llvm.amdgcn.mfma.scale.f32.32x32x64.f8f6f4"},
                   Blocks{64, 64, 128, "llvm.amdgcn.mfma.scale.f32.32x32x64.f8f6f4"}}) {
    const std::string config =
        "BLOCK_M=" + std::to_string(b.m) + ",BLOCK_N=" + std::to_string(b.n) + ",BLOCK_K=" + std::to_string(b.k);
    INFO(config);
    ex::GemmBlocks blocks = ex::gemmDefaultBlocks(dev);
    blocks.m = b.m;
    blocks.n = b.n;
    blocks.k = b.k;
    const std::string gpu = ts::compile(ex::gemmFP8(blocks), dev).dump(ts::Stage::LLVMGpu);
    CHECK(gpu.find(b.mma) != std::string::npos);
    CHECK(gpu.find("x half>") == std::string::npos);  // not widened to f16
    for (const auto& shape : e.testShapes) {
      INFO(shapeStr(shape));
      ex::RunContext ctx;
      ctx.device = dev;
      ctx.shape = shape;
      ctx.launch.threads = 2;
      ctx.config = ts::perf::TuneConfig::parse(config);
      ex::CheckResult r = e.run(ctx);
      INFO(r.detail << " (max abs error " << r.maxAbsError << ", max rel error " << r.maxRelError << ")");
      REQUIRE(r.ok);
    }
  }
}

TEST_CASE("every example matches its reference on every test shape (emulated gfx1200)", "[examples][emu][gfx1200]") {
  // RDNA4: the f16/bf16, i8 and OCP fp8 dots are gfx12 WMMAs (8 operand
  // elements per lane, the accumulator C^T as the MFMAs'), wave32.
  ts::Device dev = ts::Device::emulator("amdgpu:gfx1200");
  for (const auto& e : ex::all()) checkTestShapes(dev, e);
}

TEST_CASE("the GEMM and attention examples on emulated sm_90a (wgmma) match their references", "[examples][emu]") {
  // sm_90a's f16/bf16 dots are warpgroup MMAs at the examples' defaults
  // (4 warps; gemm_f16 / gemm_bf16 at 64 x 64 x 32): every test shape of
  // every example with a dot.
  ts::Device dev = ts::Device::emulator("nvptx:sm_90a");
  int withDots = 0;
  for (const auto& e : ex::all()) {
    if (!hasDots(e)) continue;
    ++withDots;
    checkTestShapes(dev, e);
  }
  CHECK(withDots >= 10);
}

TEST_CASE("the GEMM and attention examples on emulated sm_100a (tcgen05) and sm_120a (mma.sync) match their references",
          "[examples][emu][blackwell]") {
  // sm_100a's f16/bf16, fp8 and i8 dots are tcgen05.mma (kind::f16,
  // f8f6f4, i8) in tensor memory where both operands are in shared memory,
  // the rest mma.sync; TMA copies where the
  // launch proves the boxes aligned. sm_100a: every test shape of every
  // example with a dot; sm_120a (whose code differs by its SM's limits):
  // the first and the last test shapes of each (the GEMMs' aligned 64^3,
  // the attentions' 128 rows).
  for (const char* arch : {"nvptx:sm_100a", "nvptx:sm_120a"}) {
    ts::Device dev = ts::Device::emulator(arch);
    const bool all = std::string(arch) == "nvptx:sm_100a";
    int withDots = 0;
    for (const auto& e : ex::all()) {
      if (!hasDots(e)) continue;
      ++withDots;
      if (all) {
        checkTestShapes(dev, e);
        continue;
      }
      for (const auto& shape : {e.testShapes.front(), e.testShapes.back()}) {
        ex::RunContext ctx;
        ctx.device = dev;
        ctx.shape = shape;
        ctx.launch.threads = 2;
        INFO(e.name << " " << shapeStr(ctx.shape) << " on " << dev.name());
        ex::CheckResult r = e.run(ctx);
        INFO(r.detail << " (max abs error " << r.maxAbsError << ", max rel error " << r.maxRelError << ")");
        REQUIRE(r.ok);
      }
    }
    CHECK(withDots >= 10);
  }
}

TEST_CASE("tcgen05's M = 128 instructions: the GEMMs at larger tiles on emulated sm_100a match their references",
          "[examples][emu][blackwell]") {
  // Where every warpgroup holds pairs of 64-row tiles, each pair is one M =
  // 128 tcgen05.mma (A's rows permuted a second level, two tcgen05.ld per
  // warp from lanes 32q and 32q + 16); a 128-row tile on 8 warps keeps
  // M = 64. The instruction descriptor's M field says which was issued.
  ts::Device dev = ts::Device::emulator("nvptx:sm_100a");
  struct Case {
    const char* kernel;
    int m, n, k, warps;
    uint32_t mmaM;
    std::vector<int64_t> shape;
  };
  for (const Case& c :
       {Case{"gemm_f16", 128, 128, 32, 4, 128, {200, 264, 136}},
        Case{"gemm_bf16", 256, 128, 32, 8, 128, {300, 136, 72}}, Case{"gemm_f16", 128, 128, 32, 8, 64, {130, 136, 40}},
        Case{"gemm_fp8", 128, 128, 64, 4, 128, {130, 136, 96}},
        Case{"gemm_int8", 128, 128, 64, 4, 128, {130, 136, 96}}}) {
    const std::string config = "BLOCK_M=" + std::to_string(c.m) + ",BLOCK_N=" + std::to_string(c.n) +
                               ",BLOCK_K=" + std::to_string(c.k) + ",num_warps=" + std::to_string(c.warps);
    INFO(c.kernel << " " << config << " " << shapeStr(c.shape));
    const ex::Example* e = ex::find(c.kernel);
    REQUIRE(e);
    ex::RunContext ctx;
    ctx.device = dev;
    ctx.shape = c.shape;
    ctx.launch.threads = 2;
    ex::CheckResult r = e->run(ex::withConfig(ctx, ts::perf::TuneConfig::parse(config)));
    INFO(r.detail << " (max abs error " << r.maxAbsError << ", max rel error " << r.maxRelError << ")");
    REQUIRE(r.ok);
    // The issued shape: tcgen05.mma's instruction descriptor (M >> 4 in
    // bits 24-28) in the module handed to the backend.
    ex::GemmBlocks blocks{c.m, c.n, c.k, 3};
    ts::CompileOptions o;
    o.numWarps = c.warps;
    const std::string name = c.kernel;
    ts::Kernel k = name == "gemm_fp8"    ? ex::gemmFP8(blocks)
                   : name == "gemm_int8" ? ex::gemmInt8(blocks)
                   : name == "gemm_bf16" ? ex::gemmBF16(blocks)
                                         : ex::gemmF16(blocks);
    const std::string gpu = ts::compile(k, ts::Target::parse("nvptx:sm_100a"), o).dump(ts::Stage::LLVMGpu);
    const size_t at = gpu.find("call void @llvm.nvvm.tcgen05.mma.shared(");
    REQUIRE(at != std::string::npos);
    // (d, a, b, i32 idesc, ...): the fourth operand.
    size_t pos = at;
    for (int comma = 0; comma < 3; ++comma) pos = gpu.find(',', pos) + 1;
    const uint32_t idesc = static_cast<uint32_t>(std::stoul(gpu.substr(gpu.find("i32 ", pos) + 4)));
    CHECK(((idesc >> 24) & 0x1F) << 4 == c.mmaM);
    CHECK(((idesc >> 17) & 0x3F) << 3 == uint32_t(c.n));
  }
}

TEST_CASE("the emulated examples agree for every seed tried (emulated GPUs)", "[examples][emu]") {
  // Other inputs for the row kernels on one ragged shape: a lowering bug
  // that depends on the data (a reduction lane picking up a masked value)
  // shows on some seed.
  for (const char* arch : kArchs) {
    ts::Device dev = ts::Device::emulator(arch);
    for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
      for (uint64_t seed : {7u, 99u}) {
        INFO(name << " seed " << seed << " on " << dev.name());
        ex::RunContext ctx;
        ctx.device = dev;
        ctx.shape = {5, 333};
        ctx.seed = seed;
        ex::CheckResult r = ex::find(name)->run(ctx);
        INFO(r.detail);
        REQUIRE(r.ok);
      }
    }
  }
}

TEST_CASE("softmax 1024x1024 f32 on each emulated vendor (timing)", "[.perf][examples][emu]") {
  for (const char* arch : kArchs) {
    ts::Device dev = ts::Device::emulator(arch);
    ex::RunContext ctx;
    ctx.device = dev;
    ctx.shape = {1024, 1024};
    ex::find("softmax")->run(ctx);  // compile once (cached afterwards)
    auto t0 = std::chrono::steady_clock::now();
    ex::CheckResult r = ex::find("softmax")->run(ctx);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("softmax 1024x1024 on %s: %.3f s (upload, launch, read back, reference; %u host threads)\n",
                dev.name().c_str(), s, dev.defaultThreads());
    CHECK(r.ok);
  }
}

TEST_CASE("the examples are right for other block sizes and architectures (emulated GPUs)", "[examples][emu]") {
  // Layouts depend on the warps per block and the warp size: a block of one
  // warp has no cross-warp reduction step, eight warps spread a row thinner.
  struct Case {
    const char* arch;
    int warps;
  };
  for (Case c :
       {Case{"nvptx:sm_90a", 1}, Case{"amdgpu:gfx90a", 8}, Case{"amdgpu:gfx1100", 2}, Case{"nvptx:sm_86", 8}}) {
    ts::Device dev = ts::Device::emulator(c.arch);
    for (const auto& e : ex::all()) {
      // Ragged shapes: 5000 elements, 3 rows of 777, or the example's second
      // test shape for the others (GEMMs: {M, N, K}; the parallel examples:
      // {tokens, hidden, ffn, ranks, chunks}).
      std::vector<int64_t> shape = e.name == "vector_add"           ? std::vector<int64_t>{5000}
                                   : e.testShapes.at(0).size() == 2 ? std::vector<int64_t>{3, 777}
                                                                    : e.testShapes.at(1);
      INFO(e.name << " " << shapeStr(shape) << " on " << dev.name() << ", " << c.warps << " warps");
      ex::RunContext ctx;
      ctx.device = dev;
      ctx.shape = shape;
      ctx.options.numWarps = c.warps;
      ex::CheckResult r = e.run(ctx);
      INFO(r.detail);
      REQUIRE(r.ok);
    }
  }
}

TEST_CASE("gemm_fp8 on the fp8 tensor cores of emulated sm_89 and sm_90a matches its reference", "[examples][emu]") {
  // sm_89 / sm_90a run the dot on mma.sync e4m3 (gemm_gpu_test.cpp checks
  // the PTX); every test shape, aligned and ragged.
  const ex::Example* e = ex::find("gemm_fp8");
  REQUIRE(e != nullptr);
  for (const char* arch : {"nvptx:sm_89", "nvptx:sm_90a"})
    for (const auto& shape : e->testShapes) {
      INFO("gemm_fp8 " << shapeStr(shape) << " on " << arch);
      ex::RunContext ctx;
      ctx.device = ts::Device::emulator(arch);
      ctx.shape = shape;
      ctx.launch.threads = 2;
      ex::CheckResult r = e->run(ctx);
      INFO(r.detail << " (max abs error " << r.maxAbsError << ", max rel error " << r.maxRelError << ")");
      REQUIRE(r.ok);
    }
}

TEST_CASE(
    "the block-scaled GEMMs on emulated sm_100a keep tcgen05's block-scaled MMAs in flight and match the reference",
    "[examples][emu][blackwell][mx]") {
  // 128-row tiles, the codes staged by the K loop's pipeline (B as given,
  // N x K, read in place), the scales copied to tensor memory every step
  // into sets used in turn: K of 4 and 5 tiles (the sets rotate; the last
  // partial, its codes and scales masked), and an aligned and a ragged M, N.
  ts::Device dev = ts::Device::emulator("nvptx:sm_100a");
  for (const char* name : {"gemm_mxfp8", "gemm_mxfp4", "gemm_nvfp4"})
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{256, 128, 512}, std::vector<int64_t>{130, 72, 600}}) {
      const ex::Example* e = ex::find(name);
      REQUIRE(e);
      ex::RunContext ctx;
      ctx.device = dev;
      ctx.shape = shape;
      ctx.launch.threads = 2;
      INFO(name << " " << shapeStr(shape));
      ex::CheckResult r = e->run(ctx);
      INFO(r.detail << " (max abs error " << r.maxAbsError << ", max rel error " << r.maxRelError << ")");
      REQUIRE(r.ok);
    }
}

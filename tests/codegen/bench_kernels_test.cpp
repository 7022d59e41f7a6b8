// The kernels of the static GPU benchmark (bench/gpu_static_kernels.h) run
// against their C++ references on the CPU and both emulators, at shapes
// aligned to their tiles and ragged ones, with the warps the benchmark
// compiles them with: its figures are never those of a wrong kernel.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "../../codegen/GpuTargets.h"
#include "gpu_static_kernels.h"
#include "tessera/ir/Parser.h"

using namespace tessera;

namespace {

void runFamily(const std::string& family,
               const std::vector<Device>& devices = {Device::cpu(), Device::emulator("nvptx:sm_80"),
                                                     Device::emulator("amdgpu:gfx942")},
               bool raggedOnly = false) {
  int seen = 0;
  for (const bench::GpuBenchKernel& k : bench::gpuBenchKernels()) {
    if (k.name != family) continue;
    ++seen;
    CompileOptions o;
    o.numWarps = k.numWarps;
    for (const Device& dev : devices) {
      // A configuration made for some GPUs (gpuOnly: their targets, space
      // separated) runs on the CPU and those GPUs only.
      bool made = k.gpuOnly.empty() || dev.kind() == rt::DeviceKind::CPU;
      std::istringstream targets(k.gpuOnly);
      for (std::string t; targets >> t;) made = made || dev.name().rfind("emu:" + t, 0) == 0;
      if (!made) continue;
      for (const auto& shape : k.testShapes) {
        if (raggedOnly && &shape == &k.testShapes.front()) continue;
        std::string s;
        for (int64_t x : shape) s += std::to_string(x) + " ";
        INFO(k.name << " " << k.config << " on " << dev.name() << ", shape " << s);
        examples::CheckResult r = k.check(dev, o, shape);
        INFO(r.detail);
        CHECK(r.ok);
      }
    }
  }
  CHECK(seen > 0);
}

}  // namespace

TEST_CASE("bench kernels: scalar_store", "[bench][emu]") {
  runFamily("scalar_store", {Device::cpu(), Device::emulator("nvptx:sm_80"), Device::emulator("amdgpu:gfx942"),
                             Device::emulator("amdgpu:gfx1100")});
}
TEST_CASE("bench kernels: gemv", "[bench][emu]") { runFamily("gemv"); }
TEST_CASE("bench kernels: rope", "[bench][emu]") { runFamily("rope"); }
TEST_CASE("bench kernels: transpose", "[bench][emu]") { runFamily("transpose"); }
TEST_CASE("bench kernels: attention", "[bench][emu]") { runFamily("attention"); }
// The other two targets of the benchmark (sm_90a's registers and
// gfx1100's wave32 WMMA fragments differ), at the ragged shape.
TEST_CASE("bench kernels: attention on sm_90a and gfx1100", "[bench][emu]") {
  runFamily("attention", {Device::emulator("nvptx:sm_90a"), Device::emulator("amdgpu:gfx1100")}, true);
}
TEST_CASE("bench kernels: gemm_f16", "[bench][emu]") { runFamily("gemm_f16"); }
// gfx1100: wave32 WMMA, and its own choice of physical slots and staging
// (the 3-stage configurations keep 2 LDS slots, swizzled), at the ragged
// shape.
TEST_CASE("bench kernels: gemm_f16 on gfx1100", "[bench][emu]") {
  runFamily("gemm_f16", {Device::emulator("amdgpu:gfx1100")}, true);
}
// sm_90a: every configuration on the wgmma path (the Hopper ones included),
// at the ragged shape.
TEST_CASE("bench kernels: gemm_f16 on sm_90a", "[bench][emu][wgmma]") {
  runFamily("gemm_f16", {Device::emulator("nvptx:sm_90a")}, true);
}

// The block-scaled GEMMs on sm_120a's block-scaled mma.sync and gfx950's
// scaled MFMA (the CPU and the other emulators run the same kernels
// decomposed in the examples' tests), at the ragged shape.
TEST_CASE("bench kernels: gemm_mxfp8 and gemm_mxfp4 on sm_120a and gfx950", "[bench][emu][mx]") {
  for (const char* t : {"nvptx:sm_120a", "amdgpu:gfx950"}) {
    runFamily("gemm_mxfp8", {Device::emulator(t)}, true);
    runFamily("gemm_mxfp4", {Device::emulator(t)}, true);
  }
}

// gfx1100 keeps flash attention's Q (a loop-invariant dot operand) in LDS
// through the loop unless moving its fragments to registers raises the
// waves the LDS allows within what 256 VGPRs allow, and the code does not
// spill then (lowerToGpuLLVM, GpuOptions::invariantsForLds): 64x64 d64 on 4
// warps frees Q's 9216 bytes (27648 -> 18432, 4 -> 6 waves; 16384 and 7
// waves with P's fragments read before V is staged, the next case), 128x64
// d64 on 8 warps its 18432 (46080 -> 32768, 4 -> 7 waves; 18432 and 8 waves
// with P's fragments and the epilogue's conversion in row chunks); 128x64
// d64 on 4 warps would spill with Q's fragments and keeps its LDS plan;
// 128x64 d128 on 8 warps gains no wave.
TEST_CASE("bench kernels: gfx1100 attention keeps Q in registers only where that raises the waves", "[bench][gpu]") {
  struct Want {
    std::string config;
    unsigned sharedBytes;
  };
  const std::vector<bench::GpuBenchKernel> all = bench::gpuBenchKernels();
  for (const Want& w : {Want{"64x64 d64 w4", 16384}, Want{"128x64 d64 w8", 18432}, Want{"128x64 d64 w4", 46080},
                        Want{"128x64 d128 w8", 65536}}) {
    const bench::GpuBenchKernel* k = nullptr;
    for (const bench::GpuBenchKernel& b : all)
      if (b.name == "attention" && b.config == w.config) k = &b;
    REQUIRE(k);
    INFO(w.config);
    CompileOptions o;
    o.numWarps = k->numWarps;
    o.precision = codegen::Precision::Approximate;  // as the benchmark compiles them (accurate math: 128x64 spills)
    CompiledKernel c = compile(assumeAligned(k->kernel), Target::parse("amdgpu:gfx1100"), o);
    INFO(c.artifact().dumps.extra.at("shared-memory"));
    CHECK(c.artifact().binary.sharedBytes == w.sharedBytes);
    CHECK(codegen::gpuResources(c.artifact()).spillBytes == 0);
  }
}

// AMD flash attention's P V dot reads P's fragments (its A, staged from the
// first dot's accumulator layout, which is not the MFMA / WMMA A layout)
// before V is staged over them, in max(P, V) bytes instead of P + V, where
// that raises the waves the LDS allows below what 128 VGPRs would allow;
// kept only where the code then has no scratch and more waves than the LDS
// allowed without (lowerToGpuLLVM, GpuOptions::fragmentsForLds). The plan
// without it is the same kernel compiled with the option off. Its results
// are checked by "bench kernels: attention" (gfx942, every configuration
// and shape) and "... on sm_90a and gfx1100" above.
TEST_CASE("bench kernels: AMD attention stages V over P's fragments only where that raises the waves", "[bench][gpu]") {
  struct Want {
    std::string target, config;
    unsigned with, without;
  };
  const std::vector<bench::GpuBenchKernel> all = bench::gpuBenchKernels();
  for (const Want& w :
       {Want{"amdgpu:gfx942", "64x64 d64 w4", 8704, 17408}, Want{"amdgpu:gfx942", "128x64 d64 w4", 17408, 26112},
        Want{"amdgpu:gfx942", "64x64 d128 w4", 17408, 26112},
        // 4 waves by the LDS already, as many as 128 VGPRs allow: not tried.
        Want{"amdgpu:gfx942", "128x64 d64 w8", 26112, 26112}, Want{"amdgpu:gfx1100", "64x64 d64 w4", 16384, 18432},
        // With the epilogue's conversion in row chunks: 7 -> 8 waves (188
        // VGPRs, 212 without).
        Want{"amdgpu:gfx1100", "128x64 d64 w8", 18432, 32768},
        // 7 waves, not the 8 the LDS allowed without them: compiled again
        // without, which has 6 (218 VGPRs against 193), and kept.
        Want{"amdgpu:gfx1100", "128x64 d64 w8 causal", 18432, 32768},
        // spills with them (and with Q's fragments): compiled again without
        // both.
        Want{"amdgpu:gfx1100", "128x64 d64 w4", 46080, 46080}}) {
    const bench::GpuBenchKernel* k = nullptr;
    for (const bench::GpuBenchKernel& b : all)
      if (b.name == "attention" && b.config == w.config) k = &b;
    REQUIRE(k);
    INFO(w.target << " " << w.config);
    CompileOptions o;
    o.numWarps = k->numWarps;
    o.precision = codegen::Precision::Approximate;
    const codegen::Target t = codegen::Target::parse(w.target);
    CompiledKernel c = compile(assumeAligned(k->kernel), t, o);
    INFO(c.artifact().dumps.extra.at("shared-memory"));
    CHECK(c.artifact().binary.sharedBytes == w.with);
    CHECK(codegen::gpuResources(c.artifact()).spillBytes == 0);
    // The function the GPU compile was given: the tile IR after the passes
    // (the stage before its layouts).
    const auto& stages = c.artifact().dumps.tileIR;
    REQUIRE(stages.size() >= 2);
    REQUIRE(stages.back().first == "layout");
    auto m = ir::parseModule(stages[stages.size() - 2].second);
    codegen::GpuOptions g;
    g.precision = codegen::Precision::Approximate;
    g.fragmentsForLds = false;
    auto without = codegen::compileGpu(*m->functions.at(0), t, o, {}, g);
    INFO(without->dumps.extra.at("shared-memory"));
    CHECK(without->binary.sharedBytes == w.without);
  }
}

// The emulator compile: hand-written NVPTX / AMDGPU modules (as the GPU
// backends take them) rewritten onto the SIMT machine's hooks, JIT-compiled
// for the host and run on tessera::emu, against plain C++ references.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../emu_util.h"
#include "tessera/support/Error.h"

using namespace emutest;
using tessera::codegen::EmuKernel;
namespace emu = tessera::emu;

namespace {

std::vector<float> randomFloats(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace

// The expression throws tessera::CompileError (and nothing else) whose
// message satisfies the matcher.
#define CHECK_COMPILE_ERROR(expr, type, matcher) \
  do {                                           \
    CHECK_THROWS_AS(expr, type);                 \
    CHECK_THROWS_WITH(expr, matcher);            \
  } while (0)

/// Runs a block-sum kernel (out[g] = sum of in over block g of 256 threads)
/// for each n and checks every block's sum.
void checkBlockSums(const EmuKernel& k, std::initializer_list<int> sizes, unsigned seed) {
  for (int n : sizes) {
    const uint32_t block = 256, grid = (n + block - 1) / block;
    auto in = randomFloats(n, -1, 1, seed);
    std::vector<float> out(grid, 0.0f);
    Args args;
    args.add(out.data()).add(in.data()).add(int32_t(n));
    auto cfg = config(k, grid, block);
    addBuffer(cfg, out), addBuffer(cfg, in);
    emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
    CHECK_FALSE(rep.hasErrors());
    for (uint32_t g = 0; g < grid; ++g) {
      double ref = 0, mag = 0;
      for (int i = g * block; i < std::min<int>(n, (g + 1) * block); ++i) ref += in[i], mag += std::fabs(in[i]);
      REQUIRE(std::fabs(out[g] - ref) <= 1e-5 * mag + 1e-6);
    }
  }
}

TEST_CASE("emu: NVPTX vector add", "[emu]") {
  EmuKernel k = compileFile("emu_nv_vadd.ll");
  CHECK(k.kernelName == "vadd");
  CHECK_FALSE(contains(k.hostIR, "addrspace"));
  CHECK_FALSE(contains(k.hostIR, "llvm.nvvm"));
  CHECK(contains(k.hostIR, "tessera_emu_global_access"));
  CHECK(k.uncheckedAccesses == 0);
  for (int n : {1, 127, 1000, 1024}) {
    auto a = randomFloats(n, -10, 10, 1), b = randomFloats(n, -10, 10, 2);
    std::vector<float> out(n, -1.0f);
    const uint32_t block = 128, grid = (n + block - 1) / block;
    Args args;
    args.add(out.data()).add(a.data()).add(b.data()).add(int32_t(n));
    auto cfg = config(k, grid, block);
    addBuffer(cfg, out), addBuffer(cfg, a), addBuffer(cfg, b);
    emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
    CHECK_FALSE(rep.hasErrors());
    CHECK(rep.threads == uint64_t(grid) * block);
    for (int i = 0; i < n; ++i) REQUIRE(out[i] == a[i] + b[i]);
  }
}

TEST_CASE("emu: out-of-bounds global access is reported with the op's name", "[emu]") {
  EmuKernel k = compileFile("emu_nv_vadd.ll");
  const int n = 100;
  auto a = randomFloats(n, -1, 1, 3), b = randomFloats(n, -1, 1, 4);
  std::vector<float> out(n, 0.0f);
  Args args;
  args.add(out.data()).add(a.data()).add(b.data()).add(int32_t(n + 3));  // 3 elements too many
  auto cfg = config(k, 1, 128);
  addBuffer(cfg, out), addBuffer(cfg, a), addBuffer(cfg, b);
  cfg.throwOnError = false;
  emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
  // 3 bad loads of a, 3 of b, 3 bad stores of out.
  CHECK(rep.count(emu::IssueKind::GlobalOutOfBounds) == 9);
  bool namedLoad = false, namedStore = false;
  for (const emu::Issue& is : rep.issues) {
    namedLoad |= contains(is.message, "load %a[%i] @ vadd.cpp:12");
    namedStore |= contains(is.message, "store %out[%i], %5 @ vadd.cpp:14");
  }
  CHECK(namedLoad);
  CHECK(namedStore);
  for (int i = 0; i < n; ++i) REQUIRE(out[i] == a[i] + b[i]);  // in-bounds work unaffected

  cfg.throwOnError = true;
  try {
    emu::launch(k.threadFn, args.args(), cfg);
    FAIL("expected an EmulatorError");
  } catch (const emu::EmulatorError& e) {
    CHECK(contains(e.what(), "vadd.cpp:1"));
  }
}

TEST_CASE("emu: NVPTX block reduction through shared memory", "[emu]") {
  EmuKernel k = compileFile("emu_nv_block_sum.ll");
  CHECK(k.staticSharedBytes == 256 * 4);
  CHECK(contains(k.hostIR, "tessera_emu_barrier"));
  CHECK(contains(k.hostIR, "tessera_emu_shared_access"));
  checkBlockSums(k, {1000, 1024}, 5);
}

TEST_CASE("emu: NVPTX warp reduction via shfl.sync.bfly", "[emu]") {
  EmuKernel k = compileFile("emu_nv_warp_sum.ll");
  CHECK(contains(k.hostIR, "tessera_emu_shfl_sync"));
  const uint32_t block = 96, grid = 5, n = block * grid, warps = n / 32;
  auto in = randomFloats(n, -4, 4, 6);
  std::vector<float> sums(warps, 0.0f);
  Args args;
  args.add(sums.data()).add(in.data());
  auto cfg = config(k, grid, block);
  addBuffer(cfg, sums), addBuffer(cfg, in);
  emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
  CHECK_FALSE(rep.hasErrors());
  for (uint32_t w = 0; w < warps; ++w) {
    double ref = 0, mag = 0;
    for (uint32_t l = 0; l < 32; ++l) ref += in[w * 32 + l], mag += std::fabs(in[w * 32 + l]);
    REQUIRE(std::fabs(sums[w] - ref) <= 1e-6 * mag);
  }
}

TEST_CASE("emu: NVPTX warp scan via shfl.sync.up with predicate, and vote.ballot", "[emu]") {
  EmuKernel k = compileFile("emu_nv_warp_scan.ll");
  const uint32_t block = 64, grid = 3, n = block * grid, warps = n / 32;
  std::mt19937 rng(7);
  std::vector<int32_t> in(n), out(n, 0), ballots(warps, 0);
  for (int32_t& x : in) x = int32_t(rng() % 1000) - 500;
  Args args;
  args.add(out.data()).add(ballots.data()).add(in.data());
  auto cfg = config(k, grid, block);
  addBuffer(cfg, out), addBuffer(cfg, ballots), addBuffer(cfg, in);
  emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
  CHECK_FALSE(rep.hasErrors());
  for (uint32_t w = 0; w < warps; ++w) {
    int32_t run = 0;
    uint32_t bal = 0;
    for (uint32_t l = 0; l < 32; ++l) {
      run += in[w * 32 + l];
      REQUIRE(out[w * 32 + l] == run);
      if (in[w * 32 + l] & 1) bal |= 1u << l;
    }
    REQUIRE(uint32_t(ballots[w]) == bal);
  }
}

TEST_CASE("emu: libdevice calls and NVVM math intrinsics", "[emu]") {
  EmuKernel k = compileFile("emu_nv_math.ll");
  CHECK_FALSE(contains(k.hostIR, "__nv_"));
  const int n = 300;
  auto in = randomFloats(n, 0.05f, 4.0f, 8);
  std::vector<float> out(n, 0.0f);
  Args args;
  args.add(out.data()).add(in.data()).add(int32_t(n));
  auto cfg = config(k, 3, 128);
  addBuffer(cfg, out), addBuffer(cfg, in);
  emu::launch(k.threadFn, args.args(), cfg);
  for (int i = 0; i < n; ++i) {
    double x = in[i];
    double ref = std::exp(x) + std::pow(x, 1.5) + std::exp2(x) + 1 / std::sqrt(x) + std::max(x, 0.5);
    REQUIRE(std::fabs(out[i] - ref) <= 2e-6 * std::fabs(ref));
  }
}

TEST_CASE("emu: a shared-memory race is reported naming the tile ops", "[emu]") {
  EmuKernel k = compileFile("emu_nv_racy.ll");
  // The racy load goes through a generic pointer; it is traced back to
  // shared memory and checked.
  CHECK(k.uncheckedAccesses == 0);
  const uint32_t block = 128;
  std::vector<int32_t> out(block, 0);
  auto cfg = config(k, 2, block);
  addBuffer(cfg, out);

  SECTION("with the barrier: no race, neighbours' values") {
    Args args;
    args.add(out.data()).add(int32_t(1));
    emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
    CHECK_FALSE(rep.hasErrors());
    for (uint32_t t = 0; t < block; ++t) REQUIRE(out[t] == int32_t((t + 1) % block));
  }
  SECTION("without it: the race names both ops") {
    Args args;
    args.add(out.data()).add(int32_t(0));
    cfg.throwOnError = false;
    emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
    REQUIRE(rep.count(emu::IssueKind::SharedRace) > 0);
    bool named = false;
    for (const emu::Issue& is : rep.issues)
      if (is.kind == emu::IssueKind::SharedRace)
        named |= contains(is.message, "store %tile[%t], %t @ racy.cpp:7") &&
                 contains(is.message, "%v = load %tile[(%t + 1) % n] @ racy.cpp:9");
    CHECK(named);
    cfg.throwOnError = true;
    try {
      emu::launch(k.threadFn, args.args(), cfg);
      FAIL("expected an EmulatorError");
    } catch (const emu::EmulatorError& e) {
      CHECK(contains(e.what(), "racy.cpp:"));
    }
  }
}

TEST_CASE("emu: AMDGPU grid-stride vector add (implicit args, dispatch packet)", "[emu]") {
  for (unsigned wave : {64u, 32u}) {
    EmuKernel k = compileFile("emu_amd_vadd.ll", true, wave);
    CHECK_FALSE(contains(k.hostIR, "addrspace"));
    CHECK_FALSE(contains(k.hostIR, "llvm.amdgcn"));
    for (int n : {5000, 1}) {
      auto a = randomFloats(n, -10, 10, 9), b = randomFloats(n, -10, 10, 10);
      std::vector<float> out(n, 0.0f);
      Args args;
      args.add(out.data()).add(a.data()).add(b.data()).add(int32_t(n));
      auto cfg = config(k, 3, 256);  // 768 work items cover 5000 by striding
      addBuffer(cfg, out), addBuffer(cfg, a), addBuffer(cfg, b);
      emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
      CHECK_FALSE(rep.hasErrors());
      for (int i = 0; i < n; ++i) REQUIRE(out[i] == a[i] + b[i]);
    }
  }
}

TEST_CASE("emu: AMDGPU block reduction through LDS with s_barrier", "[emu]") {
  EmuKernel k = compileFile("emu_amd_block_sum.ll", true, 64);
  CHECK(k.staticSharedBytes == 256 * 4);
  checkBlockSums(k, {1000, 256}, 11);
}

TEST_CASE("emu: AMDGPU wave reduction via ds_bpermute, wave64 and wave32", "[emu]") {
  for (unsigned wave : {64u, 32u}) {
    EmuKernel k = compileFile("emu_amd_wave_sum.ll", true, wave);
    const uint32_t block = 128, grid = 3, n = block * grid, waves = n / wave;
    auto in = randomFloats(n, -2, 2, 12 + wave);
    std::vector<float> sums(waves, 0.0f), firsts(2 * waves, 0.0f);
    std::vector<uint64_t> ballots(waves, 0);
    Args args;
    args.add(sums.data()).add(ballots.data()).add(firsts.data()).add(in.data());
    auto cfg = config(k, grid, block);
    addBuffer(cfg, sums), addBuffer(cfg, ballots), addBuffer(cfg, firsts), addBuffer(cfg, in);
    emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
    CHECK_FALSE(rep.hasErrors());
    for (uint32_t w = 0; w < waves; ++w) {
      double ref = 0, mag = 0;
      uint64_t bal = 0;
      for (uint32_t l = 0; l < wave; ++l) {
        float x = in[w * wave + l];
        ref += x, mag += std::fabs(x);
        if (x > 0) bal |= uint64_t(1) << l;
      }
      INFO("wave size " << wave << ", wave " << w);
      REQUIRE(std::fabs(sums[w] - ref) <= 1e-6 * mag);
      REQUIRE(ballots[w] == bal);
      REQUIRE(firsts[2 * w] == in[w * wave]);
      REQUIRE(firsts[2 * w + 1] == in[w * wave]);
    }
  }
}

TEST_CASE("emu: AMDGPU DPP, ds_swizzle and permlanex16 lane exchanges, wave64 and wave32", "[emu]") {
  for (unsigned wave : {64u, 32u}) {
    EmuKernel k = compileFile("emu_amd_lane_xor.ll", true, wave);
    const uint32_t block = 128;
    std::vector<int32_t> out(8 * block, -1);
    Args args;
    args.add(out.data());
    auto cfg = config(k, 1, block);
    addBuffer(cfg, out);
    emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
    CHECK_FALSE(rep.hasErrors());
    // row_half_mirror reads lane 7 - i of its 8, row_mirror 15 - i of its 16.
    const int32_t masks[8] = {1, 2, 4, 8, 16, 16, 7, 15};
    for (uint32_t t = 0; t < block; ++t)
      for (int j = 0; j < 8; ++j) {
        INFO("wave size " << wave << ", thread " << t << ", exchange " << j);
        REQUIRE(out[8 * t + static_cast<uint32_t>(j)] == static_cast<int32_t>(t ^ static_cast<uint32_t>(masks[j])));
      }
  }
}

TEST_CASE("emu: special registers read again through inline assembly (rematerialisation) read the machine's", "[emu]") {
  EmuKernel k = compileFile("emu_nv_sreg_reread.ll");
  CHECK_FALSE(contains(k.hostIR, "asm"));
  const uint32_t gx = 3, gy = 2, block = 64, threads = gx * gy * block;
  std::vector<int32_t> out(6 * threads, -1);
  Args args;
  args.add(out.data());
  auto cfg = config(k, gx, block);
  cfg.grid[1] = gy;
  addBuffer(cfg, out);
  emu::LaunchReport rep = emu::launch(k.threadFn, args.args(), cfg);
  CHECK_FALSE(rep.hasErrors());
  for (uint32_t cy = 0; cy < gy; ++cy)
    for (uint32_t cx = 0; cx < gx; ++cx)
      for (uint32_t t = 0; t < block; ++t) {
        const uint32_t i = (cy * gx + cx) * block + t;
        INFO("block (" << cx << ", " << cy << "), thread " << t);
        const int32_t want[6] = {int32_t(t), 0, int32_t(cx), int32_t(cy), int32_t(block), int32_t(gx)};
        for (int j = 0; j < 6; ++j) REQUIRE(out[6 * i + uint32_t(j)] == want[j]);
      }
}

TEST_CASE("emu: modules the machine cannot run faithfully are refused by name", "[emu]") {
  const std::string nvHead =
      "target datalayout = \"e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64\"\n"
      "target triple = \"nvptx64-nvidia-cuda\"\n";
  auto kernelUsing = [&](const std::string& decl, const std::string& call) {
    return nvHead + decl + "\ndefine ptx_kernel void @k(ptr addrspace(1) %o) {\n" + call + "\n  ret void\n}\n";
  };
  auto compileText = [](const std::string& text, bool amd = false) {
    return tessera::codegen::compileForEmulator(text, amd, amd ? 64 : 32, hooks());
  };

  SECTION("unknown NVVM intrinsic") {
    std::string t = kernelUsing("declare i64 @llvm.nvvm.read.ptx.sreg.clock64()",
                                "  %c = call i64 @llvm.nvvm.read.ptx.sreg.clock64()\n"
                                "  store i64 %c, ptr addrspace(1) %o");
    CHECK_COMPILE_ERROR(compileText(t), tessera::CompileError,
                        Catch::Matchers::Contains("llvm.nvvm.read.ptx.sreg.clock64"));
  }
  SECTION("a barrier arrival without a wait (bar.arrive)") {
    std::string t = kernelUsing("declare void @llvm.nvvm.barrier.cta.arrive.aligned.count(i32, i32)",
                                "  call void @llvm.nvvm.barrier.cta.arrive.aligned.count(i32 1, i32 64)");
    CHECK_COMPILE_ERROR(compileText(t), tessera::CompileError,
                        Catch::Matchers::Contains("llvm.nvvm.barrier.cta.arrive.aligned.count"));
  }
  SECTION("libdevice function without a host equivalent") {
    std::string t = kernelUsing("declare float @__nv_frobf(float)",
                                "  %c = call float @__nv_frobf(float 1.0)\n"
                                "  store float %c, ptr addrspace(1) %o");
    CHECK_COMPILE_ERROR(compileText(t), tessera::CompileError, Catch::Matchers::Contains("__nv_frobf"));
  }
  SECTION("unknown AMDGPU intrinsic") {
    std::string amdText = readInput("emu_amd_vadd.ll");
    amdText +=
        "declare i32 @llvm.amdgcn.ds.permute(i32, i32)\n"
        "define void @helper(ptr addrspace(1) %o) {\n"
        "  %v = call i32 @llvm.amdgcn.ds.permute(i32 0, i32 1)\n"
        "  store i32 %v, ptr addrspace(1) %o\n  ret void\n}\n";
    CHECK_COMPILE_ERROR(compileText(amdText, true), tessera::CompileError,
                        Catch::Matchers::Contains("llvm.amdgcn.ds.permute"));
  }
  SECTION("fp8 MFMAs: the formats need the architecture; block scales, fp6 and fp4 are not modelled") {
    // v_mfma_f32_16x16x32_fp8_fp8 reads FNUZ codes on gfx942 and OCP codes
    // on gfx950: a module for no architecture is refused, one for an
    // architecture without fp8 MFMAs too.
    auto withCall = [&](const std::string& decl, const std::string& call) {
      return readInput("emu_amd_vadd.ll") + decl + "\ndefine void @helper(ptr addrspace(1) %o, <4 x float> %c) {\n" +
             call + "\n  store <4 x float> %d, ptr addrspace(1) %o\n  ret void\n}\n";
    };
    const std::string fp8 =
        withCall("declare <4 x float> @llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8(i64, i64, <4 x float>, i32, i32, i32)",
                 "  %d = call <4 x float> @llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8(i64 1, i64 2, <4 x float> %c, i32 0, "
                 "i32 0, i32 0)");
    CHECK_COMPILE_ERROR(compileText(fp8, true), tessera::CompileError,
                        Catch::Matchers::Contains("FNUZ or the OCP formats"));
    const tessera::GpuArch* gfx90a = tessera::findGpuArch(tessera::GpuArch::Vendor::AMD, "gfx90a");
    CHECK_COMPILE_ERROR(tessera::codegen::compileForEmulator(fp8, true, 64, hooks(), gfx90a), tessera::CompileError,
                        Catch::Matchers::Contains("gfx90a has no fp8 MFMA"));
    for (const char* gfx : {"gfx942", "gfx950"})
      CHECK_NOTHROW(tessera::codegen::compileForEmulator(fp8, true, 64, hooks(),
                                                         tessera::findGpuArch(tessera::GpuArch::Vendor::AMD, gfx)));
    const tessera::GpuArch* gfx950 = tessera::findGpuArch(tessera::GpuArch::Vendor::AMD, "gfx950");
    auto scaled = [&](const std::string& ops) {
      return withCall(
          "declare <4 x float> @llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.v8i32.v8i32(<8 x i32>, <8 x i32>, "
          "<4 x float>, i32, i32, i32, i32, i32, i32)",
          "  %d = call <4 x float> @llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.v8i32.v8i32(<8 x i32> zeroinitializer, "
          "<8 x i32> zeroinitializer, <4 x float> %c, " +
              ops + ")");
    };
    CHECK_NOTHROW(tessera::codegen::compileForEmulator(scaled("i32 1, i32 0, i32 0, i32 0, i32 0, i32 0"), true, 64,
                                                       hooks(), gfx950));
    // Block scales are modelled (any scale value, a constant op_sel 0-3);
    // fp4 needs four registers, fp6 (2, 3) is not modelled.
    CHECK_NOTHROW(tessera::codegen::compileForEmulator(scaled("i32 0, i32 0, i32 3, i32 127, i32 0, i32 127"), true, 64,
                                                       hooks(), gfx950));
    CHECK_COMPILE_ERROR(tessera::codegen::compileForEmulator(scaled("i32 0, i32 0, i32 4, i32 127, i32 0, i32 127"),
                                                             true, 64, hooks(), gfx950),
                        tessera::CompileError, Catch::Matchers::Contains("op_sel"));
    CHECK_COMPILE_ERROR(tessera::codegen::compileForEmulator(scaled("i32 4, i32 0, i32 0, i32 0, i32 0, i32 0"), true,
                                                             64, hooks(), gfx950),
                        tessera::CompileError, Catch::Matchers::Contains("fp4 (4; four registers)"));
    CHECK_COMPILE_ERROR(tessera::codegen::compileForEmulator(scaled("i32 2, i32 0, i32 0, i32 0, i32 0, i32 0"), true,
                                                             64, hooks(), gfx950),
                        tessera::CompileError, Catch::Matchers::Contains("operand formats are modelled"));
    const tessera::GpuArch* gfx942 = tessera::findGpuArch(tessera::GpuArch::Vendor::AMD, "gfx942");
    CHECK_COMPILE_ERROR(tessera::codegen::compileForEmulator(scaled("i32 0, i32 0, i32 0, i32 0, i32 0, i32 0"), true,
                                                             64, hooks(), gfx942),
                        tessera::CompileError, Catch::Matchers::Contains("CDNA4's"));
  }
  SECTION("wrong vendor, wrong warp size, two kernels, missing hooks") {
    std::string nv = readInput("emu_nv_vadd.ll");
    CHECK_COMPILE_ERROR(compileText(nv, true), tessera::CompileError, Catch::Matchers::Contains("nvptx64"));
    CHECK_THROWS_AS(tessera::codegen::compileForEmulator(nv, false, 64, hooks()), tessera::CompileError);
    std::string two = nv + "define ptx_kernel void @other() {\n  ret void\n}\n";
    CHECK_COMPILE_ERROR(compileText(two), tessera::CompileError, Catch::Matchers::Contains("more than one kernel"));
    CHECK_COMPILE_ERROR(tessera::codegen::compileForEmulator(nv, false, 32, {}), tessera::CompileError,
                        Catch::Matchers::Contains("tessera_emu_"));
  }
  SECTION("inline assembly other than the predicated global accesses") {
    // A near miss of the predicated load (ld.global.nc) and arbitrary text.
    std::string t = kernelUsing("",
                                "  %v = call i32 asm \"mov.b32 $0, $3;\\0A\\09@$2 ld.global.nc.b32 $0, [$1];\", "
                                "\"=&r,l,b,r\"(ptr addrspace(1) %o, i1 true, i32 0)\n"
                                "  store i32 %v, ptr addrspace(1) %o");
    CHECK_COMPILE_ERROR(compileText(t), tessera::CompileError,
                        Catch::Matchers::Contains("inline assembly") && Catch::Matchers::Contains("ld.global.nc"));
    std::string u = kernelUsing("", "  call void asm sideeffect \"nanosleep.u32 100;\", \"\"()");
    CHECK_COMPILE_ERROR(compileText(u), tessera::CompileError, Catch::Matchers::Contains("nanosleep"));
  }
  SECTION("text that does not parse") { CHECK_THROWS_AS(compileText("this is not LLVM IR"), tessera::CompileError); }
}

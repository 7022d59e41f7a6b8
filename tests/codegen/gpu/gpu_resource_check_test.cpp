// Compile-time resource checks on the GPU targets, through the public
// compile API: an over-budget configuration is a ResourceError naming the
// user's line, each buffer / carried tile with its bytes or registers, and a
// concrete suggestion; the same kernel with the suggested change compiles.
#include <catch2/catch.hpp>

#include <string>

#include "../pipelined_gemm.h"
#include "tessera/support/Targets.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;

namespace {

gemmtest::TileMatmulLines gLines;  // the lines of the loop and the first shared alloc

/// c = a @ b for one BM x BN tile, K loop pipelined over `stages` through
/// shared buffers (f16 in, f32 accumulator carried by the loop).
ts::Kernel gemm(int64_t BM, int64_t BN, int64_t BK, int64_t stages) {
  return gemmtest::tileMatmul("rc_gemm", BM, BN, BK, stages, &gLines);
}

std::string compileError(const ts::Kernel& k, const std::string& target, int warps = 4) {
  ts::CompileOptions o;
  o.numWarps = warps;
  try {
    ts::compile(k, ts::Target::parse(target), o);
  } catch (const ts::ResourceError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a loop carrying more registers per thread than the target has is rejected with a warp count that fits",
          "[gpu][resources]") {
  // A 256x256 f32 accumulator over 4 warps of 32: 512 registers per thread
  // on NVIDIA (limit 255). gfx942's 4 waves of 64 hold 256 each (limit 512).
  ts::Kernel k = gemm(256, 256, 16, 1);
  std::string msg = compileError(k, "nvptx:sm_80");
  INFO(msg);
  CHECK_THAT(msg, Contains("pipelined_gemm.h:" + std::to_string(gLines.loop)));
  CHECK_THAT(msg, Contains("carried tile<256x256xf32>: 512 elements = 512 registers per thread"));
  CHECK_THAT(msg, Contains("at most 255"));
  CHECK_THAT(msg, Contains("use numWarps = 16"));
  // wave32 gfx1100 with 4 waves: 128 threads, 512 each > 256.
  msg = compileError(k, "amdgpu:gfx1100");
  INFO(msg);
  CHECK_THAT(msg, Contains("at most 256"));
  // Taking the suggestion passes the check.
  CHECK(compileError(k, "nvptx:sm_80", 16).find("registers per thread") == std::string::npos);
}

TEST_CASE("shared memory over the limit names the user's buffers and a stage count that fits with the scratch",
          "[gpu][resources]") {
  // 128x128x64 f16 tiles, 4 stages: A and B slots take 4 x 16 KiB each =
  // 128 KiB of user buffers, over sm_86's 99 KiB before any scratch.
  ts::Kernel k = gemm(128, 128, 64, 4);
  std::string msg = compileError(k, "nvptx:sm_86");
  INFO(msg);
  REQUIRE_FALSE(msg.empty());
  // Each buffer with its bytes and allocation site, the compiler's part,
  // the plan's areas.
  CHECK_THAT(msg, Contains("4x128x64 x f16 = 65536 bytes"));
  CHECK_THAT(msg, Contains("4x64x128 x f16 = 65536 bytes"));
  CHECK_THAT(msg, Contains("pipelined_gemm.h:" + std::to_string(gLines.alloc)));
  CHECK_THAT(msg, Contains("allocated at "));  // the path as the compiler saw it (absolute or not)
  CHECK_THAT(msg, Contains("bytes of compiler scratch"));
  CHECK_THAT(msg, Contains("Shared areas as planned:"));
  // The suggestion accounts for the scratch: taking it compiles on sm_86.
  const std::string key = "with stages = ";
  size_t at = msg.find(key);
  REQUIRE(at != std::string::npos);
  int stages = std::stoi(msg.substr(at + key.size()));
  CHECK_THAT(msg, Contains(key + std::to_string(stages) + " instead of 4"));
  REQUIRE(stages >= 1);
  REQUIRE(stages < 4);
  CHECK(compileError(gemm(128, 128, 64, stages), "nvptx:sm_86") == "");
  // One stage more than suggested does not fit (the suggestion is the
  // largest that does).
  if (stages + 1 < 4)
    CHECK_THAT(compileError(gemm(128, 128, 64, stages + 1), "nvptx:sm_86"), Contains("shared memory"));
}

TEST_CASE("occupancy: AMD VGPRs are allocated in the backend's granule (24 on gfx1100 in wave32, 8 on CDNA)", "[gpu]") {
  // The figures the AMDGPU backend prints with a code object (its
  // `; Occupancy:` comment): a 128x128x32 f16 GEMM on gfx1100 with 8 waves
  // per block, 211 VGPRs and 32768 bytes of LDS runs 7 waves per SIMD (216
  // VGPRs allocated), where blocks of 16 would give 224 and 6.
  const ts::GpuArch* rdna = ts::findGpuArch(ts::GpuArch::Vendor::AMD, "gfx1100");
  const ts::GpuArch* cdna = ts::findGpuArch(ts::GpuArch::Vendor::AMD, "gfx942");
  REQUIRE(rdna);
  REQUIRE(cdna);
  CHECK(rdna->vgprGranule == 24);
  CHECK(cdna->vgprGranule == 8);
  CHECK(ts::occupancy(*rdna, 211, 32768, 256).value == 7);
  CHECK(ts::occupancy(*rdna, 216, 0, 128).value == 7);
  CHECK(ts::occupancy(*rdna, 217, 0, 128).value == 6);  // 240 VGPRs
  CHECK(ts::occupancy(*rdna, 96, 0, 128).value == 16);
  CHECK(ts::occupancy(*cdna, 128, 0, 256).value == 4);
  CHECK(ts::occupancy(*cdna, 129, 0, 256).value == 3);  // 136 VGPRs
}

// Compile-time resource checks on the GPU targets, through the public
// compile API: an over-budget configuration is a ResourceError naming the
// user's line, each buffer / carried tile with its bytes or registers, and a
// concrete suggestion; the same kernel with the suggested change compiles.
#include <catch2/catch.hpp>

#include <string>

#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;

namespace {

int gLoopLine = 0;  // the line of the loop in the kernels below

/// c = a @ b for one BM x BN tile, K loop pipelined over `stages` through
/// shared buffers (f16 in, f32 accumulator carried by the loop).
ts::Kernel gemm(int64_t BM, int64_t BN, int64_t BK, int64_t stages) {
  return ts::kernel("rc_gemm", {"c", "a", "b", "K"},
                    [=](ts::Ptr<float> c, ts::Ptr<const ts::half> a, ts::Ptr<const ts::half> b, ts::Int K) {
    auto rm = ts::arange(BM);
    auto rn = ts::arange(BN);
    auto rk = ts::arange(BK);
    auto sa = ts::alloc_shared(ts::f16, {BM, BK});
    auto sb = ts::alloc_shared(ts::f16, {BK, BN});
    gLoopLine = __LINE__ + 1;
    auto acc = ts::for_pipelined(0, K, BK, stages, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k, ts::Tensor acc) {
      auto ka = ts::expand_dims(rk, 0) + k;
      auto ta = ts::stage_copy(sa, a + ts::expand_dims(rm, 1) * K + ka, ka < K);
      auto kb = ts::expand_dims(rk, 1) + k;
      auto tb = ts::stage_copy(sb, b + kb * BN + ts::expand_dims(rn, 0), kb < K);
      return ts::dot(ta.load(), tb.load(), acc);
    });
    ts::store(c + ts::expand_dims(rm, 1) * BN + ts::expand_dims(rn, 0), acc);
  });
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
  CHECK_THAT(msg, Contains(std::string(__FILE__) + ":" + std::to_string(gLoopLine)));
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

// The pipelined f16 GEMM on a real H100-class device (nvptx:sm_90a) with
// each Hopper path the compiler takes there: TMA copies (the usual
// schedule), warp specialisation (a producer warp; a warpgroup and
// setmaxnreg at 128 x 256) and the epilogue's tensor store, each equal to the exact
// reference and to the cp.async path. The acceptance kit runs it
// (scripts/gpu-acceptance.sh); without such a device it says why and skips.
#include <catch2/catch.hpp>

#include "../gemm_check.h"
#include "../env_guard.h"
#include "real_cuda_device.h"

namespace ts = tessera;
namespace ex = tessera::examples;

TEST_CASE("the Hopper GEMM paths (TMA, warp specialisation, tensor stores) run on a real sm_90a device",
          "[gpu][cuda][hardware][tma]") {
  tessera::testing::EnvGuard env("TESSERA_CUDA_LIBRARY", nullptr);
  const std::string why = tessera::testing::whyNoCudaDevice([](const ts::Device& dev) -> std::string {
    return dev.arch() == "nvptx:sm_90a" ? "" : dev.name() + " is " + dev.arch() + ", not sm_90a";
  });
  if (!why.empty()) {
    WARN("SKIP: " << why << " -- Hopper GEMMs not run");
    return;
  }
  const ts::Device dev = ts::Device::cuda(0);
  struct Cfg {
    ex::GemmBlocks blocks;
    int warps;
  };
  for (Cfg c : {Cfg{{128, 128, 64, 3, false}, 8}, Cfg{{128, 128, 64, 3, true}, 8}, Cfg{{128, 256, 64, 3, true}, 8},
                Cfg{{64, 64, 32, 2, true}, 4}}) {
    const ts::Kernel kernel = ex::gemmF16(c.blocks, ex::Activation::None);
    tessera_test::checkGemm("f16", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {512, 512, 256}, true,
                            dev);
    tessera_test::checkGemm("f16", ts::DType::F16, ts::DType::F16, kernel, c.blocks, c.warps, {200, 144, 80}, true,
                            dev);
  }
}

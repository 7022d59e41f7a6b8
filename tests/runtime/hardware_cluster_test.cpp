// Thread-block clusters on a real CUDA device of compute capability 9.0 or
// later (sm_90a, sm_100a, sm_103a, sm_120a): rmsnorm_cluster's rows shared by
// clusters of 1 to 8 programs, and paged_decode_attention's splits combined
// in a cluster's shared memory, each against its plain C++ reference --
// launched through cuLaunchKernelEx with the cluster attribute. The
// acceptance kit runs it; without such a device it says why and skips.
#include <catch2/catch.hpp>

#include "../env_guard.h"
#include "real_cuda_device.h"
#include "registry.h"

namespace ts = tessera;
namespace ex = tessera::examples;

TEST_CASE("rmsnorm_cluster and paged_decode_attention run in clusters on a real CUDA device with clusters",
          "[gpu][cuda][hardware][cluster]") {
  tessera::testing::EnvGuard env("TESSERA_CUDA_LIBRARY", nullptr);
  const std::string why = tessera::testing::whyNoCudaDevice([](const ts::Device& dev) -> std::string {
    return ex::clusterBlocksOf(ex::deviceTarget(dev)) >= 2 ? "" : dev.name() + " (" + dev.arch() + ") has no clusters";
  });
  if (!why.empty()) {
    WARN("SKIP: " << why << " -- cluster kernels not run");
    return;
  }
  const ts::Device dev = ts::Device::cuda(0);
  for (const char* name : {"rmsnorm_cluster", "paged_decode_attention"}) {
    const ex::Example* e = ex::find(name);
    REQUIRE(e);
    for (const auto& shape : e->testShapes) {
      ex::RunContext ctx;
      ctx.device = dev;
      ctx.shape = shape;
      ex::CheckResult r = e->run(ctx);
      INFO(name << " " << r.detail);
      REQUIRE(r.ok);
    }
  }
}

TEST_CASE("gemm_f16 on a dynamic tile schedule runs on a real CUDA device with cluster launch control",
          "[gpu][cuda][hardware][clc]") {
  // One program per tile, the programs that started taking the tiles of
  // those still queued (clusterlaunchcontrol.try_cancel): the result is the
  // reference's on aligned and ragged shapes.
  tessera::testing::EnvGuard env("TESSERA_CUDA_LIBRARY", nullptr);
  const std::string why = tessera::testing::whyNoCudaDevice([](const ts::Device& dev) -> std::string {
    return ex::cancelsPrograms(ex::deviceTarget(dev))
               ? ""
               : dev.name() + " (" + dev.arch() + ") has no cluster launch control (sm_100a, sm_103a, sm_120a)";
  });
  if (!why.empty()) {
    WARN("SKIP: " << why << " -- dynamic tile schedules not run");
    return;
  }
  const ex::Example* e = ex::find("gemm_f16");
  REQUIRE(e);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1024, 1024, 512}, std::vector<int64_t>{1000, 777, 520}}) {
    ex::RunContext ctx;
    ctx.device = ts::Device::cuda(0);
    ctx.shape = shape;
    ctx = ex::withConfig(ctx, ts::perf::TuneConfig::parse("DYNAMIC=1"));
    ex::CheckResult r = e->run(ctx);
    INFO(r.detail);
    REQUIRE(r.ok);
  }
}

// The kernels of the static GPU benchmark (bench/gpu_static_kernels.h) run
// against their C++ references on the CPU and both emulators, at shapes
// aligned to their tiles and ragged ones, with the warps the benchmark
// compiles them with: its figures are never those of a wrong kernel.
#include <catch2/catch.hpp>

#include "gpu_static_kernels.h"

using namespace tessera;

namespace {

void runFamily(const std::string& family) {
  int seen = 0;
  for (const bench::GpuBenchKernel& k : bench::gpuBenchKernels()) {
    if (k.name != family) continue;
    ++seen;
    CompileOptions o;
    o.numWarps = k.numWarps;
    for (const Device& dev : {Device::cpu(), Device::emulator("nvptx:sm_80"), Device::emulator("amdgpu:gfx942")})
      for (const auto& shape : k.testShapes) {
        std::string s;
        for (int64_t x : shape) s += std::to_string(x) + " ";
        INFO(k.name << " " << k.config << " on " << dev.name() << ", shape " << s);
        examples::CheckResult r = k.check(dev, o, shape);
        INFO(r.detail);
        CHECK(r.ok);
      }
  }
  CHECK(seen > 0);
}

}  // namespace

TEST_CASE("bench kernels: gemv", "[bench][emu]") { runFamily("gemv"); }
TEST_CASE("bench kernels: rope", "[bench][emu]") { runFamily("rope"); }
TEST_CASE("bench kernels: transpose", "[bench][emu]") { runFamily("transpose"); }
TEST_CASE("bench kernels: attention", "[bench][emu]") { runFamily("attention"); }
TEST_CASE("bench kernels: gemm_f16", "[bench][emu]") { runFamily("gemm_f16"); }

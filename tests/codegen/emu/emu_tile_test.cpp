// End to end: tile-IR kernels lowered for NVPTX and AMDGPU by the GPU
// backend, and the exact module handed to the GPU code generator
// (dumps.extra["llvm-gpu"]) run on the SIMT machine.
#include <catch2/catch.hpp>

#include "../ir_build_util.h"

#include <cmath>
#include <limits>
#include <random>

#include "../../../codegen/gpu/GpuCompile.h"
#include "../emu_util.h"
#include "tessera/ir/Builder.h"

using namespace emutest;
using namespace tessera;
using namespace tessera::ir;

namespace {

using namespace irtest;

std::unique_ptr<Function> vecAdd(int64_t block) { return irtest::vecAdd("emu_tile.cpp", block, false); }

std::unique_ptr<Function> softmax() { return irtest::softmax("emu_tile.cpp", 256, false); }

Lowered lower(const Function& f, const std::string& target) { return lowerForEmulator(f, target); }

emu::LaunchConfig launchConfig(const Lowered& l, uint32_t programs) {
  emu::LaunchConfig c = config(l.k, programs, l.art->binary.threadsPerBlock);
  // NVPTX kernels take the backend's shared memory as dynamic shared memory;
  // AMDGPU kernels declare it as static LDS.
  c.sharedBytes = l.k.dynamicSharedOffset + (l.k.amd ? 0 : l.art->binary.sharedBytes);
  return c;
}

std::vector<float> randomFloats(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST_CASE("emu: tile-IR vector add lowered for NVPTX and AMDGPU runs on the machine", "[emu]") {
  const int64_t block = 512;
  auto f = vecAdd(block);
  for (const char* target : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    Lowered l = lower(*f, target);
    for (int n : {3000, 2048}) {  // not / a multiple of the tile
      INFO(target << ", n = " << n);
      auto x = randomFloats(n, -5, 5, 21), y = randomFloats(n, -5, 5, 22);
      std::vector<float> out(n, 0.0f);
      Args args;
      args.add(out.data()).add(x.data()).add(y.data()).add(int32_t(n));
      auto cfg = launchConfig(l, uint32_t((n + block - 1) / block));
      addBuffer(cfg, out), addBuffer(cfg, x), addBuffer(cfg, y);
      emu::LaunchReport rep = emu::launch(l.k.threadFn, args.args(), cfg);
      CHECK_FALSE(rep.hasErrors());
      for (int i = 0; i < n; ++i) REQUIRE(out[i] == x[i] + y[i]);
    }
  }
}

TEST_CASE("emu: tile-IR softmax lowered for NVPTX and AMDGPU runs on the machine", "[emu]") {
  auto f = softmax();
  for (const char* target : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    Lowered l = lower(*f, target);
    for (int cols : {256, 200, 33}) {
      INFO(target << ", cols = " << cols);
      const int rows = 5;
      auto in = randomFloats(size_t(rows) * cols, -6, 6, 23 + cols);
      std::vector<float> out(in.size(), 0.0f);
      Args args;
      args.add(out.data()).add(in.data()).add(int32_t(cols));
      auto cfg = launchConfig(l, rows);
      addBuffer(cfg, out), addBuffer(cfg, in);
      emu::LaunchReport rep = emu::launch(l.k.threadFn, args.args(), cfg);
      CHECK_FALSE(rep.hasErrors());
      for (int r = 0; r < rows; ++r) {
        double m = -INFINITY, s = 0;
        for (int c = 0; c < cols; ++c) m = std::max(m, double(in[r * cols + c]));
        for (int c = 0; c < cols; ++c) s += std::exp(double(in[r * cols + c]) - m);
        for (int c = 0; c < cols; ++c) {
          double ref = std::exp(double(in[r * cols + c]) - m) / s;
          REQUIRE(std::fabs(out[r * cols + c] - ref) <= 1e-6 + 1e-5 * ref);
        }
      }
    }
  }
}

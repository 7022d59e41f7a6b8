// GPU launch limits (tessera/runtime/LaunchLimits.h): the SIMT emulator
// refuses what the driver of the vendor it emulates refuses, with the
// LaunchError a CUDA (or HIP) device gives, at the call, for synchronous and
// asynchronous launches alike; its machine (emu::launch) checks the same
// table; the fake CUDA driver's device words the same refusal the same way.

#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <string>

#include "../../runtime/lib/DeviceImpl.h"  // createCudaDevice: the fake CUDA device
#include "../env_guard.h"
#include "gpu_test_support.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/runtime/LaunchLimits.h"
#include "tessera/runtime/Runtime.h"
#include "error_of.h"

using tessera::DType;
using tessera::LaunchError;
using tessera::rt::testing::errorOf;
using namespace tessera::rt::testing;
using namespace tessera::rt;
using Catch::Matchers::Contains;

namespace {

std::atomic<int> gRuns{0};  // threads the no-op kernel ran, over the emulator's host threads
void noop(void* const*) { ++gRuns; }

Kernel noopKernel(const Device& emu, unsigned threadsPerBlock) {
  Binary b;
  b.format = Binary::Format::EmulatedGpu;
  b.emuThread = noop;
  b.threadsPerBlock = threadsPerBlock;
  b.emuAmd = emu.arch().rfind("amdgpu:", 0) == 0;
  b.emuWarpSize = emu.arch() == "amdgpu:gfx1100" || !b.emuAmd ? 32 : 64;
  b.signature.kernelName = "noop";
  return emu.load(b);
}

/// The message of launching `k` on `grid`, synchronously and on a stream
/// (which must say the same, at the call).
std::string refusal(const Device& dev, const Kernel& k, Dim3 grid) {
  const std::string sync = errorOf<LaunchError>([&] { k.launch(grid, {}); });
  LaunchOptions o;
  o.stream = dev.createStream();
  CHECK(errorOf<LaunchError>([&] { k.launch(grid, {}, o); }) == sync);
  o.stream.synchronize();  // nothing was queued
  return sync;
}

}  // namespace

// The refused grids are launched with one-thread blocks: were a refusal
// missing, the emulator would run them, and that must stay quick (a test
// that fails, not one that runs for hours).

TEST_CASE("the NVIDIA emulator refuses the grids every NVIDIA GPU refuses", "[runtime][emu][launch]") {
  Device emu = Device::emulator("nvptx:sm_80");
  Kernel k = noopKernel(emu, 1);
  const std::string dev = "emu:nvptx:sm_80 (SIMT emulator, warp 32)";
  CHECK(refusal(emu, k, {1, 65536, 1}) ==
        "noop: grid {1, 65536, 1} exceeds " + dev + "'s limit of 65535 blocks in dimension y");
  CHECK(refusal(emu, k, {1, 1, 65536}) ==
        "noop: grid {1, 1, 65536} exceeds " + dev + "'s limit of 65535 blocks in dimension z");
  // x up to 2^31 - 1 is every GPU's; past it the runtime refuses any device.
  CHECK_THAT(refusal(emu, k, {0x80000000u, 1, 1}), Contains("too large"));
  // A grid within the limits runs.
  gRuns = 0;
  noopKernel(emu, 32).launch({2, 3, 2}, {});
  CHECK(gRuns == 2 * 3 * 2 * 32);
  // Every NVIDIA architecture has the same limits.
  Device hopper = Device::emulator("nvptx:sm_90a");
  CHECK_THAT(refusal(hopper, noopKernel(hopper, 1), {2, 70000, 1}),
             Contains("noop: grid {2, 70000, 1} exceeds emu:nvptx:sm_90a") &&
                 Contains("limit of 65535 blocks in dimension y"));
}

TEST_CASE("the AMD emulators refuse what HIP refuses", "[runtime][emu][launch]") {
  Device emu = Device::emulator("amdgpu:gfx942");
  const std::string dev = "emu:amdgpu:gfx942 (SIMT emulator, warp 64)";
  Kernel k = noopKernel(emu, 1);
  CHECK(refusal(emu, k, {1, 65537, 1}) ==
        "noop: grid {1, 65537, 1} exceeds " + dev + "'s limit of 65536 blocks in dimension y");
  // HIP's work-item limit (grid times block, 2^32 - 1 in each dimension)
  // is checked by the same function (next test cases); a grid that passes
  // it here would take the emulator hours if the check were missing.
  Device rdna = Device::emulator("amdgpu:gfx1100");
  CHECK_THAT(refusal(rdna, noopKernel(rdna, 1), {1, 1, 70000}),
             Contains("exceeds emu:amdgpu:gfx1100") && Contains("limit of 65536 blocks in dimension z"));
}

TEST_CASE("the emulator refuses blocks of more than 1024 threads when the kernel is loaded", "[runtime][emu][launch]") {
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942"}) {
    INFO(arch);
    Device emu = Device::emulator(arch);
    CHECK_THAT(errorOf<tessera::DeviceError>([&] { noopKernel(emu, 2048); }),
               Contains("block of 2048 threads; a block has 1..1024"));
    CHECK_NOTHROW(noopKernel(emu, 1024));
  }
}

TEST_CASE("emu::launch checks the vendor's block and grid limits", "[runtime][emu][launch]") {
  namespace emu = tessera::emu;
  auto message = [](emu::Vendor v, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block) {
    emu::LaunchConfig cfg;
    cfg.vendor = v;
    cfg.warpSize = v == emu::Vendor::AMD ? 64 : 32;
    cfg.kernelName = "k";
    for (int d = 0; d < 3; ++d) cfg.grid[d] = grid[d], cfg.block[d] = block[d];
    return errorOf<LaunchError>([&] { emu::launch(noop, nullptr, cfg); });
  };
  CHECK(message(emu::Vendor::NVIDIA, {1, 1, 1}, {1, 1, 65}) ==
        "emulator launch of kernel 'k': block {1, 1, 65} exceeds an NVIDIA GPU's limit of 64 threads in dimension z");
  CHECK(message(emu::Vendor::NVIDIA, {1, 1, 1}, {1025, 1, 1}) ==
        "emulator launch of kernel 'k': a block of 1025 threads exceeds an NVIDIA GPU's limit of 1024 threads per "
        "block");
  CHECK(message(emu::Vendor::NVIDIA, {1, 65536, 1}, {1, 1, 1}) ==
        "emulator launch of kernel 'k': grid {1, 65536, 1} exceeds an NVIDIA GPU's limit of 65535 blocks in "
        "dimension y");
  // AMD allows a block of 1 x 1 x 65 (maxThreadsDim is 1024 in each).
  gRuns = 0;
  CHECK(message(emu::Vendor::AMD, {1, 1, 1}, {1, 1, 65}) == "(no error of the expected type)");
  CHECK(gRuns == 65);
  CHECK_THAT(message(emu::Vendor::AMD, {1, 65537, 1}, {1, 1, 1}),
             Contains("exceeds an AMD GPU (HIP)'s limit of 65536 blocks in dimension y"));
}

TEST_CASE("launch limits: one table, the same words on the emulator and the CUDA device", "[runtime][launch][fake]") {
  const uint32_t block[3] = {128, 1, 1};
  const uint32_t ok[3] = {2147483647u, 65535, 65535}, y[3] = {1, 65536, 1};
  CHECK(launchLimitViolation(kNvidiaLaunchLimits, ok, block, "d").empty());
  CHECK(launchLimitViolation(kNvidiaLaunchLimits, y, block, "d") ==
        "grid {1, 65536, 1} exceeds d's limit of 65535 blocks in dimension y");
  CHECK(launchLimitViolation(kAmdLaunchLimits, y, block, "d").empty());
  const uint32_t items[3] = {33554432, 1, 1};  // 2^25 blocks of 128 threads: 2^32 work-items, one too many
  CHECK(launchLimitViolation(kAmdLaunchLimits, items, block, "d") ==
        "grid {33554432, 1, 1} of blocks {128, 1, 1} is 4294967296 work-items in dimension x, over d's limit of "
        "4294967295 work-items per dimension");
  const uint32_t fits[3] = {33554431, 1, 1};
  CHECK(launchLimitViolation(kAmdLaunchLimits, fits, block, "d").empty());
  CHECK(launchLimitViolation(kNvidiaLaunchLimits, items, block, "d").empty());  // NVIDIA counts blocks
  const uint32_t big[3] = {1025, 1, 1}, deep[3] = {1, 1, 65}, one[3] = {1, 1, 1};
  CHECK(launchLimitViolation(kAmdLaunchLimits, one, big, "d") ==
        "a block of 1025 threads exceeds d's limit of 1024 threads per block");
  CHECK(launchLimitViolation(kAmdLaunchLimits, one, deep, "d").empty());
  CHECK(launchLimitViolation(kNvidiaLaunchLimits, one, deep, "d") ==
        "block {1, 1, 65} exceeds d's limit of 64 threads in dimension z");
  CHECK(&launchLimits(tessera::GpuArch::Vendor::NVIDIA) == &kNvidiaLaunchLimits);
  CHECK(&launchLimits(tessera::GpuArch::Vendor::AMD) == &kAmdLaunchLimits);

  // The CUDA device (here the fake driver, whose devices report the real
  // limits) refuses the grid the emulator refuses, in the same words.
  tessera::testing::EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Device cuda(createCudaDevice(0));
  Kernel onGpu = cuda.load(vaddBinary());
  Buffer g = cuda.alloc(DType::F32, 8);
  const std::string onCuda = errorOf<LaunchError>([&] { onGpu.launch({1, 65536, 1}, {g, g, g, 8}); });
  Device emu = Device::emulator("nvptx:sm_80");
  Binary b;
  b.format = Binary::Format::EmulatedGpu;
  b.emuThread = noop;
  b.threadsPerBlock = 128;
  b.signature = vaddSignature();
  Buffer e = emu.alloc(DType::F32, 8);
  const std::string onEmu = errorOf<LaunchError>([&] { emu.load(b).launch({1, 65536, 1}, {e, e, e, 8}); });
  const std::string rest = "'s limit of 65535 blocks in dimension y";
  CHECK(onCuda == "vadd: grid {1, 65536, 1} exceeds " + cuda.name() + rest);
  CHECK(onEmu == "vadd: grid {1, 65536, 1} exceeds " + emu.name() + rest);
}

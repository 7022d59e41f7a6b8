// Every launch mistake throws LaunchError naming the kernel, the argument
// (index and name) and what was expected versus given.

#include <catch2/catch.hpp>

#include <atomic>
#include <climits>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../../runtime/lib/DeviceImpl.h"  // createCpuDevice: a second device
#include "gpu_test_support.h"
#include "tessera/runtime/Runtime.h"
#include "tessera/support/Targets.h"

using namespace tessera;
using namespace tessera::rt;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

// Launches may run on several threads, hence atomic.
std::atomic<int64_t> gRuns{0};
void countingEntry(void* const*, int64_t begin, int64_t end, const int32_t*) { gRuns += end - begin; }

Kernel softmax(const Device& dev = Device::cpu()) {
  Binary bin;
  bin.signature = {"softmax",
                   {{ArgSpec::Kind::Pointer, DType::F32, "out"},
                    {ArgSpec::Kind::Pointer, DType::F32, "in"},
                    {ArgSpec::Kind::Scalar, DType::I32, "cols"}},
                   {}};
  bin.hostEntry = &countingEntry;
  return dev.load(bin);
}

Kernel scalarKernel(DType t) {
  Binary bin;
  bin.signature = {"scale", {{ArgSpec::Kind::Scalar, t, "alpha"}}, {}};
  bin.hostEntry = &countingEntry;
  return Device::cpu().load(bin);
}

}  // namespace

#define REQUIRE_LAUNCH_ERROR(expr, matcher)        \
  do {                                             \
    REQUIRE_THROWS_AS(expr, tessera::LaunchError); \
    REQUIRE_THROWS_WITH(expr, matcher);            \
  } while (0)

TEST_CASE("a correct launch runs", "[runtime][launch]") {
  Kernel k = softmax();
  Device cpu = Device::cpu();
  Buffer out = cpu.alloc(DType::F32, 8), in = cpu.alloc(DType::F32, 8);
  gRuns = 0;
  k.launch({4}, {out, in, 8});
  CHECK(gRuns == 4);
}

TEST_CASE("wrong argument count", "[runtime][launch]") {
  Kernel k = softmax();
  Device cpu = Device::cpu();
  Buffer out = cpu.alloc(DType::F32, 8), in = cpu.alloc(DType::F32, 8);
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {out, in}),
                       Contains("softmax expects 3 arguments (ptr<f32> out, ptr<f32> in, i32 cols), got 2"));
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {out, in, 8, 9}), Contains("got 4"));
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {}), Contains("got 0"));
}

TEST_CASE("buffer for scalar and scalar for buffer", "[runtime][launch]") {
  Kernel k = softmax();
  Device cpu = Device::cpu();
  Buffer out = cpu.alloc(DType::F32, 8), in = cpu.alloc(DType::F32, 8);
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {out, in, in}),
                       Contains("softmax") && Contains("argument 2 (i32 cols)") && Contains("expects an i32 scalar") &&
                           Contains("got a Buffer of 8 f32") && Contains("pass an int32_t value"));
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {out, 3, 8}), Contains("argument 1 (ptr<f32> in)") &&
                                                       Contains("expects a Buffer of f32") &&
                                                       Contains("got an int32_t (3)"));
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {2.5f, in, 8}),
                       Contains("argument 0 (ptr<f32> out)") && Contains("got a float (2.5)"));
}

TEST_CASE("pointer dtype mismatch, null buffer, offset and foreign device", "[runtime][launch]") {
  Kernel k = softmax();
  Device cpu = Device::cpu();
  Buffer out = cpu.alloc(DType::F32, 8), in = cpu.alloc(DType::F32, 8);
  Buffer half = cpu.alloc(DType::F16, 8);
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {out, half, 8}), Contains("argument 1 (ptr<f32> in)") &&
                                                          Contains("expects a Buffer of f32") &&
                                                          Contains("got a Buffer of 8 f16"));
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {Buffer(), in, 8}),
                       Contains("softmax: argument 0 (ptr<f32> out)") && Contains("null Buffer"));

  Arg shifted(in);
  shifted.offset = 9;
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {out, shifted, 8}), Contains("argument 1 (ptr<f32> in)") && Contains("offset 9") &&
                                                             Contains("past the end") && Contains("8 f32"));
  shifted.offset = 8;  // one past the end: an empty view, still a valid address
  gRuns = 0;
  k.launch({1}, {out, shifted, 8});
  CHECK(gRuns == 1);

  // A buffer of another device is refused, naming both devices.
  Device emu = Device::emulator("nvptx:sm_80");
  Buffer foreign = emu.alloc(DType::F32, 8);
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {out, foreign, 8}), Contains("argument 1 (ptr<f32> in)") &&
                                                             Contains("kernel is loaded on") &&
                                                             Contains("allocate it on the kernel's device"));
  // CPU devices (the host's and the pinned-cpu ones) share host memory:
  // buffers of one run with kernels of another, both ways.
  Device other(createCpuDevice("x86-64-v3"));
  Buffer shared = other.alloc(DType::F32, 8);
  gRuns = 0;
  k.launch({1}, {out, shared, 8});
  Kernel k2 = softmax(other);
  k2.launch({2}, {shared, in, 8});
  CHECK(gRuns == 3);
}

TEST_CASE("scalar dtype rules", "[runtime][launch]") {
  SECTION("exact matches") {
    scalarKernel(DType::I1).launch({1}, {true});
    scalarKernel(DType::I8).launch({1}, {int8_t{-3}});
    scalarKernel(DType::I16).launch({1}, {int16_t{300}});
    scalarKernel(DType::I32).launch({1}, {7});
    scalarKernel(DType::I64).launch({1}, {int64_t{1} << 40});
    scalarKernel(DType::F32).launch({1}, {1.0f});
    scalarKernel(DType::F64).launch({1}, {1.0});
  }
  SECTION("accepted conversions") {
    scalarKernel(DType::I64).launch({1}, {-5});  // int -> i64
    scalarKernel(DType::I8).launch({1}, {127});  // int -> i8 when it fits
    scalarKernel(DType::I8).launch({1}, {-128});
    scalarKernel(DType::I16).launch({1}, {-32768});      // int -> i16 when it fits
    scalarKernel(DType::I32).launch({1}, {int16_t{5}});  // any exact widening
    scalarKernel(DType::F64).launch({1}, {0.5f});        // float -> f64
    scalarKernel(DType::F16).launch({1}, {0.5f});        // float -> f16 / bf16
    scalarKernel(DType::BF16).launch({1}, {0.5f});
  }
  SECTION("double for f32 gets a float-literal hint") {
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::F32).launch({1}, {1.0}),
                         Contains("scale: argument 0 (f32 alpha)") && Contains("expects an f32 scalar") &&
                             Contains("got a double (1)") && Contains("pass 1.0f"));
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::F32).launch({1}, {0.25}), Contains("pass 0.25f"));
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::F16).launch({1}, {0.25}), Contains("pass 0.25f"));
  }
  SECTION("integer for float and float for integer") {
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::F32).launch({1}, {3}),
                         Contains("expects an f32 scalar") && Contains("got an int32_t (3)") && Contains("pass 3.0f"));
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::F64).launch({1}, {int64_t{3}}), Contains("pass 3.0"));
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::I32).launch({1}, {2.5f}), Contains("expects an i32 scalar") &&
                                                                           Contains("got a float (2.5)") &&
                                                                           Contains("pass an integer"));
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::I64).launch({1}, {2.0}), Contains("got a double (2)"));
  }
  SECTION("out of range and narrowing") {
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::I8).launch({1}, {128}), Contains("expects an i8 scalar") &&
                                                                         Contains("128") &&
                                                                         Contains("does not fit in i8 (-128..127)"));
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::I16).launch({1}, {-32769}),
                         Contains("does not fit in i16 (-32768..32767)"));
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::I32).launch({1}, {int64_t{5}}), Contains("expects an i32 scalar") &&
                                                                                 Contains("got an int64_t (5)") &&
                                                                                 Contains("pass an int"));
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::I8).launch({1}, {int16_t{1}}), Contains("int16_t"));
  }
  SECTION("bool is its own type") {
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::I1).launch({1}, {1}),
                         Contains("expects an i1 scalar") && Contains("pass a bool"));
    REQUIRE_LAUNCH_ERROR(scalarKernel(DType::I32).launch({1}, {true}), Contains("got a bool (true)"));
  }
}

TEST_CASE("grid limits", "[runtime][launch]") {
  Kernel k = scalarKernel(DType::I32);
  // An empty grid (cdiv(M, BLOCK_M) of an empty tensor) runs no program,
  // but its arguments are still checked.
  gRuns = 0;
  k.launch({0}, {1});
  k.launch({4, 0, 2}, {1});
  k.launch({1, 1, 0}, {1});
  CHECK(gRuns == 0);
  REQUIRE_LAUNCH_ERROR(k.launch({0}, {true}), Contains("got a bool (true)"));
  REQUIRE_LAUNCH_ERROR(k.launch({0}, {}), Contains("expects 1 argument"));
  REQUIRE_LAUNCH_ERROR(k.launch({1u << 31}, {1}),
                       Contains("too large") && Contains("below 2^31") && Contains("below 2^40"));
  REQUIRE_LAUNCH_ERROR(k.launch({1, 1, 0x80000000u}, {1}), Contains("too large"));
  // Each dimension in range but 2^21 * 2^19 = 2^40 programs in total.
  REQUIRE_LAUNCH_ERROR(k.launch({1u << 21, 1u << 19, 1}, {1}),
                       Contains("1099511627776 programs") && Contains("too large"));
  // 2^21 * 2^21 * 2^22 = 2^64 programs: wraps to 0 in 64-bit arithmetic.
  REQUIRE_LAUNCH_ERROR(k.launch({1u << 21, 1u << 21, 1u << 22}, {1}),
                       Contains("18446744073709551616") || Contains("over 2^64"));
  REQUIRE_LAUNCH_ERROR(k.launch({0x7fffffffu, 0x7fffffffu, 0x7fffffffu}, {1}), Contains("too large"));
  // The largest single dimension is fine (the kernel does nothing).
  gRuns = 0;
  k.launch({0x7fffffffu}, {1}, LaunchOptions{2});
  CHECK(gRuns == 0x7fffffff);
}

TEST_CASE("too many threads requested", "[runtime][launch]") {
  Kernel k = scalarKernel(DType::I32);
  LaunchOptions o;
  o.threads = 100000;
  REQUIRE_LAUNCH_ERROR(k.launch({2}, {1}, o), Contains("threads") && Contains("100000"));
}

// ---- TMA tensor maps ----------------------------------------------------------

namespace {

/// gemm(ptr<f16> a, i32 K, i32 M) with one hidden tensor map
/// tma(a: f16 dims [K, M] strides [1, K] box [32, 8] swizzle 64), which
/// `edit` may change. The checks of its extents come before any device is
/// asked to encode it, so they are all seen on the CPU device, which then
/// refuses the map itself.
Kernel tmaKernel(const std::function<void(TensorMapSpec&)>& edit = {}) {
  Binary bin;
  bin.signature = {"gemm",
                   {{ArgSpec::Kind::Pointer, DType::F16, "a"},
                    {ArgSpec::Kind::Scalar, DType::I32, "K"},
                    {ArgSpec::Kind::Scalar, DType::I32, "M"}},
                   {}};
  TensorMapSpec m = tessera::rt::testing::rowMajorTensorMap(0, DType::F16, 1, 2, 32, 8, 64);
  if (edit) edit(m);
  bin.signature.tensorMaps = {m};
  bin.hostEntry = &countingEntry;
  return Device::cpu().load(bin);
}

}  // namespace

TEST_CASE("tensor maps: a device without TMA refuses the kernel", "[runtime][launch][tma]") {
  Kernel k = tmaKernel();
  Buffer a = Device::cpu().alloc(DType::F16, 64 * 16);
  gRuns = 0;
  try {
    k.launch({1}, {a, 64, 16});
    FAIL("no LaunchError");
  } catch (const LaunchError& e) {
    CHECK(std::string(e.what()) ==
          "gemm: tensor maps need an NVIDIA sm_90 device or its emulator; this kernel was compiled to a host "
          "function (cpu target) and loaded on " +
              Device::cpu().name() +
              "; compile it for nvptx:sm_90a and run it on a CUDA device of compute capability 9.0 or on "
              "Device::emulator(\"nvptx:sm_90a\")");
  }
  CHECK(gRuns == 0);  // nothing ran
  // An emulator of an architecture without TMA refuses it too.
  Binary emuBin;
  emuBin.format = Binary::Format::EmulatedGpu;
  emuBin.signature = k.signature();
  emuBin.emuThread = [](void* const*) {};
  Kernel onEmu = Device::emulator("nvptx:sm_80").load(emuBin);
  Buffer ea = Device::emulator("nvptx:sm_80").alloc(DType::F16, 64 * 16);
  REQUIRE_LAUNCH_ERROR(onEmu.launch({1}, {ea, 64, 16}),
                       Contains("gemm: tensor maps need an NVIDIA sm_90 device or its emulator; this kernel was "
                                "compiled to emulated GPU code (an emu: target) and loaded on emu:nvptx:sm_80"));
}

TEST_CASE("tensor maps: extents are checked against TMA's rules at launch", "[runtime][launch][tma]") {
  Device cpu = Device::cpu();
  Kernel k = tmaKernel();
  Buffer a = cpu.alloc(DType::F16, 64 * 16);
  const std::string refused = "tensor maps need an NVIDIA sm_90 device";
  // Valid extents get as far as the device (which refuses the map).
  REQUIRE_LAUNCH_ERROR(k.launch({1}, {a, 64, 16}), Contains(refused));

  SECTION("strides") {
    REQUIRE_LAUNCH_ERROR(k.launch({1}, {a, 10, 16}),
                         Equals("gemm: argument 'K' (i32 K = 10): the TMA tensor map of 'a' needs a row stride that "
                                "is a multiple of 16 bytes (10 f16 = 20 bytes); pad the rows to a multiple of 8 "
                                "elements"));
    // A stride scaled from an argument names the product.
    Kernel scaled = tmaKernel([](TensorMapSpec& m) {
      m.rank = 3;
      m.dims[1] = {-1, 1, 1};  // one row a plane
      m.dims[2] = {-1, 1, 2};
      m.strides[2] = {2, 3, 0};
      m.box[1] = 1;
      m.box[2] = 1;
    });
    REQUIRE_LAUNCH_ERROR(scaled.launch({1}, {a, 8, 3}),
                         Contains("argument 'M' (i32 M = 3): the TMA tensor map of 'a' needs a stride of dimension "
                                  "2 that is a multiple of 16 bytes (3*M = 9 f16 = 18 bytes); pad each plane to a "
                                  "multiple of 8 elements"));
    REQUIRE_LAUNCH_ERROR(scaled.launch({1}, {a, 8, 8}), Contains(refused));
    // Each dimension within the next one's stride (the driver's rule):
    // planes of 64 elements cannot hold M = 16 rows of K = 8.
    Kernel nested = tmaKernel([](TensorMapSpec& m) {
      m.rank = 3;
      m.dims[2] = {-1, 1, 2};
      m.strides[2] = {-1, 1, 64};
      m.box[1] = 1;
      m.box[2] = 1;
    });
    REQUIRE_LAUNCH_ERROR(nested.launch({1}, {a, 8, 16}),
                         Contains("argument 'M' (i32 M = 16)") && Contains("to fit in the stride of dimension 2"));
    REQUIRE_LAUNCH_ERROR(nested.launch({1}, {a, 8, 4}), Contains(refused));
    // Strides of 2^40 bytes and more.
    Kernel huge = tmaKernel([](TensorMapSpec& m) { m.strides[1] = {1, int64_t{1} << 32, 0}; });
    REQUIRE_LAUNCH_ERROR(huge.launch({1}, {a, 128, 16}),
                         Contains("argument 'K' (i32 K = 128)") &&
                             Contains("needs a row stride below 2^40 bytes (4294967296*K = 549755813888 f16 = "
                                      "1099511627776 bytes)"));
  }
  SECTION("addresses") {
    Arg shifted(a);
    shifted.offset = 4;
    REQUIRE_LAUNCH_ERROR(k.launch({1}, {shifted, 64, 16}),
                         Equals("gemm: argument 'a' (ptr<f16> a, offset 4): the TMA tensor map of 'a' needs an "
                                "address that is a multiple of 16 bytes, but the offset of 4 f16 elements (8 bytes) "
                                "is not; pass an offset that is a multiple of 8 elements"));
    shifted.offset = 8;
    REQUIRE_LAUNCH_ERROR(k.launch({1}, {shifted, 64, 16}), Contains(refused));
    // Wrapped memory 2 bytes past an aligned address.
    alignas(64) static uint16_t host[1024];
    Buffer wrapped = cpu.wrap(reinterpret_cast<char*>(host) + 2, DType::F16, 1000);
    REQUIRE_LAUNCH_ERROR(k.launch({1}, {wrapped, 64, 8}),
                         Contains("argument 'a' (ptr<f16> a): the TMA tensor map of 'a' needs an address that is a "
                                  "multiple of 16 bytes, but the Buffer's memory is at 0x") &&
                             Contains("wrap memory aligned to 16 bytes"));
  }
  SECTION("dimensions") {
    REQUIRE_LAUNCH_ERROR(k.launch({1}, {a, 64, 0}),
                         Contains("argument 'M' (i32 M = 0): the TMA tensor map of 'a' needs every dimension in "
                                  "1..2^32, but dimension 1 is M = 0; TMA cannot describe an empty tensor"));
    REQUIRE_LAUNCH_ERROR(k.launch({1}, {a, -8, 16}),
                         Contains("argument 'K' (i32 K = -8)") && Contains("dimension 0 (the innermost) is K = -8"));
    Kernel big = tmaKernel([](TensorMapSpec& m) { m.dims[1] = {2, 1 << 20, 0}; });
    REQUIRE_LAUNCH_ERROR(big.launch({1}, {a, 64, 5000}),
                         Contains("dimension 1 is 1048576*M = 5242880000; split the tensor over several launches"));
    // An unbounded dimension (INT32_MAX) is a valid extent.
    Kernel unbounded = tmaKernel([](TensorMapSpec& m) { m.dims[1] = {-1, 1, INT32_MAX}; });
    REQUIRE_LAUNCH_ERROR(unbounded.launch({1}, {a, 64, 16}), Contains(refused));
  }
  SECTION("the box and the swizzle the kernel was compiled with") {
    REQUIRE_LAUNCH_ERROR(tmaKernel([](TensorMapSpec& m) { m.box[1] = 300; }).launch({1}, {a, 64, 16}),
                         Contains("argument 'a' (ptr<f16> a): the TMA tensor map of 'a' has a box of 300 elements "
                                  "in dimension 1, but box dimensions are 1..256"));
    REQUIRE_LAUNCH_ERROR(tmaKernel([](TensorMapSpec& m) {
                           m.box[0] = 12;
                           m.swizzleBytes = 0;
                         }).launch({1}, {a, 64, 16}),
                         Contains("has an innermost box of 12 f16 = 24 bytes, which must be a multiple of 16 bytes"));
    REQUIRE_LAUNCH_ERROR(tmaKernel([](TensorMapSpec& m) { m.swizzleBytes = 48; }).launch({1}, {a, 64, 16}),
                         Contains("asks for a swizzle of 48 bytes, but TMA swizzles 32, 64 or 128 bytes"));
    REQUIRE_LAUNCH_ERROR(tmaKernel([](TensorMapSpec& m) { m.swizzleBytes = 128; }).launch({1}, {a, 64, 16}),
                         Contains("asks for a swizzle of 128 bytes, but its innermost box is 64 bytes (32 f16)"));
    REQUIRE_LAUNCH_ERROR(tmaKernel([](TensorMapSpec& m) { m.swizzleBytes = 0; }).launch({1}, {a, 64, 16}),
                         Contains(refused));
  }
  SECTION("inconsistent signatures") {
    REQUIRE_LAUNCH_ERROR(tmaKernel([](TensorMapSpec& m) { m.rank = 4; }).launch({1}, {a, 64, 16}),
                         Contains("has rank 4, but tensor maps have rank 2 or 3"));
    REQUIRE_LAUNCH_ERROR(tmaKernel([](TensorMapSpec& m) { m.source = 1; }).launch({1}, {a, 64, 16}),
                         Contains("gemm: tensor map 0 of the kernel's signature reads argument 1, which is not a "
                                  "pointer argument"));
    REQUIRE_LAUNCH_ERROR(tmaKernel([](TensorMapSpec& m) { m.dims[0].arg = 7; }).launch({1}, {a, 64, 16}),
                         Contains("reads an extent from argument 7, which is not an integer scalar argument"));
    REQUIRE_LAUNCH_ERROR(tmaKernel([](TensorMapSpec& m) { m.dtype = DType::BF16; }).launch({1}, {a, 64, 16}),
                         Contains("the TMA tensor map of 'a' reads bf16 elements, but the Buffer holds"));
  }
}

// ---- thread-block clusters ---------------------------------------------------

namespace {

std::atomic<int64_t> gThreads{0};  // GPU threads an emulated no-op ran

/// The warp size of an emulator (Targets.def).
unsigned emuWarp(const Device& emu) {
  const std::string a = emu.arch();
  const bool amd = a.rfind("amdgpu:", 0) == 0;
  const GpuArch* g = findGpuArch(amd ? GpuArch::Vendor::AMD : GpuArch::Vendor::NVIDIA, a.substr(a.find(':') + 1));
  REQUIRE(g != nullptr);
  return g->warpSize;
}

/// A no-op EmulatedGpu kernel with the softmax signature, of blocks of one
/// warp, compiled for clusters of `cluster`.
Kernel emuNoop(const Device& emu, Dim3 cluster) {
  Binary bin;
  bin.format = Binary::Format::EmulatedGpu;
  bin.signature = softmax().signature();
  bin.emuThread = [](void* const*) { ++gThreads; };
  bin.emuAmd = emu.arch().rfind("amdgpu:", 0) == 0;
  bin.emuWarpSize = emuWarp(emu);
  bin.threadsPerBlock = bin.emuWarpSize;
  bin.cluster[0] = cluster.x, bin.cluster[1] = cluster.y, bin.cluster[2] = cluster.z;
  return emu.load(bin);
}

}  // namespace

TEST_CASE("clusters: the CPU and the emulators of architectures without them refuse them",
          "[runtime][launch][cluster]") {
  Device cpu = Device::cpu();
  Buffer out = cpu.alloc(DType::F32, 8), in = cpu.alloc(DType::F32, 8);
  Kernel k = softmax();
  LaunchOptions o;
  o.cluster = Dim3(2, 1, 1);
  gRuns = 0;
  REQUIRE_LAUNCH_ERROR(k.launch({4}, {out, in, 8}, o),
                       Equals("softmax: a cluster of {2, 1, 1} (2 blocks, from LaunchOptions::cluster) needs "
                              "thread-block clusters, which " +
                              cpu.name() +
                              " does not have; clusters run on CUDA devices of the targets nvptx:sm_90a, "
                              "nvptx:sm_100a, nvptx:sm_103a, nvptx:sm_120a and on Device::emulator of those "
                              "targets"));
  REQUIRE_LAUNCH_ERROR(k.residentPrograms(o), Contains("needs thread-block clusters"));
  o.cluster = Dim3(0, 1, 1);
  REQUIRE_LAUNCH_ERROR(k.launch({4}, {out, in, 8}, o),
                       Contains("softmax: LaunchOptions::cluster {0, 1, 1} has a dimension of 0"));
  CHECK(gRuns == 0);
  // A cluster of one block is no cluster: it runs anywhere.
  o.cluster = Dim3(1, 1, 1);
  k.launch({4}, {out, in, 8}, o);
  CHECK(gRuns == 4);
  CHECK(k.residentPrograms(o) == k.residentPrograms());

  // A binary compiled for clusters.
  Binary bin;
  bin.signature = k.signature();
  bin.hostEntry = &countingEntry;
  bin.cluster[1] = 2;
  REQUIRE_LAUNCH_ERROR(cpu.load(bin).launch({4, 2}, {out, in, 8}),
                       Contains("softmax: a cluster of {1, 2, 1} (2 blocks, compiled into the kernel) needs "
                                "thread-block clusters, which " +
                                cpu.name() + " does not have"));
  bin.cluster[1] = 0;
  REQUIRE_LAUNCH_ERROR(cpu.load(bin).launch({4}, {out, in, 8}),
                       Equals("softmax: the binary's cluster shape {1, 0, 1} has a dimension of 0; the kernel binary "
                              "is inconsistent, recompile it"));

  // The emulators of AMD GPUs (which run AMDGPU binaries only) and of NVIDIA
  // GPUs before sm_90.
  for (const char* arch : {"amdgpu:gfx942", "amdgpu:gfx1100", "nvptx:sm_80", "nvptx:sm_89"}) {
    INFO(arch);
    Device emu = Device::emulator(arch);
    Buffer eo = emu.alloc(DType::F32, 8), ei = emu.alloc(DType::F32, 8);
    gThreads = 0;
    REQUIRE_LAUNCH_ERROR(emuNoop(emu, Dim3(2)).launch({4}, {eo, ei, 8}),
                         Contains("softmax: a cluster of {2, 1, 1} (2 blocks, compiled into the kernel) needs "
                                  "thread-block clusters, which " +
                                  emu.name() + " does not have"));
    CHECK(gThreads == 0);
    emuNoop(emu, Dim3(1)).launch({4}, {eo, ei, 8});
    CHECK(gThreads == 4 * emuWarp(emu));
  }
}

TEST_CASE("clusters: an emulator of an architecture with them takes them, checked as on a GPU",
          "[runtime][launch][cluster]") {
  for (const char* arch : {"nvptx:sm_90a", "nvptx:sm_120a"}) {
    INFO(arch);
    Device emu = Device::emulator(arch);
    Buffer eo = emu.alloc(DType::F32, 8), ei = emu.alloc(DType::F32, 8);
    Kernel k = emuNoop(emu, Dim3(2));
    gThreads = 0;
    k.launch({4, 3}, {eo, ei, 8});
    CHECK(gThreads == 4 * 3 * 32);
    REQUIRE_LAUNCH_ERROR(
        k.launch({3}, {eo, ei, 8}),
        Contains("grid {3, 1, 1} is not a multiple of a cluster of {2, 1, 1}") && Contains("launch {4, 1, 1}"));
    LaunchOptions o;
    o.cluster = Dim3(3, 1, 1);
    REQUIRE_LAUNCH_ERROR(k.launch({6}, {eo, ei, 8}, o),
                         Contains("LaunchOptions::cluster {3, 1, 1} differs from the cluster shape {2, 1, 1}"));
    Kernel plain = emuNoop(emu, Dim3(1));
    o.cluster = Dim3(4, 2, 2);
    REQUIRE_LAUNCH_ERROR(plain.launch({4, 2, 2}, {eo, ei, 8}, o),
                         Equals("softmax: a cluster of {4, 2, 2} (16 blocks, from LaunchOptions::cluster) is too "
                                "large: " +
                                emu.name() + " runs clusters of at most 8 blocks (NVIDIA's portable cluster size)"));
    o.cluster = Dim3(2, 2, 2);
    gThreads = 0;
    plain.launch({4, 2, 2}, {eo, ei, 8}, o);
    CHECK(gThreads == 16 * 32);
    // One worker runs a whole cluster: the resident programs are whole
    // clusters on each worker.
    o.threads = 3;
    CHECK(plain.residentPrograms(o) == 3 * 8);
    CHECK(k.residentPrograms(LaunchOptions{3}) == 3 * 2);
    // TODO(emulator clusters): once the emulator's machine runs clusters,
    // launch a kernel here that stores the cluster shape it reads
    // (%cluster_nctaid) and check it is the one the launch forwarded in
    // emu::LaunchConfig::cluster, from the binary and from LaunchOptions.
  }
}

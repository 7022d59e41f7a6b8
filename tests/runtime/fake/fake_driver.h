// What the fake drivers (fake_cuda.cpp, fake_hip.cpp) record about a launch,
// read by tests/runtime/gpu_driver_test.cpp through dlsym.
#pragma once

#include <cstdint>

#define FAKE_EXPORT __attribute__((visibility("default")))

/// What the fake cuTensorMapEncodeTiled writes into a CUtensorMap's 128
/// bytes (the real one is opaque): its arguments, for the launch to pass on
/// and a test to read back.
struct FakeTensorMap {
  static constexpr uint64_t kMagic = 0x50414d54454b4146ull;  // "FAKETMAP"
  uint64_t magic;
  uint64_t address;
  uint64_t dims[5];     // globalDim
  uint64_t strides[4];  // globalStrides (bytes, dimensions 1..rank-1)
  uint16_t box[5];      // boxDim (<= 256)
  uint8_t elementStrides[5];
  uint8_t dataType, rank, interleave, swizzle, l2Promotion, oobFill;
};
static_assert(sizeof(FakeTensorMap) <= 128, "a tensor map is 128 bytes");

struct FakeLaunch {
  char kernel[64];
  int device;
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;
  int numParams;
  unsigned paramBytes[16];  // each parameter's width as the kernel declares it
  uint64_t params[16];      // its value, zero-extended from that width (0 for a tensor map)
  /// The 128-byte (.align 64 .b8 [128]) parameters, in order: tensor maps.
  int numTensorMaps;
  FakeTensorMap tensorMaps[4];
  /// 1 when it came through cuLaunchKernelEx, 0 through cuLaunchKernel.
  int launchEx;
  /// The CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION of a cuLaunchKernelEx;
  /// {0, 0, 0} without one.
  unsigned cluster[3];
};

// What the fake drivers (fake_cuda.cpp, fake_hip.cpp) record about a launch,
// read by tests/runtime/gpu_driver_test.cpp through dlsym.
#pragma once

#include <cstdint>

#define FAKE_EXPORT __attribute__((visibility("default")))

struct FakeLaunch {
  char kernel[64];
  int device;
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;
  int numParams;
  unsigned paramBytes[16];  // each parameter's width as the kernel declares it
  uint64_t params[16];      // its value, zero-extended from that width
};

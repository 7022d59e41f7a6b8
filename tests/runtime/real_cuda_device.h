// The tests that need a real CUDA device (tagged [hardware]): why the one
// here will not do -- none found, or `unfit`'s reason for device 0 -- or
// empty when it will. The caller prints the reason as its SKIP line.
// TESSERA_CUDA_LIBRARY must be unset (the fake driver is no device).
#pragma once

#include <functional>
#include <string>

#include "tessera/tessera.h"

namespace tessera::testing {

inline std::string whyNoCudaDevice(const std::function<std::string(const Device&)>& unfit) {
  try {
    return unfit(Device::cuda(0));
  } catch (const DeviceError& e) {
    return std::string("no CUDA device: ") + e.what();
  }
}

}  // namespace tessera::testing

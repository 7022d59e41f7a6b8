// The kernels the benchmark times, each with its inputs, its launch and a
// check against a plain C++ reference (a benchmark of a wrong kernel is
// worthless, so every figure is taken only after the check passes).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::bench {

struct Setup {
  std::function<void(const LaunchOptions&)> launch;
  std::function<bool()> check;
  double bytes = 0;  // bytes moved by one launch, for GB/s
};

struct MemoryBoundKernel {
  std::string name;
  std::function<Setup(const Device&, int64_t rows, int64_t cols)> setup;
};

const std::vector<MemoryBoundKernel>& memoryBoundKernels();
/// A kernel taking one pointer that does nothing: launch overhead.
Kernel emptyKernel();

}  // namespace tessera::bench

// The bundled kernels: every example registers its kernel, an input
// generator, a plain C++ reference and a check, so that the `tessera` tool
// (`list`, `compile`, `run`) and the test suite can drive all of them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::examples {

/// Outcome of running an example against its reference.
struct CheckResult {
  bool ok = false;
  double maxAbsError = 0;  // largest |got - want|
  double maxRelError = 0;  // largest |got - want| / max(|want|, 1e-30) over elements with |want| > tiny
  double tolerance = 0;    // the bound the check applied (documented per example)
  std::string detail;      // first mismatching index etc.
};

struct RunContext {
  Device device = Device::cpu();
  CompileOptions options;
  /// Problem size; empty = the example's default. Meaning is per example
  /// (e.g. {n} for vector_add, {rows, cols} for softmax).
  std::vector<int64_t> shape;
  uint64_t seed = 1;
  LaunchOptions launch;
};

struct Example {
  std::string name;
  std::string summary;
  /// The kernel with its default meta-parameters (for `tessera compile`).
  std::function<Kernel()> kernel;
  /// Generates inputs, compiles for ctx.device, launches, and checks the
  /// output against the plain C++ reference.
  std::function<CheckResult(const RunContext&)> run;
  /// Shapes the test suite runs (aligned and ragged).
  std::vector<std::vector<int64_t>> testShapes;
};

// The kernels, as functions of their meta-parameter BLOCK (the tile width),
// defined in examples/<name>.cpp. Arguments, in order:
Kernel vectorAdd(int BLOCK);  // out, a, b, n                     grid: ceil(n / BLOCK)
Kernel biasGelu(int BLOCK);   // out, x, bias, cols               grid: (rows, ceil(cols / BLOCK))
Kernel softmax(int BLOCK);    // out, in, cols                    grid: rows; BLOCK >= cols
Kernel layernorm(int BLOCK);  // y, mean, rstd, x, weight, bias, cols, eps   grid: rows; BLOCK >= cols
Kernel rmsnorm(int BLOCK);    // y, x, weight, cols, eps          grid: rows; BLOCK >= cols

// One function per example, defined in examples/<name>.cpp.
Example vectorAddExample();
Example biasGeluExample();
Example softmaxExample();
Example layernormExample();
Example rmsnormExample();

/// All bundled examples, in a stable order.
const std::vector<Example>& all();
/// nullptr if there is none of that name.
const Example* find(const std::string& name);

}  // namespace tessera::examples

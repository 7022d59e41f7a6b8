// What every example shares: deterministic inputs, the comparison against a
// reference, and the example program's main. Header-only because each
// example program links only its own source file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "registry.h"

namespace tessera::examples {

/// Deterministic values in [lo, hi).
inline std::vector<float> randomVector(size_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// |got - want| <= atol + rtol * |want| everywhere (NaN fails); reports the
/// largest errors and the first mismatch.
inline CheckResult compare(const std::vector<float>& got, const std::vector<double>& want, double atol, double rtol,
                           const char* what = "out") {
  CheckResult r;
  r.ok = got.size() == want.size();
  r.tolerance = rtol;
  if (!r.ok)
    r.detail = std::string(what) + ": " + std::to_string(got.size()) + " values, want " + std::to_string(want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= atol + rtol * std::fabs(want[i]))) {  // NaN-safe
      if (r.ok) r.detail = std::string(what) + ": first mismatch at " + std::to_string(i) + ": got " +
                           std::to_string(got[i]) + ", want " + std::to_string(want[i]);
      r.ok = false;
    }
    r.maxAbsError = std::max(r.maxAbsError, std::isnan(err) ? INFINITY : err);
    if (std::fabs(want[i]) > 1e-30) r.maxRelError = std::max(r.maxRelError, err / std::fabs(want[i]));
  }
  return r;
}

/// Merges the checks of several outputs.
inline CheckResult merge(CheckResult a, const CheckResult& b) {
  if (a.ok && !b.ok) a.detail = b.detail;
  a.ok = a.ok && b.ok;
  a.maxAbsError = std::max(a.maxAbsError, b.maxAbsError);
  a.maxRelError = std::max(a.maxRelError, b.maxRelError);
  return a;
}

/// The smallest power of two >= n: the tile width that holds a whole row.
inline int nextPow2(int64_t n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

/// {rows, cols} from the context, or the default {37, 1000}.
inline std::pair<int64_t, int64_t> rowsCols(const RunContext& ctx, const char* name) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{37, 1000} : ctx.shape;
  if (s.size() != 2 || s[0] < 1 || s[1] < 1 || s[0] > 65535 || s[1] > (1 << 20))
    throw Error(std::string(name) + ": the shape is {rows, cols} with 1 <= rows <= 65535, 1 <= cols <= 2^20");
  return {s[0], s[1]};
}

/// The main of an example program: `NAME [--dump] [shape...]` runs the
/// example on the CPU against its reference, prints the check, and with
/// --dump prints the default kernel's tile IR, optimised LLVM IR and host
/// assembly. Exit status: 0 match, 1 mismatch, 2 error.
inline int exampleMain(int argc, char** argv, const Example& example) {
  try {
    RunContext ctx;  // CPU device, default options
    bool dump = false;
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--dump") dump = true;
      else ctx.shape.push_back(std::stoll(argv[i]));
    }
    CheckResult r = example.run(ctx);
    std::printf("%s: max abs error %.3g, max rel error %.3g (tolerance %.3g): %s\n", example.name.c_str(),
                r.maxAbsError, r.maxRelError, r.tolerance, r.ok ? "PASS" : "FAIL");
    if (!r.ok) std::printf("  %s\n", r.detail.c_str());
    if (dump) {
      auto k = compile(example.kernel(), ctx.device, ctx.options);
      for (auto s : {Stage::TileIR, Stage::LLVMOptimized, Stage::Assembly})
        std::printf("==== %s ====\n%s\n", name(s), k.dump(s).c_str());
    }
    return r.ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}

}  // namespace tessera::examples

// Timing helpers of the GEMM benchmarks (gemm_bench, moe_bench,
// lowp_gemm_bench): timed runs reported as median [min, max] GFLOP/s, and
// the comma-separated lists of positive integers their flags take
// (`--blocks` among them).
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/CommandLine.h"
#include "registry.h"

namespace tessera::bench {

struct Stats {
  double median = 0, min = 0, max = 0;  // GFLOP/s; median 0: not measured
};

/// `reps` timed runs of `run` (after one untimed warm-up run when `warmUp`),
/// each doing `flops` floating-point operations.
template <class F>
Stats timeRuns(F&& run, int reps, double flops, bool warmUp = true) {
  using Clock = std::chrono::steady_clock;
  if (warmUp) run();
  std::vector<double> g;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    run();
    g.push_back(flops / std::chrono::duration<double>(Clock::now() - t0).count() * 1e-9);
  }
  std::sort(g.begin(), g.end());
  const size_t n = g.size();
  return {n % 2 ? g[n / 2] : 0.5 * (g[n / 2 - 1] + g[n / 2]), g.front(), g.back()};
}

/// "median [min, max]", or "-" when not measured.
inline std::string str(const Stats& s) {
  if (s.median == 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f [%.1f, %.1f]", s.median, s.min, s.max);
  return buf;
}

/// The positive integers `flag` lists ("1024,2048"), or `fallback` when absent.
inline std::vector<int> positiveInts(const tools::cli::Args& args, const char* flag, std::vector<int> fallback) {
  std::optional<std::vector<int64_t>> v = args.shape(flag);
  if (!v) return fallback;
  std::vector<int> r;
  for (int64_t x : *v) {
    if (x < 1 || x > INT32_MAX) args.fail(std::string(flag) + " expects positive integers, got " + std::to_string(x));
    r.push_back(static_cast<int>(x));
  }
  return r;
}

/// The GEMM blocks `--blocks M,N,K` gives, or `fallback` when absent.
inline examples::GemmBlocks blocksFlag(const tools::cli::Args& args, examples::GemmBlocks fallback) {
  if (!args.has("--blocks")) return fallback;
  std::vector<int> b = positiveInts(args, "--blocks", {});
  if (b.size() != 3) args.fail("--blocks expects M,N,K (three positive sizes)");
  return {b[0], b[1], b[2], fallback.stages};
}

}  // namespace tessera::bench

// Block-scaled GEMMs on the CPU: the decomposed ts::dot_scaled of the
// gemm_mxfp8, gemm_mxfp4 and gemm_nvfp4 examples against the same GEMM on
// bf16 operands (the gemm_bf16 example without activation: its bias add is
// one pass over C), in the same run, M = N = K, on the examples' CPU
// blocks (256 x 256 x 64).
//
// Each kernel's result is checked against its example's reference first;
// then one warm-up and `reps` timed launches, reported as median [min, max]
// in ms and GFLOP/s (2 M N K flops), and the ratio of each block-scaled
// GEMM's median time to bf16's (docs/dot_scaled.md: the decomposition
// decodes each tile once per K step next to the bf16 dot's work).
//
// Usage: tessera_mx_bench [--sizes 512,1024] [--threads 2] [--reps 7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "registry.h"

namespace ts = tessera;
namespace ex = tessera::examples;

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median = 0, min = 0, max = 0;  // ms
};

Stats stats(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return {n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]), ms.front(), ms.back()};
}

std::vector<int64_t> list(const std::string& s) {
  std::vector<int64_t> r;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');) r.push_back(std::stoll(x));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {512, 1024};
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  int reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--sizes")
      sizes = list(v);
    else if (a == "--threads")
      threads = unsigned(std::stoul(v));
    else if (a == "--reps")
      reps = std::max(1, std::stoi(v));
    else {
      std::fprintf(stderr, "usage: tessera_mx_bench [--sizes 512,1024] [--threads N] [--reps 7]\n");
      return 2;
    }
  }
  try {
    std::printf("block-scaled GEMMs (decomposed) vs bf16, CPU, %u threads, %d reps: median [min, max]\n", threads,
                reps);
    for (int64_t n : sizes) {
      double bf16Median = 0;
      for (const char* name : {"gemm_bf16", "gemm_mxfp8", "gemm_mxfp4", "gemm_nvfp4"}) {
        const ex::Example* e = ex::find(name);
        if (!e) throw ts::UsageError(std::string("no example ") + name);
        ex::RunContext ctx;
        ctx.shape = {n, n, n};
        if (std::string(name) == "gemm_bf16") ctx.shape.push_back(0);  // no activation
        ctx.launch.threads = threads;
        ex::Launch l = e->prepare(ctx);
        ts::CompiledKernel k = ts::compile(l.kernel, ctx.device, e->optionsFor(ctx));
        const ts::Dim3 grid = ex::launchGrid(l, k, ctx.launch);
        k.launchWith(grid, l.args, ctx.launch);
        const ex::CheckResult r = l.check();
        if (!r.ok) throw ts::Error(std::string(name) + ": wrong result: " + r.detail);
        std::vector<double> ms;
        for (int i = 0; i < reps; ++i) {
          const auto t0 = Clock::now();
          k.launchWith(grid, l.args, ctx.launch);
          ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        const Stats s = stats(ms);
        if (std::string(name) == "gemm_bf16") bf16Median = s.median;
        const double gflop = 2.0 * double(n) * double(n) * double(n) * 1e-9;
        std::printf("  %-11s %5lld^3  %8.2f ms [%8.2f, %8.2f]  %7.1f GFLOP/s  %.2fx bf16's time\n", name,
                    static_cast<long long>(n), s.median, s.min, s.max, gflop / (s.median * 1e-3),
                    s.median / bf16Median);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

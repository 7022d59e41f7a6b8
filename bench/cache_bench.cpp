// The persistent compile cache in fresh processes (docs/cache.md,
// "Figures"): how long a process takes from asking for a kernel to holding
// a launchable one, when the kernel is in the disk cache (a hit) and when it
// is not (a cold compile), measured in the same run.
//
//   cmake --build build --target tessera_cache_bench
//   build/bin/tessera_cache_bench [--runs N] [--dir DIR]
//
// For each workload it starts N processes of itself with an empty cache
// folder (cold) and N with the folder filled (hit), and prints the median,
// min and max of each. Each child times, with a steady clock:
//   compile  tessera::compile(kernel, device or target): the request to a
//            launchable kernel (CPU: linked into the JIT and loaded on the
//            CPU device; PTX: with a CUDA device, loaded into it, else the
//            PTX ready to load)
//   total    tracing the kernel (building its IR) plus compile
// and checks the CPU kernels' results on one launch. Not in the figures:
// the process's start and the device's creation (CUDA context).
// Run by hand; not part of the test suite.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/CommandLine.h"
#include "registry.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Clock = std::chrono::steady_clock;

namespace {

struct Workload {
  const char* name;     // as given to --child
  const char* example;  // the bundled kernel
  const char* target;   // "cpu" or a GPU target
};
const Workload kWorkloads[] = {
    {"cpu-softmax", "softmax", "cpu"},
    {"cpu-gemm_f32", "gemm_f32", "cpu"},
    {"ptx-softmax", "softmax", "nvptx:sm_90a"},
    {"ptx-gemm_f16", "gemm_f16", "nvptx:sm_90a"},
};

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// One child: trace, compile, check; prints "hit compile_us total_us where".
int child(const std::string& name) {
  const Workload* w = nullptr;
  for (const Workload& x : kWorkloads)
    if (name == x.name) w = &x;
  if (!w) return 2;
  const ts::examples::Example* ex = ts::examples::find(w->example);
  ts::Target target = ts::Target::parse(w->target);
  const bool gpu = target.kind != ts::Target::Kind::CPU;
  // The device first (not timed: a CUDA context costs far more than any
  // compile, and a program makes it once).
  bool haveCuda = false;
  ts::Device dev = ts::Device::cpu();
  if (gpu) {
    try {
      dev = ts::Device::cuda();
      haveCuda = dev.arch() == target.str();
    } catch (const ts::Error&) {
    }
  }
  const auto t0 = Clock::now();
  ts::Kernel k = gpu && ex->gpuKernel ? ex->gpuKernel(target) : ex->kernel();
  const auto t1 = Clock::now();
  ts::CompiledKernel ck = gpu && !haveCuda ? ts::compile(k, target) : ts::compile(k, dev);
  const auto t2 = Clock::now();
  if (!gpu) {
    // One launch, checked: the loaded kernel is the right one.
    ts::examples::RunContext ctx;
    ts::examples::CheckResult r = ex->run(ctx);
    if (!r.ok) {
      std::fprintf(stderr, "%s: wrong result\n", w->name);
      return 1;
    }
  }
  std::printf("%d %.1f %.1f %s\n", ck.fromDiskCache() ? 1 : 0, us(t2 - t1), us(t2 - t0),
              gpu ? (haveCuda ? "cuda-loaded" : "ptx-ready") : "cpu-loaded");
  return 0;
}

struct Run {
  bool hit;
  double compile, total;
  std::string where;
};

Run spawn(const std::string& self, const std::string& name, const std::string& dir) {
  std::string cmd = "TESSERA_CACHE_DIR='" + dir + "' '" + self + "' --child " + name;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot start " + cmd);
  char where[64] = {0};
  int hit = 0;
  Run r{};
  int n = std::fscanf(p, "%d %lf %lf %63s", &hit, &r.compile, &r.total, where);
  int rc = ::pclose(p);
  if (n != 4 || rc != 0) throw std::runtime_error("child " + name + " failed (" + cmd + ")");
  r.hit = hit != 0;
  r.where = where;
  return r;
}

struct Summary {
  double median, min, max;
};
Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {med, v.front(), v.back()};
}

}  // namespace

const tessera::tools::cli::Command kProgram{
    "tessera_cache_bench",
    "  tessera_cache_bench [--runs N] [--dir DIR]\n",
    {{"--runs", "a count of processes"}, {"--dir", "a folder for the cache"}},
    0,
    0,
    "",
    nullptr,
    [] {
      return std::string(
          "the persistent compile cache in fresh processes: per workload, N processes of itself with an\n"
          "empty cache folder (a cold compile) and N with it filled (a hit); median [min, max] ms\n"
          "  --runs N            processes per row (default 20)\n"
          "  --dir DIR           the cache folder used (default a new folder in the temporary directory)\n");
    }};

int main(int argc, char** argv) {
  // A child of the benchmark, started by itself: not a command line a user types.
  if (argc == 3 && std::string(argv[1]) == "--child") return child(argv[2]);
  const tessera::tools::cli::Args args = tessera::tools::cli::parseProgram(kProgram, argc, argv);
  const int runs = static_cast<int>(args.integer("--runs", "a count >= 1", 1, 1000000).value_or(20));
  const std::string dir = args.value(
      "--dir",
      (std::filesystem::temp_directory_path() / ("tessera_cache_bench." + std::to_string(::getpid()))).string());
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  std::printf("%d fresh processes per row; times in ms (median [min, max])\n", runs);
  std::printf("%-14s %-11s %-27s %-27s %-27s %s\n", "workload", "loaded", "cold compile()", "hit compile()",
              "hit trace+compile()", "entry");
  for (const Workload& w : kWorkloads) {
    std::vector<double> cold, hit, hitTotal;
    std::string where;
    for (int i = 0; i < runs; ++i) {
      std::filesystem::remove_all(dir);
      Run r = spawn(self, w.name, dir);
      if (r.hit) throw std::runtime_error("a cold run hit the cache");
      cold.push_back(r.compile / 1000);
    }
    // The folder now holds the entry (the last cold run wrote it).
    for (int i = 0; i < runs; ++i) {
      Run r = spawn(self, w.name, dir);
      if (!r.hit) throw std::runtime_error(std::string(w.name) + ": a warm run missed the cache");
      hit.push_back(r.compile / 1000);
      hitTotal.push_back(r.total / 1000);
      where = r.where;
    }
    uint64_t bytes = 0;
    for (auto& e : std::filesystem::recursive_directory_iterator(dir))
      if (e.is_regular_file()) bytes += e.file_size();
    auto cell = [](Summary s) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%7.3f [%.3f, %.3f]", s.median, s.min, s.max);
      return std::string(buf);
    };
    std::printf("%-14s %-11s %-27s %-27s %-27s %.1f KiB\n", w.name, where.c_str(), cell(summarize(cold)).c_str(),
                cell(summarize(hit)).c_str(), cell(summarize(hitTotal)).c_str(), double(bytes) / 1024);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}

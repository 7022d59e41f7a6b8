// GPU compile latency and resources of the bundled GEMM examples' default GPU
// configurations (examples/registry.cpp gemmDefaultBlocks: 32x32x32, 4 warps).
//
// The latency report is hidden ("[.report]"): wall-clock numbers depend on
// the machine and its load, so they are printed, never asserted. What is
// asserted: no register spills on sm_80 / sm_90a (ptxas) and no private
// segment on AMDGPU, tensor-core instructions in the PTX, and the -O0 path
// (no fixed pipeline, no skipped backend passes) still producing PTX that
// ptxas accepts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <map>
#include <cstdio>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "../../../codegen/gpu/GpuCompile.h"
#include "registry.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

bool havePtxas() {
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 || system("command -v ptxas >/dev/null 2>&1") == 0;
}

const ir::Function& gpuKernelOf(const std::string& example, const std::string& target) {
  // Kernels are traced once per process; the registry hands out the GPU
  // variant (gpuKernel) for GPU targets.
  static std::vector<std::pair<std::string, Kernel>> traced;
  for (auto& [name, k] : traced)
    if (name == example + "@" + target) return k.ir();
  const auto* ex = examples::find(example);
  REQUIRE(ex != nullptr);
  traced.emplace_back(example + "@" + target, examples::kernelFor(*ex, Target::parse(target)));
  return traced.back().second.ir();
}

std::shared_ptr<codegen::Artifact> compileExample(const std::string& example, const std::string& target,
                                                  int optLevel = 3) {
  codegen::CompileOptions o;
  o.optLevel = optLevel;
  return codegen::compile(gpuKernelOf(example, target), codegen::Target::parse(target), o);
}

struct Latency {
  double median = 0, min = 0;
  std::string stages;  // the compile-times log of the median run
};

// Cold compiles straight through codegen::compile (tile-IR passes, lowering,
// LLVM, PTX / object + link): no compile cache is involved. The first
// compile initialises LLVM's targets and is not counted.
Latency measure(const std::string& example, const std::string& target, int reps) {
  compileExample(example, target);
  std::vector<std::pair<double, std::string>> runs;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto art = compileExample(example, target);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    runs.emplace_back(ms, art->dumps.extra["compile-times"]);
  }
  std::sort(runs.begin(), runs.end(), [](auto& a, auto& b) { return a.first < b.first; });
  Latency l;
  l.median = runs[runs.size() / 2].first;
  l.min = runs.front().first;
  l.stages = runs[runs.size() / 2].second;
  std::replace(l.stages.begin(), l.stages.end(), '\n', ';');
  return l;
}

const char* kGemms[] = {"gemm_f16", "gemm_bf16"};
const char* kNvidia[] = {"nvptx:sm_80", "nvptx:sm_90a"};

}  // namespace

TEST_CASE("gpu compile: default f16/bf16 GEMM configs do not spill on sm_80 and sm_90a", "[gpu][latency]") {
  for (const char* ex : kGemms)
    for (const char* target : kNvidia) {
      INFO(ex << " on " << target);
      auto art = compileExample(ex, target);
      // The fixed pipeline must leave the tensor-core path intact: mma.sync
      // fed by ldmatrix, on sm_90a the warpgroup MMA (its default blocks).
      if (std::string(target) == "nvptx:sm_90a") {
        CHECK(art->binary.ptx.find("wgmma.mma_async.sync.aligned.m64n64k16") != std::string::npos);
      } else {
        CHECK(art->binary.ptx.find("mma.sync.aligned.m16n8k16") != std::string::npos);
        CHECK(art->binary.ptx.find("ldmatrix.sync.aligned") != std::string::npos);
      }
      CHECK(art->binary.sharedBytes > 0);
      if (!havePtxas()) {
        WARN("SKIPPED ptxas spill check for " << ex << " on " << target
                                              << ": ptxas not found in /usr/local/cuda/bin or on PATH");
        continue;
      }
      codegen::GpuResources r = codegen::gpuResources(*art);
      INFO(r.text);
      CHECK(r.registers > 0);
      CHECK(r.registers <= 255);
      CHECK(r.spillBytes == 0);
    }
}

TEST_CASE("gpu compile: default GEMM configs use no private segment on AMDGPU", "[gpu][latency]") {
  for (const char* ex : {"gemm_f16", "gemm_bf16", "gemm_f32"})
    for (const char* target : {"amdgpu:gfx90a", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
      INFO(ex << " on " << target);
      codegen::GpuResources r = codegen::gpuResources(*compileExample(ex, target));
      INFO(r.text);
      CHECK(r.registers > 0);
      CHECK(r.spillBytes == 0);
    }
}

TEST_CASE("gpu compile: every stage is timed and -O0 keeps LLVM's default pipeline", "[gpu][latency]") {
  auto art = compileExample("gemm_f16", "nvptx:sm_80");
  const std::string& log = art->dumps.extra["compile-times"];
  INFO(log);
  for (const char* stage : {"layout ", "lower ", "print-llvm ", "verify ", "optimize ", "print-opt ", "ptx "})
    CHECK(log.find(stage) != std::string::npos);
  // -O0: no short pipeline and no skipped backend passes; the result must
  // still be valid PTX with the same instructions.
  auto o0 = compileExample("gemm_f16", "nvptx:sm_80", 0);
  CHECK(o0->binary.ptx.find("mma.sync.aligned.m16n8k16") != std::string::npos);
  if (!havePtxas()) {
    WARN("SKIPPED ptxas check of the -O0 PTX: ptxas not found in /usr/local/cuda/bin or on PATH");
    return;
  }
  codegen::GpuResources r = codegen::gpuResources(*o0);
  INFO(r.text);
  CHECK(r.registers > 0);
}

// Each thread keeps its TargetMachine per configuration and reuses it
// (cachedGpuTargetMachine): nothing a compile leaves in it may change the
// next one's code, whatever came in between (another kernel, another
// optLevel, another architecture) and whichever thread compiles.
TEST_CASE("gpu compile: a reused TargetMachine gives the code of a fresh one", "[gpu][latency]") {
  for (const char* target : {"amdgpu:gfx942", "nvptx:sm_80"}) {
    INFO(target);
    auto code = [&](const std::shared_ptr<codegen::Artifact>& a) {
      return a->binary.ptx + std::string(a->binary.codeObject.begin(), a->binary.codeObject.end());
    };
    std::string first, other;
    for (const char* k : {"gemm_f16", "vector_add"}) gpuKernelOf(k, target);  // traced here, not in the threads
    gpuKernelOf("gemm_f16", "amdgpu:gfx1100");
    // A thread of its own: its first compile builds the TargetMachine.
    std::thread([&] { first = code(compileExample("gemm_f16", target)); }).join();
    REQUIRE(!first.empty());
    compileExample("vector_add", target);
    compileExample("gemm_f16", target, 0);
    compileExample("gemm_f16", "amdgpu:gfx1100");
    CHECK(code(compileExample("gemm_f16", target)) == first);
    std::thread t([&] { other = code(compileExample("gemm_f16", target)); });
    std::string here = code(compileExample("gemm_f16", target));
    t.join();
    CHECK(here == first);
    CHECK(other == first);
  }
}

// The code generator pipeline is kept per thread and TargetMachine
// (emitFileReusingPipeline): every example compiled after all the others,
// through the kept pipeline, must give the PTX / code object that a fresh
// pipeline gives (TESSERA_FRESH_CODEGEN=1). Interleaved kernels catch state
// a pass would carry from one module to the next.
TEST_CASE("gpu compile: a reused code generator pipeline gives the code of a fresh one", "[gpu][latency]") {
  const char* targets[] = {"nvptx:sm_80", "nvptx:sm_90a", "amdgpu:gfx942", "amdgpu:gfx1100"};
  auto code = [](const std::shared_ptr<codegen::Artifact>& a) {
    return a->binary.ptx + std::string(a->binary.codeObject.begin(), a->binary.codeObject.end());
  };
  std::vector<std::string> names;
  for (const auto& ex : examples::all()) names.push_back(ex.name);
  REQUIRE(names.size() >= 20);
  std::map<std::string, std::string> kept;
  ::unsetenv("TESSERA_FRESH_CODEGEN");
  for (const std::string& n : names)  // each target's pipeline sees every kernel in turn
    for (const char* t : targets) kept[n + "@" + t] = code(compileExample(n, t));
  ::setenv("TESSERA_FRESH_CODEGEN", "1", 1);
  int compared = 0;
  for (auto it = names.rbegin(); it != names.rend(); ++it)
    for (const char* t : targets) {
      INFO(*it << " on " << t);
      std::string fresh = code(compileExample(*it, t));
      REQUIRE(!fresh.empty());
      CHECK(fresh == kept[*it + "@" + t]);
      ++compared;
    }
  ::unsetenv("TESSERA_FRESH_CODEGEN");
  CHECK(compared == static_cast<int>(names.size() * std::size(targets)));
}

// Likewise the CPU compiles' object code (the X86 backend's pipeline, kept
// per thread since the emulator's compiles use it too): every example for
// the host and for x86-64-v3 (every supported host has AVX2), interleaved.
TEST_CASE("cpu compile: a reused code generator pipeline gives the code of a fresh one", "[cpu][latency]") {
  std::vector<std::string> names;
  for (const auto& ex : examples::all()) names.push_back(ex.name);
  REQUIRE(names.size() >= 20);
  const char* targets[] = {"cpu", "cpu:x86-64-v3"};
  auto object = [](const std::string& n, const char* t) {
    const auto* ex = examples::find(n);
    REQUIRE(ex != nullptr);
    Kernel k = examples::kernelFor(*ex, Target::parse(t));
    auto art = codegen::compile(k.ir(), codegen::Target::parse(t), codegen::CompileOptions{});
    return art->hostObject;
  };
  std::map<std::string, std::string> kept;
  ::unsetenv("TESSERA_FRESH_CODEGEN");
  for (const std::string& n : names)
    for (const char* t : targets) kept[n + "@" + t] = object(n, t);
  ::setenv("TESSERA_FRESH_CODEGEN", "1", 1);
  int compared = 0;
  for (auto it = names.rbegin(); it != names.rend(); ++it)
    for (const char* t : targets) {
      INFO(*it << " on " << t);
      std::string fresh = object(*it, t);
      REQUIRE(!fresh.empty());
      CHECK(fresh == kept[*it + "@" + t]);
      ++compared;
    }
  ::unsetenv("TESSERA_FRESH_CODEGEN");
  CHECK(compared == static_cast<int>(names.size() * std::size(targets)));
}

TEST_CASE("gpu compile: latency, registers, spills and shared memory of the default GEMM configs",
          "[gpu][latency][.report]") {
  const int reps = 7;
  bool ptxas = havePtxas();
  if (!ptxas) WARN("ptxas not found in /usr/local/cuda/bin or on PATH: NVPTX registers and spills not reported");
  for (const char* ex : {"gemm_f16", "gemm_bf16", "gemm_f32", "gemm_batched"})
    for (const char* target : {"nvptx:sm_80", "nvptx:sm_90a", "amdgpu:gfx90a", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
      auto art = compileExample(ex, target);
      Latency l = measure(ex, target, reps);
      char buf[512];
      std::string res;
      bool nvptx = std::string(target).rfind("nvptx", 0) == 0;
      if (!nvptx || ptxas) {
        codegen::GpuResources r = codegen::gpuResources(*art);
        // NVPTX declares its shared memory dynamic (the launch passes
        // Artifact::sharedBytes); ptxas reports only static shared memory.
        if (nvptx)
          std::snprintf(buf, sizeof buf, "regs %d, spill %lld B, shared %u B", r.registers,
                        static_cast<long long>(r.spillBytes), art->binary.sharedBytes);
        else
          std::snprintf(buf, sizeof buf, "vgprs %d, sgprs %d, private %lld B, lds %lld B", r.registers, r.sgprs,
                        static_cast<long long>(r.spillBytes), static_cast<long long>(r.sharedBytes));
        res = buf;
      }
      // Printed, not WARNed: Catch wraps WARN text at 80 columns, and one
      // line per configuration is what gets compared across changes.
      std::printf("%-13s %-15s compile median %6.1f ms (min %6.1f, %d cold runs)  %s\n    stages: %s\n", ex, target,
                  l.median, l.min, reps, res.c_str(), l.stages.c_str());
      std::fflush(stdout);
    }
}

// The in-memory compile cache (dsl/lib/Compile.cpp): keyed by the IR text,
// the target and the options; concurrent compiles of one kernel compile it
// once; a failed compile is not cached.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {
ts::Kernel scaleKernel(int BLOCK, float factor) {
  return ts::kernel("scale", {"out", "in", "n"}, [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto i = ts::program_id(0) * BLOCK + ts::arange(BLOCK);
    auto m = i < n;
    ts::store(out + i, ts::load(in + i, m) * factor, m);
  });
}
}  // namespace

TEST_CASE("concurrent compiles of one kernel compile it once", "[dsl][cache]") {
  ts::clearCache();
  ts::Kernel k = scaleKernel(256, 3.0f);
  const int kThreads = 8;
  std::vector<ts::CompiledKernel> results(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      results[t] = ts::compile(k, ts::Device::cpu());
    });
  for (auto& th : threads) th.join();
  ts::CacheStats s = ts::cacheStats();
  CHECK(s.misses == 1);
  CHECK(s.hits == kThreads - 1);
  for (int t = 1; t < kThreads; ++t) CHECK(&results[t].artifact() == &results[0].artifact());

  // Every handle runs the same, correct code.
  auto dev = ts::Device::cpu();
  std::vector<float> in(1000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) - 500.0f;
  auto din = dev.upload(ts::DType::F32, in);
  for (int t = 0; t < kThreads; t += 3) {
    auto dout = dev.alloc(ts::DType::F32, in.size());
    results[t].launch({4}, dout, din, int32_t(in.size()));
    auto out = dout.read<float>();
    for (size_t i = 0; i < in.size(); ++i) REQUIRE(out[i] == in[i] * 3.0f);
  }
}

TEST_CASE("the cache key separates IR, target and options", "[dsl][cache]") {
  ts::clearCache();
  auto dev = ts::Device::cpu();
  ts::compile(scaleKernel(256, 3.0f), dev);
  ts::compile(scaleKernel(256, 3.0f), dev);  // retraced, same text: a hit
  CHECK(ts::cacheStats().misses == 1);
  CHECK(ts::cacheStats().hits == 1);
  ts::compile(scaleKernel(256, 4.0f), dev);  // another constant: another kernel
  ts::compile(scaleKernel(128, 3.0f), dev);  // another tile
  ts::CompileOptions o2;
  o2.optLevel = 2;
  ts::compile(scaleKernel(256, 3.0f), dev, o2);                           // other options
  ts::compile(scaleKernel(256, 3.0f), ts::Target::parse("nvptx:sm_80"));  // other target
  CHECK(ts::cacheStats().misses == 5);
  CHECK(ts::cacheStats().hits == 1);
}

TEST_CASE("a failed compile is reported to every caller and not cached", "[dsl][cache]") {
  ts::clearCache();
  ts::Kernel k = scaleKernel(256, 3.0f);
  ts::CompileOptions bad;
  bad.optLevel = 9;
  CHECK_THROWS_AS(ts::compile(k, ts::Device::cpu(), bad), ts::CompileError);
  CHECK_THROWS_AS(ts::compile(k, ts::Device::cpu(), bad), ts::CompileError);
  CHECK(ts::cacheStats().misses == 2);  // retried, not served from the cache
}

TEST_CASE("TESSERA_DUMP_DIR writes every stage of a compile", "[dsl][dump]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("tessera_dump_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ::setenv("TESSERA_DUMP_DIR", dir.c_str(), 1);
  ts::clearCache();
  ts::compile(scaleKernel(64, 2.0f), ts::Device::cpu());
  ts::compile(scaleKernel(64, 2.0f), ts::Target::parse("amdgpu:gfx942"));
  ::unsetenv("TESSERA_DUMP_DIR");
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  auto has = [&](const std::string& s) {
    for (auto& n : names)
      if (n == s) return true;
    return false;
  };
  CHECK(has("scale.cpu.llvm.ll"));
  CHECK(has("scale.cpu.llvm-opt.ll"));
  CHECK(has("scale.cpu.asm.s"));
  CHECK(has("scale.cpu.tile-ir.00.input.tir"));
  CHECK(has("scale.amdgpu_gfx942.amdgcn.s"));
  CHECK(has("scale.amdgpu_gfx942.hsaco"));
  CHECK(fs::file_size(dir / "scale.cpu.asm.s") > 100);
  fs::remove_all(dir);
}

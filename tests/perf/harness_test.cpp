// The harness end to end. On the CPU only for sanity (counts, ordering,
// options honoured), never against a time: this must pass on a loaded
// 2-core machine. GPU timing is checked exactly on the fake CUDA driver,
// whose clock advances 1 ms per launch.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "registry.h"
#include "tessera/perf/Bench.h"
#include "tessera/tessera.h"

#ifdef TESSERA_FAKE_CUDA
#include "gpu_test_support.h"
#endif

namespace ts = tessera;
namespace ex = tessera::examples;
namespace perf = tessera::perf;
using Catch::Matchers::Contains;

TEST_CASE("harness: a CPU launch is repeated within the counts asked, its samples summarised", "[perf][harness]") {
  ex::RunContext ctx;
  ctx.shape = {5000};
  ex::Launch l = ex::find("vector_add")->prepare(ctx);
  ts::CompiledKernel k = ts::compile(l.kernel, ctx.device);

  perf::BenchOptions o;
  o.warmupSeconds = 0;
  o.minWarmup = 3;
  o.budgetSeconds = 60;  // never reached: maxReps stops first
  o.minReps = 1;
  o.maxReps = 25;
  perf::BenchResult r = perf::benchmark(k, l.grid, l.args, o);
  CHECK(r.samples.size() == 25);
  CHECK(r.warmupReps == 3);
  CHECK(r.stats.count == 25);
  CHECK(r.timing == "steady clock");
  CHECK(r.kernel == "vector_add");
  CHECK(r.grid == std::array<uint32_t, 3>{5, 1, 1});
  CHECK(r.stats.min > 0);
  CHECK((r.stats.min <= r.stats.q1 && r.stats.q1 <= r.stats.median && r.stats.median <= r.stats.q3 &&
         r.stats.q3 <= r.stats.max));
  CHECK(r.wallSeconds >= r.stats.min * 25);
  CHECK(r.overheadPerRep >= 0);
  CHECK(r.overheadPerRep < 0.05);  // sanity only; bench/ measures it properly
  CHECK(r.work.source == "ir");
  CHECK(r.work.bytes == 3 * 5000 * 4.0);
  CHECK(r.bytesPerSecond() == Approx(r.work.bytes / r.stats.median));
  CHECK(l.check().ok);  // repeated launches leave the right result

  SECTION("a zero budget still runs the minimum") {
    o.budgetSeconds = 0;
    o.minReps = 4;
    o.maxReps = 1000;
    CHECK(perf::benchmark(k, l.grid, l.args, o).samples.size() == 4);
  }
  SECTION("a flush writes an LLC-sized buffer between repetitions") {
    o.flushCache = true;
    o.maxReps = 3;
    perf::BenchResult f = perf::benchmark(k, l.grid, l.args, o);
    CHECK(f.flushed);
    CHECK(f.flushBytes == perf::hostLastLevelCacheBytes());
    CHECK(f.samples.size() == 3);
    o.flushBytes = 1 << 16;
    CHECK(perf::benchmark(k, l.grid, l.args, o).flushBytes == 1 << 16);
  }
  SECTION("declared work replaces the IR's") {
    o.maxReps = 2;
    perf::BenchResult d = perf::benchmark(k, l.grid, l.args, o, perf::Work{10, 20, "", {}});
    CHECK(d.work.source == "declared");
    CHECK(d.work.flops == 10);
  }
  SECTION("a kernel compiled for inspection cannot be benchmarked") {
    ts::CompiledKernel insp = ts::compile(l.kernel, ts::Target::parse("cpu"));
    CHECK_THROWS_WITH(perf::benchmark(insp, l.grid, l.args, o), Contains("compiled for inspection"));
  }
  SECTION("a launch error surfaces as the launch's own") {
    CHECK_THROWS_AS(perf::benchmark(k, l.grid, {l.args[0]}, o), ts::LaunchError);
  }
}

TEST_CASE("harness: any launch function can be timed, and its sizes come from the caller", "[perf][harness]") {
  int calls = 0;
  perf::BenchOptions o;
  o.warmupSeconds = 0;
  o.minWarmup = 2;
  o.minReps = 7;
  o.budgetSeconds = 0;
  perf::BenchResult r = perf::benchmark(ts::Device::cpu(), [&](const ts::LaunchOptions&) { ++calls; }, o);
  CHECK(calls == 9);
  CHECK(r.samples.size() == 7);
  CHECK(r.work.flops == 0);
  CHECK(r.flopsPerSecond() == 0);
  CHECK_THROWS_AS(perf::benchmark(ts::Device::cpu(), perf::LaunchFn{}, o), ts::UsageError);
}

#ifdef TESSERA_FAKE_CUDA
TEST_CASE("harness: GPU repetitions are timed by events on the device's clock", "[perf][harness][fake]") {
  ts::rt::testing::EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  ts::Device dev = ts::Device::cuda(0);
  ts::rt::Kernel k = dev.load(ts::rt::testing::vaddBinary(4));
  ts::Buffer a = dev.alloc(ts::DType::F32, 8), b = dev.alloc(ts::DType::F32, 8), out = dev.alloc(ts::DType::F32, 8);
  perf::BenchOptions o;
  o.warmupSeconds = 0;
  o.minWarmup = 1;
  o.minReps = 1;
  o.maxReps = 70;  // more than one batch of events
  o.budgetSeconds = 60;
  int launches = 0;
  auto launch = [&](const ts::LaunchOptions& lo) {
    CHECK(!lo.stream.isNull());  // queued on a stream, timed by its events
    k.launch({2}, {a, b, out, int32_t(8)}, lo);
    ++launches;
  };
  perf::BenchResult r = perf::benchmark(dev, launch, o);
  CHECK(r.timing == "device events");
  CHECK(launches == 71);
  REQUIRE(r.samples.size() == 70);
  // The fake clock advances 1 ms per launch: each repetition measures exactly that.
  CHECK(r.stats.min == Approx(1e-3));
  CHECK(r.stats.max == Approx(1e-3));
  CHECK(r.stats.iqr() == Approx(0).margin(1e-12));
  SECTION("a flush fills an L2-sized buffer of the arch's machines (A100 for sm_80) through the runtime") {
    o.flushCache = true;
    o.maxReps = 3;
    perf::BenchResult f = perf::benchmark(dev, launch, o);
    CHECK(f.flushBytes == 40ull << 20);
    CHECK(f.stats.median == Approx(1e-3));  // the fill is no launch: not in the timed interval
  }
}
#endif

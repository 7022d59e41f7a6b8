// The autotuner (tessera/perf/Tune.h) on tiny GEMMs: pruning and its
// reasons, the choice (always a config whose answer checks), the store
// (incremental, reused), and deployable tables. Nothing here depends on
// which config is fastest: only on which configs are valid.
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <map>

#include "../env_guard.h"
#include "registry.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/perf/Tune.h"
#include "tessera/perf/TuneTable.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;
namespace perf = tessera::perf;
using Catch::Matchers::Contains;

namespace {

// A fresh store folder for one test, in force until the end of the test.
struct FreshStore {
  explicit FreshStore(const std::string& name) {
    dir = std::string(TESSERA_BINARY_DIR) + "/tune-test/" + name;
    std::filesystem::remove_all(dir);
    ts::codegen::DiskCacheSettings s;
    s.dir = dir;
    ts::codegen::setDiskCacheSettings(s);
  }
  ~FreshStore() { ts::codegen::resetDiskCacheSettings(); }
  std::string dir;
};

perf::TuneOptions quick() {
  perf::TuneOptions o;
  o.quiet = true;
  o.bench.warmupSeconds = 0;
  o.bench.budgetSeconds = 0;
  o.bench.minReps = 2;
  return o;
}

// gemm_f32 at a tiny shape with `space`: the example's own problem.
perf::TuneProblem gemmProblem(std::vector<int64_t> shape, perf::TuneSpace space) {
  ex::RunContext ctx;
  ctx.shape = std::move(shape);
  perf::TuneProblem p = ex::tuneProblem(*ex::find("gemm_f32"), ctx);
  p.space = std::move(space);
  return p;
}

size_t countStatus(const perf::TuneResult& r, perf::TuneStatus s) {
  size_t n = 0;
  for (const auto& c : r.candidates) n += c.status == s;
  return n;
}

}  // namespace

TEST_CASE("tune: spaces, configs and shape buckets", "[perf][tune]") {
  perf::TuneSpace s;
  s.param("A", {1, 2, 3}).param("B", {10, 20});
  auto c = s.candidates();
  REQUIRE(c.size() == 6);
  CHECK(c[0].str() == "A=1,B=10");
  CHECK(c[1].str() == "A=1,B=20");
  CHECK(c[5].str() == "A=3,B=20");
  CHECK(perf::TuneConfig::parse(c[3].str()) == c[3]);
  CHECK(c[3].get("B") == 20);
  CHECK(c[3].getOr("C", 7) == 7);
  CHECK_THROWS_WITH(c[3].get("C"), Contains("has no parameter 'C'") && Contains("A, B"));
  CHECK_THROWS_AS(s.param("A", {4}), ts::UsageError);
  CHECK_THROWS_AS(s.param("C", {}), ts::UsageError);
  CHECK_THROWS_AS(s.param("D", {1, 1}), ts::UsageError);
  CHECK_THROWS_AS(perf::TuneConfig::parse("A=1,A=2"), ts::UsageError);
  CHECK_THROWS_AS(perf::TuneConfig::parse("A=x"), ts::UsageError);
  s.constrain("A is odd", [](const perf::TuneConfig& x) { return x.get("A") % 2 == 1; });
  CHECK(s.violated(c[0]).empty());
  CHECK(s.violated(c[2]) == std::vector<std::string>{"A is odd"});

  CHECK(perf::shapeBucket({300, 200, 150, 2}) == "512x256x256x2");
  CHECK(perf::shapeBucket({0, 1, 3, 64}) == "0x1x4x64");
}

TEST_CASE("tune: a space whose every config violates a constraint raises TuneError naming each", "[perf][tune]") {
  FreshStore store("constraints");
  perf::TuneSpace s;
  s.param("BLOCK_M", {16, 32}).param("BLOCK_N", {16, 32});
  s.constrain("BLOCK_M * BLOCK_N >= 4096",
              [](const perf::TuneConfig& c) { return c.get("BLOCK_M") * c.get("BLOCK_N") >= 4096; });
  perf::TuneProblem p = gemmProblem({32, 32, 32, 0}, s);
  try {
    perf::tune(p, quick());
    FAIL("expected TuneError");
  } catch (const perf::TuneError& e) {
    std::string m = e.what();
    for (const char* cfg :
         {"BLOCK_M=16,BLOCK_N=16", "BLOCK_M=16,BLOCK_N=32", "BLOCK_M=32,BLOCK_N=16", "BLOCK_M=32,BLOCK_N=32"})
      CHECK_THAT(m, Contains(std::string(cfg) + ": constraint: violates BLOCK_M * BLOCK_N >= 4096"));
    CHECK(e.result.candidates.size() == 4);
    CHECK(e.result.pruned == 4);
    CHECK(e.result.measured == 0);
  }
}

TEST_CASE("tune: configs over an emulated GPU's shared memory are pruned by the compiler before anything runs",
          "[perf][tune]") {
  FreshStore store("shared_memory");
  ex::RunContext ctx;
  ctx.device = ts::Device::emulator("nvptx:sm_80");
  ctx.shape = {64, 64, 64, 0};
  perf::TuneProblem p = ex::tuneProblem(*ex::find("gemm_f16"), ctx);
  // 4 stages of a 64 x 256 and a 256 x 64 f16 tile: 256 KiB, over sm_80's
  // 163 KiB per block (and far more with BLOCK_K = 512).
  perf::TuneSpace s;
  s.param("BLOCK_M", {64}).param("BLOCK_N", {64}).param("BLOCK_K", {256, 512}).param("STAGES", {4, 6});
  p.space = s;
  try {
    perf::tune(p, quick());
    FAIL("expected TuneError");
  } catch (const perf::TuneError& e) {
    std::string m = e.what();
    INFO(m);
    REQUIRE(e.result.candidates.size() == 4);
    for (const auto& c : e.result.candidates) {
      CHECK(c.status == perf::TuneStatus::Resources);
      CHECK_THAT(c.reason, Contains("shared memory"));
      CHECK_THAT(m, Contains(c.config.str() + ": resources: "));
    }
    CHECK(e.result.measured == 0);
  }
}

TEST_CASE("tune: the chosen config checks against the reference, a wrong one is never chosen", "[perf][tune]") {
  FreshStore store("choice");
  perf::TuneSpace s;
  s.param("BLOCK_M", {16, 32}).param("bug", {0, 1});
  perf::TuneProblem p = gemmProblem({48, 40, 24, 0}, s);
  // bug = 1: the kernel applies a ReLU the reference (act 0) does not have.
  perf::TunePrepareFn good = p.prepare;
  p.prepare = [good](const perf::TuneConfig& c) {
    perf::TuneCandidate cand = good(c);
    if (c.get("bug")) {
      ex::GemmBlocks b;
      b.m = static_cast<int>(c.get("BLOCK_M"));
      cand.kernel = ex::gemmF32(b, ex::Activation::ReLU);
    }
    return cand;
  };
  perf::TuneResult r = perf::tune(p, quick());
  REQUIRE(r.bestConfig());
  CHECK(r.bestConfig()->get("bug") == 0);
  CHECK(countStatus(r, perf::TuneStatus::Wrong) == 2);
  CHECK(countStatus(r, perf::TuneStatus::Measured) == 2);
  for (const auto& c : r.candidates) {
    if (c.config.get("bug")) CHECK_THAT(c.reason, Contains("differs from the reference"));
    if (c.valid()) CHECK(c.seconds > 0);
  }
  // The chosen config, run as the example with it, passes its check.
  ex::RunContext ctx;
  ctx.shape = {48, 40, 24, 0};
  ctx.config = *r.bestConfig();
  ctx.config->values.pop_back();  // "bug" is the test's, not the example's
  CHECK(ex::find("gemm_f32")->run(ctx).ok);
  CHECK_THAT(perf::formatTuneTable(r), Contains("wrong-answer") && Contains("best"));
}

TEST_CASE("tune: stored results are reused, and a grown space measures only its new configs", "[perf][tune]") {
  FreshStore store("incremental");
  perf::TuneSpace s;
  s.param("BLOCK_M", {16, 32}).param("BLOCK_N", {64});
  perf::TuneResult r1 = perf::tune(gemmProblem({32, 64, 16, 0}, s), quick());
  CHECK(r1.measured == 2);
  CHECK(r1.reused == 0);

  perf::TuneSpace grown;
  grown.param("BLOCK_M", {16, 32, 64}).param("BLOCK_N", {64});
  perf::TuneResult r2 = perf::tune(gemmProblem({32, 64, 16, 0}, grown), quick());
  CHECK(r2.measured == 1);
  CHECK(r2.reused == 2);
  CHECK(r2.candidates[2].config.get("BLOCK_M") == 64);
  CHECK_FALSE(r2.candidates[2].fromStore);
  CHECK(r2.candidates[0].fromStore);
  CHECK(r2.candidates[0].seconds == r1.candidates[0].seconds);  // the stored measurement, not a new one

  // Another shape of the same bucket reuses everything; another bucket does not.
  CHECK(perf::tune(gemmProblem({30, 50, 9, 0}, grown), quick()).measured == 0);
  CHECK(perf::tune(gemmProblem({33, 64, 16, 0}, grown), quick()).measured == 3);
  // --retune measures all again.
  perf::TuneOptions again = quick();
  again.retune = true;
  CHECK(perf::tune(gemmProblem({32, 64, 16, 0}, grown), again).measured == 3);
  // A launch thread count of its own is another device for the key.
  perf::TuneOptions oneThread = quick();
  oneThread.bench.launch.threads = 1;
  perf::TuneResult single = perf::tune(gemmProblem({32, 64, 16, 0}, grown), oneThread);
  CHECK(single.measured == 3);
  CHECK_THAT(single.device, Contains(", launched with 1 thread"));
  // Without a store nothing is kept: every run measures.
  ts::codegen::DiskCacheSettings off;
  off.enabled = false;
  ts::codegen::setDiskCacheSettings(off);
  CHECK(perf::tune(gemmProblem({32, 64, 16, 0}, s), quick()).measured == 2);
}

TEST_CASE("tune: results are keyed by the kernel's code, so an edited kernel is tuned again", "[perf][tune]") {
  FreshStore store("code");
  // The examples' problems carry the fingerprint of their default kernel.
  perf::TuneProblem p =
      gemmProblem({32, 64, 16, 0}, perf::TuneSpace().param("BLOCK_M", {16, 32}).param("BLOCK_N", {64}));
  CHECK(p.code.size() == 16);
  CHECK(p.code == perf::codeFingerprint(ex::kernelFor(*ex::find("gemm_f32"), ts::Target::parse("cpu"))));
  CHECK(p.code != perf::codeFingerprint(ex::find("gemm_f16")->kernel()));
  perf::TuneResult first = perf::tune(p, quick());
  CHECK(first.measured == 2);
  CHECK(perf::tune(p, quick()).measured == 0);
  // The same name with other code (an edited kernel): nothing is reused,
  // and a table for the new code holds only its own results.
  perf::TuneProblem edited = p;
  edited.code = perf::codeFingerprint(ex::find("softmax")->kernel());
  perf::TuneResult second = perf::tune(edited, quick());
  CHECK(second.measured == 2);
  CHECK(second.reused == 0);
  CHECK(perf::TuneTable::fromStore("gemm_f32").entries.size() == 1);  // best of both codes, one key
  perf::TuneTable forEdited = perf::TuneTable::fromStore("gemm_f32", edited.code);
  REQUIRE(forEdited.entries.size() == 1);
  CHECK(forEdited.entries[0].seconds == second.candidates[*second.best].seconds);
  CHECK(perf::TuneTable::fromStore("gemm_f32", "0000000000000000").entries.empty());
}

TEST_CASE("tune table: exported from the store, read back, and a config picked per shape", "[perf][tune]") {
  FreshStore store("table");
  perf::TuneSpace s;
  s.param("BLOCK_M", {16, 32}).param("BLOCK_N", {64});
  perf::TuneResult small = perf::tune(gemmProblem({16, 64, 16, 0}, s), quick());
  perf::TuneResult large = perf::tune(gemmProblem({100, 64, 16, 0}, s), quick());
  const std::string dev = perf::tuneDeviceKey(ts::Device::cpu());

  perf::TuneTable t = perf::TuneTable::fromStore("gemm_f32");
  REQUIRE(t.entries.size() == 2);
  perf::TuneTable back = perf::TuneTable::fromJson(t.toJson(), "table.json");
  REQUIRE(back.entries.size() == 2);
  CHECK(back.pick("gemm_f32", {12, 40, 9, 0}, "f32", dev) == *small.bestConfig());
  CHECK(back.pick("gemm_f32", {128, 64, 16, 0}, "f32", dev) == *large.bestConfig());
  const perf::TuneTableEntry* e = back.find("gemm_f32", {16, 64, 16, 0}, "f32", dev);
  REQUIRE(e);
  CHECK(e->bucket == "16x64x16x0");
  CHECK(e->seconds == small.candidates[*small.best].seconds);

  // Absent: an error naming what the table has, or the fallback.
  CHECK_THROWS_WITH(back.pick("gemm_f32", {1000, 64, 16, 0}, "f32", dev),
                    Contains("no config for gemm_f32 at bucket 1024x64x16x0") && Contains("16x64x16x0"));
  CHECK_THROWS_AS(back.pick("gemm_f32", {16, 64, 16, 0}, "f16", dev), ts::UsageError);
  perf::TuneConfig fallback = perf::TuneConfig::parse("BLOCK_M=8");
  CHECK(back.pick("gemm_f32", {1000, 64, 16, 0}, "f32", dev, fallback) == fallback);

  // Files, and malformed tables.
  std::string path = store.dir + "/table.json";
  back.save(path);
  CHECK(perf::TuneTable::load(path).entries.size() == 2);
  CHECK_THROWS_WITH(perf::TuneTable::load(store.dir + "/none.json"), Contains("cannot read"));
  CHECK_THROWS_WITH(perf::TuneTable::fromJson("{\"format\": \"x\"}", "t.json"), Contains("t.json: not a tune table"));
  CHECK_THROWS_WITH(perf::TuneTable::fromJson("{\"format\": \"tessera-tune-table\", \"version\": 1, \"entries\": "
                                              "[{\"kernel\": \"k\", \"bucket\": \"1\", \"dtype\": \"f32\", "
                                              "\"device\": \"d\", \"config\": {\"A\": 1.5}}]}",
                                              "t.json"),
                    Contains("entries[0].config.A must be an integer"));
  CHECK_THROWS_AS(perf::TuneTable::fromJson("{", "t.json"), ts::UsageError);
}

TEST_CASE("tune: softmax's constraint prunes tiles narrower than the row, which give wrong answers", "[perf][tune]") {
  FreshStore store("softmax");
  ex::RunContext ctx;
  ctx.shape = {3, 600};
  perf::TuneProblem p = ex::tuneProblem(*ex::find("softmax"), ctx);
  perf::TuneResult r = perf::tune(p, quick());
  REQUIRE(r.candidates.size() == 7);  // BLOCK 256 .. 16384
  for (const auto& c : r.candidates) {
    const int64_t block = c.config.get("BLOCK");
    INFO(c.config.str() << ": " << c.reason);
    CHECK(c.valid() == (block >= 600 && block <= 4096));
  }
  CHECK_THAT(r.candidates[0].reason, Contains("violates BLOCK >= cols (600)"));
  // Without the constraint, the narrow tiles run and fail the check.
  p.space.constraints.clear();
  perf::TuneResult all = perf::tune(p, quick());
  CHECK(all.candidates[0].status == perf::TuneStatus::Wrong);
  CHECK(all.candidates[1].status == perf::TuneStatus::Wrong);
  CHECK(all.bestConfig()->get("BLOCK") >= 600);
}

namespace {

// out = 2 * in, BLOCK lanes per program, each program repeating its work
// `spin` times: a kernel whose speed a test sets per config.
ts::Kernel spinScale(int block) {
  return ts::kernel("tune_spin_scale", {"out", "in", "n", "spin"},
                    [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n, ts::Int spin) {
                      auto i = ts::program_id(0) * block + ts::arange(block);
                      auto x = ts::load(in + i, i < n);
                      auto y = ts::for_range(0, spin, 1, x,
                                             [&](ts::Int, ts::Tensor acc) { return acc * 0.5f + acc * 0.5f; });
                      ts::store(out + i, 2.0f * y, i < n);
                    });
}

// BLOCK in {64, 128, 256, 512}, 64 pruned by a constraint: the first valid
// config is BLOCK=128. `spinOf(block)` sets each config's work per launch.
perf::TuneProblem spinProblem(std::function<int(int)> spinOf) {
  const int n = 4096;
  perf::TuneProblem p;
  p.kernel = "tune_spin_scale";
  p.shape = {n};
  p.dtype = "f32";
  p.device = ts::Device::cpu();
  p.space.param("BLOCK", {64, 128, 256, 512});
  p.space.constrain("BLOCK >= 128", [](const perf::TuneConfig& c) { return c.get("BLOCK") >= 128; });
  p.prepare = [n, spinOf](const perf::TuneConfig& c) {
    const int block = static_cast<int>(c.get("BLOCK"));
    ts::Device dev = ts::Device::cpu();
    perf::TuneCandidate cand;
    cand.kernel = spinScale(block);
    ts::Buffer in = dev.upload(ts::DType::F32, std::vector<float>(n, 1.5f));
    ts::Buffer out = dev.alloc(ts::DType::F32, n);
    cand.grid = ts::Dim3(static_cast<uint32_t>(n / block));
    cand.args = {out, in, int32_t(n), int32_t(spinOf(block))};
    cand.check = [out](std::string& why) {
      for (float x : out.read<float>())
        if (x != 3.0f) {
          why = "an element is not 2 * 1.5";
          return false;
        }
      return true;
    };
    return cand;
  };
  return p;
}

// A measurement that changes from run to run: the performance model's hook
// with a time per config (told apart by the grid: 4096 / BLOCK programs)
// that the test sets before each run.
struct NoisyTimes {
  std::map<int64_t, double> seconds;  // by BLOCK
  perf::TuneOptions options() {
    perf::TuneOptions o;
    o.quiet = true;
    o.predictTarget = ts::Target::parse("cpu");
    o.predictKey = "noisy timer";
    o.predict = [this](const ts::codegen::Artifact&, const perf::TuneCandidate& c) {
      return seconds.at(4096 / c.grid.x);
    };
    return o;
  }
};

}  // namespace

TEST_CASE("tune: deterministic mode pins the choice per key, whatever later measurements say", "[perf][tune]") {
  FreshStore store("deterministic");
  ts::testing::EnvGuard unset("TESSERA_DETERMINISTIC", nullptr);
  perf::TuneProblem p = spinProblem([](int) { return 1; });
  NoisyTimes noise;
  perf::TuneOptions det = noise.options();
  det.deterministic = true;

  // The first deterministic run: BLOCK=512 measures fastest, and is pinned.
  noise.seconds = {{128, 3e-3}, {256, 2e-3}, {512, 1e-3}};
  perf::TuneResult first = perf::tune(p, det);
  REQUIRE(first.bestConfig());
  CHECK(first.bestConfig()->get("BLOCK") == 512);
  CHECK(first.choice == perf::TuneChoice::Recorded);
  CHECK(first.measured == 3);
  CHECK_THAT(perf::formatTuneTable(first), Contains("best, pinned (deterministic)"));
  REQUIRE(perf::loadTunePin(first));
  CHECK(*perf::loadTunePin(first) == *first.bestConfig());

  // The timings flip, and a run that is not deterministic measures them
  // again (the store now says BLOCK=256 is fastest; which config that run
  // chooses is its own business).
  noise.seconds = {{128, 3e-3}, {256, 1e-3}, {512, 2e-3}};
  perf::TuneOptions free = noise.options();
  free.retune = true;
  perf::TuneResult remeasured = perf::tune(p, free);
  CHECK(remeasured.choice == perf::TuneChoice::Fastest);
  CHECK(remeasured.candidates[2].seconds < remeasured.candidates[3].seconds);  // the noise took effect

  // Deterministic runs keep the pinned BLOCK=512, timing nothing: through
  // the option and through TESSERA_DETERMINISTIC.
  noise.seconds = {{128, 1e-3}, {256, 2e-3}, {512, 3e-3}};
  perf::TuneResult second = perf::tune(p, det);
  CHECK(second.bestConfig()->get("BLOCK") == 512);
  CHECK(second.choice == perf::TuneChoice::Pinned);
  CHECK(second.measured == 0);
  CHECK_THAT(perf::formatTuneTable(second), Contains("pinned (deterministic)"));
  {
    ts::testing::EnvGuard on("TESSERA_DETERMINISTIC", "1");
    perf::TuneResult third = perf::tune(p, noise.options());
    CHECK(third.bestConfig()->get("BLOCK") == 512);
    CHECK(third.choice == perf::TuneChoice::Pinned);
    // The deployed choice follows the pin.
    perf::TuneTable pinned = perf::TuneTable::fromStore("tune_spin_scale");
    REQUIRE(pinned.entries.size() == 1);
    CHECK(pinned.entries[0].config.get("BLOCK") == 512);
  }
  {
    // TESSERA_DETERMINISTIC=0 wins over the option: the store's fastest.
    ts::testing::EnvGuard off("TESSERA_DETERMINISTIC", "0");
    CHECK_FALSE(perf::tuneDeterministic(det));
    perf::TuneTable fastest = perf::TuneTable::fromStore("tune_spin_scale");
    REQUIRE(fastest.entries.size() == 1);
    CHECK(fastest.entries[0].config.get("BLOCK") == 256);
  }
  {
    ts::testing::EnvGuard bad("TESSERA_DETERMINISTIC", "yes");
    CHECK_THROWS_AS(perf::tuneDeterministic(det), ts::UsageError);
  }

  // A new config in the space does not unpin: it is skipped, not measured.
  perf::TuneProblem grown = p;
  grown.space = perf::TuneSpace();
  grown.space.param("BLOCK", {64, 128, 256, 512, 1024});
  grown.space.constrain("BLOCK >= 128", [](const perf::TuneConfig& c) { return c.get("BLOCK") >= 128; });
  noise.seconds[1024] = 1e-4;
  perf::TuneResult withNew = perf::tune(grown, det);
  CHECK(withNew.bestConfig()->get("BLOCK") == 512);
  CHECK(withNew.measured == 0);
  CHECK(withNew.candidates[4].status == perf::TuneStatus::Skipped);

  // --retune in deterministic mode chooses again: the new fastest is pinned.
  det.retune = true;
  perf::TuneResult retuned = perf::tune(p, det);
  CHECK(retuned.bestConfig()->get("BLOCK") == 128);
  CHECK(retuned.choice == perf::TuneChoice::Recorded);
  det.retune = false;
  CHECK(perf::tune(p, det).bestConfig()->get("BLOCK") == 128);
}

TEST_CASE("tune: deterministic mode without a store chooses the space's first valid config", "[perf][tune]") {
  FreshStore store("deterministic_no_store");
  ts::testing::EnvGuard unset("TESSERA_DETERMINISTIC", nullptr);
  ts::codegen::DiskCacheSettings off;
  off.enabled = false;
  ts::codegen::setDiskCacheSettings(off);
  NoisyTimes noise;
  perf::TuneOptions det = noise.options();
  det.deterministic = true;
  for (int run = 0; run < 2; ++run) {
    // Each run measures afresh with other times; BLOCK=64 is pruned.
    noise.seconds = run == 0 ? std::map<int64_t, double>{{128, 3e-3}, {256, 2e-3}, {512, 1e-3}}
                             : std::map<int64_t, double>{{128, 2e-3}, {256, 1e-3}, {512, 3e-3}};
    perf::TuneResult r = perf::tune(spinProblem([](int) { return 1; }), det);
    CHECK(r.measured == 3);
    CHECK(r.bestConfig()->get("BLOCK") == 128);
    CHECK(r.choice == perf::TuneChoice::FirstValid);
    CHECK_THAT(perf::formatTuneTable(r), Contains("first valid config"));
  }

  // The same with real timings of a kernel whose slow config changes from
  // run to run (BLOCK=128 slow in the first, fast in the second): the
  // choice does not follow.
  perf::TuneOptions timed;
  timed.quiet = true;
  timed.deterministic = true;
  timed.bench.warmupSeconds = 0;
  timed.bench.budgetSeconds = 0;
  timed.bench.minReps = 2;
  for (int run = 0; run < 2; ++run) {
    perf::TuneResult r = perf::tune(spinProblem([run](int b) { return (b == 128) == (run == 0) ? 2000 : 1; }), timed);
    CHECK(r.bestConfig()->get("BLOCK") == 128);
    CHECK(r.choice == perf::TuneChoice::FirstValid);
  }
}

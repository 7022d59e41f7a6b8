// The autotuner (tessera/perf/Tune.h) on tiny GEMMs: pruning and its
// reasons, the choice (always a config whose answer checks), the store
// (incremental, reused), and deployable tables. Nothing here depends on
// which config is fastest: only on which configs are valid.
#include <catch2/catch.hpp>
#include <filesystem>

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

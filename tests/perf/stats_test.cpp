// The harness's statistics, reports and baseline comparison on made-up
// samples: deterministic, nothing is timed.
#include <catch2/catch.hpp>

#include "tessera/perf/Bench.h"

namespace ts = tessera;
namespace perf = tessera::perf;
using Catch::Matchers::Contains;

namespace {

perf::BenchResult made(const std::string& name, const std::string& shape, std::vector<double> samples) {
  perf::BenchResult r;
  r.name = name;
  r.shape = shape;
  r.kernel = name;
  r.device = "cpu (test)";
  r.timing = "steady clock";
  r.samples = samples;
  r.stats = perf::summarize(samples);
  r.work.flops = 2e6;
  r.work.bytes = 4e6;
  r.work.source = "declared";
  r.overheadPerRep = 1e-7;
  return r;
}

}  // namespace

TEST_CASE("stats: median, quartiles and IQR interpolate between order statistics", "[perf][stats]") {
  SECTION("odd count, unsorted input") {
    perf::Stats s = perf::summarize({5, 1, 4, 2, 3});
    CHECK(s.count == 5);
    CHECK(s.min == 1);
    CHECK(s.max == 5);
    CHECK(s.median == 3);
    CHECK(s.q1 == 2);
    CHECK(s.q3 == 4);
    CHECK(s.iqr() == 2);
    CHECK(s.mean == 3);
    CHECK(s.relativeIqr() == Approx(2.0 / 3));
  }
  SECTION("even count") {
    perf::Stats s = perf::summarize({1, 2, 3, 4});
    CHECK(s.median == 2.5);
    CHECK(s.q1 == 1.75);  // type 7: position 0.75
    CHECK(s.q3 == 3.25);
  }
  SECTION("one sample and none") {
    perf::Stats one = perf::summarize({7});
    CHECK((one.min == 7 && one.q1 == 7 && one.median == 7 && one.q3 == 7 && one.max == 7));
    perf::Stats none = perf::summarize({});
    CHECK(none.count == 0);
    CHECK(none.median == 0);
    CHECK(none.relativeIqr() == 0);
  }
  SECTION("quantile at the ends") {
    std::vector<double> v = {1, 2, 3};
    CHECK(perf::quantile(v, 0) == 1);
    CHECK(perf::quantile(v, 1) == 3);
    CHECK(perf::quantile(v, 2) == 3);  // clamped
    CHECK(perf::quantile({}, 0.5) == 0);
  }
}

TEST_CASE("stats: options are checked with messages naming what is expected", "[perf][stats]") {
  perf::BenchOptions o;
  CHECK_NOTHROW(o.validate());
  o.minReps = 10;
  o.maxReps = 3;
  CHECK_THROWS_WITH(o.validate(), Contains("maxReps (3) must be >= minReps (10)"));
  o = {};
  o.budgetSeconds = -1;
  CHECK_THROWS_WITH(o.validate(), Contains("budgetSeconds must be a number of seconds >= 0"));
  o = {};
  o.minReps = 0;
  CHECK_THROWS_AS(o.validate(), ts::UsageError);
}

TEST_CASE("stats: the noise threshold is half the summed IQRs over the baseline median, with a floor",
          "[perf][stats]") {
  perf::Stats base = perf::summarize({9, 10, 11});               // IQR 1, median 10
  perf::Stats cur = perf::summarize({10, 12, 14});               // IQR 2
  CHECK(perf::noiseThreshold(cur, base, 0.02) == Approx(0.15));  // (1 + 2) / 2 / 10
  perf::Stats tight = perf::summarize({10, 10, 10});
  CHECK(perf::noiseThreshold(tight, tight, 0.02) == 0.02);  // never below the floor
}

TEST_CASE("stats: comparison with a baseline flags changes beyond the noise only", "[perf][stats]") {
  std::vector<perf::BenchResult> base = {made("a", "8", {0.98, 1.0, 1.02}), made("b", "", {1.0, 1.0, 1.0}),
                                         made("gone", "", {1, 1, 1})};
  std::vector<perf::BenchResult> cur = {made("a", "8", {1.00, 1.01, 1.03}),  // +1%: within the 2% noise
                                        made("b", "", {1.2, 1.2, 1.2}),      // +20%: slower
                                        made("fresh", "", {1, 1, 1})};
  std::vector<perf::Comparison> rows = perf::compare(cur, base, 0.02);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].id == "a[8]");
  CHECK(rows[0].verdict == perf::Comparison::Verdict::Same);
  CHECK(rows[0].change == Approx(0.01));
  CHECK(rows[1].verdict == perf::Comparison::Verdict::Slower);
  CHECK(rows[2].verdict == perf::Comparison::Verdict::New);
  CHECK(rows[3].id == "gone");
  CHECK(rows[3].verdict == perf::Comparison::Verdict::Missing);
  bool regressed = false;
  std::string table = perf::formatComparison(rows, 0.02, &regressed);
  CHECK(regressed);
  CHECK_THAT(table, Contains("SLOWER") && Contains("+20.0%") && Contains("+-2.0%") &&
                        Contains("half the sum of the two runs' interquartile ranges"));
  // Faster beyond the noise is named too, and is no regression.
  std::vector<perf::BenchResult> quick = {made("b", "", {0.5, 0.5, 0.5})};
  auto fast = perf::compare(quick, {made("b", "", {1, 1, 1})}, 0.02);
  CHECK(fast[0].verdict == perf::Comparison::Verdict::Faster);
  perf::formatComparison(fast, 0.02, &regressed);
  CHECK_FALSE(regressed);
}

TEST_CASE("stats: the JSON report reads back, and malformed or foreign files are refused by name", "[perf][stats]") {
  perf::BenchResult r = made("softmax", "64x1000", {3e-6, 1e-6, 2e-6, 4e-6});
  r.grid = {64, 1, 1};
  r.rooflineMachine = "host";
  r.rooflineSeconds = 1e-6;
  r.rooflineFraction = 0.5;
  r.rooflineBound = "memory";
  std::string text = perf::toJson({r}, {"0.4.0", "tessera bench softmax"});
  CHECK_THAT(text, Contains("\"format\": \"tessera-bench\"") && Contains("\"id\": \"softmax[64x1000]\""));
  std::vector<perf::BenchResult> back = perf::fromJson(text, "r.json");
  REQUIRE(back.size() == 1);
  CHECK(back[0].id() == "softmax[64x1000]");
  CHECK(back[0].stats.median == r.stats.median);
  CHECK(back[0].stats.q1 == r.stats.q1);
  CHECK(back[0].stats.q3 == r.stats.q3);
  CHECK(back[0].samples == r.samples);
  CHECK(back[0].work.flops == 2e6);
  CHECK(back[0].rooflineFraction == 0.5);

  CHECK_THROWS_WITH(perf::fromJson("{\"results\": [", "bad.json"), Contains("bad.json:1:14: unexpected end of input"));
  CHECK_THROWS_WITH(perf::fromJson("[1, 2,]", "bad.json"), Contains("bad.json:1:7"));
  CHECK_THROWS_WITH(perf::fromJson("{\"name\": 1}", "other.json"), Contains("not a tessera bench report"));
  CHECK_THROWS_WITH(perf::fromJson(R"({"format": "tessera-bench", "version": 9, "results": []})", "v.json"),
                    Contains("report version 9"));
  CHECK_THROWS_WITH(
      perf::fromJson(R"({"format": "tessera-bench", "version": 1, "results": [{"name": "x", "seconds": {}}]})",
                     "m.json"),
      Contains("m.json: results[0].seconds: missing \"median\""));
  CHECK_THROWS_WITH(perf::fromJson(R"({"format": "tessera-bench", "version": 1, "results": [{"name": "x",
      "seconds": {"median": 2, "q1": 3, "q3": 4}}]})",
                                   "q.json"),
                    Contains("quartiles must bracket the median"));
  std::string deep(100, '[');
  CHECK_THROWS_WITH(perf::fromJson(deep, "deep.json"), Contains("nested deeper than"));
}

TEST_CASE("stats: the table shows the statistics, throughput and the harness overhead", "[perf][stats]") {
  perf::BenchResult r = made("vector_add", "100003", {2e-6, 1e-6, 3e-6});
  std::string t = perf::formatTable({r});
  CHECK_THAT(t, Contains("vector_add[100003]") && Contains("2.00 us") && Contains("1.00 us") && Contains("3.00 us"));
  CHECK_THAT(t, Contains("2000.00"));  // 4e6 bytes in 2 us: 2000 GB/s
  CHECK_THAT(t, Contains("harness overhead per repetition") && Contains("100 ns median"));
  CHECK(perf::formatSeconds(0.00123) == "1.23 ms");
  CHECK(perf::formatSeconds(12.5) == "12.5 s");
}

// Benchmark reports (Bench.h): the table, the JSON form and its reader, and
// the comparison with a baseline run.
#include <algorithm>
#include <cmath>
#include <map>

#include "Format.h"
#include "Json.h"
#include "tessera/perf/Bench.h"
#include "tessera/support/Error.h"

namespace tessera::perf {

std::string formatSeconds(double s) {
  if (!std::isfinite(s)) return "-";
  if (s == 0) return "0 s";
  if (s >= 1) return fmt::sig3(s) + " s";  // never kiloseconds
  return fmt::si(s, "s");
}

std::string formatTable(const std::vector<BenchResult>& results) {
  bool sol = false;
  for (const BenchResult& r : results) sol = sol || !r.rooflineMachine.empty();
  std::vector<std::string> head = {"kernel", "reps", "median", "min", "max", "IQR", "GB/s", "GFLOP/s"};
  if (sol) head.insert(head.end(), {"roofline", "of roofline", "bound"});
  fmt::Table t(head);
  if (sol) t.leftAlign(head.size() - 1);
  for (const BenchResult& r : results) {
    std::vector<std::string> row = {r.id(),
                                    std::to_string(r.stats.count),
                                    formatSeconds(r.stats.median),
                                    formatSeconds(r.stats.min),
                                    formatSeconds(r.stats.max),
                                    fmt::percent(r.stats.relativeIqr()),
                                    r.work.bytes > 0 ? fmt::fixed(r.bytesPerSecond() / 1e9, 2) : "-",
                                    r.work.flops > 0 ? fmt::fixed(r.flopsPerSecond() / 1e9, 2) : "-"};
    if (sol) {
      if (r.rooflineMachine.empty()) {
        row.insert(row.end(), {"-", "-", ""});
      } else {
        row.push_back(formatSeconds(r.rooflineSeconds) + " (" + r.rooflineMachine + ")");
        row.push_back(fmt::percent(r.rooflineFraction));
        row.push_back(r.rooflineBound);
      }
    }
    t.add(row);
  }
  std::string out = t.str();
  if (!results.empty()) {
    std::vector<double> ov;
    for (const BenchResult& r : results) ov.push_back(r.overheadPerRep);
    Stats o = summarize(ov);
    const BenchResult& r0 = results.front();
    out += "timing: " + r0.timing + " on " + r0.device + "; IQR relative to the median; throughput at the median\n";
    out += "harness overhead per repetition (outside the timed launch): " + formatSeconds(o.median) + " median, " +
           formatSeconds(o.min) + " min, " + formatSeconds(o.max) + " max over " + std::to_string(o.count) +
           (o.count == 1 ? " run\n" : " runs\n");
    if (r0.flushed)
      out += "caches flushed before each repetition (" + fmt::si(double(r0.flushBytes), "B") + " written)\n";
  }
  return out;
}

// ---- JSON -------------------------------------------------------------------

namespace {

constexpr const char* kFormat = "tessera-bench";
constexpr int kVersion = 1;

json::Value statsJson(const Stats& s) {
  json::Value v = json::Value::object();
  v.set("median", s.median);
  v.set("min", s.min);
  v.set("max", s.max);
  v.set("q1", s.q1);
  v.set("q3", s.q3);
  v.set("iqr", s.iqr());
  v.set("mean", s.mean);
  v.set("count", static_cast<uint64_t>(s.count));
  return v;
}

json::Value resultJson(const BenchResult& r) {
  json::Value v = json::Value::object();
  v.set("id", r.id());
  v.set("name", r.name);
  v.set("shape", r.shape);
  v.set("kernel", r.kernel);
  v.set("device", r.device);
  v.set("timing", r.timing);
  json::Value grid = json::Value::array();
  for (uint32_t g : r.grid) grid.push(g);
  v.set("grid", grid);
  v.set("warmup_reps", r.warmupReps);
  v.set("flush_bytes", static_cast<uint64_t>(r.flushed ? r.flushBytes : 0));
  v.set("seconds", statsJson(r.stats));
  v.set("wall_seconds", r.wallSeconds);
  v.set("overhead_per_rep_seconds", r.overheadPerRep);
  json::Value work = json::Value::object();
  work.set("source", r.work.source);
  work.set("flops", r.work.flops);
  work.set("bytes", r.work.bytes);
  if (r.work.source == "ir") {
    work.set("bytes_read", r.work.ir.bytesRead());
    work.set("bytes_written", r.work.ir.bytesWritten());
    work.set("accessed_bytes", r.work.ir.accessedBytes());
    work.set("transcendentals", r.work.ir.transcendentals);
    json::Value classes = json::Value::object();
    for (const auto& f : r.work.ir.flops) classes.set(ir::flopClassName(f.unit, f.dtype), f.count);
    work.set("flops_by_class", classes);
    json::Value notes = json::Value::array();
    for (const std::string& n : r.work.ir.notes) notes.push(n);
    work.set("notes", notes);
  }
  v.set("work", work);
  json::Value tp = json::Value::object();
  tp.set("bytes_per_second", r.bytesPerSecond());
  tp.set("flops_per_second", r.flopsPerSecond());
  v.set("throughput", tp);
  if (!r.rooflineMachine.empty()) {
    json::Value rl = json::Value::object();
    rl.set("machine", r.rooflineMachine);
    rl.set("seconds", r.rooflineSeconds);
    rl.set("fraction", r.rooflineFraction);
    rl.set("bound", r.rooflineBound);
    v.set("roofline", rl);
  }
  json::Value samples = json::Value::array();
  for (double s : r.samples) samples.push(s);
  v.set("samples", samples);
  return v;
}

/// Reads fields of one result, naming the result and field in errors.
class Reader {
 public:
  Reader(const json::Value& v, std::string where) : v_(v), where_(std::move(where)) {}
  [[noreturn]] void fail(const std::string& what) const { throw UsageError(where_ + ": " + what); }
  const json::Value* opt(const char* key) const { return v_.find(key); }
  std::string str(const char* key, bool required) const {
    const json::Value* f = v_.find(key);
    if (!f) {
      if (required) fail(std::string("missing \"") + key + "\"");
      return {};
    }
    if (!f->isString()) fail(std::string("\"") + key + "\" must be a string");
    return f->asString();
  }
  double num(const char* key, bool required) const {
    const json::Value* f = v_.find(key);
    if (!f || f->isNull()) {
      if (required) fail(std::string("missing \"") + key + "\"");
      return 0;
    }
    if (!f->isNumber()) fail(std::string("\"") + key + "\" must be a number");
    return f->asNumber();
  }

 private:
  const json::Value& v_;
  std::string where_;
};

}  // namespace

std::string toJson(const std::vector<BenchResult>& results, const RunInfo& info) {
  json::Value top = json::Value::object();
  top.set("format", kFormat);
  top.set("version", kVersion);
  top.set("tessera", info.tesseraVersion);
  top.set("options", info.options);
  json::Value arr = json::Value::array();
  for (const BenchResult& r : results) arr.push(resultJson(r));
  top.set("results", arr);
  return json::write(top);
}

std::vector<BenchResult> fromJson(const std::string& text, const std::string& source) {
  json::Value top = json::parse(text, source);
  if (!top.isObject()) throw UsageError(source + ": not a tessera bench report (the top level is not an object)");
  const json::Value* format = top.find("format");
  if (!format || !format->isString() || format->asString() != kFormat)
    throw UsageError(source + ": not a tessera bench report (no \"format\": \"" + kFormat +
                     "\"; write one with `tessera bench ... --json FILE`)");
  Reader topR(top, source);
  double version = topR.num("version", true);
  if (version != kVersion)
    throw UsageError(source + ": report version " + fmt::fixed(version, 0) + ", this Tessera reads version " +
                     std::to_string(kVersion));
  const json::Value* arr = top.find("results");
  if (!arr || !arr->isArray()) throw UsageError(source + ": \"results\" must be an array");
  std::vector<BenchResult> out;
  for (size_t i = 0; i < arr->items().size(); ++i) {
    const json::Value& v = arr->items()[i];
    std::string where = source + ": results[" + std::to_string(i) + "]";
    if (!v.isObject()) throw UsageError(where + ": not an object");
    Reader rd(v, where);
    BenchResult r;
    r.name = rd.str("name", true);
    r.shape = rd.str("shape", false);
    r.kernel = rd.str("kernel", false);
    r.device = rd.str("device", false);
    r.timing = rd.str("timing", false);
    const json::Value* secs = v.find("seconds");
    if (!secs || !secs->isObject()) rd.fail("missing \"seconds\" (the timing statistics)");
    Reader sr(*secs, where + ".seconds");
    r.stats.median = sr.num("median", true);
    r.stats.min = sr.num("min", false);
    r.stats.max = sr.num("max", false);
    r.stats.q1 = sr.num("q1", false);
    r.stats.q3 = sr.num("q3", false);
    r.stats.mean = sr.num("mean", false);
    r.stats.count = static_cast<size_t>(std::max(0.0, sr.num("count", false)));
    if (!(r.stats.median > 0) || !std::isfinite(r.stats.median)) sr.fail("\"median\" must be a positive number");
    if (r.stats.q1 == 0 && r.stats.q3 == 0) r.stats.q1 = r.stats.q3 = r.stats.median;
    if (r.stats.q1 > r.stats.median || r.stats.q3 < r.stats.median) sr.fail("quartiles must bracket the median");
    if (const json::Value* s = v.find("samples"); s && s->isArray())
      for (const json::Value& x : s->items())
        if (x.isNumber()) r.samples.push_back(x.asNumber());
    if (const json::Value* w = v.find("work"); w && w->isObject()) {
      Reader wr(*w, where + ".work");
      r.work.source = wr.str("source", false);
      r.work.flops = wr.num("flops", false);
      r.work.bytes = wr.num("bytes", false);
    }
    r.wallSeconds = rd.num("wall_seconds", false);
    r.overheadPerRep = rd.num("overhead_per_rep_seconds", false);
    if (const json::Value* rl = v.find("roofline"); rl && rl->isObject()) {
      Reader rr(*rl, where + ".roofline");
      r.rooflineMachine = rr.str("machine", false);
      r.rooflineSeconds = rr.num("seconds", false);
      r.rooflineFraction = rr.num("fraction", false);
      r.rooflineBound = rr.str("bound", false);
    }
    out.push_back(std::move(r));
  }
  return out;
}

// ---- baselines --------------------------------------------------------------

const char* name(Comparison::Verdict v) {
  switch (v) {
    case Comparison::Verdict::Same: return "same";
    case Comparison::Verdict::Faster: return "faster";
    case Comparison::Verdict::Slower: return "SLOWER";
    case Comparison::Verdict::New: return "new";
    case Comparison::Verdict::Missing: return "missing";
  }
  return "?";
}

double noiseThreshold(const Stats& current, const Stats& baseline, double floor) {
  if (!(baseline.median > 0)) return floor;
  double t = 0.5 * (current.iqr() + baseline.iqr()) / baseline.median;
  return std::max(floor, t);
}

std::vector<Comparison> compare(const std::vector<BenchResult>& current, const std::vector<BenchResult>& baseline,
                                double floor) {
  std::map<std::string, const BenchResult*> base;
  for (const BenchResult& b : baseline) base.emplace(b.id(), &b);
  std::vector<Comparison> rows;
  std::map<std::string, bool> seen;
  for (const BenchResult& c : current) {
    Comparison row;
    row.id = c.id();
    row.currentMedian = c.stats.median;
    seen[row.id] = true;
    auto it = base.find(row.id);
    if (it == base.end()) {
      row.verdict = Comparison::Verdict::New;
      rows.push_back(row);
      continue;
    }
    const BenchResult& b = *it->second;
    row.baselineMedian = b.stats.median;
    row.change = b.stats.median > 0 ? c.stats.median / b.stats.median - 1 : 0;
    row.threshold = noiseThreshold(c.stats, b.stats, floor);
    row.verdict = row.change > row.threshold    ? Comparison::Verdict::Slower
                  : row.change < -row.threshold ? Comparison::Verdict::Faster
                                                : Comparison::Verdict::Same;
    rows.push_back(row);
  }
  for (const BenchResult& b : baseline)
    if (!seen.count(b.id())) {
      Comparison row;
      row.id = b.id();
      row.baselineMedian = b.stats.median;
      row.verdict = Comparison::Verdict::Missing;
      rows.push_back(row);
    }
  return rows;
}

std::string formatComparison(const std::vector<Comparison>& rows, double floor, bool* regressed) {
  fmt::Table t({"kernel", "baseline", "now", "change", "noise threshold", "verdict"});
  t.leftAlign(5);
  bool slower = false;
  for (const Comparison& c : rows) {
    bool both = c.verdict != Comparison::Verdict::New && c.verdict != Comparison::Verdict::Missing;
    t.add({c.id, c.baselineMedian > 0 ? formatSeconds(c.baselineMedian) : "-",
           c.currentMedian > 0 ? formatSeconds(c.currentMedian) : "-",
           both ? (c.change >= 0 ? "+" : "") + fmt::percent(c.change) : "-",
           both ? "+-" + fmt::percent(c.threshold) : "-", name(c.verdict)});
    slower = slower || c.verdict == Comparison::Verdict::Slower;
  }
  if (regressed) *regressed = slower;
  return t.str() +
         "noise threshold: half the sum of the two runs' interquartile ranges, relative to the baseline "
         "median (at least " +
         fmt::percent(floor) + "); a median slower by more is a regression\n";
}

}  // namespace tessera::perf

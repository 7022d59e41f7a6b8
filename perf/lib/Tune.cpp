// The autotuner (Tune.h): the config space, the tuning loop and its
// progress bar. The store and the tables are in TuneTable.cpp.
#include "tessera/perf/Tune.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "Format.h"
#include "tessera/codegen/DiskCache.h"
#include "tessera/perf/TuneTable.h"
#include "tessera/support/Environment.h"
#include "tessera/support/Error.h"

namespace tessera::perf {

using Clock = std::chrono::steady_clock;

// ---- configs and spaces ----------------------------------------------------------

bool TuneConfig::has(const std::string& n) const {
  return std::any_of(values.begin(), values.end(), [&](const auto& v) { return v.first == n; });
}

int64_t TuneConfig::getOr(const std::string& n, int64_t fallback) const {
  for (const auto& [k, v] : values)
    if (k == n) return v;
  return fallback;
}

int64_t TuneConfig::get(const std::string& n) const {
  for (const auto& [k, v] : values)
    if (k == n) return v;
  std::string have;
  for (const auto& [k, v] : values) have += (have.empty() ? "" : ", ") + k;
  throw UsageError("tune config " + str() + " has no parameter '" + n + "' (it has: " + have + ")");
}

std::string TuneConfig::str() const {
  std::string s;
  for (const auto& [k, v] : values) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

TuneConfig TuneConfig::parse(const std::string& text) {
  TuneConfig c;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    char* end = nullptr;
    errno = 0;
    long long v = eq == std::string::npos ? 0 : std::strtoll(item.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size() || *end != '\0' || c.has(item.substr(0, eq)))
      throw UsageError("tune config '" + text + "': expected NAME=INTEGER,NAME=INTEGER,... with unique names");
    // Meta-parameters become the kernels' int parameters (tile sizes, warp
    // counts): a value past an int would wrap to another (negative) one.
    if (errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
      throw UsageError("tune config '" + text + "': " + item.substr(0, eq) + " = " + item.substr(eq + 1) +
                       " is out of range (a meta-parameter is an int: -2^31 .. 2^31 - 1)");
    c.values.emplace_back(item.substr(0, eq), v);
  }
  if (c.values.empty()) throw UsageError("tune config '" + text + "': expected NAME=INTEGER,...");
  return c;
}

TuneSpace& TuneSpace::param(const std::string& n, std::vector<int64_t> values) {
  if (n.empty() || n.find_first_of(",= \n") != std::string::npos)
    throw UsageError("tune space: parameter name '" + n + "' must be non-empty without ',', '=' or spaces");
  for (const Param& p : params)
    if (p.name == n) throw UsageError("tune space: parameter '" + n + "' declared twice");
  if (values.empty()) throw UsageError("tune space: parameter '" + n + "' has no values");
  std::set<int64_t> seen(values.begin(), values.end());
  if (seen.size() != values.size()) throw UsageError("tune space: parameter '" + n + "' lists a value twice");
  params.push_back({n, std::move(values)});
  return *this;
}

TuneSpace& TuneSpace::constrain(const std::string& n, std::function<bool(const TuneConfig&)> holds) {
  if (n.empty() || !holds) throw UsageError("tune space: a constraint needs a name (its reason) and a predicate");
  constraints.push_back({n, std::move(holds)});
  return *this;
}

std::vector<TuneConfig> TuneSpace::candidates() const {
  std::vector<TuneConfig> out;
  if (params.empty()) return out;
  std::vector<size_t> idx(params.size(), 0);
  for (;;) {
    TuneConfig c;
    for (size_t i = 0; i < params.size(); ++i) c.values.emplace_back(params[i].name, params[i].values[idx[i]]);
    out.push_back(std::move(c));
    size_t i = params.size();  // the last parameter varies fastest
    while (i > 0 && ++idx[i - 1] == params[i - 1].values.size()) idx[--i] = 0;
    if (i == 0) return out;
  }
}

std::vector<std::string> TuneSpace::violated(const TuneConfig& c) const {
  std::vector<std::string> r;
  for (const TuneConstraint& k : constraints)
    if (!k.holds(c)) r.push_back(k.name);
  return r;
}

// ---- keys ---------------------------------------------------------------------------

std::string shapeBucket(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) {
    int64_t b = d;
    if (d > 1) {
      b = 1;
      while (b < d && b < (int64_t{1} << 62)) b <<= 1;
    }
    s += (s.empty() ? "" : "x") + std::to_string(b);
  }
  return s;
}

std::string tuneDeviceKey(const Device& d) { return d.name(); }

std::string codeFingerprint(const Kernel& k) {
  return codegen::CacheKey::make("code", {{"tile-ir", k.text()}}).hash.substr(0, 16);
}

std::string tuneToolchainKey() { return codegen::tesseraBuildId() + ", " + codegen::llvmVersion(); }

const char* name(TuneStatus s) {
  switch (s) {
    case TuneStatus::Measured: return "measured";
    case TuneStatus::Constraint: return "constraint";
    case TuneStatus::Resources: return "resources";
    case TuneStatus::CompileFail: return "compile-error";
    case TuneStatus::Wrong: return "wrong-answer";
    case TuneStatus::LaunchFail: return "launch-error";
    case TuneStatus::Skipped: return "skipped";
  }
  return "?";
}

const char* name(TuneChoice c) {
  switch (c) {
    case TuneChoice::Fastest: return "fastest";
    case TuneChoice::Recorded: return "recorded";
    case TuneChoice::Pinned: return "pinned";
    case TuneChoice::FirstValid: return "first-valid";
  }
  return "?";
}

bool tuneDeterministic(const TuneOptions& o) {
  const char* v = env::get(env::Var::Deterministic);
  if (!v) return o.deterministic;
  const std::string t = v;
  if (t != "0" && t != "1")
    throw UsageError(std::string(env::name(env::Var::Deterministic)) + "='" + t + "' (expected 0 or 1)");
  return t == "1";
}

BenchOptions TuneOptions::defaultBench() {
  BenchOptions b;
  b.warmupSeconds = 0.01;
  b.minWarmup = 1;
  b.budgetSeconds = 0.1;
  b.minReps = 3;
  return b;
}

namespace {

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// ---- the progress bar ---------------------------------------------------------------
//
// One line on standard error, redrawn in place ("\r" + erase to the end):
// the phase, done/total, the best so far and the time left, estimated
// from the average time of the candidates done in this phase.
class Progress {
 public:
  explicit Progress(bool on) : on_(on) {}
  void start(const char* phase, size_t total) {
    phase_ = phase;
    total_ = total;
    done_ = 0;
    t0_ = Clock::now();
    draw();
  }
  void step(const std::string& best) {
    ++done_;
    best_ = best;
    draw();
  }
  void clear() {
    if (on_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  void draw() {
    if (!on_ || total_ == 0) return;
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * done_ / total_);
    std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
    std::string eta = "-";
    if (done_ > 0) {
      double spent = std::chrono::duration<double>(Clock::now() - t0_).count();
      eta = formatSeconds(spent / double(done_) * double(total_ - done_));
    }
    std::fprintf(stderr, "\r\033[K%s [%s] %zu/%zu  best %s  left ~%s", phase_, bar.c_str(), done_, total_,
                 best_.empty() ? "-" : best_.c_str(), eta.c_str());
    std::fflush(stderr);
  }
  bool on_;
  const char* phase_ = "";
  size_t total_ = 0, done_ = 0;
  std::string best_;
  Clock::time_point t0_;
};

std::string describeBest(const TuneResult& r) {
  const TuneCandidateResult* b = nullptr;
  // Candidates still to be measured are Measured with no time yet.
  for (const TuneCandidateResult& c : r.candidates)
    if (c.valid() && c.seconds > 0 && (!b || c.seconds < b->seconds)) b = &c;
  return b ? formatSeconds(b->seconds) + " (" + b->config.str() + ")" : std::string();
}

// Compiles each of `todo` (indices into `cands`) on `threads` threads.
// The compile API is thread-safe (and compiles one kernel once however
// many threads ask); tracing is per thread, so kernels were traced before.
// With a performance model (opts.predict) each worker also predicts its
// candidate while its inputs are at hand (`predicted`, in seconds), so that
// nothing is prepared twice; a config the model finds cannot be resident
// is pruned like the compiler's refusals.
void compileAll(const std::vector<TuneCandidate>& cands, const std::vector<size_t>& todo, const Device& dev,
                const TuneOptions& opts, std::vector<std::optional<CompiledKernel>>& out,
                std::vector<std::string>& errors, std::vector<TuneStatus>& status, std::vector<double>& predicted,
                Progress& bar, const TuneResult& r) {
  unsigned n = opts.compileThreads ? opts.compileThreads : std::max(1u, std::thread::hardware_concurrency());
  n = std::min<unsigned>(n, static_cast<unsigned>(std::max<size_t>(todo.size(), 1)));
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  std::mutex mu;  // the progress bar and `failure`
  const std::string best = describeBest(r);
  auto work = [&] {
    for (size_t j; (j = next++) < todo.size();) {
      size_t i = todo[j];
      try {
        if (opts.predict) {  // the code a GPU launch with these arguments would run
          CompiledKernel k =
              compile(specializedFor(cands[i].kernel, cands[i].args), opts.predictTarget, cands[i].options);
          predicted[i] = opts.predict(k.artifact(), cands[i]);
          out[i] = std::move(k);
        } else {
          out[i] = compile(cands[i].kernel, dev, cands[i].options);
        }
      } catch (const DeviceError&) {
        throw;  // a missing tool (ptxas for the model): the host, not the config
      } catch (const ResourceError& e) {
        status[i] = TuneStatus::Resources;
        errors[i] = e.what();
      } catch (const InternalError&) {
        throw;
      } catch (const Error& e) {
        status[i] = TuneStatus::CompileFail;
        errors[i] = e.what();
      }
      std::lock_guard<std::mutex> lock(mu);
      bar.step(best);
    }
  };
  // An InternalError (a compiler bug) on a worker is rethrown here.
  std::exception_ptr failure;
  for (unsigned t = 0; t < n; ++t)
    pool.emplace_back([&] {
      try {
        work();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
        next = todo.size();
      }
    });
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

std::string failureMessage(const TuneResult& r) {
  std::string m = "tune: no valid config for " + r.kernel + " (bucket " + r.bucket + ", " + r.dtype + ", " + r.device +
                  "): every one of the " + std::to_string(r.candidates.size()) + " candidates was pruned or rejected:";
  for (const TuneCandidateResult& c : r.candidates)
    m += "\n  " + c.config.str() + ": " + name(c.status) + ": " + c.reason + (c.fromStore ? " (stored)" : "");
  return m;
}

}  // namespace

TuneResult tune(const TuneProblem& p, const TuneOptions& opts) {
  const Clock::time_point t0 = Clock::now();
  if (p.kernel.empty() || !p.prepare) throw UsageError("tune: the problem needs a kernel name and a prepare function");
  if (p.space.empty()) throw UsageError("tune: " + p.kernel + " declares no config space");
  opts.bench.validate();
  TuneResult r;
  r.kernel = p.kernel;
  r.bucket = shapeBucket(p.shape);
  r.dtype = p.dtype;
  r.device = opts.predict ? "model: " + (opts.predictKey.empty() ? opts.predictTarget.str() : opts.predictKey)
                          : tuneDeviceKey(p.device);
  // The device's name gives its default thread count; a launch with
  // another one is another device for the key.
  if (!opts.predict && opts.bench.launch.threads)
    r.device += ", launched with " + std::to_string(opts.bench.launch.threads) +
                (opts.bench.launch.threads == 1 ? " thread" : " threads");
  r.toolchain = tuneToolchainKey();
  r.code = p.code;
  const std::vector<TuneConfig> configs = p.space.candidates();
  const std::string shapeText = [&] {
    std::string s;
    for (int64_t d : p.shape) s += (s.empty() ? "" : "x") + std::to_string(d);
    return s;
  }();

  // Deterministic mode: the key's pin, when it is still a config of the
  // space that no constraint prunes and whose stored outcome (if any) is
  // valid. Then nothing else is run: only the pin, when its outcome is no
  // longer stored, is measured again (and checked).
  const bool deterministic = tuneDeterministic(opts);
  std::optional<size_t> pinned;
  if (deterministic && !opts.retune)
    if (std::optional<TuneConfig> pin = loadTunePin(r))
      for (size_t i = 0; i < configs.size(); ++i)
        if (configs[i] == *pin && p.space.violated(configs[i]).empty()) {
          std::optional<TuneCandidateResult> s = loadTuneEntry(r, configs[i]);
          if (!s || s->valid()) pinned = i;
        }

  // 1-2: constraints and the store. Constraint pruning is not stored: it
  // costs nothing, and a changed constraint must take effect at once.
  std::vector<size_t> todo;
  for (size_t i = 0; i < configs.size(); ++i) {
    const TuneConfig& c = configs[i];
    TuneCandidateResult res;
    res.config = c;
    std::vector<std::string> bad = p.space.violated(c);
    if (!bad.empty()) {
      res.status = TuneStatus::Constraint;
      for (const std::string& b : bad) res.reason += (res.reason.empty() ? "violates " : "; violates ") + b;
    } else if (std::optional<TuneCandidateResult> s = opts.retune ? std::nullopt : loadTuneEntry(r, c)) {
      res = *s;
      ++r.reused;
    } else if (pinned && *pinned != i) {
      res.status = TuneStatus::Skipped;
      res.reason = "not run: the choice is pinned (deterministic)";
    } else {
      todo.push_back(r.candidates.size());
    }
    r.candidates.push_back(std::move(res));
  }

  const bool barOn = !opts.quiet && isatty(STDERR_FILENO);
  Progress bar(barOn);
  if (!todo.empty()) {
    // 3: trace (this thread), then compile in parallel. Candidates are
    // prepared again for their measurement, so that only one holds its
    // inputs at a time.
    std::vector<TuneCandidate> cands(configs.size());
    std::vector<std::optional<CompiledKernel>> compiled(configs.size());
    std::vector<std::string> errors(configs.size());
    std::vector<TuneStatus> status(configs.size(), TuneStatus::Measured);
    std::vector<size_t> toCompile;
    for (size_t i : todo) {
      try {
        cands[i] = p.prepare(configs[i]);
        toCompile.push_back(i);
      } catch (const InternalError&) {
        throw;
      } catch (const ResourceError& e) {
        status[i] = TuneStatus::Resources;
        errors[i] = e.what();
      } catch (const DeviceError&) {
        throw;  // the device, not the config
      } catch (const Error& e) {
        status[i] = TuneStatus::CompileFail;  // the kernel does not trace with this config
        errors[i] = e.what();
      }
    }
    bar.start(opts.predict ? "compiling and predicting" : "compiling", toCompile.size());
    std::vector<double> predicted(configs.size(), 0);
    compileAll(cands, toCompile, p.device, opts, compiled, errors, status, predicted, bar, r);
    cands.clear();  // drop inputs: measured candidates are prepared afresh

    // 4: measure the survivors one at a time (compiles done: nothing else
    // competes for the device while timing).
    std::vector<size_t> survivors;
    for (size_t i : todo)
      if (compiled[i]) survivors.push_back(i);
    if (!opts.predict) bar.start("measuring", survivors.size());
    for (size_t i : todo) {
      TuneCandidateResult& res = r.candidates[i];
      res.shape = shapeText;
      if (!compiled[i]) {
        res.status = status[i];
        res.reason = firstLine(errors[i]);
      } else if (opts.predict) {
        res.seconds = res.minSeconds = predicted[i];
        res.reason = "predicted by the performance model";
      } else {
        try {
          TuneCandidate cand = p.prepare(configs[i]);
          Dim3 grid = cand.grid;
          if (cand.persistent && grid.x > 0)
            grid.x = std::min<uint32_t>(grid.x, compiled[i]->residentPrograms(cand.args, opts.bench.launch));
          BenchResult b = benchmark(*compiled[i], grid, cand.args, opts.bench);
          std::string why;
          if (cand.check && !cand.check(why)) {
            res.status = TuneStatus::Wrong;
            res.reason = "result differs from the reference" + (why.empty() ? std::string() : ": " + firstLine(why));
          } else {
            res.seconds = b.stats.median;
            res.minSeconds = b.stats.min;
            res.reps = static_cast<int>(b.stats.count);
          }
        } catch (const InternalError&) {
          throw;
        } catch (const DeviceError&) {
          throw;
        } catch (const Error& e) {
          res.status = TuneStatus::LaunchFail;
          res.reason = firstLine(e.what());
        }
        bar.step(describeBest(r));
      }
      if (compiled[i]) ++r.measured;
      saveTuneEntry(r, res);
    }
    bar.clear();
  }

  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const TuneCandidateResult& c = r.candidates[i];
    if (c.status == TuneStatus::Constraint || c.status == TuneStatus::Resources || c.status == TuneStatus::CompileFail)
      ++r.pruned;
    if (c.valid() && (!r.best || c.seconds < r.candidates[*r.best].seconds)) r.best = i;
  }
  if (deterministic && r.best) {
    if (pinned && r.candidates[*pinned].valid()) {
      r.best = pinned;
      r.choice = TuneChoice::Pinned;
    } else if (saveTunePin(r, r.candidates[*r.best].config)) {
      // No pin, or one whose config no longer checks: the fastest, pinned.
      r.choice = TuneChoice::Recorded;
    } else {
      // Nothing can be recorded (the store is off or cannot be written):
      // a rule that no measurement enters, the space's first valid config.
      for (size_t i = 0; i < r.candidates.size(); ++i)
        if (r.candidates[i].valid()) {
          r.best = i;
          break;
        }
      r.choice = TuneChoice::FirstValid;
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!r.best) throw TuneError(failureMessage(r), r);
  return r;
}

std::string formatTuneTable(const TuneResult& r) {
  fmt::Table t({"config", "status", "median", "min", "reps", "from", "note"});
  t.leftAlign(1);
  t.leftAlign(5);
  t.leftAlign(6);
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const TuneCandidateResult& c = r.candidates[i];
    const bool timed = c.valid();
    std::string note = c.reason;
    if (r.best && *r.best == i) {
      switch (r.choice) {
        case TuneChoice::Fastest: note = "best"; break;
        case TuneChoice::Recorded: note = "best, pinned (deterministic)"; break;
        case TuneChoice::Pinned: note = "pinned (deterministic)"; break;
        case TuneChoice::FirstValid: note = "first valid config (deterministic, no store to pin it)"; break;
      }
    }
    if (note.size() > 100) note = note.substr(0, 97) + "...";
    // Results of the performance model (device "model: ...") are predictions.
    const bool predicted = timed && r.device.rfind("model: ", 0) == 0;
    t.add({c.config.str(), predicted ? "predicted" : name(c.status), timed ? formatSeconds(c.seconds) : "-",
           timed ? formatSeconds(c.minSeconds) : "-", timed ? std::to_string(c.reps) : "-",
           c.status == TuneStatus::Constraint ? "space"
           : c.status == TuneStatus::Skipped  ? "-"
           : c.fromStore                      ? "store"
                                              : "this run",
           note});
  }
  return t.str();
}

}  // namespace tessera::perf

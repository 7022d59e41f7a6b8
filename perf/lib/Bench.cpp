// The benchmark harness (Bench.h): the timing loops, statistics, the work
// of a launch, and the host's cache sizes. JSON and baselines are in
// BenchReport.cpp, the table in BenchTable.cpp.
#include "tessera/perf/Bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>

#include "tessera/ir/Pass.h"
#include "tessera/perf/SpeedOfLight.h"
#include "tessera/support/Error.h"

namespace tessera::perf {

using Clock = std::chrono::steady_clock;

namespace {
double since(Clock::time_point t0, Clock::time_point t1) { return std::chrono::duration<double>(t1 - t0).count(); }

/// Bytes of a sysfs cache size such as "32768K" or "2M"; 0 if unreadable.
size_t parseCacheSize(const std::string& s) {
  if (s.empty()) return 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) return 0;
  std::string unit(end);
  while (!unit.empty() && (unit.back() == '\n' || unit.back() == ' ')) unit.pop_back();
  if (unit == "K")
    v <<= 10;
  else if (unit == "M")
    v <<= 20;
  else if (unit == "G")
    v <<= 30;
  else if (!unit.empty())
    return 0;
  return static_cast<size_t>(v);
}

/// The size of the largest cache of cpu0 at `level` (sysfs), 0 if none.
size_t sysfsCache(int level) {
  size_t best = 0;
  for (int i = 0; i < 16; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lv(dir + "level");
    if (!lv) break;
    int l = 0;
    lv >> l;
    std::ifstream type(dir + "type");
    std::string t;
    type >> t;
    if (l != level || t == "Instruction") continue;
    std::ifstream sz(dir + "size");
    std::string s;
    sz >> s;
    best = std::max(best, parseCacheSize(s));
  }
  return best;
}
}  // namespace

size_t hostLastLevelCacheBytes() {
  for (int level = 4; level >= 2; --level)
    if (size_t b = sysfsCache(level)) return b;
#ifdef _SC_LEVEL3_CACHE_SIZE
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return static_cast<size_t>(l3);
#endif
  return size_t{32} << 20;
}

size_t hostL2Bytes() {
  if (size_t b = sysfsCache(2)) return b;
#ifdef _SC_LEVEL2_CACHE_SIZE
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 > 0) return static_cast<size_t>(l2);
#endif
  return size_t{1} << 20;
}

// ---- options and statistics ------------------------------------------------

void BenchOptions::validate() const {
  auto bad = [](const std::string& what) { throw UsageError("benchmark options: " + what); };
  if (!(warmupSeconds >= 0) || !std::isfinite(warmupSeconds))
    bad("warmupSeconds must be a number of seconds >= 0, got " + std::to_string(warmupSeconds));
  if (!(budgetSeconds >= 0) || !std::isfinite(budgetSeconds))
    bad("budgetSeconds must be a number of seconds >= 0, got " + std::to_string(budgetSeconds));
  if (minWarmup < 0) bad("minWarmup must be >= 0, got " + std::to_string(minWarmup));
  if (minReps < 1) bad("minReps must be >= 1, got " + std::to_string(minReps));
  if (maxReps < minReps)
    bad("maxReps (" + std::to_string(maxReps) + ") must be >= minReps (" + std::to_string(minReps) + ")");
}

double quantile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  p = std::clamp(p, 0.0, 1.0);
  double pos = p * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Stats summarize(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.count = samples.size();
  s.min = samples.front();
  s.max = samples.back();
  s.q1 = quantile(samples, 0.25);
  s.median = quantile(samples, 0.5);
  s.q3 = quantile(samples, 0.75);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  return s;
}

// ---- cache flushing -------------------------------------------------------

namespace {

bool isHostDevice(const Device& d) { return d.kind() == rt::DeviceKind::CPU || d.kind() == rt::DeviceKind::Emulator; }

/// Writes a buffer larger than the caches between repetitions: host memory
/// for host devices (the LLC), device memory written by the runtime's fill
/// for GPUs (their L2 / Infinity Cache, from the architecture table).
class Flusher {
 public:
  Flusher(const Device& dev, const BenchOptions& o) {
    if (!o.flushCache) return;
    host_ = isHostDevice(dev);
    bytes_ = o.flushBytes;
    if (bytes_ == 0) {
      if (host_) {
        bytes_ = hostLastLevelCacheBytes();
      } else {
        // The largest last-level cache of the rows for this arch (H100 and
        // H200 share sm_90a); unknown GPUs get 256 MiB, MI300X's Infinity Cache.
        uint64_t b = 0;
        for (const Machine& m : gpuMachines())
          if (m.target == dev.arch()) b = std::max(b, m.llcBytes);
        bytes_ = b ? static_cast<size_t>(b) : size_t{256} << 20;
      }
    }
    if (host_)
      hostBuf_.assign(bytes_, 0);
    else
      devBuf_ = dev.alloc(DType::I8, bytes_);
  }
  size_t bytes() const { return bytes_; }
  bool active() const { return bytes_ != 0; }

  void flush() {
    if (!bytes_) return;
    ++value_;
    if (host_) {
      std::memset(hostBuf_.data(), value_, hostBuf_.size());
      // Keep the compiler from dropping a write nobody reads.
      asm volatile("" : : "r"(hostBuf_.data()) : "memory");
    } else {
      devBuf_.fillBytes(value_);  // synchronous: done before the next start event
    }
  }

 private:
  bool host_ = true;
  size_t bytes_ = 0;
  uint8_t value_ = 0;
  std::vector<uint8_t> hostBuf_;
  Buffer devBuf_;
};

constexpr int kMaxWarmupReps = 10000;
constexpr size_t kEventBatch = 32;  // GPU repetitions queued between two synchronisations

}  // namespace

// ---- the timing loops -----------------------------------------------------

BenchResult benchmark(const Device& device, const LaunchFn& launch, const BenchOptions& opts) {
  opts.validate();
  if (!launch) throw UsageError("benchmark: no launch function");
  BenchResult r;
  r.device = device.name();
  Flusher flusher(device, opts);
  r.flushed = flusher.active();
  r.flushBytes = flusher.bytes();
  LaunchOptions lo = opts.launch;

  if (isHostDevice(device)) {
    r.timing = "steady clock";
    lo.stream = rt::Stream{};  // synchronous: the launch returns when the kernel has finished
    const auto w0 = Clock::now();
    while (r.warmupReps < kMaxWarmupReps &&
           (r.warmupReps < opts.minWarmup || since(w0, Clock::now()) < opts.warmupSeconds)) {
      launch(lo);
      ++r.warmupReps;
    }
    r.samples.reserve(static_cast<size_t>(std::min(opts.maxReps, 1 << 16)));
    double flushTime = 0;
    const auto t0 = Clock::now();
    auto last = t0;
    while (static_cast<int>(r.samples.size()) < opts.maxReps &&
           (static_cast<int>(r.samples.size()) < opts.minReps || since(t0, last) < opts.budgetSeconds)) {
      if (flusher.active()) {
        const auto f0 = Clock::now();
        flusher.flush();
        flushTime += since(f0, Clock::now());
      }
      const auto a = Clock::now();
      launch(lo);
      last = Clock::now();
      r.samples.push_back(since(a, last));
    }
    r.wallSeconds = since(t0, Clock::now());
    double sum = std::accumulate(r.samples.begin(), r.samples.end(), 0.0);
    r.overheadPerRep = std::max(0.0, (r.wallSeconds - sum - flushTime) / static_cast<double>(r.samples.size()));
  } else {
    // GPUs: an event pair around each launch on the default stream; the
    // device's own clock times the kernel, whatever the host does meanwhile.
    r.timing = "device events";
    rt::Stream s = device.defaultStream();
    lo.stream = s;
    const auto w0 = Clock::now();
    while (r.warmupReps < kMaxWarmupReps &&
           (r.warmupReps < opts.minWarmup || since(w0, Clock::now()) < opts.warmupSeconds)) {
      launch(lo);
      s.synchronize();
      ++r.warmupReps;
    }
    std::vector<std::pair<rt::Event, rt::Event>> events(kEventBatch);
    for (auto& e : events) e = {device.createEvent(), device.createEvent()};
    double flushTime = 0;
    const auto t0 = Clock::now();
    auto more = [&] {
      int n = static_cast<int>(r.samples.size());
      return n < opts.maxReps && (n < opts.minReps || since(t0, Clock::now()) < opts.budgetSeconds);
    };
    while (more()) {
      size_t queued = 0;
      while (queued < kEventBatch && static_cast<int>(r.samples.size() + queued) < opts.maxReps) {
        if (flusher.active()) {
          const auto f0 = Clock::now();
          flusher.flush();
          flushTime += since(f0, Clock::now());
        }
        events[queued].first.record(s);
        launch(lo);
        events[queued].second.record(s);
        ++queued;
        if (static_cast<int>(r.samples.size() + queued) >= opts.minReps &&
            since(t0, Clock::now()) >= opts.budgetSeconds)
          break;
      }
      s.synchronize();  // a fault of any queued launch is thrown here
      for (size_t i = 0; i < queued; ++i)
        r.samples.push_back(rt::Event::elapsedMs(events[i].first, events[i].second) * 1e-3);
    }
    r.wallSeconds = since(t0, Clock::now());
    double sum = std::accumulate(r.samples.begin(), r.samples.end(), 0.0);
    // Host work and device work overlap on a GPU: this is the wall time not
    // spent in the kernels, per repetition (launch latency included).
    r.overheadPerRep = std::max(0.0, (r.wallSeconds - sum - flushTime) / static_cast<double>(r.samples.size()));
  }
  r.stats = summarize(r.samples);
  return r;
}

Work launchWork(const Kernel& k, const ir::LaunchFacts& facts) {
  // Count what the compiler will compute: the IR after the target-independent
  // clean-up (folded constants, merged duplicates, dead code removed).
  std::shared_ptr<ir::Function> f = ir::clone(k.ir());
  ir::PassManager pm;
  pm.add(ir::createCanonicalizePass());
  pm.add(ir::createCSEPass());
  pm.add(ir::createDeadCodeEliminationPass());
  pm.run(*f);
  Work w;
  w.ir = ir::estimateWork(*f, facts);
  w.flops = w.ir.totalFlops();
  w.bytes = w.ir.bytes();
  w.source = "ir";
  return w;
}

Work launchWork(const Kernel& k, Dim3 grid, const std::vector<rt::Arg>& args) {
  const unsigned n = k.ir().numArgs();
  ir::LaunchFacts facts;
  facts.grid = {grid.x, grid.y, grid.z};
  facts.scalars.resize(n);
  facts.bufferBytes.resize(n);
  for (unsigned i = 0; i < n && i < args.size(); ++i) {
    const rt::Arg& a = args[i];
    if (a.kind == rt::Arg::Kind::Scalar) {
      if (isInteger(a.dtype)) facts.scalars[i] = a.scalar.i;
    } else if (!a.buffer.isNull()) {
      size_t count = a.buffer.count();
      size_t elems = a.offset < count ? count - a.offset : 0;
      facts.bufferBytes[i] = static_cast<uint64_t>(elems) * byteSize(a.buffer.dtype());
    }
  }
  return launchWork(k, facts);
}

BenchResult benchmark(const CompiledKernel& k, Dim3 grid, const std::vector<rt::Arg>& args, const BenchOptions& opts,
                      std::optional<Work> declared) {
  if (!k.launchable()) throw UsageError("benchmark: the kernel was compiled for inspection, not loaded on a device");
  BenchResult r = benchmark(k.device(), [&](const LaunchOptions& lo) { k.launchWith(grid, args, lo); }, opts);
  r.kernel = k.source().name();
  if (r.name.empty()) r.name = r.kernel;
  r.grid = {grid.x, grid.y, grid.z};
  if (declared) {
    r.work = *declared;
    if (r.work.source.empty()) r.work.source = "declared";
  } else {
    r.work = launchWork(k.source(), grid, args);
  }
  return r;
}

}  // namespace tessera::perf

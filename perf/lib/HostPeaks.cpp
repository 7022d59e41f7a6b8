// The host CPU's peaks (SpeedOfLight.h), measured and remembered on disk
// per host, so every later `tessera sol` / `tessera bench` run uses the
// same figures without measuring again:
//  * the FMA peak: independent chains of f32 vector FMAs on every worker
//    thread, in register-resident intrinsics of the host ISA Tessera
//    targets (AVX-512 or AVX2+FMA, chosen at run time); elsewhere a Tessera
//    kernel of FMA chains, which reaches ~88% of the hardware's rate on
//    Zen 4 (each chunk's chain is dependent and its carried tile is copied
//    every iteration), so it is measured too, for the record;
//  * the bandwidth: a Tessera STREAM-style triad over arrays far larger
//    than the last-level cache (its streaming stores match non-temporal C++).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TS_FMA_INTRINSICS 1
#endif

#include "Json.h"
#include "tessera/perf/Bench.h"
#include "tessera/perf/SpeedOfLight.h"
#include "tessera/Cache.h"
#include "tessera/tessera.h"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif

namespace tessera::perf {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// One carried tile per program, kFmaChain FMAs per lane per iteration: 64
// (AVX-512) to 128 (AVX2) independent vector chains, and enough FMAs per
// iteration that copying the carried tile (the loop's yield) costs ~10%.
constexpr int kFmaLanes = 1024;
constexpr int kFmaChain = 16;
constexpr int kTriadBlock = 4096;
constexpr const char* kPeaksFormat = "tessera-host-peaks";
constexpr int kPeaksVersion = 1;

/// Each program carries a tile of kFmaLanes values through `iters`
/// iterations of kFmaChain dependent FMAs. The lanes are independent chains:
/// enough of them in flight to fill every FMA pipe (latency x ports).
Kernel fmaKernel() {
  return kernel("tessera_fma_peak", {"out", "iters"}, [](Ptr<float> out, Int iters) {
    auto lanes = arange(kFmaLanes);
    Tensor x = lanes.to(f32) * 1e-3f;
    Tensor acc = for_range(0, iters, 1, x, [&](Int, Tensor a) {
      for (int c = 0; c < kFmaChain; ++c) a = fma(a, 0.999999f, 1e-6f);
      return a;
    });
    store(out + program_id(0) * kFmaLanes + lanes, acc);
  });
}

/// a = b + s * c, STREAM's triad.
Kernel triadKernel() {
  return kernel("tessera_triad", {"a", "b", "c", "s", "n"},
                [](Ptr<float> a, Ptr<const float> b, Ptr<const float> c, Float s, Int n) {
                  auto offs = program_id(0) * kTriadBlock + arange(kTriadBlock);
                  auto mask = offs < n;
                  store(a + offs, load(b + offs, mask) + s * load(c + offs, mask), mask);
                });
}

#ifdef TS_FMA_INTRINSICS
constexpr int kChains = 12;  // independent accumulators: > FMA latency (4) x ports (2)
constexpr int kIntrinsicChains = kChains;
#else
constexpr int kIntrinsicChains = 0;
#endif
#ifdef TS_FMA_INTRINSICS

/// `iters` rounds of kChains independent FMAs on 16-lane vectors; compiled
/// for AVX-512 whatever the library's own flags, called only where the host
/// has it. Returns a value the compiler must compute.
__attribute__((target("avx512f"), noinline)) float fmaChains512(int64_t iters) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(1e-3f * float(j));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  float s = 0;
  for (int j = 0; j < kChains; ++j) s += _mm512_cvtss_f32(acc[j]);
  return s;
}

/// The same on 8-lane AVX2 vectors.
__attribute__((target("avx2,fma"), noinline)) float fmaChains256(int64_t iters) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(1e-3f * float(j));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  float s = 0;
  for (int j = 0; j < kChains; ++j) s += _mm256_cvtss_f32(acc[j]);
  return s;
}
#endif

double timeOnce(const std::function<void()>& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// The 1-minute load average (/proc/loadavg), -1 if unknown.
double loadAverage() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  if (!(in >> l)) return -1;
  return l;
}

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string s = line.substr(colon + 1);
        s.erase(0, s.find_first_not_of(" \t"));
        return s;
      }
    }
  return "unknown CPU";
}

/// FNV-1a: a short, stable file name for the host's identity.
std::string hashKey(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

/// What identifies the host's figures: a different CPU, ISA, thread count
/// or Tessera version measures again.
struct HostKey {
  std::string cpu, isa, version;
  unsigned threads = 0;
  uint64_t llc = 0;
  std::string str() const {
    // The kernels' shape too: a different measurement is measured again.
    return cpu + "|" + isa + "|" + std::to_string(threads) + "|" + std::to_string(llc) + "|" + version + "|fma" +
           std::to_string(kFmaLanes) + "x" + std::to_string(kFmaChain) + "+intrinsics" +
           std::to_string(kIntrinsicChains);
  }
};

HostKey currentKey() {
  HostKey k;
  k.cpu = cpuModelName();
  k.isa = codegen::hostIsa();
  k.threads = Device::cpu().defaultThreads();
  k.llc = hostLastLevelCacheBytes();
  k.version = TESSERA_VERSION;
  return k;
}

std::string peaksJson(const HostPeaks& p, const HostKey& k) {
  json::Value v = json::Value::object();
  v.set("format", kPeaksFormat);
  v.set("version", kPeaksVersion);
  v.set("key", k.str());
  v.set("cpu", p.cpu);
  v.set("isa", p.isa);
  v.set("threads", p.threads);
  v.set("fma_flops_per_second", p.fmaFlops);
  v.set("fma_method", p.fmaMethod);
  v.set("tessera_fma_flops_per_second", p.tesseraFmaFlops);
  v.set("triad_bytes_per_second", p.triadBytes);
  v.set("triad_array_bytes", p.triadArrayBytes);
  v.set("l2_bytes", p.l2Bytes);
  v.set("llc_bytes", p.llcBytes);
  v.set("measure_seconds", p.measureSeconds);
  v.set("load_average", p.loadAverage);
  v.set("measured_at_unix", static_cast<int64_t>(std::time(nullptr)));
  return json::write(v);
}

/// Reads remembered peaks; "" and `out` filled when good, else why not.
std::string readPeaks(const std::string& path, const HostKey& k, HostPeaks& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "missing";
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    json::Value v = json::parse(ss.str(), path);
    auto str = [&](const char* key) {
      const json::Value* f = v.find(key);
      return f && f->isString() ? f->asString() : std::string();
    };
    auto num = [&](const char* key) {
      const json::Value* f = v.find(key);
      return f && f->isNumber() ? f->asNumber() : -1.0;
    };
    if (!v.isObject() || str("format") != kPeaksFormat || num("version") != kPeaksVersion)
      return "not a file of host peaks of this Tessera";
    if (str("key") != k.str()) return "measured on another host or Tessera version";
    out.cpu = str("cpu");
    out.isa = str("isa");
    out.threads = static_cast<unsigned>(num("threads"));
    out.fmaFlops = num("fma_flops_per_second");
    out.fmaMethod = str("fma_method");
    out.tesseraFmaFlops = num("tessera_fma_flops_per_second");
    out.triadBytes = num("triad_bytes_per_second");
    out.triadArrayBytes = static_cast<uint64_t>(std::max(0.0, num("triad_array_bytes")));
    out.l2Bytes = static_cast<uint64_t>(std::max(0.0, num("l2_bytes")));
    out.llcBytes = static_cast<uint64_t>(std::max(0.0, num("llc_bytes")));
    out.measureSeconds = std::max(0.0, num("measure_seconds"));
    out.loadAverage = num("load_average");
    if (!(out.fmaFlops > 0) || !(out.triadBytes > 0) || !std::isfinite(out.fmaFlops) || !std::isfinite(out.triadBytes))
      return "its figures are missing or not positive";
  } catch (const Error& e) {
    return std::string("unreadable: ") + e.what();
  }
  return "";
}

/// Writes `text` to `path` atomically: a temporary file in the same folder,
/// flushed, then renamed over the old one. "" or why it failed.
std::string writeAtomically(const std::string& path, const std::string& text) {
  std::error_code ec;
  fs::path p(path);
  fs::create_directories(p.parent_path(), ec);
  if (ec) return "cannot create " + p.parent_path().string() + ": " + ec.message();
  std::random_device rd;
  std::string tmp = (p.parent_path() /
                     ("." + p.filename().string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd())))
                        .string();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return "cannot write in " + p.parent_path().string();
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return "cannot write " + tmp + " (disk full?)";
    }
  }
  fs::rename(tmp, p, ec);
  if (ec) {
    std::error_code ec2;
    fs::remove(tmp, ec2);
    return "cannot rename into " + path + ": " + ec.message();
  }
  return "";
}

}  // namespace

std::string machineCacheDir() {
  // The folder the compile cache uses (TESSERA_CACHE_DIR, XDG_CACHE_HOME,
  // HOME: tessera/Cache.h decides it); without one, a temporary folder.
  std::string dir = diskCacheSettings().dir;
  if (dir.empty()) return (fs::temp_directory_path() / "tessera-cache" / "machine").string();
  return (fs::path(dir) / "machine").string();
}

HostPeaks measureHostPeaks(const HostMeasureOptions& o) {
  const auto start = Clock::now();
  Device dev = Device::cpu();
  HostPeaks p;
  p.cpu = cpuModelName();
  p.isa = codegen::hostIsa();
  p.threads = dev.defaultThreads();
  p.l2Bytes = hostL2Bytes();
  p.llcBytes = hostLastLevelCacheBytes();
  p.loadAverage = loadAverage();
  const int repeats = std::max(1, o.repeats);
  const double target = o.targetSeconds > 0 ? o.targetSeconds : 0.1;

  // FMA peak of the Tessera kernel: one program per worker thread,
  // iterations calibrated so each run takes about `target` seconds; the best
  // of `repeats` runs.
  {
    CompiledKernel k = compile(fmaKernel(), dev);
    const uint32_t programs = p.threads;
    Buffer out = dev.alloc(DType::F32, size_t{programs} * kFmaLanes);
    int64_t iters = 64;
    double t = 0;
    while (true) {
      t = timeOnce([&] { k.launch({programs}, out, int32_t(iters)); });
      if (t >= target / 8 || iters >= (int64_t{1} << 28)) break;
      iters *= 4;
    }
    iters = std::clamp<int64_t>(static_cast<int64_t>(static_cast<double>(iters) * target / std::max(t, 1e-9)), 1,
                                INT32_MAX);
    double best = 1e300;
    for (int r = 0; r < repeats; ++r)
      best = std::min(best, timeOnce([&] { k.launch({programs}, out, int32_t(iters)); }));
    p.tesseraFmaFlops = double(programs) * double(iters) * kFmaLanes * kFmaChain * 2 / best;
    p.fmaFlops = p.tesseraFmaFlops;
    p.fmaMethod = "Tessera FMA-chain kernel";
  }
#ifdef TS_FMA_INTRINSICS
  // The hardware's FMA peak on the vectors Tessera uses here (avx512 or
  // avx2, as narrowed by TESSERA_HOST_CPU), one chain set per worker thread.
  if (p.isa == "avx512" || p.isa == "avx2") {
    const bool wide = p.isa == "avx512";
    const int lanes = wide ? 16 : 8;
    auto run = [&](int64_t n) {
      std::vector<std::thread> ts;
      std::vector<float> sink(p.threads);
      auto t0 = Clock::now();
      for (unsigned t = 0; t < p.threads; ++t)
        ts.emplace_back([&, t] { sink[t] = wide ? fmaChains512(n) : fmaChains256(n); });
      for (auto& th : ts) th.join();
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (sink[0] == 123456.0f) std::fputc(' ', stderr);  // keeps the sums alive
      return s;
    };
    int64_t iters = 1 << 12;
    double t = 0;
    while ((t = run(iters)) < target / 8 && iters < (int64_t{1} << 34)) iters *= 4;
    iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * target / std::max(t, 1e-9)));
    double best = 1e300;
    for (int r = 0; r < repeats; ++r) best = std::min(best, run(iters));
    double flops = double(p.threads) * double(iters) * kChains * lanes * 2 / best;
    if (flops > p.fmaFlops) {
      p.fmaFlops = flops;
      p.fmaMethod = std::string(wide ? "AVX-512" : "AVX2") + " FMA chains";
    }
  }
#endif

  // Triad bandwidth: three arrays of at least 4x the LLC each; the best of
  // `repeats` passes after one untimed pass. Bytes counted as STREAM does:
  // 3 arrays per pass (Tessera's streaming stores need no read for ownership).
  {
    uint64_t bytes = o.triadBytes ? o.triadBytes : std::max<uint64_t>(uint64_t{64} << 20, 4 * p.llcBytes);
    bytes = std::min<uint64_t>(bytes, uint64_t{1} << 30);
    const int64_t n = static_cast<int64_t>(std::max<uint64_t>(bytes / 4, kTriadBlock));
    p.triadArrayBytes = static_cast<uint64_t>(n) * 4;
    CompiledKernel k = compile(triadKernel(), dev);
    Buffer a = dev.alloc(DType::F32, size_t(n)), b = dev.alloc(DType::F32, size_t(n)),
           c = dev.alloc(DType::F32, size_t(n));
    b.fillBytes(0x3f);  // ~0.75: touches every page before timing
    c.fillBytes(0x3f);
    const uint32_t grid = static_cast<uint32_t>((n + kTriadBlock - 1) / kTriadBlock);
    k.launch({grid}, a, b, c, 3.0f, int32_t(n));
    double best = 1e300;
    // Passes are short (tens of ms): take many, the best counts.
    for (int r = 0; r < std::max(2 * repeats, 10); ++r)
      best = std::min(best, timeOnce([&] { k.launch({grid}, a, b, c, 3.0f, int32_t(n)); }));
    p.triadBytes = 3.0 * double(n) * 4 / best;
  }
  p.measureSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  return p;
}

HostPeaks hostPeaks(bool remeasure, const HostMeasureOptions& opts) {
  const HostKey key = currentKey();
  const std::string dir = machineCacheDir();
  const std::string path = (fs::path(dir) / ("host-" + hashKey(key.str()) + ".json")).string();
  std::string why = "asked to measure again";
  if (!remeasure) {
    HostPeaks p;
    why = readPeaks(path, key, p);
    if (why.empty()) {
      p.cacheFile = path;
      p.fromCache = true;
      return p;
    }
  }
  HostPeaks p = measureHostPeaks(opts);
  std::string busy;
  if (p.loadAverage > p.threads) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "the machine was busy while measuring (load average %.1f on %u threads): the peaks may be low; "
                  "measure again when it is quiet (tessera sol --remeasure-host)",
                  p.loadAverage, p.threads);
    busy = buf;
  }
  std::string err = writeAtomically(path, peaksJson(p, key));
  if (err.empty()) {
    p.cacheFile = path;
    if (why != "missing" && why != "asked to measure again")
      p.warning = "the remembered host peaks in " + path + " were not usable (" + why + "): measured again";
  } else {
    p.warning = "could not remember the host peaks in " + dir + " (" + err +
                "); they will be measured again next time (set TESSERA_CACHE_DIR to a writable folder)";
  }
  if (!busy.empty()) p.warning += (p.warning.empty() ? "" : "; ") + busy;
  return p;
}

Machine hostMachine(const HostPeaks& p) {
  Machine m;
  m.id = "host";
  m.name = "host";
  m.target = "cpu";
  m.units = p.threads;
  m.bandwidth = p.triadBytes;
  m.l2Bytes = p.l2Bytes;
  m.llcBytes = p.llcBytes;
  m.vecF32 = p.fmaFlops;
  m.vecF64 = p.fmaFlops / 2;  // half the lanes per vector
  m.measured = true;
  m.source = "measured on " + p.cpu + " (" + p.isa + ", " + std::to_string(p.threads) +
             " threads): " + (p.fmaMethod.empty() ? "FMA chains" : p.fmaMethod) + " and a Tessera triad" +
             (p.cacheFile.empty() ? "" : ", remembered in " + p.cacheFile);
  return m;
}

}  // namespace tessera::perf

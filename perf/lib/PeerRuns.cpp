// The peers of benchmarked launches, side by side with them (Peers.h,
// PeerRuns).
#include <iomanip>
#include <sstream>

#include "tessera/perf/Peers.h"
#include "tessera/runtime/HostThreads.h"
#include "tessera/perf/SpeedOfLight.h"

namespace tessera::perf {

PeerRuns::PeerRuns(Device dev) : dev_(std::move(dev)) {}
PeerRuns::~PeerRuns() = default;

std::optional<BenchResult> PeerRuns::run(const std::optional<GemmProblem>& gemm, const BenchResult& k,
                                         const BenchOptions& opts) {
  std::optional<BenchResult> p = gemm ? gemmPeer(*gemm, k, opts) : copyPeer(k, opts);
  if (p) lines_.push_back(compareLine(k, *p));
  return p;
}

std::string PeerRuns::report() const {
  std::string out;
  if (!lines_.empty())
    out += "\nagainst the peers (the same device and harness; speed = peer median / kernel median):\n";
  for (const std::string& l : lines_) out += "  " + l + "\n";
  for (const std::string& n : notes_) out += "note: " + n + "\n";
  return out;
}

std::optional<BenchResult> PeerRuns::gemmPeer(GemmProblem g, const BenchResult& k, const BenchOptions& opts) {
  if (dev_.kind() == rt::DeviceKind::CPU || dev_.kind() == rt::DeviceKind::Emulator) {
    notes_.push_back(k.id() + ": no GEMM peer on " + dev_.name() +
                     (dev_.kind() == rt::DeviceKind::CPU
                          ? " (tessera_gemm_bench compares the CPU GEMMs with OpenBLAS and oneDNN)"
                          : " (the vendor BLAS runs on CUDA and HIP devices)"));
    return std::nullopt;
  }
  // Opened once, at the first GEMM; a library that cannot be opened is
  // named in the note of every GEMM rather than failing the benchmark.
  if (!blas_ && blasError_.empty()) {
    try {
      blas_ = std::make_unique<VendorBlas>(dev_);
    } catch (const Error& e) {
      blasError_ = e.what();
    }
  }
  if (!blas_) {
    notes_.push_back(k.id() + ": no GEMM peer: " + blasError_);
    return std::nullopt;
  }
  // The peer writes its own C, so the kernel's output is checked as it left it.
  g.c = dev_.alloc(g.c.dtype(), g.c.count());
  const double flops = 2.0 * double(g.m) * double(g.n) * double(g.k);
  const double bytes =
      double(g.m * g.k + g.k * g.n) * double(byteSize(g.a.dtype())) + double(g.m * g.n) * double(byteSize(g.c.dtype()));
  BenchResult r =
      benchmarkPeer(dev_, blas_->launchFn(g), opts, k.name + "/blas", k.shape, Work{flops, bytes, "declared", {}});
  peerName_[r.id()] = blas_->name();
  return r;
}

std::optional<BenchResult> PeerRuns::copyPeer(const BenchResult& k, const BenchOptions& opts) {
  // Half the compulsory bytes (read + written) are copied: the copy then
  // reads and writes as many bytes as the kernel must.
  const size_t n = static_cast<size_t>(k.work.bytes / 2) / 16 * 16;
  if (n == 0) {
    notes_.push_back(k.id() + ": no copy peer (no global-memory bytes counted)");
    return std::nullopt;
  }
  rt::Buffer src = dev_.alloc(DType::U8, n), dst = dev_.alloc(DType::U8, n);
  // On the CPU the kernel runs on its launch's threads, so the copy does
  // too: a single memcpy would be a single thread's bandwidth.
  const bool host = dev_.kind() == rt::DeviceKind::CPU;
  const unsigned threads = host ? rt::launchThreads(dev_, opts.launch, k.id() + " copy peer") : 0;
  BenchResult r = benchmarkPeer(dev_, host ? hostCopy(dst, src, n, threads) : deviceCopy(dst, src, n), opts,
                                k.name + "/copy", k.shape, Work{0, 2.0 * double(n), "declared", {}});
  peerName_[r.id()] = host ? "copy of " + formatSI(double(n), "B") + " on " + std::to_string(threads) +
                                 (threads == 1 ? " thread" : " threads")
                           : "device-to-device copy of " + formatSI(double(n), "B");
  return r;
}

std::string PeerRuns::compareLine(const BenchResult& k, const BenchResult& p) const {
  std::ostringstream o;
  o << k.id() << ": " << formatSeconds(k.stats.median) << " against " << peerName_.at(p.id()) << ": "
    << formatSeconds(p.stats.median) << " -> ";
  if (k.stats.median > 0 && p.stats.median > 0)
    o << std::setprecision(3) << p.stats.median / k.stats.median << "x";
  else
    o << "no ratio (a median of 0: the device's clock did not advance)";
  if (k.work.flops > 0 && p.work.flops > 0)
    o << " (" << formatSI(k.flopsPerSecond(), "FLOP/s") << " vs " << formatSI(p.flopsPerSecond(), "FLOP/s") << ")";
  else
    o << " (" << formatSI(k.bytesPerSecond(), "B/s") << " vs " << formatSI(p.bytesPerSecond(), "B/s") << ")";
  return o.str();
}

}  // namespace tessera::perf

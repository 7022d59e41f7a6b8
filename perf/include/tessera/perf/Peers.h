// Peers a kernel is timed against on its own device, with the same harness
// (Bench.h) and on the same kind of buffers: the vendor's BLAS for a GEMM,
// and a copy of the same bytes for a memory-bound kernel, the bandwidth a
// kernel that reads and writes its data once can approach (on the CPU, on
// as many threads as the kernel's launch; elsewhere the device's copy).
// `tessera bench --peers` runs them next to the examples (docs/bench.md).
//
// The BLAS libraries are loaded at run time, as the drivers are, so nothing
// here needs them to build: cuBLAS on CUDA devices, rocBLAS on HIP devices.
// A device without one gets a DeviceError naming the library and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/perf/Bench.h"

namespace tessera::perf {

/// A GEMM as a BLAS computes it: C[m, n] = A[m, k] · B[k, n], all dense and
/// row-major, A and B of one type (f16, bf16 or f32), C of `cType` (the same
/// or f32), accumulated in f32. `c` is written; allocate it on a's device.
struct GemmProblem {
  rt::Buffer a, b, c;
  int64_t m = 0, n = 0, k = 0;
};

/// The vendor BLAS of a GPU device, opened for one device:
///  * CUDA: cuBLAS (TESSERA_CUBLAS_LIBRARY, else libcublas.so.13, .so.12,
///    .so.11, .so), cublasGemmEx with CUBLAS_COMPUTE_32F;
///  * HIP: rocBLAS (TESSERA_ROCBLAS_LIBRARY, else librocblas.so.4, .so.3,
///    .so), rocblas_gemm_ex with f32 compute.
/// Row-major operands are passed as the column-major product Cᵀ = Bᵀ·Aᵀ, so
/// no operand is transposed in memory.
class VendorBlas {
 public:
  /// Loads the library and creates its handle with `dev` current. Throws
  /// DeviceError naming the library and the reason: not found (every name
  /// tried), an entry point missing, the handle refused (the library's
  /// status), or a device kind with no vendor BLAS (the CPU, the emulator).
  explicit VendorBlas(const Device& dev);
  ~VendorBlas();
  VendorBlas(const VendorBlas&) = delete;
  VendorBlas& operator=(const VendorBlas&) = delete;

  /// "cuBLAS 130100 (libcublas.so.13)": the library, its version and file.
  std::string name() const;
  /// One GEMM, queued on `stream` (a stream of the device; null: the
  /// default stream, waited for). UsageError for a problem the library
  /// cannot take as given (types, sizes beyond int, buffers too small or
  /// of another device); DeviceError with the library's status on failure.
  void gemm(const GemmProblem& p, const rt::Stream& stream) const;
  /// gemm as the harness repeats it.
  LaunchFn launchFn(const GemmProblem& p) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Times `bytes` copied from `src` to `dst` (buffers of one device) on the
/// device's copy engine (Buffer::copyFromAsync), as the harness repeats it.
LaunchFn deviceCopy(rt::Buffer dst, rt::Buffer src, size_t bytes);

/// Times `bytes` copied from `src` to `dst` (buffers in host memory: the
/// CPU's) on `threads` threads of the pool CPU kernels run on (the calling
/// thread is one of them), as the harness repeats it: thread i copies one
/// contiguous chunk, [hostCopyBound(bytes, threads, i),
/// hostCopyBound(bytes, threads, i + 1)). A launch given a stream waits for
/// it, then copies. UsageError for a buffer that is null, too small or not
/// in host memory, or for 0 threads.
LaunchFn hostCopy(rt::Buffer dst, rt::Buffer src, size_t bytes, unsigned threads);
/// Where chunk `i` of hostCopy's `threads` chunks of `bytes` starts: `bytes`
/// split as evenly as it goes, every bound a multiple of 16 bytes but the
/// end, bytes itself (i = threads).
size_t hostCopyBound(size_t bytes, unsigned threads, unsigned i);

/// The benchmark of a peer: `launch` timed on `device` with `opts`, named
/// `name` for `shape`, with the work of one repetition.
BenchResult benchmarkPeer(const Device& device, const LaunchFn& launch, const BenchOptions& opts,
                          const std::string& name, const std::string& shape, const Work& work);

/// The peers of a series of benchmarked launches on one device (`tessera
/// bench --peers`): each timed with the same harness and options, and the
/// lines that set kernel and peer side by side. The vendor BLAS is opened
/// at the first GEMM; a launch without a peer gets a note saying why.
class PeerRuns {
 public:
  explicit PeerRuns(Device dev);
  ~PeerRuns();
  /// The peer of one benchmarked launch `k`: the BLAS product `gemm` where
  /// the launch is a GEMM, else a copy of the bytes it moves -- on the CPU
  /// a hostCopy on as many threads as the kernel's launch runs on
  /// (rt::launchThreads of `opts.launch`), named "copy of 16.4 kB on 2
  /// threads"; elsewhere a deviceCopy, "device-to-device copy of 16.4 kB";
  /// nothing (with a note) where there is none.
  std::optional<BenchResult> run(const std::optional<GemmProblem>& gemm, const BenchResult& k,
                                 const BenchOptions& opts);
  /// "against the peers" (one line per pair) and the notes, for after the table.
  std::string report() const;

 private:
  std::optional<BenchResult> gemmPeer(GemmProblem g, const BenchResult& k, const BenchOptions& opts);
  std::optional<BenchResult> copyPeer(const BenchResult& k, const BenchOptions& opts);
  std::string compareLine(const BenchResult& k, const BenchResult& p) const;

  Device dev_;
  std::unique_ptr<VendorBlas> blas_;
  std::string blasError_;
  std::map<std::string, std::string> peerName_;
  std::vector<std::string> lines_, notes_;
};

}  // namespace tessera::perf

// The benchmarks' peers (Peers.h): the vendor BLAS, loaded with dlopen, and
// device-to-device copies.
//
// The libraries' declarations are BlasAbi.h's; tests/perf/peers_test.cpp
// runs both paths on fake libraries over the fake drivers' memory.
#include "tessera/perf/Peers.h"

#include <dlfcn.h>

#include <climits>
#include <cstring>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "BlasAbi.h"
#include "tessera/support/Error.h"
#include "tessera/support/Environment.h"

namespace tessera::perf {

using namespace blasabi;

namespace {

/// dlopen of the override alone, or the first of `names` that loads; the
/// error lists each attempt. Never closed (as the drivers): the libraries
/// start threads of their own.
void* openFirst(const char* envVar, std::initializer_list<const char*> names, std::string& path, std::string& why) {
  const char* override = std::getenv(envVar);
  std::vector<const char*> tried(names);
  if (override && *override) tried = {override};
  for (const char* n : tried) {
    dlerror();
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) {
      path = n;
      return h;
    }
    const char* e = dlerror();
    why += std::string(why.empty() ? "" : "; ") + "dlopen(" + n + ") failed: " + (e ? e : "unknown error");
  }
  if (override && *override) why += " (from " + std::string(envVar) + ")";
  return nullptr;
}

template <class F>
F symbol(void* lib, const char* name, const std::string& libName) {
  void* p = dlsym(lib, name);
  if (!p) throw DeviceError(libName + " lacks the entry point " + name + "; a newer version is needed");
  return reinterpret_cast<F>(p);
}

int checkedInt(int64_t v, const char* what) {
  if (v <= 0 || v > INT_MAX)
    throw UsageError(std::string("VendorBlas::gemm: ") + what + " = " + std::to_string(v) +
                     " is not in the library's range 1.." + std::to_string(INT_MAX));
  return static_cast<int>(v);
}

}  // namespace

struct VendorBlas::Impl {
  Device device;
  bool rocm = false;
  std::string lib, path, version;
  void* handle = nullptr;
  cublas::Create cuCreate = nullptr;
  cublas::Destroy cuDestroy = nullptr;
  cublas::SetStream cuSetStream = nullptr;
  cublas::GemmEx cuGemm = nullptr;
  cublas::StatusName cuStatus = nullptr;
  rocblas::Destroy rocDestroy = nullptr;
  rocblas::SetStream rocSetStream = nullptr;
  rocblas::GemmEx rocGemm = nullptr;
  rocblas::StatusName rocStatus = nullptr;

  explicit Impl(const Device& d) : device(d) {}

  [[noreturn]] void fail(const char* call, int status) const {
    const char* n = rocm ? (rocStatus ? rocStatus(status) : nullptr) : (cuStatus ? cuStatus(status) : nullptr);
    throw DeviceError(device.name() + ": " + lib + ": " + call + " failed: " + (n ? n : "status") + " (" +
                      std::to_string(status) + ")");
  }

  void openCublas() {
    lib = "cuBLAS";
    std::string why;
    void* h = openFirst(tessera::env::name(tessera::env::Var::CublasLibrary),
                        {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}, path, why);
    if (!h) throw DeviceError("cuBLAS not available: " + why);
    cuCreate = symbol<cublas::Create>(h, "cublasCreate_v2", path);
    cuDestroy = symbol<cublas::Destroy>(h, "cublasDestroy_v2", path);
    cuSetStream = symbol<cublas::SetStream>(h, "cublasSetStream_v2", path);
    cuGemm = symbol<cublas::GemmEx>(h, "cublasGemmEx", path);
    auto getVersion = symbol<cublas::GetVersion>(h, "cublasGetVersion_v2", path);
    cuStatus = reinterpret_cast<cublas::StatusName>(dlsym(h, "cublasGetStatusName"));  // CUDA 11.4+
    device.makeCurrent();
    if (int s = cuCreate(&handle); s != cublas::kSuccess) fail("cublasCreate", s);
    int v = 0;
    if (getVersion(handle, &v) == cublas::kSuccess) version = std::to_string(v);
  }

  void openRocblas() {
    rocm = true;
    lib = "rocBLAS";
    std::string why;
    void* h = openFirst(tessera::env::name(tessera::env::Var::RocblasLibrary),
                        {"librocblas.so.4", "librocblas.so.3", "librocblas.so"}, path, why);
    if (!h) throw DeviceError("rocBLAS not available: " + why);
    auto create = symbol<rocblas::Create>(h, "rocblas_create_handle", path);
    rocDestroy = symbol<rocblas::Destroy>(h, "rocblas_destroy_handle", path);
    rocSetStream = symbol<rocblas::SetStream>(h, "rocblas_set_stream", path);
    rocGemm = symbol<rocblas::GemmEx>(h, "rocblas_gemm_ex", path);
    rocStatus = reinterpret_cast<rocblas::StatusName>(dlsym(h, "rocblas_status_to_string"));
    device.makeCurrent();
    if (int s = create(&handle); s != rocblas::kSuccess) fail("rocblas_create_handle", s);
    if (auto vs = reinterpret_cast<rocblas::VersionString>(dlsym(h, "rocblas_get_version_string"))) {
      char buf[64] = {};
      if (vs(buf, sizeof buf) == rocblas::kSuccess) version = buf;
    }
  }

  /// The library's code of a storage type; UsageError for another.
  int typeCode(DType t, const char* operand) const {
    switch (t) {
      case DType::F16: return rocm ? rocblas::kF16 : cublas::kF16;
      case DType::BF16: return rocm ? rocblas::kBF16 : cublas::kBF16;
      case DType::F32: return rocm ? rocblas::kF32 : cublas::kF32;
      default:
        throw UsageError(std::string("VendorBlas::gemm: ") + operand + " is " + tessera::name(t) +
                         "; the peer takes f16, " + "bf16 or f32 operands");
    }
  }
};

VendorBlas::VendorBlas(const Device& dev) : impl_(std::make_unique<Impl>(dev)) {
  switch (dev.kind()) {
    case rt::DeviceKind::CUDA: impl_->openCublas(); break;
    case rt::DeviceKind::HIP: impl_->openRocblas(); break;
    default:
      throw DeviceError(dev.name() + " has no vendor BLAS (cuBLAS runs on CUDA devices, rocBLAS on HIP devices)");
  }
}

VendorBlas::~VendorBlas() {
  // Failures are ignored: at process exit the driver may be gone.
  if (!impl_->handle) return;
  impl_->device.makeCurrent();
  if (impl_->rocm)
    impl_->rocDestroy(impl_->handle);
  else
    impl_->cuDestroy(impl_->handle);
}

std::string VendorBlas::name() const {
  return impl_->lib + (impl_->version.empty() ? "" : " " + impl_->version) + " (" + impl_->path + ")";
}

void VendorBlas::gemm(const GemmProblem& p, const rt::Stream& stream) const {
  const Impl& I = *impl_;
  for (const auto* b : {&p.a, &p.b, &p.c})
    if (b->isNull() || !(b->device() == I.device))
      throw UsageError("VendorBlas::gemm: every buffer must be allocated on " + I.device.name());
  if (p.a.dtype() != p.b.dtype())
    throw UsageError(std::string("VendorBlas::gemm: A is ") + tessera::name(p.a.dtype()) + " but B is " +
                     tessera::name(p.b.dtype()));
  if (p.c.dtype() != p.a.dtype() && p.c.dtype() != DType::F32)
    throw UsageError(std::string("VendorBlas::gemm: C is ") + tessera::name(p.c.dtype()) + "; it must be " +
                     tessera::name(p.a.dtype()) + " or f32");
  const int m = checkedInt(p.m, "m"), n = checkedInt(p.n, "n"), k = checkedInt(p.k, "k");
  const struct {
    const rt::Buffer& b;
    int64_t rows, cols;
    const char* what;
  } sizes[] = {{p.a, p.m, p.k, "A"}, {p.b, p.k, p.n, "B"}, {p.c, p.m, p.n, "C"}};
  for (const auto& s : sizes)
    if (s.b.count() < static_cast<size_t>(s.rows * s.cols))
      throw UsageError(std::string("VendorBlas::gemm: ") + s.what + " holds " + std::to_string(s.b.count()) +
                       " elements but " + std::to_string(s.rows) + " x " + std::to_string(s.cols) + " are needed");
  const int ab = I.typeCode(p.a.dtype(), "A"), ct = I.typeCode(p.c.dtype(), "C");
  const float alpha = 1.0f, beta = 0.0f;
  rt::Stream s = stream ? stream : I.device.defaultStream();
  I.device.makeCurrent();
  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: the library's "A" is our
  // B (n x k, leading dimension n), its "B" our A (k x m, leading k).
  if (I.rocm) {
    if (int st = I.rocSetStream(I.handle, s.native()); st != rocblas::kSuccess) I.fail("rocblas_set_stream", st);
    int st = I.rocGemm(I.handle, rocblas::kOpNone, rocblas::kOpNone, n, m, k, &alpha, p.b.data(), ab, n, p.a.data(), ab,
                       k, &beta, p.c.data(), ct, n, p.c.data(), ct, n, rocblas::kF32, rocblas::kAlgoStandard, 0, 0);
    if (st != rocblas::kSuccess) I.fail("rocblas_gemm_ex", st);
  } else {
    if (int st = I.cuSetStream(I.handle, s.native()); st != cublas::kSuccess) I.fail("cublasSetStream", st);
    int st = I.cuGemm(I.handle, cublas::kOpN, cublas::kOpN, n, m, k, &alpha, p.b.data(), ab, n, p.a.data(), ab, k,
                      &beta, p.c.data(), ct, n, cublas::kComputeF32, cublas::kAlgoDefault);
    if (st != cublas::kSuccess) I.fail("cublasGemmEx", st);
  }
  if (!stream) s.synchronize();
}

LaunchFn VendorBlas::launchFn(const GemmProblem& p) const {
  return [this, p](const LaunchOptions& o) { gemm(p, o.stream); };
}

LaunchFn deviceCopy(rt::Buffer dst, rt::Buffer src, size_t bytes) {
  return [dst, src, bytes](const LaunchOptions& o) mutable {
    if (o.stream)
      dst.copyFromAsync(o.stream, src, bytes);
    else
      dst.copyFrom(src, bytes);
  };
}

size_t hostCopyBound(size_t bytes, unsigned threads, unsigned i) {
  if (threads == 0 || i >= threads) return bytes;
  // In 16-byte units, split as units * i / threads without overflowing.
  const size_t units = bytes / 16;
  return (units / threads * i + units % threads * i / threads) * 16;
}

LaunchFn hostCopy(rt::Buffer dst, rt::Buffer src, size_t bytes, unsigned threads) {
  if (threads == 0) throw UsageError("hostCopy: 0 threads");
  for (const auto* b : {&dst, &src}) {
    if (b->isNull()) throw UsageError("hostCopy: a null buffer");
    if (b->device().kind() != rt::DeviceKind::CPU)
      throw UsageError("hostCopy: a buffer of " + b->device().name() + "; the copy is the CPU's");
    if (b->bytes() < bytes)
      throw UsageError("hostCopy: a buffer of " + std::to_string(b->bytes()) + " bytes, " + std::to_string(bytes) +
                       " to copy");
  }
  return [dst, src, bytes, threads](const LaunchOptions& o) {
    if (o.stream) o.stream.synchronize();
    auto* d = static_cast<char*>(dst.data());
    const auto* s = static_cast<const char*>(src.data());
    rt::parallelFor(threads, threads, [=](int64_t b, int64_t e) {
      const size_t lo = hostCopyBound(bytes, threads, unsigned(b)), hi = hostCopyBound(bytes, threads, unsigned(e));
      if (hi > lo) std::memcpy(d + lo, s + lo, hi - lo);
    });
  };
}

BenchResult benchmarkPeer(const Device& device, const LaunchFn& launch, const BenchOptions& opts,
                          const std::string& name, const std::string& shape, const Work& work) {
  BenchResult r = benchmark(device, launch, opts);
  r.name = name;
  r.shape = shape;
  r.kernel = name;
  r.work = work;
  return r;
}

}  // namespace tessera::perf

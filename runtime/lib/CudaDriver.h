// The CUDA driver as the CUDA device uses it (runtime-private): the loaded
// library and its entry points, the retained primary context every call makes
// current, and the handles a device hands out -- loaded kernels, streams and
// events -- each releasing its driver object when it goes.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "DeviceImpl.h"
#include "DriverLoader.h"
#include "tessera/support/Environment.h"

namespace tessera::rt::cudadrv {

using namespace cuabi;

inline constexpr const char* kEnvVar = tessera::env::name(tessera::env::Var::CudaLibrary);

struct CudaDriver {
  driver::Library lib;
#define TESSERA_FIELD(field, sym, R, params) PFN_##field field = nullptr;
  TESSERA_CUDA_FUNCTIONS(TESSERA_FIELD)
  // Null where the driver lacks them (DriverLoader.h).
  TESSERA_CUDA_OPTIONAL_FUNCTIONS(TESSERA_FIELD)
#undef TESSERA_FIELD
  PFN_EventElapsedTime EventElapsedTime = nullptr;
  int count = 0;
  /// Why there is no usable device (count == 0); empty otherwise.
  std::string unavailable;

  explicit CudaDriver(const std::string& override) {
    lib = driver::openLibrary(override, kEnvVar, {"libcuda.so.1"});
    if (!lib.handle) {
      unavailable = "CUDA driver not available: " + lib.error;
      return;
    }
    std::string missing;
#define TESSERA_RESOLVE(field, sym, R, params)                          \
  field = reinterpret_cast<PFN_##field>(driver::findSymbol(lib, #sym)); \
  if (!field) missing += std::string(missing.empty() ? "" : ", ") + #sym;
    TESSERA_CUDA_FUNCTIONS(TESSERA_RESOLVE)
#undef TESSERA_RESOLVE
    for (const char* sym : {"cuEventElapsedTime_v2", "cuEventElapsedTime"})
      if (!EventElapsedTime) EventElapsedTime = reinterpret_cast<PFN_EventElapsedTime>(driver::findSymbol(lib, sym));
#define TESSERA_RESOLVE_OPTIONAL(field, sym, R, params) \
  field = reinterpret_cast<PFN_##field>(driver::findSymbol(lib, #sym));
    TESSERA_CUDA_OPTIONAL_FUNCTIONS(TESSERA_RESOLVE_OPTIONAL)
#undef TESSERA_RESOLVE_OPTIONAL
    if (!EventElapsedTime) missing += std::string(missing.empty() ? "" : ", ") + "cuEventElapsedTime";
    if (!missing.empty()) {
      unavailable = "CUDA driver not available: " + lib.path + " lacks " + missing +
                    " (the driver is too old; Tessera needs CUDA 11 or newer)";
      return;
    }
    if (CUresult r = Init(0); r != CUDA_SUCCESS) {
      unavailable = "cuInit failed: " + errorText(r);
      return;
    }
    int n = 0;
    if (CUresult r = DeviceGetCount(&n); r != CUDA_SUCCESS) {
      unavailable = "cuDeviceGetCount failed: " + errorText(r);
      return;
    }
    if (n <= 0) {
      unavailable = "the CUDA driver (" + lib.path + ") reports no device";
      return;
    }
    count = n;
  }

  /// "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
  std::string errorText(CUresult r) const {
    const char* nm = nullptr;
    const char* desc = nullptr;
    if (!GetErrorName || GetErrorName(r, &nm) != CUDA_SUCCESS || !nm) nm = nullptr;
    if (!GetErrorString || GetErrorString(r, &desc) != CUDA_SUCCESS || !desc) desc = nullptr;
    std::string s = nm ? nm : "CUresult " + std::to_string(r);
    if (desc) s += std::string(" (") + desc + ")";
    return s;
  }
};

inline std::shared_ptr<const CudaDriver> cudaDriver() { return driver::cachedDriver<CudaDriver>(kEnvVar); }

/// A retained primary context, shared by a device and its loaded modules so
/// it outlives both.
struct CudaContext {
  std::shared_ptr<const CudaDriver> drv;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  std::string label;  // "cuda:0 <device name>", the prefix of every error

  CudaContext(std::shared_ptr<const CudaDriver> d, CUdevice dv, std::string l)
      : drv(std::move(d)), dev(dv), label(std::move(l)) {}
  ~CudaContext() {
    // Errors are ignored: at process exit the driver may already have shut
    // down (CUDA_ERROR_DEINITIALIZED), and a destructor must not throw.
    if (ctx) drv->DevicePrimaryCtxRelease(dev);
  }
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  [[noreturn]] void fail(CUresult r, const std::string& call, const std::string& what = {}) const {
    throw DeviceError(label + ": " + (what.empty() ? "" : what + ": ") + call + " failed: " + drv->errorText(r));
  }
  void check(CUresult r, const char* call, const std::string& what = {}) const {
    if (r != CUDA_SUCCESS) fail(r, call, what);
  }
  /// Makes this context current on the calling thread.
  void enter() const { check(drv->CtxSetCurrent(ctx), "cuCtxSetCurrent"); }
};

struct CudaKernel final : KernelState {
  std::shared_ptr<CudaContext> ctx;
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  unsigned threadsPerBlock = 1;
  unsigned sharedBytes = 0;
  std::string symbol;

  ~CudaKernel() override {
    if (module && ctx->drv->CtxSetCurrent(ctx->ctx) == CUDA_SUCCESS) ctx->drv->ModuleUnload(module);
  }
};

/// A CUstream: Tessera's own (owned) or the caller's (wrapped). Until it is
/// synchronised it holds what its queued launches use, and it remembers the
/// last kernel launched so that a fault found at synchronisation names it.
struct CudaStream final : DriverStream {
  std::shared_ptr<CudaContext> ctx;
  CUstream stream = nullptr;
  bool owned = false;

  CudaStream(std::shared_ptr<CudaContext> c, CUstream s, bool own) : ctx(std::move(c)), stream(s), owned(own) {}
  ~CudaStream() override {
    if (owned && ctx->drv->CtxSetCurrent(ctx->ctx) == CUDA_SUCCESS) ctx->drv->StreamDestroy(stream);
  }
  void* native() const override { return stream; }

  void synchronize() override {
    ctx->enter();
    const CUresult r = ctx->drv->StreamSynchronize(stream);
    const std::string launch = release().second;
    if (r != CUDA_SUCCESS) ctx->fail(r, "cuStreamSynchronize", launch.empty() ? "" : "running " + launch);
  }
};

struct CudaEvent final : EventImpl {
  std::shared_ptr<CudaContext> ctx;
  CUevent event = nullptr;
  ~CudaEvent() override {
    if (event && ctx->drv->CtxSetCurrent(ctx->ctx) == CUDA_SUCCESS) ctx->drv->EventDestroy(event);
  }
};

}  // namespace tessera::rt::cudadrv

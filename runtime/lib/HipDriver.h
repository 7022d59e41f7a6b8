// The HIP runtime as the HIP device uses it (runtime-private): the loaded
// library and its entry points, the device every call selects, and the
// handles a device hands out -- loaded kernels, streams and events -- each
// releasing its HIP object when it goes.
#pragma once

#include <cctype>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "DeviceImpl.h"
#include "DriverLoader.h"
#include "tessera/support/Environment.h"

namespace tessera::rt::hipdrv {

using namespace hipabi;

inline constexpr const char* kEnvVar = tessera::env::name(tessera::env::Var::HipLibrary);

struct HipDriver {
  driver::Library lib;
#define TESSERA_FIELD(field, sym, R, params) PFN_##field field = nullptr;
  TESSERA_HIP_FUNCTIONS(TESSERA_FIELD)
#undef TESSERA_FIELD
  PFN_GetDeviceProperties GetDeviceProperties = nullptr;
  int count = 0;
  std::string unavailable;  // why count is 0; empty otherwise

  explicit HipDriver(const std::string& override) {
    // Newest ABI first; the unversioned name is what a development install
    // (or a ROCm tree on LD_LIBRARY_PATH) provides.
    lib = driver::openLibrary(override, kEnvVar, {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"});
    if (!lib.handle) {
      unavailable = "HIP runtime not available: " + lib.error;
      return;
    }
    std::string missing;
#define TESSERA_RESOLVE(field, sym, R, params)                          \
  field = reinterpret_cast<PFN_##field>(driver::findSymbol(lib, #sym)); \
  if (!field) missing += std::string(missing.empty() ? "" : ", ") + #sym;
    TESSERA_HIP_FUNCTIONS(TESSERA_RESOLVE)
#undef TESSERA_RESOLVE
    // HIP 6 exports its new layout under a new name and keeps the old name
    // for the HIP 5 layout; the buffer we pass fits either.
    GetDeviceProperties =
        reinterpret_cast<PFN_GetDeviceProperties>(driver::findSymbol(lib, "hipGetDevicePropertiesR0600"));
    if (!GetDeviceProperties)
      GetDeviceProperties =
          reinterpret_cast<PFN_GetDeviceProperties>(driver::findSymbol(lib, "hipGetDeviceProperties"));
    if (!GetDeviceProperties) missing += std::string(missing.empty() ? "" : ", ") + "hipGetDeviceProperties";
    if (!missing.empty()) {
      unavailable = "HIP runtime not available: " + lib.path + " lacks " + missing;
      return;
    }
    // No hipInit: the runtime initialises itself on first use, and HIP 5
    // answers hipInit with hipErrorInvalidDevice when there is no GPU, which
    // would hide the clearer hipErrorNoDevice below.
    int n = 0;
    if (hipError_t r = GetDeviceCount(&n); r != hipSuccess) {
      unavailable = "hipGetDeviceCount failed: " + errorText(r);
      if (r == hipErrorNoDevice) unavailable += " (no AMD GPU visible to " + lib.path + ")";
      return;
    }
    if (n <= 0) {
      unavailable = "the HIP runtime (" + lib.path + ") reports no device";
      return;
    }
    count = n;
  }

  /// "hipErrorOutOfMemory (out of memory)"; HIP 5 returns the name from
  /// both calls, so the description is shown only when it adds something.
  std::string errorText(hipError_t r) const {
    const char* nm = GetErrorName ? GetErrorName(r) : nullptr;
    const char* desc = GetErrorString ? GetErrorString(r) : nullptr;
    std::string s = nm ? nm : "hipError_t " + std::to_string(r);
    if (desc && (!nm || std::strcmp(nm, desc) != 0)) s += std::string(" (") + desc + ")";
    return s;
  }
};

inline std::shared_ptr<const HipDriver> hipDriver() { return driver::cachedDriver<HipDriver>(kEnvVar); }

/// The architecture ("gfx90a") from hipGetDeviceProperties without relying
/// on hipDeviceProp_t's layout, which HIP 6 changed (and the symbol with
/// it): the structure is written into an oversized zeroed buffer and its
/// gcnArchName field ("gfx90a:sramecc+:xnack-") is found by content -- the
/// only string in it that starts with "gfx", runs over [0-9a-z] and ends at
/// ':' or NUL. hipDeviceGetAttribute has no attribute giving this name
/// (hipDeviceAttributeGcnArch is a deprecated number that cannot spell
/// gfx90a, and the attribute enum itself was renumbered in HIP 5).
inline std::string findGfxArch(const std::vector<char>& props) {
  const size_t n = props.size();
  for (size_t i = 0; i + 3 < n; ++i) {
    if (std::memcmp(&props[i], "gfx", 3) != 0) continue;
    if (i > 0 && (std::isalnum(static_cast<unsigned char>(props[i - 1])))) continue;
    size_t j = i + 3;
    while (j < n &&
           (std::isdigit(static_cast<unsigned char>(props[j])) || std::islower(static_cast<unsigned char>(props[j]))))
      ++j;
    if (j - i >= 6 && j < n && (props[j] == ':' || props[j] == '\0')) return std::string(&props[i], j - i);
  }
  return {};
}

struct HipContext {
  std::shared_ptr<const HipDriver> drv;
  int ordinal = 0;
  std::string label;  // "hip:0 <device name>"

  [[noreturn]] void fail(hipError_t r, const std::string& call, const std::string& what = {}) const {
    throw DeviceError(label + ": " + (what.empty() ? "" : what + ": ") + call + " failed: " + drv->errorText(r));
  }
  void check(hipError_t r, const char* call, const std::string& what = {}) const {
    if (r != hipSuccess) fail(r, call, what);
  }
  void enter() const { check(drv->SetDevice(ordinal), "hipSetDevice"); }
};

struct HipKernel final : KernelState {
  std::shared_ptr<HipContext> ctx;
  hipModule_t module = nullptr;
  hipFunction_t fn = nullptr;
  unsigned threadsPerBlock = 1;
  unsigned sharedBytes = 0;

  ~HipKernel() override {
    if (module && ctx->drv->SetDevice(ctx->ordinal) == hipSuccess) ctx->drv->ModuleUnload(module);
  }
};

/// A hipStream_t, Tessera's own or the caller's; see CudaStream.
struct HipStream final : DriverStream {
  std::shared_ptr<HipContext> ctx;
  hipStream_t stream = nullptr;
  bool owned = false;

  HipStream(std::shared_ptr<HipContext> c, hipStream_t s, bool own) : ctx(std::move(c)), stream(s), owned(own) {}
  ~HipStream() override {
    if (owned && ctx->drv->SetDevice(ctx->ordinal) == hipSuccess) ctx->drv->StreamDestroy(stream);
  }
  void* native() const override { return stream; }
  void synchronize() override {
    ctx->enter();
    const hipError_t r = ctx->drv->StreamSynchronize(stream);
    const std::string launch = release().second;
    if (r != hipSuccess) ctx->fail(r, "hipStreamSynchronize", launch.empty() ? "" : "running " + launch);
  }
};

struct HipEvent final : EventImpl {
  std::shared_ptr<HipContext> ctx;
  hipEvent_t event = nullptr;
  ~HipEvent() override {
    if (event && ctx->drv->SetDevice(ctx->ordinal) == hipSuccess) ctx->drv->EventDestroy(event);
  }
};

}  // namespace tessera::rt::hipdrv

// A stand-in for libcuda.so.1, loaded by the runtime through
// TESSERA_CUDA_LIBRARY, so the whole CUDA device (driver loading, contexts,
// memory, module loading, launch configuration and parameter passing) is
// tested on machines without an NVIDIA GPU.
//
// It behaves like the driver where the runtime depends on it:
//  * two devices, compute capability 8.0 and 9.0;
//  * every call but cuInit/cuDevice* needs a current context on the calling
//    thread (CUDA_ERROR_INVALID_CONTEXT otherwise), as the real driver does;
//  * device addresses are NOT host addresses (dereferencing one crashes), and
//    new allocations hold garbage (0xCD), not zeros;
//  * cuModuleLoadDataEx fails with a JIT error log for PTX containing
//    "FAKE_SYNTAX_ERROR"; cuModuleGetFunction finds ".entry <name>";
//  * cuTensorMapEncodeTiled checks its arguments as cuda.h documents and
//    writes them into the map (FakeTensorMap, fake_driver.h);
//  * cuLaunchKernel reads each parameter in the width its PTX declares and
//    records the launch (tensor maps, `.param .align 64 .b8 x[128]`, in
//    their own list); a kernel named "vadd" (out[i] = a[i] + b[i] for
//    i < n, f32) is carried out on the fake memory so results can be checked,
//    one named "profiled" writes one scope per warp into its profile buffer,
//    and one named "checked_oob" writes a bounds-check record naming a store
//    past its second argument into the record its last parameter points at;
//  * streams run their work at once (a GPU may too), so events complete when
//    recorded; a fake clock advances 1 ms per launch, so the elapsed time
//    between two events counts the launches between them;
//  * each allocation knows its device, for cuPointerGetAttribute and
//    cuMemGetAddressRange; every copy is counted, so a test can show that
//    wrapped memory was used in place.
// Built as FAKE_CUDA_NO_DEVICE, cuInit fails with CUDA_ERROR_NO_DEVICE.
//
// Its functions have the very types the runtime calls them through
// (runtime/lib/DriverLoader.h), which are cuda.h's: a device pointer is an
// unsigned long long, not a uint64_t (unsigned long here), and clang's
// -fsanitize=function, which checks each call through a pointer against the
// callee's type, tells the two apart. Everything it allocates is freed:
// functions with their module, modules and streams when destroyed, and what
// the runtime never destroys when the library is unloaded.

#include <algorithm>

#include "fake_cuda_state.h"

using namespace fakecuda;

extern "C" {

CUresult cuInit(unsigned flags) {
#ifdef FAKE_CUDA_NO_DEVICE
  return NO_DEVICE;
#endif
  if (flags != 0) return INVALID_VALUE;
  std::lock_guard<std::mutex> l(mu);
  initialised = true;
  return OK;
}

CUresult cuDeviceGetCount(int* n) {
  if (!initialised) return NOT_INITIALIZED;
  *n = 2;
  return OK;
}

CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (!initialised) return NOT_INITIALIZED;
  if (ordinal < 0 || ordinal > 1) return INVALID_DEVICE;
  *dev = ordinal;
  return OK;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (dev < 0 || dev > 1) return INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "%s", dev == 0 ? "Fake A100" : "Fake H100");
  return OK;
}

CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice dev) {
  if (dev < 0 || dev > 1) return INVALID_DEVICE;
  switch (attr) {
    case 5: *v = 2147483647; return OK;             // MAX_GRID_DIM_X
    case 16: *v = dev == 0 ? 108 : 132; return OK;  // MULTIPROCESSOR_COUNT (A100, H100 SXM)
    case 6:
    case 7: *v = 65535; return OK;                                // MAX_GRID_DIM_Y/Z
    case 75: *v = dev == 0 ? 8 : 9; return OK;                    // COMPUTE_CAPABILITY_MAJOR
    case 76: *v = 0; return OK;                                   // COMPUTE_CAPABILITY_MINOR
    case 97: *v = dev == 0 ? 163 * 1024 : 227 * 1024; return OK;  // MAX_SHARED_..._OPTIN
  }
  return INVALID_VALUE;
}

CUresult cuDevicePrimaryCtxRetain(void** ctx, CUdevice dev) {
  if (dev < 0 || dev > 1) return INVALID_DEVICE;
  std::lock_guard<std::mutex> l(mu);
  ++contexts[dev].retains;
  *ctx = &contexts[dev];
  return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (dev < 0 || dev > 1) return INVALID_DEVICE;
  std::lock_guard<std::mutex> l(mu);
  if (contexts[dev].retains == 0) return INVALID_CONTEXT;
  --contexts[dev].retains;
  return OK;
}

CUresult cuCtxSetCurrent(void* ctx) {
  current = static_cast<Ctx*>(ctx);
  return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  NEED_CONTEXT();
  if (bytes == 0) return INVALID_VALUE;
  if (bytes > (size_t{1} << 30)) return OUT_OF_MEMORY;
  std::lock_guard<std::mutex> l(mu);
  *p = allocate(current->device, bytes);
  return OK;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  return memory.erase(p) ? OK : INVALID_VALUE;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  uint8_t* d = resolve(dst, n);
  if (!d) return INVALID_VALUE;
  std::memcpy(d, src, n);
  ++copies;
  return OK;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  uint8_t* s = resolve(src, n);
  if (!s) return INVALID_VALUE;
  std::memcpy(dst, s, n);
  ++copies;
  return OK;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  uint8_t* d = resolve(dst, n);
  const uint8_t* s = resolve(src, n);
  if (!d || !s) return INVALID_VALUE;
  std::memmove(d, s, n);
  ++copies;
  return OK;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  uint8_t* d = resolve(dst, n);
  if (!d) return INVALID_VALUE;
  std::memset(d, v, n);
  return OK;
}

CUresult cuStreamCreate(void** s, unsigned flags) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  auto stream = std::make_unique<Stream>(Stream{current});
  *s = stream.get();
  liveStreams[stream.get()] = std::move(stream);
  ++streams;
  return OK;
}

CUresult cuStreamDestroy_v2(void* s) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  if (!liveStreams.erase(s)) return INVALID_HANDLE;
  --streams;
  return OK;
}

CUresult cuStreamSynchronize(void* s) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  if (static_cast<Stream*>(s)->ctx != current) return INVALID_HANDLE;
  return takeSyncFailure();
}

CUresult cuCtxSynchronize() {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  return takeSyncFailure();
}
CUresult cuModuleLoadDataEx(void** mod, const void* image, unsigned n, int* opts, void** vals) {
  NEED_CONTEXT();
  const std::string ptx = static_cast<const char*>(image);
  if (ptx.find("FAKE_SYNTAX_ERROR") != std::string::npos) {
    const char* log = "ptxas application ptx input, line 7; error   : Unknown symbol 'FAKE_SYNTAX_ERROR'";
    for (unsigned i = 0; i < n; ++i) {
      if (opts[i] != 5) continue;  // CU_JIT_ERROR_LOG_BUFFER
      for (unsigned j = 0; j < n; ++j)
        if (opts[j] == 6) {  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
          const size_t cap = reinterpret_cast<uintptr_t>(vals[j]);
          std::snprintf(static_cast<char*>(vals[i]), cap, "%s", log);
          vals[j] = reinterpret_cast<void*>(std::strlen(log) + 1);
        }
    }
    return INVALID_PTX;
  }
  std::lock_guard<std::mutex> l(mu);
  auto m = std::make_unique<Module>();
  m->ptx = ptx;
  *mod = m.get();
  liveModules[m.get()] = std::move(m);
  ++modules;
  return OK;
}

CUresult cuModuleUnload(void* mod) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  if (!liveModules.erase(mod)) return INVALID_HANDLE;  // frees its functions too
  --modules;
  return OK;
}

CUresult cuModuleGetFunction(void** fn, void* mod, const char* name) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  auto* m = static_cast<Module*>(mod);
  auto f = std::make_unique<Function>(Function{name, {}, 48 * 1024});
  if (!parseEntry(m->ptx, name, f->paramBytes, f->cluster)) return NOT_FOUND;
  *fn = f.get();
  m->functions.push_back(std::move(f));
  return OK;
}

CUresult cuFuncGetAttribute(int* v, int attr, void* fn) {
  NEED_CONTEXT();
  if (attr == 0) {  // MAX_THREADS_PER_BLOCK
    *v = 1024;
    return OK;
  }
  return INVALID_VALUE;
}

// Occupancy as threads and shared memory limit it: 2048 threads and 164
// KiB (device 0) / 228 KiB (device 1) per SM, at most 32 blocks.
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void* fn, int blockSize, size_t shared) {
  NEED_CONTEXT();
  if (!fn || blockSize <= 0 || blockSize > 1024) return INVALID_VALUE;
  const size_t perSm = current->device == 0 ? 164 * 1024 : 228 * 1024;
  int b = std::min(32, 2048 / blockSize);
  if (shared > 0) b = std::min<int>(b, static_cast<int>(perSm / shared));
  *blocks = b;
  return OK;
}

CUresult cuFuncSetAttribute(void* fn, int attr, int value) {
  NEED_CONTEXT();
  if (attr != 8) return INVALID_VALUE;  // MAX_DYNAMIC_SHARED_SIZE_BYTES
  const int optin = current->device == 0 ? 163 * 1024 : 227 * 1024;
  if (value < 0 || value > optin) return INVALID_VALUE;
  std::lock_guard<std::mutex> l(mu);
  static_cast<Function*>(fn)->maxDynamicShared = value;
  sharedOptIn = value;
  return OK;
}

}  // extern "C"

namespace {

// The shape a launch runs its clusters in: the attribute of cuLaunchKernelEx
// (`attr`, null without one), else the kernel's .reqnctapercluster, else
// {1, 1, 1}; checked as the driver does: on compute capability 9.0 and
// newer, the attribute equal to a required shape, no dimension 0, at most 8
// blocks (the portable limit: the fake allows no more), each grid dimension
// a multiple. `grid` null: a query without a grid (occupancy).
CUresult clusterOf(const Function& fn, const unsigned* attr, const unsigned* grid, unsigned out[3]) {
  const bool required = fn.cluster[0] != 0;
  if (attr && required && !std::equal(attr, attr + 3, fn.cluster)) return INVALID_CLUSTER_SIZE;
  const unsigned* c = attr ? attr : required ? fn.cluster : nullptr;
  out[0] = out[1] = out[2] = 1;
  if (!c) return OK;
  if (current->device == 0) return INVALID_VALUE;  // compute capability 8.0: no clusters
  if (!c[0] || !c[1] || !c[2] || uint64_t{c[0]} * c[1] * c[2] > 8) return INVALID_CLUSTER_SIZE;
  for (int d = 0; grid && d < 3; ++d)
    if (grid[d] % c[d]) return INVALID_CLUSTER_SIZE;
  std::copy(c, c + 3, out);
  return OK;
}

// The launch both entry points make; `clusterAttr` is cuLaunchKernelEx's
// cluster attribute (null: none, or cuLaunchKernel).
CUresult launch(void* fnp, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared, void* stream, void** params, void** extra, bool ex, const unsigned* clusterAttr) {
  NEED_CONTEXT();
  auto* fn = static_cast<Function*>(fnp);
  if (!fn) return INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz || uint64_t{bx} * by * bz > 1024) return INVALID_VALUE;
  const unsigned grid[3] = {gx, gy, gz};
  unsigned cluster[3];
  if (CUresult r = clusterOf(*fn, clusterAttr, grid, cluster); r != OK) return r;
  if (static_cast<int>(shared) > fn->maxDynamicShared) return INVALID_VALUE;
  if (!stream || static_cast<Stream*>(stream)->ctx != current) return INVALID_HANDLE;
  if (!params || extra) return INVALID_VALUE;
  std::lock_guard<std::mutex> l(mu);
  FakeLaunch r{};
  std::snprintf(r.kernel, sizeof r.kernel, "%s", fn->name.c_str());
  r.device = current->device;
  r.grid[0] = gx, r.grid[1] = gy, r.grid[2] = gz;
  r.block[0] = bx, r.block[1] = by, r.block[2] = bz;
  r.sharedBytes = shared;
  r.numParams = static_cast<int>(fn->paramBytes.size());
  r.launchEx = ex;
  if (clusterAttr) std::copy(clusterAttr, clusterAttr + 3, r.cluster);
  for (int i = 0; i < r.numParams && i < 16; ++i) {
    r.paramBytes[i] = fn->paramBytes[i];
    if (fn->paramBytes[i] == 128) {  // a tensor map, passed by value
      if (r.numTensorMaps < 4) std::memcpy(&r.tensorMaps[r.numTensorMaps++], params[i], sizeof(FakeTensorMap));
      continue;
    }
    if (fn->paramBytes[i] > 8) return INVALID_VALUE;          // no other blobs in these tests
    std::memcpy(&r.params[i], params[i], fn->paramBytes[i]);  // only the declared width is read
  }
  last = r;
  ++launches;
  ++static_cast<Stream*>(stream)->launches;
  clockMs += 1.0;
  if (fn->name == "checked_oob" && r.numParams == 6) {
    // A bounds-checked kernel (tessera/support/BoundsCheck.h) whose thread 5
    // of program (1, 0, 0) found its store (op 1) one past the end of
    // argument 1: what it writes into the record (the last parameter).
    if (uint8_t* rec = resolve(r.params[5], 48)) {
      const int32_t head[4] = {1, 1, 1, 0};                      // violated, opId, arg, reserved (offset 8)
      const int64_t offset = static_cast<int64_t>(r.params[4]);  // the extent of argument 1
      const int32_t who[4] = {5, 1, 0, 0};                       // thread, program x, y, z (offset 32)
      std::memcpy(rec + 8, head, sizeof head);
      std::memcpy(rec + 24, &offset, sizeof offset);
      std::memcpy(rec + 32, who, sizeof who);
    } else {
      failNextSync = ILLEGAL_ADDRESS;
    }
  }
  if (fn->name == "profiled" && r.numParams == 2) {
    // A profiled kernel (tessera/support/Profile.h) with one scope: every
    // warp of each recorded program records its begin at 1000 + 100 p + w
    // ns and its end 500 ns later, on SM 7 + p.
    uint32_t head[3];
    if (const uint8_t* h = resolve(r.params[1], sizeof head)) {
      std::memcpy(head, h, sizeof head);
      const uint64_t cap = head[0], warps = head[1], programs = head[2], slots = warps * (programs + 1);
      uint8_t* buf = resolve(r.params[1], 16 + slots * 16 + slots * cap * 16);
      for (uint64_t p = 0; buf && cap >= 2 && p < programs && p < gx; ++p)
        for (uint64_t w = 0; w < warps; ++w) {
          const uint64_t slot = p * warps + w;
          const uint32_t sh[2] = {2, static_cast<uint32_t>(7 + p)};
          std::memcpy(buf + 16 + slot * 16, sh, sizeof sh);
          uint8_t* rec = buf + 16 + slots * 16 + slot * cap * 16;
          for (uint64_t e = 0; e < 2; ++e) {
            const uint64_t t = 1000 + 100 * p + w + 500 * e;
            const uint32_t ev = static_cast<uint32_t>(e);  // scope 0, begin then end
            std::memcpy(rec + 16 * e, &t, 8);
            std::memcpy(rec + 16 * e + 8, &ev, 4);
          }
        }
      if (!buf) failNextSync = ILLEGAL_ADDRESS;
    } else {
      failNextSync = ILLEGAL_ADDRESS;
    }
  }
  if (fn->name == "vadd" && r.numParams == 4) {
    const uint32_t n = static_cast<uint32_t>(r.params[3]);
    const uint64_t threads = uint64_t{gx} * gy * gz * bx * by * bz;
    for (uint64_t i = 0; i < threads && i < n; ++i) {
      const uint8_t* a = resolve(r.params[0] + 4 * i, 4);
      const uint8_t* b = resolve(r.params[1] + 4 * i, 4);
      uint8_t* o = resolve(r.params[2] + 4 * i, 4);
      if (!a || !b || !o) {
        failNextSync = ILLEGAL_ADDRESS;  // reported by the next synchronisation, as on a GPU
        break;
      }
      float x, y;
      std::memcpy(&x, a, 4);
      std::memcpy(&y, b, 4);
      const float z = x + y;
      std::memcpy(o, &z, 4);
    }
  }
  return OK;
}

// cuda.h's CUlaunchConfig and CUlaunchAttribute (their layouts; the
// attribute's value is a 64-byte union, of which only clusterDim is read).
struct LaunchAttribute {
  int id;
  char pad[4];
  union alignas(8) {
    char bytes[64];
    unsigned clusterDim[3];
  } value;
};
struct LaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void* hStream;
  LaunchAttribute* attrs;
  unsigned numAttrs;
};
constexpr int kClusterDimension = 4;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION

// The cluster attribute of `config` (null without one); INVALID_VALUE for
// an attribute the fake does not model, or a list that is not there.
CUresult clusterAttribute(const LaunchConfig& config, const unsigned** out) {
  *out = nullptr;
  if (config.numAttrs && !config.attrs) return INVALID_VALUE;
  for (unsigned i = 0; i < config.numAttrs; ++i) {
    if (config.attrs[i].id != kClusterDimension) return INVALID_VALUE;
    *out = config.attrs[i].value.clusterDim;
  }
  return OK;
}

}  // namespace

extern "C" {

CUresult cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void* stream, void** params, void** extra) {
  return launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra, false, nullptr);
}

CUresult cuLaunchKernelEx(const void* configp, void* fn, void** params, void** extra) {
  NEED_CONTEXT();
  if (!configp) return INVALID_VALUE;
  const auto& c = *static_cast<const LaunchConfig*>(configp);
  const unsigned* cluster = nullptr;
  if (CUresult r = clusterAttribute(c, &cluster); r != OK) return r;
  return launch(fn, c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.blockDimY, c.blockDimZ, c.sharedMemBytes,
                c.hStream, params, extra, true, cluster);
}

// Clusters live within one GPC: the fake's SMs form GPCs of 16 (device 1:
// 8 of them, its other 4 SMs take no cluster), each holding as many whole
// clusters as its SMs' blocks (cuOccupancyMaxActiveBlocksPerMultiprocessor)
// allow. The cluster comes from the attribute or the kernel's required
// shape; one of them must be there.
CUresult cuOccupancyMaxActiveClusters(int* clusters, void* fn, const void* configp) {
  NEED_CONTEXT();
  if (!clusters || !fn || !configp) return INVALID_VALUE;
  const auto& c = *static_cast<const LaunchConfig*>(configp);
  const unsigned* attr = nullptr;
  if (CUresult r = clusterAttribute(c, &attr); r != OK) return r;
  if (!attr && !static_cast<Function*>(fn)->cluster[0]) return INVALID_CLUSTER_SIZE;
  unsigned cluster[3];
  if (CUresult r = clusterOf(*static_cast<Function*>(fn), attr, nullptr, cluster); r != OK) return r;
  int perSm = 0;
  const uint64_t threads = uint64_t{c.blockDimX} * c.blockDimY * c.blockDimZ;
  if (threads == 0 || threads > 1024) return INVALID_VALUE;
  if (CUresult r = cuOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, fn, static_cast<int>(threads), c.sharedMemBytes);
      r != OK)
    return r;
  const int sms = current->device == 0 ? 108 : 132, gpcs = sms / 16;
  *clusters = gpcs * (16 * perSm / static_cast<int>(cluster[0] * cluster[1] * cluster[2]));
  return OK;
}

// Validates its arguments as cuda.h documents (12.x) and records them in
// the map's 128 bytes as a FakeTensorMap (the real encoding is opaque).
CUresult cuTensorMapEncodeTiled(void* map, int dataType, uint32_t rank, void* address, const uint64_t* dims,
                                const uint64_t* strides, const uint32_t* box, const uint32_t* elementStrides,
                                int interleave, int swizzle, int l2Promotion, int oobFill) {
  NEED_CONTEXT();
  // Element bytes of CU_TENSOR_MAP_DATA_TYPE_UINT8 .. TFLOAT32_FTZ (the
  // packed 4- and 6-bit types are not modelled).
  static const unsigned kElemBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  if (!map || reinterpret_cast<uintptr_t>(map) % 64) return INVALID_VALUE;
  if (dataType < 0 || dataType >= 13) return INVALID_VALUE;
  const uint64_t eb = kElemBytes[dataType];
  if (interleave < 0 || interleave > 2 || swizzle < 0 || swizzle > 6 || l2Promotion < 0 || l2Promotion > 3 ||
      oobFill < 0 || oobFill > 1)
    return INVALID_VALUE;
  if (rank < 1 || rank > 5 || (interleave != 0 && rank < 3)) return INVALID_VALUE;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(address);
  if (addr % (interleave == 2 ? 32 : 16)) return INVALID_VALUE;
  if (!dims || !box || !elementStrides || (rank > 1 && !strides)) return INVALID_VALUE;
  for (uint32_t d = 0; d < rank; ++d) {
    if (dims[d] == 0 || dims[d] > (uint64_t{1} << 32)) return INVALID_VALUE;
    if (box[d] == 0 || box[d] > 256) return INVALID_VALUE;
    if (elementStrides[d] == 0 || elementStrides[d] > 8) return INVALID_VALUE;
  }
  for (uint32_t d = 0; d + 1 < rank; ++d)
    if (strides[d] % (interleave == 2 ? 32 : 16) || strides[d] >= (uint64_t{1} << 40)) return INVALID_VALUE;
  if (interleave == 0) {
    if (box[0] * eb % 16) return INVALID_VALUE;
    // The inner box must fit the swizzle span.
    const uint64_t span = swizzle == 1 ? 32 : swizzle == 2 ? 64 : swizzle >= 3 ? 128 : 0;
    if (span && box[0] * eb > span) return INVALID_VALUE;
  }
  if (interleave == 2 && swizzle != 1) return INVALID_VALUE;
  // NAN_REQUEST_ZERO_FMA: floating-point types only.
  if (oobFill == 1 && !(dataType >= 6 && dataType <= 12)) return INVALID_VALUE;

  FakeTensorMap t;
  std::memset(&t, 0, sizeof t);
  t.magic = FakeTensorMap::kMagic;
  t.address = addr;
  for (uint32_t d = 0; d < rank; ++d) {
    t.dims[d] = dims[d];
    t.box[d] = static_cast<uint16_t>(box[d]);
    t.elementStrides[d] = static_cast<uint8_t>(elementStrides[d]);
    if (d + 1 < rank) t.strides[d] = strides[d];
  }
  t.dataType = static_cast<uint8_t>(dataType);
  t.rank = static_cast<uint8_t>(rank);
  t.interleave = static_cast<uint8_t>(interleave);
  t.swizzle = static_cast<uint8_t>(swizzle);
  t.l2Promotion = static_cast<uint8_t>(l2Promotion);
  t.oobFill = static_cast<uint8_t>(oobFill);
  std::memset(map, 0, 128);
  std::memcpy(map, &t, sizeof t);
  std::lock_guard<std::mutex> l(mu);
  ++tensorMapEncodes;
  return OK;
}

CUresult cuGetErrorName(CUresult e, const char** s) {
  switch (e) {
    case OK: *s = "CUDA_SUCCESS"; return OK;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
    case NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return OK;
    case NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return OK;
    case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return OK;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
    case INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; return OK;
    case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return OK;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
    case ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return OK;
    case INVALID_CLUSTER_SIZE: *s = "CUDA_ERROR_INVALID_CLUSTER_SIZE"; return OK;
  }
  *s = nullptr;
  return INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult e, const char** s) {
  switch (e) {
    case NO_DEVICE: *s = "no CUDA-capable device is detected"; return OK;
    case INVALID_PTX: *s = "a PTX JIT compilation failed"; return OK;
    case OUT_OF_MEMORY: *s = "out of memory"; return OK;
    case ILLEGAL_ADDRESS: *s = "an illegal memory access was encountered"; return OK;
    case INVALID_CONTEXT: *s = "invalid device context"; return OK;
  }
  return cuGetErrorName(e, s);
}

// ---- inspection, for the tests ----

FAKE_EXPORT int fake_cuda_last_launch(FakeLaunch* out) {
  std::lock_guard<std::mutex> l(mu);
  *out = last;
  return launches;
}
FAKE_EXPORT int fake_cuda_live_allocations() {
  std::lock_guard<std::mutex> l(mu);
  return static_cast<int>(memory.size());
}
FAKE_EXPORT int fake_cuda_live_streams() { return streams; }
FAKE_EXPORT int fake_cuda_live_modules() { return modules; }
FAKE_EXPORT int fake_cuda_context_retains(int dev) { return contexts[dev].retains; }
FAKE_EXPORT int fake_cuda_shared_optin() { return sharedOptIn; }
FAKE_EXPORT int fake_cuda_tensor_map_encodes() {
  std::lock_guard<std::mutex> l(mu);
  return tensorMapEncodes;
}
FAKE_EXPORT void fake_cuda_fail_next_sync(int code) {
  std::lock_guard<std::mutex> l(mu);
  failNextSync = code;
}

}  // extern "C"

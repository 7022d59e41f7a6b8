// Loading GPU driver libraries at run time (runtime-private).
//
// The runtime never links libcuda or libamdhip64: the project has to build
// and run on machines that have neither. Each driver is opened with dlopen
// and every entry point resolved with dlsym, so the handful of types, enum
// values and function signatures we call are declared here rather than taken
// from cuda.h / hip_runtime_api.h. tests/runtime/gpu_driver_test.cpp checks
// every declaration below against the vendor headers when they are present.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace tessera::rt::driver {

/// A shared library opened with dlopen. Driver libraries are never closed:
/// they start threads and register atexit handlers, and unloading them while
/// the process still runs is unsupported by both vendors.
struct Library {
  void* handle = nullptr;
  std::string path;   // what was opened (the name that loaded)
  std::string error;  // why nothing loaded, when handle is null
};

/// Opens `override` alone when it is non-empty (the value of `envVar`, named
/// in the error), otherwise the first of `names` that loads; the error lists
/// every attempt with its dlerror() text.
Library openLibrary(const std::string& override, const char* envVar, std::initializer_list<const char*> names);

/// dlsym; nullptr when absent.
void* findSymbol(const Library& lib, const char* name);

/// One driver object per library path: the path comes from `envVar` (empty
/// when unset, meaning the vendor's default names). Loading and cuInit-style
/// initialisation happen once per path, so a test can point the override at
/// a fake driver without disturbing the real one. Driver(path) must not throw.
template <class Driver>
std::shared_ptr<const Driver> cachedDriver(const char* envVar) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Driver>> cache;
  const char* v = std::getenv(envVar);
  const std::string key = v ? v : "";
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[key];
  if (!slot) slot = std::make_shared<const Driver>(key);
  return slot;
}

}  // namespace tessera::rt::driver

// ---- CUDA Driver API (the subset we call) ---------------------------------
namespace tessera::rt::cuabi {

using CUresult = int;  // an enum in cuda.h; enums of this range are int-sized
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // exactly cuda.h's type (64-bit)
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUevent = void*;

// CUresult values we test for by value.
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;

// CUjit_option
constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

// CUdevice_attribute
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUpointer_attribute
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;

// CUfunction_attribute
constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

// X(field, dlsym name, return type, parameter list). The dlsym name is the
// versioned symbol cuda.h's macros select (cuMemAlloc -> cuMemAlloc_v2):
// the unversioned symbols are the legacy 32-bit ABI.
#define TESSERA_CUDA_FUNCTIONS(X)                                                                                 \
  X(Init, cuInit, CUresult, (unsigned flags))                                                                     \
  X(DeviceGetCount, cuDeviceGetCount, CUresult, (int* count))                                                     \
  X(DeviceGet, cuDeviceGet, CUresult, (CUdevice * dev, int ordinal))                                              \
  X(DeviceGetName, cuDeviceGetName, CUresult, (char* name, int len, CUdevice dev))                                \
  X(DeviceGetAttribute, cuDeviceGetAttribute, CUresult, (int* value, int attr, CUdevice dev))                     \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, CUresult, (CUcontext * ctx, CUdevice dev))                  \
  X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice dev))                              \
  X(CtxSetCurrent, cuCtxSetCurrent, CUresult, (CUcontext ctx))                                                    \
  X(MemAlloc, cuMemAlloc_v2, CUresult, (CUdeviceptr * dptr, size_t bytes))                                        \
  X(MemFree, cuMemFree_v2, CUresult, (CUdeviceptr dptr))                                                          \
  X(MemcpyHtoD, cuMemcpyHtoD_v2, CUresult, (CUdeviceptr dst, const void* src, size_t bytes))                      \
  X(MemcpyDtoH, cuMemcpyDtoH_v2, CUresult, (void* dst, CUdeviceptr src, size_t bytes))                            \
  X(MemsetD8, cuMemsetD8_v2, CUresult, (CUdeviceptr dst, unsigned char value, size_t n))                          \
  X(MemcpyDtoD, cuMemcpyDtoD_v2, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t bytes))                      \
  X(StreamCreate, cuStreamCreate, CUresult, (CUstream * stream, unsigned flags))                                  \
  X(StreamDestroy, cuStreamDestroy_v2, CUresult, (CUstream stream))                                               \
  X(StreamSynchronize, cuStreamSynchronize, CUresult, (CUstream stream))                                          \
  X(StreamWaitEvent, cuStreamWaitEvent, CUresult, (CUstream stream, CUevent event, unsigned flags))               \
  X(StreamGetCtx, cuStreamGetCtx, CUresult, (CUstream stream, CUcontext * ctx))                                   \
  X(CtxSynchronize, cuCtxSynchronize, CUresult, ())                                                               \
  X(EventCreate, cuEventCreate, CUresult, (CUevent * event, unsigned flags))                                      \
  X(EventDestroy, cuEventDestroy_v2, CUresult, (CUevent event))                                                   \
  X(EventRecord, cuEventRecord, CUresult, (CUevent event, CUstream stream))                                       \
  X(EventSynchronize, cuEventSynchronize, CUresult, (CUevent event))                                              \
  X(MemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, CUresult,                                                              \
    (CUdeviceptr dst, const void* src, size_t bytes, CUstream stream))                                            \
  X(MemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, CUresult, (void* dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
  X(MemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, CUresult,                                                              \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                                            \
  X(MemGetAddressRange, cuMemGetAddressRange_v2, CUresult, (CUdeviceptr * base, size_t* size, CUdeviceptr p))     \
  X(PointerGetAttribute, cuPointerGetAttribute, CUresult, (void* data, int attr, CUdeviceptr p))                  \
  X(ModuleLoadDataEx, cuModuleLoadDataEx, CUresult,                                                               \
    (CUmodule * mod, const void* image, unsigned numOptions, int* options, void** values))                        \
  X(ModuleUnload, cuModuleUnload, CUresult, (CUmodule mod))                                                       \
  X(ModuleGetFunction, cuModuleGetFunction, CUresult, (CUfunction * fn, CUmodule mod, const char* name))          \
  X(FuncGetAttribute, cuFuncGetAttribute, CUresult, (int* value, int attr, CUfunction fn))                        \
  X(FuncSetAttribute, cuFuncSetAttribute, CUresult, (CUfunction fn, int attr, int value))                         \
  X(OccupancyMaxActiveBlocksPerMultiprocessor, cuOccupancyMaxActiveBlocksPerMultiprocessor, CUresult,             \
    (int* blocks, CUfunction fn, int blockSize, size_t dynamicSharedBytes))                                       \
  X(LaunchKernel, cuLaunchKernel, CUresult,                                                                       \
    (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,                 \
     unsigned sharedBytes, CUstream stream, void** params, void** extra))                                         \
  X(GetErrorName, cuGetErrorName, CUresult, (CUresult err, const char** str))                                     \
  X(GetErrorString, cuGetErrorString, CUresult, (CUresult err, const char** str))

#define TESSERA_DECLARE_PFN(field, sym, R, params) using PFN_##field = R(*) params;
TESSERA_CUDA_FUNCTIONS(TESSERA_DECLARE_PFN)

// ---- TMA tensor maps (CUDA 12.0+, used for sm_90 kernels only) ----
// CUtensorMap and the enums of cuTensorMapEncodeTiled, with cuda.h's values
// (checked against cuda.h by tests/runtime/gpu_driver_test.cpp when the
// header is found). cuda.h aligns CUtensorMap to 128 bytes; the driver
// requires 64 (and the kernel parameter is declared .align 64), which is
// what the launch's storage has.
struct alignas(64) CUtensorMap {
  uint64_t opaque[16];
};
static_assert(sizeof(CUtensorMap) == 128);
using cuuint32_t = uint32_t;
using cuuint64_t = uint64_t;
// CUtensorMapDataType
constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0;
constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1;
constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2;
constexpr int CU_TENSOR_MAP_DATA_TYPE_INT32 = 3;
constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT64 = 4;
constexpr int CU_TENSOR_MAP_DATA_TYPE_INT64 = 5;
constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6;
constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7;
constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT64 = 8;
constexpr int CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9;
// CUtensorMapInterleave
constexpr int CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
// CUtensorMapSwizzle
constexpr int CU_TENSOR_MAP_SWIZZLE_NONE = 0;
constexpr int CU_TENSOR_MAP_SWIZZLE_32B = 1;
constexpr int CU_TENSOR_MAP_SWIZZLE_64B = 2;
constexpr int CU_TENSOR_MAP_SWIZZLE_128B = 3;
// CUtensorMapL2promotion
constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2;
// CUtensorMapFloatOOBfill (NONE: out-of-bounds elements read as zeros)
constexpr int CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;

// ---- Thread-block clusters (sm_90 and later) ----
// cuLaunchKernelEx's configuration with cuda.h's layouts (checked against
// cuda.h by tests/runtime/gpu_driver_test.cpp when the header is found).
// CUlaunchAttributeValue is a 64-byte union whose other members hold
// pointers, hence its 8-byte alignment; only the cluster shape is used here.
// CUlaunchAttributeID
constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
union alignas(8) CUlaunchAttributeValue {
  char pad[64];
  struct {
    unsigned x, y, z;
  } clusterDim;
};
struct CUlaunchAttribute {
  int id;  // a CUlaunchAttributeID
  char pad[8 - sizeof(int)];
  CUlaunchAttributeValue value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned numAttrs;
};
static_assert(sizeof(CUlaunchAttributeValue) == 64 && alignof(CUlaunchAttributeValue) == 8);
static_assert(sizeof(CUlaunchAttribute) == 72 && offsetof(CUlaunchAttribute, value) == 8);
static_assert(sizeof(CUlaunchConfig) == 56 && offsetof(CUlaunchConfig, hStream) == 32 &&
              offsetof(CUlaunchConfig, attrs) == 40 && offsetof(CUlaunchConfig, numAttrs) == 48);

// Entry points newer drivers have, resolved apart from TESSERA_CUDA_FUNCTIONS
// (null where the driver lacks them) so that an older driver still runs
// every kernel that does not need them; a launch that does names the
// missing symbol. X(...) as in TESSERA_CUDA_FUNCTIONS.
//  * cuTensorMapEncodeTiled (CUDA 12.0), for TMA tensor maps. The enum
//    parameters are int-sized enums in cuda.h, and `map` is a CUtensorMap*
//    (void* here, as the fake driver spells it, so that -fsanitize=function
//    sees one type on both sides).
//  * cuLaunchKernelEx and cuOccupancyMaxActiveClusters, for thread-block
//    clusters: launches and resident programs of a kernel in clusters.
//    `config` is a const CUlaunchConfig* (const void* here, for the same
//    reason as `map`).
#define TESSERA_CUDA_OPTIONAL_FUNCTIONS(X)                                                                        \
  X(TensorMapEncodeTiled, cuTensorMapEncodeTiled, CUresult,                                                       \
    (void* map, int dataType, cuuint32_t rank, void* globalAddress, const cuuint64_t* globalDim,                  \
     const cuuint64_t* globalStrides, const cuuint32_t* boxDim, const cuuint32_t* elementStrides, int interleave, \
     int swizzle, int l2Promotion, int oobFill))                                                                  \
  X(LaunchKernelEx, cuLaunchKernelEx, CUresult, (const void* config, CUfunction fn, void** params, void** extra)) \
  X(OccupancyMaxActiveClusters, cuOccupancyMaxActiveClusters, CUresult,                                           \
    (int* clusters, CUfunction fn, const void* config))

TESSERA_CUDA_OPTIONAL_FUNCTIONS(TESSERA_DECLARE_PFN)

/// cuEventElapsedTime: CUDA 12.8 added cuEventElapsedTime_v2 (what cuda.h
/// now maps the name to) with the same prototype; older drivers have only
/// the first version, so either is resolved (the newer first).
using PFN_EventElapsedTime = CUresult (*)(float* ms, CUevent start, CUevent end);

}  // namespace tessera::rt::cuabi

// ---- HIP runtime (the subset we call) --------------------------------------
namespace tessera::rt::hipabi {

using hipError_t = int;  // an enum in hip_runtime_api.h
using hipDevice_t = int;
using hipModule_t = void*;
using hipFunction_t = void*;
using hipStream_t = void*;
using hipEvent_t = void*;

constexpr hipError_t hipSuccess = 0;
constexpr hipError_t hipErrorOutOfMemory = 2;
constexpr hipError_t hipErrorNoDevice = 100;
constexpr hipError_t hipErrorInvalidDevice = 101;
constexpr hipError_t hipErrorNotFound = 500;

// hipDeviceAttribute_t (hip_runtime_api.h since HIP 5.0)
constexpr int hipDeviceAttributeMultiprocessorCount = 63;

// hipMemcpyKind
constexpr int hipMemcpyHostToDevice = 1;
constexpr int hipMemcpyDeviceToHost = 2;
constexpr int hipMemcpyDeviceToDevice = 3;

/// Bytes reserved for a hipDeviceProp_t. Its layout changed between HIP 5
/// (792 bytes) and HIP 6 (hipDeviceProp_tR0600, ~1.5 KiB) and may change
/// again, so we never read its fields by offset; see HipDevice.cpp.
constexpr size_t kDevicePropBytes = 16384;

#define TESSERA_HIP_FUNCTIONS(X)                                                                                     \
  X(GetDeviceCount, hipGetDeviceCount, hipError_t, (int* count))                                                     \
  X(SetDevice, hipSetDevice, hipError_t, (int ordinal))                                                              \
  X(DeviceGetName, hipDeviceGetName, hipError_t, (char* name, int len, hipDevice_t dev))                             \
  X(Malloc, hipMalloc, hipError_t, (void** ptr, size_t bytes))                                                       \
  X(Free, hipFree, hipError_t, (void* ptr))                                                                          \
  X(Memcpy, hipMemcpy, hipError_t, (void* dst, const void* src, size_t bytes, int kind))                             \
  X(Memset, hipMemset, hipError_t, (void* dst, int value, size_t bytes))                                             \
  X(StreamCreate, hipStreamCreate, hipError_t, (hipStream_t * stream))                                               \
  X(StreamDestroy, hipStreamDestroy, hipError_t, (hipStream_t stream))                                               \
  X(StreamSynchronize, hipStreamSynchronize, hipError_t, (hipStream_t stream))                                       \
  X(StreamWaitEvent, hipStreamWaitEvent, hipError_t, (hipStream_t stream, hipEvent_t event, unsigned flags))         \
  X(DeviceSynchronize, hipDeviceSynchronize, hipError_t, ())                                                         \
  X(EventCreate, hipEventCreate, hipError_t, (hipEvent_t * event))                                                   \
  X(EventDestroy, hipEventDestroy, hipError_t, (hipEvent_t event))                                                   \
  X(EventRecord, hipEventRecord, hipError_t, (hipEvent_t event, hipStream_t stream))                                 \
  X(EventSynchronize, hipEventSynchronize, hipError_t, (hipEvent_t event))                                           \
  X(EventElapsedTime, hipEventElapsedTime, hipError_t, (float* ms, hipEvent_t start, hipEvent_t end))                \
  X(MemcpyAsync, hipMemcpyAsync, hipError_t, (void* dst, const void* src, size_t bytes, int kind, hipStream_t s))    \
  X(MemGetAddressRange, hipMemGetAddressRange, hipError_t, (void** base, size_t* size, void* p))                     \
  X(ModuleLoadData, hipModuleLoadData, hipError_t, (hipModule_t * mod, const void* image))                           \
  X(ModuleUnload, hipModuleUnload, hipError_t, (hipModule_t mod))                                                    \
  X(ModuleGetFunction, hipModuleGetFunction, hipError_t, (hipFunction_t * fn, hipModule_t mod, const char* name))    \
  X(DeviceGetAttribute, hipDeviceGetAttribute, hipError_t, (int* value, int attr, int ordinal))                      \
  X(ModuleOccupancyMaxActiveBlocksPerMultiprocessor, hipModuleOccupancyMaxActiveBlocksPerMultiprocessor, hipError_t, \
    (int* blocks, hipFunction_t fn, int blockSize, size_t dynamicSharedBytes))                                       \
  X(ModuleLaunchKernel, hipModuleLaunchKernel, hipError_t,                                                           \
    (hipFunction_t fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,                 \
     unsigned sharedBytes, hipStream_t stream, void** params, void** extra))                                         \
  X(GetErrorName, hipGetErrorName, const char*, (hipError_t err))                                                    \
  X(GetErrorString, hipGetErrorString, const char*, (hipError_t err))

TESSERA_HIP_FUNCTIONS(TESSERA_DECLARE_PFN)

/// hipGetDeviceProperties into an opaque buffer of kDevicePropBytes. HIP 6
/// renamed the symbol with its new layout (hipGetDevicePropertiesR0600) and
/// kept the old name for the old layout; either fits the buffer.
using PFN_GetDeviceProperties = hipError_t (*)(void* props, int ordinal);

}  // namespace tessera::rt::hipabi

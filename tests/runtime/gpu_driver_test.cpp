// The CUDA and HIP devices: their declarations of the driver ABI (checked
// against the vendor headers when installed), their behaviour without a
// driver, the whole CUDA device against a fake libcuda (tests/runtime/fake),
// and real kernels when a GPU is present.

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#if __has_include(<cuda.h>)
#include <cuda.h>
#define TS_HAVE_CUDA_H 1
#endif
#if __has_include(<hip/hip_runtime_api.h>)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#define TS_HAVE_HIP_H 1
#endif

#include "../../runtime/lib/CudaDriver.h"
#include "../../runtime/lib/DeviceImpl.h"
#include "../../runtime/lib/DriverLoader.h"
#include "fake/fake_driver.h"
#include "gpu_test_support.h"
#include "tessera/runtime/Runtime.h"

using namespace tessera;
using namespace tessera::rt;
using Catch::Matchers::Contains;
using namespace tessera::rt::testing;

// ---- the ABI we declare, against the vendor headers ------------------------

namespace {

#define TS_STR(x) #x
#define TS_XSTR(x) TS_STR(x)
#define TS_CAT(a, b) a##b

}  // namespace

#ifdef TS_HAVE_CUDA_H
// cuda.h's macro for each function (cuMemAlloc -> cuMemAlloc_v2) must name
// the symbol we dlsym, and its prototype must match ours.
#define TS_CHECK_CUDA(field, sym, R, params)                              \
  static_assert(std::string_view(TS_XSTR(TS_CAT(cu, field))) == #sym,     \
                "cuda.h maps cu" #field " to another symbol than " #sym); \
  static_assert(SameAbi<decltype(&::sym), cuabi::PFN_##field>::value, #sym ": our declaration differs from cuda.h");
TESSERA_CUDA_FUNCTIONS(TS_CHECK_CUDA)
static_assert(SameAbi<decltype(&::cuEventElapsedTime), cuabi::PFN_EventElapsedTime>::value,
              "cuEventElapsedTime: our declaration differs from cuda.h");
static_assert(cuabi::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == ::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
static_assert(sizeof(cuabi::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(std::is_same_v<cuabi::CUdeviceptr, ::CUdeviceptr>);
static_assert(sizeof(cuabi::CUresult) == sizeof(::CUresult));
static_assert(sizeof(cuabi::CUdevice) == sizeof(::CUdevice));
static_assert(cuabi::CUDA_SUCCESS == ::CUDA_SUCCESS);
static_assert(cuabi::CUDA_ERROR_INVALID_VALUE == ::CUDA_ERROR_INVALID_VALUE);
static_assert(cuabi::CUDA_ERROR_OUT_OF_MEMORY == ::CUDA_ERROR_OUT_OF_MEMORY);
static_assert(cuabi::CUDA_ERROR_NOT_INITIALIZED == ::CUDA_ERROR_NOT_INITIALIZED);
static_assert(cuabi::CUDA_ERROR_NO_DEVICE == ::CUDA_ERROR_NO_DEVICE);
static_assert(cuabi::CUDA_ERROR_INVALID_DEVICE == ::CUDA_ERROR_INVALID_DEVICE);
static_assert(cuabi::CUDA_ERROR_INVALID_CONTEXT == ::CUDA_ERROR_INVALID_CONTEXT);
static_assert(cuabi::CUDA_ERROR_INVALID_PTX == ::CUDA_ERROR_INVALID_PTX);
static_assert(cuabi::CUDA_ERROR_NOT_FOUND == ::CUDA_ERROR_NOT_FOUND);
static_assert(cuabi::CU_JIT_INFO_LOG_BUFFER == ::CU_JIT_INFO_LOG_BUFFER);
static_assert(cuabi::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES == ::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
static_assert(cuabi::CU_JIT_ERROR_LOG_BUFFER == ::CU_JIT_ERROR_LOG_BUFFER);
static_assert(cuabi::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES == ::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
static_assert(cuabi::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X == ::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
static_assert(cuabi::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y == ::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
static_assert(cuabi::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z == ::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
static_assert(cuabi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(cuabi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(cuabi::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN ==
              ::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
static_assert(cuabi::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK == ::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
static_assert(cuabi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ==
              ::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
// The optional entry points (resolved apart from TESSERA_CUDA_FUNCTIONS).
TESSERA_CUDA_OPTIONAL_FUNCTIONS(TS_CHECK_CUDA)
// Thread-block clusters: cuLaunchKernelEx's configuration, byte for byte.
static_assert(cuabi::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == ::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
static_assert(sizeof(::CUlaunchAttributeID) == sizeof(int));
static_assert(sizeof(cuabi::CUlaunchAttributeValue) == sizeof(::CUlaunchAttributeValue) &&
              alignof(cuabi::CUlaunchAttributeValue) == alignof(::CUlaunchAttributeValue));
static_assert(offsetof(::CUlaunchAttributeValue, clusterDim) == 0 &&
              sizeof(::CUlaunchAttributeValue::clusterDim) == sizeof(cuabi::CUlaunchAttributeValue::clusterDim));
static_assert(sizeof(cuabi::CUlaunchAttribute) == sizeof(::CUlaunchAttribute) &&
              alignof(cuabi::CUlaunchAttribute) == alignof(::CUlaunchAttribute));
static_assert(offsetof(cuabi::CUlaunchAttribute, id) == offsetof(::CUlaunchAttribute, id) &&
              offsetof(cuabi::CUlaunchAttribute, value) == offsetof(::CUlaunchAttribute, value));
static_assert(sizeof(cuabi::CUlaunchConfig) == sizeof(::CUlaunchConfig) &&
              alignof(cuabi::CUlaunchConfig) == alignof(::CUlaunchConfig));
static_assert(offsetof(cuabi::CUlaunchConfig, gridDimX) == offsetof(::CUlaunchConfig, gridDimX) &&
              offsetof(cuabi::CUlaunchConfig, blockDimX) == offsetof(::CUlaunchConfig, blockDimX) &&
              offsetof(cuabi::CUlaunchConfig, sharedMemBytes) == offsetof(::CUlaunchConfig, sharedMemBytes) &&
              offsetof(cuabi::CUlaunchConfig, hStream) == offsetof(::CUlaunchConfig, hStream) &&
              offsetof(cuabi::CUlaunchConfig, attrs) == offsetof(::CUlaunchConfig, attrs) &&
              offsetof(cuabi::CUlaunchConfig, numAttrs) == offsetof(::CUlaunchConfig, numAttrs));
// TMA tensor maps.
static_assert(sizeof(cuabi::CUtensorMap) == sizeof(::CUtensorMap));
static_assert(alignof(cuabi::CUtensorMap) >= 64);
static_assert(sizeof(cuabi::cuuint32_t) == sizeof(::cuuint32_t) && sizeof(cuabi::cuuint64_t) == sizeof(::cuuint64_t));
static_assert(std::is_same_v<cuabi::cuuint64_t, ::cuuint64_t>);
static_assert(sizeof(::CUtensorMapDataType) == sizeof(int) && sizeof(::CUtensorMapSwizzle) == sizeof(int));
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_UINT8 == ::CU_TENSOR_MAP_DATA_TYPE_UINT8);
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_UINT16 == ::CU_TENSOR_MAP_DATA_TYPE_UINT16);
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_UINT32 == ::CU_TENSOR_MAP_DATA_TYPE_UINT32);
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_INT32 == ::CU_TENSOR_MAP_DATA_TYPE_INT32);
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_UINT64 == ::CU_TENSOR_MAP_DATA_TYPE_UINT64);
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_INT64 == ::CU_TENSOR_MAP_DATA_TYPE_INT64);
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_FLOAT16 == ::CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_FLOAT32 == ::CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_FLOAT64 == ::CU_TENSOR_MAP_DATA_TYPE_FLOAT64);
static_assert(cuabi::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == ::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
static_assert(cuabi::CU_TENSOR_MAP_INTERLEAVE_NONE == ::CU_TENSOR_MAP_INTERLEAVE_NONE);
static_assert(cuabi::CU_TENSOR_MAP_SWIZZLE_NONE == ::CU_TENSOR_MAP_SWIZZLE_NONE);
static_assert(cuabi::CU_TENSOR_MAP_SWIZZLE_32B == ::CU_TENSOR_MAP_SWIZZLE_32B);
static_assert(cuabi::CU_TENSOR_MAP_SWIZZLE_64B == ::CU_TENSOR_MAP_SWIZZLE_64B);
static_assert(cuabi::CU_TENSOR_MAP_SWIZZLE_128B == ::CU_TENSOR_MAP_SWIZZLE_128B);
static_assert(cuabi::CU_TENSOR_MAP_L2_PROMOTION_L2_128B == ::CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
static_assert(cuabi::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE == ::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
#endif

#ifdef TS_HAVE_HIP_H
// The header's address of each function; hipMalloc is also a C++ template
// there, so its C overload is picked by type.
#define TS_HIP_ADDR_GetDeviceCount &::hipGetDeviceCount
#define TS_HIP_ADDR_SetDevice &::hipSetDevice
#define TS_HIP_ADDR_DeviceGetName &::hipDeviceGetName
#define TS_HIP_ADDR_Malloc static_cast<hipError_t (*)(void**, size_t)>(&::hipMalloc)
#define TS_HIP_ADDR_Free &::hipFree
#define TS_HIP_ADDR_Memcpy &::hipMemcpy
#define TS_HIP_ADDR_Memset &::hipMemset
#define TS_HIP_ADDR_StreamCreate &::hipStreamCreate
#define TS_HIP_ADDR_StreamDestroy &::hipStreamDestroy
#define TS_HIP_ADDR_StreamSynchronize &::hipStreamSynchronize
#define TS_HIP_ADDR_StreamWaitEvent &::hipStreamWaitEvent
#define TS_HIP_ADDR_DeviceSynchronize &::hipDeviceSynchronize
#define TS_HIP_ADDR_EventCreate &::hipEventCreate
#define TS_HIP_ADDR_EventDestroy &::hipEventDestroy
#define TS_HIP_ADDR_EventRecord &::hipEventRecord
#define TS_HIP_ADDR_EventSynchronize &::hipEventSynchronize
#define TS_HIP_ADDR_EventElapsedTime &::hipEventElapsedTime
#define TS_HIP_ADDR_MemcpyAsync &::hipMemcpyAsync
#define TS_HIP_ADDR_MemGetAddressRange &::hipMemGetAddressRange
#define TS_HIP_ADDR_ModuleLoadData &::hipModuleLoadData
#define TS_HIP_ADDR_ModuleUnload &::hipModuleUnload
#define TS_HIP_ADDR_ModuleGetFunction &::hipModuleGetFunction
#define TS_HIP_ADDR_ModuleLaunchKernel &::hipModuleLaunchKernel
#define TS_HIP_ADDR_GetErrorName &::hipGetErrorName
#define TS_HIP_ADDR_GetErrorString &::hipGetErrorString
#define TS_CHECK_HIP(field, sym, R, params)                                         \
  static_assert(std::string_view(TS_XSTR(TS_CAT(hip, field))) == #sym,              \
                "the HIP header maps hip" #field " to another symbol than " #sym);  \
  static_assert(SameAbi<decltype(TS_HIP_ADDR_##field), hipabi::PFN_##field>::value, \
                #sym ": our declaration differs from hip_runtime_api.h");
TESSERA_HIP_FUNCTIONS(TS_CHECK_HIP)
static_assert(SameAbi<hipError_t (*)(hipDeviceProp_t*, int), hipabi::PFN_GetDeviceProperties>::value);
static_assert(sizeof(hipDeviceProp_t) <= hipabi::kDevicePropBytes,
              "hipDeviceProp_t outgrew the buffer HipDevice.cpp passes");
static_assert(sizeof(hipabi::hipError_t) == sizeof(::hipError_t));
static_assert(hipabi::hipSuccess == ::hipSuccess);
static_assert(hipabi::hipErrorOutOfMemory == ::hipErrorOutOfMemory);
static_assert(hipabi::hipErrorNoDevice == ::hipErrorNoDevice);
static_assert(hipabi::hipErrorInvalidDevice == ::hipErrorInvalidDevice);
static_assert(hipabi::hipErrorNotFound == ::hipErrorNotFound);
static_assert(hipabi::hipMemcpyHostToDevice == ::hipMemcpyHostToDevice);
static_assert(hipabi::hipMemcpyDeviceToHost == ::hipMemcpyDeviceToHost);
static_assert(hipabi::hipMemcpyDeviceToDevice == ::hipMemcpyDeviceToDevice);
#endif

namespace {
/// `bin` as the fake drivers' bounds-checked kernel `checked_oob(a, out, n)`,
/// whose planted record names its store (fake_cuda.c, fake_hip.c).
void asCheckedOob(Binary& bin) {
  bin.signature.kernelName = "checked_oob";
  bin.signature.args = {{ArgSpec::Kind::Pointer, DType::F32, "a"},
                        {ArgSpec::Kind::Pointer, DType::F32, "out"},
                        {ArgSpec::Kind::Scalar, DType::I32, "n"}};
  bin.boundsChecked = true;
  bin.opNames = {"load @ user.cpp:10", "store @ user.cpp:11"};
}
}  // namespace

TEST_CASE("driver ABI declarations were checked against the vendor headers", "[gpu][driver]") {
#ifndef TS_HAVE_CUDA_H
  WARN("cuda.h not found: the CUDA driver declarations were not checked against it");
#endif
#ifndef TS_HAVE_HIP_H
  WARN("hip/hip_runtime_api.h not found: the HIP declarations were not checked against it");
#endif
  SUCCEED();
}

// ---- helpers ----------------------------------------------------------------

namespace {
/// Runs vadd over n elements on `dev` and checks every element against a
/// plain C++ sum (exact: one f32 addition each way).
void runVadd(const Device& dev, int n, unsigned threadsPerBlock) {
  std::vector<float> a(n), b(n), want(n);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * static_cast<float>(i) - 3.25f;
    b[i] = std::sin(static_cast<float>(i)) * 100.0f;
    want[i] = a[i] + b[i];
  }
  Buffer da = dev.upload(DType::F32, a), db = dev.upload(DType::F32, b);
  Buffer dout = dev.alloc(DType::F32, static_cast<size_t>(n));
  dout.fillBytes(0xFF);  // NaN everywhere: an element the kernel skips cannot pass
  Kernel k = dev.load(vaddBinary(threadsPerBlock));
  const uint32_t blocks = static_cast<uint32_t>((n + threadsPerBlock - 1) / threadsPerBlock);
  k.launch(Dim3(blocks), {da, db, dout, n});
  std::vector<float> got = dout.read<float>();
  REQUIRE(got.size() == static_cast<size_t>(n));
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (!(got[i] == want[i]) && bad++ < 5) FAIL_CHECK("out[" << i << "] = " << got[i] << ", want " << want[i]);
  CHECK(bad == 0);
}

/// A kernel with two TMA tensor maps, for the fake driver (which reads only
/// the parameter list): tma2(ptr<f16> a, ptr<bf16> b, i32 K, i32 M, i64 N)
/// with the maps
///   tma(a: f16 dims [K, M] strides [1, K] box [32, 8] swizzle 64)
///   tma(b: bf16 dims [N, 16, 4] strides [1, N, 16*N] box [64, 4, 2] swizzle 128)
/// as hidden parameters 5 and 6.
Binary tmaBinary() {
  Binary b = ptxBinary("tma2", R"(.version 8.0
.target sm_90a
.address_size 64

.visible .entry tma2(
	.param .u64 tma2_param_0,
	.param .u64 tma2_param_1,
	.param .u32 tma2_param_2,
	.param .u32 tma2_param_3,
	.param .u64 tma2_param_4,
	.param .align 64 .b8 tma2_param_5[128],
	.param .align 64 .b8 tma2_param_6[128]
)
{
	ret;
}
)",
                       128);
  KernelSignature& s = b.signature;
  s.kernelName = "tma2";
  s.args = {{ArgSpec::Kind::Pointer, DType::F16, "a"},
            {ArgSpec::Kind::Pointer, DType::BF16, "b"},
            {ArgSpec::Kind::Scalar, DType::I32, "K"},
            {ArgSpec::Kind::Scalar, DType::I32, "M"},
            {ArgSpec::Kind::Scalar, DType::I64, "N"}};
  TensorMapSpec ma = rowMajorTensorMap(0, DType::F16, 2, 3, 32, 8, 64);
  TensorMapSpec mb;
  mb.source = 1;
  mb.dtype = DType::BF16;
  mb.rank = 3;
  mb.dims[0] = {4, 1, 0};
  mb.dims[1] = {-1, 1, 16};
  mb.dims[2] = {-1, 1, 4};
  mb.strides[0] = {-1, 1, 1};
  mb.strides[1] = {4, 1, 0};
  mb.strides[2] = {4, 16, 0};
  mb.box[0] = 64, mb.box[1] = 4, mb.box[2] = 2;
  mb.swizzleBytes = 128;
  s.tensorMaps = {ma, mb};
  return b;
}

}  // namespace

// ---- no driver ---------------------------------------------------------------

TEST_CASE("without libcuda.so.1 there is no CUDA device, and asking for one says why", "[gpu][cuda]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", nullptr);
  if (cudaDeviceCount() > 0) {
    WARN("a CUDA driver with a device is present: the no-driver behaviour is not tested here");
    return;
  }
  const std::string msg = deviceError([] { createCudaDevice(0); });
  INFO(msg);
  CHECK_THAT(msg, Contains("Device::cuda(0)"));
  // Either the library is missing (this project's CI) or it loads and
  // finds no GPU: both are named.
  const bool named = msg.find("dlopen(libcuda.so.1) failed") != std::string::npos ||
                     msg.find("cuInit failed") != std::string::npos ||
                     msg.find("reports no device") != std::string::npos;
  CHECK(named);
  // Device::all() lists no CUDA device then.
  for (const Device& d : Device::all()) CHECK(d.kind() != DeviceKind::CUDA);
}

TEST_CASE("without an AMD GPU there is no HIP device, and asking for one says why", "[gpu][hip]") {
  EnvGuard env("TESSERA_HIP_LIBRARY", nullptr);
  if (hipDeviceCount() > 0) {
    WARN("a HIP device is present: the no-device behaviour is not tested here");
    return;
  }
  const std::string msg = deviceError([] { createHipDevice(0); });
  INFO(msg);
  CHECK_THAT(msg, Contains("Device::hip(0)"));
  const bool named = msg.find("dlopen(libamdhip64.so) failed") != std::string::npos ||
                     msg.find("hipGetDeviceCount failed: hipErrorNoDevice") != std::string::npos ||
                     msg.find("reports no device") != std::string::npos;
  CHECK(named);
  for (const Device& d : Device::all()) CHECK(d.kind() != DeviceKind::HIP);
}

TEST_CASE("driver library overrides that do not load or lack entry points are reported", "[gpu][driver]") {
  {
    EnvGuard env("TESSERA_CUDA_LIBRARY", "/nonexistent/libcuda.so.1");
    CHECK(cudaDeviceCount() == 0);
    const std::string msg = deviceError([] { createCudaDevice(0); });
    CHECK_THAT(msg, Contains("CUDA driver not available: dlopen(/nonexistent/libcuda.so.1) failed "
                             "(from TESSERA_CUDA_LIBRARY)"));
  }
  {
    // A real library that is not a CUDA driver.
    EnvGuard env("TESSERA_CUDA_LIBRARY", "libm.so.6");
    CHECK(cudaDeviceCount() == 0);
    const std::string msg = deviceError([] { createCudaDevice(0); });
    CHECK_THAT(msg, Contains("libm.so.6 lacks cuInit, cuDeviceGetCount"));
  }
  {
    EnvGuard env("TESSERA_HIP_LIBRARY", "/nonexistent/libamdhip64.so");
    CHECK(hipDeviceCount() == 0);
    const std::string msg = deviceError([] { createHipDevice(1); });
    CHECK_THAT(msg, Contains("Device::hip(1): HIP runtime not available: "
                             "dlopen(/nonexistent/libamdhip64.so) failed (from TESSERA_HIP_LIBRARY)"));
  }
  {
    EnvGuard env("TESSERA_HIP_LIBRARY", "libm.so.6");
    CHECK(hipDeviceCount() == 0);
    CHECK_THAT(deviceError([] { createHipDevice(0); }), Contains("libm.so.6 lacks hipGetDeviceCount"));
  }
}

// ---- the CUDA device against the fake driver --------------------------------

TEST_CASE("a driver whose cuInit fails reports the CUDA error", "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA_NODEV);
  CHECK(cudaDeviceCount() == 0);
  CHECK(deviceError([] { createCudaDevice(0); }) ==
        "Device::cuda(0): cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
}

TEST_CASE("fake CUDA driver: devices, names, architectures, ordinals", "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  REQUIRE(cudaDeviceCount() == 2);
  auto retains = fakeFn<int (*)(int)>(TESSERA_FAKE_CUDA, "fake_cuda_context_retains");
  auto streams = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_live_streams");
  const int streams0 = streams();
  {
    Device d0(createCudaDevice(0)), d1(createCudaDevice(1));
    CHECK(d0.kind() == DeviceKind::CUDA);
    CHECK(d0.name() == "cuda:0 Fake A100");
    CHECK(d1.name() == "cuda:1 Fake H100");
    CHECK(d0.arch() == "nvptx:sm_80");
    CHECK(d1.arch() == "nvptx:sm_90a");  // Hopper features need the "a" target
    CHECK(retains(0) >= 1);
    CHECK(streams() == streams0 + 2);
  }
  // Everything a device acquired is released with it.
  CHECK(retains(0) == 0);
  CHECK(retains(1) == 0);
  CHECK(streams() == streams0);
  CHECK(deviceError([] { createCudaDevice(3); }) == "Device::cuda(3): device ordinal 3 out of range (2 devices)");
  CHECK(deviceError([] { createCudaDevice(-1); }) == "Device::cuda(-1): device ordinal -1 out of range (2 devices)");
}

TEST_CASE("fake CUDA driver: memory is zeroed, copied and filled through the device", "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  auto live = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_live_allocations");
  const int before = live();
  {
    Device dev(createCudaDevice(0));
    // The fake fills new allocations with 0xCD: these must read as zero.
    Buffer b = dev.alloc(DType::I32, 1000);
    CHECK(live() == before + 1);
    std::vector<int32_t> z = b.read<int32_t>();
    CHECK(std::all_of(z.begin(), z.end(), [](int32_t v) { return v == 0; }));

    std::vector<int32_t> v(1000);
    for (int i = 0; i < 1000; ++i) v[i] = i * 7 - 300;
    b.write(v);
    CHECK(b.read<int32_t>() == v);
    b.fillBytes(0x01);
    for (int32_t x : b.read<int32_t>()) REQUIRE(x == 0x01010101);

    // Out of memory names the size and the driver's error.
    const std::string oom = deviceError([&] { dev.alloc(DType::F32, size_t{1} << 29); });
    CHECK_THAT(oom, Contains("cuda:0 Fake A100: cannot allocate 2147483648 bytes: cuMemAlloc failed: "
                             "CUDA_ERROR_OUT_OF_MEMORY"));

    // Another thread has no current context until the device makes its own
    // current (the fake, like the driver, fails without one).
    std::vector<int32_t> fromThread;
    std::string threadError;
    std::thread t([&] {
      try {
        Buffer c = dev.alloc(DType::I32, 4);
        c.write(std::vector<int32_t>{1, 2, 3, 4});
        fromThread = c.read<int32_t>();
      } catch (const std::exception& e) {
        threadError = e.what();
      }
    });
    t.join();
    CHECK(threadError == "");
    CHECK(fromThread == std::vector<int32_t>{1, 2, 3, 4});
  }
  CHECK(live() == before);  // every buffer went back to the driver
}

TEST_CASE("fake CUDA driver: PTX load errors carry the JIT log", "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Device dev(createCudaDevice(0));

  Binary bad = vaddBinary();
  bad.ptx += "\nFAKE_SYNTAX_ERROR\n";
  std::string msg = deviceError([&] { dev.load(bad); });
  CHECK_THAT(msg, Contains("cuda:0 Fake A100: cannot load kernel 'vadd' (PTX for nvptx:sm_80): "
                           "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)"));
  CHECK_THAT(msg, Contains("JIT error log:\nptxas application ptx input, line 7; error   : "
                           "Unknown symbol 'FAKE_SYNTAX_ERROR'"));

  Binary wrongSymbol = vaddBinary();
  wrongSymbol.symbol = "vad";
  CHECK_THAT(deviceError([&] { dev.load(wrongSymbol); }),
             Contains("cannot load kernel 'vadd': the PTX has no kernel named 'vad'"));

  Binary host = vaddBinary();
  host.format = Binary::Format::HostFunction;
  CHECK_THAT(deviceError([&] { dev.load(host); }),
             Contains("its binary is a host function (cpu target), not PTX; compile the kernel for "
                      "nvptx:sm_80 to run it here"));

  Binary noSymbol = vaddBinary();
  noSymbol.symbol.clear();
  CHECK_THAT(deviceError([&] { dev.load(noSymbol); }), Contains("names no kernel symbol"));

  // More dynamic shared memory than the device allows at all.
  CHECK_THAT(deviceError([&] { dev.load(vaddBinary(128, 200 * 1024)); }),
             Contains("needs 204800 bytes of dynamic shared memory per block but this device allows "
                      "at most 166912"));

  auto modules = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_live_modules");
  CHECK(modules() == 0);  // failed loads leave no module behind
}

TEST_CASE("fake CUDA driver: launches pass the grid, block, shared memory and arguments", "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  auto lastLaunch = fakeFn<int (*)(FakeLaunch*)>(TESSERA_FAKE_CUDA, "fake_cuda_last_launch");
  auto modules = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_live_modules");
  Device dev(createCudaDevice(1));

  SECTION("results and parameters, for sizes that are and are not multiples of the block") {
    for (int n : {1, 127, 128, 1000, 4096}) {
      INFO("n = " << n);
      runVadd(dev, n, 128);
      FakeLaunch l{};
      lastLaunch(&l);
      CHECK(std::string(l.kernel) == "vadd");
      CHECK(l.device == 1);
      CHECK(l.grid[0] == static_cast<unsigned>((n + 127) / 128));
      CHECK((l.grid[1] == 1 && l.grid[2] == 1));
      CHECK((l.block[0] == 128 && l.block[1] == 1 && l.block[2] == 1));
      CHECK(l.sharedBytes == 0);
      REQUIRE(l.numParams == 4);
      CHECK(l.paramBytes[3] == 4);
      CHECK(l.params[3] == static_cast<uint64_t>(n));
    }
    CHECK(modules() == 0);  // each Kernel unloaded its module
  }

  SECTION("a checked launch of an unchecked binary is refused, not silently unchecked") {
    Buffer a = dev.alloc(DType::F32, 64), b = dev.alloc(DType::F32, 64), out = dev.alloc(DType::F32, 64);
    Kernel k = dev.load(vaddBinary(32, 64 * 1024));
    LaunchOptions o;
    o.checkBounds = true;
    CHECK_THROWS_WITH(k.launch(Dim3(2), {a, b, out, 64}, o),
                      Catch::Contains("was not compiled with CompileOptions::checkBounds"));
  }

  SECTION("a checked launch passes the extents and a record, and raises the violation recorded there") {
    auto allocations = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_live_allocations");
    Buffer a = dev.alloc(DType::F32, 64), out = dev.alloc(DType::F32, 64);
    Binary bin = ptxBinary("checked_oob", kCheckedPtx, 32);
    asCheckedOob(bin);
    Kernel k = dev.load(bin);
    Arg view(out);
    view.offset = 16;
    const int before = allocations();
    LaunchOptions o;
    o.checkBounds = true;
    CHECK_THROWS_WITH(k.launch(Dim3(2), {a, view, 64}, o),
                      Catch::Contains("out-of-bounds access by 'store @ user.cpp:11': argument 1 (ptr<f32> out) at "
                                      "byte offset 192, outside its 192 bytes (48 f32 from the pointer passed), by "
                                      "thread 5 of program (1, 0, 0); the access was not performed (checked launch)"));
    CHECK(allocations() == before);  // the record was freed
    FakeLaunch l{};
    lastLaunch(&l);
    REQUIRE(l.numParams == 6);
    CHECK(l.params[0] == reinterpret_cast<uint64_t>(a.data()));
    CHECK(l.params[1] == reinterpret_cast<uint64_t>(out.data()) + 16 * 4);
    CHECK(l.params[2] == 64);
    CHECK(l.params[3] == 256);  // the extents of the pointer arguments
    CHECK(l.params[4] == 192);
    CHECK(l.params[5] != 0);  // the record, in device memory
    // On a stream too: the launch waits for it and raises the error.
    Stream s = dev.createStream();
    LaunchOptions os = o;
    os.stream = s;
    CHECK_THROWS_WITH(k.launch(Dim3(1), {a, view, 64}, os), Catch::Contains("by thread 5 of program (1, 0, 0)"));
    CHECK(allocations() == before);
  }

  SECTION("a profiled launch passes its buffer last and decodes what the kernel recorded") {
    auto allocations = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_live_allocations");
    Buffer out = dev.alloc(DType::F32, 64);
    Binary bin = ptxBinary("profiled", kProfiledPtx, 64);
    bin.signature.kernelName = "profiled";
    bin.signature.args = {{ArgSpec::Kind::Pointer, DType::F32, "out"}};
    bin.profiled = true;
    bin.profileScopes = {"kernel @ user.cpp:3:5"};
    bin.profileWarps = 2;
    bin.profileClock = Binary::ProfileClock::Nanoseconds;
    Kernel k = dev.load(bin);
    const int before = allocations();
    Profile p;
    p.options.programs = 2;  // of 3
    LaunchOptions o;
    o.profile = &p;
    k.launch(Dim3(3), {out}, o);
    CHECK(allocations() == before);  // the buffer was freed
    FakeLaunch l{};
    lastLaunch(&l);
    REQUIRE(l.numParams == 2);
    CHECK(l.params[1] != 0);
    CHECK(p.kernel == "profiled");
    CHECK(p.clock == "ns (%globaltimer)");
    CHECK(p.programs == 2);
    CHECK(p.warpsPerProgram == 2);
    REQUIRE(p.slices.size() == 4);
    for (const ProfileSlice& s : p.slices) {
      INFO("program " << s.program << " warp " << s.warp);
      CHECK(s.scope == "kernel @ user.cpp:3:5");
      CHECK(s.unit == 7 + s.program);
      CHECK(s.begin == double(100 * s.program + s.warp));  // from the first record
      CHECK(s.end - s.begin == 500.0);
    }
    CHECK_THAT(p.chromeTrace(), Catch::Contains("\"name\": \"SM 8\""));
    // Unprofiled, a profiled binary still gets a buffer, which records nothing.
    k.launch(Dim3(3), {out});
    lastLaunch(&l);
    CHECK(l.numParams == 2);
    CHECK(allocations() == before);
    // The runtime refuses a profile of an unprofiled binary.
    Kernel plain = dev.load(vaddBinary(32));
    Buffer a = dev.alloc(DType::F32, 64), b = dev.alloc(DType::F32, 64);
    CHECK_THROWS_WITH(plain.launch(Dim3(1), {a, b, out, 64}, o), Catch::Contains("CompileOptions::profile"));
  }

  SECTION("buffer offsets and the exact addresses reach the kernel") {
    Buffer a = dev.alloc(DType::F32, 64), b = dev.alloc(DType::F32, 64), out = dev.alloc(DType::F32, 64);
    Kernel k = dev.load(vaddBinary(32, 64 * 1024));
    Arg shifted(a);
    shifted.offset = 5;
    k.launch(Dim3(2, 3, 4), {shifted, b, out, 7});
    FakeLaunch l{};
    lastLaunch(&l);
    CHECK(l.params[0] == reinterpret_cast<uint64_t>(a.data()) + 5 * 4);
    CHECK(l.params[1] == reinterpret_cast<uint64_t>(b.data()));
    CHECK(l.params[2] == reinterpret_cast<uint64_t>(out.data()));
    CHECK(l.params[3] == 7);
    CHECK((l.grid[0] == 2 && l.grid[1] == 3 && l.grid[2] == 4));
    CHECK(l.block[0] == 32);
    // Over 48 KiB the kernel opted in to the larger dynamic shared size.
    CHECK(l.sharedBytes == 64 * 1024);
    CHECK(fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_shared_optin")() == 64 * 1024);
  }

  SECTION("a launch from another thread works (the context is made current there)") {
    Kernel k = dev.load(vaddBinary());
    Buffer a = dev.upload(DType::F32, std::vector<float>{1, 2, 3});
    Buffer b = dev.upload(DType::F32, std::vector<float>{10, 20, 30});
    Buffer out = dev.alloc(DType::F32, 3);
    std::string threadError;
    std::thread t([&] {
      try {
        k.launch(Dim3(1), {a, b, out, 3});
      } catch (const std::exception& e) {
        threadError = e.what();
      }
    });
    t.join();
    CHECK(threadError == "");
    CHECK(out.read<float>() == std::vector<float>{11, 22, 33});
  }

  SECTION("a fault while the kernel runs is reported by its launch") {
    Kernel k = dev.load(vaddBinary());
    Buffer a = dev.alloc(DType::F32, 8), out = dev.alloc(DType::F32, 8);
    fakeFn<void (*)(int)>(TESSERA_FAKE_CUDA, "fake_cuda_fail_next_sync")(700);
    const std::string msg = deviceError([&] { k.launch(Dim3(1), {a, a, out, 8}); });
    CHECK_THAT(msg, Contains("cuda:1 Fake H100: running kernel 'vadd' (grid {1, 1, 1}, 128 threads per "
                             "block, 0 bytes of shared memory): cuStreamSynchronize failed: "
                             "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"));
  }

  SECTION("grids beyond the device's limits are launch errors") {
    Kernel k = dev.load(vaddBinary());
    Buffer a = dev.alloc(DType::F32, 8);
    try {
      k.launch(Dim3(1, 70000), {a, a, a, 8});
      FAIL("no LaunchError");
    } catch (const LaunchError& e) {
      CHECK_THAT(e.what(), Contains("vadd: grid {1, 70000, 1} exceeds cuda:1 Fake H100's limit of 65535 "
                                    "blocks in dimension y"));
    }
  }
}

namespace {
/// The one code object the fake HIP runtime loads: the bounds-checked
/// `checked_oob` kernel of 64 threads (fake_hip.cpp).
Binary fakeHipCheckedBinary() {
  Binary bin;
  bin.format = Binary::Format::HSACO;
  const std::string image = "FAKE_CHECKED";
  bin.codeObject.assign(image.begin(), image.end());
  bin.symbol = "checked_oob";
  bin.threadsPerBlock = 64;
  asCheckedOob(bin);
  return bin;
}
}  // namespace

TEST_CASE("resident programs: SMs or CUs times the driver's occupancy for the kernel", "[gpu][cuda][hip][fake]") {
  SECTION("CUDA") {
    EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
    // The fake: 108 and 132 SMs; 2048 threads and 164 / 228 KiB of shared
    // memory an SM, at most 32 blocks.
    Device d0(createCudaDevice(0)), d1(createCudaDevice(1));
    CHECK(d0.load(vaddBinary(128, 0)).residentPrograms() == 108 * 16);
    CHECK(d1.load(vaddBinary(1024, 0)).residentPrograms() == 132 * 2);
    CHECK(d1.load(vaddBinary(32, 0)).residentPrograms() == 132 * 32);
    CHECK(d0.load(vaddBinary(128, 64 * 1024)).residentPrograms() == 108 * 2);
    CHECK(d1.load(vaddBinary(128, 100 * 1024)).residentPrograms() == 132 * 2);
  }
  SECTION("HIP") {
    EnvGuard env("TESSERA_HIP_LIBRARY", TESSERA_FAKE_HIP);
    // The fake: 304 CUs, 2 workgroups of any kernel a CU.
    Device dev(createHipDevice(0));
    CHECK(dev.load(fakeHipCheckedBinary()).residentPrograms() == 304 * 2);
  }
  CHECK_THROWS_AS(Kernel().residentPrograms(), LaunchError);
}

TEST_CASE("fake HIP runtime: a checked launch passes the extents and a record and raises its violation",
          "[gpu][hip][fake]") {
  EnvGuard env("TESSERA_HIP_LIBRARY", TESSERA_FAKE_HIP);
  auto lastParams = fakeFn<void (*)(uint64_t*)>(TESSERA_FAKE_HIP, "fake_hip_last_params");
  Device dev(createHipDevice(0));
  Buffer a = dev.alloc(DType::F32, 64), out = dev.alloc(DType::F32, 64);
  Kernel k = dev.load(fakeHipCheckedBinary());
  Arg view(out);
  view.offset = 16;
  LaunchOptions o;
  o.checkBounds = true;
  CHECK_THROWS_WITH(k.launch(Dim3(2), {a, view, 64}, o),
                    Catch::Contains("out-of-bounds access by 'store @ user.cpp:11': argument 1 (ptr<f32> out) at "
                                    "byte offset 192, outside its 192 bytes (48 f32 from the pointer passed), by "
                                    "thread 5 of program (1, 0, 0)"));
  uint64_t p[6] = {};
  lastParams(p);
  CHECK(p[0] == reinterpret_cast<uint64_t>(a.data()));
  CHECK(p[1] == reinterpret_cast<uint64_t>(out.data()) + 16 * 4);
  CHECK(p[2] == 64);
  CHECK(p[3] == 256);
  CHECK(p[4] == 192);
  CHECK(p[5] != 0);
}

TEST_CASE("fake CUDA driver: tensor maps are encoded by the driver and passed after the arguments",
          "[gpu][cuda][fake][tma]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  auto lastLaunch = fakeFn<int (*)(FakeLaunch*)>(TESSERA_FAKE_CUDA, "fake_cuda_last_launch");
  auto encodes = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_tensor_map_encodes");
  Device dev(createCudaDevice(1));  // the fake's sm_90
  Kernel k = dev.load(tmaBinary());
  CHECK_THAT(k.signature().str(), Contains("tma(a: f16 dims [K, M] strides [1, K] box [32, 8] swizzle 64)"));
  Buffer a = dev.alloc(DType::F16, 64 * 100), b = dev.alloc(DType::BF16, 40 * 16 * 4 + 8);
  Arg bShifted(b);
  bShifted.offset = 8;  // 16 bytes: still aligned

  // Checks the launch the fake recorded: user arguments first, then one
  // 128-byte map per TensorMapSpec with exactly what the driver was given.
  auto checkLast = [&] {
    FakeLaunch l{};
    lastLaunch(&l);
    CHECK(std::string(l.kernel) == "tma2");
    REQUIRE(l.numParams == 7);
    CHECK(l.params[0] == reinterpret_cast<uint64_t>(a.data()));
    CHECK(l.params[1] == reinterpret_cast<uint64_t>(b.data()) + 16);
    CHECK(l.params[2] == 64);
    CHECK(l.params[3] == 100);
    CHECK(l.params[4] == 40);
    CHECK((l.paramBytes[5] == 128 && l.paramBytes[6] == 128));
    REQUIRE(l.numTensorMaps == 2);

    const FakeTensorMap& ma = l.tensorMaps[0];
    CHECK(ma.magic == FakeTensorMap::kMagic);
    CHECK(ma.address == reinterpret_cast<uint64_t>(a.data()));
    CHECK(ma.dataType == 6);  // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    CHECK(ma.rank == 2);
    CHECK((ma.dims[0] == 64 && ma.dims[1] == 100));
    CHECK(ma.strides[0] == 128);  // bytes, dimension 1 only
    CHECK((ma.box[0] == 32 && ma.box[1] == 8));
    CHECK((ma.elementStrides[0] == 1 && ma.elementStrides[1] == 1));
    CHECK(ma.interleave == 0);
    CHECK(ma.swizzle == 2);      // CU_TENSOR_MAP_SWIZZLE_64B
    CHECK(ma.l2Promotion == 2);  // L2_128B
    CHECK(ma.oobFill == 0);      // zeros

    const FakeTensorMap& mb = l.tensorMaps[1];
    CHECK(mb.magic == FakeTensorMap::kMagic);
    CHECK(mb.address == reinterpret_cast<uint64_t>(b.data()) + 16);
    CHECK(mb.dataType == 9);  // BFLOAT16
    CHECK(mb.rank == 3);
    CHECK((mb.dims[0] == 40 && mb.dims[1] == 16 && mb.dims[2] == 4));
    CHECK((mb.strides[0] == 80 && mb.strides[1] == 1280));
    CHECK((mb.box[0] == 64 && mb.box[1] == 4 && mb.box[2] == 2));
    CHECK(mb.swizzle == 3);  // 128B
  };

  SECTION("synchronous") {
    const int before = encodes();
    k.launch(Dim3(2, 13), {a, bShifted, 64, 100, int64_t{40}});
    CHECK(encodes() == before + 2);
    checkLast();
  }
  SECTION("asynchronous, on a stream") {
    Stream st = dev.createStream();
    LaunchOptions o;
    o.stream = st;
    k.launch(Dim3(2, 13), {a, bShifted, 64, 100, int64_t{40}}, o);
    st.synchronize();
    checkLast();
  }
}

TEST_CASE("fake CUDA driver: tensor maps TMA cannot take are launch errors that never reach the driver",
          "[gpu][cuda][fake][tma]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  auto lastLaunch = fakeFn<int (*)(FakeLaunch*)>(TESSERA_FAKE_CUDA, "fake_cuda_last_launch");
  auto encodes = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_tensor_map_encodes");
  Device dev(createCudaDevice(1));
  Kernel k = dev.load(tmaBinary());
  Buffer a = dev.alloc(DType::F16, 64 * 100), b = dev.alloc(DType::BF16, 40 * 16 * 4);
  FakeLaunch l{};
  const int launches = lastLaunch(&l), before = encodes();

  // A row of 10 f16 is 20 bytes: TMA needs strides that are multiples of 16.
  CHECK(errorOf<LaunchError>([&] { k.launch(Dim3(1), {a, b, 10, 100, int64_t{40}}); }) ==
        "tma2: argument 'K' (i32 K = 10): the TMA tensor map of 'a' needs a row stride that is a multiple of 16 "
        "bytes (10 f16 = 20 bytes); pad the rows to a multiple of 8 elements");
  // The second map: its plane stride is 16*N.
  CHECK_THAT(errorOf<LaunchError>([&] { k.launch(Dim3(1), {a, b, 64, 100, int64_t{36}}); }),
             Contains("tma2: argument 'N' (i64 N = 36): the TMA tensor map of 'b' needs a row stride that is a "
                      "multiple of 16 bytes (36 bf16 = 72 bytes)"));
  // A buffer offset of 3 f16 puts the map's address 6 bytes off 16.
  Arg shifted(a);
  shifted.offset = 3;
  CHECK(errorOf<LaunchError>([&] { k.launch(Dim3(1), {shifted, b, 64, 100, int64_t{40}}); }) ==
        "tma2: argument 'a' (ptr<f16> a, offset 3): the TMA tensor map of 'a' needs an address that is a multiple "
        "of 16 bytes, but the offset of 3 f16 elements (6 bytes) is not; pass an offset that is a multiple of 8 "
        "elements");
  // An empty dimension.
  CHECK_THAT(errorOf<LaunchError>([&] { k.launch(Dim3(1), {a, b, 64, 0, int64_t{40}}); }),
             Contains("argument 'M' (i32 M = 0): the TMA tensor map of 'a' needs every dimension in 1..2^32, but "
                      "dimension 1 is M = 0; TMA cannot describe an empty tensor"));

  CHECK(encodes() == before);         // the driver encoded nothing
  CHECK(lastLaunch(&l) == launches);  // and launched nothing
  // A correct launch after them still works.
  k.launch(Dim3(1), {a, b, 64, 100, int64_t{40}});
  CHECK(encodes() == before + 2);
}

TEST_CASE("fake CUDA driver: tensor maps need an sm_90 device", "[gpu][cuda][fake][tma]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  auto encodes = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_tensor_map_encodes");
  Device dev(createCudaDevice(0));  // the fake's sm_80 (the real driver would refuse the sm_90a PTX itself)
  Kernel k = dev.load(tmaBinary());
  Buffer a = dev.alloc(DType::F16, 64 * 100), b = dev.alloc(DType::BF16, 40 * 16 * 4);
  const int before = encodes();
  CHECK(errorOf<LaunchError>([&] { k.launch(Dim3(1), {a, b, 64, 100, int64_t{40}}); }) ==
        "tma2: tensor maps need an NVIDIA device of compute capability 9.0 or newer (sm_90a); cuda:0 Fake A100 is "
        "nvptx:sm_80; run the kernel on a Hopper GPU or on Device::emulator(\"nvptx:sm_90a\")");
  CHECK(encodes() == before);
}

TEST_CASE("fake CUDA driver: a driver without cuTensorMapEncodeTiled is named", "[gpu][cuda][fake][tma]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  // The driver object the devices of this library share, with the entry
  // point taken away for the test, as a CUDA 11 driver lacks it.
  auto& drv = const_cast<cudadrv::CudaDriver&>(*cudadrv::cudaDriver());
  REQUIRE(drv.TensorMapEncodeTiled != nullptr);
  struct Restore {
    cudadrv::CudaDriver& d;
    cuabi::PFN_TensorMapEncodeTiled fn = d.TensorMapEncodeTiled;
    ~Restore() { d.TensorMapEncodeTiled = fn; }
  } restore{drv};
  drv.TensorMapEncodeTiled = nullptr;
  Device dev(createCudaDevice(1));
  Kernel k = dev.load(tmaBinary());
  Buffer a = dev.alloc(DType::F16, 64 * 100), b = dev.alloc(DType::BF16, 40 * 16 * 4);
  CHECK(errorOf<LaunchError>([&] { k.launch(Dim3(1), {a, b, 64, 100, int64_t{40}}); }) ==
        std::string("tma2: the kernel uses TMA tensor maps, but the CUDA driver (") + TESSERA_FAKE_CUDA +
            ") lacks cuTensorMapEncodeTiled; tensor maps need a CUDA 12 driver or newer");
}

// ---- thread-block clusters ------------------------------------------------------

namespace {
/// vadd compiled for clusters of `c`: its PTX states the shape
/// (.reqnctapercluster, which the fake driver reads) and so does the binary.
Binary clusterVaddBinary(Dim3 c, unsigned threadsPerBlock = 128) {
  Binary b = vaddBinary(threadsPerBlock);
  const std::string req =
      ".reqnctapercluster " + std::to_string(c.x) + ", " + std::to_string(c.y) + ", " + std::to_string(c.z) + "\n";
  b.ptx.insert(b.ptx.find("{\n\t.reg"), req);
  b.cluster[0] = c.x, b.cluster[1] = c.y, b.cluster[2] = c.z;
  return b;
}

/// The launch the fake driver recorded last.
FakeLaunch lastFakeLaunch() {
  FakeLaunch l{};
  fakeFn<int (*)(FakeLaunch*)>(TESSERA_FAKE_CUDA, "fake_cuda_last_launch")(&l);
  return l;
}
}  // namespace

TEST_CASE("fake CUDA driver: launches in clusters go through cuLaunchKernelEx with the cluster's shape",
          "[gpu][cuda][fake][cluster]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Device dev(createCudaDevice(1));  // the fake's compute capability 9.0
  const int n = 1000;
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) a[i] = static_cast<float>(i), b[i] = 0.25f * static_cast<float>(i);
  Buffer da = dev.upload(DType::F32, a), db = dev.upload(DType::F32, b), out = dev.alloc(DType::F32, n);
  auto checkLast = [&](Dim3 grid, Dim3 cluster) {
    const FakeLaunch l = lastFakeLaunch();
    CHECK(std::string(l.kernel) == "vadd");
    CHECK(l.launchEx == 1);
    CHECK((l.grid[0] == grid.x && l.grid[1] == grid.y && l.grid[2] == grid.z));
    CHECK((l.cluster[0] == cluster.x && l.cluster[1] == cluster.y && l.cluster[2] == cluster.z));
    // The rest of the launch is what cuLaunchKernel would have been given.
    CHECK((l.block[0] == 128 && l.block[1] == 1 && l.block[2] == 1));
    CHECK(l.sharedBytes == 0);
    REQUIRE(l.numParams == 4);
    CHECK(l.params[0] == reinterpret_cast<uint64_t>(da.data()));
    CHECK(l.params[2] == reinterpret_cast<uint64_t>(out.data()));
    CHECK(l.params[3] == static_cast<uint64_t>(n));
    std::vector<float> got = out.read<float>();
    CHECK(got[n - 1] == a[n - 1] + b[n - 1]);
  };

  SECTION("the shape compiled into the kernel") {
    Kernel k = dev.load(clusterVaddBinary(Dim3(2)));
    k.launch(Dim3(8), {da, db, out, n});
    checkLast(Dim3(8), Dim3(2, 1, 1));
    // Stating the same shape in the options changes nothing.
    LaunchOptions o;
    o.cluster = Dim3(2, 1, 1);
    out.fillBytes(0);
    k.launch(Dim3(8), {da, db, out, n}, o);
    checkLast(Dim3(8), Dim3(2, 1, 1));
  }
  SECTION("a shape from LaunchOptions, for a kernel compiled without one") {
    Kernel k = dev.load(vaddBinary());
    LaunchOptions o;
    o.cluster = Dim3(4, 1, 1);
    k.launch(Dim3(8), {da, db, out, n}, o);
    checkLast(Dim3(8), Dim3(4, 1, 1));
    o.cluster = Dim3(2, 2, 1);
    out.fillBytes(0);
    k.launch(Dim3(8, 2), {da, db, out, n}, o);
    checkLast(Dim3(8, 2), Dim3(2, 2, 1));
  }
  SECTION("asynchronous, on a stream") {
    Kernel k = dev.load(clusterVaddBinary(Dim3(2, 1, 1)));
    Stream st = dev.createStream();
    LaunchOptions o;
    o.stream = st;
    k.launch(Dim3(8), {da, db, out, n}, o);
    st.synchronize();
    checkLast(Dim3(8), Dim3(2, 1, 1));
  }
  SECTION("launches without a cluster keep cuLaunchKernel") {
    Kernel k = dev.load(vaddBinary());
    k.launch(Dim3(8), {da, db, out, n});
    FakeLaunch l = lastFakeLaunch();
    CHECK(l.launchEx == 0);
    CHECK((l.cluster[0] == 0 && l.cluster[1] == 0 && l.cluster[2] == 0));
    LaunchOptions o;
    o.cluster = Dim3(1, 1, 1);  // a cluster of one block is no cluster
    k.launch(Dim3(8), {da, db, out, n}, o);
    CHECK(lastFakeLaunch().launchEx == 0);
  }
  SECTION("a cluster the driver refuses is a DeviceError naming cuLaunchKernelEx") {
    // An inconsistent binary: its PTX requires clusters of 2, the binary
    // states none, so the launch's shape passes the runtime's checks.
    Binary bin = clusterVaddBinary(Dim3(2));
    bin.cluster[0] = 1;
    Kernel k = dev.load(bin);
    LaunchOptions o;
    o.cluster = Dim3(4, 1, 1);
    CHECK_THAT(deviceError([&] { k.launch(Dim3(8), {da, db, out, n}, o); }),
               Contains("launching kernel 'vadd' (grid {8, 1, 1} in clusters of {4, 1, 1}, 128 threads per block, 0 "
                        "bytes of shared memory): cuLaunchKernelEx failed: CUDA_ERROR_INVALID_CLUSTER_SIZE"));
  }
}

TEST_CASE("fake CUDA driver: clusters the launch cannot run are launch errors that never reach the driver",
          "[gpu][cuda][fake][cluster]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  auto launches = [] {
    FakeLaunch l{};
    return fakeFn<int (*)(FakeLaunch*)>(TESSERA_FAKE_CUDA, "fake_cuda_last_launch")(&l);
  };
  Device d0(createCudaDevice(0)), d1(createCudaDevice(1));
  Buffer a = d1.alloc(DType::F32, 64);
  Kernel compiled = d1.load(clusterVaddBinary(Dim3(2)));
  Kernel plain = d1.load(vaddBinary());
  const int before = launches();
  LaunchOptions o;

  o.cluster = Dim3(2, 0, 1);
  CHECK(errorOf<LaunchError>([&] { plain.launch(Dim3(8), {a, a, a, 64}, o); }) ==
        "vadd: LaunchOptions::cluster {2, 0, 1} has a dimension of 0; give all three dimensions of the cluster (1 "
        "along one it does not span), or leave it {0, 0, 0} for the shape the kernel was compiled for (none)");
  CHECK_THAT(errorOf<LaunchError>([&] { compiled.launch(Dim3(8), {a, a, a, 64}, o); }),
             Contains("for the shape the kernel was compiled for ({2, 1, 1})"));

  o.cluster = Dim3(4, 1, 1);
  CHECK(errorOf<LaunchError>([&] { compiled.launch(Dim3(8), {a, a, a, 64}, o); }) ==
        "vadd: LaunchOptions::cluster {4, 1, 1} differs from the cluster shape {2, 1, 1} the kernel was compiled "
        "for, which a launch cannot change; leave LaunchOptions::cluster {0, 0, 0} (or set it to {2, 1, 1}), or "
        "compile the kernel for the shape you want");
  o.cluster = Dim3(1, 1, 1);
  CHECK_THAT(errorOf<LaunchError>([&] { compiled.launch(Dim3(8), {a, a, a, 64}, o); }),
             Contains("LaunchOptions::cluster {1, 1, 1} differs from the cluster shape {2, 1, 1}"));

  CHECK(errorOf<LaunchError>([&] { compiled.launch(Dim3(5, 3), {a, a, a, 64}); }) ==
        "vadd: grid {5, 3, 1} is not a multiple of a cluster of {2, 1, 1} (2 blocks, compiled into the kernel) in "
        "dimension x; every grid dimension must be a multiple of the cluster's: launch {6, 3, 1} and mask the "
        "programs past the work");
  o.cluster = Dim3(1, 2, 2);
  CHECK_THAT(errorOf<LaunchError>([&] { plain.launch(Dim3(4, 4, 3), {a, a, a, 64}, o); }),
             Contains("vadd: grid {4, 4, 3} is not a multiple of a cluster of {1, 2, 2} (4 blocks, from "
                      "LaunchOptions::cluster) in dimension z; every grid dimension must be a multiple of the "
                      "cluster's: launch {4, 4, 4}"));
  // An empty grid is checked all the same.
  CHECK_THAT(errorOf<LaunchError>([&] { plain.launch(Dim3(0, 3), {a, a, a, 64}, o); }), Contains("in dimension y"));

  o.cluster = Dim3(4, 4, 1);
  CHECK(errorOf<LaunchError>([&] { plain.launch(Dim3(8, 8), {a, a, a, 64}, o); }) ==
        "vadd: a cluster of {4, 4, 1} (16 blocks, from LaunchOptions::cluster) is too large: cuda:1 Fake H100 runs "
        "clusters of at most 8 blocks (NVIDIA's portable cluster size)");

  // Compute capability 8.0 has no clusters.
  Kernel onA100 = d0.load(vaddBinary());
  Buffer a0 = d0.alloc(DType::F32, 64);
  o.cluster = Dim3(2, 1, 1);
  CHECK(errorOf<LaunchError>([&] { onA100.launch(Dim3(8), {a0, a0, a0, 64}, o); }) ==
        "vadd: a cluster of {2, 1, 1} (2 blocks, from LaunchOptions::cluster) needs thread-block clusters, which "
        "cuda:0 Fake A100 (nvptx:sm_80) does not have; clusters run on CUDA devices of the targets nvptx:sm_90a, "
        "nvptx:sm_100a, nvptx:sm_103a, nvptx:sm_120a and on Device::emulator of those targets");
  CHECK_THAT(errorOf<LaunchError>([&] { onA100.residentPrograms(o); }),
             Contains("cuda:0 Fake A100 (nvptx:sm_80) does not have"));

  CHECK(launches() == before);  // the driver launched nothing
  compiled.launch(Dim3(8), {a, a, a, 64});
  CHECK(launches() == before + 1);
}

TEST_CASE("fake CUDA driver: resident programs of a kernel in clusters are whole clusters",
          "[gpu][cuda][fake][cluster]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  // The fake: 8 GPCs of 16 SMs hold clusters on the H100 (cuda:1), each
  // as many whole clusters as its SMs' blocks allow: 16 blocks of 128
  // threads an SM, 2 of 1024.
  Device d1(createCudaDevice(1));
  CHECK(d1.load(clusterVaddBinary(Dim3(2))).residentPrograms() == 8 * (16 * 16 / 2) * 2);
  Kernel big = d1.load(vaddBinary(1024));
  CHECK(big.residentPrograms() == 132 * 2);  // no cluster: SMs x blocks per SM
  LaunchOptions o;
  o.cluster = Dim3(3, 1, 1);
  CHECK(big.residentPrograms(o) == 8 * (16 * 2 / 3) * 3);  // 240: not 132 x 2
  o.cluster = Dim3(2, 2, 2);
  CHECK(big.residentPrograms(o) == 8 * (16 * 2 / 8) * 8);
  o.cluster = Dim3(2, 0, 2);
  CHECK_THROWS_AS(big.residentPrograms(o), LaunchError);
}

TEST_CASE("fake CUDA driver: a driver without the cluster entry points is named when a cluster needs one",
          "[gpu][cuda][fake][cluster]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  // As a driver that predates clusters lacks them.
  auto& drv = const_cast<cudadrv::CudaDriver&>(*cudadrv::cudaDriver());
  REQUIRE(drv.LaunchKernelEx != nullptr);
  REQUIRE(drv.OccupancyMaxActiveClusters != nullptr);
  struct Restore {
    cudadrv::CudaDriver& d;
    cuabi::PFN_LaunchKernelEx launch = d.LaunchKernelEx;
    cuabi::PFN_OccupancyMaxActiveClusters occupancy = d.OccupancyMaxActiveClusters;
    ~Restore() { d.LaunchKernelEx = launch, d.OccupancyMaxActiveClusters = occupancy; }
  } restore{drv};
  drv.LaunchKernelEx = nullptr;
  drv.OccupancyMaxActiveClusters = nullptr;
  Device dev(createCudaDevice(1));
  Buffer a = dev.alloc(DType::F32, 64);
  Kernel k = dev.load(clusterVaddBinary(Dim3(2)));
  CHECK(errorOf<LaunchError>([&] { k.launch(Dim3(2), {a, a, a, 64}); }) ==
        std::string("vadd: a launch in clusters needs cuLaunchKernelEx, which the CUDA driver (") + TESSERA_FAKE_CUDA +
            ") lacks; thread-block clusters need a CUDA 12 driver or newer");
  CHECK(errorOf<LaunchError>([&] { k.residentPrograms(); }) ==
        std::string("vadd: the resident programs of a kernel in clusters need cuOccupancyMaxActiveClusters, which "
                    "the CUDA driver (") +
            TESSERA_FAKE_CUDA + ") lacks; thread-block clusters need a CUDA 12 driver or newer");
  // Everything else works without them.
  Kernel plain = dev.load(vaddBinary());
  plain.launch(Dim3(2), {a, a, a, 64});
  CHECK(plain.residentPrograms() == 132 * 16);
  CHECK(lastFakeLaunch().launchEx == 0);
}

TEST_CASE("fake HIP runtime: AMD GPUs have no clusters", "[gpu][hip][fake][cluster]") {
  EnvGuard env("TESSERA_HIP_LIBRARY", TESSERA_FAKE_HIP);
  Device dev(createHipDevice(0));
  Buffer a = dev.alloc(DType::F32, 64), out = dev.alloc(DType::F32, 64);
  Binary bin = fakeHipCheckedBinary();
  LaunchOptions o;
  o.cluster = Dim3(2, 1, 1);
  Kernel k = dev.load(bin);
  const std::string msg = errorOf<LaunchError>([&] { k.launch(Dim3(2), {a, out, 64}, o); });
  CHECK_THAT(msg, Contains("checked_oob: a cluster of {2, 1, 1} (2 blocks, from LaunchOptions::cluster) needs "
                           "thread-block clusters, which " +
                           dev.name() + " (amdgpu:gfx90a) does not have"));
  CHECK_THROWS_AS(k.residentPrograms(o), LaunchError);
  bin.cluster[0] = 2;  // a binary that claims a cluster
  CHECK_THAT(errorOf<LaunchError>([&] { dev.load(bin).launch(Dim3(2), {a, out, 64}); }),
             Contains("(2 blocks, compiled into the kernel) needs thread-block clusters"));
}

// ---- real GPUs ------------------------------------------------------------------

namespace {
/// Whether a real CUDA device is present (call with TESSERA_CUDA_LIBRARY
/// unset); if not, a SKIP warning saying why and that `what` was not run,
/// which ctest reports as skipped (SKIP_REGULAR_EXPRESSION), never as a pass.
bool realCudaDevice(const char* what) {
  if (cudaDeviceCount() > 0) return true;
  WARN("SKIP: no CUDA device: " << deviceError([] { createCudaDevice(0); }) << " -- " << what << " not run");
  return false;
}
}  // namespace

TEST_CASE("a hand-written PTX kernel runs on a real CUDA device", "[gpu][cuda][hardware]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", nullptr);
  if (!realCudaDevice("PTX kernel")) return;
  Device dev = Device::cuda(0);
  INFO(dev.name() << " (" << dev.arch() << ")");
  CHECK(dev.arch().rfind("nvptx:sm_", 0) == 0);
  for (int n : {1, 255, 256, 100000}) {
    INFO("n = " << n);
    runVadd(dev, n, 256);
  }
  // A kernel the JIT rejects reports its log.
  Binary bad = vaddBinary();
  bad.ptx.replace(bad.ptx.find("add.rn.f32"), 10, "add.rn.q32");
  CHECK_THAT(deviceError([&] { dev.load(bad); }), Contains("JIT error log"));
}

TEST_CASE("a hand-written TMA kernel reads through a tensor map the launch built", "[gpu][cuda][hardware][tma]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", nullptr);
  if (!realCudaDevice("TMA kernel")) return;
  Device dev = Device::cuda(0);
  if (dev.arch() != "nvptx:sm_90a") {
    WARN("SKIP: " << dev.name() << " is " << dev.arch() << ", not sm_90a -- TMA kernel not run");
    return;
  }
  // tma_tile(ptr<f16> out, ptr<f16> a, i32 K, i32 M): block (x, y) loads the
  // 32 x 8 tile of `a` at (32x, 8y) with one cp.async.bulk.tensor and copies
  // its elements inside K x M to `out` (checked with ptxas 13.0).
  Binary bin = ptxBinary("tma_tile", R"(.version 8.0
.target sm_90a
.address_size 64

.visible .entry tma_tile(
	.param .u64 tma_tile_out,
	.param .u64 tma_tile_a,
	.param .u32 tma_tile_K,
	.param .u32 tma_tile_M,
	.param .align 64 .b8 tma_tile_map[128]
)
{
	.reg .pred %p<4>;
	.reg .b32 %r<16>;
	.reg .b64 %rd<8>;
	.reg .b16 %h<2>;
	.shared .align 128 .b8 tile[512];
	.shared .align 8 .b64 bar;

	ld.param.u64 %rd1, [tma_tile_out];
	ld.param.u32 %r10, [tma_tile_K];
	ld.param.u32 %r11, [tma_tile_M];
	mov.b64 %rd2, tma_tile_map;
	cvta.param.u64 %rd3, %rd2;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ctaid.y;
	shl.b32 %r4, %r2, 5;
	shl.b32 %r5, %r3, 3;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra INIT_DONE;
	mbarrier.init.shared::cta.b64 [bar], 1;
	fence.mbarrier_init.release.cluster;
	fence.proxy.async.shared::cta;
INIT_DONE:
	bar.sync 0;
	@%p1 bra WAIT;
	mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 512;
	cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [tile], [%rd3, {%r4, %r5}], [bar];
WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
	@!%p2 bra WAIT;
	// Thread t copies column t of the 32 x 8 tile to out, inside K x M.
	add.u32 %r6, %r4, %r1;
	setp.ge.u32 %p3, %r6, %r10;
	@%p3 bra DONE;
	mov.u32 %r7, 0;
	mov.u32 %r12, tile;
LOOP:
	add.u32 %r8, %r5, %r7;
	setp.ge.u32 %p3, %r8, %r11;
	@%p3 bra DONE;
	mad.lo.u32 %r9, %r7, 32, %r1;
	shl.b32 %r9, %r9, 1;
	add.u32 %r9, %r9, %r12;
	ld.shared.b16 %h1, [%r9];
	mad.lo.u32 %r13, %r8, %r10, %r6;
	mul.wide.u32 %rd4, %r13, 2;
	add.s64 %rd5, %rd1, %rd4;
	st.global.b16 [%rd5], %h1;
	add.u32 %r7, %r7, 1;
	setp.lt.u32 %p3, %r7, 8;
	@%p3 bra LOOP;
DONE:
	ret;
}
)",
                         32);
  bin.signature.kernelName = "tma_tile";
  bin.signature.args = {{ArgSpec::Kind::Pointer, DType::F16, "out"},
                        {ArgSpec::Kind::Pointer, DType::F16, "a"},
                        {ArgSpec::Kind::Scalar, DType::I32, "K"},
                        {ArgSpec::Kind::Scalar, DType::I32, "M"}};
  bin.signature.tensorMaps = {rowMajorTensorMap(1, DType::F16, 2, 3, 32, 8, 0)};
  Kernel k = dev.load(bin);

  const int K = 88, M = 21;  // neither a multiple of the box: the last tiles are partly out of bounds
  std::vector<uint16_t> a(K * M);
  for (int i = 0; i < K * M; ++i) a[i] = static_cast<uint16_t>(0x3c00 + i % 1000);
  Buffer da = dev.upload(DType::F16, a), dout = dev.alloc(DType::F16, K * M);
  dout.fillBytes(0xFF);
  k.launch(Dim3((K + 31) / 32, (M + 7) / 8), {dout, da, K, M});
  CHECK(dout.read<uint16_t>() == a);
  // The launch-time checks hold on the real device as well.
  CHECK_THROWS_WITH(k.launch(Dim3(1), {dout, da, 10, M}), Contains("needs a row stride that is a multiple of 16"));
}

TEST_CASE("memory round-trips through a real HIP device", "[gpu][hip][hardware]") {
  EnvGuard env("TESSERA_HIP_LIBRARY", nullptr);
  if (hipDeviceCount() == 0) {
    WARN("SKIP: no HIP device: " << deviceError([] { createHipDevice(0); }) << " -- HIP device not exercised");
    return;
  }
  Device dev = Device::hip(0);
  INFO(dev.name());
  CHECK(dev.arch().rfind("amdgpu:gfx", 0) == 0);
  Buffer b = dev.alloc(DType::I32, 1000);
  std::vector<int32_t> z = b.read<int32_t>();
  CHECK(std::all_of(z.begin(), z.end(), [](int32_t v) { return v == 0; }));
  std::vector<int32_t> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = 3 * i - 17;
  b.write(v);
  CHECK(b.read<int32_t>() == v);
  b.fillBytes(0x02);
  for (int32_t x : b.read<int32_t>()) REQUIRE(x == 0x02020202);
  Binary ptx = vaddBinary();
  CHECK_THAT(deviceError([&] { dev.load(ptx); }), Contains("not an AMDGPU code object (HSACO)"));
  WARN(
      "no HIP code object is built by this test: kernel launches on HIP are covered by the "
      "end-to-end GPU tests");
}

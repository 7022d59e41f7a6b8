// The device interface every backend implements (runtime-private).
//
// A backend sees only opaque device addresses (DevicePtr: a host pointer on
// the CPU, a CUdeviceptr on CUDA, a hipDeviceptr_t on HIP), byte counts and
// an already-marshalled kernelParams array. Everything that is the same for
// every backend -- argument validation, marshalling, buffer bookkeeping --
// lives above this interface in Runtime.cpp, so a CUDA or HIP device (loaded
// with dlopen) only has to translate these calls into driver calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "tessera/runtime/Runtime.h"

namespace tessera::rt {

/// An address in a device's memory space. 64 bits wide so it can carry a
/// CUdeviceptr / hipDeviceptr_t as well as a host pointer.
using DevicePtr = uint64_t;

/// A binary loaded on one device (a host function, a CUmodule + CUfunction,
/// a hipModule + hipFunction). Each device kind derives its own.
struct KernelState {
  virtual ~KernelState() = default;
};

/// How a GPU device names a launch in its errors: "kernel 'k' (grid {4, 1,
/// 1}, 128 threads per block, 0 bytes of shared memory)".
std::string describeLaunch(const KernelSignature& sig, Dim3 grid, unsigned threadsPerBlock, unsigned sharedBytes);

class DeviceImpl {
 public:
  virtual ~DeviceImpl() = default;

  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;
  /// Parallelism a launch gets when LaunchOptions leaves it open.
  virtual unsigned defaultThreads() const = 0;
  /// Target spelling of the code this device runs ("" for the CPU).
  virtual std::string arch() const { return {}; }

  /// Allocates `bytes` (> 0) of zero-initialised device memory; throws
  /// DeviceError when the device is out of memory.
  virtual DevicePtr alloc(size_t bytes) = 0;
  /// Frees an allocation from alloc(). Called from destructors: never throws.
  virtual void free(DevicePtr p) noexcept = 0;
  /// Copies; sizes have already been checked against the buffer.
  virtual void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes) = 0;
  virtual void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes) = 0;
  virtual void fill(DevicePtr dst, uint8_t byte, size_t bytes) = 0;

  /// Loads a compiled binary; throws DeviceError when its format does not
  /// suit this device or the driver rejects it.
  virtual std::shared_ptr<KernelState> load(const Binary& bin) = 0;
  /// Runs a loaded kernel over `grid` (already validated) to completion.
  /// `args` is a kernelParams array: args[i] points at the i-th argument's
  /// value in its exact width (a DevicePtr for pointer arguments).
  virtual void launch(KernelState& k, const KernelSignature& sig, Dim3 grid, void** args,
                      const LaunchOptions& opts) = 0;
  /// Waits for outstanding work (launches are synchronous on the CPU).
  virtual void synchronize() = 0;
};

/// A device whose memory is host memory (the CPU, the SIMT emulator):
/// copies and fills are memcpy / memset.
class HostMemoryDevice : public DeviceImpl {
 public:
  void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  }
  void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes) override {
    if (bytes) std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  }
  void fill(DevicePtr dst, uint8_t byte, size_t bytes) override {
    if (bytes) std::memset(reinterpret_cast<void*>(dst), byte, bytes);
  }
};

/// What a Buffer handle shares: memory is returned to the device when the
/// last handle goes.
struct Buffer::State {
  std::shared_ptr<DeviceImpl> device;
  DType dtype = DType::I8;
  size_t count = 0;  // elements
  DevicePtr ptr = 0;

  State(std::shared_ptr<DeviceImpl> d, DType t, size_t n, DevicePtr p)
      : device(std::move(d)), dtype(t), count(n), ptr(p) {}
  ~State() {
    if (ptr) device->free(ptr);
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  size_t bytes() const { return count * byteSize(dtype); }
};

struct Kernel::State {
  std::shared_ptr<DeviceImpl> device;
  KernelSignature signature;
  std::shared_ptr<KernelState> loaded;
  bool boundsChecked = false;        // Binary::boundsChecked
  std::vector<std::string> opNames;  // Binary::opNames, for its reports
};

/// The host CPU device (runtime/lib/CpuDevice.cpp) running code compiled for
/// the LLVM cpu `cpu` ("" = the host's own).
std::shared_ptr<DeviceImpl> createCpuDevice(const std::string& cpu);

/// The SIMT emulator device (runtime/lib/EmuDevice.cpp); `arch` as in
/// Device::emulator.
std::shared_ptr<DeviceImpl> createEmuDevice(const std::string& arch);
/// GPU devices through their drivers, loaded with dlopen
/// (runtime/lib/CudaDevice.cpp, HipDevice.cpp). The counts are 0 when the
/// library or driver is absent (never throw); create* throws DeviceError
/// naming what is missing.
int cudaDeviceCount() noexcept;
std::shared_ptr<DeviceImpl> createCudaDevice(int ordinal);
int hipDeviceCount() noexcept;
std::shared_ptr<DeviceImpl> createHipDevice(int ordinal);

/// Upper bound on a host thread count (launch options, TESSERA_NUM_THREADS,
/// the pool): beyond it a typo (TESSERA_NUM_THREADS=1000000) would try to
/// start that many threads.
inline constexpr unsigned kMaxHostThreads = 1024;

/// The host threads a launch uses: LaunchOptions::threads, or the device's
/// default when it is 0. Throws LaunchError above kMaxHostThreads.
unsigned launchThreads(const LaunchOptions& opts, const KernelSignature& sig, const DeviceImpl& dev);

/// Parses TESSERA_NUM_THREADS: nullopt-like 0 when unset; throws LaunchError
/// naming the variable when it is set to anything but a positive count.
unsigned threadsFromEnvironment();

/// The pool's entry point without std::function: runs fn(ctx, begin, end)
/// over [0, n) in at most `threads` contiguous chunks.
using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);
void parallelForRaw(int64_t n, unsigned threads, RangeFn fn, void* ctx);

/// Round-to-nearest-even conversions used to marshal f16 / bf16 scalars.
uint16_t floatToHalfBits(float f);
uint16_t floatToBFloat16Bits(float f);

}  // namespace tessera::rt

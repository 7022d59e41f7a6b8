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
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tessera/runtime/Runtime.h"
#include "tessera/support/BoundsCheck.h"

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
/// 1}, 128 threads per block, 0 bytes of shared memory)"; a launch in
/// clusters adds them ("grid {4, 1, 1} in clusters of {2, 1, 1}").
std::string describeLaunch(const KernelSignature& sig, Dim3 grid, unsigned threadsPerBlock, unsigned sharedBytes,
                           Dim3 cluster = {});

/// One queue of work on a device. Each device derives its own (a host
/// worker queue, a CUstream, a hipStream_t).
class StreamImpl {
 public:
  virtual ~StreamImpl() = default;
  /// Waits for the submitted work; throws the first error it kept, once.
  virtual void synchronize() = 0;
  /// CUstream / hipStream_t; nullptr on host devices.
  virtual void* native() const { return nullptr; }
};

class EventImpl {
 public:
  virtual ~EventImpl() = default;
  bool recorded = false;  // Event::record was called (checked above the devices)
};

/// A TMA tensor map to encode (KernelSignature::tensorMaps), with every
/// extent resolved from the launch's arguments and checked against TMA's
/// rules (Launch.cpp): rank 2 or 3; address a multiple of 16; dims in
/// [1, 2^32]; byte strides (d >= 1) multiples of 16 below 2^40; box in
/// [1, 256] with box[0] * element bytes a multiple of 16; swizzleBytes 0 or
/// box[0] * element bytes, one of 32, 64, 128. Innermost dimension first.
struct TensorMapRequest {
  DType dtype = DType::F16;
  unsigned rank = 2;
  DevicePtr address = 0;  // the source buffer's address plus its offset
  uint64_t dims[3] = {1, 1, 1};
  uint64_t strides[3] = {0, 0, 0};  // bytes; strides[0] is the element size
  uint32_t box[3] = {1, 1, 1};
  uint32_t swizzleBytes = 0;
};

/// The storage of one encoded tensor map: the kernel parameter is a
/// 128-byte, 64-aligned blob passed by value (kernelParams points at it).
struct alignas(64) TensorMapBlob {
  unsigned char bytes[128];
};
static_assert(sizeof(TensorMapBlob) == 128);

/// Everything an asynchronous launch needs after Kernel::launch returns: the
/// marshalled kernelParams, the bounds-check record, and the handles that
/// keep the kernel and every buffer alive until the launch has run.
struct LaunchPacket {
  std::vector<uint64_t> slots;
  std::vector<void*> params;
  /// The encoded tensor maps params point at (after the user's arguments).
  /// Drivers copy parameters at launch; they are kept here all the same.
  std::vector<TensorMapBlob> tensorMaps;
  std::vector<int64_t> extents;
  BoundsCheckRecord record;
  /// A checked GPU launch: its record in device memory (the kernel's last
  /// parameter points at its address), kept until the launch has run.
  std::shared_ptr<void> deviceRecord;
  /// A profiled kernel's buffer (ProfileBuffer.h), kept likewise.
  std::shared_ptr<void> profileBuffer;
  std::shared_ptr<const Kernel::State> kernel;
  std::vector<std::shared_ptr<Buffer::State>> buffers;
  /// Throws the LaunchError of a checked launch that went out of bounds;
  /// the device calls it after the kernel has run.
  void finish() const;
};

/// What a driver stream (CUDA, HIP) holds between two synchronisations: the
/// keep-alives of the launches and copies queued on it -- the driver copies
/// kernel parameters at once, but the buffers must outlive the kernel --
/// and the latest kernel launched, which a fault found at synchronisation
/// is reported against (the driver does not say which kernel faulted).
class DriverStream : public StreamImpl {
 public:
  void keep(std::shared_ptr<void> p, const std::string& launch = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    if (p) inFlight_.push_back(std::move(p));
    if (!launch.empty()) {
      lastLaunch_ = launch;
      lastSeq_ = launchSeq().fetch_add(1, std::memory_order_relaxed) + 1;
    }
  }
  /// After a synchronisation: nothing queued needs its buffers any more.
  /// Returns the latest launch (and its place among all launches; 0: none).
  std::pair<uint64_t, std::string> release() {
    std::lock_guard<std::mutex> lock(mu_);
    inFlight_.clear();
    return {lastSeq_, lastLaunch_};
  }

 private:
  static std::atomic<uint64_t>& launchSeq() {
    static std::atomic<uint64_t> seq{0};
    return seq;
  }
  std::mutex mu_;
  std::string lastLaunch_;  // describeLaunch of the latest kernel
  uint64_t lastSeq_ = 0;
  std::vector<std::shared_ptr<void>> inFlight_;
};

/// The streams a device has handed out, for Device::synchronize: weak, so a
/// stream goes when its last handle does.
template <class S>
class StreamList {
 public:
  /// After a device-wide synchronisation of driver streams: releases every
  /// stream's keep-alives; returns the latest launch on any of them ("" if
  /// none), which a fault found then is reported against.
  std::string releaseAll() const {
    std::pair<uint64_t, std::string> latest{0, {}};
    for (const auto& s : live()) {
      auto r = s->release();
      if (r.first > latest.first) latest = std::move(r);
    }
    return latest.second;
  }
  void add(const std::shared_ptr<S>& s) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(list_, [](const std::weak_ptr<S>& w) { return w.expired(); });
    list_.push_back(s);
  }
  std::vector<std::shared_ptr<S>> live() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<S>> r;
    for (const auto& w : list_)
      if (auto p = w.lock()) r.push_back(std::move(p));
    return r;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::weak_ptr<S>> list_;
};

class DeviceImpl {
 public:
  virtual ~DeviceImpl() = default;

  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;
  /// Parallelism a launch gets when LaunchOptions leaves it open.
  virtual unsigned defaultThreads() const = 0;
  /// Target spelling of the code this device runs ("" for the CPU).
  virtual std::string arch() const { return {}; }
  /// The driver's device ordinal (0 on host devices), for DLPack's device_id.
  virtual int ordinal() const { return 0; }
  /// Makes this device current on the calling thread (the CUDA context, the
  /// HIP device), as a library sharing it (NCCL, RCCL) expects; nothing on
  /// host devices.
  virtual void makeCurrent() {}

  /// Allocates `bytes` (> 0) of zero-initialised device memory; throws
  /// DeviceError when the device is out of memory.
  virtual DevicePtr alloc(size_t bytes) = 0;
  /// Frees an allocation from alloc(). Called from destructors: never throws.
  virtual void free(DevicePtr p) noexcept = 0;
  /// Copies; sizes have already been checked against the buffer.
  virtual void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes) = 0;
  virtual void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes) = 0;
  virtual void fill(DevicePtr dst, uint8_t byte, size_t bytes) = 0;
  /// Within the device; ranges checked (same device, no overlap).
  virtual void copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes) = 0;

  /// Checks that [p, p + bytes) is memory of this device that kernels may
  /// use, as far as the device can tell, and starts tracking it where the
  /// device tracks memory (the emulator). Throws DeviceError for memory of
  /// another device, UsageError when a known allocation is smaller.
  virtual void adoptExternal(DevicePtr p, size_t bytes) = 0;
  /// Stops tracking memory from adoptExternal. Never throws.
  virtual void releaseExternal(DevicePtr p, size_t bytes) noexcept = 0;

  /// Loads a compiled binary; throws DeviceError when its format does not
  /// suit this device or the driver rejects it.
  virtual std::shared_ptr<KernelState> load(const Binary& bin) = 0;
  /// Encodes a checked tensor map of a kernel loaded on this device into
  /// `out128` (128 bytes, 64-aligned): the driver's CUtensorMap on CUDA, the
  /// emulator's tessera::emu::TensorMap. The default (devices without TMA)
  /// throws LaunchError naming the kernel, what it was compiled to and this
  /// device.
  virtual void encodeTensorMap(const Kernel::State& kernel, const TensorMapRequest& map, void* out128);
  /// The most blocks a thread-block cluster may have here; 0: the device
  /// has no clusters (the default: the CPU, HIP). Kernel::launch checks
  /// every cluster against it.
  virtual unsigned maxClusterBlocks() const { return 0; }
  /// Runs a loaded kernel over `grid` (already validated) to completion.
  /// `args` is a kernelParams array: args[i] points at the i-th argument's
  /// value in its exact width (a DevicePtr for pointer arguments).
  /// Ordered after the work already on the default stream, whose errors it
  /// throws first. Here and below, opts.cluster is the launch's effective
  /// cluster shape, already checked against the grid and this device
  /// (Launch.cpp): {1, 1, 1} when the launch has no cluster, never {0, 0, 0}.
  virtual void launch(KernelState& k, const KernelSignature& sig, Dim3 grid, void** args,
                      const LaunchOptions& opts) = 0;
  /// The programs (blocks) of `k` this device runs at once under `opts`
  /// (Kernel::residentPrograms). Here: the launch's worker threads, what
  /// the CPU and the emulator run blocks on, times the blocks of a cluster
  /// (one worker runs a whole cluster); GPU devices ask their driver.
  virtual unsigned residentPrograms(KernelState& k, const KernelSignature& sig, const LaunchOptions& opts);
  /// Queues a launch on `s` (a stream of this device) and returns; errors
  /// while it runs are kept by the stream. The packet's params are valid
  /// until the launch has run; call packet->finish() after the kernel.
  virtual void launchAsync(StreamImpl& s, KernelState& k, const KernelSignature& sig, Dim3 grid,
                           std::shared_ptr<LaunchPacket> packet, const LaunchOptions& opts) = 0;
  /// Asynchronous copies on `s`; `keep` holds the buffer until they ran.
  virtual void copyHostToDeviceAsync(StreamImpl& s, DevicePtr dst, const void* src, size_t bytes,
                                     std::shared_ptr<void> keep) = 0;
  virtual void copyDeviceToHostAsync(StreamImpl& s, void* dst, DevicePtr src, size_t bytes,
                                     std::shared_ptr<void> keep) = 0;
  virtual void copyDeviceToDeviceAsync(StreamImpl& s, DevicePtr dst, DevicePtr src, size_t bytes,
                                       std::shared_ptr<void> keep) = 0;

  virtual std::shared_ptr<StreamImpl> createStream() = 0;
  virtual std::shared_ptr<StreamImpl> defaultStream() = 0;
  virtual std::shared_ptr<StreamImpl> wrapStream(void* native) = 0;
  virtual std::shared_ptr<EventImpl> createEvent() = 0;
  virtual void recordEvent(const std::shared_ptr<EventImpl>& e, StreamImpl& s) = 0;
  /// Later work on `s` waits until `e` (recorded) has completed.
  virtual void waitEvent(StreamImpl& s, const std::shared_ptr<EventImpl>& e) = 0;
  virtual void synchronizeEvent(EventImpl& e) = 0;
  /// Both events recorded (checked above); DeviceError when not complete.
  virtual double elapsedMs(EventImpl& start, EventImpl& end) = 0;

  /// Waits for the work of every stream and throws the first error kept.
  virtual void synchronize() = 0;
};

/// What a Buffer handle shares: memory is returned to the device when the
/// last handle goes -- or, for wrapped memory, handed back to its owner
/// through the deleter, exactly once.
struct Buffer::State {
  std::shared_ptr<DeviceImpl> device;
  DType dtype = DType::I8;
  size_t count = 0;  // elements
  DevicePtr ptr = 0;
  bool external = false;
  std::function<void()> deleter;          // external memory only
  std::shared_ptr<const void> keepAlive;  // external memory only

  State(std::shared_ptr<DeviceImpl> d, DType t, size_t n, DevicePtr p)
      : device(std::move(d)), dtype(t), count(n), ptr(p) {}
  ~State() {
    if (!external) {
      if (ptr) device->free(ptr);
      return;
    }
    if (bytes()) device->releaseExternal(ptr, bytes());
    if (deleter) {
      try {
        deleter();
      } catch (...) {  // a destructor must not throw; the owner's deleter should not either
      }
    }
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  size_t bytes() const { return count * byteSize(dtype); }
};

/// "1000 f32 elements (4000 bytes)", for messages.
std::string bufferDesc(const Buffer::State& s);
/// "0x7f12a4000000", for messages.
std::string hexAddress(DevicePtr p);

struct Kernel::State {
  std::shared_ptr<DeviceImpl> device;
  KernelSignature signature;
  std::shared_ptr<KernelState> loaded;
  bool boundsChecked = false;              // Binary::boundsChecked
  std::vector<std::string> opNames;        // Binary::opNames, for its reports
  bool profiled = false;                   // Binary::profiled
  std::vector<std::string> profileScopes;  // Binary::profileScopes
  unsigned profileWarps = 0;               // Binary::profileWarps
  Binary::ProfileClock profileClock = Binary::ProfileClock::None;
  Binary::Format format = Binary::Format::HostFunction;  // for messages
  Dim3 cluster;                                          // Binary::cluster: {1, 1, 1} without one
};

/// The host CPU device (runtime/lib/CpuDevice.cpp) running code compiled for
/// the LLVM cpu `cpu` ("" = the host's own).
std::shared_ptr<DeviceImpl> createCpuDevice(const std::string& cpu);

/// The SIMT emulator device (runtime/lib/EmuDevice.cpp); `arch` as in
/// Device::emulator.
std::shared_ptr<DeviceImpl> createEmuDevice(const std::string& arch);
/// The emulator's encoding of a checked tensor map (tessera::emu::TensorMap,
/// tessera/runtime/Emulator.h) into `out128`: what an emulator device of an
/// sm_90 architecture hands its kernels.
void encodeEmuTensorMap(const TensorMapRequest& map, void* out128);
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

// The thin multi-vendor runtime: devices, buffers, streams, loaded modules,
// kernels and launches. It knows nothing of the IR or of LLVM: it consumes a
// Binary (a host entry point, PTX text or an AMDGPU code object) and a
// KernelSignature, both produced by the compiler.
//
// Devices: the CPU, the SIMT emulator, and CUDA (Driver API) and HIP devices
// through the same Device interface, loaded with dlopen so the project runs
// without them. Work goes to streams (Stream, Event, LaunchOptions::stream
// below); memory Tessera did not allocate is wrapped with Device::wrap, and
// DLPack interchange is in tessera/runtime/DLPack.h. docs/runtime.md has the
// model and the ownership rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tessera/runtime/Profile.h"
#include "tessera/support/Binary.h"
#include "tessera/support/DType.h"
#include "tessera/support/Error.h"

namespace tessera::rt {

enum class DeviceKind { CPU, CUDA, HIP, Emulator };
const char* name(DeviceKind k);

/// The compiler's output and the kernel signature, as plain data shared with
/// the compiler (tessera/support/Binary.h).
using ArgSpec = tessera::ArgSpec;
using KernelSignature = tessera::KernelSignature;
using Binary = tessera::KernelBinary;

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  Dim3() = default;
  Dim3(uint32_t x_) : x(x_) {}  // NOLINT: {rows} reads naturally
  Dim3(uint32_t x_, uint32_t y_, uint32_t z_ = 1) : x(x_), y(y_), z(z_) {}
  uint64_t count() const { return uint64_t{x} * y * z; }
  std::string str() const;  // "{x, y, z}"
};

class Device;
class DeviceImpl;
class StreamImpl;
class EventImpl;

/// An ordered queue of work on one device. Copyable handle; a
/// default-constructed Stream is null. Work on one stream runs in submission
/// order; work on different streams may overlap. Get one from
/// Device::createStream (Tessera's own), Device::defaultStream (the one
/// synchronous calls use) or Device::wrapStream (a CUstream / hipStream_t
/// the caller owns).
class Stream {
 public:
  Stream() = default;
  bool isNull() const { return !impl_; }
  explicit operator bool() const { return !isNull(); }
  Device device() const;
  /// Waits for everything submitted so far. The first error of that work (an
  /// asynchronous launch's, naming its kernel) is thrown here, once.
  void synchronize() const;
  /// Later work on this stream waits until `e` has completed (e recorded on
  /// any stream of the same device); the host does not wait.
  void wait(const class Event& e) const;
  /// The driver's handle (CUstream, hipStream_t); nullptr on host devices.
  void* native() const;

  Stream(std::shared_ptr<DeviceImpl> d, std::shared_ptr<StreamImpl> s) : device_(std::move(d)), impl_(std::move(s)) {}
  const std::shared_ptr<StreamImpl>& impl() const { return impl_; }
  const std::shared_ptr<DeviceImpl>& deviceImpl() const { return device_; }

 private:
  std::shared_ptr<DeviceImpl> device_;
  std::shared_ptr<StreamImpl> impl_;
};

/// A point in a stream's work (cuEvent / hipEvent, or its host equivalent).
class Event {
 public:
  Event() = default;
  bool isNull() const { return !impl_; }
  /// Captures the work submitted to `s` so far; re-recording moves the event.
  void record(const Stream& s);
  /// Waits until the recorded work has finished (not for later work).
  void synchronize() const;
  /// Milliseconds between two completed events of one device, `start`
  /// recorded first. Host devices time with the steady clock.
  static double elapsedMs(const Event& start, const Event& end);

  Event(std::shared_ptr<DeviceImpl> d, std::shared_ptr<EventImpl> e) : device_(std::move(d)), impl_(std::move(e)) {}
  const std::shared_ptr<EventImpl>& impl() const { return impl_; }
  const std::shared_ptr<DeviceImpl>& deviceImpl() const { return device_; }

 private:
  std::shared_ptr<DeviceImpl> device_;
  std::shared_ptr<EventImpl> impl_;
};

/// A typed allocation on a device. Copyable handle; memory is freed when the
/// last handle goes. A default-constructed Buffer is null.
class Buffer {
 public:
  Buffer() = default;
  bool isNull() const { return !state_; }
  explicit operator bool() const { return !isNull(); }
  DType dtype() const;
  size_t count() const;  // elements
  size_t bytes() const;
  /// Raw device address (a host pointer on the CPU device).
  void* data() const;
  Device device() const;

  /// Host <-> device copies; sizes are checked against the buffer.
  void copyFromHost(const void* src, size_t bytes);
  void copyToHost(void* dst, size_t bytes) const;
  template <typename T>
  void write(const std::vector<T>& v) {
    copyFromHost(v.data(), v.size() * sizeof(T));
  }
  template <typename T>
  std::vector<T> read() const {
    std::vector<T> v(bytes() / sizeof(T));
    copyToHost(v.data(), v.size() * sizeof(T));
    return v;
  }
  /// Sets every byte of the buffer to `byte`.
  void fillBytes(uint8_t byte);

  /// Asynchronous copies, ordered on `s` (a stream of this buffer's device).
  /// They return at once; the host memory must stay valid and untouched
  /// until the stream (or an event recorded after the copy) is synchronised.
  void copyFromHostAsync(const Stream& s, const void* src, size_t bytes);
  void copyToHostAsync(const Stream& s, void* dst, size_t bytes) const;

  /// Device-to-device copies: the first `bytes` of `src` (a buffer of the
  /// same device) to the start of this buffer, on the device's copy engine
  /// (cuMemcpyDtoD, hipMemcpy DeviceToDevice; memcpy on host devices). The
  /// ranges may not overlap. The blocking form is ordered after the default
  /// stream's work; the asynchronous one on `s`, holding both buffers until
  /// it has run. LaunchError for a null buffer or stream, buffers of two
  /// devices, a size beyond either buffer, or overlapping ranges.
  void copyFrom(const Buffer& src, size_t bytes);
  void copyFromAsync(const Stream& s, const Buffer& src, size_t bytes);

  /// True when the memory was wrapped (Device::wrap, DLPack), not allocated.
  bool isExternal() const;

  struct State;
  explicit Buffer(std::shared_ptr<State> s) : state_(std::move(s)) {}
  const std::shared_ptr<State>& state() const { return state_; }

 private:
  std::shared_ptr<State> state_;
};

/// A launch argument: a buffer (optionally offset by elements) or a scalar.
struct Arg {
  enum class Kind { Buffer, Scalar };
  Kind kind;
  rt::Buffer buffer;
  size_t offset = 0;  // elements
  DType dtype = DType::I32;
  union {
    int64_t i;
    double f;
  } scalar{};

  Arg(const rt::Buffer& b) : kind(Kind::Buffer), buffer(b), dtype(b.isNull() ? DType::I8 : b.dtype()) {}  // NOLINT
  Arg(bool v) : kind(Kind::Scalar), dtype(DType::I1) { scalar.i = v; }                                    // NOLINT
  Arg(int8_t v) : kind(Kind::Scalar), dtype(DType::I8) { scalar.i = v; }                                  // NOLINT
  Arg(int16_t v) : kind(Kind::Scalar), dtype(DType::I16) { scalar.i = v; }                                // NOLINT
  Arg(int32_t v) : kind(Kind::Scalar), dtype(DType::I32) { scalar.i = v; }                                // NOLINT
  Arg(int64_t v) : kind(Kind::Scalar), dtype(DType::I64) { scalar.i = v; }                                // NOLINT
  Arg(uint8_t v) : kind(Kind::Scalar), dtype(DType::U8) { scalar.i = v; }                                 // NOLINT
  Arg(uint16_t v) : kind(Kind::Scalar), dtype(DType::U16) { scalar.i = v; }                               // NOLINT
  Arg(uint32_t v) : kind(Kind::Scalar), dtype(DType::U32) { scalar.i = v; }                               // NOLINT
  // u64: the bit pattern (values above INT64_MAX read back negative here).
  Arg(uint64_t v) : kind(Kind::Scalar), dtype(DType::U64) { scalar.i = static_cast<int64_t>(v); }  // NOLINT
  Arg(float v) : kind(Kind::Scalar), dtype(DType::F32) { scalar.f = v; }                           // NOLINT
  Arg(double v) : kind(Kind::Scalar), dtype(DType::F64) { scalar.f = v; }                          // NOLINT
};

struct LaunchOptions {
  /// CPU: worker threads for this launch; 0 = the device default
  /// (TESSERA_NUM_THREADS, else all hardware threads).
  unsigned threads = 0;
  /// A checked launch (also TESSERA_CHECK_BOUNDS=1, `tessera run
  /// --check-bounds`): every global access is tested against its buffer and
  /// the first one outside it is a LaunchError naming the op and the user's
  /// line, with nothing outside any buffer read or written (with several
  /// worker threads, the access reported is the first one detected among
  /// the violating programs). Every device runs a bounds-checked compile
  /// of the kernel (Binary::boundsChecked; on a GPU the report also names
  /// the thread and program, docs/gpu.md "Checked launches"); the emulator
  /// also checks an unchecked one.
  bool checkBounds = false;
  /// A profiled launch (also TESSERA_PROFILE, `tessera run --trace`): the
  /// kernel's probes record each warp's scopes and *profile is filled from
  /// them after the launch (tessera/runtime/Profile.h). The kernel must be
  /// a profiled compile (Binary::profiled; tessera::CompiledKernel compiles
  /// one itself). Synchronous: on a stream, the stream is synchronised
  /// first and the launch runs to completion.
  Profile* profile = nullptr;
  /// Null (the default): the launch is synchronous, as it always was -- it
  /// runs on the device's default stream and returns when the kernel has
  /// finished, and a fault is thrown by the launch. A stream: the launch is
  /// queued there and returns at once; its errors are thrown by the next
  /// synchronisation of that stream (Stream/Device::synchronize, or a
  /// blocking call on it). The stream must belong to the kernel's device.
  Stream stream = {};
  /// Thread-block clusters (NVIDIA sm_90 and later; the emulator of those
  /// targets): blocks per cluster along x, y, z. {0, 0, 0} (the default):
  /// the shape the kernel was compiled for (KernelBinary::cluster), no
  /// cluster for a kernel compiled without one. A shape given here must
  /// match a compiled one; every grid dimension must be a multiple of it.
  Dim3 cluster = {0, 0, 0};
};

/// A loaded kernel, ready to launch on its device.
class Kernel {
 public:
  Kernel() = default;
  const KernelSignature& signature() const;
  /// Checks arguments against the signature (count, kinds, dtypes, null
  /// buffers, devices) and the grid (non-empty, within limits), then runs
  /// the kernel to completion -- or, with opts.stream, queues it there.
  /// Throws LaunchError naming the argument.
  void launch(Dim3 grid, const std::vector<Arg>& args, const LaunchOptions& opts = {}) const;
  /// How many programs of this kernel the device runs at once: what a
  /// persistent grid (a schedule whose programs loop over the work, e.g.
  /// ts::Tiles::persistent) should launch. The CPU and the emulator: the
  /// worker threads a launch with `opts` uses (blocks run one per worker);
  /// CUDA: SMs x the blocks of this kernel an SM holds
  /// (cuOccupancyMaxActiveBlocksPerMultiprocessor for its block size and
  /// shared memory), or for a launch in clusters the clusters the device
  /// holds (cuOccupancyMaxActiveClusters) x the blocks of one; HIP: CUs x
  /// the workgroups a CU holds
  /// (hipModuleOccupancyMaxActiveBlocksPerMultiprocessor). At least 1 (one
  /// cluster in clusters, which the emulator runs on each worker). Throws
  /// the LaunchError a launch with `opts` would for its cluster shape.
  unsigned residentPrograms(const LaunchOptions& opts = {}) const;

  struct State;
  explicit Kernel(std::shared_ptr<State> s) : state_(std::move(s)) {}

 private:
  std::shared_ptr<State> state_;
};

/// How Device::wrap adopts memory it did not allocate.
struct WrapOptions {
  /// Called exactly once, when the last Buffer handle (and the last DLPack
  /// tensor exported from it) is gone. Empty: the memory is borrowed and the
  /// caller keeps it valid for as long as any handle may use it.
  std::function<void()> deleter;
  /// Held until then as well (an owner object, e.g. a std::vector's holder).
  std::shared_ptr<const void> keepAlive;
  /// Bytes known to be valid from the address (0: unknown). A declared size
  /// beyond it is refused. GPU devices also ask the driver for the size of
  /// the allocation the address lies in.
  size_t capacityBytes = 0;
};

/// A device handle. Cheap to copy.
class Device {
 public:
  /// The host CPU. Always present.
  static Device cpu();
  /// The host CPU running code compiled for the LLVM cpu `cpu` ("x86-64-v3",
  /// "x86-64-v4", "znver4", ...; "" is cpu()), so one host can run every ISA
  /// it supports. All CPU devices share host memory: a Buffer of one may be
  /// passed to a kernel loaded on another. Compiling for a cpu whose features
  /// the host lacks is a DeviceError naming them.
  static Device cpu(const std::string& cpu);
  /// Every device present on this machine (the CPU first; GPUs whose driver
  /// loads and reports a device after it). Emulators are not listed.
  static std::vector<Device> all();
  /// The SIMT emulator running GPU code of `arch` on the host: "nvptx:sm_80",
  /// "amdgpu:gfx942", ... (the target spelling without "emu:"). Throws
  /// DeviceError for an unknown spelling.
  static Device emulator(const std::string& arch);
  /// An NVIDIA GPU through the CUDA Driver API (libcuda.so.1, loaded with
  /// dlopen), or an AMD GPU through HIP (libamdhip64.so). Throws DeviceError
  /// naming what is missing (library, driver, device ordinal).
  static Device cuda(int ordinal = 0);
  static Device hip(int ordinal = 0);

  DeviceKind kind() const;
  std::string name() const;  // "cpu (avx512, 2 threads)", "cuda:0 NVIDIA ..."
  unsigned defaultThreads() const;
  /// The code this device runs: "" for the host CPU, the pinned cpu name
  /// ("x86-64-v3") for Device::cpu(name), "nvptx:sm_80" for an
  /// emulator or a CUDA device, "amdgpu:gfx942" for HIP, ...
  std::string arch() const;

  Buffer alloc(DType dtype, size_t count) const;
  template <typename T>
  Buffer upload(DType dtype, const std::vector<T>& host) const {
    Buffer b = alloc(dtype, host.size() * sizeof(T) / byteSize(dtype));
    b.write(host);
    return b;
  }
  /// Wraps `count` elements at `address` -- memory this device can use that
  /// Tessera did not allocate: a host pointer (CPU, emulator), a CUdeviceptr
  /// (CUDA), a hipDeviceptr_t (HIP) -- as a Buffer, without copying. Throws
  /// UsageError for a null address with count > 0, a misaligned address or a
  /// size over a known capacity; DeviceError for memory of another device.
  /// Nothing is taken on error: `opts.deleter` is not called.
  Buffer wrap(uint64_t address, DType dtype, size_t count, WrapOptions opts = {}) const;
  Buffer wrap(void* address, DType dtype, size_t count, WrapOptions opts = {}) const {
    return wrap(reinterpret_cast<uint64_t>(address), dtype, count, std::move(opts));
  }
  /// Loads a compiled binary; throws DeviceError if its format does not
  /// suit this device or the driver rejects it (with the driver's log).
  Kernel load(const Binary& bin) const;
  /// Waits for the work of every stream of this device (Tessera's own and
  /// wrapped ones) and throws the first error any of them kept.
  void synchronize() const;

  /// A new stream, owned by Tessera (destroyed with its last handle, after
  /// its work has finished).
  Stream createStream() const;
  /// The stream synchronous launches and copies use.
  Stream defaultStream() const;
  /// A CUstream / hipStream_t of this device, not owned: the caller destroys
  /// it, after the last Stream handle is gone. DeviceError on host devices,
  /// for a null handle, and (CUDA) for a stream of another context.
  Stream wrapStream(void* native) const;
  Event createEvent() const;
  /// Makes this device current on the calling thread -- its primary CUDA
  /// context, its HIP device -- as a vendor library sharing it expects
  /// before its own calls (cuBLAS, rocBLAS, NCCL); nothing on host devices.
  void makeCurrent() const;

  bool operator==(const Device& o) const { return impl_ == o.impl_; }
  explicit Device(std::shared_ptr<DeviceImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<DeviceImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<DeviceImpl> impl_;
};

/// The thread pool the CPU device runs grids on (exposed for benchmarks).
/// Runs fn(begin, end) over [0, n) split into at most `threads` contiguous
/// chunks; the calling thread takes one chunk; a single chunk runs inline.
void parallelFor(int64_t n, unsigned threads, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tessera::rt

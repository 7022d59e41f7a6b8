// The thin multi-vendor runtime: devices, buffers, streams, loaded modules,
// kernels and launches. It knows nothing of the IR or of LLVM: it consumes a
// Binary (a host entry point, PTX text or an AMDGPU code object) and a
// KernelSignature, both produced by the compiler.
//
// Devices: the CPU now; CUDA (Driver API) and HIP devices plug in through the
// same Device interface, loaded with dlopen so the project runs without them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

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
  Arg(float v) : kind(Kind::Scalar), dtype(DType::F32) { scalar.f = v; }                                  // NOLINT
  Arg(double v) : kind(Kind::Scalar), dtype(DType::F64) { scalar.f = v; }                                 // NOLINT
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
  /// the violating programs). CPU devices run
  /// a bounds-checked compile of the kernel; the emulator always checks;
  /// CUDA and HIP devices refuse it (use compute-sanitizer there).
  bool checkBounds = false;
};

/// A loaded kernel, ready to launch on its device.
class Kernel {
 public:
  Kernel() = default;
  const KernelSignature& signature() const;
  /// Checks arguments against the signature (count, kinds, dtypes, null
  /// buffers, devices) and the grid (non-empty, within limits), then runs
  /// the kernel to completion. Throws LaunchError naming the argument.
  void launch(Dim3 grid, const std::vector<Arg>& args, const LaunchOptions& opts = {}) const;

  struct State;
  explicit Kernel(std::shared_ptr<State> s) : state_(std::move(s)) {}

 private:
  std::shared_ptr<State> state_;
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
  /// Loads a compiled binary; throws DeviceError if its format does not
  /// suit this device or the driver rejects it (with the driver's log).
  Kernel load(const Binary& bin) const;
  void synchronize() const;

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

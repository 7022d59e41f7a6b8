// The device-independent half of the runtime: handles, launch validation
// and kernelParams marshalling. Devices only see checked, marshalled calls.

#include "tessera/runtime/Runtime.h"
#include "tessera/support/BoundsCheck.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "DeviceImpl.h"

namespace tessera::rt {

std::string Dim3::str() const {
  return "{" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + "}";
}

std::string describeLaunch(const KernelSignature& sig, Dim3 grid, unsigned threadsPerBlock, unsigned sharedBytes) {
  return "kernel '" + sig.kernelName + "' (grid " + grid.str() + ", " + std::to_string(threadsPerBlock) +
         " threads per block, " + std::to_string(sharedBytes) + " bytes of shared memory)";
}

const char* name(DeviceKind k) {
  switch (k) {
    case DeviceKind::CPU: return "cpu";
    case DeviceKind::CUDA: return "cuda";
    case DeviceKind::HIP: return "hip";
    case DeviceKind::Emulator: return "emulator";
  }
  return "?";
}

// ---- conversions --------------------------------------------------------

uint16_t floatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN; a NaN stays a (quiet) NaN
    if (a == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  // 65520 is halfway between the largest half (65504, odd mantissa) and
  // 65536: ties-to-even and everything above go to infinity.
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {  // below 2^-14: a half subnormal (or zero)
    // |f| <= 2^-25 is at most half of the smallest subnormal 2^-24; the tie
    // at exactly 2^-25 goes to the even zero.
    if (a <= 0x33000000u) return sign;
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const unsigned shift = 126u - (a >> 23);  // value / 2^-24 = mant >> shift
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t exp = (a >> 23) - 127 + 15, mant = a & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // a carry bumps the exponent, as it should
  return static_cast<uint16_t>(sign | h);
}

uint16_t floatToBFloat16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(x >> 16);
}

// ---- Buffer ------------------------------------------------------------

namespace {

const Buffer::State& live(const std::shared_ptr<Buffer::State>& s, const char* what) {
  if (!s)
    throw LaunchError(std::string("Buffer::") + what +
                      " called on a null Buffer (default-constructed); allocate it with "
                      "Device::alloc first");
  return *s;
}

std::string bufferDesc(const Buffer::State& s) {
  return std::to_string(s.count) + " " + name(s.dtype) + " elements (" + std::to_string(s.bytes()) + " bytes)";
}

}  // namespace

DType Buffer::dtype() const { return live(state_, "dtype").dtype; }
size_t Buffer::count() const { return live(state_, "count").count; }
size_t Buffer::bytes() const { return live(state_, "bytes").bytes(); }
void* Buffer::data() const { return reinterpret_cast<void*>(live(state_, "data").ptr); }
Device Buffer::device() const { return Device(live(state_, "device").device); }

void Buffer::copyFromHost(const void* src, size_t bytes) {
  const State& s = live(state_, "copyFromHost");
  if (bytes > s.bytes())
    throw LaunchError("Buffer::copyFromHost: the host data is " + std::to_string(bytes) +
                      " bytes but the buffer holds only " + bufferDesc(s));
  if (bytes && !src) throw LaunchError("Buffer::copyFromHost: the host pointer is null");
  s.device->copyHostToDevice(s.ptr, src, bytes);
}

void Buffer::copyToHost(void* dst, size_t bytes) const {
  const State& s = live(state_, "copyToHost");
  if (bytes > s.bytes())
    throw LaunchError("Buffer::copyToHost: " + std::to_string(bytes) + " bytes requested but the buffer holds only " +
                      bufferDesc(s));
  if (bytes && !dst) throw LaunchError("Buffer::copyToHost: the host pointer is null");
  s.device->copyDeviceToHost(dst, s.ptr, bytes);
}

void Buffer::fillBytes(uint8_t byte) {
  const State& s = live(state_, "fillBytes");
  s.device->fill(s.ptr, byte, s.bytes());
}

// ---- Device ------------------------------------------------------------

Device Device::cpu() {
  static const Device d(createCpuDevice(""));
  return d;
}

namespace {

/// One shared device per (kind, key), like Device::cpu(): two handles to the
/// same emulator or GPU compare equal, so buffers and kernels mix freely.
template <typename Make>
Device sharedDevice(const std::string& key, Make make) {
  static std::mutex mu;
  static std::map<std::string, Device>* devices = new std::map<std::string, Device>();  // outlives users
  std::lock_guard<std::mutex> lock(mu);
  auto it = devices->find(key);
  if (it != devices->end()) return it->second;
  Device d(make());
  devices->emplace(key, d);
  return d;
}

}  // namespace

Device Device::cpu(const std::string& cpu) {
  if (cpu.empty()) return Device::cpu();
  return sharedDevice("cpu:" + cpu, [&] { return createCpuDevice(cpu); });
}

Device Device::emulator(const std::string& arch) {
  return sharedDevice("emu:" + arch, [&] { return createEmuDevice(arch); });
}

Device Device::cuda(int ordinal) {
  // createCudaDevice throws DeviceError naming what is missing (libcuda.so.1,
  // the driver, the ordinal, a negative one included); a failed lookup is
  // not cached, so a later call retries.
  return sharedDevice("cuda:" + std::to_string(ordinal), [&] { return createCudaDevice(ordinal); });
}

Device Device::hip(int ordinal) {
  return sharedDevice("hip:" + std::to_string(ordinal), [&] { return createHipDevice(ordinal); });
}

std::vector<Device> Device::all() {
  std::vector<Device> r{cpu()};
  for (int i = 0, n = cudaDeviceCount(); i < n; ++i) r.push_back(cuda(i));
  for (int i = 0, n = hipDeviceCount(); i < n; ++i) r.push_back(hip(i));
  return r;
}

std::string Device::arch() const { return impl_->arch(); }

DeviceKind Device::kind() const { return impl_->kind(); }
std::string Device::name() const { return impl_->name(); }
unsigned Device::defaultThreads() const { return impl_->defaultThreads(); }
void Device::synchronize() const { impl_->synchronize(); }

Buffer Device::alloc(DType dtype, size_t count) const {
  const size_t elem = byteSize(dtype);
  if (count > std::numeric_limits<size_t>::max() / elem)
    throw DeviceError(impl_->name() + ": cannot allocate " + std::to_string(count) + " " + tessera::name(dtype) +
                      " elements: the size in bytes overflows");
  // A zero-element buffer still gets a real (tiny) allocation, so its
  // address is valid to pass to a kernel that reads nothing from it.
  const size_t bytes = count * elem;
  DevicePtr p = impl_->alloc(bytes ? bytes : 1);
  return Buffer(std::make_shared<Buffer::State>(impl_, dtype, count, p));
}

Kernel Device::load(const Binary& bin) const {
  auto st = std::make_shared<Kernel::State>();
  st->device = impl_;
  st->signature = bin.signature;
  st->loaded = impl_->load(bin);
  st->boundsChecked = bin.boundsChecked;
  st->opNames = bin.opNames;
  return Kernel(std::move(st));
}

// ---- Kernel: validation and marshalling ---------------------------------

namespace {

/// The C++ type a user passes for a scalar of this dtype.
const char* cppType(DType t) {
  switch (t) {
    case DType::I1: return "bool";
    case DType::I8: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int";
    case DType::I64: return "int64_t";
    case DType::F16:
    case DType::BF16:
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "?";
}

/// cppType with its article: "an int", "a float".
std::string aCppType(DType t) {
  const char* c = cppType(t);
  return std::string(c[0] == 'i' ? "an " : "a ") + c;
}

std::string fmtDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// A value as a C++ literal of float (suffix f) or double type, for hints.
std::string literal(double v, bool asFloat) {
  if (!std::isfinite(v)) return asFloat ? "a float" : "a double";
  std::string s = fmtDouble(v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return asFloat ? s + "f" : s;
}

std::string scalarDesc(const Arg& a) {
  switch (a.dtype) {
    case DType::I1: return std::string("a bool (") + (a.scalar.i ? "true" : "false") + ")";
    case DType::F32: return "a float (" + fmtDouble(a.scalar.f) + ")";
    case DType::F64: return "a double (" + fmtDouble(a.scalar.f) + ")";
    default: return std::string("an ") + cppType(a.dtype) + " (" + std::to_string(a.scalar.i) + ")";
  }
}

class Checker {
 public:
  explicit Checker(const KernelSignature& sig) : sig_(sig) {}

  [[noreturn]] void fail(size_t i, const std::string& what) const {
    throw LaunchError(kernel() + ": argument " + std::to_string(i) + " (" + sig_.args[i].str() + ") " + what);
  }

  std::string kernel() const { return sig_.kernelName.empty() ? "kernel" : sig_.kernelName; }

  void pointer(size_t i, const Arg& a, const std::shared_ptr<DeviceImpl>& dev) const {
    const ArgSpec& spec = sig_.args[i];
    if (a.kind != Arg::Kind::Buffer)
      fail(i, std::string("expects a Buffer of ") + name(spec.dtype) + ", got " + scalarDesc(a));
    if (a.buffer.isNull()) fail(i, "is a null Buffer (default-constructed); pass a buffer from Device::alloc");
    const Buffer::State& s = *a.buffer.state();
    if (s.dtype != spec.dtype)
      fail(i, std::string("expects a Buffer of ") + name(spec.dtype) + ", got a Buffer of " + bufferDesc(s));
    if (s.device != dev && !(s.device->kind() == DeviceKind::CPU && dev->kind() == DeviceKind::CPU))
      fail(i, "is a Buffer on device '" + s.device->name() + "' but the kernel is loaded on '" + dev->name() + "'" +
                  (s.device->name() == dev->name() ? " (another instance)" : "") +
                  "; allocate it on the kernel's device");
    if (a.offset > s.count)
      fail(i, "has offset " + std::to_string(a.offset) + " past the end of its Buffer of " + bufferDesc(s));
  }

  void scalar(size_t i, const Arg& a) const {
    const ArgSpec& spec = sig_.args[i];
    const DType want = spec.dtype;
    // Every dtype name but bf16 starts with a vowel sound ("an i32", "an f16").
    const std::string expects = std::string("expects ") + (want == DType::BF16 ? "a " : "an ") + name(want) + " scalar";
    if (a.kind != Arg::Kind::Scalar) {
      std::string got =
          a.buffer.isNull() ? std::string("a null Buffer") : "a Buffer of " + bufferDesc(*a.buffer.state());
      fail(i, expects + ", got " + got + "; pass " + aCppType(want) + " value");
    }
    const DType got = a.dtype;
    if (got == want) return;

    if (isFloat(want)) {
      if (got == DType::F32 && want != DType::F32) return;  // float -> f64 exactly, -> f16/bf16 rounded
      if (got == DType::F64)
        fail(i, expects + ", got " + scalarDesc(a) + "; pass " + literal(a.scalar.f, true) +
                    " (a float literal) to avoid a silent narrowing");
      fail(i, expects + ", got " + scalarDesc(a) + "; pass " +
                  literal(static_cast<double>(a.scalar.i), want != DType::F64));
    }
    // Integer parameter.
    if (isFloat(got)) fail(i, expects + ", got " + scalarDesc(a) + "; pass an integer (" + cppType(want) + ")");
    if (want == DType::I1 || got == DType::I1) fail(i, expects + ", got " + scalarDesc(a) + "; pass " + aCppType(want));
    // Integer to integer: widening is always exact. A plain C++ int is also
    // accepted for i8 / i16 when its value fits, since the language gives
    // literals no narrower type.
    if (bitWidth(got) <= bitWidth(want)) return;
    if (got == DType::I32) {
      const int64_t lo = want == DType::I8 ? INT8_MIN : INT16_MIN;
      const int64_t hi = want == DType::I8 ? INT8_MAX : INT16_MAX;
      if (a.scalar.i >= lo && a.scalar.i <= hi) return;
      fail(i, expects + ", got " + scalarDesc(a) + " which does not fit in " + name(want) + " (" + std::to_string(lo) +
                  ".." + std::to_string(hi) + ")");
    }
    fail(i, expects + ", got " + scalarDesc(a) + "; pass " + aCppType(want) + " (narrowing is not implicit)");
  }

 private:
  const KernelSignature& sig_;
};

/// Writes a checked scalar into its kernelParams slot in the parameter's
/// exact width (the slot is zeroed and 8 bytes wide).
void marshalScalar(void* slot, DType want, const Arg& a) {
  auto put = [slot](const auto v) { std::memcpy(slot, &v, sizeof v); };
  switch (want) {
    case DType::I1: put(static_cast<uint8_t>(a.scalar.i != 0)); break;
    case DType::I8: put(static_cast<int8_t>(a.scalar.i)); break;
    case DType::I16: put(static_cast<int16_t>(a.scalar.i)); break;
    case DType::I32: put(static_cast<int32_t>(a.scalar.i)); break;
    case DType::I64: put(static_cast<int64_t>(a.scalar.i)); break;
    case DType::F16: put(floatToHalfBits(static_cast<float>(a.scalar.f))); break;
    case DType::BF16: put(floatToBFloat16Bits(static_cast<float>(a.scalar.f))); break;
    case DType::F32: put(static_cast<float>(a.scalar.f)); break;
    case DType::F64: put(static_cast<double>(a.scalar.f)); break;
  }
}

}  // namespace

const KernelSignature& Kernel::signature() const {
  if (!state_) throw LaunchError("Kernel::signature called on a null Kernel; load one with Device::load");
  return state_->signature;
}

void Kernel::launch(Dim3 grid, const std::vector<Arg>& args, const LaunchOptions& opts) const {
  if (!state_) throw LaunchError("launch of a null Kernel (default-constructed); load one with Device::load");
  const KernelSignature& sig = state_->signature;
  Checker check(sig);

  if (args.size() != sig.args.size()) {
    std::string list;
    for (size_t i = 0; i < sig.args.size(); ++i) list += (i ? ", " : "") + sig.args[i].str();
    throw LaunchError(check.kernel() + " expects " + std::to_string(sig.args.size()) +
                      (sig.args.size() == 1 ? " argument (" : " arguments (") + list + "), got " +
                      std::to_string(args.size()));
  }

  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    throw LaunchError(check.kernel() + ": empty grid " + grid.str() + ": every grid dimension must be at least 1");
  constexpr uint64_t kMaxDim = uint64_t{1} << 31, kMaxPrograms = uint64_t{1} << 40;
  // 128-bit product: Dim3::count() wraps for three dimensions near 2^31.
  const unsigned __int128 programs = (unsigned __int128)grid.x * grid.y * grid.z;
  if (grid.x >= kMaxDim || grid.y >= kMaxDim || grid.z >= kMaxDim || programs >= kMaxPrograms)
    throw LaunchError(check.kernel() + ": grid " + grid.str() + " (" +
                      (programs >> 64 ? std::string("over 2^64") : std::to_string(uint64_t(programs))) +
                      " programs) is too large: each dimension must be below 2^31 (program ids "
                      "are 32-bit integers) and the total number of programs below 2^40 "
                      "(1099511627776)");

  if (opts.checkBounds && state_->device->kind() != DeviceKind::Emulator && !state_->boundsChecked)
    throw LaunchError(check.kernel() + ": LaunchOptions::checkBounds on " + state_->device->name() +
                      (state_->device->kind() == DeviceKind::CPU
                           ? ", but the kernel was not compiled with CompileOptions::checkBounds (tessera::compile "
                             "does that itself for a checked launch)"
                           : ": only CPU devices (and the emulator, which always checks) run checked launches; "
                             "use compute-sanitizer on a GPU"));

  // kernelParams: args[i] points at slot i, which holds the value in the
  // parameter's exact width; a bounds-checked kernel takes the address of
  // its BoundsCheckRecord after them. Small launches stay off the heap.
  constexpr size_t kInline = 16;
  const size_t nParams = args.size() + (state_->boundsChecked ? 1 : 0);
  uint64_t slotBuf[kInline];
  void* ptrBuf[kInline];
  int64_t extentBuf[kInline];
  std::vector<uint64_t> slotVec;
  std::vector<void*> ptrVec;
  std::vector<int64_t> extentVec;
  uint64_t* slots = slotBuf;
  void** ptrs = ptrBuf;
  int64_t* extents = extentBuf;
  if (nParams > kInline) {
    slotVec.resize(nParams);
    ptrVec.resize(nParams);
    extentVec.resize(nParams);
    slots = slotVec.data();
    ptrs = ptrVec.data();
    extents = extentVec.data();
  }

  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSpec& spec = sig.args[i];
    const Arg& a = args[i];
    slots[i] = 0;
    ptrs[i] = &slots[i];
    extents[i] = 0;
    if (spec.kind == ArgSpec::Kind::Pointer) {
      check.pointer(i, a, state_->device);
      const Buffer::State& s = *a.buffer.state();
      DevicePtr addr = s.ptr + a.offset * byteSize(s.dtype);
      std::memcpy(&slots[i], &addr, sizeof addr);
      extents[i] = static_cast<int64_t>((s.count - a.offset) * byteSize(s.dtype));
    } else {
      check.scalar(i, a);
      marshalScalar(&slots[i], spec.dtype, a);
    }
  }
  BoundsCheckRecord record;
  record.extents = extents;
  if (state_->boundsChecked) ptrs[args.size()] = &record;

  state_->device->launch(*state_->loaded, sig, grid, ptrs, opts);

  if (state_->boundsChecked && record.violated) {
    const size_t op = static_cast<size_t>(record.opId);
    std::string what = op < state_->opNames.size() ? "'" + state_->opNames[op] + "'" : "op #" + std::to_string(op);
    std::string where;
    if (record.arg >= 0 && static_cast<size_t>(record.arg) < sig.args.size()) {
      const size_t a = static_cast<size_t>(record.arg);
      where = "argument " + std::to_string(a) + " (" + sig.args[a].str() + ") at byte offset " +
              std::to_string(record.offset) + ", outside its " + std::to_string(extents[a]) + " bytes (" +
              std::to_string(extents[a] / static_cast<int64_t>(byteSize(sig.args[a].dtype))) + " " +
              name(sig.args[a].dtype) + " from the pointer passed)";
    } else {
      where = "address 0x" + [&] {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(record.offset));
        return std::string(buf);
      }() + ", inside none of the kernel's buffers";
    }
    throw LaunchError(check.kernel() + ": out-of-bounds access by " + what + ": " + where +
                      "; the access was not performed (checked launch)");
  }
}

}  // namespace tessera::rt

// Launches, above the devices: validation of the grid and of every argument
// against the kernel's signature, marshalling into a kernelParams array, the
// report of a checked launch, and the hand-off of an asynchronous launch
// (LaunchOptions::stream) with everything it needs to outlive the call.

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include "DeviceImpl.h"
#include "ProfileBuffer.h"
#include "tessera/support/Fp8.h"
#include "tessera/support/MxFormats.h"
#include "tessera/support/Targets.h"

namespace tessera::rt {

// ---- Kernel: validation and marshalling ---------------------------------

namespace {

/// The scalar's C++ type (DTypes.def) with its article: "an int32_t", "a float".
std::string aCppType(DType t) {
  const char* c = scalarCType(t);
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
    default:
      return aCppType(a.dtype) + " (" +
             (isUnsigned(a.dtype) ? std::to_string(static_cast<uint64_t>(a.scalar.i)) : std::to_string(a.scalar.i)) +
             ")";
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
    if (isFloat(got)) fail(i, expects + ", got " + scalarDesc(a) + "; pass an integer (" + scalarCType(want) + ")");
    if (want == DType::I1 || got == DType::I1) fail(i, expects + ", got " + scalarDesc(a) + "; pass " + aCppType(want));
    // Where unsigned integers are involved, any value the parameter can
    // hold is accepted (C++ gives unsigned literals and sizes types that
    // rarely match the parameter's exactly); others are refused.
    if (isUnsigned(got) || isUnsigned(want)) {
      const __int128 v = isUnsigned(got) ? static_cast<__int128>(static_cast<uint64_t>(a.scalar.i))
                                         : static_cast<__int128>(a.scalar.i);
      const unsigned w = bitWidth(want);
      const __int128 lo = isUnsigned(want) ? 0 : -(static_cast<__int128>(1) << (w - 1));
      const __int128 hi =
          isUnsigned(want) ? (static_cast<__int128>(1) << w) - 1 : (static_cast<__int128>(1) << (w - 1)) - 1;
      if (v >= lo && v <= hi) return;
      fail(i, expects + ", got " + scalarDesc(a) + " which does not fit in " + name(want));
    }
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
    case DType::U8: put(static_cast<uint8_t>(a.scalar.i)); break;
    case DType::U16: put(static_cast<uint16_t>(a.scalar.i)); break;
    case DType::U32: put(static_cast<uint32_t>(a.scalar.i)); break;
    case DType::U64: put(static_cast<uint64_t>(a.scalar.i)); break;
    case DType::F16: put(floatToHalfBits(static_cast<float>(a.scalar.f))); break;
    case DType::BF16: put(floatToBFloat16Bits(static_cast<float>(a.scalar.f))); break;
    case DType::F32: put(static_cast<float>(a.scalar.f)); break;
    case DType::F64: put(static_cast<double>(a.scalar.f)); break;
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2FNUZ: put(fp8Encode(want, a.scalar.f)); break;
    case DType::F4E2M1:
    case DType::F6E2M3:
    case DType::F6E3M2:
    case DType::E8M0: put(mxEncode(want, a.scalar.f)); break;  // no kernel takes them today (the verifier)
  }
}

/// Checks and writes every argument: slots[i] holds its value in the
/// parameter's exact width, ptrs[i] points at slots[i], extents[i] is the
/// bytes addressable from a pointer argument (0 for scalars).
void marshal(const Kernel::State& st, const std::vector<Arg>& args, const Checker& check, uint64_t* slots, void** ptrs,
             int64_t* extents) {
  const KernelSignature& sig = st.signature;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSpec& spec = sig.args[i];
    const Arg& a = args[i];
    slots[i] = 0;
    ptrs[i] = &slots[i];
    extents[i] = 0;
    if (spec.kind == ArgSpec::Kind::Pointer) {
      check.pointer(i, a, st.device);
      const Buffer::State& s = *a.buffer.state();
      DevicePtr addr = s.ptr + a.offset * byteSize(s.dtype);
      std::memcpy(&slots[i], &addr, sizeof addr);
      extents[i] = static_cast<int64_t>((s.count - a.offset) * byteSize(s.dtype));
    } else {
      check.scalar(i, a);
      marshalScalar(&slots[i], spec.dtype, a);
    }
  }
}

// ---- TMA tensor maps: hidden parameters built at launch -----------------

std::string toString(__int128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  unsigned __int128 u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string r;
  for (; u; u /= 10) r.insert(r.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
  return neg ? "-" + r : r;
}

/// The value of a checked integer scalar, read back from its kernelParams
/// slot in the parameter's width (what the kernel sees).
__int128 slotValue(DType t, const uint64_t& slot) {
  auto get = [&slot](auto v) {
    std::memcpy(&v, &slot, sizeof v);
    return static_cast<__int128>(v);
  };
  switch (t) {
    case DType::I1:
    case DType::U8: return get(uint8_t{});
    case DType::I8: return get(int8_t{});
    case DType::I16: return get(int16_t{});
    case DType::I32: return get(int32_t{});
    case DType::I64: return get(int64_t{});
    case DType::U16: return get(uint16_t{});
    case DType::U32: return get(uint32_t{});
    case DType::U64: return get(uint64_t{});
    default: return 0;  // not an integer: refused before
  }
}

/// Resolves the extents of each tensor map of a launch from its (already
/// checked and marshalled) arguments and checks them against TMA's rules,
/// so that nothing a driver would refuse -- or worse, accept and fault on --
/// reaches it. Errors name the kernel, the argument responsible (by its name
/// in the signature, with its value) and the fix.
class TensorMapResolver {
 public:
  TensorMapResolver(const Kernel::State& st, const Checker& check, const std::vector<Arg>& args, const uint64_t* slots)
      : sig_(st.signature), check_(check), args_(args), slots_(slots) {}

  TensorMapRequest resolve(size_t index) {
    const TensorMapSpec& spec = sig_.tensorMaps[index];
    index_ = index;
    if (spec.source < 0 || static_cast<size_t>(spec.source) >= sig_.args.size() ||
        sig_.args[spec.source].kind != ArgSpec::Kind::Pointer)
      malformed("reads argument " + std::to_string(spec.source) + ", which is not a pointer argument of the kernel");
    src_ = static_cast<size_t>(spec.source);
    const unsigned eb = byteSize(spec.dtype);
    const std::string dt = name(spec.dtype);

    TensorMapRequest r;
    r.dtype = spec.dtype;
    r.rank = spec.rank;
    if (spec.rank != 2 && spec.rank != 3)
      fail(src_, "has rank " + std::to_string(spec.rank) +
                     ", but tensor maps have rank 2 or 3 here; the kernel binary is inconsistent, recompile it");

    // The source: a Buffer of the map's dtype (null buffers and buffers of
    // another dtype than the parameter's were refused with the arguments).
    const Arg& a = args_[src_];
    const Buffer::State& b = *a.buffer.state();
    if (b.dtype != spec.dtype)
      fail(src_, "reads " + dt + " elements, but the Buffer holds " + bufferDesc(b) +
                     "; the kernel binary is inconsistent, recompile it");
    r.address = b.ptr + a.offset * eb;
    if (b.ptr % 16)
      fail(src_, "needs an address that is a multiple of 16 bytes, but the Buffer's memory is at 0x" + hex(b.ptr) +
                     "; wrap memory aligned to 16 bytes (Device::alloc always is)");
    if (r.address % 16)
      fail(src_, "needs an address that is a multiple of 16 bytes, but the offset of " + std::to_string(a.offset) +
                     " " + dt + " elements (" + std::to_string(a.offset * eb) +
                     " bytes) is not; pass an offset that is a multiple of " + std::to_string(16 / eb) + " elements");

    for (unsigned d = 0; d < spec.rank; ++d) {
      const Resolved v = value(spec.dims[d]);
      const char* fix = v.v < 1 ? "TMA cannot describe an empty tensor; skip the launch when it is empty"
                                : "split the tensor over several launches";
      if (v.v < 1 || v.v > (static_cast<__int128>(1) << 32))
        fail(v.arg, "needs every dimension in 1..2^32, but " + dimName(d) + " is " + v.text + "; " + fix);
      r.dims[d] = static_cast<uint64_t>(v.v);
    }

    r.strides[0] = eb;
    for (unsigned d = 1; d < spec.rank; ++d) {
      const Resolved v = value(spec.strides[d]);
      if (v.v > static_cast<__int128>(1) << 120)  // the bytes below would overflow
        fail(v.arg, "needs a stride below 2^40 bytes, but " + v.text + " elements");
      const __int128 bytes = v.v * eb;
      const std::string what = d == 1 ? "row stride" : "stride of dimension " + std::to_string(d);
      const std::string amount =
          "(" + (v.scaled ? v.expr + " = " : "") + toString(v.v) + " " + dt + " = " + toString(bytes) + " bytes)";
      const std::string rows = d == 1 ? "the rows" : "each plane";
      if (v.v < 1) fail(v.arg, "needs a positive " + what + " " + amount);
      if (bytes % 16)
        fail(v.arg, "needs a " + what + " that is a multiple of 16 bytes " + amount + "; pad " + rows +
                        " to a multiple of " + std::to_string(16 / eb) + " elements");
      if (bytes >= (static_cast<__int128>(1) << 40))
        fail(v.arg, "needs a " + what + " below 2^40 bytes " + amount + "; split the tensor over several launches");
      r.strides[d] = static_cast<uint64_t>(bytes);
      // The driver requires each dimension to lie within the next one's
      // stride (cuda.h: globalStrides[d] covers globalDim[d] of the
      // previous stride): a mask bound past the stride (rows longer than
      // ld) is a tensor TMA cannot describe.
      const __int128 covered = static_cast<__int128>(r.dims[d - 1]) * r.strides[d - 1];
      if (covered > bytes)
        fail(spec.dims[d - 1].arg >= 0 ? value(spec.dims[d - 1]).arg : v.arg,
             "needs " + dimName(d - 1) + " (" + std::to_string(r.dims[d - 1]) + " elements, " + toString(covered) +
                 " bytes) to fit in the " + what + " " + amount +
                 "; bound the access by the stride, or compile with TESSERA_TENSOR_COPIES=0");
    }

    // The box and the swizzle were fixed by the compiler: a violation is an
    // inconsistent binary, named all the same.
    for (unsigned d = 0; d < spec.rank; ++d) {
      if (spec.box[d] < 1 || spec.box[d] > 256)
        fail(src_, "has a box of " + std::to_string(spec.box[d]) + " elements in " + dimName(d) +
                       ", but box dimensions are 1..256; recompile the kernel with smaller tiles");
      r.box[d] = spec.box[d];
    }
    const uint64_t rowBytes = uint64_t{spec.box[0]} * eb;
    if (rowBytes % 16)
      fail(src_, "has an innermost box of " + std::to_string(spec.box[0]) + " " + dt + " = " +
                     std::to_string(rowBytes) +
                     " bytes, which must be a multiple of 16 bytes; recompile with an "
                     "innermost tile of a multiple of " +
                     std::to_string(16 / eb) + " elements");
    const uint32_t sw = spec.swizzleBytes;
    if (sw != 0 && sw != 32 && sw != 64 && sw != 128)
      fail(src_, "asks for a swizzle of " + std::to_string(sw) +
                     " bytes, but TMA swizzles 32, 64 or 128 bytes (or none); recompile the kernel");
    if (sw != 0 && sw != rowBytes)
      fail(src_, "asks for a swizzle of " + std::to_string(sw) + " bytes, but its innermost box is " +
                     std::to_string(rowBytes) + " bytes (" + std::to_string(spec.box[0]) + " " + dt +
                     "); the two must be equal, recompile the kernel");
    r.swizzleBytes = sw;
    return r;
  }

 private:
  struct Resolved {
    __int128 v = 0;
    std::string expr;     // "K", "4*K"; "" for a constant
    std::string text;     // "K = 10", "4*K = 40", "64"
    bool scaled = false;  // an argument times a scale other than 1
    size_t arg = 0;       // the argument responsible: the scalar, or the source
  };

  std::string argName(size_t i) const {
    return sig_.args[i].name.empty() ? "arg" + std::to_string(i) : sig_.args[i].name;
  }

  static std::string hex(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRIx64, v);
    return buf;
  }

  static std::string dimName(unsigned d) {
    return d == 0 ? "dimension 0 (the innermost)" : "dimension " + std::to_string(d);
  }

  Resolved value(const TensorMapSpec::Extent& e) const {
    Resolved r;
    r.arg = src_;
    if (e.arg < 0) {
      r.v = e.value;
      r.text = toString(r.v);
      return r;
    }
    const size_t i = static_cast<size_t>(e.arg);
    if (i >= sig_.args.size() || sig_.args[i].kind != ArgSpec::Kind::Scalar || isFloat(sig_.args[i].dtype))
      malformed("reads an extent from argument " + std::to_string(e.arg) + ", which is not an integer scalar argument");
    r.arg = i;
    r.v = slotValue(sig_.args[i].dtype, slots_[i]) * e.scale;
    r.scaled = e.scale != 1;
    r.expr = (r.scaled ? std::to_string(e.scale) + "*" : "") + argName(i);
    r.text = r.expr + " = " + toString(r.v);
    return r;
  }

  [[noreturn]] void fail(size_t i, const std::string& what) const {
    const ArgSpec& a = sig_.args[i];
    std::string desc = a.str();
    if (a.kind == ArgSpec::Kind::Scalar)
      desc += " = " + toString(slotValue(a.dtype, slots_[i]));
    else if (args_[i].offset)
      desc += ", offset " + std::to_string(args_[i].offset);
    throw LaunchError(check_.kernel() + ": argument '" + argName(i) + "' (" + desc + "): the TMA tensor map of '" +
                      argName(src_) + "' " + what);
  }

  [[noreturn]] void malformed(const std::string& what) const {
    throw LaunchError(check_.kernel() + ": tensor map " + std::to_string(index_) + " of the kernel's signature " +
                      what + "; the kernel binary is inconsistent, recompile it");
  }

  const KernelSignature& sig_;
  const Checker& check_;
  const std::vector<Arg>& args_;
  const uint64_t* slots_;
  size_t index_ = 0;
  size_t src_ = 0;
};

/// Resolves, checks and encodes every tensor map of a launch into `maps`;
/// params[i] points at maps[i] (the kernelParams after the user's).
void buildTensorMaps(const Kernel::State& st, const Checker& check, const std::vector<Arg>& args, const uint64_t* slots,
                     TensorMapBlob* maps, void** params) {
  const size_t n = st.signature.tensorMaps.size();
  if (!n) return;
  TensorMapResolver resolver(st, check, args, slots);
  // Every map is checked before any is encoded: a launch either has all of
  // them or fails on the first argument at fault.
  std::vector<TensorMapRequest> requests;
  requests.reserve(n);
  for (size_t i = 0; i < n; ++i) requests.push_back(resolver.resolve(i));
  for (size_t i = 0; i < n; ++i) {
    std::memset(maps[i].bytes, 0, sizeof maps[i].bytes);
    st.device->encodeTensorMap(st, requests[i], maps[i].bytes);
    params[i] = maps[i].bytes;
  }
}

/// The LaunchError of a checked launch whose kernel left a buffer.
[[noreturn]] void throwOutOfBounds(const Kernel::State& st, const BoundsCheckRecord& record, const int64_t* extents) {
  const KernelSignature& sig = st.signature;
  const size_t op = static_cast<size_t>(record.opId);
  std::string what = op < st.opNames.size() ? "'" + st.opNames[op] + "'" : "op #" + std::to_string(op);
  std::string by;
  if (record.thread >= 0)
    by = ", by thread " + std::to_string(record.thread) + " of program (" + std::to_string(record.program[0]) + ", " +
         std::to_string(record.program[1]) + ", " + std::to_string(record.program[2]) + ")";
  if (record.arg == BoundsCheckRecord::kAssert)
    throw LaunchError(Checker(sig).kernel() + ": assertion failed: " + what + by +
                      (record.thread >= 0 ? "" : " (the program stopped there)") + " (checked launch)");
  std::string where;
  if (record.arg >= 0 && static_cast<size_t>(record.arg) < sig.args.size()) {
    const size_t a = static_cast<size_t>(record.arg);
    where = "argument " + std::to_string(a) + " (" + sig.args[a].str() + ") at byte offset " +
            std::to_string(record.offset) + ", outside its " + std::to_string(extents[a]) + " bytes (" +
            std::to_string(extents[a] / static_cast<int64_t>(byteSize(sig.args[a].dtype))) + " " +
            name(sig.args[a].dtype) + " from the pointer passed)";
  } else if (record.arg == BoundsCheckRecord::kSharedSlot) {
    where =
        "slot " + std::to_string(record.offset) + " of a shared buffer of " + std::to_string(record.slots) + " slots";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(record.offset));
    where = std::string("address 0x") + buf + ", inside none of the kernel's buffers";
  }
  throw LaunchError(Checker(sig).kernel() + ": out-of-bounds access by " + what + ": " + where + by +
                    "; the access was not performed (checked launch)");
}

/// The record of a checked GPU launch (BoundsCheck.h) in the device's
/// memory, zeroed by the allocation, freed with this.
class DeviceRecord {
 public:
  explicit DeviceRecord(DeviceImpl& d) : dev_(d), ptr_(d.alloc(BoundsCheckRecord::kBytes)) {}
  DeviceRecord(const DeviceRecord&) = delete;
  DeviceRecord& operator=(const DeviceRecord&) = delete;
  ~DeviceRecord() { dev_.free(ptr_); }
  /// The kernel's parameter: the record's address.
  DevicePtr* param() { return &ptr_; }
  /// Copies what the kernel wrote into `r` (whose extents stay).
  void readInto(BoundsCheckRecord& r) {
    BoundsCheckRecord d;
    dev_.copyDeviceToHost(&d, ptr_, sizeof d);
    d.extents = r.extents;
    r = d;
  }

 private:
  DeviceImpl& dev_;
  DevicePtr ptr_;
};

/// A checked GPU kernel's hidden parameters after the tensor maps: the
/// extent of each pointer argument (extents[i]), then the record's address.
void checkedGpuParams(const KernelSignature& sig, int64_t* extents, DevicePtr* record, void** params) {
  size_t k = 0;
  for (size_t i = 0; i < sig.args.size(); ++i)
    if (sig.args[i].kind == ArgSpec::Kind::Pointer) params[k++] = &extents[i];
  params[k] = record;
}

size_t pointerArgs(const KernelSignature& sig) {
  size_t n = 0;
  for (const ArgSpec& a : sig.args) n += a.kind == ArgSpec::Kind::Pointer;
  return n;
}

/// Everything about a launch but its arguments: count, grid, options, stream.
void checkLaunch(const Kernel::State& st, const Checker& check, Dim3 grid, const std::vector<Arg>& args,
                 const LaunchOptions& opts) {
  const KernelSignature& sig = st.signature;
  if (args.size() != sig.args.size()) {
    std::string list;
    for (size_t i = 0; i < sig.args.size(); ++i) list += (i ? ", " : "") + sig.args[i].str();
    throw LaunchError(check.kernel() + " expects " + std::to_string(sig.args.size()) +
                      (sig.args.size() == 1 ? " argument (" : " arguments (") + list + "), got " +
                      std::to_string(args.size()));
  }

  constexpr uint64_t kMaxDim = uint64_t{1} << 31, kMaxPrograms = uint64_t{1} << 40;
  // 128-bit product: Dim3::count() wraps for three dimensions near 2^31.
  const unsigned __int128 programs = (unsigned __int128)grid.x * grid.y * grid.z;
  if (grid.x >= kMaxDim || grid.y >= kMaxDim || grid.z >= kMaxDim || programs >= kMaxPrograms)
    throw LaunchError(check.kernel() + ": grid " + grid.str() + " (" +
                      (programs >> 64 ? std::string("over 2^64") : std::to_string(uint64_t(programs))) +
                      " programs) is too large: each dimension must be below 2^31 (program ids "
                      "are 32-bit integers) and the total number of programs below 2^40 "
                      "(1099511627776)");

  if (opts.checkBounds && st.device->kind() != DeviceKind::Emulator && !st.boundsChecked)
    throw LaunchError(check.kernel() + ": LaunchOptions::checkBounds on " + st.device->name() +
                      ", but the kernel was not compiled with CompileOptions::checkBounds (tessera::compile "
                      "does that itself for a checked launch)");

  if (opts.profile && !st.profiled)
    throw LaunchError(check.kernel() +
                      ": LaunchOptions::profile, but the kernel was not compiled with "
                      "CompileOptions::profile (tessera::compile does that itself for a profiled launch)");

  if (opts.stream && opts.stream.deviceImpl() != st.device)
    throw LaunchError(check.kernel() + ": LaunchOptions::stream is a stream of '" + opts.stream.deviceImpl()->name() +
                      "' but the kernel is loaded on '" + st.device->name() + "'" +
                      (opts.stream.deviceImpl()->name() == st.device->name() ? " (another instance)" : "") +
                      "; use a stream of the kernel's device");
}

/// The NVIDIA targets with thread-block clusters (Targets.def), for messages:
/// "nvptx:sm_90a, nvptx:sm_100a, ...".
std::string clusterTargets() {
  std::string r;
  for (const GpuArch& g : gpuArchs())
    if (g.maxClusterBlocks > 0) r += (r.empty() ? "" : ", ") + g.spelling();
  return r;
}

/// The cluster shape a launch runs with -- LaunchOptions::cluster when it is
/// set, else the shape the kernel was compiled for; {1, 1, 1}: no cluster --
/// checked against the device and, when `grid` is given, the grid. Every
/// rule about clusters is here, so the devices see only shapes they can run.
Dim3 clusterShape(const Kernel::State& st, const Checker& check, const LaunchOptions& opts, const Dim3* grid) {
  // Components, not Dim3::count(), which wraps for large shapes.
  auto hasZero = [](Dim3 d) { return !d.x || !d.y || !d.z; };
  auto isOne = [](Dim3 d) { return d.x == 1 && d.y == 1 && d.z == 1; };
  const Dim3 compiled = st.cluster;
  const Dim3 given = opts.cluster;
  const bool none = isOne(compiled);
  const std::string compiledDesc = none ? "none" : compiled.str();
  if (hasZero(compiled))
    throw LaunchError(check.kernel() + ": the binary's cluster shape " + compiled.str() +
                      " has a dimension of 0; the kernel binary is inconsistent, recompile it");
  const bool fromOptions = given.x || given.y || given.z;
  if (fromOptions && hasZero(given))
    throw LaunchError(check.kernel() + ": LaunchOptions::cluster " + given.str() +
                      " has a dimension of 0; give all three dimensions of the cluster (1 along one it does not "
                      "span), or leave it {0, 0, 0} for the shape the kernel was compiled for (" +
                      compiledDesc + ")");
  if (fromOptions && !none && (given.x != compiled.x || given.y != compiled.y || given.z != compiled.z))
    throw LaunchError(check.kernel() + ": LaunchOptions::cluster " + given.str() + " differs from the cluster shape " +
                      compiled.str() +
                      " the kernel was compiled for, which a launch cannot change; leave LaunchOptions::cluster "
                      "{0, 0, 0} (or set it to " +
                      compiled.str() + "), or compile the kernel for the shape you want");
  const Dim3 c = fromOptions ? given : compiled;
  if (isOne(c)) return c;
  const unsigned __int128 blocks = static_cast<unsigned __int128>(c.x) * c.y * c.z;

  const std::string what = "a cluster of " + c.str() + " (" + toString(static_cast<__int128>(blocks)) + " blocks, " +
                           (fromOptions ? "from LaunchOptions::cluster" : "compiled into the kernel") + ")";
  const DeviceImpl& dev = *st.device;
  const unsigned limit = dev.maxClusterBlocks();
  if (limit == 0) {
    std::string arch;
    try {
      arch = dev.arch();
    } catch (const DeviceError&) {  // a HIP device that reported no architecture: named without one
    }
    const std::string devName =
        dev.name() + (arch.empty() || dev.name().find(arch) != std::string::npos ? "" : " (" + arch + ")");
    throw LaunchError(check.kernel() + ": " + what + " needs thread-block clusters, which " + devName +
                      " does not have; clusters run on CUDA devices of the targets " + clusterTargets() +
                      " and on Device::emulator of those targets");
  }
  if (blocks > limit)
    throw LaunchError(check.kernel() + ": " + what + " is too large: " + dev.name() + " runs clusters of at most " +
                      std::to_string(limit) + " blocks (NVIDIA's portable cluster size)");
  if (grid) {
    const uint32_t g[3] = {grid->x, grid->y, grid->z}, cd[3] = {c.x, c.y, c.z};
    for (int d = 0; d < 3; ++d) {
      if (g[d] % cd[d] == 0) continue;
      auto up = [](uint32_t v, uint32_t m) { return (v + m - 1) / m * m; };
      const Dim3 rounded(up(grid->x, c.x), up(grid->y, c.y), up(grid->z, c.z));
      throw LaunchError(check.kernel() + ": grid " + grid->str() + " is not a multiple of " + what + " in dimension " +
                        "xyz"[d] + "; every grid dimension must be a multiple of the cluster's: " + "launch " +
                        rounded.str() + " and mask the programs past the work");
    }
  }
  return c;
}

}  // namespace

void DeviceImpl::encodeTensorMap(const Kernel::State& kernel, const TensorMapRequest&, void*) {
  const std::string& k = kernel.signature.kernelName;
  throw LaunchError((k.empty() ? std::string("kernel") : k) +
                    ": tensor maps need an NVIDIA sm_90 device or its emulator; this kernel was compiled to " +
                    describe(kernel.format) + " and loaded on " + name() +
                    "; compile it for nvptx:sm_90a and run it on a CUDA device of compute capability 9.0 or on "
                    "Device::emulator(\"nvptx:sm_90a\")");
}

unsigned DeviceImpl::residentPrograms(KernelState&, const KernelSignature& sig, const LaunchOptions& opts) {
  return launchThreads(opts, sig, *this) * static_cast<unsigned>(opts.cluster.count());
}

unsigned Kernel::residentPrograms(const LaunchOptions& opts) const {
  if (!state_) throw LaunchError("Kernel::residentPrograms called on a null Kernel; load one with Device::load");
  LaunchOptions o = opts;
  o.cluster = clusterShape(*state_, Checker(state_->signature), opts, nullptr);
  return state_->device->residentPrograms(*state_->loaded, state_->signature, o);
}

void LaunchPacket::finish() const {
  if (kernel->boundsChecked && record.violated) throwOutOfBounds(*kernel, record, extents.data());
}

const KernelSignature& Kernel::signature() const {
  if (!state_) throw LaunchError("Kernel::signature called on a null Kernel; load one with Device::load");
  return state_->signature;
}

void Kernel::launch(Dim3 grid, const std::vector<Arg>& args, const LaunchOptions& given) const {
  if (!state_) throw LaunchError("launch of a null Kernel (default-constructed); load one with Device::load");
  const KernelSignature& sig = state_->signature;
  Checker check(sig);
  checkLaunch(*state_, check, grid, args, given);
  // The devices get the effective cluster shape (DeviceImpl::launch).
  LaunchOptions opts = given;
  opts.cluster = clusterShape(*state_, check, given, &grid);

  // An empty grid (a dimension of 0: cdiv(M, BLOCK_M) for an MoE expert
  // without tokens, an empty batch) runs no program: the arguments are
  // still checked, so a mistake shows on the empty launch too, but nothing
  // is enqueued and no tensor map is built (TMA cannot describe an empty
  // tensor, and none would be read).
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) {
    std::vector<uint64_t> slots(args.size());
    std::vector<void*> ptrs(args.size());
    std::vector<int64_t> extents(args.size());
    marshal(*state_, args, check, slots.data(), ptrs.data(), extents.data());
    return;
  }

  // kernelParams: args[i] points at slot i; then one pointer per tensor map
  // (hidden parameters, KernelSignature::tensorMaps), each at its 128-byte
  // encoding; a bounds-checked kernel takes the address of its
  // BoundsCheckRecord last, on a GPU after the extent of each pointer
  // argument, and in the device's memory (BoundsCheck.h).
  const size_t nMaps = sig.tensorMaps.size();
  const size_t recordAt = args.size() + nMaps;
  const bool gpuChecked = state_->boundsChecked && state_->device->kind() != DeviceKind::CPU;
  // A profiled kernel takes its buffer last (tessera/support/Profile.h).
  const size_t profileAt = recordAt + (state_->boundsChecked ? 1 : 0) + (gpuChecked ? pointerArgs(sig) : 0);
  const size_t nParams = profileAt + (state_->profiled ? 1 : 0);

  // A profiled launch reads its buffer back at once: it runs synchronously,
  // after what its stream holds.
  if (opts.stream && opts.profile) {
    opts.stream.synchronize();
    LaunchOptions o = opts;
    o.stream = {};
    return launch(grid, args, o);
  }

  if (opts.stream) {
    // Asynchronous: the packet outlives this call, holding the kernel,
    // every buffer and the tensor maps until the launch has run.
    auto p = std::make_shared<LaunchPacket>();
    p->slots.resize(nParams);
    p->params.resize(nParams);
    p->extents.resize(nParams);
    marshal(*state_, args, check, p->slots.data(), p->params.data(), p->extents.data());
    p->tensorMaps.resize(nMaps);
    buildTensorMaps(*state_, check, args, p->slots.data(), p->tensorMaps.data(), p->params.data() + args.size());
    p->record.extents = p->extents.data();
    std::shared_ptr<DeviceRecord> devRecord;
    if (gpuChecked) {
      devRecord = std::make_shared<DeviceRecord>(*state_->device);
      checkedGpuParams(sig, p->extents.data(), devRecord->param(), p->params.data() + recordAt);
      p->deviceRecord = devRecord;
    } else if (state_->boundsChecked) {
      p->params[recordAt] = &p->record;
    }
    if (state_->profiled) {
      auto buf = std::make_shared<ProfileBuffer>(*state_, nullptr, grid.count());
      p->params[profileAt] = buf->param();
      p->profileBuffer = buf;
    }
    p->kernel = state_;
    const std::vector<int64_t> ext = gpuChecked ? p->extents : std::vector<int64_t>{};
    for (const Arg& a : args)
      if (a.kind == Arg::Kind::Buffer && !a.buffer.isNull()) p->buffers.push_back(a.buffer.state());
    state_->device->launchAsync(*opts.stream.impl(), *state_->loaded, sig, grid, std::move(p), opts);
    if (gpuChecked) {
      // The record is read back at once: a checked GPU launch on a stream
      // waits for the stream, so that its error is raised here.
      opts.stream.impl()->synchronize();
      BoundsCheckRecord record;
      devRecord->readInto(record);
      if (record.violated) throwOutOfBounds(*state_, record, ext.data());
    }
    return;
  }

  // Synchronous: small launches stay off the heap.
  constexpr size_t kInline = 16;
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
  marshal(*state_, args, check, slots, ptrs, extents);
  std::vector<TensorMapBlob> maps(nMaps);  // no allocation without tensor maps
  buildTensorMaps(*state_, check, args, slots, maps.data(), ptrs + args.size());
  BoundsCheckRecord record;
  record.extents = extents;
  std::optional<DeviceRecord> devRecord;
  if (gpuChecked) {
    devRecord.emplace(*state_->device);
    checkedGpuParams(sig, extents, devRecord->param(), ptrs + recordAt);
  } else if (state_->boundsChecked) {
    ptrs[recordAt] = &record;
  }

  std::optional<ProfileBuffer> profile;
  if (state_->profiled) {
    profile.emplace(*state_, opts.profile ? &opts.profile->options : nullptr, grid.count());
    ptrs[profileAt] = profile->param();
  }

  state_->device->launch(*state_->loaded, sig, grid, ptrs, opts);

  if (profile && opts.profile) profile->finish(*opts.profile);
  if (devRecord) devRecord->readInto(record);
  if (state_->boundsChecked && record.violated) throwOutOfBounds(*state_, record, extents);
}

}  // namespace tessera::rt

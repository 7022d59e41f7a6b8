// DLPack import and export (tessera/runtime/DLPack.h). An import checks the
// tensor's description and hands its memory to Device::wrap, whose deleter
// calls the tensor's; an export is a heap block holding a Buffer handle and
// the tensor that points into it, freed by the tensor's deleter.

#include "tessera/runtime/DLPack.h"

#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "DeviceImpl.h"

namespace tessera::rt {
namespace {

using namespace dlpack;

std::string deviceTypeName(int32_t t) {
  switch (t) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLOneAPI: return "kDLOneAPI";
  }
  return "device type " + std::to_string(t);
}

/// Where a device's memory is, in DLPack's terms. The emulator's memory is
/// host memory.
DLDevice dlDevice(const DeviceImpl& d) {
  switch (d.kind()) {
    case DeviceKind::CUDA: return {kDLCUDA, d.ordinal()};
    case DeviceKind::HIP: return {kDLROCM, d.ordinal()};
    case DeviceKind::CPU:
    case DeviceKind::Emulator: break;
  }
  return {kDLCPU, 0};
}

/// Empty when a tensor on `t` can be used by kernels of `d`; else why not.
/// Pinned host memory (kDLCUDAHost, kDLROCMHost) is host memory; managed
/// memory is a device address of any CUDA device.
std::string deviceMismatch(const DeviceImpl& d, DLDevice t) {
  const DLDevice want = dlDevice(d);
  const bool host = t.device_type == kDLCPU || t.device_type == kDLCUDAHost || t.device_type == kDLROCMHost;
  bool typeOk = false;
  switch (d.kind()) {
    case DeviceKind::CPU:
    case DeviceKind::Emulator: typeOk = host; break;
    case DeviceKind::CUDA: typeOk = t.device_type == kDLCUDA || t.device_type == kDLCUDAManaged; break;
    case DeviceKind::HIP: typeOk = t.device_type == kDLROCM; break;
  }
  if (!typeOk)
    return "the tensor is on " + deviceTypeName(t.device_type) + " (device " + std::to_string(t.device_id) +
           ") but this device's memory is " + deviceTypeName(want.device_type) +
           "; import it with the Device the memory belongs to";
  // Host memory has one device id in DLPack, 0 (dlpack.h: "for vanilla CPU
  // memory, pinned memory, or managed memory, this is set to 0"): any other
  // id is a producer's mistake or a tensor of something that is not this
  // host's memory, so it is refused rather than guessed at.
  if (t.device_id != want.device_id)
    return "the tensor is on " + deviceTypeName(t.device_type) + " device " + std::to_string(t.device_id) +
           " but this is device " + std::to_string(want.device_id) +
           (host ? " (DLPack gives host memory, pinned or not, device_id 0)" : "");
  return {};
}

std::optional<DType> dtypeOf(DLDataType t, std::string& why) {
  const std::string desc = "(code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
                           std::to_string(t.lanes) + " lanes)";
  if (t.lanes != 1) {
    why = "vector dtypes are not supported " + desc + "; Tessera buffers hold scalars (lanes = 1)";
    return std::nullopt;
  }
  switch (t.code) {
    case kDLInt:
      if (t.bits == 8) return DType::I8;
      if (t.bits == 16) return DType::I16;
      if (t.bits == 32) return DType::I32;
      if (t.bits == 64) return DType::I64;
      break;
    case kDLFloat:
      if (t.bits == 16) return DType::F16;
      if (t.bits == 32) return DType::F32;
      if (t.bits == 64) return DType::F64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::BF16;
      break;
    case kDLBool:
      if (t.bits == 8) return DType::I1;  // one byte per element, as Tessera stores i1
      break;
    case kDLUInt:
      if (t.bits == 8) return DType::U8;
      if (t.bits == 16) return DType::U16;
      if (t.bits == 32) return DType::U32;
      if (t.bits == 64) return DType::U64;
      break;
    case kDLFloat8_e4m3fn:
    case kDLFloat8_e4m3fnuz:
    case kDLFloat8_e5m2:
    case kDLFloat8_e5m2fnuz:
      if (t.bits == 8)
        return t.code == kDLFloat8_e4m3fn     ? DType::F8E4M3
               : t.code == kDLFloat8_e4m3fnuz ? DType::F8E4M3FNUZ
               : t.code == kDLFloat8_e5m2     ? DType::F8E5M2
                                              : DType::F8E5M2FNUZ;
      break;
    case kDLFloat8_e8m0fnu:
      if (t.bits == 8) return DType::E8M0;
      break;
    case kDLFloat6_e2m3fn:
    case kDLFloat6_e3m2fn:
    case kDLFloat4_e2m1fn:
      why = "DLPack leaves the packing of 4- and 6-bit floats to the producer " + desc +
            ": pass their codes as a uint8 tensor (one code a byte, or f4e2m1 two a byte, docs/dtypes.md)";
      return std::nullopt;
    case kDLComplex: why = "complex numbers have no Tessera dtype " + desc; return std::nullopt;
    default: why = "the dtype has no Tessera equivalent " + desc; return std::nullopt;
  }
  why = "no Tessera dtype has this width " + desc;
  return std::nullopt;
}

DLDataType dlTypeOf(DType t) {
  switch (t) {
    case DType::I1: return {kDLBool, 8, 1};
    case DType::I8: return {kDLInt, 8, 1};
    case DType::I16: return {kDLInt, 16, 1};
    case DType::I32: return {kDLInt, 32, 1};
    case DType::I64: return {kDLInt, 64, 1};
    case DType::U8: return {kDLUInt, 8, 1};
    case DType::U16: return {kDLUInt, 16, 1};
    case DType::U32: return {kDLUInt, 32, 1};
    case DType::U64: return {kDLUInt, 64, 1};
    case DType::F16: return {kDLFloat, 16, 1};
    case DType::BF16: return {kDLBfloat, 16, 1};
    case DType::F32: return {kDLFloat, 32, 1};
    case DType::F64: return {kDLFloat, 64, 1};
    case DType::F8E4M3: return {kDLFloat8_e4m3fn, 8, 1};
    case DType::F8E5M2: return {kDLFloat8_e5m2, 8, 1};
    case DType::F8E4M3FNUZ: return {kDLFloat8_e4m3fnuz, 8, 1};
    case DType::F8E5M2FNUZ: return {kDLFloat8_e5m2fnuz, 8, 1};
    case DType::E8M0: return {kDLFloat8_e8m0fnu, 8, 1};
    // Held one code a byte: a DLPack consumer could not know it (see above).
    case DType::F4E2M1:
    case DType::F6E2M3:
    case DType::F6E3M2:
      throw UsageError(std::string("a ") + name(t) +
                       " buffer has no DLPack type (DLPack leaves the packing of 4- and 6-bit floats to the "
                       "producer): export its codes as a u8 buffer");
  }
  return {kDLInt, 8, 1};
}

/// The element count of a row-major contiguous tensor; throws UsageError for
/// anything else. Dimensions of size 1 may have any stride (frameworks give
/// them arbitrary ones), and a tensor with no elements any strides at all.
size_t contiguousCount(const DLTensor& t, const std::string& what) {
  if (t.ndim < 0) throw UsageError(what + ": ndim is " + std::to_string(t.ndim));
  if (t.ndim > 0 && !t.shape) throw UsageError(what + ": the shape is null with ndim " + std::to_string(t.ndim));
  size_t count = 1;
  for (int32_t d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0)
      throw UsageError(what + ": dimension " + std::to_string(d) + " has negative size " + std::to_string(t.shape[d]));
    const auto n = static_cast<uint64_t>(t.shape[d]);
    if (n && count > std::numeric_limits<size_t>::max() / n) throw UsageError(what + ": the element count overflows");
    count *= n;
  }
  if (!t.strides || count == 0) return count;
  int64_t expected = 1;
  for (int32_t d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] == 1) continue;
    if (t.strides[d] != expected)
      throw UsageError(what + ": the tensor is not row-major contiguous: dimension " + std::to_string(d) + " (size " +
                       std::to_string(t.shape[d]) + ") has stride " + std::to_string(t.strides[d]) + ", expected " +
                       std::to_string(expected) +
                       "; Tessera kernels take flat pointers, so make the tensor contiguous first");
    expected *= t.shape[d];
  }
  return count;
}

Buffer wrapTensor(const Device& dev, const DLTensor& t, const std::string& what, std::function<void()> deleter) {
  if (std::string why = deviceMismatch(*dev.impl(), t.device); !why.empty()) throw DeviceError(what + ": " + why);
  std::string why;
  const std::optional<DType> dtype = dtypeOf(t.dtype, why);
  if (!dtype) throw UsageError(what + ": " + why);
  const size_t count = contiguousCount(t, what);
  if (!t.data && count)
    throw UsageError(what + ": the data pointer is null but the tensor has " + std::to_string(count) + " elements");
  // data + byte_offset is the first element's address: an offset past the
  // end of the address space would wrap around to a small address.
  const auto data = reinterpret_cast<uint64_t>(t.data);
  if (t.byte_offset > std::numeric_limits<uint64_t>::max() - data)
    throw UsageError(what + ": data (" + hexAddress(data) + ") + byte_offset (" + std::to_string(t.byte_offset) +
                     ") runs past the end of the 64-bit address space");
  WrapOptions o;
  o.deleter = std::move(deleter);
  // The device's own checks (alignment, a range that wraps, the driver's
  // view of the pointer), reported as this import's.
  try {
    return dev.wrap(data + t.byte_offset, *dtype, count, std::move(o));
  } catch (const UsageError& e) {
    throw UsageError(what + ": " + e.what());
  } catch (const DeviceError& e) {
    throw DeviceError(what + ": " + e.what());
  }
}

std::string importWhat(const Device& dev, const char* form) {
  return std::string("fromDLPack (") + form + ") on " + dev.name();
}

/// What an exported tensor owns: a handle on the buffer and the arrays the
/// tensor points at. One block for both forms; only one is filled.
struct Export {
  Buffer buffer;
  int64_t shape[1];
  int64_t strides[1];
  DLManagedTensor managed{};
  DLManagedTensorVersioned versioned{};
};

DLTensor tensorOf(Export& e) {
  const Buffer::State& s = *e.buffer.state();
  e.shape[0] = static_cast<int64_t>(s.count);
  e.strides[0] = 1;
  return DLTensor{reinterpret_cast<void*>(s.ptr), dlDevice(*s.device), 1, dlTypeOf(s.dtype), e.shape, e.strides, 0};
}

/// Owned until the caller hands it to its DLPack struct: tensorOf throws for
/// dtypes DLPack cannot describe, and the export must not leak then.
std::unique_ptr<Export> newExport(const Buffer& b, const char* what) {
  if (b.isNull())
    throw UsageError(std::string(what) + " called on a null Buffer (default-constructed); allocate it first");
  return std::unique_ptr<Export>(new Export{b, {0}, {0}});
}

}  // namespace

Buffer fromDLPack(const Device& dev, DLManagedTensor* t) {
  const std::string what = importWhat(dev, "DLManagedTensor");
  if (!t) throw UsageError(what + ": the tensor is null");
  return wrapTensor(dev, t->dl_tensor, what, [t] {
    if (t->deleter) t->deleter(t);
  });
}

Buffer fromDLPack(const Device& dev, DLManagedTensorVersioned* t) {
  const std::string what = importWhat(dev, "DLManagedTensorVersioned");
  if (!t) throw UsageError(what + ": the tensor is null");
  if (t->version.major != kMajorVersion)
    throw UsageError(what + ": DLPack version " + std::to_string(t->version.major) + "." +
                     std::to_string(t->version.minor) + " has another ABI; Tessera reads major version " +
                     std::to_string(kMajorVersion));
  if (t->flags & kFlagReadOnly)
    throw UsageError(what +
                     ": the tensor is read-only (DLPACK_FLAG_BITMASK_READ_ONLY), but a Tessera kernel may "
                     "write any buffer it is given; pass a writable tensor (or a copy)");
  return wrapTensor(dev, t->dl_tensor, what, [t] {
    if (t->deleter) t->deleter(t);
  });
}

DLManagedTensor* toDLPack(const Buffer& b) {
  std::unique_ptr<Export> e = newExport(b, "toDLPack");
  e->managed.dl_tensor = tensorOf(*e);
  e->managed.manager_ctx = e.get();
  e->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Export*>(self->manager_ctx); };
  return &e.release()->managed;
}

DLManagedTensorVersioned* toDLPackVersioned(const Buffer& b) {
  std::unique_ptr<Export> e = newExport(b, "toDLPackVersioned");
  e->versioned.version = {kMajorVersion, kMinorVersion};
  e->versioned.flags = 0;
  e->versioned.dl_tensor = tensorOf(*e);
  e->versioned.manager_ctx = e.get();
  e->versioned.deleter = [](DLManagedTensorVersioned* self) { delete static_cast<Export*>(self->manager_ctx); };
  return &e.release()->versioned;
}

}  // namespace tessera::rt

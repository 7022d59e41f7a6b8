// DLPack interchange: Tessera buffers to and from DLManagedTensor (the
// unversioned ABI) and DLManagedTensorVersioned (DLPack >= 1.0), without
// copying.
//
// The structures below spell out the public DLPack ABI of dlpack.h v1.1
// (https://github.com/dmlc/dlpack, include/dlpack/dlpack.h) field for field.
// They live in tessera::rt::dlpack so that they never clash with a dlpack.h
// the application includes itself; the layouts are the same, so pointers to
// the application's structures convert with reinterpret_cast.
#pragma once

#include <cstdint>

#include "tessera/runtime/Runtime.h"

namespace tessera::rt::dlpack {

/// The DLPack version these definitions follow (DLPACK_MAJOR_VERSION,
/// DLPACK_MINOR_VERSION). A versioned tensor of another major version has
/// another ABI and is refused.
inline constexpr uint32_t kMajorVersion = 1;
inline constexpr uint32_t kMinorVersion = 1;

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

/// DLDeviceType: a C enum, int-sized.
enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

/// DLDataTypeCode (stored in DLDataType::code, a uint8_t).
enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
  // The 8-bit floats of v1.1 that Tessera has (DTypes.def); the others of
  // 7..13 (e3m4, e4m3 with infinities, e4m3b11fnuz) have no Tessera type.
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e4m3fnuz = 11,
  kDLFloat8_e5m2 = 12,
  kDLFloat8_e5m2fnuz = 13,
  // The OCP MX scale (e8m0) and elements (6- and 4-bit floats). Tessera
  // exchanges e8m0 only: DLPack leaves the packing of the sub-byte codes to
  // the producer, so their tensors are refused (docs/dtypes.md).
  kDLFloat8_e8m0fnu = 14,
  kDLFloat6_e2m3fn = 15,
  kDLFloat6_e3m2fn = 16,
  kDLFloat4_e2m1fn = 17,
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL means compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

inline constexpr uint64_t kFlagReadOnly = 1ull << 0;           // DLPACK_FLAG_BITMASK_READ_ONLY
inline constexpr uint64_t kFlagIsCopied = 1ull << 1;           // DLPACK_FLAG_BITMASK_IS_COPIED
inline constexpr uint64_t kFlagSubbyteTypePadded = 1ull << 2;  // DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED

struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

}  // namespace tessera::rt::dlpack

namespace tessera::rt {

/// Adopts a DLPack tensor of `dev` as a Buffer of all its elements (flat, in
/// row-major order), without copying. On success the Buffer owns the tensor:
/// its deleter is called exactly once, when the last Buffer handle (and the
/// last tensor exported from it) is gone. On error nothing is taken -- the
/// caller still owns the tensor and its deleter has not been called.
///
/// Every Tessera dtype is accepted: kDLInt, kDLUInt (u8..u64), kDLFloat,
/// kDLBfloat, kDLBool (8 bits, as i1) and the four 8-bit floats above
/// (f8e4m3, f8e4m3fnuz, f8e5m2, f8e5m2fnuz); docs/runtime.md has the table.
///
/// Throws DeviceError when the tensor is not on `dev`: another device type,
/// or another device_id (host memory -- kDLCPU, kDLCUDAHost, kDLROCMHost --
/// is device_id 0 in DLPack). UsageError for a null tensor; a dtype Tessera
/// has no type for (complex, the other 8-bit floats -- e3m4, e4m3 with
/// infinities, e4m3b11fnuz, e8m0fnu --, the 6- and 4-bit floats, opaque
/// handles, lanes != 1, bits that match no type of the code); non-contiguous
/// strides (only row-major contiguous tensors; dimensions of size 1 may have
/// any stride); a null data pointer with elements; data + byte_offset past
/// the end of the address space, or a range that runs past it; a read-only
/// versioned tensor, or a versioned tensor of another major version.
Buffer fromDLPack(const Device& dev, dlpack::DLManagedTensor* tensor);
Buffer fromDLPack(const Device& dev, dlpack::DLManagedTensorVersioned* tensor);

/// Exports a buffer as a one-dimensional tensor of count() elements. The
/// tensor holds a Buffer handle: the memory stays valid until the consumer
/// calls the tensor's deleter (exactly once), however long the producer's
/// handles live. The emulator's memory is exported as kDLCPU (host memory).
dlpack::DLManagedTensor* toDLPack(const Buffer& b);
dlpack::DLManagedTensorVersioned* toDLPackVersioned(const Buffer& b);

}  // namespace tessera::rt

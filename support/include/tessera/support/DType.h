// Scalar element types, shared by the IR and the runtime (which must not
// depend on the IR but still checks launch arguments against signatures).
// The types, their names and widths are the table DTypes.def.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

/// i1 (boolean), signed (two's complement) and unsigned integers, floats and
/// the 8-bit storage floats (DTypes.def).
enum class DType : uint8_t {
#define TS_DTYPE(Enum, name, bits, cls, ctype) Enum,
#include "tessera/support/DTypes.def"
};

inline constexpr DType kAllDTypes[] = {
#define TS_DTYPE(Enum, name, bits, cls, ctype) DType::Enum,
#include "tessera/support/DTypes.def"
};

namespace dtype_detail {
enum class Class : uint8_t { Bool, Signed, Unsigned, Float, Float8, Mx };
inline constexpr Class kClass[] = {
#define TS_DTYPE(Enum, name, bits, cls, ctype) Class::cls,
#include "tessera/support/DTypes.def"
};
inline constexpr unsigned kBits[] = {
#define TS_DTYPE(Enum, name, bits, cls, ctype) bits,
#include "tessera/support/DTypes.def"
};
inline constexpr const char* kName[] = {
#define TS_DTYPE(Enum, name, bits, cls, ctype) name,
#include "tessera/support/DTypes.def"
};
inline constexpr const char* kCType[] = {
#define TS_DTYPE(Enum, name, bits, cls, ctype) ctype,
#include "tessera/support/DTypes.def"
};
inline Class classOf(DType t) { return kClass[static_cast<unsigned>(t)]; }
}  // namespace dtype_detail

/// The C++ type a scalar argument of this dtype is passed as ("int32_t";
/// "float" for f16, bf16 and the fp8 types): launch messages and exported
/// launchers say the same.
inline const char* scalarCType(DType t) { return dtype_detail::kCType[static_cast<unsigned>(t)]; }

/// The 8-bit floats (f8e4m3, f8e5m2 and their FNUZ variants): storage
/// types. In registers they are their 8 bits; every conversion to or from
/// them is exact or rounds to nearest even, saturating (Fp8.h).
inline bool isFp8(DType t) { return dtype_detail::classOf(t) == dtype_detail::Class::Float8; }
/// Floats, the 8-bit storage floats included.
inline bool isFloat(DType t) {
  auto c = dtype_detail::classOf(t);
  return c == dtype_detail::Class::Float || c == dtype_detail::Class::Float8;
}
/// Floats that arithmetic is defined on (not the 8-bit storage floats).
inline bool isArithFloat(DType t) { return dtype_detail::classOf(t) == dtype_detail::Class::Float; }
/// The OCP MX codes (f4e2m1, f6e2m3, f6e3m2, e8m0): host formats only
/// (MxFormats.h); no kernel value has them, kernels hold their codes as u8.
inline bool isMx(DType t) { return dtype_detail::classOf(t) == dtype_detail::Class::Mx; }
/// i1, the signed and the unsigned integers.
inline bool isInteger(DType t) {
  auto c = dtype_detail::classOf(t);
  return c == dtype_detail::Class::Bool || c == dtype_detail::Class::Signed || c == dtype_detail::Class::Unsigned;
}
/// u8, u16, u32, u64: compared, divided, shifted right and widened as
/// unsigned numbers (IR.h).
inline bool isUnsigned(DType t) { return dtype_detail::classOf(t) == dtype_detail::Class::Unsigned; }
/// Integers whose comparisons and min/max are unsigned: the unsigned types
/// and i1 (true > false).
inline bool comparesUnsigned(DType t) { return t == DType::I1 || isUnsigned(t); }

/// Width in bits (i1 counts as 1; it is stored as one byte in memory).
inline unsigned bitWidth(DType t) { return dtype_detail::kBits[static_cast<unsigned>(t)]; }
/// Size in bytes of one element in memory: i1, and the 4- and 6-bit MX
/// codes held one a byte, take a byte (packed f4e2m1 is two codes in a u8).
inline unsigned byteSize(DType t) { return (bitWidth(t) + 7) / 8; }

inline const char* name(DType t) { return dtype_detail::kName[static_cast<unsigned>(t)]; }

inline std::optional<DType> parseDType(std::string_view s) {
  for (DType t : kAllDTypes)
    if (s == name(t)) return t;
  return std::nullopt;
}

}  // namespace tessera

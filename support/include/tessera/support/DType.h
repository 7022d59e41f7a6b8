// Scalar element types, shared by the IR and the runtime (which must not
// depend on the IR but still checks launch arguments against signatures).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

/// i1 (boolean), signed (two's complement) and unsigned integers, floats.
/// The unsigned types come last so that the values of the others never
/// changed.
enum class DType : uint8_t { I1, I8, I16, I32, I64, F16, BF16, F32, F64, U8, U16, U32, U64 };

inline constexpr DType kAllDTypes[] = {DType::I1,  DType::I8,   DType::I16, DType::I32, DType::I64,
                                       DType::F16, DType::BF16, DType::F32, DType::F64, DType::U8,
                                       DType::U16, DType::U32,  DType::U64};

inline bool isFloat(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64; }
/// i1, the signed and the unsigned integers.
inline bool isInteger(DType t) { return !isFloat(t); }
/// u8, u16, u32, u64: compared, divided, shifted right and widened as
/// unsigned numbers (IR.h).
inline bool isUnsigned(DType t) { return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64; }
/// Integers whose comparisons and min/max are unsigned: the unsigned types
/// and i1 (true > false).
inline bool comparesUnsigned(DType t) { return t == DType::I1 || isUnsigned(t); }

/// Width in bits (i1 counts as 1; it is stored as one byte in memory).
inline unsigned bitWidth(DType t) {
  switch (t) {
    case DType::I1: return 1;
    case DType::I8:
    case DType::U8: return 8;
    case DType::I16:
    case DType::U16:
    case DType::F16:
    case DType::BF16: return 16;
    case DType::I32:
    case DType::U32:
    case DType::F32: return 32;
    case DType::I64:
    case DType::U64:
    case DType::F64: return 64;
  }
  return 0;
}
/// Size in bytes of one element in memory.
inline unsigned byteSize(DType t) { return t == DType::I1 ? 1 : bitWidth(t) / 8; }

inline const char* name(DType t) {
  switch (t) {
    case DType::I1: return "i1";
    case DType::I8: return "i8";
    case DType::I16: return "i16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::U8: return "u8";
    case DType::U16: return "u16";
    case DType::U32: return "u32";
    case DType::U64: return "u64";
  }
  return "?";
}

inline std::optional<DType> parseDType(std::string_view s) {
  for (DType t : kAllDTypes)
    if (s == name(t)) return t;
  return std::nullopt;
}

}  // namespace tessera

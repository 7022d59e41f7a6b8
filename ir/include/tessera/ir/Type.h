// Types of the tile IR.
//
//   scalar   i1 i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64
//            f8e4m3 f8e5m2 f8e4m3fnuz f8e5m2fnuz (storage only, IR.h)
//   pointer  ptr<f32, global>           (pointee scalar + memory space)
//   tile     tile<64x32xf32>, tile<128xptr<f16, global>>
//            a static-shape value of rank 1..4 whose elements are scalars
//            or pointers; tiles are values (SSA), never memory.
//   buffer   buffer<shared, 2x64x64xf16>
//            a block of shared (per program) or local (per program,
//            private) memory holding a tile, produced by `alloc`.
//
// Types are small immutable value objects compared structurally.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/support/DType.h"

namespace tessera::ir {

enum class MemSpace : uint8_t { Global, Shared, Local };
const char* name(MemSpace s);

using Shape = std::vector<int64_t>;
std::string shapeStr(const Shape& s);  // "64x32"

inline constexpr int kMaxTileRank = 4;

class Type {
 public:
  enum class Kind : uint8_t { None, Scalar, Pointer, Tile, Buffer };

  Type() = default;
  static Type scalar(DType d) {
    Type t;
    t.kind_ = Kind::Scalar;
    t.dtype_ = d;
    return t;
  }
  static Type ptr(DType pointee, MemSpace s = MemSpace::Global) {
    Type t;
    t.kind_ = Kind::Pointer;
    t.dtype_ = pointee;
    t.space_ = s;
    return t;
  }
  /// A tile whose elements have type `elem` (a scalar or pointer type).
  static Type tile(const Type& elem, Shape shape);
  static Type buffer(DType elem, MemSpace s, Shape shape) {
    Type t;
    t.kind_ = Kind::Buffer;
    t.dtype_ = elem;
    t.space_ = s;
    t.shape_ = std::move(shape);
    return t;
  }

  Kind kind() const { return kind_; }
  bool isNone() const { return kind_ == Kind::None; }
  bool isScalar() const { return kind_ == Kind::Scalar; }
  bool isPointer() const { return kind_ == Kind::Pointer; }
  bool isTile() const { return kind_ == Kind::Tile; }
  bool isBuffer() const { return kind_ == Kind::Buffer; }

  /// The element type: for a tile its scalar or pointer element; for a scalar
  /// or pointer the type itself; for a buffer its element scalar.
  Type element() const;
  /// The scalar dtype underneath: element dtype of scalars/tiles of scalars,
  /// pointee dtype of pointers and tiles of pointers, buffer element dtype.
  DType dtype() const { return dtype_; }
  /// Memory space of a pointer, tile of pointers, or buffer.
  MemSpace space() const { return space_; }
  /// True for pointers and tiles of pointers.
  bool isPointerLike() const { return kind_ == Kind::Pointer || (kind_ == Kind::Tile && elemIsPtr_); }
  /// True for scalars and tiles of scalars (not pointers, not buffers).
  bool isNumeric() const { return kind_ == Kind::Scalar || (kind_ == Kind::Tile && !elemIsPtr_); }
  bool isFloatLike() const { return isNumeric() && isFloat(dtype_); }
  bool isIntLike() const { return isNumeric() && isInteger(dtype_); }

  const Shape& shape() const { return shape_; }  // empty for scalars/pointers
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numElements() const;

  /// Same element type, new shape (a scalar/pointer if `shape` is empty).
  Type withShape(Shape shape) const;
  /// Same shape, new scalar element dtype (pointers become scalars).
  Type withDType(DType d) const;

  std::string str() const;
  bool operator==(const Type& o) const {
    return kind_ == o.kind_ && dtype_ == o.dtype_ && space_ == o.space_ && elemIsPtr_ == o.elemIsPtr_ &&
           shape_ == o.shape_;
  }
  bool operator!=(const Type& o) const { return !(*this == o); }

 private:
  Kind kind_ = Kind::None;
  DType dtype_ = DType::I32;
  MemSpace space_ = MemSpace::Global;
  bool elemIsPtr_ = false;  // tile of pointers
  Shape shape_;
};

}  // namespace tessera::ir

#include "tessera/ir/Type.h"

#include "tessera/support/Error.h"

namespace tessera::ir {

const char* name(MemSpace s) {
  switch (s) {
    case MemSpace::Global: return "global";
    case MemSpace::Shared: return "shared";
    case MemSpace::Local: return "local";
  }
  return "?";
}

std::string shapeStr(const Shape& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += 'x';
    r += std::to_string(s[i]);
  }
  return r;
}

Type Type::tile(const Type& elem, Shape shape) {
  TS_ASSERT(elem.isScalar() || elem.isPointer(), "tile element must be a scalar or pointer");
  Type t;
  t.kind_ = Kind::Tile;
  t.dtype_ = elem.dtype_;
  t.space_ = elem.space_;
  t.elemIsPtr_ = elem.isPointer();
  t.shape_ = std::move(shape);
  return t;
}

Type Type::element() const {
  switch (kind_) {
    case Kind::Tile: return elemIsPtr_ ? ptr(dtype_, space_) : scalar(dtype_);
    case Kind::Buffer: return scalar(dtype_);
    default: return *this;
  }
}

int64_t Type::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

Type Type::withShape(Shape shape) const {
  Type e = element();
  if (shape.empty()) return e;
  return tile(e, std::move(shape));
}

Type Type::withDType(DType d) const {
  if (kind_ == Kind::Tile) return tile(scalar(d), shape_);
  return scalar(d);
}

std::string Type::str() const {
  switch (kind_) {
    case Kind::None: return "none";
    case Kind::Scalar: return name(dtype_);
    case Kind::Pointer: return std::string("ptr<") + name(dtype_) + ", " + name(space_) + ">";
    case Kind::Tile: return "tile<" + shapeStr(shape_) + "x" + element().str() + ">";
    case Kind::Buffer:
      return std::string("buffer<") + name(space_) + ", " + shapeStr(shape_) + "x" + name(dtype_) + ">";
  }
  return "?";
}

}  // namespace tessera::ir

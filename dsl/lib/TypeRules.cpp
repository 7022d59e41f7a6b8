// The DSL's type rules (TYPE RULES in DSL.h): shape checks, numpy
// broadcasting, literals and dtype promotion of mixed operands.
#include "DslImpl.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {
namespace dsl {

void checkShape(const ir::Shape& shape, const SrcLoc& loc, const char* what) {
  if (shape.size() > static_cast<size_t>(ir::kMaxTileRank))
    fail(loc, fmt::format("{}: tile rank {} exceeds the maximum of {} (shape {})", what, shape.size(), ir::kMaxTileRank,
                          ir::shapeStr(shape)));
  for (int64_t d : shape)
    if (d <= 0) fail(loc, fmt::format("{}: tile dimensions must be positive (shape {})", what, ir::shapeStr(shape)));
}

std::string shapeName(const ir::Shape& s) {
  if (s.empty()) return "scalar";
  std::string r = "[";
  r += ir::shapeStr(s);
  r += "]";
  return r;
}

/// numpy broadcasting of two shapes.
ir::Shape broadcastShapes(const ir::Shape& a, const ir::Shape& b, const SrcLoc& loc, const std::string& what) {
  size_t n = std::max(a.size(), b.size());
  ir::Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(loc, fmt::format("{}: shapes {} and {} cannot be broadcast together", what, shapeName(a), shapeName(b)));
    r[i] = std::max(da, db);
  }
  checkShape(r, loc, what.c_str());
  return r;
}

/// Broadcasts `v` to `target` (splat for scalars, leading size-1 dims, then
/// stretching of size-1 dims).
ir::Value* broadcastValue(TraceState& s, ir::Value* v, const ir::Shape& target, const SrcLoc& loc,
                          const std::string& what) {
  const ir::Shape& sh = v->type().shape();
  if (sh == target) return v;
  if (target.empty()) fail(loc, fmt::format("{}: cannot broadcast shape {} to a scalar", what, shapeName(sh)));
  if (sh.empty()) return s.builder->splat(v, target);
  if (sh.size() > target.size())
    fail(loc, fmt::format("{}: cannot broadcast shape {} to {}", what, shapeName(sh), shapeName(target)));
  size_t off = target.size() - sh.size();
  for (size_t i = 0; i < sh.size(); ++i)
    if (sh[i] != 1 && sh[i] != target[i + off])
      fail(loc, fmt::format("{}: cannot broadcast shape {} to {}", what, shapeName(sh), shapeName(target)));
  while (v->type().rank() < static_cast<int>(target.size())) v = s.builder->expandDims(v, 0);
  if (v->type().shape() != target) v = s.builder->broadcast(v, target);
  return v;
}

/// A literal materialised as a constant of type `t` (scalar or tile).
ir::Value* literal(TraceState& s, const Operand& o, const ir::Type& t, const SrcLoc& loc, const std::string& what) {
  DType d = t.dtype();
  if (o.kind() == Operand::Kind::Float) {
    if (!isFloat(d))
      fail(loc, fmt::format("{}: floating literal {} next to an integer operand of type {}; convert the operand "
                            "with .to(ts::f32) or use an integer literal",
                            what, o.floatValue(), name(d)));
    // An fp8 constant holds the value it has: rounded as a cast would.
    if (isFp8(d)) return s.builder->constant(t, static_cast<double>(fp8Decode(d, fp8Encode(d, o.floatValue()))));
    return s.builder->constant(t, o.floatValue());
  }
  int64_t v = o.intValue();
  // An unsigned C++ literal above INT64_MAX (its bits read negative).
  const bool huge = o.unsignedLiteral() && v < 0;
  if (isFp8(d)) {
    double x = huge ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v);
    return s.builder->constant(t, static_cast<double>(fp8Decode(d, fp8Encode(d, x))));
  }
  if (isFloat(d))
    return s.builder->constant(t, huge ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v));
  bool fits = true;
  switch (d) {
    case DType::I1: fits = v == 0 || v == 1; break;
    case DType::I8: fits = v >= INT8_MIN && v <= INT8_MAX; break;
    case DType::I16: fits = v >= INT16_MIN && v <= INT16_MAX; break;
    case DType::I32: fits = v >= INT32_MIN && v <= INT32_MAX; break;
    case DType::I64: fits = !huge; break;
    case DType::U8: fits = v >= 0 && v <= UINT8_MAX; break;
    case DType::U16: fits = v >= 0 && v <= UINT16_MAX; break;
    case DType::U32: fits = v >= 0 && v <= UINT32_MAX; break;
    case DType::U64: fits = v >= 0 || huge; break;  // the bits, as the IR holds u64 constants
    default: break;
  }
  if (!fits)
    fail(loc, fmt::format("{}: integer literal {} does not fit the operand type {}", what,
                          huge ? std::to_string(static_cast<uint64_t>(v)) : std::to_string(v), name(d)));
  return s.builder->constant(t, v);
}

namespace {

/// The dtype two handles promote to (TYPE RULES in DSL.h).
DType promote(DType a, DType b, const SrcLoc& loc, const std::string& what) {
  if (a == b) return a;
  if (isFloat(a) != isFloat(b)) {
    DType fl = isFloat(a) ? a : b;
    fail(loc, fmt::format("{}: cannot mix {} and {} operands; convert explicitly, e.g. x.to(ts::{})", what, name(a),
                          name(b), name(fl)));
  }
  if (isFloat(a)) {
    if (bitWidth(a) == bitWidth(b)) return DType::F32;  // f16 with bf16
    return bitWidth(a) > bitWidth(b) ? a : b;
  }
  if (a == DType::I1 || b == DType::I1)
    fail(loc, fmt::format("{}: cannot mix i1 (boolean) with {}; convert explicitly, e.g. x.to(ts::{})", what,
                          name(a == DType::I1 ? b : a), name(a == DType::I1 ? b : a)));
  if (isUnsigned(a) != isUnsigned(b)) {
    DType u = isUnsigned(a) ? a : b;
    fail(loc, fmt::format("{}: cannot mix signed {} and unsigned {} operands (their comparisons, divisions and "
                          "shifts differ); convert one explicitly, e.g. x.to(ts::{}) or x.bitcast(ts::{})",
                          what, name(isUnsigned(a) ? b : a), name(u), name(u), name(u)));
  }
  return bitWidth(a) > bitWidth(b) ? a : b;
}

}  // namespace

ir::Value* castTo(TraceState& s, ir::Value* v, DType d) { return v->type().dtype() == d ? v : s.builder->cast(v, d); }

/// Two numeric operands (at least one a handle) promoted and broadcast to one
/// type. Returns the IR values.
std::pair<ir::Value*, ir::Value*> unify(TraceState& s, const Operand& a, const Operand& b, const SrcLoc& loc,
                                        const std::string& what) {
  if (!a.isHandle() && !b.isHandle())
    fail(loc, fmt::format("{}: needs at least one tensor operand (got {} and {})", what, a.str(), b.str()));
  ir::Value* va = a.isHandle() ? use(a.tensor(), loc) : nullptr;
  ir::Value* vb = b.isHandle() ? use(b.tensor(), loc) : nullptr;
  for (ir::Value* v : {va, vb})
    if (v && !v->type().isNumeric())
      fail(loc, fmt::format("{}: operand of type {} is not a number", what, typeStr(v->type())));
  for (ir::Value* v : {va, vb})
    if (v && isFp8(v->type().dtype()))
      fail(loc, fmt::format("{}: {} is an 8-bit storage float; convert it first, e.g. x.to(ts::f32)", what,
                            typeStr(v->type())));
  DType d = va && vb ? promote(va->type().dtype(), vb->type().dtype(), loc, what) : (va ? va : vb)->type().dtype();
  ir::Shape shape =
      va && vb ? broadcastShapes(va->type().shape(), vb->type().shape(), loc, what) : (va ? va : vb)->type().shape();
  ir::Type t = ir::Type::scalar(d).withShape(shape);
  auto make = [&](const Operand& o, ir::Value* v) {
    if (!v) return literal(s, o, t, loc, what);
    return broadcastValue(s, castTo(s, v, d), shape, loc, what);
  };
  ir::Value* ra = make(a, va);
  ir::Value* rb = make(b, vb);
  return {ra, rb};
}

}  // namespace dsl
}  // namespace tessera

#include "tessera/ir/analysis/UniformSplit.h"

#include <variant>

namespace tessera::ir {

namespace {

using Split = std::optional<UniformSplit>;

// Bounds and coefficients stay below 2^62 in magnitude, so sums and the
// checks of products below never overflow int64.
constexpr int64_t kLimit = int64_t{1} << 62;

bool small(__int128 x) { return x > -kLimit && x < kLimit; }

// A scalar is the same in every thread, except the element arguments of a
// reduce or scan combiner (and what is computed from them there).
bool uniformScalar(const ir::Value* v) {
  for (const ir::Block* b = v->ownerBlock(); b;) {
    const ir::Op* owner = b->parentOp();
    if (!owner) return true;
    if (owner->code() == OpCode::Reduce || owner->code() == OpCode::Scan) return false;
    b = owner->parent();
  }
  return true;
}

std::optional<int64_t> constantOf(const ir::Value* v) {
  const ir::Op* op = v->definingOp();
  if (!op) return std::nullopt;
  if (op->code() == OpCode::Constant) {
    if (auto* i = std::get_if<int64_t>(&op->attrs().at("value"))) return *i;
    return std::nullopt;
  }
  if (op->code() == OpCode::Splat) return constantOf(op->operand(0));
  return std::nullopt;
}

Split uniformOnly(int64_t c) {
  UniformSplit s;
  s.constant = c;
  return s;
}

Split add(Split a, const Split& b, int64_t sign) {
  if (!a || !b) return std::nullopt;
  if (a->base && b->base) return std::nullopt;
  if (b->base) a->base = b->base;
  for (auto [v, c] : b->terms) a->terms.emplace_back(v, sign * c);
  __int128 k = __int128{a->constant} + sign * __int128{b->constant};
  __int128 lo = __int128{a->lo} + (sign > 0 ? __int128{b->lo} : -__int128{b->hi});
  __int128 hi = __int128{a->hi} + (sign > 0 ? __int128{b->hi} : -__int128{b->lo});
  if (!small(k) || !small(lo) || !small(hi)) return std::nullopt;
  a->constant = static_cast<int64_t>(k);
  a->lo = static_cast<int64_t>(lo);
  a->hi = static_cast<int64_t>(hi);
  return a;
}

Split scale(Split a, int64_t c) {
  if (!a || a->base) return std::nullopt;
  for (auto& t : a->terms) {
    __int128 x = __int128{t.second} * c;
    if (!small(x)) return std::nullopt;
    t.second = static_cast<int64_t>(x);
  }
  __int128 k = __int128{a->constant} * c, lo = __int128{a->lo} * c, hi = __int128{a->hi} * c;
  if (!small(k) || !small(lo) || !small(hi)) return std::nullopt;
  a->constant = static_cast<int64_t>(k);
  a->lo = static_cast<int64_t>(c >= 0 ? lo : hi);
  a->hi = static_cast<int64_t>(c >= 0 ? hi : lo);
  return a;
}

// A split with no uniform terms: all of it is a known range.
bool rangeOnly(const Split& s) { return s && !s->base && s->terms.empty(); }

Split split(const ir::Value* v, int depth);

// div / rem / shr / and of a value by a constant: a range of its own, with
// no uniform part left (a uniform part of unknown sign would leave the
// result's range unknown).
Split rangeOp(const ir::Op& op, int depth) {
  std::optional<int64_t> c = constantOf(op.operand(1));
  if (!c) return std::nullopt;
  if (op.code() == OpCode::And) {
    if (*c < 0) return std::nullopt;
    UniformSplit s;
    s.hi = *c;  // x & m lies in [0, m] for m >= 0, whatever x is
    return s;
  }
  Split a = split(op.operand(0), depth + 1);
  if (!rangeOnly(a)) return std::nullopt;
  const int64_t lo = a->constant + a->lo, hi = a->constant + a->hi;
  if (lo < 0) return std::nullopt;
  UniformSplit s;
  switch (op.code()) {
    case OpCode::Div:
      if (*c <= 0) return std::nullopt;
      s.lo = lo / *c;
      s.hi = hi / *c;
      return s;
    case OpCode::Rem:
      if (*c <= 0) return std::nullopt;
      s.hi = std::min(hi, *c - 1);
      if (hi < *c) s.lo = lo;  // no wrap: the values themselves
      return s;
    case OpCode::Shr:
      if (*c < 0 || *c > 62) return std::nullopt;
      s.lo = lo >> *c;
      s.hi = hi >> *c;
      return s;
    default: return std::nullopt;
  }
}

Split split(const ir::Value* v, int depth) {
  // Offset expressions are short; the bound keeps pathological IR cheap.
  if (depth > 64) return std::nullopt;
  const ir::Type& t = v->type();
  if (t.isScalar()) {
    if (!t.isIntLike() || t.dtype() == DType::I1) return std::nullopt;
    if (std::optional<int64_t> c = constantOf(v)) return uniformOnly(*c);
    if (!uniformScalar(v)) return std::nullopt;
    UniformSplit s;
    s.terms.emplace_back(v, 1);
    return s;
  }
  const ir::Op* op = v->definingOp();
  if (t.isPointer()) {
    // A scalar pointer: a uniform base, offset by uniform scalars.
    if (op && op->code() == OpCode::PtrAdd && op->operand(0)->type().dtype() == t.dtype())
      return add(split(op->operand(0), depth + 1), split(op->operand(1), depth + 1), 1);
    if (!uniformScalar(v)) return std::nullopt;
    UniformSplit s;
    s.base = v;
    return s;
  }
  if (!op || !t.isTile()) return std::nullopt;  // tile block arguments: loop-carried values
  const bool ptrs = t.isPointerLike();
  if (!ptrs && (!t.isIntLike() || t.dtype() == DType::I1)) return std::nullopt;
  switch (op->code()) {
    case OpCode::Splat: {
      const ir::Value* s = op->operand(0);
      if (ptrs ? !s->type().isPointer() : !s->type().isScalar()) return std::nullopt;
      return split(s, depth + 1);
    }
    case OpCode::Constant:
      if (ptrs) return std::nullopt;
      if (std::optional<int64_t> c = constantOf(v)) return uniformOnly(*c);
      return std::nullopt;
    case OpCode::Arange: {
      UniformSplit s;
      s.constant = op->intAttr("start");
      s.hi = op->intAttr("end") - op->intAttr("start") - 1;
      return s;
    }
    case OpCode::Broadcast:
    case OpCode::ExpandDims:
    case OpCode::Reshape: return split(op->operand(0), depth + 1);
    case OpCode::PtrAdd:
      // Offsets count elements of the pointee, the same type along the chain.
      if (op->operand(0)->type().dtype() != t.dtype()) return std::nullopt;
      return add(split(op->operand(0), depth + 1), split(op->operand(1), depth + 1), 1);
    case OpCode::Add: return add(split(op->operand(0), depth + 1), split(op->operand(1), depth + 1), 1);
    case OpCode::Sub: return add(split(op->operand(0), depth + 1), split(op->operand(1), depth + 1), -1);
    case OpCode::Mul: {
      for (int i = 0; i < 2; ++i)
        if (std::optional<int64_t> c = constantOf(op->operand(1 - i)))
          return scale(split(op->operand(i), depth + 1), *c);
      return std::nullopt;
    }
    case OpCode::Shl: {
      std::optional<int64_t> c = constantOf(op->operand(1));
      if (!c || *c < 0 || *c > 32) return std::nullopt;
      return scale(split(op->operand(0), depth + 1), int64_t{1} << *c);
    }
    case OpCode::Cast: {
      // Widening integer casts; the values are the same (no wrap, above).
      const ir::Value* src = op->operand(0);
      if (!src->type().isIntLike() || src->type().dtype() == DType::I1 ||
          bitWidth(t.dtype()) < bitWidth(src->type().dtype()))
        return std::nullopt;
      return split(src, depth + 1);
    }
    case OpCode::Div:
    case OpCode::Rem:
    case OpCode::Shr:
    case OpCode::And: return rangeOp(*op, depth);
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<UniformSplit> splitUniform(const ir::Value* v) {
  Split s = split(v, 0);
  if (s && v->type().isPointerLike() && !s->base) return std::nullopt;
  return s;
}

}  // namespace tessera::ir

// Elementwise ops: the handles' casts (Tensor::to, .T()), the arithmetic,
// comparison and logical operators, grid and tile construction, where and
// the math functions.
#include "DslImpl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessera {
namespace dsl {

namespace {

enum class Req { Any, Int, IntOrBool, Float };

Tensor binary(ir::OpCode code, const Operand& a, const Operand& b, const char* spelling, Req req) {
  const SrcLoc& loc = a.isHandle() || !b.isHandle() ? a.loc() : b.loc();
  TraceState& s = at(loc);
  std::string what = fmt::format("operator{}", spelling);
  if (code == ir::OpCode::Pow) what = "pow";
  if (code == ir::OpCode::Min) what = "minimum";
  if (code == ir::OpCode::Max) what = "maximum";
  if (code == ir::OpCode::MulHi) what = "mulhi";
  bool pa = a.isHandle() && use(a.tensor(), loc)->type().isPointerLike();
  bool pb = b.isHandle() && use(b.tensor(), loc)->type().isPointerLike();
  if (pa || pb) {
    if (code == ir::OpCode::Add && pa && !pb) return pointerArith(s, a, b, false, loc, what);
    if (code == ir::OpCode::Add && pb && !pa) return pointerArith(s, b, a, false, loc, what);
    if (code == ir::OpCode::Sub && pa && !pb) return pointerArith(s, a, b, true, loc, what);
    fail(loc, fmt::format("{}: not defined for {} and {} (pointers support only ptr + int and ptr - int)", what,
                          a.str(), b.str()));
  }
  auto [va, vb] = unify(s, a, b, loc, what);
  DType d = va->type().dtype();
  switch (req) {
    case Req::Any: break;
    case Req::Int:
      if (!isInteger(d) || d == DType::I1)
        fail(loc, fmt::format("{}: needs integer operands, got {}", what, typeStr(va->type())));
      break;
    case Req::IntOrBool:
      if (!isInteger(d)) fail(loc, fmt::format("{}: needs integer or i1 operands, got {}", what, typeStr(va->type())));
      break;
    case Req::Float:
      if (!isFloat(d))
        fail(loc,
             fmt::format("{}: needs float operands, got {}; convert with .to(ts::f32)", what, typeStr(va->type())));
      break;
  }
  if (req == Req::Any && d == DType::I1 && code != ir::OpCode::Min && code != ir::OpCode::Max)
    fail(loc, fmt::format("{}: arithmetic on i1 (boolean) values; use & | ^ or convert with .to(ts::i32)", what));
  return wrap(s.builder->binary(code, va, vb));
}

Tensor compare(const char* pred, const Operand& a, const Operand& b, const char* spelling) {
  const SrcLoc& loc = a.isHandle() || !b.isHandle() ? a.loc() : b.loc();
  TraceState& s = at(loc);
  auto [va, vb] = unify(s, a, b, loc, fmt::format("operator{}", spelling));
  return wrap(s.builder->cmp(pred, va, vb));
}

Tensor unaryMath(ir::OpCode code, const Tensor& x, const SrcLoc& loc, const char* what, bool intsOk) {
  TraceState& s = at(loc);
  ir::Value* v = use(x, loc);
  if (!v->type().isNumeric())
    fail(loc, fmt::format("{}: operand of type {} is not a number", what, typeStr(v->type())));
  if (!intsOk && !v->type().isFloatLike())
    fail(loc, fmt::format("{}: needs a float operand, got {}; convert with .to(ts::f32)", what, typeStr(v->type())));
  if (intsOk && v->type().dtype() == DType::I1) fail(loc, fmt::format("{}: not defined on i1 (boolean) values", what));
  return wrap(s.builder->unary(code, v));
}

}  // namespace

}  // namespace dsl

// ---- handles ---------------------------------------------------------------

const ir::Type& Tensor::type() const {
  if (!v_) throw DslError("error: use of an empty ts::Tensor handle (default-constructed, never assigned)");
  return v_->type();
}

Tensor Tensor::bitcast(DType d, SrcLoc loc) const {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(*this, loc);
  const ir::Type& t = v->type();
  if (!t.isNumeric()) dsl::fail(loc, fmt::format(".bitcast({}): cannot reinterpret {}", name(d), t.str()));
  if (isMx(d))
    dsl::fail(loc, fmt::format(".bitcast({}): {} is a host format; a kernel keeps its codes as u8 (decode them with "
                               "ts::mx_decode, docs/dtypes.md)",
                               name(d), name(d)));
  if (t.dtype() == DType::I1 || d == DType::I1)
    dsl::fail(loc, fmt::format(".bitcast({}): i1 has no bit layout (from {})", name(d), t.str()));
  if (bitWidth(t.dtype()) != bitWidth(d))
    dsl::fail(loc, fmt::format(".bitcast({}): {} has {}-bit elements, {} has {} bits; bitcast keeps the width", name(d),
                               t.str(), bitWidth(t.dtype()), name(d), bitWidth(d)));
  if (t.dtype() == d) return *this;
  return dsl::wrap(s.builder->bitcast(v, d));
}

Tensor Tensor::to(DType d, SrcLoc loc) const {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(*this, loc);
  if (!v->type().isNumeric()) dsl::fail(loc, fmt::format(".to({}): cannot convert {}", name(d), v->type().str()));
  if (isMx(d))
    dsl::fail(loc, fmt::format(".to({}): {} is a host format; a kernel keeps its codes as u8 (encode on the host "
                               "with mxEncode, or round in the kernel as examples/mx_quantize.cpp does)",
                               name(d), name(d)));
  return dsl::wrap(dsl::castTo(s, v, d));
}

Tensor Tensor::T(SrcLoc loc) const {
  ir::Value* v = dsl::use(*this, loc);
  if (v->type().rank() != 2) dsl::fail(loc, fmt::format(".T(): needs a 2-D tile, got {}", v->type().str()));
  return transpose(*this, {1, 0}, loc);
}

std::string Operand::str() const {
  switch (kind_) {
    case Kind::None: return "nothing";
    case Kind::Handle: return t_.valid() ? t_.raw()->type().str() : std::string("an empty handle");
    case Kind::Int: return fmt::format("integer literal {}", i_);
    case Kind::Float: return fmt::format("floating literal {}", f_);
  }
  return "?";
}

// ---- operators -------------------------------------------------------------
using dsl::Req;
using ir::OpCode;

Tensor operator+(const Operand& a, const Operand& b) { return dsl::binary(OpCode::Add, a, b, "+", Req::Any); }
Tensor operator-(const Operand& a, const Operand& b) { return dsl::binary(OpCode::Sub, a, b, "-", Req::Any); }
Tensor operator*(const Operand& a, const Operand& b) { return dsl::binary(OpCode::Mul, a, b, "*", Req::Any); }
Tensor operator/(const Operand& a, const Operand& b) { return dsl::binary(OpCode::Div, a, b, "/", Req::Any); }
Tensor operator%(const Operand& a, const Operand& b) { return dsl::binary(OpCode::Rem, a, b, "%", Req::Any); }
Tensor operator&(const Operand& a, const Operand& b) { return dsl::binary(OpCode::And, a, b, "&", Req::IntOrBool); }
Tensor operator|(const Operand& a, const Operand& b) { return dsl::binary(OpCode::Or, a, b, "|", Req::IntOrBool); }
Tensor operator^(const Operand& a, const Operand& b) { return dsl::binary(OpCode::Xor, a, b, "^", Req::IntOrBool); }
Tensor operator<<(const Operand& a, const Operand& b) { return dsl::binary(OpCode::Shl, a, b, "<<", Req::Int); }
Tensor operator>>(const Operand& a, const Operand& b) { return dsl::binary(OpCode::Shr, a, b, ">>", Req::Int); }
Tensor operator<(const Operand& a, const Operand& b) { return dsl::compare("lt", a, b, "<"); }
Tensor operator<=(const Operand& a, const Operand& b) { return dsl::compare("le", a, b, "<="); }
Tensor operator>(const Operand& a, const Operand& b) { return dsl::compare("gt", a, b, ">"); }
Tensor operator>=(const Operand& a, const Operand& b) { return dsl::compare("ge", a, b, ">="); }
Tensor operator==(const Operand& a, const Operand& b) { return dsl::compare("eq", a, b, "=="); }
Tensor operator!=(const Operand& a, const Operand& b) { return dsl::compare("ne", a, b, "!="); }

Tensor operator-(const Operand& a) {
  if (!a.isHandle()) dsl::fail(a.loc(), "unary -: needs a tensor operand");
  return dsl::unaryMath(OpCode::Neg, a.tensor(), a.loc(), "unary -", true);
}
Tensor operator~(const Operand& a) {
  dsl::TraceState& s = dsl::at(a.loc());
  if (!a.isHandle()) dsl::fail(a.loc(), "operator~: needs a tensor operand");
  ir::Value* v = dsl::use(a.tensor(), a.loc());
  if (!v->type().isIntLike())
    dsl::fail(a.loc(), fmt::format("operator~: needs an integer or i1 operand, got {}", v->type().str()));
  return dsl::wrap(s.builder->unary(OpCode::Not, v));
}
Tensor operator!(const Operand& a) {
  dsl::TraceState& s = dsl::at(a.loc());
  if (!a.isHandle()) dsl::fail(a.loc(), "operator!: needs a tensor operand");
  ir::Value* v = dsl::use(a.tensor(), a.loc());
  if (!v->type().isIntLike())
    dsl::fail(a.loc(), fmt::format("operator!: needs an integer or i1 operand, got {}; compare explicitly, e.g. x == 0",
                                   v->type().str()));
  if (v->type().dtype() == DType::I1) return dsl::wrap(s.builder->unary(OpCode::Not, v));
  return dsl::compare("eq", Operand(a.tensor(), a.loc()), Operand(0, a.loc()), "!");
}
Tensor& operator+=(Tensor& a, const Operand& b) { return a = Operand(a, b.loc()) + b; }
Tensor& operator-=(Tensor& a, const Operand& b) { return a = Operand(a, b.loc()) - b; }
Tensor& operator*=(Tensor& a, const Operand& b) { return a = Operand(a, b.loc()) * b; }
Tensor& operator/=(Tensor& a, const Operand& b) { return a = Operand(a, b.loc()) / b; }

// ---- grid and tile construction ---------------------------------------------

Tensor program_id(int axis, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  if (axis < 0 || axis > 2) dsl::fail(loc, fmt::format("program_id: grid axis {} is not 0, 1 or 2", axis));
  return dsl::wrap(s.builder->programId(axis));
}
Tensor num_programs(int axis, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  if (axis < 0 || axis > 2) dsl::fail(loc, fmt::format("num_programs: grid axis {} is not 0, 1 or 2", axis));
  return dsl::wrap(s.builder->numPrograms(axis));
}
Tensor cluster_rank(SrcLoc loc) { return dsl::wrap(dsl::at(loc).builder->clusterRank()); }
Tensor cluster_size(SrcLoc loc) { return dsl::wrap(dsl::at(loc).builder->clusterSize()); }
Tensor cancel_program(SrcLoc loc) { return dsl::wrap(dsl::at(loc).builder->cancelProgram()); }
Tensor arange(int64_t n, SrcLoc loc) { return arange(0, n, loc); }
Tensor arange(int64_t start, int64_t end, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  if (end <= start) dsl::fail(loc, fmt::format("arange: end {} must be greater than start {}", end, start));
  if (start < INT32_MIN || end - 1 > INT32_MAX)
    dsl::fail(loc, fmt::format("arange: [{}, {}) does not fit i32", start, end));
  dsl::checkShape({end - start}, loc, "arange");
  return dsl::wrap(s.builder->arange(start, end));
}
Tensor zeros(const ir::Shape& shape, DType dtype, SrcLoc loc) { return full(shape, 0.0, dtype, loc); }
Tensor full(const ir::Shape& shape, double value, DType dtype, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  dsl::checkShape(shape, loc, "full");
  ir::Type t = ir::Type::scalar(dtype).withShape(shape);
  if (isFloat(dtype)) return dsl::wrap(s.builder->constant(t, value));
  if (value != std::trunc(value) || std::isnan(value))
    dsl::fail(loc, fmt::format("full: value {} is not an integer but the dtype is {}", value, name(dtype)));
  return dsl::wrap(dsl::literal(s, Operand(static_cast<int64_t>(value), loc), t, loc, "full"));
}
Tensor splat(const Tensor& x, const ir::Shape& shape, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(x, loc);
  if (!v->type().isScalar() && !v->type().isPointer())
    dsl::fail(loc, fmt::format("splat: needs a scalar or pointer, got {}", v->type().str()));
  if (shape.empty()) dsl::fail(loc, "splat: the shape is empty");
  dsl::checkShape(shape, loc, "splat");
  return dsl::wrap(s.builder->splat(v, shape), x.readonly());
}
Tensor broadcast_to(const Tensor& x, const ir::Shape& shape, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(x, loc);
  if (v->type().isBuffer()) dsl::fail(loc, "broadcast_to: cannot broadcast a buffer");
  dsl::checkShape(shape, loc, "broadcast_to");
  return dsl::wrap(dsl::broadcastValue(s, v, shape, loc, "broadcast_to"), x.readonly());
}
Tensor expand_dims(const Tensor& x, int axis, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(x, loc);
  if (!v->type().isTile()) dsl::fail(loc, fmt::format("expand_dims: needs a tile, got {}", v->type().str()));
  int r = v->type().rank();
  if (axis < -(r + 1) || axis > r)
    dsl::fail(loc, fmt::format("expand_dims: axis {} is out of range for a tile of rank {}", axis, r));
  if (axis < 0) axis += r + 1;
  if (r + 1 > ir::kMaxTileRank)
    dsl::fail(loc, fmt::format("expand_dims: result rank {} exceeds the maximum of {}", r + 1, ir::kMaxTileRank));
  return dsl::wrap(s.builder->expandDims(v, axis), x.readonly());
}
Tensor reshape(const Tensor& x, const ir::Shape& shape, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(x, loc);
  if (!v->type().isTile()) dsl::fail(loc, fmt::format("reshape: needs a tile, got {}", v->type().str()));
  if (shape.empty()) dsl::fail(loc, "reshape: the new shape is empty");
  dsl::checkShape(shape, loc, "reshape");
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != v->type().numElements())
    dsl::fail(loc, fmt::format("reshape: cannot reshape {} ({} elements) to [{}] ({} elements)",
                               dsl::shapeName(v->type().shape()), v->type().numElements(), ir::shapeStr(shape), n));
  return dsl::wrap(s.builder->reshape(v, shape), x.readonly());
}
Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(x, loc);
  if (!v->type().isTile()) dsl::fail(loc, fmt::format("transpose: needs a tile, got {}", v->type().str()));
  int r = v->type().rank();
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int>(perm.size()) == r;
  for (int i = 0; ok && i < r; ++i) ok = sorted[static_cast<size_t>(i)] == i;
  if (!ok) {
    std::string p;
    for (size_t i = 0; i < perm.size(); ++i) {
      if (i) p += ", ";
      p += std::to_string(perm[i]);
    }
    dsl::fail(loc, fmt::format("transpose: [{}] is not a permutation of the {} axes of {}", p, r, v->type().str()));
  }
  return dsl::wrap(s.builder->transpose(v, perm), x.readonly());
}

Tensor gather(const Tensor& x, const Tensor& index, int axis, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(x, loc, "gathered tile");
  ir::Value* idx = dsl::use(index, loc, "index");
  const ir::Type& t = v->type();
  const ir::Type& it = idx->type();
  if (!t.isTile() || !t.isNumeric())
    dsl::fail(loc, fmt::format("gather: needs a tile of numbers to gather from, got {}", dsl::typeStr(t)));
  if (!it.isTile() || !it.isIntLike() || it.dtype() == DType::I1)
    dsl::fail(loc, fmt::format("gather: the index must be a tile of integers, got {}", dsl::typeStr(it)));
  int r = t.rank();
  if (axis < -r || axis >= r)
    dsl::fail(loc, fmt::format("gather: axis {} is out of range for a tile of rank {}", axis, r));
  if (axis < 0) axis += r;
  bool ok = it.rank() == r;
  for (int d = 0; ok && d < r; ++d) ok = d == axis || it.shape()[d] == t.shape()[d];
  if (!ok)
    dsl::fail(loc, fmt::format("gather: the index's shape {} must equal the source's {} in every dim but axis {}",
                               dsl::shapeName(it.shape()), dsl::shapeName(t.shape()), axis));
  return dsl::wrap(s.builder->gather(v, idx, axis));
}
Tensor join(const Tensor& a, const Tensor& b, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* va = dsl::use(a, loc, "first operand");
  ir::Value* vb = dsl::use(b, loc, "second operand");
  const ir::Type& t = va->type();
  if (!t.isTile() || !t.isNumeric())
    dsl::fail(loc, fmt::format("join: needs tiles of numbers, got {}", dsl::typeStr(t)));
  if (vb->type() != t)
    dsl::fail(loc, fmt::format("join: the operands must have one type, got {} and {}", dsl::typeStr(t),
                               dsl::typeStr(vb->type())));
  if (t.rank() + 1 > ir::kMaxTileRank)
    dsl::fail(loc, fmt::format("join: {} would give a tile of rank {}, above the maximum of {}", dsl::typeStr(t),
                               t.rank() + 1, ir::kMaxTileRank));
  return dsl::wrap(s.builder->join(va, vb));
}
std::pair<Tensor, Tensor> split(const Tensor& x, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(x, loc, "split tile");
  const ir::Type& t = v->type();
  if (!t.isTile() || !t.isNumeric())
    dsl::fail(loc, fmt::format("split: needs a tile of numbers, got {}", dsl::typeStr(t)));
  if (t.rank() < 2 || t.shape().back() != 2)
    dsl::fail(loc, fmt::format("split: needs a tile of rank 2 to 4 whose last dim is 2, got {}", dsl::typeStr(t)));
  auto [lo, hi] = s.builder->split(v);
  return {dsl::wrap(lo), dsl::wrap(hi)};
}

// ---- elementwise -------------------------------------------------------------

Tensor where(const Tensor& cond, const Operand& a, const Operand& b, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* c = dsl::use(cond, loc, "condition");
  if (!c->type().isNumeric() || c->type().dtype() != DType::I1)
    dsl::fail(loc, fmt::format("where: the condition must be i1 (a comparison), got {}", c->type().str()));
  bool pa = a.isHandle() && dsl::use(a.tensor(), loc)->type().isPointerLike();
  bool pb = b.isHandle() && dsl::use(b.tensor(), loc)->type().isPointerLike();
  ir::Value *va, *vb;
  if (pa || pb) {
    if (!(pa && pb) || a.tensor().raw()->type().element() != b.tensor().raw()->type().element())
      dsl::fail(loc, fmt::format("where: cannot select between {} and {}", a.str(), b.str()));
    va = a.tensor().raw();
    vb = b.tensor().raw();
    ir::Shape sh = dsl::broadcastShapes(va->type().shape(), vb->type().shape(), loc, "where");
    va = dsl::broadcastValue(s, va, sh, loc, "where");
    vb = dsl::broadcastValue(s, vb, sh, loc, "where");
  } else if (!a.isHandle() && !b.isHandle()) {
    // Two literals (a one-hot, a 0/1 mask as numbers): they take the
    // condition's shape, f32 if either is a float, else i32 -- what the
    // same literals next to a tile would give.
    if (a.none() || b.none()) dsl::fail(loc, "where: missing value");
    const DType d = a.kind() == Operand::Kind::Float || b.kind() == Operand::Kind::Float ? DType::F32 : DType::I32;
    const ir::Type t = ir::Type::scalar(d).withShape(c->type().shape());
    va = dsl::literal(s, a, t, loc, "where");
    vb = dsl::literal(s, b, t, loc, "where");
  } else {
    std::tie(va, vb) = dsl::unify(s, a, b, loc, "where");
  }
  ir::Shape sh = dsl::broadcastShapes(c->type().shape(), va->type().shape(), loc, "where");
  c = dsl::broadcastValue(s, c, sh, loc, "where");
  va = dsl::broadcastValue(s, va, sh, loc, "where");
  vb = dsl::broadcastValue(s, vb, sh, loc, "where");
  bool ro = (pa && a.tensor().readonly()) || (pb && b.tensor().readonly());
  return dsl::wrap(s.builder->select(c, va, vb), ro);
}

Tensor exp(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Exp, x, loc, "exp", false); }
Tensor exp2(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Exp2, x, loc, "exp2", false); }
Tensor log(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Log, x, loc, "log", false); }
Tensor log2(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Log2, x, loc, "log2", false); }
Tensor sqrt(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Sqrt, x, loc, "sqrt", false); }
Tensor rsqrt(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Rsqrt, x, loc, "rsqrt", false); }
Tensor tanh(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Tanh, x, loc, "tanh", false); }
Tensor erf(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Erf, x, loc, "erf", false); }
Tensor floor(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Floor, x, loc, "floor", false); }
Tensor ceil(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Ceil, x, loc, "ceil", false); }
Tensor trunc(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Trunc, x, loc, "trunc", false); }
Tensor round(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Round, x, loc, "round", false); }
Tensor rint(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Round, x, loc, "rint", false); }
Tensor sin(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Sin, x, loc, "sin", false); }
Tensor cos(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Cos, x, loc, "cos", false); }
Tensor sigmoid(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Sigmoid, x, loc, "sigmoid", false); }
Tensor log1p(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Log1p, x, loc, "log1p", false); }
Tensor expm1(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Expm1, x, loc, "expm1", false); }
Tensor abs(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Abs, x, loc, "abs", true); }

namespace {
// Elementwise functions report the function's own call site, not the operands'.
Operand withLoc(const Operand& o, const SrcLoc& loc) {
  switch (o.kind()) {
    case Operand::Kind::Handle: return Operand(o.tensor(), loc);
    case Operand::Kind::Int:
      return o.unsignedLiteral() ? Operand(static_cast<uint64_t>(o.intValue()), loc) : Operand(o.intValue(), loc);
    case Operand::Kind::Float: return Operand(o.floatValue(), loc);
    default: return o;
  }
}
}  // namespace

Tensor minimum(const Operand& a, const Operand& b, SrcLoc loc) {
  return dsl::binary(OpCode::Min, withLoc(a, loc), withLoc(b, loc), "", Req::Any);
}
Tensor maximum(const Operand& a, const Operand& b, SrcLoc loc) {
  return dsl::binary(OpCode::Max, withLoc(a, loc), withLoc(b, loc), "", Req::Any);
}
Tensor pow(const Operand& a, const Operand& b, SrcLoc loc) {
  return dsl::binary(OpCode::Pow, withLoc(a, loc), withLoc(b, loc), "", Req::Float);
}
Tensor mulhi(const Operand& a, const Operand& b, SrcLoc loc) {
  return dsl::binary(OpCode::MulHi, withLoc(a, loc), withLoc(b, loc), "", Req::Int);
}
Tensor umulhi(const Operand& a, const Operand& b, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  for (const Operand* o : {&a, &b})
    if (o->isHandle() && dsl::use(o->tensor(), loc)->type().isPointerLike())
      dsl::fail(loc, fmt::format("umulhi: not defined for {} and {} (integer operands only)", a.str(), b.str()));
  auto [va, vb] = dsl::unify(s, withLoc(a, loc), withLoc(b, loc), loc, "umulhi");
  const DType d = va->type().dtype();
  if (!isInteger(d) || d == DType::I1)
    dsl::fail(loc, fmt::format("umulhi: needs integer operands, got {}", dsl::typeStr(va->type())));
  if (isUnsigned(d)) return dsl::wrap(s.builder->binary(OpCode::MulHi, va, vb));
  // Signed operands: the same bits as unsigned, and the result back.
  const DType u = bitWidth(d) == 8    ? DType::U8
                  : bitWidth(d) == 16 ? DType::U16
                  : bitWidth(d) == 32 ? DType::U32
                                      : DType::U64;
  ir::Value* r = s.builder->binary(OpCode::MulHi, s.builder->bitcast(va, u), s.builder->bitcast(vb, u));
  return dsl::wrap(s.builder->bitcast(r, d));
}
Tensor fma(const Operand& a, const Operand& b, const Operand& c, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  // Promote pairwise, then bring all three to one shape and dtype.
  auto [va, vb] = dsl::unify(s, withLoc(a, loc), withLoc(b, loc), loc, "fma");
  Tensor ta = dsl::wrap(va);
  auto [wa, vc] = dsl::unify(s, Operand(ta, loc), withLoc(c, loc), loc, "fma");
  if (!wa->type().isFloatLike())
    dsl::fail(loc, fmt::format("fma: needs float operands, got {}; convert with .to(ts::f32)", wa->type().str()));
  vb = dsl::broadcastValue(s, dsl::castTo(s, vb, wa->type().dtype()), wa->type().shape(), loc, "fma");
  return dsl::wrap(s.builder->fma(wa, vb, vc));
}

}  // namespace tessera

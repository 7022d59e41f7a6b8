// Tracing: every DSL call validates its operands (so user mistakes get a
// DslError at the user's line instead of a verifier message), sets the
// builder's location, and appends IR through ir::Builder.
#include "tessera/dsl/DSL.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "tessera/ir/Builder.h"
#include "tessera/ir/Verifier.h"

namespace tessera {
namespace dsl {

void fail(const SrcLoc& loc, const std::string& what) {
  throw DslError(fmt::format("{}:{}: error: {}", loc.file_name(), loc.line(), what));
}

namespace {

std::atomic<uint64_t> gNextTrace{1};

/// The state of the innermost trace on this thread.
struct TraceState {
  uint64_t id = 0;
  std::string name;
  std::unique_ptr<ir::Function> fn;
  ir::Builder root;
  ir::Builder* builder = nullptr;  // where ops go now (a loop or branch body)
  // Blocks whose values are visible at the insertion point: the kernel body
  // and every enclosing for/if body. A value owned by any other block was
  // defined inside a body that has ended.
  std::vector<const ir::Block*> scopes;
  TraceState* prev = nullptr;  // a trace started while another one runs
  // ts::for_pipelined bodies being traced, innermost last.
  struct Pipe {
    const ir::Block* body;
    int64_t stages;
    SrcLoc loc;
  };
  std::vector<Pipe> pipes;
  // Buffers made multi-buffered by stage_copy -> the stage_copy's location.
  std::vector<std::pair<const ir::Value*, SrcLoc>> staged;
};

thread_local TraceState* tCurrent = nullptr;

std::string typeStr(const ir::Type& t) { return t.str(); }

/// The active trace, with the builder positioned at `loc`.
TraceState& at(const SrcLoc& loc) {
  if (!tCurrent) fail(loc, "tessera DSL operation outside a ts::kernel() trace");
  ir::Location l;
  l.file = loc.file_name();
  l.line = loc.line();
  l.column = loc.column();
  tCurrent->builder->setLoc(std::move(l));
  return *tCurrent;
}

/// Checks that `t` may be used at the current point of the current trace.
ir::Value* use(const Tensor& t, const SrcLoc& loc, const char* what = "operand") {
  TraceState& s = at(loc);
  if (!t.valid()) fail(loc, fmt::format("{} is an empty handle (default-constructed ts::Tensor)", what));
  if (t.traceId() != s.id)
    fail(loc, fmt::format("{} belongs to another kernel trace; handles cannot cross kernels (tracing '{}')",
                          what, s.name));
  const ir::Block* owner = t.raw()->ownerBlock();
  if (std::find(s.scopes.begin(), s.scopes.end(), owner) == s.scopes.end())
    fail(loc, fmt::format("{} was defined inside a for_range / if_else body and is used after that body ended; "
                          "carry it out as a loop value or an if_else result",
                          what));
  return t.raw();
}

Tensor wrap(ir::Value* v, bool readonly = false) { return Tensor(v, tCurrent->id, readonly); }

void checkShape(const ir::Shape& shape, const SrcLoc& loc, const char* what) {
  if (shape.size() > static_cast<size_t>(ir::kMaxTileRank))
    fail(loc, fmt::format("{}: tile rank {} exceeds the maximum of {} (shape {})", what, shape.size(),
                          ir::kMaxTileRank, ir::shapeStr(shape)));
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
  if (target.empty())
    fail(loc, fmt::format("{}: cannot broadcast shape {} to a scalar", what, shapeName(sh)));
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
    return s.builder->constant(t, o.floatValue());
  }
  int64_t v = o.intValue();
  if (isFloat(d)) return s.builder->constant(t, static_cast<double>(v));
  bool fits = true;
  switch (d) {
    case DType::I1: fits = v == 0 || v == 1; break;
    case DType::I8: fits = v >= INT8_MIN && v <= INT8_MAX; break;
    case DType::I16: fits = v >= INT16_MIN && v <= INT16_MAX; break;
    case DType::I32: fits = v >= INT32_MIN && v <= INT32_MAX; break;
    default: break;
  }
  if (!fits) fail(loc, fmt::format("{}: integer literal {} does not fit the operand type {}", what, v, name(d)));
  return s.builder->constant(t, v);
}

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
  return bitWidth(a) > bitWidth(b) ? a : b;
}

ir::Value* castTo(TraceState& s, ir::Value* v, DType d) {
  return v->type().dtype() == d ? v : s.builder->cast(v, d);
}

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
  DType d = va && vb ? promote(va->type().dtype(), vb->type().dtype(), loc, what)
                     : (va ? va : vb)->type().dtype();
  ir::Shape shape = va && vb ? broadcastShapes(va->type().shape(), vb->type().shape(), loc, what)
                             : (va ? va : vb)->type().shape();
  ir::Type t = ir::Type::scalar(d).withShape(shape);
  auto make = [&](const Operand& o, ir::Value* v) {
    if (!v) return literal(s, o, t, loc, what);
    return broadcastValue(s, castTo(s, v, d), shape, loc, what);
  };
  ir::Value* ra = make(a, va);
  ir::Value* rb = make(b, vb);
  return {ra, rb};
}

/// ptr +/- integer offsets.
Tensor pointerArith(TraceState& s, const Operand& p, const Operand& off, bool negate, const SrcLoc& loc,
                    const std::string& what) {
  ir::Value* vp = use(p.tensor(), loc);
  bool ro = p.tensor().readonly();
  ir::Value* vo = nullptr;
  if (off.isHandle()) {
    vo = use(off.tensor(), loc);
    if (!vo->type().isIntLike() || vo->type().dtype() == DType::I1)
      fail(loc, fmt::format("{}: a pointer can only be offset by integers, not {}", what, typeStr(vo->type())));
  } else if (off.kind() != Operand::Kind::Int) {
    fail(loc, fmt::format("{}: a pointer can only be offset by integers, not {}", what, off.str()));
  }
  ir::Shape shape = vo ? broadcastShapes(vp->type().shape(), vo->type().shape(), loc, what) : vp->type().shape();
  if (!vo) {
    int64_t v = off.intValue();
    DType d = (v >= INT32_MIN && v <= INT32_MAX) ? DType::I32 : DType::I64;
    vo = s.builder->constant(ir::Type::scalar(d).withShape(shape), negate ? -v : v);
  } else {
    vo = broadcastValue(s, vo, shape, loc, what);
    if (negate) vo = s.builder->unary(ir::OpCode::Neg, vo);
  }
  vp = broadcastValue(s, vp, shape, loc, what);
  return wrap(s.builder->ptrAdd(vp, vo), ro);
}

enum class Req { Any, Int, IntOrBool, Float };

Tensor binary(ir::OpCode code, const Operand& a, const Operand& b, const char* spelling, Req req) {
  const SrcLoc& loc = a.isHandle() || !b.isHandle() ? a.loc() : b.loc();
  TraceState& s = at(loc);
  std::string what = fmt::format("operator{}", spelling);
  if (code == ir::OpCode::Pow) what = "pow";
  if (code == ir::OpCode::Min) what = "minimum";
  if (code == ir::OpCode::Max) what = "maximum";
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
        fail(loc, fmt::format("{}: needs float operands, got {}; convert with .to(ts::f32)", what, typeStr(va->type())));
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
  if (!v->type().isNumeric()) fail(loc, fmt::format("{}: operand of type {} is not a number", what, typeStr(v->type())));
  if (!intsOk && !v->type().isFloatLike())
    fail(loc, fmt::format("{}: needs a float operand, got {}; convert with .to(ts::f32)", what, typeStr(v->type())));
  if (intsOk && v->type().dtype() == DType::I1)
    fail(loc, fmt::format("{}: not defined on i1 (boolean) values", what));
  return wrap(s.builder->unary(code, v));
}

/// An i1 mask broadcast to `shape`; nullptr when absent.
ir::Value* maskFor(TraceState& s, const Operand& mask, const ir::Shape& shape, const SrcLoc& loc, const char* what) {
  if (mask.none()) return nullptr;
  if (!mask.isHandle())
    fail(loc, fmt::format("{}: the mask must be an i1 tensor (a comparison), not {}", what, mask.str()));
  ir::Value* m = use(mask.tensor(), loc, "mask");
  if (!m->type().isNumeric() || m->type().dtype() != DType::I1)
    fail(loc, fmt::format("{}: the mask must be i1 (e.g. offsets < n), got {}", what, typeStr(m->type())));
  const ir::Shape& ms = m->type().shape();
  ir::Shape r = ms.size() <= shape.size() ? shape : ms;
  bool ok = ms.size() <= shape.size();
  for (size_t i = 0; ok && i < ms.size(); ++i) {
    int64_t dm = ms[i], dp = shape[i + shape.size() - ms.size()];
    ok = dm == dp || dm == 1;
  }
  if (!ok)
    fail(loc, fmt::format("{}: mask shape {} does not match the pointer shape {}", what, shapeName(ms), shapeName(shape)));
  return broadcastValue(s, m, shape, loc, what);
}

ir::Value* pointerOperand(const Tensor& ptr, const SrcLoc& loc, const char* what) {
  ir::Value* p = use(ptr, loc, "pointer");
  if (!p->type().isPointerLike())
    fail(loc, fmt::format("{}: expected a pointer or a tile of pointers, got {}", what, typeStr(p->type())));
  return p;
}

/// The value operand of a store/atomic: pointee dtype, broadcast to the pointer shape.
ir::Value* valueFor(TraceState& s, ir::Value* p, const Operand& value, const SrcLoc& loc, const char* what) {
  ir::Type vt = ir::Type::scalar(p->type().dtype()).withShape(p->type().shape());
  if (value.none()) fail(loc, fmt::format("{}: missing value", what));
  if (!value.isHandle()) return literal(s, value, vt, loc, what);
  ir::Value* v = use(value.tensor(), loc, "value");
  if (!v->type().isNumeric() || v->type().dtype() != p->type().dtype())
    fail(loc, fmt::format("{}: value of type {} through a pointer to {}; convert with .to(ts::{})", what,
                          typeStr(v->type()), name(p->type().dtype()), name(p->type().dtype())));
  return broadcastValue(s, v, vt.shape(), loc, what);
}

int normAxis(int axis, int rank, const SrcLoc& loc, const char* what) {
  if (axis < -rank || axis >= rank)
    fail(loc, fmt::format("{}: axis {} is out of range for a tile of rank {}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
}

Tensor reduce(const char* kind, const Tensor& x, int axis, const SrcLoc& loc) {
  TraceState& s = at(loc);
  std::string what = kind;
  ir::Value* v = use(x, loc);
  if (!v->type().isTile() || !v->type().isNumeric())
    fail(loc, fmt::format("{}: needs a tile of numbers, got {}", what, typeStr(v->type())));
  if (v->type().dtype() == DType::I1)
    fail(loc, fmt::format("{}: reduction of i1 values; convert with .to(ts::i32)", what));
  int a = normAxis(axis, v->type().rank(), loc, kind);
  return wrap(s.builder->reduce(kind, v, a));
}

Tensor atomic(ir::OpCode code, const Tensor& ptr, const Operand& value, const Operand& mask, const SrcLoc& loc,
              const char* what) {
  TraceState& s = at(loc);
  ir::Value* p = pointerOperand(ptr, loc, what);
  if (ptr.readonly()) fail(loc, fmt::format("{}: pointer derived from a Ptr<const T> parameter is read-only", what));
  ir::Value* v = valueFor(s, p, value, loc, what);
  ir::Value* m = maskFor(s, mask, p->type().shape(), loc, what);
  if (v->type().dtype() == DType::I1) fail(loc, fmt::format("{}: not defined on i1 values", what));
  return wrap(s.builder->atomic(code, p, v, m));
}

TileBuffer allocIn(ir::MemSpace space, DType d, const ir::Shape& shape, const SrcLoc& loc, const char* what) {
  TraceState& s = at(loc);
  if (shape.empty()) fail(loc, fmt::format("{}: a buffer needs a non-empty shape", what));
  checkShape(shape, loc, what);
  return TileBuffer(wrap(s.builder->alloc(space, d, shape)));
}

/// Scalar integer loop bounds, all of one type (i64 if any bound is i64).
std::vector<ir::Value*> loopBounds(TraceState& s, const Operand* ops[3], const SrcLoc& loc) {
  static const char* names[] = {"lower bound", "upper bound", "step"};
  DType d = DType::I32;
  for (int i = 0; i < 3; ++i) {
    const Operand& o = *ops[i];
    if (o.isHandle()) {
      ir::Value* v = use(o.tensor(), loc, names[i]);
      if (!v->type().isScalar() || !isInteger(v->type().dtype()) || v->type().dtype() == DType::I1)
        fail(loc, fmt::format("for_range: the {} must be an integer scalar, got {}", names[i], typeStr(v->type())));
      if (v->type().dtype() == DType::I64) d = DType::I64;
    } else if (o.kind() != Operand::Kind::Int) {
      fail(loc, fmt::format("for_range: the {} must be an integer scalar, got {}", names[i], o.str()));
    } else if (o.intValue() < INT32_MIN || o.intValue() > INT32_MAX) {
      d = DType::I64;
    }
  }
  std::vector<ir::Value*> r;
  for (int i = 0; i < 3; ++i) {
    const Operand& o = *ops[i];
    if (o.isHandle())
      r.push_back(castTo(s, o.tensor().raw(), d));
    else
      r.push_back(s.builder->constant(ir::Type::scalar(d), o.intValue()));
  }
  return r;
}

/// Runs `fn` with ops going to `block` (a body being traced).
template <class F>
auto inBlock(TraceState& s, ir::Builder& b, F&& fn) {
  struct Restore {
    TraceState& s;
    ir::Builder* saved;
    ~Restore() {
      s.builder = saved;
      s.scopes.pop_back();
    }
  } restore{s, s.builder};
  s.builder = &b;
  s.scopes.push_back(b.block());
  return fn();
}

std::string typeList(const std::vector<ir::Value*>& vs) {
  std::string r = "(";
  for (size_t i = 0; i < vs.size(); ++i) {
    if (i) r += ", ";
    r += typeStr(vs[i]->type());
  }
  r += ")";
  return r;
}

std::string locStr(const SrcLoc& l) { return fmt::format("{}:{}", l.file_name(), l.line()); }
std::string locStr(const ir::Location& l) { return fmt::format("{}:{}", l.file, l.line); }

/// Rejects a direct access to a buffer that stage_copy owns.
void checkNotStaged(TraceState& s, const ir::Value* b, const SrcLoc& loc, const char* what) {
  while (b->definingOp() && b->definingOp()->code() == ir::OpCode::BufferSlot) b = b->definingOp()->operand(0);
  for (auto& [v, at] : s.staged)
    if (v == b)
      fail(loc, fmt::format("{}: the buffer is staged by the stage_copy at {}; it is accessed only through the "
                            "handle stage_copy returns",
                            what, locStr(at)));
}

/// The pointers and mask of a staged copy are evaluated stages-1 iterations
/// ahead: they may use only the loop index and values from before the loop.
void checkStagedSlice(const ir::Value* v, const ir::Block* body, const SrcLoc& loc) {
  std::vector<const ir::Value*> work{v};
  std::vector<const ir::Value*> seen;
  while (!work.empty()) {
    const ir::Value* x = work.back();
    work.pop_back();
    if (std::find(seen.begin(), seen.end(), x) != seen.end() || x->ownerBlock() != body) continue;
    seen.push_back(x);
    if (x->isBlockArg()) {
      if (x != body->arg(0))
        fail(loc, "stage_copy: the pointers and mask of a staged copy are evaluated stages-1 iterations ahead, so "
                  "they cannot depend on a loop-carried value");
      continue;
    }
    const ir::Op& d = *x->definingOp();
    if (ir::hasSideEffects(d.code()) || d.numRegions() || d.code() == ir::OpCode::Load ||
        d.code() == ir::OpCode::LocalLoad)
      fail(loc, fmt::format("stage_copy: the pointers and mask of a staged copy are evaluated stages-1 iterations "
                            "ahead, so they cannot depend on the '{}' at {} (only on the loop index, values defined "
                            "before the loop and arithmetic)",
                            d.name(), locStr(d.loc())));
    for (const ir::Value* o : d.operands()) work.push_back(o);
  }
}

}  // namespace

void checkScalar(const Tensor& t, DType d, const SrcLoc& loc) {
  if (!t.valid()) return;  // an empty handle, assigned later
  if (!t.raw()->type().isScalar() || t.raw()->type().dtype() != d)
    fail(loc, fmt::format("expected a scalar {}, got {}", name(d), typeStr(t.raw()->type())));
}

void checkPointer(const Tensor& t, DType d, const SrcLoc& loc) {
  if (!t.valid()) return;
  const ir::Type& ty = t.raw()->type();
  if (!ty.isPointer() || ty.dtype() != d)
    fail(loc, fmt::format("expected ptr<{}, global>, got {}", name(d), typeStr(ty)));
}

// ---- control flow ------------------------------------------------------------

std::vector<Tensor> forImpl(const Operand& lo, const Operand& hi, const Operand& step,
                            const std::vector<Tensor>& inits, const BodyFn& body, const SrcLoc& loc) {
  TraceState& s = at(loc);
  if (s.scopes.size() > static_cast<size_t>(ir::kMaxRegionDepth))
    fail(loc, fmt::format("{}: loops and branches nested more than {} deep", "for_range", ir::kMaxRegionDepth));
  const Operand* bounds[3] = {&lo, &hi, &step};
  std::vector<ir::Value*> b = loopBounds(s, bounds, loc);
  std::vector<ir::Value*> init;
  std::vector<bool> ro;
  for (size_t i = 0; i < inits.size(); ++i) {
    ir::Value* v = use(inits[i], loc, "loop-carried initial value");
    if (v->type().isBuffer()) fail(loc, fmt::format("for_range: carried value #{} is a buffer; buffers cannot be carried", i));
    init.push_back(v);
    ro.push_back(inits[i].readonly());
  }
  at(loc);  // the bounds may have moved the location
  auto results = s.builder->forLoop(
      b[0], b[1], b[2], init, [&](ir::Builder& inner, ir::Value* iv, std::vector<ir::Value*> carried) {
        return inBlock(s, inner, [&] {
          std::vector<Tensor> c;
          for (size_t i = 0; i < carried.size(); ++i) c.push_back(wrap(carried[i], ro[i]));
          std::vector<Tensor> out = body(wrap(iv), c);
          if (out.size() != init.size())
            fail(loc, fmt::format("for_range: the body returns {} value(s) but the loop carries {}", out.size(),
                                  init.size()));
          std::vector<ir::Value*> ys;
          for (size_t i = 0; i < out.size(); ++i) {
            ir::Value* y = use(out[i], loc, "loop-carried value");
            if (y->type() != init[i]->type())
              fail(loc, fmt::format("for_range: carried value #{} enters the loop as {} but the body returns {}", i,
                                    typeStr(init[i]->type()), typeStr(y->type())));
            ys.push_back(y);
          }
          at(loc);  // the yield takes the loop's location
          return ys;
        });
      });
  std::vector<Tensor> r;
  for (size_t i = 0; i < results.size(); ++i) r.push_back(wrap(results[i], ro[i]));
  return r;
}

std::vector<Tensor> forPipelinedImpl(const Operand& lo, const Operand& hi, const Operand& step, int64_t stages,
                                     const std::vector<Tensor>& inits, const BodyFn& body, const SrcLoc& loc) {
  TraceState& s = at(loc);
  if (stages < 1 || stages > ir::kMaxPipelineStages)
    fail(loc, fmt::format("for_pipelined: stages must be 1..{} (real schedules use 2-8), got {}",
                          ir::kMaxPipelineStages, stages));
  if (s.builder->block() != &s.fn->body())
    fail(loc, "for_pipelined: a pipelined loop must be at the top level of the kernel (not inside for_range, "
              "if_else or another for_pipelined)");
  return forImpl(
      lo, hi, step, inits,
      [&](const Tensor& iv, const std::vector<Tensor>& carried) {
        TraceState& t = *tCurrent;
        ir::Block* blk = t.builder->block();
        blk->parentOp()->attrs()["stages"] = stages;
        t.pipes.push_back({blk, stages, loc});
        struct Pop {
          TraceState& t;
          ~Pop() { t.pipes.pop_back(); }
        } pop{t};
        return body(iv, carried);
      },
      loc);
}

std::vector<Tensor> ifImpl(const Tensor& cond, const std::function<std::vector<Tensor>()>& thenBody,
                           const std::function<std::vector<Tensor>()>& elseBody, const SrcLoc& loc) {
  TraceState& s = at(loc);
  if (s.scopes.size() > static_cast<size_t>(ir::kMaxRegionDepth))
    fail(loc, fmt::format("{}: loops and branches nested more than {} deep", "if_else", ir::kMaxRegionDepth));
  ir::Value* c = use(cond, loc, "condition");
  if (!c->type().isScalar() || c->type().dtype() != DType::I1)
    fail(loc, fmt::format("if_else: the condition must be a scalar i1 (a comparison of scalars), got {}",
                          typeStr(c->type())));
  // Both branches are traced into scratch blocks first: the `if` op's result
  // types are only known once the branches have run.
  struct Branch {
    ir::Region region{nullptr};
    std::vector<ir::Value*> yields;
    std::vector<bool> ro;
  } br[2];
  for (int i = 0; i < 2; ++i) {
    const auto& fn = i == 0 ? thenBody : elseBody;
    if (!fn) continue;
    ir::Builder b(&br[i].region.block());
    inBlock(s, b, [&] {
      for (const Tensor& t : fn()) {
        br[i].yields.push_back(use(t, loc, "if_else result"));
        br[i].ro.push_back(t.readonly());
      }
      return 0;
    });
  }
  auto& ty = br[0].yields;
  auto& ey = br[1].yields;
  if (!elseBody && !ty.empty())
    fail(loc, fmt::format("if_else: the then-branch returns {} value(s) but there is no else-branch to match", ty.size()));
  bool match = ty.size() == ey.size();
  for (size_t i = 0; match && i < ty.size(); ++i) match = ty[i]->type() == ey[i]->type();
  if (!match)
    fail(loc, fmt::format("if_else: the branches return different types: then {} vs else {}", typeList(ty),
                          typeList(ey)));
  std::vector<ir::Type> types;
  for (ir::Value* v : ty) types.push_back(v->type());
  auto moveInto = [](Branch& b) {
    return [&b](ir::Builder& inner) {
      for (auto& op : b.region.block().ops()) inner.block()->push(std::move(op));
      b.region.block().ops().clear();
      return b.yields;
    };
  };
  at(loc);
  auto results = s.builder->ifElse(c, types, moveInto(br[0]), moveInto(br[1]));
  std::vector<Tensor> r;
  for (size_t i = 0; i < results.size(); ++i) r.push_back(wrap(results[i], br[0].ro[i] || br[1].ro[i]));
  return r;
}

// ---- kernels -------------------------------------------------------------------

struct Trace::State {
  TraceState ts;
  std::vector<std::string> names;
  size_t numArgs = 0;
  SrcLoc loc;
};

Trace::Trace(const std::string& name, std::vector<std::string> argNames, size_t numArgs, const SrcLoc& loc)
    : s_(std::make_unique<State>()) {
  if (!argNames.empty() && argNames.size() != numArgs)
    fail(loc, fmt::format("kernel '{}': {} parameter name(s) given for {} parameter(s)", name, argNames.size(), numArgs));
  if (name.empty()) fail(loc, "kernel: the kernel name is empty");
  s_->names = std::move(argNames);
  s_->numArgs = numArgs;
  s_->loc = loc;
  TraceState& t = s_->ts;
  t.id = gNextTrace.fetch_add(1);
  t.name = name;
  ir::Location l;
  l.file = loc.file_name();
  l.line = loc.line();
  l.column = loc.column();
  t.fn = std::make_unique<ir::Function>(name, l);
  t.root.setInsertionPointToEnd(&t.fn->body());
  t.builder = &t.root;
  t.scopes.push_back(&t.fn->body());
  t.prev = tCurrent;
  tCurrent = &t;
}

Trace::~Trace() {
  if (tCurrent == &s_->ts) tCurrent = s_->ts.prev;
}

Tensor Trace::addArg(const ir::Type& t, bool readonly) {
  TraceState& ts = s_->ts;
  size_t i = ts.fn->numArgs();
  std::string n = i < s_->names.size() ? s_->names[i] : "arg" + std::to_string(i);
  return Tensor(ts.fn->addArgument(t, n), ts.id, readonly);
}

Kernel Trace::finish() {
  TraceState& ts = at(s_->loc);
  ts.builder->ret();
  // A VerifyError here means the DSL let a malformed kernel through; it names
  // the op and the user's line.
  ir::verify(*ts.fn);
  return Kernel(std::shared_ptr<const ir::Function>(std::move(ts.fn)));
}

}  // namespace dsl

// ---- handles ---------------------------------------------------------------

const ir::Type& Tensor::type() const {
  if (!v_) throw DslError("error: use of an empty ts::Tensor handle (default-constructed, never assigned)");
  return v_->type();
}

Tensor Tensor::to(DType d, SrcLoc loc) const {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(*this, loc);
  if (!v->type().isNumeric())
    dsl::fail(loc, fmt::format(".to({}): cannot convert {}", name(d), v->type().str()));
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
using ir::OpCode;
using dsl::Req;

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
Tensor abs(const Tensor& x, SrcLoc loc) { return dsl::unaryMath(OpCode::Abs, x, loc, "abs", true); }

namespace {
// Elementwise functions report the function's own call site, not the operands'.
Operand withLoc(const Operand& o, const SrcLoc& loc) {
  switch (o.kind()) {
    case Operand::Kind::Handle: return Operand(o.tensor(), loc);
    case Operand::Kind::Int: return Operand(o.intValue(), loc);
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

// ---- memory --------------------------------------------------------------------

Tensor load(const Tensor& ptr, const Operand& mask, const Operand& other, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* p = dsl::pointerOperand(ptr, loc, "load");
  ir::Value* m = dsl::maskFor(s, mask, p->type().shape(), loc, "load");
  ir::Value* o = nullptr;
  if (!other.none()) {
    if (!m) dsl::fail(loc, "load: `other` is given without a mask (it fills the masked-off lanes)");
    o = dsl::valueFor(s, p, other, loc, "load (other)");
  }
  dsl::at(loc);
  return dsl::wrap(s.builder->load(p, m, o));
}

void store(const Tensor& ptr, const Operand& value, const Operand& mask, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* p = dsl::pointerOperand(ptr, loc, "store");
  if (ptr.readonly())
    dsl::fail(loc, "store: the pointer is derived from a Ptr<const T> parameter, which is read-only");
  ir::Value* v = dsl::valueFor(s, p, value, loc, "store");
  ir::Value* m = dsl::maskFor(s, mask, p->type().shape(), loc, "store");
  s.builder->store(p, v, m);
}

Tensor atomic_add(const Tensor& ptr, const Operand& value, const Operand& mask, SrcLoc loc) {
  return dsl::atomic(OpCode::AtomicAdd, ptr, value, mask, loc, "atomic_add");
}
Tensor atomic_max(const Tensor& ptr, const Operand& value, const Operand& mask, SrcLoc loc) {
  return dsl::atomic(OpCode::AtomicMax, ptr, value, mask, loc, "atomic_max");
}

TileBuffer alloc_shared(DType dtype, const ir::Shape& shape, SrcLoc loc) {
  return dsl::allocIn(ir::MemSpace::Shared, dtype, shape, loc, "alloc_shared");
}
TileBuffer alloc_local(DType dtype, const ir::Shape& shape, SrcLoc loc) {
  return dsl::allocIn(ir::MemSpace::Local, dtype, shape, loc, "alloc_local");
}

Tensor TileBuffer::load(SrcLoc loc) const {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* b = dsl::use(*this, loc, "buffer");
  if (!b->type().isBuffer()) dsl::fail(loc, fmt::format("buffer load: {} is not a buffer", b->type().str()));
  dsl::checkNotStaged(s, b, loc, "buffer load");
  return dsl::wrap(s.builder->localLoad(b));
}

void TileBuffer::store(const Operand& tile, SrcLoc loc) const {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* b = dsl::use(*this, loc, "buffer");
  if (!b->type().isBuffer()) dsl::fail(loc, fmt::format("buffer store: {} is not a buffer", b->type().str()));
  dsl::checkNotStaged(s, b, loc, "buffer store");
  ir::Type t = ir::Type::tile(ir::Type::scalar(b->type().dtype()), b->type().shape());
  ir::Value* v;
  if (!tile.isHandle()) {
    v = dsl::literal(s, tile, t, loc, "buffer store");
  } else {
    v = dsl::use(tile.tensor(), loc, "value");
    if (!v->type().isNumeric() || v->type().dtype() != t.dtype())
      dsl::fail(loc, fmt::format("buffer store: value of type {} into {}", v->type().str(), b->type().str()));
    v = dsl::broadcastValue(s, v, t.shape(), loc, "buffer store");
  }
  s.builder->localStore(b, v);
}

void copy(const TileBuffer& dst, const Tensor& ptrs, const Operand& mask, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* b = dsl::use(dst, loc, "buffer");
  if (!b->type().isBuffer()) dsl::fail(loc, fmt::format("copy: destination {} is not a buffer", b->type().str()));
  dsl::checkNotStaged(s, b, loc, "copy");
  ir::Value* p = dsl::pointerOperand(ptrs, loc, "copy");
  if (p->type().dtype() != b->type().dtype())
    dsl::fail(loc, fmt::format("copy: source {} and destination {} differ in dtype", p->type().str(), b->type().str()));
  p = dsl::broadcastValue(s, p, b->type().shape(), loc, "copy");
  ir::Value* m = dsl::maskFor(s, mask, b->type().shape(), loc, "copy");
  s.builder->copy(b, p, m);
}

void barrier(SrcLoc loc) { dsl::at(loc).builder->barrier(); }

StagedTile stage_copy(const TileBuffer& buf, const Tensor& ptrs, const Operand& mask, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  if (s.pipes.empty() || s.builder->block() != s.pipes.back().body)
    dsl::fail(loc, "stage_copy: must be called directly in the body of ts::for_pipelined (not outside it, nor inside "
                   "a nested for_range / if_else)");
  const dsl::TraceState::Pipe& pipe = s.pipes.back();
  ir::Value* b = dsl::use(buf, loc, "buffer");
  const ir::Type bt = b->type();
  if (!bt.isBuffer()) dsl::fail(loc, fmt::format("stage_copy: {} is not a buffer", bt.str()));
  if (bt.space() != ir::MemSpace::Shared)
    dsl::fail(loc, fmt::format("stage_copy: the buffer must be in shared memory (ts::alloc_shared), got {}", bt.str()));
  dsl::checkNotStaged(s, b, loc, "stage_copy");
  const ir::Op* a = b->definingOp();
  if (!a || a->code() != ir::OpCode::Alloc || b->ownerBlock() != &s.fn->body())
    dsl::fail(loc, "stage_copy: allocate the buffer with ts::alloc_shared in the kernel body before the pipelined "
                   "loop");
  const ir::Op* prior = nullptr;
  ir::walk(s.fn->body(), [&](ir::Op& op) {
    for (ir::Value* v : op.operands())
      if (v == b && !prior) prior = &op;
  });
  if (prior)
    dsl::fail(loc, fmt::format("stage_copy: the buffer is already used by the '{}' at {}; a staged buffer is accessed "
                               "only through stage_copy",
                               prior->name(), dsl::locStr(prior->loc())));
  if (bt.rank() + 1 > ir::kMaxTileRank)
    dsl::fail(loc, fmt::format("stage_copy: a staged buffer holds tiles of rank <= {} (the stages add a dimension), "
                               "got {}",
                               ir::kMaxTileRank - 1, bt.str()));
  ir::Value* p = dsl::pointerOperand(ptrs, loc, "stage_copy");
  if (p->type().dtype() != bt.dtype())
    dsl::fail(loc, fmt::format("stage_copy: source {} and buffer {} differ in dtype", p->type().str(), bt.str()));
  const ir::Shape& ps = p->type().shape();
  bool fits = ps.size() <= bt.shape().size();
  for (size_t i = 0; fits && i < ps.size(); ++i) {
    int64_t dp = ps[i], db = bt.shape()[i + bt.shape().size() - ps.size()];
    fits = dp == db || dp == 1;
  }
  if (!fits)
    dsl::fail(loc, fmt::format("stage_copy: shape mismatch: the pointer tile is {} but the buffer holds tiles of {}",
                               dsl::shapeName(ps), dsl::shapeName(bt.shape())));
  p = dsl::broadcastValue(s, p, bt.shape(), loc, "stage_copy");
  ir::Value* m = dsl::maskFor(s, mask, bt.shape(), loc, "stage_copy");
  dsl::checkStagedSlice(p, pipe.body, loc);
  if (m) dsl::checkStagedSlice(m, pipe.body, loc);
  // The buffer becomes `stages` slots of the tile the user declared.
  ir::Shape staged{pipe.stages};
  staged.insert(staged.end(), bt.shape().begin(), bt.shape().end());
  b->setType(ir::Type::buffer(bt.dtype(), ir::MemSpace::Shared, staged));
  s.staged.push_back({b, loc});
  dsl::at(loc);
  // As written, every iteration uses slot 0: the loop is the one-stage
  // program; the pipeline pass assigns the real slots.
  ir::Value* view = s.builder->bufferSlot(b, s.builder->constant(ir::Type::scalar(DType::I32), int64_t{0}));
  s.builder->copy(view, p, m);
  return StagedTile(dsl::wrap(view));
}

Tensor StagedTile::load(SrcLoc loc) const {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* b = dsl::use(*this, loc, "staged tile");
  if (!b->type().isBuffer()) dsl::fail(loc, fmt::format("staged tile load: {} is not a buffer slot", b->type().str()));
  return dsl::wrap(s.builder->localLoad(b));
}

// ---- reductions and contractions -------------------------------------------

Tensor sum(const Tensor& x, int axis, SrcLoc loc) { return dsl::reduce("sum", x, axis, loc); }
Tensor max(const Tensor& x, int axis, SrcLoc loc) { return dsl::reduce("max", x, axis, loc); }
Tensor min(const Tensor& x, int axis, SrcLoc loc) { return dsl::reduce("min", x, axis, loc); }
Tensor argmax(const Tensor& x, int axis, SrcLoc loc) { return dsl::reduce("argmax", x, axis, loc); }

Tensor dot(const Tensor& a, const Tensor& b, const Tensor& acc, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* va = dsl::use(a, loc, "left operand");
  ir::Value* vb = dsl::use(b, loc, "right operand");
  const ir::Type &ta = va->type(), &tb = vb->type();
  if (!ta.isNumeric() || !tb.isNumeric() || ta.rank() != 2 || tb.rank() != 2)
    dsl::fail(loc, fmt::format("dot: needs two 2-D tiles, got {} and {}", ta.str(), tb.str()));
  if (ta.shape()[1] != tb.shape()[0])
    dsl::fail(loc, fmt::format("dot: inner dimensions differ: {} @ {}", dsl::shapeName(ta.shape()),
                               dsl::shapeName(tb.shape())));
  if (ta.dtype() != tb.dtype() || ta.dtype() == DType::I1)
    dsl::fail(loc, fmt::format("dot: operands must share a numeric dtype, got {} and {}", name(ta.dtype()),
                               name(tb.dtype())));
  ir::Shape out{ta.shape()[0], tb.shape()[1]};
  bool fl = isFloat(ta.dtype());
  ir::Value* vc;
  if (acc.valid()) {
    vc = dsl::use(acc, loc, "accumulator");
    const ir::Type& tc = vc->type();
    bool okType = tc.isNumeric() && (fl ? (tc.dtype() == DType::F32 || tc.dtype() == DType::F64)
                                        : (tc.dtype() == DType::I32 || tc.dtype() == DType::I64));
    if (!okType || tc.shape() != out)
      dsl::fail(loc, fmt::format("dot: the accumulator must be tile<{}x{}>, got {}", ir::shapeStr(out),
                                 fl ? "f32 or f64" : "i32 or i64", tc.str()));
  } else {
    DType d = fl ? DType::F32 : DType::I32;
    vc = fl ? s.builder->constant(ir::Type::tile(ir::Type::scalar(d), out), 0.0)
            : s.builder->constant(ir::Type::tile(ir::Type::scalar(d), out), int64_t{0});
  }
  return dsl::wrap(s.builder->dot(va, vb, vc));
}

}  // namespace tessera

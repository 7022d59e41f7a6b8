// Memory: pointer arithmetic, masked loads and stores, atomics, shared and
// local buffers, copies and the staged copies of for_pipelined.
#include "DslImpl.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {
namespace dsl {

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

namespace {

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
    fail(loc,
         fmt::format("{}: mask shape {} does not match the pointer shape {}", what, shapeName(ms), shapeName(shape)));
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

ir::Value* atomicPointer(const Tensor& ptr, const SrcLoc& loc, const char* what) {
  ir::Value* p = pointerOperand(ptr, loc, what);
  if (ptr.readonly()) fail(loc, fmt::format("{}: pointer derived from a Ptr<const T> parameter is read-only", what));
  if (p->type().space() != ir::MemSpace::Global)
    fail(loc, fmt::format("{}: atomics act on global memory, got {}", what, typeStr(p->type())));
  if (p->type().dtype() == DType::I1) fail(loc, fmt::format("{}: not defined on i1 values", what));
  return p;
}

Tensor atomic(ir::AtomicKind kind, const Tensor& ptr, const Operand& value, const Operand& mask, ir::MemOrder order,
              ir::MemScope scope, const SrcLoc& loc) {
  const std::string what = std::string("atomic_") + ir::name(kind);
  TraceState& s = at(loc);
  ir::Value* p = atomicPointer(ptr, loc, what.c_str());
  if (isFloat(p->type().dtype()) && !ir::takesFloats(kind))
    fail(loc, fmt::format("{}: not defined on {} (bitwise atomics take integers)", what, name(p->type().dtype())));
  ir::Value* v = valueFor(s, p, value, loc, what.c_str());
  ir::Value* m = maskFor(s, mask, p->type().shape(), loc, what.c_str());
  return wrap(s.builder->atomic(kind, p, v, m, order, scope));
}

TileBuffer allocIn(ir::MemSpace space, DType d, const ir::Shape& shape, const SrcLoc& loc, const char* what) {
  TraceState& s = at(loc);
  if (shape.empty()) fail(loc, fmt::format("{}: a buffer needs a non-empty shape", what));
  checkShape(shape, loc, what);
  return TileBuffer(wrap(s.builder->alloc(space, d, shape)));
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
/// ahead: they may use only the loop index, values from before the loop,
/// arithmetic and global loads (issued ahead too; the verifier then checks
/// that the loop writes no global memory those loads could read).
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
        fail(loc,
             "stage_copy: the pointers and mask of a staged copy are evaluated stages-1 iterations ahead, so "
             "they cannot depend on a loop-carried value");
      continue;
    }
    const ir::Op& d = *x->definingOp();
    if (ir::hasSideEffects(d.code()) || d.numRegions() || d.code() == ir::OpCode::LocalLoad)
      fail(loc, fmt::format("stage_copy: the pointers and mask of a staged copy are evaluated stages-1 iterations "
                            "ahead, so they cannot depend on the '{}' at {} (only on the loop index, values defined "
                            "before the loop, arithmetic and global loads)",
                            d.name(), locStr(d.loc())));
    for (const ir::Value* o : d.operands()) work.push_back(o);
  }
}

}  // namespace

}  // namespace dsl

using ir::OpCode;

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
  if (ptr.readonly()) dsl::fail(loc, "store: the pointer is derived from a Ptr<const T> parameter, which is read-only");
  ir::Value* v = dsl::valueFor(s, p, value, loc, "store");
  ir::Value* m = dsl::maskFor(s, mask, p->type().shape(), loc, "store");
  s.builder->store(p, v, m);
}

#define TS_ATOMIC_FN(fn, Kind)                                                                            \
  Tensor fn(const Tensor& ptr, const Operand& value, const Operand& mask, MemOrder order, MemScope scope, \
            SrcLoc loc) {                                                                                 \
    return dsl::atomic(ir::AtomicKind::Kind, ptr, value, mask, order, scope, loc);                        \
  }
TS_ATOMIC_FN(atomic_add, Add)
TS_ATOMIC_FN(atomic_min, Min)
TS_ATOMIC_FN(atomic_max, Max)
TS_ATOMIC_FN(atomic_and, And)
TS_ATOMIC_FN(atomic_or, Or)
TS_ATOMIC_FN(atomic_xor, Xor)
TS_ATOMIC_FN(atomic_xchg, Xchg)
#undef TS_ATOMIC_FN

Tensor atomic_cas(const Tensor& ptr, const Operand& cmp, const Operand& value, const Operand& mask, MemOrder order,
                  MemScope scope, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* p = dsl::atomicPointer(ptr, loc, "atomic_cas");
  ir::Value* c = dsl::valueFor(s, p, cmp, loc, "atomic_cas (cmp)");
  ir::Value* v = dsl::valueFor(s, p, value, loc, "atomic_cas");
  ir::Value* m = dsl::maskFor(s, mask, p->type().shape(), loc, "atomic_cas");
  return dsl::wrap(s.builder->atomicCas(p, c, v, m, order, scope));
}

void fence(MemOrder order, MemScope scope, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  if (order == MemOrder::Relaxed)
    dsl::fail(loc, "fence: a relaxed fence orders nothing (use MemOrder::Acquire, Release or AcqRel)");
  s.builder->fence(order, scope);
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
void cluster_barrier(SrcLoc loc) { dsl::at(loc).builder->clusterBarrier(); }

TileBuffer TileBuffer::remote(const Operand& rank, SrcLoc loc) const {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* b = dsl::use(*this, loc, "buffer");
  if (!b->type().isBuffer() || b->type().space() != ir::MemSpace::Shared)
    dsl::fail(loc, fmt::format("remote: {} is not a shared buffer (ts::alloc_shared)", b->type().str()));
  if (const ir::Op* d = b->definingOp(); d && d->code() == ir::OpCode::RemoteBuffer)
    dsl::fail(loc, "remote: the buffer is already another program's; take remote() of the program's own buffer");
  dsl::checkNotStaged(s, b, loc, "remote");
  ir::Value* r;
  if (rank.isLiteral()) {
    if (rank.kind() != Operand::Kind::Int || rank.intValue() < 0 || rank.intValue() > INT32_MAX)
      dsl::fail(loc, fmt::format("remote: the rank must be a non-negative i32, got {}", rank.str()));
    r = dsl::use(full({}, static_cast<double>(rank.intValue()), DType::I32, loc), loc, "rank");
  } else {
    const Tensor& t = rank.tensor();
    if (!t.isScalar() || !isInteger(t.dtype()))
      dsl::fail(loc, fmt::format("remote: the rank must be an integer scalar, got {}", rank.str()));
    r = dsl::use(t.to(DType::I32, loc), loc, "rank");
  }
  return TileBuffer(dsl::wrap(s.builder->remoteBuffer(b, r)));
}

void device_assert(const Tensor& cond, const std::string& message, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* c = dsl::use(cond, loc, "condition");
  if (c->type().isBuffer() || c->type().isPointerLike() || c->type().dtype() != DType::I1)
    dsl::fail(loc, fmt::format("device_assert: the condition must be a boolean (i1) scalar or tile, such as a "
                               "comparison, got {}",
                               c->type().str()));
  if (message.empty()) dsl::fail(loc, "device_assert: the assertion needs a message (what the error says)");
  s.builder->assertTrue(c, message);
}

void dsl::probe(const std::string& name, bool end, SrcLoc loc) {
  if (name.empty()) dsl::fail(loc, "profile_scope: the scope needs a name (what the trace shows)");
  dsl::at(loc).builder->probe(name, end);
}

StagedTile stage_copy(const TileBuffer& buf, const Tensor& ptrs, const Operand& mask, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  if (s.pipes.empty() || s.builder->block() != s.pipes.back().body)
    dsl::fail(loc,
              "stage_copy: must be called directly in the body of ts::for_pipelined (not outside it, nor inside "
              "a nested for_range / if_else)");
  const dsl::TraceState::Pipe& pipe = s.pipes.back();
  ir::Value* b = dsl::use(buf, loc, "buffer");
  const ir::Type bt = b->type();
  if (!bt.isBuffer()) dsl::fail(loc, fmt::format("stage_copy: {} is not a buffer", bt.str()));
  if (bt.space() != ir::MemSpace::Shared)
    dsl::fail(loc, fmt::format("stage_copy: the buffer must be in shared memory (ts::alloc_shared), got {}", bt.str()));
  dsl::checkNotStaged(s, b, loc, "stage_copy");
  // Allocated outside the pipelined loop: in the kernel body, or in the
  // for_range / if_else the loop is nested in.
  const ir::Op* a = b->definingOp();
  auto inner = std::find(s.scopes.begin(), s.scopes.end(), pipe.body);
  const bool outside = std::find(s.scopes.begin(), inner, b->ownerBlock()) != inner;
  if (!a || a->code() != ir::OpCode::Alloc || !outside)
    dsl::fail(loc, "stage_copy: allocate the buffer with ts::alloc_shared before the pipelined loop, outside it");
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

}  // namespace tessera

// Planning, before any code is emitted: which tiles are fused into their
// consumers, recomputed per consumer, deferred into a reduction's loop,
// or loaded inside the loop of the op that consumes them.
#include "codegen/cpu/CpuLowerImpl.h"

#include <functional>

namespace tessera::codegen::cpu::detail {

namespace {

// True if running `op` may change memory that a load reads (global stores,
// atomics, buffer writes), directly or inside its regions. Loads are never
// moved across such an op.
bool mayWriteMemory(const ir::Op& op) {
  if (ir::writesMemory(op.code())) return true;
  for (auto& r : op.regions())
    for (auto& o : r->block().ops())
      if (mayWriteMemory(*o)) return true;
  return false;
}

// Structural equality of two pure index/pointer computations: the same
// ops on the same leaves produce the same per-lane values.
bool sameComputation(const ir::Value* a, const ir::Value* b) {
  if (a == b) return true;
  const ir::Op* da = a->definingOp();
  const ir::Op* db = b->definingOp();
  if (!da || !db || da->code() != db->code() || !(a->type() == b->type())) return false;
  switch (da->code()) {
    case OpCode::PtrAdd:
    case OpCode::Splat:
    case OpCode::Add:
    case OpCode::Mul:
    case OpCode::Sub:
    case OpCode::ExpandDims:
    case OpCode::Reshape:
    case OpCode::Broadcast: break;
    default: return false;  // ops with attributes or effects: only identity counts
  }
  if (da->numOperands() != db->numOperands()) return false;
  for (unsigned i = 0; i < da->numOperands(); ++i)
    if (!sameComputation(da->operand(i), db->operand(i))) return false;
  return true;
}

}  // namespace

// ===================================================================== plan

bool Lowering::broadcastFast(const ir::Op& bc, int64_t c) const {
  const ir::Shape& r = bc.result()->type().shape();
  const ir::Shape& s = bc.operand(0)->type().shape();
  int64_t L = r.back();
  return L % c == 0 && (s.back() == L || s.back() == 1);
}

bool Lowering::canFuseInto(const ir::Op& u, const ir::Value* v) const {
  // These consumers index their operands arbitrarily: they need arrays.
  if (u.code() == OpCode::Dot && v != u.operand(2)) return false;
  if (u.code() == OpCode::Transpose || u.code() == OpCode::Gather || u.code() == OpCode::Join ||
      u.code() == OpCode::Split)
    return false;
  if (u.code() == OpCode::Broadcast && !broadcastFast(u, chunkWidth(numElems(u.result()->type())))) return false;
  return true;
}

const ir::Op* Lowering::ancestorIn(const ir::Op* op, const ir::Block* blk) const {
  while (op && op->parent() != blk) {
    const ir::Region* r = op->parent() ? op->parent()->parent() : nullptr;
    op = r ? r->parentOp() : nullptr;
  }
  return op;
}

bool Lowering::effectsBetween(const ir::Op* from, const ir::Op* to) const {
  const ir::Block* blk = from->parent();
  TS_ASSERT(to->parent() == blk, "effectsBetween: ops in different blocks");
  for (size_t i = pos_.at(from) + 1; i < pos_.at(to); ++i)
    if (mayWriteMemory(*blk->ops()[i])) return true;
  return false;
}

// The ops of `blk` at whose position `v` is evaluated: its non-fused users,
// the roots of its fused users, and the enclosing op of nested users.
void Lowering::evalPoints(const ir::Value* v, const ir::Block* blk, std::vector<const ir::Op*>& out) const {
  auto it = users_.find(v);
  if (it == users_.end()) return;
  for (const ir::Op* u : it->second) {
    const ir::Op* a = ancestorIn(u, blk);
    TS_ASSERT(a, "cpu lowering: a use outside its value's scope");
    if (a == u && u->numResults() == 1 && fused_.count(u->result()))
      evalPoints(u->result(), blk, out);
    else
      out.push_back(a);
  }
}

// True if `x` is `v`, or a fused single-use elementwise value computed from
// `v` through such values only (same shape, so the same flat index).
bool Lowering::reachesElementwise(const ir::Value* x, const ir::Value* v) const {
  if (x == v) return true;
  const ir::Op* d = x->definingOp();
  if (!d || !fused_.count(x) || remat_.count(x) || !ir::isElementwise(d->code())) return false;
  for (const ir::Value* o : d->operands())
    if (o->type().isTile() && reachesElementwise(o, v)) return true;
  return false;
}

void Lowering::planDeferral(const ir::Block& blk) {
  for (auto& opp : blk.ops()) {
    const ir::Op& op = *opp;
    for (auto& r : op.regions()) planDeferral(r->block());
    if (op.numResults() != 1 || !(op.code() == OpCode::Load || isFusableDef(op.code()))) continue;
    const ir::Value* v = op.result();
    if (!v->type().isTile() || fused_.count(v) || uses_[v] == 0) continue;
    std::vector<const ir::Op*> pts;
    evalPoints(v, &blk, pts);
    const ir::Op* first = nullptr;
    for (const ir::Op* p : pts)
      if (!first || pos_.at(p) < pos_.at(first)) first = p;
    if (!first || first->code() != OpCode::Reduce || !reachesElementwise(first->operand(0), v)) continue;
    if (effectsBetween(&op, first)) continue;
    deferred_.insert(v);
    deferredAt_[first].push_back(v);
  }
}

void Lowering::planLoadFusion(const ir::Block& blk) {
  for (auto& opp : blk.ops()) {
    const ir::Op& op = *opp;
    for (auto& r : op.regions()) planLoadFusion(r->block());
    if (op.code() != OpCode::Load || !op.result()->type().isTile() || uses_[op.result()] != 1) continue;
    if (deferred_.count(op.result())) continue;
    // Walk up the single-use fused chain to the op whose loop computes it.
    const ir::Value* x = op.result();
    const ir::Op* u = users_[x][0];
    bool ok = u->parent() == &blk && canFuseInto(*u, x);
    while (ok && u->numResults() == 1 && fused_.count(u->result())) {
      x = u->result();
      if (remat_.count(x))
        ok = false;  // would be loaded once per consumer
      else
        u = users_[x][0];
    }
    if (!ok) continue;
    const ir::Op* root = u;
    if (u->numResults() == 1 && deferred_.count(u->result())) {
      for (auto& [r, vals] : deferredAt_)
        for (const ir::Value* d : vals)
          if (d == u->result()) root = r;
    }
    if (ir::isAtomic(root->code()) || root->code() == OpCode::Copy) continue;
    if (effectsBetween(&op, root)) continue;
    if (root->code() == OpCode::Store) {
      // Chunk k of the store runs before chunk k+1 of the load: only safe if
      // no stored address is read by a later chunk. Both pointer tiles must
      // be single runs (so [first, first + n) bounds them); identical
      // address computations are safe outright, others get a run-time test.
      const ir::Value* sp = root->operand(0);
      const ir::Value* lp = op.operand(0);
      if (!sp->type().isTile() || !axis_.contiguousChunks(sp, numElems(sp->type())) ||
          !axis_.contiguousChunks(lp, numElems(lp->type())))
        continue;
      if (!sameComputation(sp, lp)) storeChecks_[root].push_back(&op);
    }
    fused_.insert(op.result());
  }
}

void Lowering::plan() {
  std::function<void(const ir::Block&)> count = [&](const ir::Block& blk) {
    size_t i = 0;
    for (auto& op : blk.ops()) {
      pos_[op.get()] = i++;
      for (const ir::Value* v : op->operands()) {
        uses_[v]++;
        users_[v].push_back(op.get());
      }
      for (auto& r : op->regions()) count(r->block());
    }
  };
  count(fn_.body());
  std::function<void(const ir::Block&)> decide = [&](const ir::Block& blk) {
    for (auto& op : blk.ops()) {
      for (auto& r : op->regions()) decide(r->block());
      if (op->numResults() != 1 || !isFusableDef(op->code())) continue;
      const ir::Value* v = op->result();
      if (!v->type().isTile() || uses_[v] == 0) continue;
      bool fusable = true;
      for (const ir::Op* u : users_[v]) fusable = fusable && canFuseInto(*u, v);
      if (!fusable) continue;
      bool cheap = !isExpensive(op->code());
      for (const ir::Value* o : op->operands())
        if (o->type().isTile() && fused_.count(o) && !cheap_.count(o)) cheap = false;
      if (uses_[v] == 1 && users_[v][0]->parent() == op->parent()) {
        fused_.insert(v);
      } else if (cheap) {
        fused_.insert(v);
        remat_.insert(v);
      }
      if (cheap && fused_.count(v)) cheap_.insert(v);
    }
  };
  decide(fn_.body());
  std::function<void(const ir::Block&)> atomics = [&](const ir::Block& blk) {
    for (auto& op : blk.ops()) {
      if (ir::isAtomic(op->code()) || op->code() == OpCode::Fence) hasAtomics_ = true;
      for (auto& r : op->regions()) atomics(r->block());
    }
  };
  atomics(fn_.body());
  planDeferral(fn_.body());
  planLoadFusion(fn_.body());
}

}  // namespace tessera::codegen::cpu::detail

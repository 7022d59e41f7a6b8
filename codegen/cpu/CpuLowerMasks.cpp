// Mask versioning: integer lane ranges, all-on tests of masks, and the
// emission of an op's chunk loops in a fast (masks all on) and a general
// version.
#include "codegen/cpu/CpuLowerImpl.h"

namespace tessera::codegen::cpu::detail {

// ========================================================== mask versioning
//
// Masks are nearly always `offsets < bound` with offsets an arange plus a
// scalar, and nearly always all on (only a row's or an array's tail is
// partial). Rather than testing every chunk's mask, an op's chunk loops are
// emitted twice: one scalar comparison per tile (the largest offset against
// the bound) selects a version in which the mask is the constant true —
// plain vector loads and stores, `where(mask, ...)` folded away — and
// otherwise the general version runs.

bool Lowering::intRange(const ir::Value* v, Range& r) {
  const ir::Type& t = v->type();
  // (Unsigned values compare unsigned: the signed ranges below do not apply.)
  if (t.isPointerLike() || !isInteger(t.dtype()) || t.dtype() == DType::I1 || isUnsigned(t.dtype())) return false;
  // i128 holds every i32/i64 sum and difference of two lanes exactly, so the
  // bounds themselves never wrap; `ok` checks that the IR's arithmetic
  // (modulo 2^bits) did not wrap either.
  llvm::Type* w = b_.getInt128Ty();
  if (!t.isTile()) {
    llvm::Value* s = b_.CreateSExt(scalar(v), w);
    r = {s, s, b_.getTrue()};
    return true;
  }
  const ir::Op* d = v->definingOp();
  if (!d) return false;  // loop-carried tiles: anything
  switch (d->code()) {
    case OpCode::Arange:
      r = {llvm::ConstantInt::get(w, static_cast<uint64_t>(d->intAttr("start")), true),
           llvm::ConstantInt::get(w, static_cast<uint64_t>(d->intAttr("end") - 1), true), b_.getTrue()};
      return true;
    case OpCode::Splat: return intRange(d->operand(0), r);
    case OpCode::Constant: {
      llvm::Value* c = constantOf(*d, w);
      r = {c, c, b_.getTrue()};
      return true;
    }
    case OpCode::Broadcast:
    case OpCode::ExpandDims:
    case OpCode::Reshape: return intRange(d->operand(0), r);
    case OpCode::Add:
    case OpCode::Sub: {
      Range a, b;
      if (!intRange(d->operand(0), a) || !intRange(d->operand(1), b)) return false;
      bool add = d->code() == OpCode::Add;
      llvm::Value* lo = add ? b_.CreateAdd(a.lo, b.lo) : b_.CreateSub(a.lo, b.hi);
      llvm::Value* hi = add ? b_.CreateAdd(a.hi, b.hi) : b_.CreateSub(a.hi, b.lo);
      unsigned bits = scalarTy(t.dtype())->getIntegerBitWidth();
      auto* tmin = llvm::ConstantInt::get(w, llvm::APInt::getSignedMinValue(bits).sext(128));
      auto* tmax = llvm::ConstantInt::get(w, llvm::APInt::getSignedMaxValue(bits).sext(128));
      llvm::Value* inRange = b_.CreateAnd(b_.CreateICmpSGE(lo, tmin), b_.CreateICmpSLE(hi, tmax));
      r = {lo, hi, b_.CreateAnd(b_.CreateAnd(a.ok, b.ok), inRange)};
      return true;
    }
    default: return false;
  }
}

llvm::Value* Lowering::allOnCondition(const ir::Value* m) {
  const ir::Type& t = m->type();
  if (!t.isTile() || t.isPointerLike() || t.dtype() != DType::I1) return nullptr;
  const ir::Op* d = m->definingOp();
  if (!d) return nullptr;
  switch (d->code()) {
    case OpCode::Splat: return scalar(d->operand(0));
    case OpCode::Constant: return constantOf(*d, b_.getInt1Ty());
    case OpCode::Broadcast:
    case OpCode::ExpandDims:
    case OpCode::Reshape: return allOnCondition(d->operand(0));
    case OpCode::And: {
      llvm::Value* a = allOnCondition(d->operand(0));
      llvm::Value* b = a ? allOnCondition(d->operand(1)) : nullptr;
      return b ? b_.CreateAnd(a, b) : nullptr;
    }
    case OpCode::Cmp: {
      Range a, b;
      if (!intRange(d->operand(0), a) || !intRange(d->operand(1), b)) return nullptr;
      const std::string& p = d->strAttr("pred");
      llvm::Value* all;
      if (p == "lt")
        all = b_.CreateICmpSLT(a.hi, b.lo);
      else if (p == "le")
        all = b_.CreateICmpSLE(a.hi, b.lo);
      else if (p == "gt")
        all = b_.CreateICmpSGT(a.lo, b.hi);
      else if (p == "ge")
        all = b_.CreateICmpSGE(a.lo, b.hi);
      else
        return nullptr;
      return b_.CreateAnd(b_.CreateAnd(a.ok, b.ok), all);
    }
    default: return nullptr;
  }
}

void Lowering::collectMasks(const ir::Value* v, std::vector<const ir::Value*>& out,
                            std::unordered_set<const ir::Value*>& seen) {
  if (!v->type().isTile() || !seen.insert(v).second || assumeOn_.count(v)) return;
  const ir::Op* d = v->definingOp();
  // A candidate if some load or store of the kernel uses it as its mask
  // (other selects may well be partial by design: making them part of the
  // test would send every tile down the general path). A loop where such a
  // mask only feeds a select is versioned too: layernorm's variance loop,
  // `where(mask, x - mean, 0)`, runs measurably faster with the select
  // folded away. Operands are still searched (a float compare's operand may
  // be a masked load).
  if (!v->type().isPointerLike() && v->type().dtype() == DType::I1) {
    bool memMask = false;
    for (const ir::Op* u : users_[v]) {
      unsigned idx = u->code() == OpCode::Load ? 1 : ir::maskOperand(u->code());
      bool mem = u->code() == OpCode::Load || u->code() == OpCode::Store || u->code() == OpCode::Copy ||
                 ir::isAtomic(u->code());
      if (mem && u->numOperands() > idx && u->operand(idx) == v) memMask = true;
    }
    if (memMask) out.push_back(v);
  }
  // Only values computed per chunk by the loop: arrays are read as they are.
  if (!d || (arrays_.count(v) && !pending_.count(v))) return;
  if (!fused_.count(v) && !pending_.count(v) && !isFusableDef(d->code())) return;
  if (isExpensive(d->code())) expensiveBody_ = true;
  if (d->code() == OpCode::Load) loadsBody_ = true;
  for (const ir::Value* o : d->operands()) collectMasks(o, out, seen);
}

void Lowering::versioned(std::vector<const ir::Value*> roots, const std::function<void()>& body, llvm::Value* extra,
                         const std::function<void()>& generalBody) {
  const std::function<void()>& general = generalBody ? generalBody : body;
  if (general_) return general();
  std::vector<const ir::Value*> masks;
  std::unordered_set<const ir::Value*> seen;
  expensiveBody_ = false;
  for (const ir::Value* r : roots)
    if (r) collectMasks(r, masks, seen);
  // A loop computing exp, erf, divisions... per chunk is bound by that
  // arithmetic; a second copy of it would cost more compile time (code
  // generation is most of it) than the per-chunk mask tests it saves.
  if (expensiveBody_ && !extra) return body();
  std::vector<const ir::Value*> on;
  llvm::Value* cond = extra;
  for (const ir::Value* m : masks) {
    llvm::Value* c = allOnCondition(m);
    if (!c) continue;
    on.push_back(m);
    cond = cond ? b_.CreateAnd(cond, c) : c;
  }
  if (!cond) return body();
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* fast = llvm::BasicBlock::Create(ctx_, "mask.on", f);
  auto* slow = llvm::BasicBlock::Create(ctx_, "mask.some", f);
  auto* join = llvm::BasicBlock::Create(ctx_, "mask.end", f);
  b_.CreateCondBr(cond, fast, slow);
  b_.SetInsertPoint(fast);
  for (const ir::Value* m : on) assumeOn_.insert(m);
  body();
  for (const ir::Value* m : on) assumeOn_.erase(m);
  memo_.clear();  // chunks computed in one version do not dominate the other
  b_.CreateBr(join);
  b_.SetInsertPoint(slow);
  general_ = true;
  general();
  general_ = false;
  memo_.clear();
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
}

}  // namespace tessera::codegen::cpu::detail

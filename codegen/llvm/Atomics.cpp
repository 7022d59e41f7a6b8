#include "codegen/llvm/Atomics.h"

#include <llvm/IR/Intrinsics.h>

#include "tessera/support/Error.h"

namespace tessera::codegen {

llvm::AtomicOrdering llvmOrder(ir::MemOrder o) {
  switch (o) {
    case ir::MemOrder::Relaxed: return llvm::AtomicOrdering::Monotonic;
    case ir::MemOrder::Acquire: return llvm::AtomicOrdering::Acquire;
    case ir::MemOrder::Release: return llvm::AtomicOrdering::Release;
    case ir::MemOrder::AcqRel: return llvm::AtomicOrdering::AcquireRelease;
  }
  TS_UNREACHABLE("memory order");
}

namespace {

llvm::AtomicRMWInst::BinOp rmwKind(ir::AtomicKind k, DType dt) {
  using B = llvm::AtomicRMWInst;
  const bool fl = isFloat(dt), u = isUnsigned(dt);
  switch (k) {
    case ir::AtomicKind::Add: return fl ? B::FAdd : B::Add;
    // fminimum / fmaximum: NaN-propagating, -0 < +0, like the IR's min/max.
    case ir::AtomicKind::Min: return fl ? B::FMinimum : u ? B::UMin : B::Min;
    case ir::AtomicKind::Max: return fl ? B::FMaximum : u ? B::UMax : B::Max;
    case ir::AtomicKind::And: return B::And;
    case ir::AtomicKind::Or: return B::Or;
    case ir::AtomicKind::Xor: return B::Xor;
    case ir::AtomicKind::Xchg: return B::Xchg;
  }
  TS_UNREACHABLE("atomic kind");
}

/// What an atomic_rmw of `kind` stores, given the old value `a`.
llvm::Value* combine(llvm::IRBuilderBase& b, ir::AtomicKind k, DType dt, llvm::Value* a, llvm::Value* v) {
  const bool fl = isFloat(dt), u = isUnsigned(dt);
  switch (k) {
    case ir::AtomicKind::Add: return fl ? b.CreateFAdd(a, v) : b.CreateAdd(a, v);
    case ir::AtomicKind::Min:
      if (fl) return b.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, a, v);
      return b.CreateSelect(u ? b.CreateICmpULT(a, v) : b.CreateICmpSLT(a, v), a, v);
    case ir::AtomicKind::Max:
      if (fl) return b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, a, v);
      return b.CreateSelect(u ? b.CreateICmpUGT(a, v) : b.CreateICmpSGT(a, v), a, v);
    case ir::AtomicKind::And: return b.CreateAnd(a, v);
    case ir::AtomicKind::Or: return b.CreateOr(a, v);
    case ir::AtomicKind::Xor: return b.CreateXor(a, v);
    case ir::AtomicKind::Xchg: return v;
  }
  TS_UNREACHABLE("atomic kind");
}

/// cmpxchg's failure order: the success order without its release part (a
/// failed compare writes nothing).
llvm::AtomicOrdering failureOrder(ir::MemOrder o) {
  return ir::acquires(o) ? llvm::AtomicOrdering::Acquire : llvm::AtomicOrdering::Monotonic;
}

}  // namespace

llvm::Value* emitAtomicRmw(llvm::IRBuilderBase& b, ir::AtomicKind kind, DType dt, llvm::Value* p, llvm::Value* v,
                           ir::MemOrder order, llvm::SyncScope::ID scope) {
  return b.CreateAtomicRMW(rmwKind(kind, dt), p, v, llvm::MaybeAlign(), llvmOrder(order), scope);
}

llvm::Value* emitAtomicRmwByCas(llvm::IRBuilderBase& b, ir::AtomicKind kind, DType dt, llvm::Value* p, llvm::Value* v,
                                ir::MemOrder order, llvm::SyncScope::ID scope) {
  llvm::Type* vt = v->getType();
  llvm::Type* it = b.getIntNTy(vt->getPrimitiveSizeInBits().getFixedValue());
  const llvm::Align align(vt->getPrimitiveSizeInBits().getFixedValue() / 8);
  llvm::LoadInst* first = b.CreateAlignedLoad(it, p, align);
  first->setAtomic(llvm::AtomicOrdering::Monotonic, scope);
  llvm::BasicBlock* entry = b.GetInsertBlock();
  llvm::Function* f = entry->getParent();
  auto* loop = llvm::BasicBlock::Create(b.getContext(), "atomic.cas", f);
  auto* done = llvm::BasicBlock::Create(b.getContext(), "atomic.cas.end", f);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode* seen = b.CreatePHI(it, 2);
  seen->addIncoming(first, entry);
  llvm::Value* want = b.CreateBitCast(combine(b, kind, dt, b.CreateBitCast(seen, vt), v), it);
  llvm::Value* pair = b.CreateAtomicCmpXchg(p, seen, want, align, llvmOrder(order), failureOrder(order), scope);
  llvm::Value* now = b.CreateExtractValue(pair, 0);
  seen->addIncoming(now, b.GetInsertBlock());
  b.CreateCondBr(b.CreateExtractValue(pair, 1), done, loop);
  b.SetInsertPoint(done);
  return b.CreateBitCast(now, vt);
}

llvm::Value* emitAtomicElement(llvm::IRBuilderBase& b, const ir::Op& op, DType dt, llvm::Value* p, llvm::Value* v,
                               llvm::Value* cmp, llvm::SyncScope::ID scope) {
  const llvm::AtomicOrdering order = llvmOrder(ir::memOrder(op));
  if (op.code() == ir::OpCode::AtomicRmw)
    return emitAtomicRmw(b, ir::atomicKind(op), dt, p, v, ir::memOrder(op), scope);
  TS_ASSERT(op.code() == ir::OpCode::AtomicCas && cmp, "emitAtomicElement on " + std::string(op.name()));
  // cmpxchg compares integers: floats are compared by their bits (IR.h).
  llvm::Type* vt = v->getType();
  llvm::Type* it = b.getIntNTy(vt->getPrimitiveSizeInBits().getFixedValue());
  llvm::Value* pair = b.CreateAtomicCmpXchg(p, b.CreateBitCast(cmp, it), b.CreateBitCast(v, it), llvm::MaybeAlign(),
                                            order, failureOrder(ir::memOrder(op)), scope);
  return b.CreateBitCast(b.CreateExtractValue(pair, 0), vt);
}

}  // namespace tessera::codegen

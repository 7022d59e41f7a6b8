// Control flow (for, if, yield) and the per-op dispatch, including buffers
// and local memory (alloc, local_load/local_store, copy, buffer_slot).
#include "codegen/cpu/CpuLowerImpl.h"
#include "codegen/llvm/Atomics.h"
#include "codegen/llvm/ForLoop.h"

#include <llvm/IR/Intrinsics.h>

namespace tessera::codegen::cpu::detail {

// ============================================================== control flow

void Lowering::emitFor(const ir::Op& op) {
  llvm::Value* lo = scalar(op.operand(0));
  llvm::Value* hi = scalar(op.operand(1));
  llvm::Value* step = scalar(op.operand(2));
  std::vector<llvm::Value*> storage;
  for (unsigned i = 0; i < op.numResults(); ++i) {
    const ir::Value* init = op.operand(3 + i);
    if (init->type().isTile()) {
      storage.push_back(allocTile(init->type()));
      writeTile(storage.back(), init);
    } else {
      storage.push_back(entryAlloca(elemTy(init->type())));
      b_.CreateStore(scalar(init), storage.back());
    }
  }
  // Carried values live in memory (`storage`): no phis beyond the iv.
  ForLoop loop = ForLoop::open(b_, lo, step);
  loop.enterBody(b_, hi);
  llvm::PHINode* iv = loop.iv;
  const ir::Block& blk = op.region(0).block();
  scalars_[blk.arg(0)] = iv;
  for (unsigned i = 0; i < op.numResults(); ++i) {
    const ir::Value* a = blk.arg(i + 1);
    if (a->type().isTile())
      arrays_[a] = storage[i];
    else
      scalars_[a] = b_.CreateLoad(elemTy(a->type()), storage[i]);
  }
  yieldTargets_.push_back({storage, true});
  emitBlock(blk);
  yieldTargets_.pop_back();
  loop.close(b_, step);
  bindResults(op, storage);
}

// The results of a for / if live in `storage` (one tile array or scalar
// slot each): tiles are read from their arrays, scalars loaded once here.
void Lowering::bindResults(const ir::Op& op, const std::vector<llvm::Value*>& storage) {
  for (unsigned i = 0; i < op.numResults(); ++i) {
    const ir::Value* r = op.result(i);
    if (r->type().isTile())
      arrays_[r] = storage[i];
    else
      scalars_[r] = b_.CreateLoad(elemTy(r->type()), storage[i]);
  }
}

// A do-while over scalars: the carried values and the condition live in
// memory like a for's, so the yield writes them as it does for a for.
void Lowering::emitWhile(const ir::Op& op) {
  std::vector<llvm::Value*> storage{entryAlloca(b_.getInt1Ty())};
  for (unsigned i = 0; i < op.numResults(); ++i) {
    storage.push_back(entryAlloca(elemTy(op.operand(i)->type())));
    b_.CreateStore(scalar(op.operand(i)), storage.back());
  }
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* bodyBB = llvm::BasicBlock::Create(ctx_, "while.body", f);
  auto* endBB = llvm::BasicBlock::Create(ctx_, "while.end", f);
  b_.CreateBr(bodyBB);
  b_.SetInsertPoint(bodyBB);
  const ir::Block& blk = op.region(0).block();
  for (unsigned i = 0; i < op.numResults(); ++i)
    scalars_[blk.arg(i)] = b_.CreateLoad(elemTy(blk.arg(i)->type()), storage[i + 1]);
  yieldTargets_.push_back({storage, true});
  emitBlock(blk);
  yieldTargets_.pop_back();
  b_.CreateCondBr(b_.CreateLoad(b_.getInt1Ty(), storage[0]), bodyBB, endBB);
  b_.SetInsertPoint(endBB);
  bindResults(op, std::vector<llvm::Value*>(storage.begin() + 1, storage.end()));
}

void Lowering::emitIf(const ir::Op& op) {
  std::vector<llvm::Value*> storage;
  for (unsigned i = 0; i < op.numResults(); ++i) {
    const ir::Type& t = op.result(i)->type();
    storage.push_back(t.isTile() ? allocTile(t) : entryAlloca(elemTy(t)));
  }
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* thenBB = llvm::BasicBlock::Create(ctx_, "if.then", f);
  auto* elseBB = llvm::BasicBlock::Create(ctx_, "if.else", f);
  auto* endBB = llvm::BasicBlock::Create(ctx_, "if.end", f);
  b_.CreateCondBr(scalar(op.operand(0)), thenBB, elseBB);
  for (unsigned r = 0; r < 2; ++r) {
    b_.SetInsertPoint(r == 0 ? thenBB : elseBB);
    if (r < op.numRegions()) {
      yieldTargets_.push_back({storage, false});
      emitBlock(op.region(r).block());
      yieldTargets_.pop_back();
    }
    b_.CreateBr(endBB);
  }
  b_.SetInsertPoint(endBB);
  bindResults(op, storage);
}

void Lowering::emitYield(const ir::Op& op) {
  TS_ASSERT(!yieldTargets_.empty(), "yield outside a region");
  const YieldTarget& t = yieldTargets_.back();
  TS_ASSERT(t.storage.size() == op.numOperands(), "yield arity");
  // First compute everything (tiles that are not yet arrays go to
  // temporaries), then write the storage: a yielded value may read the
  // storage of another carried value.
  std::vector<llvm::Value*> vals(op.numOperands());
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    const ir::Value* v = op.operand(i);
    if (!v->type().isTile()) {
      vals[i] = scalar(v);
    } else if (t.viaTemps && !arrays_.count(v)) {
      materialize(v);
    }
  }
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    const ir::Value* v = op.operand(i);
    if (v->type().isTile())
      writeTile(t.storage[i], v);
    else
      b_.CreateStore(vals[i], t.storage[i]);
  }
}

// ======================================================================= ops

void Lowering::emitBlock(const ir::Block& blk) {
  for (auto& op : blk.ops()) emitOp(*op);
}

void Lowering::emitOp(const ir::Op& op) {
  // Restored on return: a region's ops are emitted inside their parent's.
  struct Current {
    const ir::Op*& slot;
    const ir::Op* saved;
    ~Current() { slot = saved; }
  } current{curOp_, curOp_};
  curOp_ = &op;
  if (checkedOps_) emitBoundsCheck(op);
  switch (op.code()) {
    case OpCode::ProgramId: scalars_[op.result()] = pid_[op.intAttr("axis")]; return;
    case OpCode::NumPrograms: scalars_[op.result()] = grid_[op.intAttr("axis")]; return;
    // The CPU has no clusters (compile() refuses one): each program is a
    // cluster of one, whose only member is itself.
    case OpCode::ClusterRank: scalars_[op.result()] = b_.getInt32(0); return;
    case OpCode::ClusterSize: scalars_[op.result()] = b_.getInt32(1); return;
    // The CPU's programs are not scheduled by hardware that could hand one
    // to another: nothing is cancelled, each program does its own work.
    case OpCode::CancelProgram: scalars_[op.result()] = b_.getInt32(-1); return;
    case OpCode::RemoteBuffer:
      arrays_[op.result()] = arrays_.at(op.operand(0));
      if (slotViews_.count(op.operand(0))) slotViews_.insert(op.result());
      return;
    case OpCode::Load:
      // No effect to keep if unused; fused and deferred loads are emitted
      // by their consumer.
      if (uses_[op.result()] == 0 || fused_.count(op.result()) || deferred_.count(op.result())) return;
      return emitLoad(op);
    case OpCode::Store: return emitStore(op);
    case OpCode::AtomicRmw:
    case OpCode::AtomicCas: return emitAtomic(op);
    case OpCode::Probe: return emitProbe(op);
    case OpCode::Assert: return emitAssert(op);
    case OpCode::Fence:
      // A program is one thread here: only other programs (threads) and the
      // host observe it, so every scope is the system scope.
      b_.CreateFence(codegen::llvmOrder(ir::memOrder(op)));
      return;
    case OpCode::Alloc: arrays_[op.result()] = allocTile(op.result()->type()); return;
    case OpCode::LocalLoad: {
      // A copy: later local_stores must not change this value.
      llvm::Value* arr = allocTile(op.result()->type());
      const ir::Value* buf = op.operand(0);
      arrays_[op.result()] = arr;
      uint64_t elem = mod_.getDataLayout().getTypeAllocSize(memTy(buf->type().dtype()));
      uint64_t bytes = static_cast<uint64_t>(numElems(buf->type())) * elem;
      // A slot view starts at index * slot bytes: only element-aligned.
      llvm::Align srcAlign(slotViews_.count(buf) ? elem : 64);
      b_.CreateMemCpy(arr, llvm::MaybeAlign(64), arrays_.at(buf), srcAlign, bytes);
      return;
    }
    case OpCode::LocalStore: return writeTile(arrays_.at(op.operand(0)), op.operand(1));
    // `copy {async = 1}` may complete at any time up to the async_wait that
    // retires it; completing it right here, in program order, is one of the
    // allowed executions (masked-off lanes load 0, as the model requires).
    case OpCode::Copy: return emitLoad(op, arrays_.at(op.operand(0)));
    case OpCode::BufferSlot: {
      // A view: the slot's elements are the contiguous run starting at
      // index * (elements per slot) of the buffer's row-major array.
      const ir::Value* buf = op.operand(0);
      llvm::Value* idx = b_.CreateSExtOrTrunc(scalar(op.operand(1)), b_.getInt64Ty());
      llvm::Value* off = b_.CreateMul(idx, i64(numElems(op.result()->type())));
      arrays_[op.result()] = b_.CreateGEP(storageTy(buf->type()), arrays_.at(buf), off);
      slotViews_.insert(op.result());
      return;
    }
    // Every copy has completed when it was issued (above): nothing to wait for.
    case OpCode::AsyncCommit:
    case OpCode::AsyncWait: return;
    case OpCode::Barrier:
    case OpCode::ClusterBarrier:
      return;  // one thread runs a whole program on the CPU
    // A producer running beside its consumer needs threads: the CPU's one
    // thread per program would wait for itself.
    case OpCode::WarpSpecialize:
    case OpCode::StageAcquire:
    case OpCode::StageCommit:
    case OpCode::StageWait:
    case OpCode::StageRelease:
      throw CompileError(op.loc().str() + ": '" + op.name() +
                         "' needs a GPU target with tensor copies (nvptx:sm_90a); on the CPU a warp-specialised "
                         "for_pipelined keeps the usual schedule (the compiler does not warp-specialise for it)");
    case OpCode::Reduce: {
      auto d = deferredAt_.find(&op);
      if (d == deferredAt_.end()) return emitReduce(op);
      for (const ir::Value* v : d->second) pending_[v] = allocTile(v->type());
      emitReduce(op);
      for (const ir::Value* v : d->second) arrays_[v] = pending_.at(v);
      pending_.clear();
      memo_.clear();
      return;
    }
    case OpCode::Scan: return emitScan(op);
    case OpCode::Gather: return emitGather(op);
    case OpCode::Join: return emitJoin(op);
    case OpCode::Split: return emitSplit(op);
    case OpCode::Dot: return emitDot(op);
    case OpCode::For: return emitFor(op);
    case OpCode::If: return emitIf(op);
    case OpCode::While: return emitWhile(op);
    case OpCode::Yield: return emitYield(op);
    // A dot completes where it is issued on the CPU: the wait hands back
    // its operands (copied: the result outlives a loop's carried storage).
    case OpCode::DotWait:
      for (unsigned i = 0; i < op.numOperands(); ++i) {
        const ir::Value* v = op.operand(i);
        if (!v->type().isTile()) {
          scalars_[op.result(i)] = scalar(v);
          continue;
        }
        llvm::Value* s = allocTile(v->type());
        writeTile(s, v);
        arrays_[op.result(i)] = s;
      }
      return;
    case OpCode::Return:
      b_.CreateRetVoid();
      b_.ClearInsertionPoint();
      return;
    case OpCode::Transpose:
      if (!arrays_.count(op.operand(0))) TS_UNREACHABLE("transpose source not materialised");
      if (uses_[op.result()]) materialize(op.result());
      return;
    default: break;
  }
  TS_ASSERT(isFusableDef(op.code()), std::string("cpu lowering: unhandled op ") + op.name());
  const ir::Value* r = op.result();
  if (!r->type().isTile()) {
    if (op.code() == OpCode::Constant) {
      scalars_[r] = constantOf(op, elemTy(r->type()));
      return;
    }
    std::vector<llvm::Value*> v;
    for (const ir::Value* o : op.operands()) v.push_back(scalar(o));
    scalars_[r] = elementwise(op, std::move(v));
    return;
  }
  if (fused_.count(r) || deferred_.count(r) || uses_[r] == 0) return;  // emitted by its consumer / dead
  materialize(r);
}

}  // namespace tessera::codegen::cpu::detail

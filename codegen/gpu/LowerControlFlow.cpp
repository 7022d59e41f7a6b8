// Control flow (for, if) and the op dispatch (emitOp), which also lowers the
// small ops of its own: program ids, allocs, shared loads, async groups.

#include <vector>

#include <llvm/IR/Intrinsics.h>

#include "codegen/gpu/LowerImpl.h"
#include "codegen/llvm/ForLoop.h"

namespace tessera::codegen::gpu_lower {

// ============================================================== control flow

void Lower::emitFor(const ir::Op& op) {
  // A body that writes no global memory leaves unordered only the global
  // writes from before the loop (at its start the flags are otherwise
  // assumed set).
  const bool globalBefore = globalDirty_;
  flushStaged(INT64_MAX);  // (c): the prologue's copies land before the loop
  stageHoistedOperands(op);
  llvm::Value* lo = scalar(op.operand(0));
  llvm::Value* hi = scalar(op.operand(1));
  llvm::Value* step = scalar(op.operand(2));
  const ir::Block& blk = op.region(0).block();
  unsigned n = op.numResults();
  // Flattened carried state: scalars, then the slots of each tile.
  std::vector<Slots> inits(n);
  for (unsigned i = 0; i < n; ++i) {
    const ir::Value* v = op.operand(3 + i);
    inits[i] = v->type().isTile() ? tileIn(v, la_.get(blk.arg(i + 1))) : Slots{scalar(v)};
  }
  ForLoop loop = ForLoop::open(b_, lo, step);
  llvm::PHINode* iv = loop.iv;
  llvm::BasicBlock* pre = loop.pre;
  std::vector<std::vector<llvm::PHINode*>> phis(n);
  for (unsigned i = 0; i < n; ++i)
    for (llvm::Value* x : inits[i]) {
      llvm::PHINode* p = b_.CreatePHI(x->getType(), 2);
      p->addIncoming(x, pre);
      phis[i].push_back(p);
    }
  loop.enterBody(b_, hi);
  unknownOrder();
  if (!writesGlobal(blk)) globalDirty_ = globalBefore;
  scalars_[blk.arg(0)] = iv;
  for (unsigned i = 0; i < n; ++i) {
    const ir::Value* a = blk.arg(i + 1);
    if (a->type().isTile())
      tiles_[a] = TileV{la_.get(a), Slots(phis[i].begin(), phis[i].end())};
    else
      scalars_[a] = phis[i][0];
  }
  auto ys = emitLoopBody(op, blk);
  TS_ASSERT(ys.size() == n, "for: yield arity");
  llvm::BasicBlock* latch = loop.close(b_, step);
  for (unsigned i = 0; i < n; ++i)
    for (size_t j = 0; j < phis[i].size(); ++j) phis[i][j]->addIncoming(ys[i].second[j], latch);
  unknownOrder();
  for (unsigned i = 0; i < n; ++i) {
    Slots r;
    for (size_t j = 0; j < phis[i].size(); ++j) {
      llvm::PHINode* p = b_.CreatePHI(phis[i][j]->getType(), 2);
      p->addIncoming(phis[i][j], loop.header);
      p->addIncoming(ys[i].second[j], latch);
      r.push_back(p);
    }
    bindResult(op.result(i), std::move(r));
  }
}

// A do-while over scalars (the verifier refuses tiles): the body's block
// takes the carried values as phis, its latch branches back while the
// condition holds. The order flags are reset as for a for's body, which
// is entered from before the loop and from its own end.
void Lower::emitWhile(const ir::Op& op) {
  flushStaged(INT64_MAX);  // (c): values staged before do not dominate the exit
  const ir::Block& blk = op.region(0).block();
  const unsigned n = op.numResults();
  std::vector<llvm::Value*> inits;
  for (unsigned i = 0; i < n; ++i) inits.push_back(scalar(op.operand(i)));
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* body = llvm::BasicBlock::Create(ctx_, "while.body", fn);
  auto* exit = llvm::BasicBlock::Create(ctx_, "while.end", fn);
  b_.CreateBr(body);
  b_.SetInsertPoint(body);
  std::vector<llvm::PHINode*> phis;
  for (unsigned i = 0; i < n; ++i) {
    phis.push_back(b_.CreatePHI(inits[i]->getType(), 2));
    phis.back()->addIncoming(inits[i], pre);
    scalars_[blk.arg(i)] = phis.back();
  }
  unknownOrder();
  auto ys = emitLoopBody(op, blk);
  TS_ASSERT(ys.size() == n + 1, "while: yield arity");
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  b_.CreateCondBr(ys[0].second[0], body, exit);
  for (unsigned i = 0; i < n; ++i) phis[i]->addIncoming(ys[i + 1].second[0], latch);
  b_.SetInsertPoint(exit);
  unknownOrder();
  for (unsigned i = 0; i < n; ++i) scalars_[op.result(i)] = ys[i + 1].second[0];
}

// A loop's body, up to its back edge: what its yield gives, per operand.
std::vector<std::pair<const ir::Value*, Slots>> Lower::emitLoopBody(const ir::Op& loop, const ir::Block& body) {
  yields_.emplace_back();
  emitBlock(body);
  flushStaged(INT64_MAX, /*endOfBody=*/true);  // (b): before the back edge
  setCurrentOp(loop);
  auto ys = std::move(yields_.back());
  yields_.pop_back();
  return ys;
}

// A for / if result from the phis that merge it: a tile in its layout, or
// the one slot of a scalar.
void Lower::bindResult(const ir::Value* res, Slots merged) {
  if (res->type().isTile())
    tiles_[res] = TileV{la_.get(res), std::move(merged)};
  else
    scalars_[res] = merged[0];
}

void Lower::emitIf(const ir::Op& op) {
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  auto* thenBB = llvm::BasicBlock::Create(ctx_, "if.then", fn);
  auto* elseBB = llvm::BasicBlock::Create(ctx_, "if.else", fn);
  auto* endBB = llvm::BasicBlock::Create(ctx_, "if.end", fn);
  // (c): a region's staged values do not dominate the code after the `if`.
  flushStaged(INT64_MAX);
  b_.CreateCondBr(scalar(op.operand(0)), thenBB, elseBB);
  bool sd = smemDirty_, gd = globalDirty_;
  std::vector<std::pair<llvm::BasicBlock*, std::vector<Slots>>> ends;
  for (unsigned r = 0; r < 2; ++r) {
    b_.SetInsertPoint(r == 0 ? thenBB : elseBB);
    smemDirty_ = sd;
    globalDirty_ = gd;
    std::vector<Slots> vals;
    if (r < op.numRegions()) {
      yields_.emplace_back();
      emitBlock(op.region(r).block());
      flushStaged(INT64_MAX);
      setCurrentOp(op);
      for (auto& y : yields_.back()) vals.push_back(y.second);
      yields_.pop_back();
    }
    ends.emplace_back(b_.GetInsertBlock(), std::move(vals));
    b_.CreateBr(endBB);
  }
  b_.SetInsertPoint(endBB);
  unknownOrder();
  for (unsigned i = 0; i < op.numResults(); ++i) {
    Slots r;
    for (size_t j = 0; j < ends[0].second[i].size(); ++j) {
      llvm::PHINode* p = b_.CreatePHI(ends[0].second[i][j]->getType(), 2);
      for (auto& e : ends) p->addIncoming(e.second[i][j], e.first);
      r.push_back(p);
    }
    bindResult(op.result(i), std::move(r));
  }
}

// ======================================================================= ops

void Lower::emitOp(const ir::Op& op) {
  if (op.numResults() == 1 && (elided_.count(op.result()) || elidedLoads_.count(op.result())))
    return;  // re-derived by its consumers / read by the dots from shared memory
  setCurrentOp(op);
  // The producer's tile values are address arithmetic that its tensor
  // copies evaluate symbolically (ir::matchTiledAccess): nothing to emit.
  if (inProducer_ && !ir::hasSideEffects(op.code()) && op.numResults() == 1 && op.result()->type().isTile()) return;
  switch (op.code()) {
    case OpCode::WarpSpecialize: return emitWarpSpecialize(op);
    case OpCode::StageAcquire:
    case OpCode::StageCommit:
    case OpCode::StageWait:
    case OpCode::StageRelease: return emitStageOp(op);
    case OpCode::ProgramId: scalars_[op.result()] = t_.blockId(b_, static_cast<int>(op.intAttr("axis"))); return;
    case OpCode::NumPrograms: scalars_[op.result()] = t_.gridDim(b_, static_cast<int>(op.intAttr("axis"))); return;
    // A cluster of one (the default, and every target without clusters) is
    // the block itself: rank 0, its own shared memory, its own barrier.
    case OpCode::ClusterRank: scalars_[op.result()] = clustered() ? t_.clusterRank(b_) : b_.getInt32(0); return;
    case OpCode::ClusterSize:
      scalars_[op.result()] = b_.getInt32(static_cast<uint32_t>(t_.options().clusterBlocks()));
      return;
    case OpCode::CancelProgram: return emitCancelProgram(op);
    case OpCode::RemoteBuffer:
      scalars_[op.result()] =
          clustered() ? t_.mapShared(b_, scalar(op.operand(0)), scalar(op.operand(1))) : scalar(op.operand(0));
      return;
    case OpCode::ClusterBarrier: return emitClusterBarrier(op);
    case OpCode::Load: return emitLoad(op);
    case OpCode::Store: return emitStore(op);
    case OpCode::AtomicRmw:
    case OpCode::AtomicCas: return emitAtomic(op);
    case OpCode::Fence: return emitFence(op);
    case OpCode::Probe: return emitProbe(op);
    case OpCode::Assert: return emitAssert(op);
    case OpCode::Alloc:
      // The buffer's bytes may have been an earlier op's scratch (the plan
      // reuses bytes of areas whose live ranges are disjoint). A program-
      // order access would wait for a barrier by itself (beforeShared), but
      // the async copies into the buffer do not (their ordering is the
      // schedule's): separate them from the earlier accesses here, once.
      if (smemDirty_) barrier();
      // (A buffer stored for wgmma starts at its swizzle's alignment, as the
      // plan places it: placeAreas checks.)
      scalars_[op.result()] = areaAt(AreaKind::Buffer, op.result());
      return;
    case OpCode::LocalLoad: {
      const ir::Value* buf = op.operand(0);
      const ir::Layout& l = la_.get(op.result());
      const auto& shape = buf->type().shape();
      ir::SlotTable t = ir::slotTable(l, shape);
      llvm::Type* mt = memTyOf(buf->type().dtype());
      beforeShared();
      Slots bs = bases(l, t);
      Slots r;
      for (size_t i = 0; i < t.size(); ++i)
        r.push_back(
            fromMem(b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, scalar(buf), bufIndex(buf, indexOf(bs, t, i), shape))),
                    op.result()->type()));
      tiles_[op.result()] = TileV{l, std::move(r)};
      return;
    }
    case OpCode::LocalStore: {
      proxyPending_ = true;
      const TileV& v = tile(op.operand(1));
      return writeBuffer(op.operand(0), v.slots, v.layout);
    }
    case OpCode::Copy: proxyPending_ = true; return emitCopy(op);
    case OpCode::BufferSlot: {
      // A view: slot i is the contiguous run at i * (elements per slot) of
      // the buffer's row-major shared array; no code beyond the address.
      const ir::Value* buf = op.operand(0);
      llvm::Type* mt = memTyOf(buf->type().dtype());
      // S-1 physical slots of a register-staged pipeline: see planFewerSlots.
      llvm::Value* idx = fewer(buf) ? physicalSlot(op)
                                    : checkSlotIndex(op, b_.CreateSExtOrTrunc(scalar(op.operand(1)), b_.getInt32Ty()));
      auto sg = storage_.find(buf);  // a padded staging layout makes slots longer
      int64_t slotElems = sg != storage_.end() ? sg->second.slotElems() : op.result()->type().numElements();
      llvm::Value* off = b_.CreateMul(idx, b_.getInt32(static_cast<uint32_t>(slotElems)));
      scalars_[op.result()] = b_.CreateInBoundsGEP(mt, scalar(buf), off);
      return;
    }
    // Groups: see emitCopy. With the synchronous lowering every copy has
    // completed where it was issued, so there is nothing to wait for.
    case OpCode::AsyncCommit:
      if (t_.asyncCopyImpl() == AsyncCopyImpl::Hardware && !onlyTensorCopies_) t_.asyncCommit(b_);
      tmaCommit();
      ++committed_;
      return;
    case OpCode::AsyncWait: {
      proxyPending_ = true;
      int64_t pending = op.intAttr("pending");
      TS_ASSERT(pending >= 0, "async_wait with a negative count");
      switch (t_.asyncCopyImpl()) {
        case AsyncCopyImpl::Hardware:
          if (!onlyTensorCopies_) t_.asyncWait(b_, static_cast<unsigned>(pending));
          tmaWait(op);
          // The retired copies wrote shared memory after any earlier access
          // of the lowering: order the next shared access behind a barrier.
          smemDirty_ = true;
          return;
        case AsyncCopyImpl::RegisterStaged: return flushStaged(committed_ - pending);
        case AsyncCopyImpl::Synchronous: return;
      }
      return;
    }
    case OpCode::Barrier:
      // Slots that wgmma reads through the async proxy were written by the
      // generic one (cp.async, local_store): fenced before the barrier that
      // publishes them (a barrier with no write since the last one, the
      // schedule's slot-reuse barrier after the dot, needs none).
      if (asyncProxySlots_ && proxyPending_) t_.sharedToAsyncProxyFence(b_);
      proxyPending_ = false;
      if (redundantSlotBarrier(op)) return;
      barrier(pipelineSlotBarrier(op));
      return;
    case OpCode::Reduce: return emitReduce(op);
    case OpCode::Scan: return emitScan(op);
    case OpCode::Gather: return emitGather(op);
    case OpCode::Join: return emitJoin(op);
    case OpCode::Split: return emitSplit(op);
    case OpCode::Dot: return emitDot(op);
    case OpCode::DotWait: return emitDotWait(op);
    case OpCode::For: return emitFor(op);
    case OpCode::If: return emitIf(op);
    case OpCode::While: return emitWhile(op);
    case OpCode::Yield: {
      TS_ASSERT(!yields_.empty(), "yield outside a region");
      const ir::Op* parent = op.parent()->parentOp();
      TS_ASSERT(parent != nullptr, "yield in the kernel body");
      for (unsigned i = 0; i < op.numOperands(); ++i) {
        const ir::Value* v = op.operand(i);
        Slots s;
        if (v->type().isTile()) {
          // Carried / result layout: the for's block argument, the if's result.
          TS_ASSERT(parent->code() != OpCode::While, "a while loop carrying a tile");
          const ir::Value* target =
              parent->code() == OpCode::For ? parent->region(0).block().arg(i + 1) : parent->result(i);
          s = tileIn(v, la_.get(target));
        } else {
          s = {scalar(v)};
        }
        yields_.back().emplace_back(v, std::move(s));
      }
      return;
    }
    case OpCode::Return:
      flushStaged(INT64_MAX);  // (c): nothing may be in flight at return
      freeAccumulators();
      b_.CreateRetVoid();
      b_.ClearInsertionPoint();
      return;
    default: break;
  }
  emitElementwiseLike(op);
}

void Lower::emitClusterBarrier(const ir::Op& op) {
  // Every thread of every block arrives: warps split into a producer and
  // consumers wait at different points, and would never all meet here.
  if (inProducer_ || consumersOnly_)
    throw CompileError(op.loc().str() +
                       ": error: cluster_barrier in a warp-specialised loop, whose producer and consumer warps run "
                       "apart; place it before or after the loop");
  if (asyncProxySlots_ && proxyPending_) t_.sharedToAsyncProxyFence(b_);
  proxyPending_ = false;
  if (!clustered()) return barrier();
  // Release and acquire at cluster scope: it orders the block's shared and
  // global effects as a block barrier does, and the other blocks' too.
  t_.clusterBarrier(b_);
  smemDirty_ = globalDirty_ = false;
}

}  // namespace tessera::codegen::gpu_lower

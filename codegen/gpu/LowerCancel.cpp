// cancel_program (IR.h, "Cancelling programs"): where the target can cancel
// blocks that have not started (Targets.def's clc column: NVIDIA's cluster
// launch control), one thread asks the hardware for one and every thread
// reads the answer; elsewhere nothing is ever cancelled (-1).
//
// The request writes a 16-byte response asynchronously and completes its
// bytes on an mbarrier of its own, both in the Barriers area after the
// tensor copies' and the accumulators' (cancelOffset). Requests are made
// one at a time by the program (the op is uniform), so one barrier and one
// response suffice: each request waits for its own phase (a per-thread
// count of requests gives the parity), and a block barrier after every
// thread read the response keeps the next request from overwriting it
// early.
#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

void Lower::planCancel() {
  cancels_ = false;
  if (!t_.row().clusterLaunchControl || clustered()) return;
  ir::walk(const_cast<ir::Function&>(f_).body(),
           [&](ir::Op& op) { cancels_ = cancels_ || op.code() == OpCode::CancelProgram; });
}

void Lower::initCancel() {
  if (!cancels_) return;
  {
    llvm::IRBuilderBase::InsertPointGuard g(b_);
    llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
    b_.SetInsertPoint(&entry, entry.getFirstInsertionPt());
    cancelRequests_ = b_.CreateAlloca(b_.getInt32Ty(), nullptr, "cancel.count");
  }
  b_.CreateStore(i32(0), cancelRequests_);
  guarded(b_.CreateICmpEQ(tid_, i32(0)), [&] {
    t_.mbarrierInit(b_, areaAt(AreaKind::Barriers, nullptr, cancelOffset() + 16), 1);
    t_.mbarrierInitFence(b_);
  });
  barrier();
}

void Lower::emitCancelProgram(const ir::Op& op) {
  // The producer and the consumers of a warp-specialised loop run apart:
  // the request's block barrier would never gather them.
  if (inProducer_ || consumersOnly_)
    throw CompileError(op.loc().str() +
                       ": error: cancel_program in a warp-specialised loop, whose producer and consumer warps run "
                       "apart; ask for the next program outside the loop");
  if (!cancels_) {
    scalars_[op.result()] = i32(-1);
    return;
  }
  // A grid of more than one axis never asks: the cancelled block's other
  // coordinates would differ from the caller's, which the program ids it
  // reads go on naming (IR.h).
  llvm::Value* oneAxis =
      b_.CreateAnd(b_.CreateICmpEQ(t_.gridDim(b_, 1), i32(1)), b_.CreateICmpEQ(t_.gridDim(b_, 2), i32(1)));
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* from = b_.GetInsertBlock();
  auto* ask = llvm::BasicBlock::Create(ctx_, "cancel.ask", fn);
  auto* join = llvm::BasicBlock::Create(ctx_, "cancel.end", fn);
  b_.CreateCondBr(oneAxis, ask, join);
  b_.SetInsertPoint(ask);
  llvm::Value* response = areaAt(AreaKind::Barriers, nullptr, cancelOffset());
  llvm::Value* bar = areaAt(AreaKind::Barriers, nullptr, cancelOffset() + 16);
  llvm::Value* n = b_.CreateLoad(b_.getInt32Ty(), cancelRequests_);
  b_.CreateStore(b_.CreateAdd(n, i32(1)), cancelRequests_);
  // The barrier's expect_tx and arrival are made by a lane the converged
  // warp 0 elects (as for tensor copies); lane 0 makes the request between
  // them, so the arrival follows it.
  guarded(issuingWarp(), [&] {
    t_.mbarrierExpectTx(b_, bar, i32(16));
    guarded(b_.CreateICmpEQ(lane_, i32(0)), [&] { t_.tryCancel(b_, response, bar); });
    t_.mbarrierArrive(b_, bar);
  });
  t_.mbarrierWait(b_, bar, b_.CreateAnd(n, i32(1)));
  llvm::Value* answer = b_.CreateAlignedLoad(b_.getInt128Ty(), response, llvm::Align(16), "cancel.response");
  barrier();  // every thread read it before the next request overwrites it
  llvm::Value* block = t_.cancelledBlock(b_, answer);
  llvm::BasicBlock* asked = b_.GetInsertBlock();
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
  llvm::PHINode* r = b_.CreatePHI(b_.getInt32Ty(), 2, "cancelled");
  r->addIncoming(i32(-1), from);
  r->addIncoming(block, asked);
  scalars_[op.result()] = r;
}

}  // namespace tessera::codegen::gpu_lower

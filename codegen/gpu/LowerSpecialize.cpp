// Warp-specialised pipelines (IR.h, "Warp-specialised pipelines"; the
// `warp-specialize` pass builds them): producer warps issue the channel's
// tensor copies while the kernel's own warps (the consumers) only compute,
// handing slots over through two mbarriers per slot.
//
// Block. The layouts' numWarps warps are the consumers; `warps` more follow
// them (one, or a warpgroup where the registers are traded: below). At the
// kernel's start every thread takes part in
// initialising the barriers; then the producer warps branch to their own
// code (built when the lowering reaches `warp_specialize`, from the kernel's
// arguments only, which the verifier guarantees) and never meet the
// consumers again: every later block barrier is a counted one of the
// consumer threads (`bar.sync 1, 32 * numWarps`).
//
// Channel. Slot s has full[s] (1 arrival: the producer's, plus the bytes
// of its tensor copies) and empty[s] (one arrival per consumer warp).
//   stage_acquire(s): wait for empty[s]'s phase of the round before (the
//     first round passes at once: parity 1 of a fresh barrier);
//   copies, then stage_commit(s): one lane fences, announces the bytes on
//     full[s], issues the boxes and arrives (flushTma);
//   stage_wait(s): every consumer thread waits for full[s]'s phase; the
//     tensor copies' bytes are then visible to it (no block barrier);
//   stage_release(s): each consumer warp syncs and one lane arrives on
//     empty[s].
// Each thread keeps a bit per slot, the parity of the next phase it waits
// for, flipped at each wait (so rounds of a slot need not be consecutive
// iterations).
//
// Registers. With two consumer warpgroups (numWarps = 8) whose loop carries
// at least 128 values per thread (a 128 x 256 f32 accumulator) the kernel
// starts at 168 registers per thread (65536 / 384, a multiple of 8); the
// producer gives back to 40 and the consumers take up to 232, (168 - 40) *
// 128 / 256 more each (setmaxnreg). Elsewhere the producer is one warp
// (gpuProducerWarps) and the kernel keeps ptxas's own allocation: every warp
// of a block holds the kernel's count, so three idle producer warps would
// cost a 128 x 128 tile its second block per SM (384 x 90 registers against
// 288 x 90). No forced count can do better there: ptxas compiles the whole
// kernel, consumers included, within `.maxnreg` whatever setmaxnreg.inc
// grants later (CUDA 13: `.maxnreg 80` with the consumers' inc to 96 is
// refused, "Insufficient registers (80)", for the wgmma that needs 90).
#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen {

bool producerTradesRegisters(int numWarps, int64_t carriedPerThread) {
  return numWarps == 8 && carriedPerThread >= 128;
}

namespace gpu_lower {

namespace {
constexpr unsigned kLaunchRegs = 168, kProducerRegs = 40, kConsumerRegs = 232;

bool isStageOp(OpCode c) {
  return c == OpCode::StageAcquire || c == OpCode::StageCommit || c == OpCode::StageWait || c == OpCode::StageRelease;
}
}  // namespace

unsigned Lower::blockThreads() const { return (static_cast<unsigned>(cfg_.numWarps) + producerWarps_) * t_.warpSize(); }

bool Lower::rebalancesRegisters() const { return rebalance_; }

void Lower::planSpecialize() {
  specialize_ = nullptr;
  chanSlots_ = producerWarps_ = 0;
  rebalance_ = false;
  for (auto& op : f_.body().ops())
    if (op->code() == OpCode::WarpSpecialize) specialize_ = op.get();
  if (!specialize_) return;
  if (!t_.hasTensorCopies())
    throw CompileError(specialize_->loc().str() + ": warp_specialize needs tensor copies (" +
                       gpuTargetsWith(&GpuArch::tensorCopies) + ", with tensor copies on); " + t_.arch() +
                       " lowers its copies otherwise");
  producerWarps_ = static_cast<unsigned>(specialize_->intAttr("warps"));
  ir::walk(const_cast<ir::Function&>(f_).body(), [&](ir::Op& op) {
    if (isStageOp(op.code())) chanSlots_ = static_cast<unsigned>(op.intAttr("slots"));
  });
  // Rebalance where the consumers' loop carries at least 128 values per
  // thread over two warpgroups (producerTradesRegisters, which also made
  // the producer a warpgroup): the even share of 168 registers would then
  // be tight, and one block per SM is all such a tile gets anyway. Smaller
  // tiles keep ptxas's allocation and their occupancy.
  int64_t carried = 0;
  bool after = false;
  for (auto& op : f_.body().ops()) {
    after = after || op.get() == specialize_;
    if (!after || op->code() != OpCode::For) continue;
    for (unsigned i = 0; i < op->numResults(); ++i)
      if (op->result(i)->type().isTile()) carried += op->result(i)->type().numElements();
    break;
  }
  rebalance_ = producerWarps_ == 4 &&
               producerTradesRegisters(cfg_.numWarps, carried / (int64_t{cfg_.numWarps} * int64_t{t_.warpSize()}));
  if (chanSlots_ > 32)
    throw CompileError(specialize_->loc().str() + ": a warp-specialised pipeline keeps at most 32 slots, not " +
                       std::to_string(chanSlots_));
  if (blockThreads() > t_.maxThreadsPerBlock())
    throw ResourceError(specialize_->loc().str() + ": " + std::to_string(cfg_.numWarps) + " warps and " +
                        std::to_string(producerWarps_) + " producer warps exceed " +
                        std::to_string(t_.maxThreadsPerBlock()) + " threads per block; use fewer warps");
  // The producer has no layout of its own: every copy it issues must be a
  // tensor copy (the pass asked the target before specialising).
  ir::walk(const_cast<ir::Op&>(*specialize_).region(0).block(), [&](ir::Op& op) {
    if (op.code() == OpCode::Copy && !tma_.count(&op))
      throw CompileError(op.loc().str() + ": this staged copy of a warp-specialised loop is not a tensor copy (its " +
                         "slot is no set of TMA boxes, or its tile no box of a row-major tensor); drop " +
                         "warpSpecialized() from its for_pipelined");
  });
}

llvm::Value* Lower::chanBarrier(bool full, llvm::Value* slot) {
  const uint64_t first = 8 * (uint64_t{tmaBarriers_} + (tmaOperands_.empty() ? 0 : 1));  // after the tensor copies'
  llvm::Value* base = areaAt(AreaKind::Barriers, nullptr, first + (full ? 0 : 8 * uint64_t{chanSlots_}));
  return b_.CreateInBoundsGEP(b_.getInt64Ty(), base, slot, full ? "full" : "empty");
}

void Lower::initChannelBarriers() {
  for (unsigned s = 0; s < chanSlots_; ++s) {
    t_.mbarrierInit(b_, chanBarrier(true, i32(s)), 1);
    t_.mbarrierInit(b_, chanBarrier(false, i32(s)), static_cast<unsigned>(cfg_.numWarps));
  }
}

// After the barriers' initialisation (every thread): the producer warps go
// to their block, filled when the lowering reaches warp_specialize.
void Lower::splitWarps() {
  if (!specialize_) return;
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  producerEntry_ = llvm::BasicBlock::Create(ctx_, "producer", fn);
  auto* consumer = llvm::BasicBlock::Create(ctx_, "consumer", fn);
  b_.CreateCondBr(b_.CreateICmpUGE(warp_, i32(cfg_.numWarps)), producerEntry_, consumer);
  b_.SetInsertPoint(consumer);
  consumersOnly_ = true;
  if (rebalancesRegisters()) t_.setLaunchRegisters(*fn, kLaunchRegs);
  if (rebalancesRegisters()) t_.setMaxRegisters(b_, kConsumerRegs, true);
}

void Lower::emitWarpSpecialize(const ir::Op& op) {
  TS_ASSERT(producerEntry_ != nullptr, "warp_specialize: no producer block");
  llvm::BasicBlock* resume = b_.GetInsertBlock();
  const bool sd = smemDirty_, gd = globalDirty_;
  b_.SetInsertPoint(producerEntry_);
  inProducer_ = true;
  // setmaxnreg is per warpgroup: all its warps give registers back, then
  // one of them issues and the others are done. Being .sync.aligned, it also
  // tells ptxas that the producer's warps are converged here, so it feeds
  // UTMALDG uniform registers directly; without it, ptxas guards every box
  // with an election that makes its operands uniform (VOTEU, R2UR), and an
  // aligned named barrier of the producer warps (id 2; 0 is the block's, 1
  // the consumers') says the same: the 128x128x64 GEMM's producer loop, 18
  // boxes, 351 -> 238 SASS instructions.
  if (rebalancesRegisters())
    t_.setMaxRegisters(b_, kProducerRegs, false);
  else
    t_.barrierCount(b_, 2, producerWarps_ * t_.warpSize());
  llvm::Function* fn = producerEntry_->getParent();
  auto* work = llvm::BasicBlock::Create(ctx_, "producer.work", fn);
  auto* idle = llvm::BasicBlock::Create(ctx_, "producer.idle", fn);
  b_.CreateCondBr(b_.CreateICmpEQ(t_.shuffleIdx(b_, warp_, i32(0)), i32(cfg_.numWarps)), work, idle);
  b_.SetInsertPoint(idle);
  b_.CreateRetVoid();
  b_.SetInsertPoint(work);
  smemDirty_ = globalDirty_ = false;
  yields_.emplace_back();
  emitBlock(op.region(0).block());
  yields_.pop_back();
  setCurrentOp(op);
  b_.CreateRetVoid();
  inProducer_ = false;
  b_.SetInsertPoint(resume);
  smemDirty_ = sd;
  globalDirty_ = gd;
}

bool Lower::onlyChannelReads(const ir::Block& loopBody) const {
  // The whole body's scratch is known only after it is lowered: a first
  // lowering keeps the barrier, and the kernel is lowered again with the
  // needs the first one recorded (lowerToGpuLLVM).
  if (!prior_) return false;
  bool only = true;
  for (auto& [key, area] : prior_->loopAreas)
    if (area.loop == loopBody.parentOp() && area.bytes != 0) only = false;  // staged across the loop
  ir::walk(const_cast<ir::Block&>(loopBody), [&](ir::Op& o) {
    auto it = prior_->scratch.find(&o);
    if (it != prior_->scratch.end() && it->second != 0) only = false;  // scratch (conversions, reductions, staging)
    switch (o.code()) {
      case OpCode::LocalStore:
      case OpCode::Copy:
      case OpCode::Alloc:
      case OpCode::AtomicRmw:
      case OpCode::AtomicCas:
      case OpCode::Barrier: only = false; break;
      default: break;
    }
  });
  return only;
}

void Lower::emitStageOp(const ir::Op& op) {
  llvm::Value* s = b_.CreateSExtOrTrunc(scalar(op.operand(0)), b_.getInt32Ty());
  auto flip = [&] {
    llvm::Value* bits = b_.CreateLoad(b_.getInt32Ty(), chanPhases_);
    llvm::Value* bit = b_.CreateAnd(b_.CreateLShr(bits, s), i32(1));
    b_.CreateStore(b_.CreateXor(bits, b_.CreateShl(i32(1), s)), chanPhases_);
    return bit;
  };
  switch (op.code()) {
    case OpCode::StageAcquire:
      // Round r of the slot waits for the consumers' release of round r-1:
      // the phase before the one the bit names (a fresh barrier's "phase -1"
      // of parity 1 counts as complete).
      t_.mbarrierWait(b_, chanBarrier(false, s), b_.CreateXor(flip(), i32(1)));
      return;
    case OpCode::StageCommit:
      TS_ASSERT(inProducer_, "stage_commit outside the producer");
      flushTma(chanBarrier(true, s));
      return;
    case OpCode::StageWait:
      t_.mbarrierWait(b_, chanBarrier(true, s), flip());
      // The slot's bytes are now this thread's to read. Where the loop's
      // only shared accesses are such reads (no scratch, no writes), no
      // thread's access since the last barrier conflicts with them: the
      // reads need no block barrier (the usual schedule has one per
      // iteration).
      if (onlyChannelReads(*op.parent())) smemDirty_ = false;
      return;
    case OpCode::StageRelease: {
      llvm::Value* cond = op.numOperands() > 1 ? scalar(op.operand(1)) : nullptr;
      guarded(cond, [&] { t_.mbarrierArriveWarp(b_, chanBarrier(false, s)); });
      return;
    }
    default: TS_UNREACHABLE("not a stage op");
  }
}

}  // namespace gpu_lower
}  // namespace tessera::codegen

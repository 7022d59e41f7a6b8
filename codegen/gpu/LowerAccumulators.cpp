// Dots whose matrix instruction accumulates outside the registers
// (GpuTargetInfo's accumulator memory: NVIDIA tcgen05's tensor memory).
//
// A `dot {async}` in a pipelined loop (IR.h, "Asynchronous dots") is issued
// every iteration and retired by the dot_waits; its result reaches nothing
// but the next issue's accumulator, the loop's yield and a dot_wait. Such a
// dot keeps its accumulator in the memory for the whole loop: the target's
// emitter stores the registers there at the first issue (the dot's
// resident flag, a per-thread i1, is false) and afterwards only issues
// MMAs onto it, the registers passing through unchanged; the dot_wait that
// takes the loop's result reads the memory back into registers and clears
// the flag, so a later entry of the loop (a persistent kernel's next tile)
// stores again. Any other dot of the kind completes at its issue: its
// emitter waits for the issue's commit and reads the result back.
//
// Columns: each in-flight dot has its own, in program order while the
// memory lasts; the dots that complete at their issue share the columns
// after them (as many as the widest needs). They are allocated once at the
// kernel's start and freed at every return. Completion: each issue commits
// to one of accBarriers_ = (largest dot_wait pending) + 1 mbarriers in
// turn, so the barrier a wait needs has completed at most the phase waited
// for (a dot_wait {pending = N} waits while more than N issues are
// unretired); a dot that completes at its issue retires every earlier one
// with it (a commit tracks all the thread's earlier MMAs).
#include <bit>
#include <variant>

#include "codegen/gpu/LowerImpl.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::gpu_lower {

namespace {
// Allocations are powers of two from 32 columns.
uint32_t allocation(uint32_t columns) { return columns ? std::max<uint32_t>(32, std::bit_ceil(columns)) : 0; }

// Whether `acc`, a loop-carried value, enters its loop as a constant zero
// tile (a GEMM's accumulator).
bool entersLoopAsZero(const ir::Value* acc) {
  if (!acc->isBlockArg() || acc->index() == 0) return false;
  const ir::Op* loop = acc->ownerBlock()->parentOp();
  if (!loop || loop->code() != OpCode::For || loop->numOperands() <= 3 + (acc->index() - 1)) return false;
  const ir::Op* init = loop->operand(3 + (acc->index() - 1))->definingOp();
  if (!init || init->code() != OpCode::Constant) return false;
  auto it = init->attrs().find("value");
  return it != init->attrs().end() && std::holds_alternative<double>(it->second) && std::get<double>(it->second) == 0.0;
}
}  // namespace

void Lower::planAccumulators() {
  accColumnOf_.clear();
  accShared_ = accColumns_ = 0;
  accBarriers_ = 0;
  const uint32_t limit = t_.accumulatorMemoryColumns();
  if (!limit) return;
  std::vector<std::pair<const ir::Op*, uint32_t>> inFlight;
  uint32_t shared = 0;  // the widest dot that completes at its issue
  int64_t maxPending = 0;
  ir::walk(const_cast<ir::Function&>(f_).body(), [&](ir::Op& op) {
    if (op.code() == OpCode::DotWait) maxPending = std::max(maxPending, op.intAttr("pending"));
    if (op.code() != OpCode::Dot || !la_.has(op.result()) || la_.get(op.result()).parent.mma == ir::MmaKind::None)
      return;
    const TensorCoreDotPlan p = dotPlan(op);
    const uint32_t cols = t_.accumulatorColumns(p);
    TS_ASSERT(cols <= limit, "a dot's accumulator over the target's accumulator memory");
    if (!cols) return;
    // keepsInFlight without the columns (not planned yet).
    const bool async = op.hasAttr("async") && op.intAttr("async") == 1 && p.bFromShared && p.aFromShared &&
                       directOperands_.count({&op, 0}) && directOperands_.count({&op, 1});
    if (async)
      inFlight.emplace_back(&op, cols);
    else
      shared = std::max(shared, cols);
  });
  // In-flight dots while they fit beside the shared columns; one that does
  // not completes at its issue instead (widening the shared columns, which
  // may leave fewer in flight).
  for (bool fits = false; !fits;) {
    uint32_t total = 0;
    accColumnOf_.clear();
    fits = true;
    for (const auto& [op, cols] : inFlight) {
      if (allocation(total + cols + shared) > limit) {
        if (cols > shared) {
          shared = cols;
          fits = false;
          break;
        }
        continue;
      }
      accColumnOf_[op] = total;
      total += cols;
    }
    accShared_ = total;
  }
  accColumns_ = allocation(accShared_ + shared);
  if (accColumns_) accBarriers_ = static_cast<unsigned>(maxPending + 1);
}

llvm::Value* Lower::accBarrier(llvm::Value* index) {
  llvm::Value* base = areaAt(AreaKind::Barriers, nullptr, 8 * accBarrierFirst());
  return b_.CreateInBoundsGEP(b_.getInt64Ty(), base, index, "acc.bar");
}

void Lower::initAccumulators() {
  accBase_ = nullptr;
  accResident_.clear();
  if (!accColumns_) return;
  llvm::Value* word = areaAt(AreaKind::Barriers, nullptr, 8 * (accBarrierFirst() + accBarriers_));
  {
    llvm::IRBuilderBase::InsertPointGuard g(b_);
    llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
    b_.SetInsertPoint(&entry, entry.getFirstInsertionPt());
    for (llvm::Value** c : {&accIssued_, &accRetired_}) *c = b_.CreateAlloca(b_.getInt32Ty(), nullptr, "acc.count");
    for (const auto& [op, col] : accColumnOf_) accResident_[op] = b_.CreateAlloca(b_.getInt1Ty(), nullptr, "acc.in");
  }
  b_.CreateStore(i32(0), accIssued_);
  b_.CreateStore(i32(0), accRetired_);
  for (const auto& [op, flag] : accResident_) b_.CreateStore(b_.getFalse(), flag);
  t_.allocAccumulators(b_, word, warp_, accColumns_);
  barrier();
  accBase_ = b_.CreateAlignedLoad(b_.getInt32Ty(), word, llvm::Align(4), "acc.base");
  smemDirty_ = true;
}

void Lower::freeAccumulators() {
  if (!accColumns_) return;
  t_.freeAccumulators(b_, accBase_, warp_, accColumns_, [&] { barrier(); });
}

const AccumulatorMemory* Lower::issueAccumulator(const ir::Op& dot, const TensorCoreDotPlan& p) {
  if (!t_.accumulatorColumns(p)) return nullptr;
  TS_ASSERT(accColumns_, "a dot in accumulator memory the plan did not count");
  auto it = accColumnOf_.find(&dot);
  TS_ASSERT(p.inFlight == (it != accColumnOf_.end()), "an in-flight dot without its columns");
  llvm::Value* issued = b_.CreateLoad(b_.getInt32Ty(), accIssued_);
  accIssue_ = {};
  accIssue_.address = b_.CreateAdd(accBase_, i32(p.inFlight ? it->second : accShared_), "acc.cols");
  accIssue_.commitBarrier = accBarrier(b_.CreateURem(issued, i32(accBarriers_)));
  accIssue_.barrier = [this] { barrier(); };
  if (p.inFlight) {
    accIssue_.resident = b_.CreateLoad(b_.getInt1Ty(), accResident_.at(&dot), "acc.resident");
    accIssue_.entersZero = entersLoopAsZero(dot.operand(2));
  } else
    accIssue_.waitParity = b_.CreateAnd(b_.CreateUDiv(issued, i32(accBarriers_)), i32(1));
  // Block scales in turn through the dot's sets, one an issue (an issue
  // that completes here needs one).
  if (p.scaleAtoms) accIssue_.scaleSet = p.inFlight ? b_.CreateURem(issued, i32(p.scaleBuffers), "scale.set") : i32(0);
  return &accIssue_;
}

void Lower::issuedAccumulator(const ir::Op& dot, const TensorCoreDotPlan& p) {
  llvm::Value* issued = b_.CreateAdd(b_.CreateLoad(b_.getInt32Ty(), accIssued_), i32(1));
  b_.CreateStore(issued, accIssued_);
  if (p.inFlight)
    b_.CreateStore(b_.getTrue(), accResident_.at(&dot));
  else
    b_.CreateStore(issued, accRetired_);  // its wait retired every earlier issue too
}

void Lower::waitAccumulators(int64_t pending) {
  // while (retired + pending < issued) wait for issue `retired`.
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  auto* head = llvm::BasicBlock::Create(ctx_, "acc.wait", fn);
  auto* body = llvm::BasicBlock::Create(ctx_, "acc.retire", fn);
  auto* done = llvm::BasicBlock::Create(ctx_, "acc.waited", fn);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::Value* retired = b_.CreateLoad(b_.getInt32Ty(), accRetired_);
  llvm::Value* issued = b_.CreateLoad(b_.getInt32Ty(), accIssued_);
  b_.CreateCondBr(b_.CreateICmpULT(b_.CreateAdd(retired, i32(pending)), issued), body, done);
  b_.SetInsertPoint(body);
  const uint32_t n = accBarriers_;
  t_.mbarrierWait(b_, accBarrier(b_.CreateURem(retired, i32(n))), b_.CreateAnd(b_.CreateUDiv(retired, i32(n)), i32(1)));
  b_.CreateStore(b_.CreateAdd(retired, i32(1)), accRetired_);
  b_.CreateBr(head);
  b_.SetInsertPoint(done);
}

std::optional<Slots> Lower::loadAccumulator(const ir::Value* v) {
  // The async dot whose result `v` is, directly or carried by loops.
  const ir::Op* d = v->definingOp();
  while (d && d->code() == OpCode::For) {
    const ir::Op* y = d->region(0).block().terminator();
    unsigned i = 0;
    while (i < d->numResults() && d->result(i) != v) ++i;
    if (!y || i >= d->numResults() || i >= y->numOperands()) return std::nullopt;
    v = y->operand(i);
    d = v->definingOp();
  }
  if (!d || !accColumnOf_.count(d)) return std::nullopt;
  const TensorCoreDotPlan p = dotPlan(*d);
  AccumulatorMemory mem;
  mem.address = b_.CreateAdd(accBase_, i32(accColumnOf_.at(d)));
  const std::function<llvm::Value*(int64_t, int64_t)> noRegisters;
  DotEmitter e(b_, m_, p, nullptr, nullptr, lane_, warp_, noRegisters);
  e.accMemory = &mem;
  Slots s = t_.loadAccumulators(e);
  b_.CreateStore(b_.getFalse(), accResident_.at(d));
  // The next issue of the dot (a later entry of its loop) may overwrite
  // the columns without storing first: every warp's loads come before it.
  barrier();
  return s;
}

}  // namespace tessera::codegen::gpu_lower

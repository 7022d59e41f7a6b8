// Bounds-checked GPU compiles (GpuOptions::checkBounds; the record and its
// parameters: tessera/support/BoundsCheck.h).
//
// Every global access (load, store, atomic, copy: plain, cp.async and a
// dot operand's direct copy; tensor copies are off in a checked compile)
// tests each active thread's address, the whole vector it accesses, against
// the extent of the pointer argument the address derives from
// (ir::PointerOrigins). The test is one subtraction and one unsigned
// comparison per access of a thread (`off u< extent - bytes + 1`, the bound
// computed once per op and clamped at 0, so a negative offset or a buffer
// shorter than the access fails too). A failing access leaves the access's
// mask (so it is not performed: a load yields zeros or its `other` values,
// as a masked-off one does), and the thread's first failing access of the
// op is recorded by the first thread of the grid to fail, through a
// compare-and-swap on the record's `violated`. The record is written only
// after the kernel's accesses: nothing in the kernel reads it, so no
// barrier orders it.
//
// A shared-memory view `buffer_slot(b, i)` whose index is not a constant
// tests 0 <= i < S (b's slots): an index outside is recorded (arg
// BoundsCheckRecord::kSharedSlot, the index as the offset, S in `slots`) and
// the view is redirected to slot 0, so no local_load, local_store, copy or
// dot operand read through it leaves the buffer. Whole-buffer accesses
// (local_load, local_store of an alloc) are in range by construction.
//
// An `assert` (IR.h, "Assertions") is numbered with the accesses: a thread
// holding a false element of its condition records it (arg
// BoundsCheckRecord::kAssert) and runs on.
//
// A pointer that may point into several arguments' buffers (a select
// between two pointers; ir::PointerOrigins follows loop-carried and `if`
// values to their arguments) is tested against each of them, one of unknown
// origin against every pointer argument's: it fails only outside all of
// them, and the record then holds arg -1 and the raw address.
#include <llvm/IR/MDBuilder.h>

#include "codegen/gpu/LowerImpl.h"
#include "tessera/ir/analysis/PointerOrigin.h"
#include "tessera/support/BoundsCheck.h"

namespace tessera::codegen::gpu_lower {

namespace {
bool checkedAccess(OpCode c) {
  switch (c) {
    case OpCode::Load:
    case OpCode::Store:
    case OpCode::AtomicRmw:
    case OpCode::AtomicCas:
    case OpCode::Copy:
    case OpCode::BufferSlot:
    case OpCode::Assert: return true;
    default: return false;
  }
}
}  // namespace

void Lower::numberCheckedOps() {
  checkedIds_.clear();
  checkedOps_.clear();
  if (!o_.checkBounds) return;
  origins_.emplace(f_);
  // Program order, the same in every lowering of the kernel.
  ir::walk(const_cast<ir::Block&>(f_.body()), [&](const ir::Op& op) {
    if (!checkedAccess(op.code())) return;
    checkedIds_[&op] = static_cast<int32_t>(checkedOps_.size());
    checkedOps_.push_back(ir::userName(op) + (op.loc().known() ? " @ " + op.loc().str() : std::string()));
  });
}

void Lower::checkParams(std::vector<llvm::Type*>& params) {
  if (!o_.checkBounds) return;
  for (unsigned i = 0; i < f_.numArgs(); ++i)
    if (f_.arg(i)->type().isPointer()) params.push_back(b_.getInt64Ty());
  params.push_back(llvm::PointerType::get(ctx_, t_.globalAS()));
}

void Lower::initChecks(llvm::Function* fn, unsigned firstParam) {
  checkBase_.assign(f_.numArgs(), nullptr);
  checkExtent_.assign(f_.numArgs(), nullptr);
  checkRecord_ = nullptr;
  if (!o_.checkBounds) return;
  unsigned p = firstParam;
  for (unsigned i = 0; i < f_.numArgs(); ++i) {
    if (!f_.arg(i)->type().isPointer()) continue;
    llvm::Argument* e = fn->getArg(p++);
    e->setName("extent." + (f_.arg(i)->nameHint.empty() ? std::to_string(i) : f_.arg(i)->nameHint));
    checkExtent_[i] = e;
    checkBase_[i] = b_.CreatePtrToInt(scalar(f_.arg(i)), b_.getInt64Ty());
  }
  checkRecord_ = fn->getArg(p);
  checkRecord_->setName("bounds.record");
}

void Lower::checkAccesses(const ir::Op& op, const ir::Value* ptrV, const Slots& ptrs, const std::vector<size_t>& at,
                          uint64_t bytes, Slots& mask, llvm::Value* active) {
  if (!o_.checkBounds || at.empty()) return;
  auto id = checkedIds_.find(&op);
  TS_ASSERT(id != checkedIds_.end(), "checked GPU lowering: an access of an unnumbered op");
  if (mask.empty()) mask.assign(ptrs.size(), nullptr);
  llvm::Type* i64 = b_.getInt64Ty();
  // The buffers the pointer may point into (PointerOrigin.h): every pointer
  // argument's where none is known; the record names the argument when
  // there is exactly one.
  std::vector<unsigned> args = origins_->of(ptrV);
  const int arg = args.size() == 1 ? static_cast<int>(args.front()) : -1;
  if (args.empty())
    for (unsigned a = 0; a < f_.numArgs(); ++a)
      if (checkBase_[a]) args.push_back(a);
  // bound = max(extent - bytes + 1, 0): off u< bound is 0 <= off <= extent - bytes.
  auto bound = [&](unsigned a) {
    llvm::Value* x = b_.CreateAdd(checkExtent_[a], b_.getInt64(1 - static_cast<int64_t>(bytes)));
    return b_.CreateSelect(b_.CreateICmpSGT(x, b_.getInt64(0)), x, b_.getInt64(0));
  };
  std::vector<std::pair<llvm::Value*, llvm::Value*>> within;  // (base, bound) per argument tested
  for (unsigned a : args) within.emplace_back(checkBase_[a], bound(a));
  llvm::Value* anyBad = nullptr;
  llvm::Value* firstOff = nullptr;
  // In reverse, so the first failing slot's offset is selected last.
  for (auto it = at.rbegin(); it != at.rend(); ++it) {
    const size_t i = *it;
    llvm::Value* addr = b_.CreatePtrToInt(ptrs[i], i64);
    llvm::Value* ok = within.empty() ? b_.getFalse() : nullptr;
    llvm::Value* off = addr;
    for (auto [base, lim] : within) {
      llvm::Value* o = b_.CreateSub(addr, base);
      llvm::Value* in = b_.CreateICmpULT(o, lim);
      ok = ok ? b_.CreateOr(ok, in) : in;
      if (arg >= 0) off = o;
    }
    llvm::Value* act = mask[i];
    if (active) act = act ? b_.CreateAnd(act, active) : active;
    llvm::Value* bad = act ? b_.CreateAnd(act, b_.CreateNot(ok)) : b_.CreateNot(ok);
    anyBad = anyBad ? b_.CreateOr(anyBad, bad) : bad;
    firstOff = firstOff ? b_.CreateSelect(bad, off, firstOff) : off;
    mask[i] = mask[i] ? b_.CreateAnd(mask[i], ok) : ok;
  }
  recordViolation(anyBad, id->second, arg, firstOff);
}

void Lower::recordViolation(llvm::Value* bad, int32_t opId, int arg, llvm::Value* offset, int64_t slots) {
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  auto* fail = llvm::BasicBlock::Create(ctx_, "bounds.fail", fn);
  auto* won = llvm::BasicBlock::Create(ctx_, "bounds.record", fn);
  auto* join = llvm::BasicBlock::Create(ctx_, "bounds.ok", fn);
  b_.CreateCondBr(bad, fail, join, llvm::MDBuilder(ctx_).createUnlikelyBranchWeights());
  b_.SetInsertPoint(fail);
  auto field = [&](size_t at) { return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), checkRecord_, at); };
  llvm::Value* cas =
      b_.CreateAtomicCmpXchg(field(BoundsCheckRecord::kViolated), b_.getInt32(0), b_.getInt32(1), llvm::MaybeAlign(4),
                             llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic,
                             ctx_.getOrInsertSyncScopeID(t_.syncScope(ir::MemScope::Device)));
  b_.CreateCondBr(b_.CreateExtractValue(cas, 1), won, join);
  b_.SetInsertPoint(won);
  b_.CreateStore(b_.getInt32(static_cast<uint32_t>(opId)), field(BoundsCheckRecord::kOpId));
  b_.CreateStore(b_.getInt32(static_cast<uint32_t>(arg)), field(BoundsCheckRecord::kArg));
  b_.CreateStore(offset, field(BoundsCheckRecord::kOffset));
  if (slots) b_.CreateStore(b_.getInt32(static_cast<uint32_t>(slots)), field(BoundsCheckRecord::kSlots));
  b_.CreateStore(tid_, field(BoundsCheckRecord::kThread));
  for (int a = 0; a < 3; ++a)
    b_.CreateStore(t_.blockId(b_, a), field(BoundsCheckRecord::kProgram + 4 * static_cast<size_t>(a)));
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
}

llvm::Value* Lower::checkScalar(const ir::Op& op, const ir::Value* ptrV, uint64_t bytes, llvm::Value* mask,
                                llvm::Value* active) {
  if (!o_.checkBounds) return mask;
  Slots m = {mask};
  checkAccesses(op, ptrV, {scalar(ptrV)}, {0}, bytes, m, active);
  return m[0];
}

void Lower::emitAssert(const ir::Op& op) {
  TS_ASSERT(o_.checkBounds, "an assert reached an unchecked GPU lowering (strip-asserts runs first)");
  // Each thread tests the elements it holds (a replicated element by every
  // thread holding it); the threads run on either way.
  const ir::Value* cond = op.operand(0);
  const Slots v = cond->type().isTile() ? tileIn(cond, la_.get(cond)) : Slots{scalar(cond)};
  if (v.empty()) return;
  llvm::Value* allTrue = nullptr;
  for (llvm::Value* x : v) allTrue = allTrue ? b_.CreateAnd(allTrue, x) : x;
  recordViolation(b_.CreateNot(allTrue), checkedIds_.at(&op), BoundsCheckRecord::kAssert, b_.getInt64(0));
}

llvm::Value* Lower::checkSlotIndex(const ir::Op& op, llvm::Value* idx) {
  if (!o_.checkBounds) return idx;
  // A constant index is the verifier's to check; the others are tested here
  // (uniform: one comparison per program).
  if (const ir::Op* d = op.operand(1)->definingOp(); d && d->code() == OpCode::Constant) return idx;
  const int64_t slots = op.operand(0)->type().shape().front();
  llvm::Value* ok = b_.CreateICmpULT(idx, i32(slots));
  recordViolation(b_.CreateNot(ok), checkedIds_.at(&op), BoundsCheckRecord::kSharedSlot,
                  b_.CreateSExt(idx, b_.getInt64Ty()), slots);
  // Redirected to slot 0: no access through the view leaves the buffer.
  return b_.CreateSelect(ok, idx, i32(0));
}

}  // namespace tessera::codegen::gpu_lower

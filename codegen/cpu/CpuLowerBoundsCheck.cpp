// Bounds-checked launches (tessera/support/BoundsCheck.h): the test of every
// global access against its argument's buffer, recording the first violation.
#include "codegen/cpu/CpuLowerImpl.h"

#include <cstdint>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include "tessera/support/BoundsCheck.h"

namespace tessera::codegen::cpu::detail {

// ============================================================ bounds checks

void Lowering::emitBoundsCheck(const ir::Op& op) {
  switch (op.code()) {
    case OpCode::Load:
    case OpCode::Store:
    case OpCode::AtomicRmw:
    case OpCode::AtomicCas:
    case OpCode::Copy: break;
    default: return;
  }
  if (op.code() == OpCode::Load && uses_[op.result()] == 0) return;  // never performed
  const MemOperands m = memOperands(op);
  if (m.ptr->type().space() != ir::MemSpace::Global) return;  // shared / local buffers are sized by the compiler
  const int32_t opId = static_cast<int32_t>(checkedOps_->size());
  checkedOps_->push_back(ir::userName(op) + (op.loc().known() ? " @ " + op.loc().str() : std::string()));
  if (!origins_) origins_.emplace(fn_);
  // The buffers the pointer may point into (PointerOrigin.h): every pointer
  // argument's where none is known.
  std::vector<unsigned> within = origins_->of(m.ptr);
  if (within.empty())
    for (unsigned i = 0; i < fn_.numArgs(); ++i)
      if (argBase_[i]) within.push_back(i);
  const int arg = origins_->of(m.ptr).size() == 1 ? static_cast<int>(within.front()) : -1;
  const int64_t eb = static_cast<int64_t>(mod_.getDataLayout().getTypeAllocSize(m.st));
  llvm::Type* i64t = b_.getInt64Ty();

  // out(addr) for a vector (or scalar) of i64 addresses: outside
  // [base, base + extent - eb] of the pointer's argument, or of every pointer
  // argument when its origin is not static. Offsets are signed, so an
  // address below the base is caught too.
  auto outside = [&](llvm::Value* addr, int64_t c) -> std::pair<llvm::Value*, llvm::Value*> {
    auto splat = [&](llvm::Value* x) { return c == 1 ? x : b_.CreateVectorSplat(static_cast<unsigned>(c), x); };
    auto outOf = [&](unsigned i) {
      llvm::Value* off = b_.CreateSub(addr, splat(argBase_[i]));
      llvm::Value* last = splat(b_.CreateSub(argExtent_[i], b_.getInt64(static_cast<uint64_t>(eb))));
      return std::make_pair(
          b_.CreateOr(b_.CreateICmpSLT(off, llvm::Constant::getNullValue(off->getType())), b_.CreateICmpSGT(off, last)),
          off);
    };
    if (arg >= 0) return outOf(static_cast<unsigned>(arg));
    llvm::Value* out = nullptr;
    for (unsigned i : within) out = out ? b_.CreateAnd(out, outOf(i).first) : outOf(i).first;
    if (!out)
      out = c == 1
                ? b_.getTrue()
                : llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), static_cast<unsigned>(c)));
    return {out, addr};
  };

  llvm::Value* badFlag = entryAlloca(b_.getInt1Ty());
  llvm::Value* badOff = entryAlloca(i64t);
  b_.CreateStore(b_.getFalse(), badFlag);
  if (!m.ptr->type().isTile()) {
    auto [out, off] = outside(b_.CreatePtrToInt(scalar(m.ptr), i64t), 1);
    if (m.mask) out = b_.CreateAnd(out, scalar(m.mask));
    b_.CreateStore(out, badFlag);
    b_.CreateStore(off, badOff);
  } else {
    const int64_t c = chunkWidth(numElems(m.ptr->type()));
    chunkLoop(m.ptr->type().shape(), c, [&](llvm::Value* base) {
      llvm::Value* p = emitChunk(m.ptr, base, c);
      llvm::Value* addr = c == 1 ? b_.CreatePtrToInt(b_.CreateExtractElement(p, uint64_t{0}), i64t)
                                 : b_.CreatePtrToInt(p, llvm::FixedVectorType::get(i64t, static_cast<unsigned>(c)));
      auto [out, off] = outside(addr, c);
      if (m.mask) {
        llvm::Value* mk = emitChunk(m.mask, base, c);
        out = b_.CreateAnd(out, c == 1 ? b_.CreateExtractElement(mk, uint64_t{0}) : mk);
      }
      llvm::Value* any = c == 1 ? out : b_.CreateOrReduce(out);
      // The smallest offending offset of the chunk (all that is reported).
      llvm::Value* first = off;
      if (c > 1) {
        llvm::Value* masked = b_.CreateSelect(out, off, llvm::ConstantInt::get(off->getType(), UINT64_MAX));
        first = b_.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_umin, masked);
      }
      llvm::Value* was = b_.CreateLoad(b_.getInt1Ty(), badFlag);
      b_.CreateStore(b_.CreateOr(was, any), badFlag);
      b_.CreateStore(b_.CreateSelect(b_.CreateAnd(any, b_.CreateNot(was)), first, b_.CreateLoad(i64t, badOff)), badOff);
    });
  }
  failAndReturn(b_.CreateLoad(b_.getInt1Ty(), badFlag), opId, arg, b_.CreateLoad(i64t, badOff));
}

void Lowering::failAndReturn(llvm::Value* bad, int32_t opId, int32_t arg, llvm::Value* offset) {
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* fail = llvm::BasicBlock::Create(ctx_, "bounds.fail", f);
  auto* ok = llvm::BasicBlock::Create(ctx_, "bounds.ok", f);
  b_.CreateCondBr(bad, fail, ok, llvm::MDBuilder(ctx_).createUnlikelyBranchWeights());
  b_.SetInsertPoint(fail);
  // The first program to fail fills the record; every failing program stops
  // here.
  auto* won = llvm::BasicBlock::Create(ctx_, "bounds.record", f);
  auto* out = llvm::BasicBlock::Create(ctx_, "bounds.return", f);
  llvm::Value* violated = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), record_, BoundsCheckRecord::kViolated);
  llvm::Value* cas = b_.CreateAtomicCmpXchg(violated, b_.getInt32(0), b_.getInt32(1), llvm::MaybeAlign(4),
                                            llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic);
  b_.CreateCondBr(b_.CreateExtractValue(cas, 1), won, out);
  b_.SetInsertPoint(won);
  auto field = [&](size_t at) { return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), record_, at); };
  b_.CreateStore(b_.getInt32(static_cast<uint32_t>(opId)), field(BoundsCheckRecord::kOpId));
  b_.CreateStore(b_.getInt32(static_cast<uint32_t>(arg)), field(BoundsCheckRecord::kArg));
  b_.CreateStore(offset, field(BoundsCheckRecord::kOffset));
  b_.CreateBr(out);
  b_.SetInsertPoint(out);
  b_.CreateRetVoid();
  b_.SetInsertPoint(ok);
}

void Lowering::emitAssert(const ir::Op& op) {
  TS_ASSERT(checkedOps_, "an assert reached an unchecked CPU lowering (strip-asserts runs first)");
  const int32_t opId = static_cast<int32_t>(checkedOps_->size());
  checkedOps_->push_back(ir::userName(op) + (op.loc().known() ? " @ " + op.loc().str() : std::string()));
  const ir::Value* cond = op.operand(0);
  llvm::Value* bad = nullptr;
  if (!cond->type().isTile()) {
    bad = b_.CreateNot(scalar(cond));
  } else {
    llvm::Value* badFlag = entryAlloca(b_.getInt1Ty());
    b_.CreateStore(b_.getFalse(), badFlag);
    const int64_t c = chunkWidth(numElems(cond->type()));
    chunkLoop(cond->type().shape(), c, [&](llvm::Value* base) {
      llvm::Value* v = emitChunk(cond, base, c);
      llvm::Value* allTrue = c == 1 ? b_.CreateExtractElement(v, uint64_t{0}) : b_.CreateAndReduce(v);
      b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt1Ty(), badFlag), b_.CreateNot(allTrue)), badFlag);
    });
    bad = b_.CreateLoad(b_.getInt1Ty(), badFlag);
  }
  failAndReturn(bad, opId, BoundsCheckRecord::kAssert, b_.getInt64(0));
}

}  // namespace tessera::codegen::cpu::detail

#include "codegen/llvm/VectorMathEmit.h"

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>

namespace tessera::codegen::vmath {

// 2/pi = 0.a2f9836e 4e441529 fc2757d1 f534ddc0 ... (hexadecimal), computed
// with mpmath to 1344 bits (scripts/math-coefficients.py prints them).
const uint32_t kTwoOverPi32[8] = {0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0,
                                  0xdb629599, 0x3c439041, 0xfe5163ab, 0xdebbc561};
const uint64_t kTwoOverPi64[20] = {0xa2f9836e4e441529, 0xfc2757d1f534ddc0, 0xdb6295993c439041, 0xfe5163abdebbc561,
                                   0xb7246e3a424dd2e0, 0x06492eea09d1921c, 0xfe1deb1cb129a73e, 0xe88235f52ebb4484,
                                   0xe99c7026b45f7e41, 0x3991d639835339f4, 0x9c845f8bbdf9283b, 0x1ff897ffde05980f,
                                   0xef2f118b5a0a6d1f, 0x6d367ecf27cb09b7, 0x4f463f669e5fea2d, 0x7527bac7ebe5f17b,
                                   0x3d0739f78a5292ea, 0x6bfb5fb11f8d5d08, 0x56033046fc7b6bab, 0xf0cfbc209af4361d};

std::vector<llvm::Value*> Emit::ifAny(llvm::Value* cond, const std::vector<llvm::Value*>& fast,
                                      const std::function<std::vector<llvm::Value*>()>& slow) {
  llvm::LLVMContext& ctx = b_.getContext();
  llvm::Value* any = cond->getType()->isVectorTy() ? b_.CreateOrReduce(cond) : cond;
  llvm::BasicBlock* cur = b_.GetInsertBlock();
  TS_ASSERT(cur && cur->getParent(), "math emitter: the builder has no insertion block");
  llvm::Function* fn = cur->getParent();
  // The join block takes whatever follows the insertion point (the caller
  // may be emitting in the middle of a block that already ends in a
  // terminator); when the builder appends to an open block, it is new.
  llvm::BasicBlock* join;
  if (cur->getTerminator()) {
    join = cur->splitBasicBlock(b_.GetInsertPoint(), "math.join");
    cur->getTerminator()->eraseFromParent();
  } else {
    TS_ASSERT(b_.GetInsertPoint() == cur->end(), "math emitter: inserting mid-block in a block without terminator");
    join = llvm::BasicBlock::Create(ctx, "math.join", fn, cur->getNextNode());
  }
  llvm::BasicBlock* slowBB = llvm::BasicBlock::Create(ctx, "math.slow", fn, join);
  b_.SetInsertPoint(cur);
  b_.CreateCondBr(any, slowBB, join);
  b_.SetInsertPoint(slowBB);
  std::vector<llvm::Value*> slowVals = slow();
  TS_ASSERT(slowVals.size() == fast.size(), "math emitter: slow path yields a different number of values");
  std::vector<llvm::Value*> merged;
  for (size_t k = 0; k < fast.size(); ++k) merged.push_back(b_.CreateSelect(cond, slowVals[k], fast[k]));
  llvm::BasicBlock* slowEnd = b_.GetInsertBlock();
  b_.CreateBr(join);
  b_.SetInsertPoint(join, join->begin());
  std::vector<llvm::Value*> out;
  for (size_t k = 0; k < fast.size(); ++k) {
    llvm::PHINode* phi = b_.CreatePHI(fast[k]->getType(), 2);
    phi->addIncoming(fast[k], cur);
    phi->addIncoming(merged[k], slowEnd);
    out.push_back(phi);
  }
  b_.SetInsertPoint(join, join->getFirstInsertionPt());
  return out;
}

}  // namespace tessera::codegen::vmath

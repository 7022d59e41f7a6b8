#include "codegen/llvm/ForLoop.h"

namespace tessera::codegen {

ForLoop ForLoop::open(llvm::IRBuilderBase& b, llvm::Value* lo, llvm::Value* step) {
  ForLoop l;
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Function* f = b.GetInsertBlock()->getParent();
  l.pre = b.GetInsertBlock();
  l.header = llvm::BasicBlock::Create(ctx, "for.head", f);
  l.body = llvm::BasicBlock::Create(ctx, "for.body", f);
  l.exit = llvm::BasicBlock::Create(ctx, "for.end", f);
  l.positive = b.CreateICmpSGT(step, llvm::ConstantInt::get(step->getType(), 0));
  b.CreateBr(l.header);
  b.SetInsertPoint(l.header);
  l.iv = b.CreatePHI(lo->getType(), 2, "iv");
  l.iv->addIncoming(lo, l.pre);
  return l;
}

void ForLoop::enterBody(llvm::IRBuilderBase& b, llvm::Value* hi) {
  b.CreateCondBr(b.CreateAnd(positive, b.CreateICmpSLT(iv, hi)), body, exit);
  b.SetInsertPoint(body);
}

llvm::BasicBlock* ForLoop::close(llvm::IRBuilderBase& b, llvm::Value* step) {
  llvm::Value* sum = b.CreateBinaryIntrinsic(llvm::Intrinsic::sadd_with_overflow, iv, step);
  llvm::Value* next = b.CreateExtractValue(sum, 0);
  llvm::Value* ovf = b.CreateExtractValue(sum, 1);
  llvm::BasicBlock* latch = b.GetInsertBlock();
  iv->addIncoming(next, latch);
  b.CreateCondBr(ovf, exit, header);
  b.SetInsertPoint(exit);
  return latch;
}

}  // namespace tessera::codegen

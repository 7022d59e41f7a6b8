#include "codegen/nvptx/NVPTXTma.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>

#include "tessera/support/Error.h"

namespace tessera::codegen::nvptx {

namespace {
llvm::CallInst* emit(llvm::IRBuilderBase& b, const TmaAsm& a, llvm::Type* ret, llvm::ArrayRef<llvm::Value*> args) {
  std::vector<llvm::Type*> tys;
  for (llvm::Value* v : args) tys.push_back(v->getType());
  auto* fty = llvm::FunctionType::get(ret, tys, false);
  auto* ia = llvm::InlineAsm::get(fty, llvm::StringRef(a.text.data(), a.text.size()),
                                  llvm::StringRef(a.constraints.data(), a.constraints.size()),
                                  /*hasSideEffects=*/true);
  return b.CreateCall(fty, ia, args);
}
}  // namespace

void emitMbarrierInit(llvm::IRBuilderBase& b, llvm::Value* bar, unsigned count) {
  emit(b, kMbarrierInit, b.getVoidTy(), {bar, b.getInt32(count)});
}

void emitMbarrierInitFence(llvm::IRBuilderBase& b) { emit(b, kMbarrierInitFence, b.getVoidTy(), {}); }

void emitMbarrierExpectTx(llvm::IRBuilderBase& b, llvm::Value* bar, llvm::Value* bytes) {
  emit(b, kMbarrierExpectTx, b.getVoidTy(), {bar, bytes});
}

void emitTmaLoad(llvm::IRBuilderBase& b, llvm::Value* dst, llvm::Value* map, llvm::Value* const* coords, unsigned rank,
                 llvm::Value* bar) {
  TS_ASSERT(rank == 2 || rank == 3, "TMA loads of rank 2 or 3 only");
  std::vector<llvm::Value*> args{dst, map};
  for (unsigned d = 0; d < rank; ++d) args.push_back(coords[d]);
  args.push_back(bar);
  emit(b, rank == 2 ? kTmaLoad2d : kTmaLoad3d, b.getVoidTy(), args);
}

void emitMbarrierArrive(llvm::IRBuilderBase& b, llvm::Value* bar) { emit(b, kMbarrierArrive, b.getVoidTy(), {bar}); }

void emitTmaStore(llvm::IRBuilderBase& b, llvm::Value* map, llvm::Value* const* coords, llvm::Value* src) {
  emit(b, kTmaStore2d, b.getVoidTy(), {map, coords[0], coords[1], src});
}

void emitMbarrierWait(llvm::IRBuilderBase& b, llvm::Value* bar, llvm::Value* parity) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  auto* loop = llvm::BasicBlock::Create(ctx, "mbar.wait", fn);
  auto* done = llvm::BasicBlock::Create(ctx, "mbar.done", fn);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::Value* ok = emit(b, kMbarrierTryWait, b.getInt32Ty(), {bar, parity});
  b.CreateCondBr(b.CreateICmpNE(ok, b.getInt32(0)), done, loop);
  b.SetInsertPoint(done);
}

}  // namespace tessera::codegen::nvptx

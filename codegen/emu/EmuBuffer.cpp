// AMDGPU raw buffer loads and stores (llvm.amdgcn.raw.ptr.buffer.load /
// .store on a resource from llvm.amdgcn.make.buffer.rsrc) as a range check
// and a branch around a plain global access, which instrumentMemory then
// checks like any other: an in-range offset that leaves the allocation is
// still reported.
//
// The resource is modelled as the hardware's raw (stride 0) buffer: an
// access is out of range when offset + size exceeds the number of records;
// such a load yields zeros and such a store writes nothing. The hardware
// checks partly-out-of-range accesses dword by dword; the model takes the
// whole access as out of range (the lowering never emits one: its in-range
// offsets are proven to end inside the records, codegen/gpu LowerMemory.cpp).
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>

#include "codegen/emu/EmuPasses.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::emu {

namespace {

[[noreturn]] void refuse(const llvm::CallInst& c, const std::string& why) {
  throw CompileError("the emulator does not support the buffer access `" + describe(c) + "`: " + why);
}

llvm::CallInst* resourceOf(const llvm::CallInst& c, llvm::Value* rsrc) {
  auto* r = llvm::dyn_cast<llvm::CallInst>(rsrc);
  llvm::Function* f = r ? r->getCalledFunction() : nullptr;
  if (!f || !f->getName().starts_with("llvm.amdgcn.make.buffer.rsrc"))
    refuse(c, "its resource is not made by llvm.amdgcn.make.buffer.rsrc in the kernel");
  auto* stride = llvm::dyn_cast<llvm::ConstantInt>(r->getArgOperand(1));
  if (!stride || !stride->isZero()) refuse(c, "only raw resources (stride 0) are modelled");
  if (r->getArgOperand(0)->getType()->getPointerAddressSpace() != kGlobalAS)
    refuse(c, "only resources over global memory are modelled");
  return r;
}

void expand(EmuModule& em, llvm::CallInst& c, bool store) {
  // load: (rsrc, voffset, soffset, aux); store: (value, rsrc, voffset, soffset, aux).
  const unsigned at = store ? 1 : 0;
  llvm::CallInst* rsrc = resourceOf(c, c.getArgOperand(at));
  auto* aux = llvm::dyn_cast<llvm::ConstantInt>(c.getArgOperand(at + 3));
  if (!aux || !aux->isZero()) refuse(c, "cache policy bits are not modelled");
  llvm::Type* ty = store ? c.getArgOperand(0)->getType() : c.getType();
  const uint64_t bytes = em.gpuDL.getTypeStoreSize(ty);

  llvm::IRBuilder<> b(&c);
  llvm::Value* off =
      b.CreateAdd(b.CreateZExt(c.getArgOperand(at + 1), em.i64()), b.CreateZExt(c.getArgOperand(at + 2), em.i64()));
  llvm::Value* records = b.CreateZExtOrTrunc(rsrc->getArgOperand(2), em.i64());
  llvm::Value* inRange = b.CreateICmpULE(b.CreateAdd(off, b.getInt64(bytes)), records);
  llvm::BasicBlock* head = c.getParent();
  llvm::Instruction* thenTerm = llvm::SplitBlockAndInsertIfThen(inRange, c.getIterator(), /*Unreachable=*/false);
  b.SetInsertPoint(thenTerm);
  llvm::Value* addr = b.CreateGEP(b.getInt8Ty(), rsrc->getArgOperand(0), off);
  // Dword alignment (what the hardware requires of these widths), or less
  // for the byte and short forms.
  const llvm::Align align(std::min<uint64_t>(bytes, 4));
  if (store) {
    llvm::StoreInst* st = b.CreateAlignedStore(c.getArgOperand(0), addr, align);
    em.nameAs(*st, c);
    c.eraseFromParent();
    return;
  }
  llvm::LoadInst* ld = b.CreateAlignedLoad(ty, addr, align);
  em.nameAs(*ld, c);
  b.SetInsertPoint(c.getParent(), c.getParent()->begin());
  llvm::PHINode* phi = b.CreatePHI(ty, 2);
  phi->addIncoming(ld, thenTerm->getParent());
  phi->addIncoming(llvm::Constant::getNullValue(ty), head);
  c.replaceAllUsesWith(phi);
  c.eraseFromParent();
}

}  // namespace

void rewriteBufferAccesses(EmuModule& em) {
  if (!em.amd) return;
  std::vector<std::pair<llvm::CallInst*, bool>> work;
  std::vector<llvm::Function*> resources;
  for (llvm::Function& f : em.m) {
    llvm::StringRef name = f.getName();
    const bool load = name.starts_with("llvm.amdgcn.raw.ptr.buffer.load.");
    const bool store = name.starts_with("llvm.amdgcn.raw.ptr.buffer.store.");
    if (name.starts_with("llvm.amdgcn.make.buffer.rsrc")) resources.push_back(&f);
    if (!load && !store) continue;
    for (llvm::User* u : f.users())
      if (auto* c = llvm::dyn_cast<llvm::CallInst>(u); c && c->getCalledFunction() == &f) work.emplace_back(c, store);
  }
  for (auto& [c, store] : work) expand(em, *c, store);
  // The resources' uses are gone (any other use is left for
  // rewriteIntrinsics, which names it).
  for (llvm::Function* f : resources)
    for (llvm::User* u : llvm::make_early_inc_range(f->users()))
      if (auto* c = llvm::dyn_cast<llvm::CallInst>(u); c && c->use_empty()) c->eraseFromParent();
}

}  // namespace tessera::codegen::emu

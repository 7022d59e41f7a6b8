// Vendor intrinsics (llvm.nvvm.*, llvm.amdgcn.*) -> SIMT machine hooks or
// plain host IR. Every intrinsic of either namespace is either mapped with
// its exact semantics (EmuIntrinsicsNvvm.cpp, EmuIntrinsicsAmdgcn.cpp) or
// rejected with a CompileError naming it: an unknown intrinsic must never
// reach the host backend, which would reject it with a fatal error or,
// worse, give it some other meaning.
//
// This file: the dispatch of a call by its namespace, the helpers both
// vendors' rewrites use, and the fragment buffers of the matrix
// instructions (ldmatrix, mma.sync, MFMA, WMMA) (EmuIntrinsics.h).
#include "codegen/emu/EmuIntrinsics.h"

#include "tessera/support/Error.h"

namespace tessera::codegen::emu {

namespace intrinsics {

namespace {

std::vector<std::string> split(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef> parts;
  name.split(parts, '.');
  return {parts.begin(), parts.end()};
}

}  // namespace

[[noreturn]] void unsupported(const llvm::CallInst& c, const std::string& why) {
  throw CompileError("the emulator does not support the intrinsic " + c.getCalledFunction()->getName().str() +
                     (why.empty() ? "" : " (" + why + ")") + ", used by `" + describe(c) + "`");
}

Value* Lowerer::lower(llvm::CallInst& c) {
  llvm::StringRef name = c.getCalledFunction()->getName();
  IRBuilder<> b(&c);
  if (name.consume_front("llvm.nvvm.")) {
    if (em.amd) throw CompileError("NVVM intrinsic llvm.nvvm." + name.str() + " in an AMDGPU module");
    return nvvm(b, c, split(name));
  }
  name.consume_front("llvm.amdgcn.");
  if (!em.amd) throw CompileError("AMDGPU intrinsic llvm.amdgcn." + name.str() + " in an NVPTX module");
  return amdgcn(b, c, split(name));
}

Value* Lowerer::laneExchange(IRBuilder<>& b, const llvm::CallInst& c, Value* v,
                             const std::function<Value*(Value*)>& op) {
  // Pointers too: the pipeline's instcombine folds a readfirstlane of
  // ptrtoint back into one of the pointer (AMDGPU buffer resources' bases).
  llvm::Type* t = v->getType();
  llvm::TypeSize ts = em.gpuDL.getTypeSizeInBits(t);
  if (ts.isScalable() || ts.getFixedValue() > 64 || ts.getFixedValue() == 0 || ts.getFixedValue() % 8)
    unsupported(c, "operand type");
  unsigned bits = ts.getFixedValue();
  Value* iv = toBits(b, v, bits);
  if (bits <= 32) {
    Value* r = op(b.CreateZExt(iv, em.i32()));
    return fromBits(b, b.CreateTrunc(r, b.getIntNTy(bits)), t);
  }
  Value* w = b.CreateZExt(iv, em.i64());
  Value* lo = op(b.CreateTrunc(w, em.i32()));
  Value* hi = op(b.CreateTrunc(b.CreateLShr(w, 32), em.i32()));
  Value* r = b.CreateOr(b.CreateZExt(lo, em.i64()), b.CreateShl(b.CreateZExt(hi, em.i64()), 32));
  return fromBits(b, b.CreateTrunc(r, b.getIntNTy(bits)), t);
}

// ---- matrix instructions ---------------------------------------------------

Lowerer::MatrixScratch Lowerer::matrixScratch(llvm::Function* f) {
  auto it = matrixScratch_.find(f);
  if (it != matrixScratch_.end()) return it->second;
  IRBuilder<> b(em.ctx);
  b.SetInsertPoint(&*f->getEntryBlock().getFirstInsertionPt());
  const llvm::DataLayout& dl = em.m.getDataLayout();
  auto one = [&](const char* n) -> Value* {
    llvm::AllocaInst* a = b.CreateAlloca(llvm::ArrayType::get(b.getInt32Ty(), 16), dl.getAllocaAddrSpace(), nullptr, n);
    a->setAlignment(llvm::Align(16));
    return b.CreateAddrSpaceCast(a, em.flatPtr());
  };
  MatrixScratch ms{one("frag.a"), one("frag.b"), one("frag.c"), one("frag.d")};
  return matrixScratch_[f] = ms;
}

void Lowerer::pack(IRBuilder<>& b, Value* buf, llvm::ArrayRef<Value*> vals) {
  uint64_t off = 0;
  for (Value* v : vals) {
    b.CreateAlignedStore(v, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), buf, off), llvm::Align(4));
    off += em.gpuDL.getTypeStoreSize(v->getType()).getFixedValue();
  }
  TS_ASSERT(off <= 64, "matrix fragment larger than its buffer");
}

Value* Lowerer::unpack(IRBuilder<>& b, Value* buf, llvm::Type* t) {
  if (!t->isStructTy()) return b.CreateAlignedLoad(t, buf, llvm::Align(4));
  Value* r = llvm::PoisonValue::get(t);
  uint64_t off = 0;
  for (unsigned i = 0; i < t->getStructNumElements(); ++i) {
    llvm::Type* et = t->getStructElementType(i);
    r = b.CreateInsertValue(
        r, b.CreateAlignedLoad(et, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), buf, off), llvm::Align(4)), i);
    off += em.gpuDL.getTypeStoreSize(et).getFixedValue();
  }
  return r;
}

Value* Lowerer::matrixCall(IRBuilder<>& b, llvm::CallInst& c, const char* hook, int32_t mode,
                           std::vector<unsigned> aIdx, std::vector<unsigned> bIdx, std::vector<unsigned> cIdx) {
  MatrixScratch ms = matrixScratch(c.getFunction());
  b.SetInsertPoint(&c);
  auto args = [&](const std::vector<unsigned>& idx) {
    std::vector<Value*> v;
    for (unsigned i : idx) v.push_back(c.getArgOperand(i));
    return v;
  };
  pack(b, ms.a, args(aIdx));
  pack(b, ms.b, args(bIdx));
  pack(b, ms.c, args(cIdx));
  callHook(b, hook, {b.getInt32(mode), ms.a, ms.b, ms.c, ms.d});
  return unpack(b, ms.d, c.getType());
}

}  // namespace intrinsics

using intrinsics::Lowerer;
using llvm::Value;

void rewriteIntrinsics(EmuModule& em) {
  Lowerer low(em);
  std::vector<llvm::Function*> decls;
  for (llvm::Function& f : em.m)
    if (f.getName().starts_with("llvm.nvvm.") || f.getName().starts_with("llvm.amdgcn.")) decls.push_back(&f);
  for (llvm::Function* f : decls) {
    std::vector<llvm::CallInst*> calls;
    for (llvm::User* u : f->users()) {
      auto* c = llvm::dyn_cast<llvm::CallInst>(u);
      if (!c || c->getCalledFunction() != f)
        throw CompileError("intrinsic " + f->getName().str() + " is used other than by a direct call");
      calls.push_back(c);
    }
    for (llvm::CallInst* c : calls) {
      Value* r = low.lower(*c);
      if (!c->getType()->isVoidTy()) {
        TS_ASSERT(r && r->getType() == c->getType(), "intrinsic replacement has the wrong type");
        c->replaceAllUsesWith(r);
      }
      c->eraseFromParent();
    }
    f->eraseFromParent();
  }
  // Tensor-memory pointers (addrspace(6), 32 bits) only ever fed the
  // tcgen05 intrinsics, now hooks taking their i32 addresses: what is left
  // of them is dead, and the flattening refuses narrow pointers.
  for (bool changed = true; changed;) {
    changed = false;
    for (llvm::Function& f : em.m)
      for (llvm::BasicBlock& bb : f)
        for (llvm::Instruction& i : llvm::make_early_inc_range(bb))
          if (auto* pt = llvm::dyn_cast<llvm::PointerType>(i.getType());
              pt && pt->getAddressSpace() == 6 && i.use_empty()) {
            i.eraseFromParent();
            changed = true;
          }
  }
}

}  // namespace tessera::codegen::emu

// Moves every pointer of the rewritten GPU module into the host's flat
// address space 0 and re-targets the module at the host.
//
// With opaque pointers an address space lives only in the `ptr addrspace(N)`
// types of values, so flattening is a type remapping: every function is
// cloned with a ValueMapTypeRemapper that sends `ptr addrspace(N)` (also
// inside vectors, arrays, structs and function types) to `ptr`, globals are
// recreated in addrspace(0), and overloaded intrinsics (llvm.memcpy.p1.p3,
// llvm.lifetime.start.p5, ...) are re-declared for the flat types. After the
// earlier steps every address is a real host address (shared memory is the
// machine's region, global memory the caller's buffers, private memory the
// fiber's stack), so dropping the address spaces does not change a value.
#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/ReplaceConstant.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ValueMapper.h>

#include "codegen/emu/EmuPasses.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::emu {

namespace {

class FlatTypes final : public llvm::ValueMapTypeRemapper {
 public:
  explicit FlatTypes(llvm::LLVMContext& c) : ctx_(c) {}

  llvm::Type* remapType(llvm::Type* t) override {
    if (auto it = cache_.find(t); it != cache_.end()) return it->second;
    llvm::Type* r = t;
    if (llvm::isa<llvm::PointerType>(t)) {
      r = llvm::PointerType::get(ctx_, 0);
    } else if (auto* v = llvm::dyn_cast<llvm::VectorType>(t)) {
      r = llvm::VectorType::get(remapType(v->getElementType()), v->getElementCount());
    } else if (auto* a = llvm::dyn_cast<llvm::ArrayType>(t)) {
      r = llvm::ArrayType::get(remapType(a->getElementType()), a->getNumElements());
    } else if (auto* s = llvm::dyn_cast<llvm::StructType>(t); s && !s->isOpaque()) {
      std::vector<llvm::Type*> el;
      bool changed = false;
      for (llvm::Type* e : s->elements()) {
        el.push_back(remapType(e));
        changed |= el.back() != e;
      }
      if (changed)
        r = s->isLiteral() ? llvm::StructType::get(ctx_, el, s->isPacked())
                           : llvm::StructType::create(ctx_, el, s->getName().str() + ".flat", s->isPacked());
    } else if (auto* f = llvm::dyn_cast<llvm::FunctionType>(t)) {
      std::vector<llvm::Type*> ps;
      for (llvm::Type* p : f->params()) ps.push_back(remapType(p));
      r = llvm::FunctionType::get(remapType(f->getReturnType()), ps, f->isVarArg());
    }
    cache_[t] = r;
    return r;
  }

 private:
  llvm::LLVMContext& ctx_;
  llvm::DenseMap<llvm::Type*, llvm::Type*> cache_;
};

// A pointer type whose GPU width is not the host's 64 bits (AMDGPU's LDS and
// private pointers are 32-bit), anywhere inside `t`.
bool hasNarrowPointer(const llvm::DataLayout& dl, llvm::Type* t) {
  if (auto* p = llvm::dyn_cast<llvm::PointerType>(t)) return dl.getPointerSizeInBits(p->getAddressSpace()) != 64;
  for (llvm::Type* s : t->subtypes())
    if (hasNarrowPointer(dl, s)) return true;
  return false;
}

// Values whose size in memory would change when their pointers widen to 64
// bits: the GPU code's offsets were computed for the narrow layout.
void checkPointerWidths(EmuModule& em) {
  const llvm::DataLayout& dl = em.gpuDL;
  auto refuse = [&](const std::string& what) {
    throw CompileError("the emulator cannot run " + what +
                       ": it holds pointers narrower than the host's in memory (their layout would change)");
  };
  for (llvm::GlobalVariable& g : em.m.globals())
    if (hasNarrowPointer(dl, g.getValueType())) refuse("global @" + g.getName().str());
  for (llvm::Function& f : em.m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb) {
        llvm::Type* mem = nullptr;
        if (auto* l = llvm::dyn_cast<llvm::LoadInst>(&i))
          mem = l->getType();
        else if (auto* s = llvm::dyn_cast<llvm::StoreInst>(&i))
          mem = s->getValueOperand()->getType();
        else if (auto* a = llvm::dyn_cast<llvm::AllocaInst>(&i))
          mem = a->getAllocatedType();
        else if (auto* g = llvm::dyn_cast<llvm::GetElementPtrInst>(&i))
          mem = g->getSourceElementType();
        else if (auto* r = llvm::dyn_cast<llvm::AtomicRMWInst>(&i))
          mem = r->getValOperand()->getType();
        else if (auto* c = llvm::dyn_cast<llvm::AtomicCmpXchgInst>(&i))
          mem = c->getCompareOperand()->getType();
        if (mem && hasNarrowPointer(dl, mem)) refuse("`" + describe(i) + "`");
        // Integer views of private pointers would be truncated host
        // addresses (shared ones were rebased onto offsets already).
        if (auto* p2i = llvm::dyn_cast<llvm::PtrToIntInst>(&i);
            p2i && dl.getPointerSizeInBits(p2i->getPointerAddressSpace()) != 64)
          refuse("`" + describe(i) + "`");
        if (auto* i2p = llvm::dyn_cast<llvm::IntToPtrInst>(&i);
            i2p && dl.getPointerSizeInBits(i2p->getAddressSpace()) != 64)
          refuse("`" + describe(i) + "`");
      }
}

void stripTargetAttributes(llvm::Function& f) {
  std::vector<std::string> drop;
  for (const llvm::Attribute& a : f.getAttributes().getFnAttrs()) {
    if (!a.isStringAttribute()) continue;
    llvm::StringRef k = a.getKindAsString();
    if (k.starts_with("target-") || k == "tune-cpu" || k.starts_with("amdgpu") || k.starts_with("nvvm") ||
        k.starts_with("nvptx") || k == "uniform-work-group-size" || k.starts_with("denormal-fp-math"))
      drop.push_back(k.str());
  }
  for (const std::string& k : drop) f.removeFnAttr(k);
  f.setCallingConv(llvm::CallingConv::C);
}

}  // namespace

void flattenAddressSpaces(EmuModule& em, const llvm::DataLayout& hostDL, const std::string& hostTriple) {
  llvm::Module& m = em.m;
  checkPointerWidths(em);
  for (llvm::GlobalAlias& a : m.aliases())
    throw CompileError("the emulator does not support the alias @" + a.getName().str());

  // Constant expressions in function bodies become instructions first: the
  // mapper would otherwise rebuild `addrspacecast` constants between what
  // become equal types, which is not a valid constant.
  std::vector<llvm::Constant*> exprs;
  llvm::SmallPtrSet<llvm::Constant*, 16> seen;
  for (llvm::Function& f : m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb)
        for (llvm::Value* op : i.operands())
          if (auto* ce = llvm::dyn_cast<llvm::ConstantExpr>(op); ce && seen.insert(ce).second) exprs.push_back(ce);
  if (!exprs.empty())
    llvm::convertUsersOfConstantsToInstructions(exprs, nullptr, /*RemoveDeadConstants=*/true, /*IncludeSelf=*/true);

  FlatTypes types(em.ctx);
  llvm::ValueToValueMapTy vmap;

  std::vector<llvm::GlobalVariable*> oldGlobals;
  for (llvm::GlobalVariable& g : m.globals())
    if (g.getAddressSpace() != kFlatAS || types.remapType(g.getValueType()) != g.getValueType())
      oldGlobals.push_back(&g);
  std::vector<std::pair<llvm::GlobalVariable*, llvm::GlobalVariable*>> globals;
  for (llvm::GlobalVariable* g : oldGlobals) {
    auto* ng =
        new llvm::GlobalVariable(m, types.remapType(g->getValueType()), g->isConstant(), g->getLinkage(), nullptr, "",
                                 nullptr, g->getThreadLocalMode(), kFlatAS, g->isExternallyInitialized());
    ng->copyAttributesFrom(g);
    vmap[g] = ng;
    globals.emplace_back(g, ng);
  }

  std::vector<llvm::Function*> oldFns;
  for (llvm::Function& f : m) oldFns.push_back(&f);
  std::vector<std::pair<llvm::Function*, llvm::Function*>> fns;
  for (llvm::Function* f : oldFns) {
    auto* ft = llvm::cast<llvm::FunctionType>(types.remapType(f->getFunctionType()));
    if (f->isIntrinsic()) {
      if (ft == f->getFunctionType()) continue;
      llvm::SmallVector<llvm::Type*> tys;
      TS_ASSERT(llvm::Intrinsic::getIntrinsicSignature(f, tys), "intrinsic without a signature: " + f->getName().str());
      for (llvm::Type*& t : tys) t = types.remapType(t);
      vmap[f] = llvm::Intrinsic::getOrInsertDeclaration(&m, f->getIntrinsicID(), tys);
      fns.emplace_back(f, nullptr);
      continue;
    }
    if (f->isDeclaration() && ft == f->getFunctionType()) continue;
    auto* nf = llvm::Function::Create(ft, f->getLinkage(), kFlatAS, "", &m);
    if (f->isDeclaration()) nf->copyAttributesFrom(f);
    vmap[f] = nf;
    fns.emplace_back(f, nf);
  }
  for (auto [f, nf] : fns) {
    if (!nf || f->isDeclaration()) continue;
    for (unsigned i = 0; i < f->arg_size(); ++i) {
      vmap[f->getArg(i)] = nf->getArg(i);
      nf->getArg(i)->setName(f->getArg(i)->getName());
    }
    llvm::SmallVector<llvm::ReturnInst*, 4> returns;
    llvm::CloneFunctionInto(nf, f, vmap, llvm::CloneFunctionChangeType::LocalChangesOnly, returns, "", nullptr, &types);
  }
  for (auto [g, ng] : globals)
    if (g->hasInitializer()) ng->setInitializer(llvm::MapValue(g->getInitializer(), vmap, llvm::RF_None, &types));

  // Retire the originals: bodies first, so no old function or global is
  // still used by another old body when it goes.
  for (auto [f, nf] : fns) f->dropAllReferences();
  for (auto [g, ng] : globals) g->dropAllReferences();
  for (auto [f, nf] : fns) {
    llvm::Function* repl = nf ? nf : llvm::cast<llvm::Function>(vmap[f]);
    f->replaceAllUsesWith(repl);  // functions are `ptr` either way
    if (nf) nf->takeName(f);
    if (f == em.kernel) em.kernel = repl;
    f->eraseFromParent();
  }
  for (auto [g, ng] : globals) {
    TS_ASSERT(g->use_empty(), "global @" + g->getName().str() + " still used after flattening");
    ng->takeName(g);
    g->eraseFromParent();
  }

  for (llvm::Function& f : m) {
    stripTargetAttributes(f);
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : llvm::make_early_inc_range(bb)) {
        if (auto* cb = llvm::dyn_cast<llvm::CallBase>(&i)) cb->setCallingConv(llvm::CallingConv::C);
        // A cast between what were two address spaces is now a no-op.
        if (auto* asc = llvm::dyn_cast<llvm::AddrSpaceCastInst>(&i); asc && asc->getSrcTy() == asc->getDestTy()) {
          asc->replaceAllUsesWith(asc->getOperand(0));
          asc->eraseFromParent();
        }
      }
  }
  m.setDataLayout(hostDL);
  m.setTargetTriple(llvm::Triple(hostTriple));
}

}  // namespace tessera::codegen::emu

// Memory of the emulated GPU: instrumentation of global and shared accesses,
// and the layout of shared (addrspace(3)) variables in the block's shared
// region that the SIMT machine provides.
#include <map>

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/ReplaceConstant.h>
#include <llvm/Support/Alignment.h>

#include "codegen/emu/EmuPasses.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::emu {

namespace {

enum class Space { Global, Shared, Cluster, Unchecked, Private };

// Which memory an access touches. Flat (generic) pointers are traced to
// their underlying object: NVPTX code may still address shared or global
// memory through `addrspacecast`ed generic pointers.
Space classify(EmuModule& em, llvm::Value* ptr, const llvm::Instruction& inst) {
  // Constant tables of the module (a device library's coefficients) are
  // read-only data of the code, not device memory the machine tracks.
  if (auto* g = llvm::dyn_cast<llvm::GlobalVariable>(llvm::getUnderlyingObject(ptr, 0)); g && g->isConstant())
    return Space::Private;
  unsigned as = ptr->getType()->getPointerAddressSpace();
  if (as == kFlatAS) {
    const llvm::Value* obj = llvm::getUnderlyingObject(ptr, 0);
    if (llvm::isa<llvm::AllocaInst>(obj)) return Space::Private;
    // A generic mapa's result addresses another block's shared memory.
    if (auto* call = llvm::dyn_cast<llvm::CallInst>(obj);
        call && call->getCalledFunction() && call->getCalledFunction()->getName().starts_with("llvm.nvvm.mapa"))
      return Space::Cluster;
    unsigned objAs = obj->getType()->isPointerTy() ? obj->getType()->getPointerAddressSpace() : kFlatAS;
    if (objAs == kFlatAS) return Space::Unchecked;
    as = objAs;
  }
  switch (as) {
    case kGlobalAS: return Space::Global;
    case kSharedAS: return Space::Shared;
    case kSharedClusterAS:
      if (!em.amd) return Space::Cluster;
      break;
    // Constant memory and kernel arguments are read-only and not registered
    // with the machine; private memory is the thread's own stack.
    case kConstantAS:
    case kPrivateAS: return Space::Private;
    default: break;
  }
  throw CompileError("the emulator does not model memory in address space " + std::to_string(as) + " (accessed by `" +
                     describe(inst) + "`)");
}

struct Instrumenter {
  EmuModule& em;
  llvm::FunctionCallee globalHook, sharedHook, clusterHook;

  explicit Instrumenter(EmuModule& e) : em(e) {
    globalHook = em.hook("tessera_emu_global_access");
    sharedHook = em.hook("tessera_emu_shared_access");
    clusterHook = em.hook("tessera_emu_cluster_access");
  }

  // Routes operand `idx` of `inst` through the access hook; the access then
  // uses the address the hook returns (a scratch area when out of bounds).
  void route(llvm::Instruction& inst, unsigned idx, llvm::Value* bytes, int32_t kind, int32_t opId, Space space) {
    llvm::IRBuilder<> b(&inst);
    llvm::Value* p = inst.getOperand(idx);
    auto* pty = llvm::cast<llvm::PointerType>(p->getType());
    llvm::Value* flat = pty->getAddressSpace() == kFlatAS ? p : b.CreateAddrSpaceCast(p, em.flatPtr());
    llvm::FunctionCallee hook = space == Space::Shared    ? sharedHook
                                : space == Space::Cluster ? clusterHook
                                                          : globalHook;
    llvm::Value* r =
        b.CreateCall(hook, {flat, b.CreateZExtOrTrunc(bytes, em.i64()), b.getInt32(kind), b.getInt32(opId)});
    inst.setOperand(idx, pty->getAddressSpace() == kFlatAS ? r : b.CreateAddrSpaceCast(r, pty));
  }

  uint64_t storeSize(llvm::Type* t, const llvm::Instruction& inst) {
    llvm::TypeSize ts = em.gpuDL.getTypeStoreSize(t);
    if (ts.isScalable()) throw CompileError("scalable vector access `" + describe(inst) + "` cannot be emulated");
    return ts.getFixedValue();
  }

  void visit(llvm::Instruction& inst) {
    llvm::IRBuilder<> b(&inst);
    if (auto* ld = llvm::dyn_cast<llvm::LoadInst>(&inst)) {
      Space s = classify(em, ld->getPointerOperand(), inst);
      if (!track(s)) return;
      route(inst, ld->getPointerOperandIndex(), b.getInt64(storeSize(ld->getType(), inst)),
            ld->isAtomic() ? kAtomic : kLoad, em.opId(inst), s);
    } else if (auto* st = llvm::dyn_cast<llvm::StoreInst>(&inst)) {
      Space s = classify(em, st->getPointerOperand(), inst);
      if (!track(s)) return;
      route(inst, st->getPointerOperandIndex(), b.getInt64(storeSize(st->getValueOperand()->getType(), inst)),
            st->isAtomic() ? kAtomic : kStore, em.opId(inst), s);
    } else if (auto* rmw = llvm::dyn_cast<llvm::AtomicRMWInst>(&inst)) {
      Space s = classify(em, rmw->getPointerOperand(), inst);
      if (!track(s)) return;
      route(inst, rmw->getPointerOperandIndex(), b.getInt64(storeSize(rmw->getValOperand()->getType(), inst)), kAtomic,
            em.opId(inst), s);
    } else if (auto* cx = llvm::dyn_cast<llvm::AtomicCmpXchgInst>(&inst)) {
      Space s = classify(em, cx->getPointerOperand(), inst);
      if (!track(s)) return;
      route(inst, cx->getPointerOperandIndex(), b.getInt64(storeSize(cx->getCompareOperand()->getType(), inst)),
            kAtomic, em.opId(inst), s);
    } else if (auto* mi = llvm::dyn_cast<llvm::MemIntrinsic>(&inst)) {
      Space d = classify(em, mi->getRawDest(), inst);
      Space src = Space::Private;
      if (auto* mt = llvm::dyn_cast<llvm::MemTransferInst>(mi)) src = classify(em, mt->getRawSource(), inst);
      if (!track(d) && !track(src)) return;
      int32_t op = em.opId(inst);
      if (track(src)) route(inst, 1, mi->getLength(), kLoad, op, src);
      if (track(d)) route(inst, 0, mi->getLength(), kStore, op, d);
    } else if (auto* ii = llvm::dyn_cast<llvm::IntrinsicInst>(&inst)) {
      // Generic intrinsics that touch memory through a pointer argument
      // would bypass the checks (and masked ones would report false
      // out-of-bounds accesses for masked-off lanes): refuse them rather
      // than run them unchecked.
      llvm::StringRef n = ii->getCalledFunction()->getName();
      if (n.starts_with("llvm.masked.") || n.starts_with("llvm.vp.") || n.starts_with("llvm.experimental.vp."))
        for (llvm::Value* a : ii->args())
          if (a->getType()->isPointerTy() && a->getType()->getPointerAddressSpace() != kPrivateAS)
            throw CompileError("the emulator cannot check the memory intrinsic " + n.str() + " (`" + describe(inst) +
                               "`)");
    }
  }

  bool track(Space s) {
    if (s == Space::Unchecked) ++em.uncheckedAccesses;
    return s == Space::Global || s == Space::Shared || s == Space::Cluster;
  }
};

}  // namespace

void instrumentMemory(EmuModule& em) {
  Instrumenter ins(em);
  for (llvm::Function& f : em.m) {
    if (f.isDeclaration()) continue;
    std::vector<llvm::Instruction*> work;
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb) work.push_back(&i);
    for (llvm::Instruction* i : work) ins.visit(*i);
  }
}

void lowerSharedMemory(EmuModule& em) {
  std::vector<llvm::GlobalVariable*> shared;
  for (llvm::GlobalVariable& g : em.m.globals())
    if (g.getAddressSpace() == kSharedAS) shared.push_back(&g);

  // Layout: static variables in module order at their alignment from offset
  // 0, then the dynamic region (CUDA `extern __shared__`, AMDGPU zero-sized
  // LDS arrays), which every dynamic variable aliases, as on both GPUs.
  std::map<llvm::GlobalVariable*, uint64_t> offset;
  std::vector<llvm::GlobalVariable*> dynamic;
  uint64_t off = 0;
  llvm::Align dynAlign(16);
  for (llvm::GlobalVariable* g : shared) {
    if (g->hasInitializer() && !llvm::isa<llvm::UndefValue>(g->getInitializer()))
      throw CompileError("shared variable @" + g->getName().str() +
                         " has an initializer; GPU shared memory cannot be initialised");
    llvm::Type* t = g->getValueType();
    uint64_t size = em.gpuDL.getTypeAllocSize(t).getFixedValue();
    llvm::Align a = g->getAlign().value_or(em.gpuDL.getABITypeAlign(t));
    if (g->isDeclaration() || size == 0) {
      dynamic.push_back(g);
      dynAlign = std::max(dynAlign, a);
      continue;
    }
    off = llvm::alignTo(off, a);
    offset[g] = off;
    off += size;
  }
  em.staticSharedBytes = off;
  em.dynamicSharedOffset = llvm::alignTo(off, dynAlign);
  for (llvm::GlobalVariable* g : dynamic) offset[g] = em.dynamicSharedOffset;

  // Integer views of shared pointers are offsets into the block's shared
  // window on the GPU (and AMDGPU's LDS pointers are 32 bits wide), so they
  // are rebased on the machine's shared base rather than taken as host
  // addresses.
  std::vector<llvm::Constant*> consts(shared.begin(), shared.end());
  if (!consts.empty()) llvm::convertUsersOfConstantsToInstructions(consts);
  std::vector<llvm::Instruction*> intCasts;
  for (llvm::Function& f : em.m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb) {
        if (auto* p2i = llvm::dyn_cast<llvm::PtrToIntInst>(&i); p2i && p2i->getPointerAddressSpace() == kSharedAS)
          intCasts.push_back(&i);
        if (auto* i2p = llvm::dyn_cast<llvm::IntToPtrInst>(&i); i2p && i2p->getAddressSpace() == kSharedAS)
          intCasts.push_back(&i);
      }
  if (shared.empty() && intCasts.empty()) return;

  llvm::FunctionCallee baseHook = em.hook("tessera_emu_shared_base");
  llvm::PointerType* sharedPtr = llvm::PointerType::get(em.ctx, kSharedAS);
  // One shared_base() call per function, at its entry.
  std::map<llvm::Function*, llvm::Instruction*> baseOf;
  auto base = [&](llvm::Function* f) -> llvm::Instruction* {
    auto [it, fresh] = baseOf.emplace(f, nullptr);
    if (fresh) {
      llvm::IRBuilder<> b(&*f->getEntryBlock().getFirstInsertionPt());
      it->second = b.CreateCall(baseHook, {}, "shared.base");
    }
    return it->second;
  };
  auto baseAfter = [&](llvm::Function* f) {
    llvm::Instruction* bi = base(f);
    return llvm::IRBuilder<>(bi->getNextNode());
  };

  for (llvm::GlobalVariable* g : shared) {
    std::map<llvm::Function*, llvm::Value*> addrIn;
    for (llvm::Use& u : llvm::make_early_inc_range(g->uses())) {
      auto* user = llvm::dyn_cast<llvm::Instruction>(u.getUser());
      if (!user)
        throw CompileError("shared variable @" + g->getName().str() +
                           " is referenced outside a function; the emulator cannot place it");
      llvm::Function* f = user->getFunction();
      llvm::Value*& addr = addrIn[f];
      if (!addr) {
        llvm::IRBuilder<> b = baseAfter(f);
        llvm::Value* p = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), base(f), offset[g], g->getName() + ".addr");
        addr = b.CreateAddrSpaceCast(p, sharedPtr);
      }
      u.set(addr);
    }
    g->eraseFromParent();
  }

  for (llvm::Instruction* i : intCasts) {
    llvm::IRBuilder<> b(i);
    llvm::Value* sb = b.CreatePtrToInt(base(i->getFunction()), em.i64());
    if (auto* p2i = llvm::dyn_cast<llvm::PtrToIntInst>(i)) {
      llvm::Value* host = b.CreatePtrToInt(b.CreateAddrSpaceCast(p2i->getPointerOperand(), em.flatPtr()), em.i64());
      llvm::Value* rel = b.CreateZExtOrTrunc(b.CreateSub(host, sb), i->getType());
      i->replaceAllUsesWith(rel);
    } else {
      llvm::Value* rel = b.CreateZExtOrTrunc(i->getOperand(0), em.i64());
      llvm::Value* host = b.CreateGEP(b.getInt8Ty(), base(i->getFunction()), rel);
      i->replaceAllUsesWith(b.CreateAddrSpaceCast(host, i->getType()));
    }
    i->eraseFromParent();
  }
}

}  // namespace tessera::codegen::emu

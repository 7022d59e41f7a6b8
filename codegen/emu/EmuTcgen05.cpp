// NVIDIA's tcgen05 intrinsics (llvm.nvvm.tcgen05.*, Blackwell) on the
// SIMT machine (EmuIntrinsics.h): the allocation, the MMAs (dense and
// block-scaled), the copy from shared memory (.32x128b.warpx4), the
// commit, the register loads and stores of tensor memory map
// to the machine's hooks (runtime/emu/Tcgen05.cpp); the fences and waits
// order nothing the machine does not already order, its hooks acting at
// once. Tensor-memory pointers (addrspace(6)) become the i32 addresses
// they were made from.
#include "codegen/emu/EmuIntrinsics.h"
#include "tessera/support/Error.h"
#include "tessera/support/Tcgen05.h"

namespace tessera::codegen::emu::intrinsics {

Value* Lowerer::tmemAddress(IRBuilder<>& b, const llvm::CallInst& c, Value* p) {
  if (auto* i2p = llvm::dyn_cast<llvm::IntToPtrInst>(p)) return b.CreateZExtOrTrunc(i2p->getOperand(0), em.i32());
  if (auto* ce = llvm::dyn_cast<llvm::ConstantExpr>(p); ce && ce->getOpcode() == llvm::Instruction::IntToPtr)
    return b.CreateZExtOrTrunc(ce->getOperand(0), em.i32());
  if (llvm::isa<llvm::ConstantPointerNull>(p)) return b.getInt32(0);
  if (auto* gep = llvm::dyn_cast<llvm::GetElementPtrInst>(p)) {
    llvm::APInt off(32, 0);
    if (gep->getSourceElementType()->isIntegerTy(8) && gep->getNumIndices() == 1)
      return b.CreateAdd(tmemAddress(b, c, gep->getPointerOperand()),
                         b.CreateZExtOrTrunc(gep->getOperand(1), em.i32()));
  }
  unsupported(c, "its tensor-memory address is not an integer the machine can follow");
}

Value* Lowerer::tcgen05(IRBuilder<>& b, llvm::CallInst& c, const std::vector<std::string>& t) {
  const int32_t op = em.opId(c);
  auto flat = [&](unsigned i) { return b.CreateAddrSpaceCast(c.getArgOperand(i), em.flatPtr()); };
  const std::string& k = t.size() > 1 ? t[1] : "";
  const bool cg1 = t.back() == "cg1";
  if (k == "fence" || k == "wait") return nullptr;  // the hooks complete at once
  if (!cg1 && (k == "alloc" || k == "dealloc" || k == "relinq" || k == "commit" || k == "cp"))
    unsupported(c, "only cta_group::1 is modelled (no clusters)");
  if (k == "alloc") {
    if (!has(t, "shared")) unsupported(c, "the allocation's address must be a shared word");
    callHook(b, "tessera_emu_tcgen05_alloc", {flat(0), c.getArgOperand(1), b.getInt32(op)});
    return nullptr;
  }
  if (k == "dealloc") {
    callHook(b, "tessera_emu_tcgen05_dealloc",
             {tmemAddress(b, c, c.getArgOperand(0)), c.getArgOperand(1), b.getInt32(op)});
    return nullptr;
  }
  if (k == "relinq") return nullptr;  // no other CTA allocates on the machine's SM
  if (k == "commit") {
    if (has(t, "mc") || !has(t, "shared")) unsupported(c, "only the commit to a shared mbarrier without multicast");
    callHook(b, "tessera_emu_tcgen05_commit", {flat(0), b.getInt32(op)});
    return nullptr;
  }
  if (k == "cp") {
    // llvm.nvvm.tcgen05.cp.32x128b_warpx4.cg1(taddr, sdesc).
    if (t.size() != 4 || t[2] != "32x128b_warpx4")
      unsupported(c, "only tcgen05.cp's .32x128b.warpx4 shape is modelled");
    callHook(b, "tessera_emu_tcgen05_cp", {tmemAddress(b, c, c.getArgOperand(0)), c.getArgOperand(1), b.getInt32(op)});
    return nullptr;
  }
  if (k == "mma" && t.size() == 6 && t[2] == "shared" && t[4] == "block_scale") {
    // llvm.nvvm.tcgen05.mma.shared.<kind>.block_scale.block<N>(d, adesc,
    // bdesc, idesc, enable_input_d, scale_a, scale_b, cta_group,
    // collector): mxf8f6f4 and mxf4 with blocks of 32, mxf4nvf4 with 16.
    const int32_t kind = t[3] == "mxf8f6f4" && t[5] == "block32"   ? int32_t(tcgen05::ScaledKind::MxF8f6f4)
                         : t[3] == "mxf4" && t[5] == "block32"     ? int32_t(tcgen05::ScaledKind::MxF4)
                         : t[3] == "mxf4nvf4" && t[5] == "block16" ? int32_t(tcgen05::ScaledKind::MxF4Nvf4)
                                                                   : -1;
    auto imm = [&](unsigned i) { return llvm::cast<llvm::ConstantInt>(c.getArgOperand(i))->getZExtValue(); };
    if (kind < 0 || imm(7) != 1)
      unsupported(c,
                  "only kind::mxf8f6f4 and kind::mxf4 with blocks of 32, kind::mxf4nvf4 with blocks of 16, "
                  "cta_group::1");
    callHook(b, "tessera_emu_tcgen05_mma_scaled",
             {tmemAddress(b, c, c.getArgOperand(0)), c.getArgOperand(1), c.getArgOperand(2), c.getArgOperand(3),
              b.CreateZExt(c.getArgOperand(4), em.i32()), tmemAddress(b, c, c.getArgOperand(5)),
              tmemAddress(b, c, c.getArgOperand(6)), b.getInt32(kind), b.getInt32(op)});
    return nullptr;
  }
  if (k == "mma") {
    // llvm.nvvm.tcgen05.mma.shared(d, adesc, bdesc, idesc, enable_input_d,
    // kind, cta_group, collector): kind::f16, f8f6f4 or i8 (tcgen05::Kind),
    // cta_group::1.
    if (t.size() != 3 || t[2] != "shared") unsupported(c, "only tcgen05.mma with both operands in shared memory");
    auto imm = [&](unsigned i) { return llvm::cast<llvm::ConstantInt>(c.getArgOperand(i))->getZExtValue(); };
    const uint64_t kind = imm(5);
    if (kind == static_cast<uint64_t>(tcgen05::Kind::Tf32) || kind > static_cast<uint64_t>(tcgen05::Kind::I8) ||
        imm(6) != 1)
      unsupported(c, "only kind::f16, kind::f8f6f4 and kind::i8 with cta_group::1");
    callHook(b, "tessera_emu_tcgen05_mma",
             {tmemAddress(b, c, c.getArgOperand(0)), c.getArgOperand(1), c.getArgOperand(2), c.getArgOperand(3),
              b.CreateZExt(c.getArgOperand(4), em.i32()), b.getInt32(static_cast<uint32_t>(kind)), b.getInt32(op)});
    return nullptr;
  }
  if (k == "ld" || k == "st") {
    // .16x256b.x{1,2,4,8}: 4 registers per repetition, at most 32.
    if (t.size() != 4 || t[2] != "16x256b" || t[3].size() < 2 || t[3][0] != 'x')
      unsupported(c, "only the .16x256b shape is modelled");
    const int reps = std::stoi(t[3].substr(1));
    if (reps < 1 || reps > 8) unsupported(c, "at most .x8");
    llvm::Function* f = c.getFunction();
    auto it = tmemBuffers_.find(f);
    if (it == tmemBuffers_.end()) {
      IRBuilder<> eb(&*f->getEntryBlock().getFirstInsertionPt());
      llvm::AllocaInst* a = eb.CreateAlloca(llvm::ArrayType::get(eb.getInt32Ty(), 32),
                                            em.m.getDataLayout().getAllocaAddrSpace(), nullptr, "tmem.regs");
      a->setAlignment(llvm::Align(16));
      it = tmemBuffers_.emplace(f, eb.CreateAddrSpaceCast(a, em.flatPtr())).first;
    }
    b.SetInsertPoint(&c);
    Value* addr = tmemAddress(b, c, c.getArgOperand(0));
    if (k == "ld") {
      callHook(b, "tessera_emu_tcgen05_ld", {addr, b.getInt32(reps), it->second, b.getInt32(op)});
      return b.CreateAlignedLoad(c.getType(), it->second, llvm::Align(16));
    }
    b.CreateAlignedStore(c.getArgOperand(1), it->second, llvm::Align(16));
    callHook(b, "tessera_emu_tcgen05_st", {addr, b.getInt32(reps), it->second, b.getInt32(op)});
    return nullptr;
  }
  unsupported(c);
}

}  // namespace tessera::codegen::emu::intrinsics

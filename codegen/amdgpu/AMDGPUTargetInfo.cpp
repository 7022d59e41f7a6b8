// AMD GPUs: the target hooks of the shared GPU lowering and the backend
// (ELF object through LLVM's AMDGPU target, linked by LLD into a .hsaco
// code object; AMDGCN assembly for inspection; resources from the code
// object's metadata note).
#include <array>
#include <numbers>
#include <mutex>

#include <llvm/BinaryFormat/ELF.h>
#include <llvm/BinaryFormat/MsgPackDocument.h>
#include <llvm/IR/MemoryModelRelaxationAnnotations.h>
#include <llvm/IR/IntrinsicsAMDGPU.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "codegen/amdgpu/AMDGPUDot.h"
#include "codegen/amdgpu/AMDGPULink.h"
#include "codegen/gpu/GpuTargetInfo.h"
#include "codegen/amdgpu/AMDGPUTargetInfo.h"
#include "codegen/llvm/LLVMSupport.h"
#include "tessera/support/Targets.h"

extern "C" {
void LLVMInitializeAMDGPUTargetInfo();
void LLVMInitializeAMDGPUTarget();
void LLVMInitializeAMDGPUTargetMC();
void LLVMInitializeAMDGPUAsmPrinter();
}

namespace tessera::codegen {

namespace {

// v_exp_f32 / v_log_f32 are 1-ulp for exp2/log2 only and flush denormals
// on some parts; the polynomials match the other targets. The ROCm device
// libraries (OCML) are not linked: f64 transcendentals take the f64
// polynomials.
constexpr GpuMathNotes kAmdgpuMath = {
    nullptr,
    "llvm.sqrt, correctly rounded expansion",
    "1 / sqrt with a correctly rounded division (v_rsq is not used)",
    "llvm.floor -> v_floor",
};

// (A | B) - A -> B where the `or` is disjoint (an add whose operands share
// no bit, as instcombine rewrites adds of an aligned base and a lane
// offset). The buffer offsets (Lower::bufferOffset) are such differences: a
// slot's offset less the uniform base's, and instcombine folds (A + B) - A
// but not its disjoint-or form, which left one v_sub per masked vector
// access.
void foldDisjointOrDifferences(llvm::Function& f) {
  for (llvm::BasicBlock& bb : f)
    for (llvm::Instruction& i : llvm::make_early_inc_range(bb)) {
      auto* sub = llvm::dyn_cast<llvm::BinaryOperator>(&i);
      if (!sub || sub->getOpcode() != llvm::Instruction::Sub) continue;
      auto* orOp = llvm::dyn_cast<llvm::PossiblyDisjointInst>(sub->getOperand(0));
      if (!orOp || !orOp->isDisjoint()) continue;
      llvm::Value* a = sub->getOperand(1);
      llvm::Value* rest = orOp->getOperand(0) == a   ? orOp->getOperand(1)
                          : orOp->getOperand(1) == a ? orOp->getOperand(0)
                                                     : nullptr;
      if (!rest) continue;
      sub->replaceAllUsesWith(rest);
      sub->eraseFromParent();
    }
}

// Registers LLVM's AMDGPU target once per process.
void initAMDGPU() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
  });
}

class AMDGPUTargetInfo final : public GpuTargetInfo {
 public:
  explicit AMDGPUTargetInfo(const GpuConfig& c) : GpuTargetInfo(c) {}
  std::string triple() const override { return "amdgcn-amd-amdhsa"; }
  const char* syncScope(ir::MemScope s) const override {
    return s == ir::MemScope::Program ? "workgroup" : s == ir::MemScope::Device ? "agent" : "";
  }
  llvm::Value* threadId(llvm::IRBuilderBase& b, int axis) override {
    static constexpr std::array<llvm::Intrinsic::ID, 3> ids = {llvm::Intrinsic::amdgcn_workitem_id_x,
                                                               llvm::Intrinsic::amdgcn_workitem_id_y,
                                                               llvm::Intrinsic::amdgcn_workitem_id_z};
    return b.CreateIntrinsic(ids[static_cast<size_t>(axis)], {});
  }
  llvm::Value* blockId(llvm::IRBuilderBase& b, int axis) override {
    static constexpr std::array<llvm::Intrinsic::ID, 3> ids = {llvm::Intrinsic::amdgcn_workgroup_id_x,
                                                               llvm::Intrinsic::amdgcn_workgroup_id_y,
                                                               llvm::Intrinsic::amdgcn_workgroup_id_z};
    return b.CreateIntrinsic(ids[static_cast<size_t>(axis)], {});
  }
  // The HSA dispatch packet: workgroup_size_x/y/z are u16 at bytes 4/6/8,
  // grid_size_x/y/z (in work-items) u32 at bytes 12/16/20.
  llvm::Value* dispatchField(llvm::IRBuilderBase& b, uint64_t off, llvm::Type* ty) {
    llvm::Value* dp = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_dispatch_ptr, {});
    llvm::Value* p = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), dp, off);
    auto* ld = b.CreateAlignedLoad(ty, p, llvm::Align(ty->getPrimitiveSizeInBits() / 8));
    ld->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(b.getContext(), {}));
    return ld;
  }
  llvm::Value* blockDim(llvm::IRBuilderBase& b, int axis) override {
    return b.CreateZExt(dispatchField(b, 4 + 2 * static_cast<uint64_t>(axis), b.getInt16Ty()), b.getInt32Ty());
  }
  llvm::Value* gridDim(llvm::IRBuilderBase& b, int axis) override {
    llvm::Value* items = dispatchField(b, 12 + 4 * static_cast<uint64_t>(axis), b.getInt32Ty());
    return b.CreateUDiv(items, blockDim(b, axis));
  }
  // The constant 100 MHz clock shared by the whole device (the shader
  // clock counts per CU and varies with its frequency): s_memrealtime on
  // gfx9, a message returning it (MSG_RTN_GET_REALTIME, 0x83) on gfx11.
  llvm::Value* profileClock(llvm::IRBuilderBase& b) override {
    if (row().gfxMajor >= 11)
      return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_sendmsg_rtn, {b.getInt64Ty()}, {b.getInt32(0x83)});
    return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_memrealtime, {});
  }
  KernelBinary::ProfileClock profileClockKind() const override { return KernelBinary::ProfileClock::Realtime100MHz; }
  // The CU from the hardware-id register, s_getreg_b32 of its bits
  // (offset, size): gfx9 HW_ID (4) holds CU_ID, SH_ID and SE_ID at 8..14;
  // gfx11 HW_ID1 (23) WGP_ID, SA_ID and SE_ID at 10..20.
  llvm::Value* profileUnit(llvm::IRBuilderBase& b) override {
    const bool gfx11 = row().gfxMajor >= 10;
    const unsigned id = gfx11 ? 23 : 4, offset = gfx11 ? 10 : 8, size = gfx11 ? 11 : 7;
    return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_getreg, {},
                             {b.getInt32(((size - 1) << 11) | (offset << 6) | id)});
  }
  void barrier(llvm::IRBuilderBase& b, bool sharedOnly) override {
    // s_barrier alone orders no memory: the workgroup-scope fences make the
    // block's shared and global writes visible across it (HIP's
    // __syncthreads does the same). On gfx10+ a workgroup may span the two
    // CUs of a WGP, so a full workgroup release also waits for every global
    // load in flight (s_waitcnt vmcnt(0)); where only LDS needs ordering the
    // fences carry the memory-model relaxation annotation that restricts
    // them to LDS (`amdgpu-synchronize-as` = `local`): LDS writes are still
    // waited for (lgkmcnt), the loads of the next pipeline stage are not.
    auto ws = b.getContext().getOrInsertSyncScopeID("workgroup");
    llvm::MDNode* lds =
        sharedOnly ? llvm::MMRAMetadata::getTagMD(b.getContext(), "amdgpu-synchronize-as", "local") : nullptr;
    llvm::FenceInst* rel = b.CreateFence(llvm::AtomicOrdering::Release, ws);
    b.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_barrier, {});
    llvm::FenceInst* acq = b.CreateFence(llvm::AtomicOrdering::Acquire, ws);
    if (lds) {
      rel->setMetadata(llvm::LLVMContext::MD_mmra, lds);
      acq->setMetadata(llvm::LLVMContext::MD_mmra, lds);
    }
  }
  void schedulingBarrier(llvm::IRBuilderBase& b) override {
    b.CreateIntrinsic(llvm::Intrinsic::amdgcn_sched_barrier, {}, {b.getInt32(0)});  // mask 0: nothing crosses
  }
  llvm::Value* lane(llvm::IRBuilderBase& b) { return b.CreateAnd(threadId(b, 0), b.getInt32(warpSize() - 1)); }
  // Butterfly exchanges (the reductions' steps) within a row of 16 lanes or
  // a group of 32 take no LDS address: DPP quad permutations for xor 1 and
  // 2; on gfx10+ DPP row_xmask for 4 and 8 and v_permlanex16 for 16 (the
  // two rows of 32 swapped); on gfx9 ds_swizzle's bitmask mode (within 32
  // lanes). Only xor 32 of a wave64 goes through ds_bpermute.
  llvm::Value* shuffleXor(llvm::IRBuilderBase& b, llvm::Value* v, unsigned mask) override {
    auto i32 = [&](unsigned x) { return b.getInt32(x); };
    const bool gfx10 = row().gfxMajor >= 10;
    if (mask == 1 || mask == 2 || (gfx10 && (mask == 4 || mask == 8))) {
      // quad_perm [1,0,3,2] / [2,3,0,1]; row_xmask:m is 0x160 | m.
      const unsigned ctrl = mask == 1 ? 0xB1 : mask == 2 ? 0x4E : 0x160 | mask;
      // No old value and bound_ctrl (every source lane exists): the DPP
      // combiner can then fold the move into the reduction's own VALU op.
      return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_update_dpp, {v->getType()},
                               {llvm::PoisonValue::get(v->getType()), v, i32(ctrl), i32(0xf), i32(0xf), b.getTrue()});
    }
    if (gfx10 && mask == 16)  // each lane reads the same lane of the other row
      return b.CreateIntrinsic(
          llvm::Intrinsic::amdgcn_permlanex16, {v->getType()},
          {llvm::PoisonValue::get(v->getType()), v, i32(0x76543210), i32(0xfedcba98), b.getFalse(), b.getFalse()});
    if (!gfx10 && mask < 32)  // bitmask mode: and 0x1f, or 0, xor `mask`
      return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_ds_swizzle, {}, {v, i32((mask << 10) | 0x1f)});
    return shuffleIdx(b, v, b.CreateXor(lane(b), b.getInt32(mask)));
  }
  // gfx9 has no DPP xor beyond a quad, but once the lanes below `mask` agree
  // (a reduction's later steps), any lane of the partner group will do: DPP
  // row_half_mirror (lane 7 - i of its 8) for 4 and row_mirror (15 - i of
  // its 16) for 8, VALU operands the DPP combiner folds into the reduction's
  // own op, instead of ds_swizzle through the LDS unit and a wait for it.
  llvm::Value* shuffleXorOfUniformGroups(llvm::IRBuilderBase& b, llvm::Value* v, unsigned mask) override {
    if (row().gfxMajor >= 10 || (mask != 4 && mask != 8)) return shuffleXor(b, v, mask);
    return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_update_dpp, {v->getType()},
                             {llvm::PoisonValue::get(v->getType()), v, b.getInt32(mask == 4 ? 0x141 : 0x140),
                              b.getInt32(0xf), b.getInt32(0xf), b.getTrue()});
  }
  // gfx90a, gfx942 and gfx950 (CDNA2/3/4); RDNA has packed f16 math only.
  bool packedF32Math() const override { return row().gfxMajor == 9; }

  // Masked accesses as raw buffer loads and stores (MUBUF): a resource of
  // kBufferBytes records from the uniform base, and an offset of 2^31 in the
  // masked-off lanes, past the last record, where a load returns zeros and a
  // store writes nothing. No branch, so no exec-mask region per access: a
  // masked vector add on gfx1100 was 13 basic blocks (one per loaded and
  // stored vector) and is now one. The resource's fourth word is per
  // generation (the buffer format fields and, on gfx10+, the raw
  // out-of-range mode that checks offset + size against the records).
  // RDNA4 keeps RDNA3's fields at the same bits (MLIR's AMDGPU-to-ROCDL
  // lowering writes one word for gfx10 onwards, gfx1201 included).
  uint32_t bufferFlags() const {
    switch (row().gfxMajor) {
      case 9: return 0x00020000;  // DATA_FORMAT 32
      case 11:
      case 12: return 0x31004000;  // FORMAT 32, OOB_SELECT raw, RESOURCE_LEVEL 1
      default: return 0;
    }
  }
  bool hasBufferAccesses() const override { return options().predicatedAccesses && bufferFlags() != 0; }
  llvm::Value* bufferResource(llvm::IRBuilderBase& b, llvm::Value* base) {
    // Wave-uniform by construction (UniformSplit); readfirstlane tells the
    // backend, which otherwise builds a loop over the lanes' resources where
    // its uniformity analysis cannot see it (a base offset by a reduction).
    llvm::Value* bits = b.CreatePtrToInt(base, b.getInt64Ty());
    bits = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_readfirstlane, {b.getInt64Ty()}, {bits});
    base = b.CreateIntToPtr(bits, base->getType());
    return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_make_buffer_rsrc,
                             {llvm::PointerType::get(b.getContext(), 8), base->getType()},
                             {base, b.getInt16(0), b.getInt64(kBufferBytes), b.getInt32(bufferFlags())});
  }
  // The access as integers of its size, which every MUBUF width has.
  static llvm::Type* bufferType(llvm::IRBuilderBase& b, uint64_t bytes) {
    switch (bytes) {
      case 1: return b.getInt8Ty();
      case 2: return b.getInt16Ty();
      case 4: return b.getInt32Ty();
      case 8: return llvm::FixedVectorType::get(b.getInt32Ty(), 2);
      case 16: return llvm::FixedVectorType::get(b.getInt32Ty(), 4);
      default: return nullptr;
    }
  }
  static llvm::Value* maskedOffset(llvm::IRBuilderBase& b, llvm::Value* offset, llvm::Value* pred) {
    return b.CreateSelect(pred, offset, b.getInt32(0x80000000u));
  }
  llvm::Value* bufferLoad(llvm::IRBuilderBase& b, llvm::Type* ty, llvm::Value* base, llvm::Value* offset,
                          llvm::Value* pred, llvm::Value* other) override {
    const llvm::DataLayout& dl = b.GetInsertBlock()->getModule()->getDataLayout();
    llvm::Type* it = bufferType(b, dl.getTypeStoreSize(ty));
    if (!it || ty->isPtrOrPtrVectorTy() || dl.getTypeStoreSize(ty) != dl.getTypeAllocSize(ty)) return nullptr;
    llvm::Value* x =
        b.CreateIntrinsic(llvm::Intrinsic::amdgcn_raw_ptr_buffer_load, {it},
                          {bufferResource(b, base), maskedOffset(b, offset, pred), b.getInt32(0), b.getInt32(0)});
    x = b.CreateBitCast(x, ty);
    auto* c = llvm::dyn_cast<llvm::Constant>(other);
    return c && c->isNullValue() ? x : b.CreateSelect(pred, x, other);
  }
  bool bufferStore(llvm::IRBuilderBase& b, llvm::Value* val, llvm::Value* base, llvm::Value* offset,
                   llvm::Value* pred) override {
    const llvm::DataLayout& dl = b.GetInsertBlock()->getModule()->getDataLayout();
    llvm::Type* it = bufferType(b, dl.getTypeStoreSize(val->getType()));
    if (!it || val->getType()->isPtrOrPtrVectorTy() ||
        dl.getTypeStoreSize(val->getType()) != dl.getTypeAllocSize(val->getType()))
      return false;
    b.CreateIntrinsic(llvm::Intrinsic::amdgcn_raw_ptr_buffer_store, {it},
                      {b.CreateBitCast(val, it), bufferResource(b, base), maskedOffset(b, offset, pred), b.getInt32(0),
                       b.getInt32(0)});
    return true;
  }
  // The backend does not know that workitem.id.x / wavesize is the same in
  // every lane: without the readfirstlane, everything computed from the
  // warp index (the rows a warp owns, their pointers and bounds checks)
  // lives in VGPRs, once per lane. With it, the row offsets and bases of a
  // GEMV's 64x128 tile are scalar (s_mul_i32, s_add_u32), and most kernels
  // of the static benchmark take 1-2 VGPRs fewer (GEMMs, attention).
  llvm::Value* warpUniform(llvm::IRBuilderBase& b, llvm::Value* v) override {
    return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_readfirstlane, {v->getType()}, {v});
  }
  llvm::Value* shuffleIdx(llvm::IRBuilderBase& b, llvm::Value* v, llvm::Value* src) override {
    // ds_bpermute addresses lanes in bytes.
    return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_ds_bpermute, {}, {b.CreateShl(src, 2), v});
  }
  llvm::Function* createKernel(llvm::Module& m, const std::string& name, llvm::FunctionType* ty,
                               unsigned threads) override {
    auto* f = llvm::Function::Create(ty, llvm::Function::ExternalLinkage, name, m);
    f->setCallingConv(llvm::CallingConv::AMDGPU_KERNEL);
    f->addFnAttr("amdgpu-flat-work-group-size", "1," + std::to_string(threads));
    f->addFnAttr("uniform-work-group-size", "true");
    f->addFnAttr(llvm::Attribute::NoUnwind);
    return f;
  }
  llvm::GlobalVariable* declareShared(llvm::Module& m, uint64_t bytes) override {
    // A static LDS array: the code object's group_segment_fixed_size is
    // then exactly the allocator's total.
    auto* ty = llvm::ArrayType::get(llvm::Type::getInt8Ty(m.getContext()), bytes);
    auto* g = new llvm::GlobalVariable(m, ty, false, llvm::GlobalValue::InternalLinkage, llvm::PoisonValue::get(ty),
                                       "tessera_smem", nullptr, llvm::GlobalValue::NotThreadLocal, sharedAS());
    g->setAlignment(llvm::Align(16));
    return g;
  }
  MathChoice math(ir::OpCode op, DType dt) const override { return gpuMath(op, dt, kAmdgpuMath); }
  llvm::Value* approxMath(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v) const override {
    using ir::OpCode;
    llvm::Type* f32 = v[0]->getType();
    auto call = [&](llvm::Intrinsic::ID id, llvm::Value* x) { return b.CreateIntrinsic(id, {f32}, {x}); };
    auto scale = [&](llvm::Value* x, double k) { return b.CreateFMul(x, llvm::ConstantFP::get(f32, k)); };
    switch (op) {
      case OpCode::Exp: return call(llvm::Intrinsic::amdgcn_exp2, scale(v[0], std::numbers::log2e));
      case OpCode::Exp2: return call(llvm::Intrinsic::amdgcn_exp2, v[0]);
      case OpCode::Log: return scale(call(llvm::Intrinsic::amdgcn_log, v[0]), std::numbers::ln2);
      case OpCode::Log2: return call(llvm::Intrinsic::amdgcn_log, v[0]);
      case OpCode::Sqrt: return call(llvm::Intrinsic::amdgcn_sqrt, v[0]);
      case OpCode::Rsqrt: return call(llvm::Intrinsic::amdgcn_rsq, v[0]);
      case OpCode::Div: return b.CreateFMul(v[0], call(llvm::Intrinsic::amdgcn_rcp, v[1]));
      // llvm.sin / llvm.cos: the backend's v_sin_f32 / v_cos_f32 on x / 2pi
      // (with v_fract where the part's input range is reduced).
      case OpCode::Sin: return b.CreateUnaryIntrinsic(llvm::Intrinsic::sin, v[0]);
      case OpCode::Cos: return b.CreateUnaryIntrinsic(llvm::Intrinsic::cos, v[0]);
      case OpCode::Sigmoid: {
        llvm::Value* one = llvm::ConstantFP::get(f32, 1.0);
        llvm::Value* t = call(llvm::Intrinsic::amdgcn_exp2, scale(v[0], -std::numbers::log2e));
        return call(llvm::Intrinsic::amdgcn_rcp, b.CreateFAdd(one, t));
      }
      default: return nullptr;
    }
  }
  // Matrix-core tables and dots: MFMA (AMDGPUMfma.cpp) or WMMA
  // (AMDGPUWmma.cpp, AMDGPUWmmaGfx12.cpp), Targets.def's matrixCore and
  // wmmaLaneElems columns. f32 dots stay on FMAs; operands are read from
  // LDS with plain loads.
  TensorCoreOp tensorCore(DType a, DType b, DType acc) const override {
    const amdgpu::MatrixCoreFamily* f = amdgpu::matrixCoreFamily(row());
    return f ? f->op(row(), a, b, acc) : TensorCoreOp{};
  }
  void planDotStaging(TensorCoreDotPlan& p) const override { amdgpu::planMatrixCoreStaging(p); }
  bool swizzleDotStaging(TensorCoreDotPlan& p) const override { return amdgpu::swizzleMatrixCoreStaging(p); }
  // Synchronous vector loads and LDS stores of the padded rows' alignment.
  int64_t dotCopyChunkBytes(ir::MmaKind k) const override { return amdgpu::matrixCoreFamily(k).padBytes(k); }
  // A M x K and B N x K (planMatrixCoreStaging): chunks along K.
  int dotCopyDim(unsigned operand, int fast, int64_t, int64_t, const ir::BlockedLayout&) const override {
    return fast == (operand == 0 ? 1 : 0) ? fast : -1;
  }
  // A chained dot's A (flash attention's P) is in the first dot's
  // accumulator layout, not the MFMA / WMMA A fragments'.
  bool dotFragmentsFirst() const override { return true; }
  std::vector<llvm::Value*> emitDot(DotEmitter& e, std::vector<llvm::Value*> acc) const override {
    return amdgpu::emitMatrixCoreDot(e, std::move(acc));
  }
  // The LDS of a CU (64 KiB; gfx950 160) is what limits a wave's occupancy
  // before its registers do, on CDNA's 512 VGPRs per lane most of all.
  bool tradesSharedForOccupancy() const override { return true; }
  // gfx90a / gfx942 / gfx950 / gfx1100 have no asynchronous global->LDS
  // copy that we use (the buffer_load ... lds forms write LDS at M0-relative
  // addresses, one dword per lane, and need buffer resources): the loads go
  // to registers at the copy and the LDS stores are deferred.
  AsyncCopyImpl asyncCopyImpl() const override { return AsyncCopyImpl::RegisterStaged; }

  llvm::TargetMachine& targetMachine(int optLevel) override {
    return cachedGpuTargetMachine(initAMDGPU, "AMDGPU", triple(), row().arch, row().llvmFeatures, llvm::Reloc::PIC_,
                                  optLevel);
  }
  // GpuCompile.cpp explains the passes; amdgpu-attributor proves which
  // implicit kernel inputs are unused, which frees their registers.
  const char* kernelPipeline() const override {
    return "amdgpu-attributor,function(early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(licm),"
           "simplifycfg,infer-alignment)";
  }
  void afterKernelPipeline(llvm::Function& f) const override { foldDisjointOrDifferences(f); }
  const char* emitStage() const override { return "object+link"; }
  void storeOutput(GpuOutput& out, KernelBinary& bin, StageDumps& dumps) const override {
    dumps.assembly = out.assembly;
    bin.format = KernelBinary::Format::HSACO;
    bin.codeObject = out.codeObject;
    dumps.extra["hsaco"] = std::string(out.codeObject.begin(), out.codeObject.end());
  }

  void prepareModule(llvm::Module& m, llvm::TargetMachine& /*tm*/) override {
    int v = options().codeObjectVersion;
    if (v != 4 && v != 5 && v != 6)
      throw CompileError("AMDGPU code object version " + std::to_string(v) + " is not supported (use 4, 5 or 6)");
    m.addModuleFlag(llvm::Module::Error, "amdhsa_code_object_version", static_cast<uint32_t>(v * 100));
  }

  GpuOutput emit(llvm::Module& m, llvm::TargetMachine& tm) override {
    GpuOutput out;
    if (options().eagerAssembly) out.assembly = emitFile(m, tm, llvm::CodeGenFileType::AssemblyFile);
    std::string obj = emitFileReusingPipeline(m, tm, llvm::CodeGenFileType::ObjectFile);
    std::string hsaco = linkHsaco(obj);
    out.codeObject.assign(hsaco.begin(), hsaco.end());
    return out;
  }

  GpuResources resources(const GpuOutput& out, const std::string& kernel, unsigned threadsPerBlock) override {
    HsacoInfo k = readHsacoMetadata(out.codeObject, kernel);
    GpuResources r;
    r.registers = k.vgprs;
    r.sgprs = k.sgprs;
    r.spillBytes = k.privateSegment;
    r.sharedBytes = k.groupSegment;
    r.wavefrontSize = k.wavefrontSize;
    Occupancy occ = occupancy(row(), k.vgprs, k.groupSegment, static_cast<int>(threadsPerBlock));
    r.text = arch() + " @" + kernel + ": wavefront " + std::to_string(k.wavefrontSize) + ", VGPRs " +
             std::to_string(k.vgprs) + ", SGPRs " + std::to_string(k.sgprs) + ", group segment " +
             std::to_string(k.groupSegment) + " bytes, private segment (spills/stack) " +
             std::to_string(k.privateSegment) + " bytes\noccupancy estimate: " + occ.text + "\n";
    return r;
  }

 private:
};

}  // namespace

HsacoInfo readHsacoMetadata(const std::vector<char>& hsaco, const std::string& kernel) {
  llvm::StringRef data(hsaco.data(), hsaco.size());
  auto obj = llvm::object::ELF64LEObjectFile::create(llvm::MemoryBufferRef(data, "hsaco"));
  if (!obj) throw InternalError("the code object is not a 64-bit ELF: " + llvm::toString(obj.takeError()));
  const auto& ef = obj->getELFFile();
  auto phdrs = ef.program_headers();
  if (!phdrs) throw InternalError("code object without program headers: " + llvm::toString(phdrs.takeError()));
  for (const auto& ph : *phdrs) {
    if (ph.p_type != llvm::ELF::PT_NOTE) continue;
    llvm::Error err = llvm::Error::success();
    for (const auto& note : ef.notes(ph, err)) {
      if (note.getName() != "AMDGPU" || note.getType() != llvm::ELF::NT_AMDGPU_METADATA) continue;
      llvm::msgpack::Document doc;
      if (!doc.readFromBlob(note.getDescAsStringRef(4), false))
        throw InternalError("cannot parse the AMDGPU metadata note");
      auto& root = doc.getRoot().getMap(true);
      auto& kernels = root["amdhsa.kernels"].getArray(true);
      for (auto& kn : kernels) {
        auto& km = kn.getMap(true);
        if (km[".name"].getString() != kernel) continue;
        HsacoInfo info;
        auto geti = [&](const char* key) -> int64_t {
          auto it = km.find(key);
          if (it == km.end()) return -1;
          return it->second.getKind() == llvm::msgpack::Type::Int ? it->second.getInt()
                                                                  : static_cast<int64_t>(it->second.getUInt());
        };
        info.sgprs = static_cast<int>(geti(".sgpr_count"));
        info.vgprs = static_cast<int>(geti(".vgpr_count"));
        info.groupSegment = geti(".group_segment_fixed_size");
        info.privateSegment = geti(".private_segment_fixed_size");
        info.wavefrontSize = static_cast<int>(geti(".wavefront_size"));
        llvm::consumeError(std::move(err));
        return info;
      }
    }
    if (err) throw InternalError("cannot read the notes of the code object: " + llvm::toString(std::move(err)));
  }
  throw InternalError("the code object has no metadata for kernel " + kernel);
}

std::unique_ptr<GpuTargetInfo> createAMDGPUTargetInfo(const GpuConfig& c) {
  TS_ASSERT(c.row->vendor == GpuArch::Vendor::AMD, std::string("AMDGPU hooks for ") + c.row->arch);
  return std::make_unique<AMDGPUTargetInfo>(c);
}

}  // namespace tessera::codegen

// NVIDIA PTX: the target hooks of the shared GPU lowering and the backend
// (PTX text through LLVM's NVPTX target; resources through ptxas).
#include <array>
#include <numbers>
#include <mutex>
#include <regex>

#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Transforms/IPO/Internalize.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "codegen/gpu/GpuTargetInfo.h"
#include "codegen/nvptx/NVPTXTargetInfo.h"
#include "codegen/llvm/Atomics.h"
#include "codegen/llvm/GpuToolchain.h"
#include "codegen/llvm/LLVMSupport.h"
#include "codegen/nvptx/NVPTXDot.h"
#include "codegen/nvptx/NVPTXPredicated.h"
#include "codegen/nvptx/NVPTXSpecialRegisters.h"
#include "codegen/nvptx/NVPTXTma.h"
#include "codegen/nvptx/NVPTXWgmma.h"
#include "tessera/support/Targets.h"
#include "tessera/support/Tcgen05.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace tessera::codegen {

namespace {

// Math table. f32 transcendentals use the shared polynomials: ex2.approx.f32
// has a relative error of 2^-22.5 for exp2 itself, but exp(x) computed as
// ex2(x * log2(e)) inherits the rounding of the product, an error that
// grows with |x| (about 60 ulp near x = 88), beyond what IR.h allows. f64
// transcendentals call libdevice (__nv_exp, __nv_sin, __nv_pow, ...) when
// the CUDA toolkit's libdevice.10.bc is found (findLibdevice), linked into
// the module and inlined before optimisation; without it, the f64
// polynomials.
GpuMathNotes nvptxMathNotes(bool libdevice) {
  return {
      libdevice ? "__nv_" : nullptr,
      "llvm.sqrt -> sqrt.rn (correctly rounded)",
      "1 / sqrt.rn with div.rn (rsqrt.approx is not used)",
      "llvm.floor -> cvt.rmi",
  };
}

// Links libdevice's functions the lowering called (__nv_*) into `m` and
// inlines them: the module's own triple and data layout are given to the
// library first, only the needed functions come over (internalised), and
// __nvvm_reflect is resolved (__CUDA_FTZ = 0: denormals kept; the arch from
// the target) before the always-inliner runs. The emulator then runs the
// very code the GPU would.
void linkLibdevice(llvm::Module& m, llvm::TargetMachine& tm, const std::string& path) {
  std::vector<llvm::Function*> wanted;
  for (llvm::Function& f : m)
    if (f.isDeclaration() && f.getName().starts_with("__nv_")) wanted.push_back(&f);
  if (wanted.empty()) return;
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> lib = llvm::parseIRFile(path, err, m.getContext());
  if (!lib) throw CompileError("cannot read libdevice (" + path + "): " + err.getMessage().str());
  lib->setTargetTriple(m.getTargetTriple());
  lib->setDataLayout(m.getDataLayout());
  for (llvm::Function* f : wanted)
    if (!lib->getFunction(f->getName()))
      throw CompileError("libdevice (" + path + ") has no function " + f->getName().str());
  if (llvm::Linker::linkModules(
          m, std::move(lib), llvm::Linker::LinkOnlyNeeded, [](llvm::Module& mod, const llvm::StringSet<>& gvs) {
            llvm::internalizeModule(mod, [&](const llvm::GlobalValue& gv) { return !gvs.count(gv.getName()); });
          }))
    throw CompileError("linking libdevice (" + path + ") failed");
  if (!m.getModuleFlag("nvvm-reflect-ftz"))
    m.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", static_cast<uint32_t>(0));
  runPipeline(m, tm, "nvvm-reflect,always-inline,globaldce");
}

// sm_120a (Targets.def's mmaBlockScale): mma.sync.m16n8k32
// .kind::mxf8f6f4.block_scale.scale_vec::1X with ue8m0 scales, one per
// 32-element block of a row of A and a column of B, for every pair of the
// OCP elements e4m3, e5m2, e2m3, e3m2, e2m1 (each in a byte: fp6 in the low
// six bits, fp4 in bits 2-5; ir::buildMmaContainers), on the fp8 mma.sync
// placement (NVPTXMmaSync.cpp); LLVM names the intrinsic by the pair.
llvm::Intrinsic::ID mmaBlockScale(const GpuArch& row, DType a, DType b) {
  auto ptx = [](DType d) -> const char* {
    switch (d) {
      case DType::F8E4M3: return "e4m3";
      case DType::F8E5M2: return "e5m2";
      case DType::F6E2M3: return "e2m3";
      case DType::F6E3M2: return "e3m2";
      case DType::F4E2M1: return "e2m1";
      default: return nullptr;
    }
  };
  if (!row.mmaBlockScale || !ptx(a) || !ptx(b)) return llvm::Intrinsic::not_intrinsic;
  const std::string name = std::string("llvm.nvvm.mma.block.scale.m16n8k32.row.col.mxf8f6f4.scale.1x.f32.") + ptx(a) +
                           "." + ptx(b) + ".f32.ue8m0";
  const llvm::Intrinsic::ID id = llvm::Intrinsic::lookupIntrinsicID(name);
  TS_ASSERT(id != llvm::Intrinsic::not_intrinsic, "LLVM has no " + name);
  return id;
}

// Tensor-core table: f16/bf16 operands with an f32 accumulator use
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (sm_80+),
// operands read from shared memory by ldmatrix (A: .x4, B: .x4/.x2 .trans
// from the row-major KxN staging buffer). s8 operands with an s32
// accumulator use mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (sm_80+;
// not .satfinite: the sums wrap mod 2^32 like the IR's i32 add), both
// operands by ldmatrix without .trans (B staged N x K: .trans moves 16-bit
// elements and would split the 4-byte k runs an s8 fragment register
// holds; see planTensorCoreDot). The OCP fp8 formats (f8e4m3 = .e4m3,
// f8e5m2 = .e5m2, either on either side) with an f32 accumulator use
// mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 on
// sm_89 and sm_90a (PTX ISA 8.4 for sm_89: Targets.def), with the s8
// fragments and staging; sm_80/86 have no fp8 mma, and the FNUZ formats
// are not NVIDIA's: those dots are widened to f16 (widen-fp8-dots). f32 x
// f32 stays on FMAs: tf32 mma rounds the operands to 10 mantissa bits,
// which IR.h's dot does not allow.
// wgmma (and the rest of Hopper's asynchronous warpgroup instructions) is
// an architecture-specific feature: Targets.def's wgmma column (sm_90a, not
// sm_90).
TensorCoreOp nvptxTensorCore(const GpuArch& row, DType a, DType b, DType acc) {
  TensorCoreOp t;
  t.ldA = llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_b16;
  t.ldAx2 = llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_b16;
  auto ocp = [](DType d) { return d == DType::F8E4M3 || d == DType::F8E5M2; };
  if (ocp(a) && ocp(b) && acc == DType::F32) {
    // sm_89 (Ada) and sm_90a (Hopper): Targets.def's fp8Mma column.
    if (!row.fp8Mma) return {};
    const bool a4 = a == DType::F8E4M3, b4 = b == DType::F8E4M3;
    // sm_90a: wgmma.mma_async m64nNk32 (A from registers, B K-major: the
    // N x K staging fp8 B has anyway) where the shape allows it;
    // sm_100a/sm_103a: tcgen05.mma kind::f8f6f4 (both from shared memory,
    // B K-major likewise); the mma.sync intrinsic below serves the rest on
    // the same placement.
    t.kind = row.tcgen05 ? ir::MmaKind::NvTcgen05M64K32
             : row.wgmma ? ir::MmaKind::NvWgmmaM64K32
                         : ir::MmaKind::NvMmaM16N8K32;
    if (row.wgmma || row.tcgen05) t.small = ir::MmaKind::NvMmaM16N8K32;
    t.mma = a4 ? (b4 ? llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_f32_e4m3_e4m3_f32
                     : llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_f32_e4m3_e5m2_f32)
               : (b4 ? llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_f32_e5m2_e4m3_f32
                     : llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_f32_e5m2_e5m2_f32);
    if (t.kind == ir::MmaKind::NvMmaM16N8K32) t.mmaBlockScale = mmaBlockScale(row, a, b);
    // tcgen05's block-scaled form (NVPTXTcgen05Dot.cpp): kind::mxf8f6f4
    // with e8m0 scales of 32, on the same placement at M = 128.
    if (row.tcgen05) {
      t.mmaBlockScale = llvm::Intrinsic::nvvm_tcgen05_mma_shared_mxf8f6f4_block_scale_block32;
      t.subByteContainers = false;
    }
    return t;
  }
  // tcgen05 (sm_100a/sm_103a): fp4 x fp4 packed only, kind::mxf4 (e8m0
  // scales of 32) and kind::mxf4nvf4 (NVFP4's UE4M3 scales of 16), 64 codes
  // in 32 bytes a row, on the fp8 placement.
  if (row.tcgen05 && a == DType::F4E2M1 && b == DType::F4E2M1 && acc == DType::F32) {
    t.kind = ir::MmaKind::NvTcgen05M64K32;
    t.small = ir::MmaKind::NvMmaM16N8K32;
    t.mmaBlockScale = t.mmaFp4Packed = llvm::Intrinsic::nvvm_tcgen05_mma_shared_mxf4_block_scale_block32;
    t.fp4PackedK = 2;
    t.mmaNvfp4 = llvm::Intrinsic::nvvm_tcgen05_mma_shared_mxf4nvf4_block_scale_block16;
    t.subByteContainers = false;
    return t;
  }
  // The fp6 and fp4 elements: block-scaled only (sm_120a), one a byte in
  // the fp8 operands' fragments and staging. fp4 x fp4 is taken packed
  // where K allows (ir::ScaledDotForm::PackedFp4): mma.sync.m16n8k64
  // .kind::mxf4.block_scale.scale_vec::2X, whose fragments are the
  // m16n8k32 ones with a byte holding two codes (NVPTXMmaSync.cpp); NVFP4
  // (blocks of 16, UE4M3 scales) on the same placement with
  // .kind::mxf4nvf4.block_scale.scale_vec::4X.
  if (acc == DType::F32 && (t.mmaBlockScale = mmaBlockScale(row, a, b)) != llvm::Intrinsic::not_intrinsic) {
    t.kind = ir::MmaKind::NvMmaM16N8K32;
    if (a == DType::F4E2M1 && b == DType::F4E2M1) {
      const char* name = "llvm.nvvm.mma.block.scale.m16n8k64.row.col.mxf4.scale.2x.f32.e2m1.e2m1.f32.ue8m0";
      t.mmaFp4Packed = llvm::Intrinsic::lookupIntrinsicID(name);
      TS_ASSERT(t.mmaFp4Packed != llvm::Intrinsic::not_intrinsic, std::string("LLVM has no ") + name);
      t.fp4PackedK = 2;
      const char* nv = "llvm.nvvm.mma.block.scale.m16n8k64.row.col.mxf4nvf4.scale.4x.f32.e2m1.e2m1.f32.ue4m3";
      t.mmaNvfp4 = llvm::Intrinsic::lookupIntrinsicID(nv);
      TS_ASSERT(t.mmaNvfp4 != llvm::Intrinsic::not_intrinsic, std::string("LLVM has no ") + nv);
    }
    return t;
  }
  if (a != b) return {};
  const DType in = a;
  if (in == DType::I8 && acc == DType::I32) {
    // tcgen05.mma kind::i8 where the row has it (sm_100a), as fp8 above.
    t.kind = row.tcgen05I8 ? ir::MmaKind::NvTcgen05M64K32 : ir::MmaKind::NvMmaM16N8K32;
    if (row.tcgen05I8) t.small = ir::MmaKind::NvMmaM16N8K32;
    t.mma = llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_s8;
    return t;
  }
  if (acc != DType::F32 || (in != DType::F16 && in != DType::BF16)) return {};
  // sm_90a: wgmma.mma_async m64nNk16 (NVPTXWgmma.h) where the dot's shape
  // and operands allow it (ir::mmaLayout, Lower::dotPlan); mma.sync's
  // intrinsics below serve the dots it does not take, on the same
  // accumulator placement.
  // sm_100a/sm_103a: tcgen05.mma (NVPTXTcgen05Dot.cpp) on the same
  // placement, likewise.
  t.kind = row.tcgen05 ? ir::MmaKind::NvTcgen05M64K16
           : row.wgmma ? ir::MmaKind::NvWgmmaM64K16
                       : ir::MmaKind::NvMmaM16N8K16;
  if (row.wgmma || row.tcgen05) t.small = ir::MmaKind::NvMmaM16N8K16;
  t.mma = in == DType::F16 ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32
                           : llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16;
  t.ldBx4 = llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_trans_b16;
  t.ldBx2 = llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_trans_b16;
  return t;
}

// Asynchronous-copy table (sm_80+, every NVIDIA row of Targets.def): one
// cp.async.{ca,cg}.shared.global per chunk, always the `.s` form whose
// src-size operand is the chunk size or 0 for a masked-off chunk (zero fill
// of the shared bytes, no global access). 16-byte chunks use .cg (cache in
// L2 only): the tile is consumed from shared memory, so L1 would only hold
// a second copy; .cg has no 4/8-byte forms.
struct CpAsyncRow {
  unsigned bytes;
  llvm::Intrinsic::ID id;
};
constexpr std::array<CpAsyncRow, 3> kCpAsync = {{
    {4, llvm::Intrinsic::nvvm_cp_async_ca_shared_global_4_s},
    {8, llvm::Intrinsic::nvvm_cp_async_ca_shared_global_8_s},
    {16, llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s},
}};

// Registers LLVM's NVPTX target once per process.
void initNVPTX() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

class NVPTXTargetInfo final : public GpuTargetInfo {
 public:
  explicit NVPTXTargetInfo(const GpuConfig& c) : GpuTargetInfo(c), libdevice_(findLibdevice()) {}
  std::string triple() const override { return "nvptx64-nvidia-cuda"; }
  // PTX's .cta, .gpu and .sys scopes.
  const char* syncScope(ir::MemScope s) const override {
    return s == ir::MemScope::Program ? "block" : s == ir::MemScope::Device ? "device" : "";
  }
  // LLVM's NVPTX backend drops the order and the scope of an atomicrmw: it
  // emits every one as a relaxed .gpu `atom` (its cmpxchg and fences keep
  // theirs). So the order is written with fences, PTX's fence-based mapping
  // (release: fence.acq_rel then a relaxed atom; acquire: a relaxed atom then
  // the fence), .gpu stands for .cta (a wider scope), and the system scope,
  // which .gpu does not cover, goes through a .sys compare-and-swap loop.
  llvm::Value* atomicRmw(llvm::IRBuilderBase& b, ir::AtomicKind kind, DType dt, llvm::Value* p, llvm::Value* v,
                         ir::MemOrder order, ir::MemScope scope) override {
    const llvm::SyncScope::ID ss = b.getContext().getOrInsertSyncScopeID(syncScope(scope));
    if (scope == ir::MemScope::System) return codegen::emitAtomicRmwByCas(b, kind, dt, p, v, order, ss);
    if (ir::releases(order)) b.CreateFence(llvm::AtomicOrdering::Release, ss);
    llvm::Value* old = codegen::emitAtomicRmw(b, kind, dt, p, v, ir::MemOrder::Relaxed, ss);
    if (ir::acquires(order)) b.CreateFence(llvm::AtomicOrdering::Acquire, ss);
    return old;
  }

  llvm::Value* sreg(llvm::IRBuilderBase& b, const std::array<llvm::Intrinsic::ID, 3>& ids, int axis) {
    return b.CreateIntrinsic(ids[static_cast<size_t>(axis)], {});
  }
  // PTX reads any special register again at the cost of one S2R.
  llvm::Value* rereadSpecialRegister(llvm::IRBuilderBase& b, llvm::Instruction& v) override {
    const auto* c = llvm::dyn_cast<llvm::IntrinsicInst>(&v);
    return c ? nvptx::emitSpecialRegisterRead(b, c->getIntrinsicID()) : nullptr;
  }
  llvm::Value* threadId(llvm::IRBuilderBase& b, int axis) override {
    return sreg(b,
                {llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_y,
                 llvm::Intrinsic::nvvm_read_ptx_sreg_tid_z},
                axis);
  }
  llvm::Value* blockId(llvm::IRBuilderBase& b, int axis) override {
    return sreg(b,
                {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                 llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z},
                axis);
  }
  llvm::Value* blockDim(llvm::IRBuilderBase& b, int axis) override {
    return sreg(b,
                {llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x, llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_y,
                 llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_z},
                axis);
  }
  llvm::Value* gridDim(llvm::IRBuilderBase& b, int axis) override {
    return sreg(b,
                {llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y,
                 llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_z},
                axis);
  }
  // %globaltimer: nanoseconds, one clock for every SM, so the tracks of a
  // trace line up (%clock64 counts per SM and drifts between them).
  llvm::Value* profileClock(llvm::IRBuilderBase& b) override {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_globaltimer, {});
  }
  KernelBinary::ProfileClock profileClockKind() const override { return KernelBinary::ProfileClock::Nanoseconds; }
  llvm::Value* profileUnit(llvm::IRBuilderBase& b) override {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_smid, {});
  }
  // bar.sync never waits for outstanding loads: sharedOnly changes nothing.
  void barrier(llvm::IRBuilderBase& b, bool /*sharedOnly*/) override {
    // bar.sync 0: also orders the shared and global accesses of the block.
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier_cta_sync_aligned_all, {}, {b.getInt32(0)});
  }
  llvm::Value* clusterRank(llvm::IRBuilderBase& b) override {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_cluster_ctarank, {});
  }
  // barrier.cluster.arrive (release) and .wait (acquire), back to back: the
  // DSL's cluster barrier has nothing to overlap between them. Not the
  // .aligned forms: a cluster barrier may sit under divergent control flow
  // of a warp (a kernel's own branches), which .aligned forbids.
  void clusterBarrier(llvm::IRBuilderBase& b) override {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier_cluster_arrive, {});
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier_cluster_wait, {});
  }
  llvm::Value* mapShared(llvm::IRBuilderBase& b, llvm::Value* p, llvm::Value* rank) override {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_mapa_shared_cluster, {}, {p, rank});
  }
  // Cluster launch control: the request completes its 16 bytes on the
  // mbarrier; the response is opaque, read only through query_cancel.
  void tryCancel(llvm::IRBuilderBase& b, llvm::Value* response, llvm::Value* bar) override {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_clusterlaunchcontrol_try_cancel_async_shared, {}, {response, bar});
  }
  llvm::Value* cancelledBlock(llvm::IRBuilderBase& b, llvm::Value* response) override {
    llvm::Value* ok =
        b.CreateIntrinsic(llvm::Intrinsic::nvvm_clusterlaunchcontrol_query_cancel_is_canceled, {}, {response});
    llvm::Value* x =
        b.CreateIntrinsic(llvm::Intrinsic::nvvm_clusterlaunchcontrol_query_cancel_get_first_ctaid_x, {}, {response});
    return b.CreateSelect(ok, x, b.getInt32(-1), "cancelled");
  }
  llvm::Value* shuffleXor(llvm::IRBuilderBase& b, llvm::Value* v, unsigned mask) override {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_bfly_i32, {},
                             {b.getInt32(0xffffffffu), v, b.getInt32(mask), b.getInt32(31)});
  }
  llvm::Value* shuffleIdx(llvm::IRBuilderBase& b, llvm::Value* v, llvm::Value* src) override {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_idx_i32, {},
                             {b.getInt32(0xffffffffu), v, src, b.getInt32(31)});
  }
  llvm::Function* createKernel(llvm::Module& m, const std::string& name, llvm::FunctionType* ty,
                               unsigned threads) override {
    auto* f = llvm::Function::Create(ty, llvm::Function::ExternalLinkage, name, m);
    f->setCallingConv(llvm::CallingConv::PTX_Kernel);
    f->addFnAttr("nvvm.maxntid", std::to_string(threads));
    // From 8 warps up, ptxas on the SMs of 1536 threads (sm_86, sm_89) caps
    // a block's registers at 128 to fit two blocks, and spills rather than
    // exceed it (flash attention's backward: 40 bytes at 128 registers, none
    // at 168; sm_80 and sm_90a keep the code's count). One block per SM is
    // all a kernel of that size needs: say so (.minnctapersm 1).
    if (threads >= 256 && row().threadsPerSm < 2048) f->addFnAttr("nvvm.minctasm", "1");
    // .reqnctapercluster: the cluster shape is part of the kernel, so a
    // launch of another shape fails in the driver rather than running
    // with ranks the code did not expect.
    if (const auto& c = options().cluster; options().clusterBlocks() > 1)
      f->addFnAttr("nvvm.cluster_dim", std::to_string(c[0]) + "," + std::to_string(c[1]) + "," + std::to_string(c[2]));
    f->addFnAttr(llvm::Attribute::NoUnwind);
    return f;
  }
  llvm::GlobalVariable* declareShared(llvm::Module& m, uint64_t bytes) override {
    // One dynamic shared array (`extern .shared`): the launch passes the
    // allocator's byte count, which may exceed the 48 KB static limit.
    auto* ty = llvm::ArrayType::get(llvm::Type::getInt8Ty(m.getContext()), 0);
    auto* g = new llvm::GlobalVariable(m, ty, false, llvm::GlobalValue::ExternalLinkage, nullptr, "tessera_smem",
                                       nullptr, llvm::GlobalValue::NotThreadLocal, sharedAS());
    // wgmma's swizzled operands need their 1024-byte pattern aligned.
    g->setAlignment(llvm::Align(row().wgmma ? 1024 : 16));
    return g;
  }
  void sharedToAsyncProxyFence(llvm::IRBuilderBase& b) override {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_fence_proxy_async_shared_cta, {});
  }
  MathChoice math(ir::OpCode op, DType dt) const override {
    return gpuMath(op, dt, nvptxMathNotes(!libdevice_.empty()));
  }
  llvm::Value* approxMath(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v) const override {
    using ir::OpCode;
    auto call = [&](llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Value*> args) {
      return b.CreateIntrinsic(id, {}, args);
    };
    auto scale = [&](llvm::Value* x, double k) { return b.CreateFMul(x, llvm::ConstantFP::get(x->getType(), k)); };
    switch (op) {
      // ex2.approx is overloaded on its type (f32, f16, bf16 forms).
      case OpCode::Exp:
        return b.CreateIntrinsic(llvm::Intrinsic::nvvm_ex2_approx, {v[0]->getType()},
                                 {scale(v[0], std::numbers::log2e)});
      case OpCode::Exp2: return b.CreateIntrinsic(llvm::Intrinsic::nvvm_ex2_approx, {v[0]->getType()}, {v[0]});
      case OpCode::Log: return scale(call(llvm::Intrinsic::nvvm_lg2_approx_f, {v[0]}), std::numbers::ln2);
      case OpCode::Log2: return call(llvm::Intrinsic::nvvm_lg2_approx_f, {v[0]});
      case OpCode::Sqrt: return call(llvm::Intrinsic::nvvm_sqrt_approx_f, {v[0]});
      case OpCode::Rsqrt: return call(llvm::Intrinsic::nvvm_rsqrt_approx_f, {v[0]});
      case OpCode::Div: return call(llvm::Intrinsic::nvvm_div_full, {v[0], v[1]});
      case OpCode::Sin: return call(llvm::Intrinsic::nvvm_sin_approx_f, {v[0]});
      case OpCode::Cos: return call(llvm::Intrinsic::nvvm_cos_approx_f, {v[0]});
      case OpCode::Sigmoid: {
        // 1 / (1 + 2^(-x log2 e)): ex2.approx and div.full.
        llvm::Value* t =
            b.CreateIntrinsic(llvm::Intrinsic::nvvm_ex2_approx, {v[0]->getType()}, {scale(v[0], -std::numbers::log2e)});
        llvm::Value* one = llvm::ConstantFP::get(v[0]->getType(), 1.0);
        return call(llvm::Intrinsic::nvvm_div_full, {one, b.CreateFAdd(one, t)});
      }
      default: return nullptr;
    }
  }
  llvm::Value* integerOp(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v,
                         DType dt) const override {
    // mulhi as mul.hi.{s,u}{16,32,64}: the shared lowering's extended
    // product is matched to mul.hi only while its operands stay visible
    // extensions, which the optimiser does not keep (zext(trunc x) becomes
    // an `and`, a xor moves into the wide type): a 64-bit multiply then.
    if (op != ir::OpCode::MulHi) return nullptr;
    const bool u = isUnsigned(dt);
    llvm::Intrinsic::ID id;
    switch (bitWidth(dt)) {
      case 16: id = u ? llvm::Intrinsic::nvvm_mulhi_us : llvm::Intrinsic::nvvm_mulhi_s; break;
      case 32: id = u ? llvm::Intrinsic::nvvm_mulhi_ui : llvm::Intrinsic::nvvm_mulhi_i; break;
      case 64: id = u ? llvm::Intrinsic::nvvm_mulhi_ull : llvm::Intrinsic::nvvm_mulhi_ll; break;
      default: return nullptr;  // 8-bit: a 16-bit product, which stays small
    }
    return b.CreateIntrinsic(id, {}, {v[0], v[1]});
  }
  llvm::Value* predicatedLoad(llvm::IRBuilderBase& b, llvm::Type* ty, llvm::Value* ptr, llvm::Value* pred,
                              llvm::Value* other) override {
    if (!options().predicatedAccesses ||
        !nvptx::hasPredicatedForm(ty, b.GetInsertBlock()->getModule()->getDataLayout()))
      return nullptr;
    return nvptx::emitPredicatedLoad(b, ty, ptr, pred, other);
  }
  bool predicatedStore(llvm::IRBuilderBase& b, llvm::Value* val, llvm::Value* ptr, llvm::Value* pred) override {
    if (!options().predicatedAccesses ||
        !nvptx::hasPredicatedForm(val->getType(), b.GetInsertBlock()->getModule()->getDataLayout()))
      return false;
    nvptx::emitPredicatedStore(b, val, ptr, pred);
    return true;
  }
  TensorCoreOp tensorCore(DType a, DType b, DType acc) const override { return nvptxTensorCore(row(), a, b, acc); }
  // Dots: mma.sync (NVPTXMmaSync.cpp), wgmma (NVPTXWgmmaDot.cpp) and
  // tcgen05 (NVPTXTcgen05Dot.cpp).
  void planDotStaging(TensorCoreDotPlan& p) const override { nvptx::planMmaSyncStaging(p); }
  bool directDotStaging(const TensorCoreDotPlan& p, unsigned operand, bool& transposed, DotStaging& st,
                        uint64_t& align) const override {
    // tcgen05 reads a 1-byte B N-major (kind::f8f6f4, kind::i8; wgmma and
    // mma.sync cannot): the K x N slot as copied, in wgmma's N-major
    // layout, where the accumulator fits the tensor memory. Only tcgen05
    // reads it (planWgmmaForm: DotOperandSources::bInSlot).
    if (transposed && operand == 1 && p.elemBytes == 1 && p.kPerElem == 1 &&
        p.op.kind == ir::MmaKind::NvTcgen05M64K32 && nvptx::tcgen05Columns(p) <= tcgen05::kColumns) {
      transposed = false;
      st = nvptx::wgmmaBStaging(st.cols, st.rows, 1);
      align = nvptx::wgmmaBAlign(st);
      return true;
    }
    // An N x K B slot (1-byte B) would be filled by copies whose 16-byte
    // chunks run along N: cp.async cannot transpose them.
    if (transposed) return false;
    // wgmma reads a B slot through its descriptor: the slot takes wgmma's
    // N-major layout, aligned to its swizzle's 8 rows (which ldmatrix reads
    // as well, should the dot keep mma.sync).
    if (p.op.kind == ir::MmaKind::NvWgmmaM64K16 || ir::isNvTcgen05(p.op.kind)) {
      // A: K-major with its rows in warpgroup order (wgmmaAStaging).
      st = operand == 1 ? nvptx::wgmmaBStaging(st.rows, st.cols, p.elemBytes)
                        : nvptx::wgmmaAStaging(st.rows, st.cols, p.acc.wpb[0], p.elemBytes, nvptx::tcgen05RowTiles(p));
      align = nvptx::wgmmaBAlign(st);
    } else {
      st = nvptx::mmaSyncSlotStaging(st.rows, st.cols, p.elemBytes);
    }
    return true;
  }
  void planDotForm(TensorCoreDotPlan& p, const DotOperandSources& s) const override {
    if (s.bGlobalAlongK) nvptx::stageBAlongK(p);
    nvptx::planWgmmaForm(p, s);
  }
  // cp.async's 16-byte chunks.
  int64_t dotCopyChunkBytes(ir::MmaKind) const override { return 16; }
  // A (M x K) is staged row-major: chunks along K only. B: along N
  // (row-major K x N) or along K (stored N x K, see stageBAlongK), then
  // with whole pairs of n-tiles (ldmatrix .x4 without .trans covers two).
  int dotCopyDim(unsigned operand, int fast, int64_t elemBytes, int64_t cols,
                 const ir::BlockedLayout& acc) const override {
    if (operand == 0) return fast == 1 ? fast : -1;
    if (fast == 1 && elemBytes == 1) return -1;  // a 1-byte B is staged N x K (planMmaSyncStaging)
    if (fast == 0 && cols % (16 * acc.wpb[1]) != 0) return -1;
    return fast;
  }
  bool dotCopiesAsync() const override { return true; }
  std::vector<llvm::Value*> emitDot(DotEmitter& e, std::vector<llvm::Value*> acc) const override {
    TS_ASSERT(!e.aReg || e.p.op.kind == ir::MmaKind::NvMmaM16N8K16 || e.p.op.kind == ir::MmaKind::NvWgmmaM64K16,
              "A fragments from registers: NVIDIA mma and wgmma only");
    if (e.p.bFromShared && e.only < 0)
      return ir::isNvTcgen05(e.p.op.kind) ? nvptx::emitTcgen05Dot(e, std::move(acc))
                                          : nvptx::emitWgmmaDot(e, std::move(acc));
    return nvptx::emitMmaSyncDot(e, std::move(acc));
  }
  // Block-scaled dots: tcgen05's M = 128 form, scales in its atoms;
  // sm_120a's mma.sync reads them row-major.
  bool takesScaledDot(const TensorCoreOp& op, const ir::BlockedLayout& acc, int64_t M, int64_t N,
                      int64_t scaleBlocks) const override {
    return !ir::isNvTcgen05(op.kind) || nvptx::tcgen05TakesScaled(acc, M, N, scaleBlocks);
  }
  llvm::Value* scaleStagingOffset(llvm::IRBuilderBase& b, const TensorCoreDotPlan& p, unsigned operand,
                                  llvm::Value* row, llvm::Value* block) const override {
    return p.scaleAtoms ? nvptx::tcgen05ScaleStagingOffset(b, p, operand, row, block)
                        : GpuTargetInfo::scaleStagingOffset(b, p, operand, row, block);
  }
  // tcgen05's tensor memory (NVPTXTcgen05Dot.cpp), where the row has it.
  uint32_t accumulatorColumns(const TensorCoreDotPlan& p) const override { return nvptx::tcgen05AccumulatorColumns(p); }
  uint32_t accumulatorMemoryColumns() const override { return row().tcgen05 ? row().tmemColumns : 0; }
  void allocAccumulators(llvm::IRBuilderBase& b, llvm::Value* word, llvm::Value* warp,
                         uint32_t columns) const override {
    nvptx::allocTensorMemory(b, word, warp, columns);
  }
  void freeAccumulators(llvm::IRBuilderBase& b, llvm::Value* base, llvm::Value* warp, uint32_t columns,
                        const std::function<void()>& barrier) const override {
    nvptx::freeTensorMemory(b, base, warp, columns, barrier);
  }
  std::vector<llvm::Value*> loadAccumulators(DotEmitter& e) const override { return nvptx::loadTcgen05Accumulators(e); }
  // `wgmma.wait_group pending`.
  std::vector<llvm::Value*> dotWait(llvm::IRBuilderBase& b, int pending,
                                    const std::vector<llvm::Value*>& regs) const override {
    return nvptx::emitWgmmaPassThrough(b, pending, regs);
  }
  AsyncCopyImpl asyncCopyImpl() const override { return AsyncCopyImpl::Hardware; }
  void asyncCopy(llvm::IRBuilderBase& b, llvm::Value* dst, llvm::Value* src, unsigned bytes,
                 llvm::Value* mask) override {
    // A masked chunk: the ignore-src predicate form (NVPTXPredicated.h).
    if (mask) return nvptx::emitCpAsyncIgnoreSrc(b, dst, src, bytes, b.CreateNot(mask));
    for (const CpAsyncRow& r : kCpAsync)
      if (r.bytes == bytes) {
        b.CreateIntrinsic(r.id, {}, {dst, src, b.getInt32(bytes)});
        return;
      }
    TS_UNREACHABLE("cp.async of " + std::to_string(bytes) + " bytes");
  }
  void asyncCommit(llvm::IRBuilderBase& b) override {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {});
  }
  void asyncWait(llvm::IRBuilderBase& b, unsigned pending) override {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {}, {b.getInt32(pending)});
  }
  // TMA and mbarriers (NVPTXTma.h): Hopper's, sm_90a only here.
  bool hasTensorCopies() const override { return options().tensorCopies && row().tensorCopies; }
  void declareTensorMapParam(llvm::Function& fn, unsigned argNo) override {
    // A CUtensorMap: 128 bytes, 64-aligned, by value; a grid constant, so
    // its address (cvta.param) can be handed to cp.async.bulk.tensor.
    llvm::LLVMContext& c = fn.getContext();
    fn.addParamAttr(argNo, llvm::Attribute::getWithByValType(c, llvm::ArrayType::get(llvm::Type::getInt8Ty(c), 128)));
    fn.addParamAttr(argNo, llvm::Attribute::getWithAlignment(c, llvm::Align(64)));
    fn.addParamAttr(argNo, llvm::Attribute::get(c, "nvvm.grid_constant"));
  }
  void mbarrierInit(llvm::IRBuilderBase& b, llvm::Value* bar, unsigned count) override {
    nvptx::emitMbarrierInit(b, bar, count);
  }
  void mbarrierInitFence(llvm::IRBuilderBase& b) override { nvptx::emitMbarrierInitFence(b); }
  void mbarrierExpectTx(llvm::IRBuilderBase& b, llvm::Value* bar, llvm::Value* bytes) override {
    nvptx::emitMbarrierExpectTx(b, bar, bytes);
  }
  void tensorLoad(llvm::IRBuilderBase& b, llvm::Value* dst, llvm::Value* map, llvm::Value* const* coords, unsigned rank,
                  llvm::Value* bar) override {
    nvptx::emitTmaLoad(b, dst, map, coords, rank, bar);
  }
  void mbarrierArrive(llvm::IRBuilderBase& b, llvm::Value* bar) override { nvptx::emitMbarrierArrive(b, bar); }
  void tensorStore(llvm::IRBuilderBase& b, llvm::Value* map, llvm::Value* const* coords, llvm::Value* src) override {
    nvptx::emitTmaStore(b, map, coords, src);
  }
  void mbarrierArriveWarp(llvm::IRBuilderBase& b, llvm::Value* bar) override {
    // The lanes' reads of the slot before the one lane's release-arrival.
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_bar_warp_sync, {}, {b.getInt32(-1)});
    nvptx::emitMbarrierArrive(b, bar);
  }
  void barrierCount(llvm::IRBuilderBase& b, unsigned id, unsigned threads) override {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier_cta_sync_aligned_count, {}, {b.getInt32(id), b.getInt32(threads)});
  }
  void setLaunchRegisters(llvm::Function& fn, unsigned launch) override {
    // With setmaxnreg in the kernel, ptxas allocates exactly this many
    // registers per thread at launch (the pool the warpgroups trade in).
    fn.addFnAttr("nvvm.maxnreg", std::to_string(launch));
  }
  void setMaxRegisters(llvm::IRBuilderBase& b, unsigned regs, bool increase) override {
    b.CreateIntrinsic(increase ? llvm::Intrinsic::nvvm_setmaxnreg_inc_sync_aligned_u32
                               : llvm::Intrinsic::nvvm_setmaxnreg_dec_sync_aligned_u32,
                      {}, {b.getInt32(regs)});
  }
  void mbarrierWait(llvm::IRBuilderBase& b, llvm::Value* bar, llvm::Value* parity) override {
    nvptx::emitMbarrierWait(b, bar, parity);
  }

  llvm::TargetMachine& targetMachine(int optLevel) override {
    return cachedGpuTargetMachine(initNVPTX, "NVPTX", triple(), row().arch, row().llvmFeatures, std::nullopt, optLevel);
  }
  // GpuCompile.cpp explains the passes; NVPTX skips CodeGenPrepare there.
  const char* kernelPipeline() const override {
    return "function(early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(licm),simplifycfg,"
           "infer-alignment)";
  }
  bool skipsCodeGenPrepare() const override { return true; }
  const char* emitStage() const override { return "ptx"; }
  void storeOutput(GpuOutput& out, KernelBinary& bin, StageDumps& dumps) const override {
    dumps.assembly = out.assembly;
    bin.format = KernelBinary::Format::PTX;
    bin.ptx = out.assembly;
  }

  void prepareModule(llvm::Module& m, llvm::TargetMachine& tm) override {
    if (!libdevice_.empty()) linkLibdevice(m, tm, libdevice_);
  }

  GpuOutput emit(llvm::Module& m, llvm::TargetMachine& tm) override {
    GpuOutput out;
    out.assembly = emitFileReusingPipeline(m, tm, llvm::CodeGenFileType::AssemblyFile);
    return out;
  }

  GpuResources resources(const GpuOutput& out, const std::string& kernel, unsigned threadsPerBlock) override {
    const nvptx::Ptxas ptxas = nvptx::ptxasFor(row(), "the resources of @" + kernel);
    TempDir dir;
    ToolResult r = nvptx::runPtxas(ptxas, row(), out.assembly, kernel, {"-v"}, dir);
    GpuResources res;
    std::smatch mm;
    if (std::regex_search(r.output, mm, std::regex(R"(Used (\d+) registers)"))) res.registers = std::stoi(mm[1]);
    if (std::regex_search(r.output, mm, std::regex(R"((\d+) bytes spill stores, (\d+) bytes spill loads)")))
      res.spillBytes = std::stoll(mm[1]) + std::stoll(mm[2]);
    res.sharedBytes = 0;
    if (std::regex_search(r.output, mm, std::regex(R"((\d+) bytes smem)"))) res.sharedBytes = std::stoll(mm[1]);
    res.wavefrontSize = static_cast<int>(warpSize());
    res.text = "ptxas " + arch() + ": registers " + std::to_string(res.registers) + ", spill bytes " +
               std::to_string(res.spillBytes) + ", static shared " + std::to_string(res.sharedBytes) +
               " bytes, dynamic shared " + std::to_string(out.dynamicSharedBytes) + " bytes\n" +
               "occupancy estimate: " +
               occupancy(row(), res.registers, res.sharedBytes + static_cast<int64_t>(out.dynamicSharedBytes),
                         static_cast<int>(threadsPerBlock))
                   .text +
               "\n" + tensorCoreLine(out.assembly) + r.output;
    return res;
  }

 private:
  // The tensor-core instructions the PTX holds, for the resource report:
  // which MMA families the dots took. Empty without MMA instructions.
  std::string tensorCoreLine(const std::string& ptx) const {
    auto count = [&](const char* mnemonic) {
      int64_t n = 0;
      for (size_t at = ptx.find(mnemonic); at != std::string::npos; at = ptx.find(mnemonic, at + 1)) ++n;
      return n;
    };
    std::string line;
    for (const char* family : {"tcgen05.mma", "wgmma.mma_async", "mma.sync"}) {
      // "mma.sync.aligned" does not match inside the other two.
      const int64_t n = count(std::string(family) == "mma.sync" ? "mma.sync.aligned" : family);
      if (n) line += std::string(line.empty() ? "" : ",") + " " + family + " (" + std::to_string(n) + " in the PTX)";
    }
    return line.empty() ? "" : "tensor-core dots:" + line + "\n";
  }

  std::string libdevice_;  // libdevice.10.bc, or "" (f64 math from the polynomials)
};

}  // namespace

std::unique_ptr<GpuTargetInfo> createNVPTXTargetInfo(const GpuConfig& c) {
  TS_ASSERT(c.row->vendor == GpuArch::Vendor::NVIDIA, std::string("NVPTX hooks for ") + c.row->arch);
  return std::make_unique<NVPTXTargetInfo>(c);
}

}  // namespace tessera::codegen

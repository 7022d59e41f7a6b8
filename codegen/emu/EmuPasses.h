// The rewrite steps that turn a GPU-lowered module into host code for the
// SIMT machine, in the order compileForEmulator runs them:
//
//   rewritePredicatedAccesses
//                        NVPTX predicated ld/st.global (inline assembly)
//                        -> a branch around a plain access; cp.async with
//                        ignore-src (inline assembly) -> the cp.async hook
//   rewriteBufferAccesses
//                        AMDGPU raw buffer loads/stores -> a range check
//                        and a branch around a plain access
//   rewriteWarpgroupMma  NVPTX wgmma.mma_async (inline assembly) -> a hook
//   rewriteTma           NVPTX mbarrier and cp.async.bulk.tensor (inline
//                        assembly) -> hooks
//   instrumentMemory     every addrspace(1)/(3)/(7) access -> through
//                        tessera_emu_{global,shared,cluster}_access (with
//                        an opId)
//   rewriteIntrinsics    llvm.nvvm.* / llvm.amdgcn.* -> hooks or host IR
//   rewriteLibcalls      __nv_* / __ocml_* math -> host libm
//   rewriteInlineAsm     libdevice's 128-bit integer PTX helpers -> i128 IR;
//                        any other inline assembly is a CompileError
//   lowerSharedMemory    addrspace(3) globals -> tessera_emu_shared_base() + offset
//   flattenAddressSpaces every pointer -> addrspace(0), host triple/datalayout
//
// Steps before flattening keep the module well-typed in the GPU's address
// spaces (hook results are addrspacecast back), so each step can be verified
// on its own. Private to codegen: includes LLVM headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <llvm/IR/DataLayout.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>
#include <llvm/ADT/DenseMap.h>

#include "tessera/support/EmuAbi.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen::emu {

// Address spaces of the GPU modules (identical numbering on NVPTX and AMDGPU
// for the ones the machine models).
inline constexpr unsigned kFlatAS = 0;
inline constexpr unsigned kGlobalAS = 1;
inline constexpr unsigned kSharedAS = 3;
inline constexpr unsigned kConstantAS = 4;
inline constexpr unsigned kPrivateAS = 5;
/// NVPTX's shared::cluster window: the shared memory of every block of the
/// cluster (mapa results, ld/st.shared::cluster).
inline constexpr unsigned kSharedClusterAS = 7;

// Memory access kinds of the access hooks (tessera/support/EmuAbi.h).
inline constexpr int32_t kLoad = TESSERA_EMU_LOAD;
inline constexpr int32_t kStore = TESSERA_EMU_STORE;
inline constexpr int32_t kAtomic = TESSERA_EMU_ATOMIC;

/// State shared by the rewrite steps of one module.
struct EmuModule {
  EmuModule(llvm::Module& m, bool amd, unsigned warpSize);

  llvm::Module& m;
  llvm::LLVMContext& ctx;
  bool amd;
  unsigned warpSize;
  /// The architecture's row of Targets.def (null: a module compiled by
  /// hand, for no particular architecture).
  const GpuArch* row = nullptr;
  /// The GPU target's datalayout: sizes of accessed values and shared
  /// globals are those of the GPU, captured before the host layout is set.
  llvm::DataLayout gpuDL;
  llvm::Function* kernel = nullptr;
  std::string kernelName;
  /// opId -> op text, handed to the machine for its reports.
  std::vector<std::string> opNames;
  size_t staticSharedBytes = 0;
  size_t dynamicSharedOffset = 0;
  unsigned uncheckedAccesses = 0;

  /// The opId of `inst`: its `!tessera.op` string if the GPU lowering
  /// attached one, else the instruction's text as first parsed (plus its
  /// debug location). A fresh id per call: one id per instruction.
  int32_t opId(const llvm::Instruction& inst);
  /// `to`, created by a rewrite in place of `from`, is named as `from`
  /// would have been (its `!tessera.op`, else its text as first parsed).
  void nameAs(llvm::Instruction& to, const llvm::Instruction& from);

  /// Declaration of hook `name` (a tessera_emu_* function), typed and
  /// attributed as its row of tessera/support/EmuHooks.def says.
  llvm::FunctionCallee hook(llvm::StringRef name);

  llvm::Type* i32() const { return llvm::Type::getInt32Ty(ctx); }
  llvm::Type* i64() const { return llvm::Type::getInt64Ty(ctx); }
  llvm::PointerType* flatPtr() const { return llvm::PointerType::get(ctx, 0); }

 private:
  // Texts of the instructions that may get an opId, printed once before
  // any rewrite: the rewrites change operands, and printing one instruction
  // at a time would number each function's values anew every time.
  llvm::DenseMap<const llvm::Instruction*, std::string> texts_;
};

/// Short description of an instruction for error messages.
std::string describe(const llvm::Instruction& inst);

/// NVPTX's predicated global loads and stores (the inline assembly of
/// codegen/nvptx/NVPTXPredicated.h) as branches around plain accesses; other
/// inline assembly is left for rewriteInlineAsm.
void rewritePredicatedAccesses(EmuModule& em);
/// AMDGPU's raw buffer loads and stores (the lowering's masked accesses,
/// GpuTargetInfo::bufferLoad) as range checks and branches around plain
/// accesses (EmuBuffer.cpp).
void rewriteBufferAccesses(EmuModule& em);
/// The module's inline-assembly calls, in order, with their text and
/// constraints (valid while the call's InlineAsm lives): what the rewrites
/// above match against the texts of codegen/nvptx.
struct AsmCall {
  llvm::CallInst* call;
  std::string_view text, constraints;
};
std::vector<AsmCall> inlineAsmCalls(EmuModule& em);
/// NVPTX's wgmma.mma_async (codegen/nvptx/NVPTXWgmma.h) -> the machine's
/// wgmma hook; its fence and wait pass their registers through.
void rewriteWarpgroupMma(EmuModule& em);
/// NVPTX's mbarrier and TMA texts (codegen/nvptx/NVPTXTma.h) -> the
/// machine's hooks; fence.mbarrier_init -> nothing (the machine's
/// mbarriers are each block's own, and its block barrier orders the init).
void rewriteTma(EmuModule& em);
/// The rematerialisation's second reads of special registers
/// (codegen/nvptx/NVPTXSpecialRegisters.h) -> the intrinsics they stand
/// for, which rewriteIntrinsics then maps.
void rewriteRereads(EmuModule& em);
void instrumentMemory(EmuModule& em);
void rewriteIntrinsics(EmuModule& em);
void rewriteLibcalls(EmuModule& em);
/// The PTX inline assembly of libdevice's f64 sin/cos slow path (128-bit
/// multiply-add, add, subtract, multiply) as i128 arithmetic; CompileError for
/// any other inline assembly.
void rewriteInlineAsm(EmuModule& em);
void lowerSharedMemory(EmuModule& em);
/// Replaces every function and global by one whose pointers are all in
/// addrspace(0) (em.kernel is updated), and sets the host triple/datalayout.
void flattenAddressSpaces(EmuModule& em, const llvm::DataLayout& hostDL, const std::string& hostTriple);

/// Host libm functions (and the memory functions LLVM's host code calls) by
/// name, bound explicitly in the JIT.
const std::vector<std::pair<std::string, void*>>& hostLibSymbols();

}  // namespace tessera::codegen::emu

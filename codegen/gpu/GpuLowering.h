// Tile IR -> LLVM IR for GPUs, written once against GpuTargetInfo.
//
// One program is one block of numWarps * warpSize threads; program_id is the
// block id. Each tile value is distributed by its layout (Layout.h): a
// thread holds its slots as scalar SSA values. Scalars are uniform: every
// thread computes them. Shared memory is one array placed by SharedPlan.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "tessera/ir/analysis/GpuSharedMemory.h"
#include "codegen/gpu/GpuTargetInfo.h"
#include "tessera/ir/analysis/Layout.h"
#include "tessera/ir/analysis/LayoutStats.h"
#include "tessera/support/Binary.h"

namespace tessera::codegen {

struct GpuLoweringResult {
  std::unique_ptr<llvm::Module> module;
  uint64_t sharedBytes = 0;
  std::string sharedPlan;  // SharedPlan::describe()
  unsigned threadsPerBlock = 0;
  ir::LoweringRecord record;  // accesses and layout conversions emitted (layout-stats)
  /// Hidden tensor-map parameters after the user's (tensor copies).
  std::vector<TensorMapSpec> tensorMaps;
  /// A checked compile (GpuOptions::checkBounds): the op ids its record
  /// names, "op @ file:line" by id.
  std::vector<std::string> checkedOps;
  /// A profiled compile (GpuOptions::profile): its scopes, by index.
  std::vector<std::string> profileScopes;
  /// Loop-invariant dot operands were put in registers to raise the waves
  /// the LDS allows (GpuOptions::invariantsForLds), which were
  /// ldsWavesWithoutInvariants without.
  bool invariantsForLds = false;
  int64_t ldsWavesWithoutInvariants = 0;
  /// A chained dot's A fragments were read before its B was staged, to
  /// raise the waves the LDS allows (GpuOptions::fragmentsForLds), which
  /// were ldsWavesWithoutFragments without.
  bool fragmentsForLds = false;
  int64_t ldsWavesWithoutFragments = 0;
};

/// Whether a warp-specialised loop's consumers (`numWarps` warps carrying
/// `carriedPerThread` values each through the loop) trade registers with a
/// producer warpgroup through setmaxnreg (LowerSpecialize.cpp): two consumer
/// warpgroups whose loop carries at least 128 values per thread (a 128 x 256
/// f32 accumulator). Elsewhere the producer is one warp and the kernel keeps
/// ptxas's register count (gpuProducerWarps).
bool producerTradesRegisters(int numWarps, int64_t carriedPerThread);

/// Lowers `f` (after the tile passes) for target `t`, in its configuration
/// (GpuTargetInfo::config). `la` must describe `f`. Throws CompileError for
/// ops the GPU targets do not support, ResourceError when shared memory or
/// threads exceed the target's limits.
GpuLoweringResult lowerToGpuLLVM(const ir::Function& f, GpuTargetInfo& t, const ir::LayoutAnalysis& la,
                                 const ir::AxisAnalysis& axis, llvm::LLVMContext& ctx, const llvm::DataLayout& dl);

/// The shared-needs model (SharedNeeds.h) checked against the lowering
/// under every combination of SharedChoices: one line per combination
/// whose lowering asks otherwise than the model says; empty where none.
std::string sharedNeedsModelErrors(const ir::Function& f, GpuTargetInfo& t, const ir::LayoutAnalysis& la,
                                   const ir::AxisAnalysis& axis, llvm::LLVMContext& ctx, const llvm::DataLayout& dl);

}  // namespace tessera::codegen

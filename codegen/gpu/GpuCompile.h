// The GPU compile pipeline (NVPTX and AMDGPU), entered from
// codegen::compile once the tile-IR passes have run:
//
//   layouts (tile-IR dump "layout") -> shared lowering to LLVM IR (dumps.llvm)
//   -> LLVM optimisation (dumps.llvmOpt, and dumps.extra["llvm-gpu"], the
//   exact module handed to the backend, which the artifact also keeps as a
//   module: Artifact::kept) -> PTX text / AMDGCN object + LLD link to .hsaco
//   and AMDGCN assembly (dumps.assembly).
//
// Private to codegen, but free of LLVM headers (tests include it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/codegen/Compiler.h"
#include "tessera/ir/ScaledDot.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

struct GpuOptions {
  int codeObjectVersion = 5;  // AMDGPU: 4, 5 or 6
  /// AMDGPU: also emit AMDGCN assembly during the compile. Off by default:
  /// it is a second run of the code generator, so Artifact::assembly()
  /// produces it on demand from the kept module instead.
  bool eagerAssembly = false;
  /// Precision::Approximate: the target's hardware approximations
  /// (GpuTargetInfo::approxMath) and FMA contraction.
  Precision precision = Precision::Accurate;
  /// Masked global loads and stores without a branch where the target has
  /// a form for them (GpuTargetInfo::predicatedLoad / predicatedStore:
  /// NVPTX; bufferLoad / bufferStore: AMDGPU). Off: a branch around each
  /// access, as on targets without them (CompileOptions::predicatedAccesses).
  bool predicatedAccesses = true;
  /// Async copies of tiled global boxes as tensor copies (TMA) completing
  /// on transaction barriers where the target has them (sm_90a:
  /// GpuTargetInfo::hasTensorCopies). Off: cp.async, as on sm_80.
  bool tensorCopies = true;
  /// AMDGPU: loop-invariant dot operands in registers where that raises
  /// the waves the LDS allows (chooseShared). compileGpu turns it off
  /// and compiles again when the code then spills or its occupancy is no
  /// higher than the LDS allowed without.
  bool invariantsForLds = true;
  /// AMDGPU: a chained dot's staged A operand (flash attention's P) read
  /// into its fragments before B is staged over it, where that raises the
  /// waves the LDS allows (chooseShared, Lower::dotArea).
  /// compileGpu keeps the code where it has no scratch and as many waves as
  /// the LDS allowed without; otherwise it compiles again with this off and
  /// keeps the code with more waves (the other on a tie).
  bool fragmentsForLds = true;
  /// A bounds-checked compile (CompileOptions::checkBounds): every global
  /// access tested against its buffer (codegen/gpu/LowerChecks.cpp), extra
  /// hidden parameters, no tensor copies.
  bool checkBounds = false;
  /// A profiled compile (CompileOptions::profile): probes record into a
  /// buffer passed as the last parameter (codegen/gpu/LowerProfile.cpp).
  bool profile = false;
  /// Programs per thread-block cluster (CompileOptions::cluster, checked
  /// against the target's row by the driver).
  std::array<int, 3> cluster = {1, 1, 1};
  int clusterBlocks() const { return cluster[0] * cluster[1] * cluster[2]; }
};

/// One GPU compile's configuration, made once by the driver from the
/// target's row of Targets.def and the options (gpuConfig,
/// codegen/GpuTargets.h) and passed by reference: the warps, the warp size,
/// the threads per block, the vendor and the limits are read here and
/// nowhere else.
struct GpuConfig {
  Target target;                 // as named: an emu: target, or the device itself
  Target device;                 // the GPU whose code is generated (an emu: target's device)
  const GpuArch* row = nullptr;  // device's row of Targets.def: vendor, warp size, limits, instructions
  int numWarps = 4;              // warps per block (CompileOptions::numWarps)
  GpuOptions options;
  unsigned warpSize() const { return row->warpSize; }
  unsigned threadsPerBlock() const { return static_cast<unsigned>(numWarps) * warpSize(); }
};

class GpuTargetInfo;
/// Makes the vendor hooks of a configuration's device. codegen/gpu is
/// written against GpuTargetInfo and never names a vendor: the driver,
/// which links codegen/nvptx and codegen/amdgpu, hands it this
/// (createGpuTargetInfo, codegen/GpuTargets.h, which also has the entry
/// points below by target alone). The hooks keep a reference to `c`.
using GpuTargetFactory = std::unique_ptr<GpuTargetInfo> (*)(const GpuConfig& c);

/// Compiles for configuration `c`'s device. `dumpsSoFar` holds the tile-IR
/// stages already captured; the result's dumps extend them.
std::shared_ptr<Artifact> compileGpu(GpuTargetFactory make, const ir::Function& fnAfterTilePasses, const GpuConfig& c,
                                     const CompileOptions& o, StageDumps dumpsSoFar);

/// True where GPU target `t` (or its emulated device) has a matrix
/// instruction for a dot of an `a` by a `b` operand into an `acc`
/// accumulator: GpuTargetInfo::tensorCore, the vendor file's table. The
/// compiler widens the fp8 dots for which this is false (widen-fp8-dots).
bool gpuTensorCoreTakes(GpuTargetFactory make, const GpuConfig& c, DType a, DType b, DType acc);

/// How configuration `c` runs `dotScaled` (a tile-IR dot_scaled): on a
/// block-scaled matrix instruction (TensorCoreOp::mmaBlockScale) where the
/// instruction takes the formats (blocks of 32, no per-tensor scale) and
/// its placement fits the shape (ir::mmaLayout), with fp4 x fp4 packed
/// where it takes fp4 so (TensorCoreOp::fp4PackedK); else decomposed. The
/// decompose-scaled-dots pass writes that form and leaves the native
/// ones to the lowering.
ir::ScaledDotForm gpuScaledDotNative(GpuTargetFactory make, const GpuConfig& c, const ir::Op& dotScaled);

/// True where configuration `c` runs dot `dot` (a tile-IR dot) with a
/// matrix instruction that stays in flight after its issue
/// (ir::isAsyncMma: wgmma on sm_90a, for the shapes ir::mmaLayout gives it):
/// the compiler runs the async-dots pass with this predicate.
bool gpuKeepsDotInFlight(GpuTargetFactory make, const GpuConfig& c, const ir::Op& dot);

/// Why configuration `c` does not warp-specialise `loop` (a
/// `for {stages, specialize}` of `f`): no tensor copies, warps not whole
/// warpgroups, or a staged copy that is not an aligned box of a row-major
/// tensor (ir::matchTiledAccess); empty where it does. The compiler runs
/// the warp-specialize pass with this.
std::string gpuWarpSpecializeRefusal(GpuTargetFactory make, const GpuConfig& c, const ir::Function& f,
                                     const ir::Op& loop);
/// The warps the producer of a loop the `warp-specialize` pass rewrites runs
/// on: a warpgroup where the consumers trade registers with it
/// (producerTradesRegisters), else one warp. It issues the copies from one
/// lane either way.
int64_t gpuProducerWarps(const GpuConfig& c, const ir::Op& loop);

/// annotateGpuLayouts (tessera/codegen/Compiler.h) for configuration `c`.
void annotateGpuLayouts(GpuTargetFactory make, ir::Function& f, const GpuConfig& c);

/// Assembly of a GPU (or emu:) artifact whose backend does not produce it
/// eagerly (AMDGCN), generated from its kept module (the same code the code
/// object was built from); `c` the artifact's target's configuration.
std::string gpuAssembly(GpuTargetFactory make, const GpuConfig& c, const Artifact& a);
/// sharedNeedsModelErrors (GpuLowering.h) for `fnAfterTilePasses` in
/// configuration `c`: empty where the model of its shared memory matches
/// its lowering under every choice (a test of the compiler itself).
std::string checkSharedNeedsModel(GpuTargetFactory make, const ir::Function& fnAfterTilePasses, const GpuConfig& c);

/// gpuResources (tessera/codegen/Compiler.h) of an artifact of
/// configuration `c`'s target.
GpuResources gpuResources(GpuTargetFactory make, const GpuConfig& c, const Artifact& a);

}  // namespace tessera::codegen

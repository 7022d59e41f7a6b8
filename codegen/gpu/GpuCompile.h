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

namespace tessera::codegen {

struct GpuOptions {
  int numWarps = 4;           // threads per block = numWarps * warp size
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
  /// the waves the LDS allows (lowerToGpuLLVM). compileGpu turns it off
  /// and compiles again when the code then spills or its occupancy is no
  /// higher than the LDS allowed without.
  bool invariantsForLds = true;
  /// AMDGPU: a chained dot's staged A operand (flash attention's P) read
  /// into its fragments before B is staged over it, where that raises the
  /// waves the LDS allows (lowerToGpuLLVM, Lower::setFragmentsFirst).
  /// compileGpu keeps the code where it has no scratch and as many waves as
  /// the LDS allowed without; otherwise it compiles again with this off and
  /// keeps the code with more waves (the other on a tie).
  bool fragmentsForLds = true;
};

class GpuTargetInfo;
/// Makes the vendor hooks of GPU target `t` (emu: targets: their device's)
/// with options `g`. codegen/gpu is written against GpuTargetInfo and never
/// names a vendor: the driver, which links codegen/nvptx and
/// codegen/amdgpu, hands it this (createGpuTargetInfo, codegen/GpuTargets.h,
/// which also has the entry points below by target alone).
using GpuTargetFactory = std::unique_ptr<GpuTargetInfo> (*)(const Target& t, const GpuOptions& g);

/// Compiles for an NVPTX / AMDGPU (or emu:) target. `dumpsSoFar` holds the
/// tile-IR stages already captured; the result's dumps extend them.
std::shared_ptr<Artifact> compileGpu(GpuTargetFactory make, const ir::Function& fnAfterTilePasses, const Target& t,
                                     const CompileOptions& o, StageDumps dumpsSoFar, const GpuOptions& g);

/// True where GPU target `t` (or its emulated device) has a matrix
/// instruction for a dot of an `a` by a `b` operand into an `acc`
/// accumulator: GpuTargetInfo::tensorCore, the vendor file's table. The
/// compiler widens the fp8 dots for which this is false (widen-fp8-dots).
bool gpuTensorCoreTakes(GpuTargetFactory make, const Target& t, DType a, DType b, DType acc);

/// True where GPU target `t` runs dot `dot` (a tile-IR dot, `numWarps`
/// warps) with a matrix instruction that stays in flight after its issue
/// (ir::isAsyncMma: wgmma on sm_90a, for the shapes ir::mmaLayout gives it):
/// the compiler runs the async-dots pass with this predicate.
bool gpuKeepsDotInFlight(GpuTargetFactory make, const Target& t, int numWarps, const ir::Op& dot);

/// Why GPU target `t` with options `o` does not warp-specialise `loop` (a
/// `for {stages, specialize}` of `f`): no tensor copies, warps not whole
/// warpgroups, or a staged copy that is not an aligned box of a row-major
/// tensor (ir::matchTiledAccess); empty where it does. The compiler runs
/// the warp-specialize pass with this.
std::string gpuWarpSpecializeRefusal(GpuTargetFactory make, const Target& t, const CompileOptions& o,
                                     const ir::Function& f, const ir::Op& loop);
/// The warps the producer of a loop the `warp-specialize` pass rewrites runs
/// on: a warpgroup where the consumers trade registers with it
/// (producerTradesRegisters), else one warp. It issues the copies from one
/// lane either way.
int64_t gpuProducerWarps(const CompileOptions& o, const ir::Op& loop);

/// annotateGpuLayouts (tessera/codegen/Compiler.h) with the vendor hooks
/// `make` gives.
void annotateGpuLayouts(GpuTargetFactory make, ir::Function& f, const Target& target, const CompileOptions& opts);

/// Assembly of a GPU (or emu:) artifact whose backend does not produce it
/// eagerly (AMDGCN), generated from its kept module (the same code the code
/// object was built from).
std::string gpuAssembly(GpuTargetFactory make, const Artifact& a);

/// gpuResources and resourceReport (tessera/codegen/Compiler.h) with the
/// vendor hooks `make` gives.
GpuResources gpuResources(GpuTargetFactory make, const Artifact& a);
std::string resourceReport(GpuTargetFactory make, const Artifact& a);

}  // namespace tessera::codegen

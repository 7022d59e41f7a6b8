// The GPU targets as the driver sees them: the vendor hooks of a target
// (createGpuTargetInfo: codegen/nvptx, codegen/amdgpu), which codegen/gpu
// is handed and never names, and the GPU compile's entry points by target
// alone. Private to codegen, but free of LLVM headers (tests include it).
#pragma once

#include <memory>
#include <string>

#include "gpu/GpuCompile.h"  // relative: tests include this header by path

namespace tessera::codegen {

/// The real target an emu: target runs the code of (emu:nvptx:sm_80 ->
/// nvptx:sm_80); every other target is its own. The one place the
/// emulator's targets map to their vendor.
Target gpuDevice(const Target& t);

/// The vendor hooks of GPU target `t` (emu: targets: their device's) with
/// options `g`: the GpuTargetFactory the driver hands codegen/gpu. An
/// architecture missing from Targets.def is a CompileError listing the
/// valid ones.
std::unique_ptr<GpuTargetInfo> createGpuTargetInfo(const Target& t, const GpuOptions& g);

/// GpuCompile.h's entry points with createGpuTargetInfo.
std::shared_ptr<Artifact> compileGpu(const ir::Function& fnAfterTilePasses, const Target& t, const CompileOptions& o,
                                     StageDumps dumpsSoFar, const GpuOptions& g = {});
bool gpuTensorCoreTakes(const Target& t, DType a, DType b, DType acc);
bool gpuKeepsDotInFlight(const Target& t, int numWarps, const ir::Op& dot);
std::string gpuWarpSpecializeRefusal(const Target& t, const CompileOptions& o, const ir::Function& f,
                                     const ir::Op& loop);
/// AMDGCN assembly of an AMDGPU (or emu:amdgpu) artifact, generated from its
/// kept module (the same code the code object was built from).
std::string amdgpuAssembly(const Artifact& a);

}  // namespace tessera::codegen

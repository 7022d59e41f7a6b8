// The GPU targets as the driver sees them: a target's one configuration
// (gpuConfig) and its vendor hooks (createGpuTargetInfo: codegen/nvptx,
// codegen/amdgpu), which codegen/gpu is handed and never names, and the GPU
// compile's entry points by target alone. Private to codegen, but free of
// LLVM headers (tests include it).
#pragma once

#include <memory>
#include <string>

#include "gpu/GpuCompile.h"  // relative: tests include this header by path

namespace tessera::codegen {

/// The real target an emu: target runs the code of (emu:nvptx:sm_80 ->
/// nvptx:sm_80); every other target is its own. The one place the
/// emulator's targets map to their vendor.
Target gpuDevice(const Target& t);

/// The configuration of a compile for GPU target `t` (an emu: target: its
/// device's row) with `numWarps` warps per block and options `g`. A target
/// that is not a GPU, or an architecture missing from Targets.def, is a
/// CompileError (listing the valid ones).
GpuConfig gpuConfig(const Target& t, int numWarps, const GpuOptions& g = {});
/// The GPU options a compile's options give.
GpuOptions gpuOptions(const CompileOptions& o);

/// The vendor hooks of `c`'s device: the GpuTargetFactory the driver hands
/// codegen/gpu.
std::unique_ptr<GpuTargetInfo> createGpuTargetInfo(const GpuConfig& c);

/// compileGpu (GpuCompile.h) for target `t` with o.numWarps warps and
/// options `g`.
std::shared_ptr<Artifact> compileGpu(const ir::Function& fnAfterTilePasses, const Target& t, const CompileOptions& o,
                                     StageDumps dumpsSoFar, const GpuOptions& g = {});
/// checkSharedNeedsModel (GpuCompile.h) for target `t` with o.numWarps warps.
std::string checkSharedNeedsModel(const ir::Function& fnAfterTilePasses, const Target& t, const CompileOptions& o);
/// AMDGCN assembly of an AMDGPU (or emu:amdgpu) artifact, generated from its
/// kept module (the same code the code object was built from).
std::string amdgpuAssembly(const Artifact& a);

}  // namespace tessera::codegen

// Rematerialisation of index arithmetic after loops.
//
// The tile lowering computes a kernel's index tiles (rows, masks, offsets)
// once, before its main loop, and CSE makes the epilogue reuse them: the
// store of a flash-attention output reuses the query load's row offsets
// and masks. Each such value then stays in a register through the whole
// loop although the loop never reads it: on sm_80 the 64 x 64 attention
// carried about twenty of them, and ptxas spilled one (its register target
// of 128 exceeded by one). Recomputing them after the loop, from the thread
// and block indices read again there, costs a few integer instructions once
// per kernel and leaves the loop only what it uses (105 registers, no
// spill).
//
// A value qualifies when it is defined before a loop, is used after it and
// not in it, and is built only from cheap integer and address instructions
// whose leaves are constants, kernel arguments, values the loop keeps live
// anyway, or special registers the target can read again
// (GpuTargetInfo::rereadSpecialRegister). The re-read must be opaque to
// LLVM: a plain clone would be merged back into the value before the loop
// by the code generator's CSE, which is why a target without such a read
// rematerialises nothing. NVIDIA reads %tid and %ctaid again; AMDGPU's
// work-item ids arrive in VGPRs and cannot be: an opaque copy of the id,
// tried, kept one VGPR through the loop and gave mixed results (gfx942
// attention 1-2 VGPRs fewer, gfx1100 64 x 64 d64 from 234 VGPRs to 256
// and 12 bytes of scratch), so AMDGPU keeps its code as it was. Runs last
// in the GPU pipeline; LLVM is not exposed to its callers.
#pragma once

namespace llvm {
class Function;
}

namespace tessera::codegen {

class GpuTargetInfo;

/// Rewrites `f` in place; returns the number of values rematerialised
/// (the uses after a loop that now read a recomputed value).
unsigned rematerializeAfterLoops(llvm::Function& f, GpuTargetInfo& ti);

}  // namespace tessera::codegen

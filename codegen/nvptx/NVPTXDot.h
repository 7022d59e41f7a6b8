// NVIDIA's tensor-core dot families behind GpuTargetInfo's dot hooks
// (codegen/gpu/GpuDot.h): mma.sync with ldmatrix (NVPTXMmaSync.cpp) and
// Hopper's warpgroup MMA (NVPTXWgmmaDot.cpp). Both place the accumulator
// as mma.sync does (ir::mmaLayout), so a dot the planner cannot give wgmma
// falls back to mma.sync on the same registers; wgmma takes its A
// fragments from mma.sync's loads. Private to codegen/nvptx: includes LLVM
// headers.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/gpu/GpuDot.h"

namespace tessera::codegen::nvptx {

// ---- mma.sync (NVPTXMmaSync.cpp) ---------------------------------------------
/// The staging of an mma.sync (or, until planWgmmaForm, wgmma) dot: A M x K;
/// B K x N, or N x K for 1-byte elements; rows padded by one 16-byte chunk
/// so the eight 16-byte rows one ldmatrix phase reads fall into eight
/// different 4-bank groups.
void planMmaSyncStaging(TensorCoreDotPlan& p);
/// The layout of a shared slot read directly by mma (planDirectDots): the
/// row-major slot of `elemBytes`-byte elements with its 16-byte chunks
/// XOR-swizzled, a permutation of whole chunks, so cp.async chunks land in
/// it unchanged.
DotStaging mmaSyncSlotStaging(int64_t rows, int64_t cols, unsigned elemBytes);
/// A B operand copied from global memory where it is contiguous along K
/// (flash attention's K^T), stored N x K so the copy's 16-byte chunks stay
/// whole; ldmatrix without .trans reads its fragments.
void stageBAlongK(TensorCoreDotPlan& p);
/// The fragment loads (ldmatrix) and mma.sync instructions of the whole K
/// extent (with e.only set: one operand's fragments into e.loaded).
std::vector<llvm::Value*> emitMmaSyncDot(DotEmitter& e, std::vector<llvm::Value*> acc);

// ---- wgmma (NVPTXWgmmaDot.cpp) -----------------------------------------------
/// wgmma's K x N B: rows of min(N, 128 bytes) elements swizzled by their
/// 128 / 64 / 32 bytes, column blocks of 128 bytes beyond that (N >= 16);
/// to be aligned to 8 rows of it (wgmmaBAlign). fp8 (1-byte) only K-major.
DotStaging wgmmaBStaging(int64_t K, int64_t N, unsigned elemBytes = 2);
uint64_t wgmmaBAlign(const DotStaging& s);
/// wgmma's A read from shared memory: M x K (K-major) stored as
/// wgmmaBStaging(M, K) with its rows permuted for `warps` warps along M
/// (DotStaging::rowGroupWarps).
DotStaging wgmmaAStaging(int64_t M, int64_t K, int64_t warps);
/// Between wgmma and mma.sync for a dot the layouts gave wgmma, once its
/// operand sources are known: mma.sync where B's fragments are held in
/// registers; else wgmma with B K-major (N x K: an fp8 B, or one copied
/// from K-contiguous global memory) or N-major, and A from shared memory
/// too unless its fragments are registers already.
void planWgmmaForm(TensorCoreDotPlan& p, const DotOperandSources& s);
/// The A fragments (mma.sync's loads, or A's descriptor), a fence, one
/// wgmma per 64-row tile and k-step of each warpgroup, a commit and a wait
/// for all of them (none with p.inFlight).
std::vector<llvm::Value*> emitWgmmaDot(DotEmitter& e, std::vector<llvm::Value*> acc);

}  // namespace tessera::codegen::nvptx

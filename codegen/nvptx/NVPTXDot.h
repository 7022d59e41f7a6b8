// NVIDIA's tensor-core dot families behind GpuTargetInfo's dot hooks
// (codegen/gpu/GpuDot.h): mma.sync with ldmatrix (NVPTXMmaSync.cpp) and
// Hopper's warpgroup MMA (NVPTXWgmmaDot.cpp). Both place the accumulator
// as mma.sync does (ir::mmaLayout), so a dot the planner cannot give wgmma
// falls back to mma.sync on the same registers; wgmma takes its A
// fragments from mma.sync's loads. Private to codegen/nvptx: includes LLVM
// headers.
#pragma once

#include <cstdint>
#include <functional>
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
/// wgmmaBStaging(M, K, elemBytes) with its rows permuted for `warps` warps along M
/// (DotStaging::rowGroupWarps).
/// `tiles`: DotStaging::rowGroupTiles (tcgen05RowTiles).
DotStaging wgmmaAStaging(int64_t M, int64_t K, int64_t warps, unsigned elemBytes = 2, int64_t tiles = 1);
/// Between wgmma and mma.sync for a dot the layouts gave wgmma, once its
/// operand sources are known: mma.sync where B's fragments are held in
/// registers; else wgmma with B K-major (N x K: an fp8 B, or one copied
/// from K-contiguous global memory) or N-major, and A from shared memory
/// too unless its fragments are registers already.
void planWgmmaForm(TensorCoreDotPlan& p, const DotOperandSources& s);
/// The constant bits of B's / A's matrix descriptor (wgmma's; tcgen05 adds
/// its version bits), from the plan's staging.
uint64_t bDescriptorBits(const TensorCoreDotPlan& p);
uint64_t aDescriptorBits(const TensorCoreDotPlan& p);
/// Byte offset of K column `col` in a K-major staging (its block, then its
/// place in the row), and of B's k-step starting at `col`.
int64_t kMajorByteOffset(const DotStaging& s, int64_t col);
int64_t bStepOffset(const TensorCoreDotPlan& p, int64_t col);
/// A descriptor as a 32-bit low word over the operand's address and a
/// constant high word, so each k-step's descriptor is one 32-bit add.
struct DescriptorBase {
  llvm::Value *lo, *hi;
};
DescriptorBase descriptorBase(llvm::IRBuilderBase& b, llvm::Value* addr64, uint64_t constBits);
llvm::Value* descriptorAt(llvm::IRBuilderBase& b, const DescriptorBase& d, int64_t off);
/// The A fragments (mma.sync's loads, or A's descriptor), a fence, one
/// wgmma per 64-row tile and k-step of each warpgroup, a commit and a wait
/// for all of them (none with p.inFlight).
std::vector<llvm::Value*> emitWgmmaDot(DotEmitter& e, std::vector<llvm::Value*> acc);

// ---- tcgen05 (NVPTXTcgen05Dot.cpp) ---------------------------------------------
/// Rows of 64 one tcgen05.mma covers: 2 (an M = 128 instruction) where
/// every warpgroup holds an even number of 64-row tiles and N is a
/// multiple of 16, else 1 (M = 64); 1 for any other instruction.
int64_t tcgen05RowTiles(const TensorCoreDotPlan& p);
/// Tensor-memory columns of a dot's accumulator: N per instruction's rows.
uint32_t tcgen05Columns(const TensorCoreDotPlan& p);
/// A block-scaled dot's scales in tensor memory: the first column of its
/// sets (after the accumulator), and the columns of one set.
uint32_t tcgen05ScaleBase(const TensorCoreDotPlan& p);
uint32_t tcgen05ScaleSetColumns(const TensorCoreDotPlan& p);
/// Whether tcgen05's block-scaled MMA (M = 128 only) takes a dot placed
/// `acc`, M x N with `scaleBlocks` scales a row (GpuTargetInfo::takesScaledDot).
bool tcgen05TakesScaled(const ir::BlockedLayout& acc, int64_t M, int64_t N, int64_t scaleBlocks);
/// The staged byte of a scale in its atom (GpuTargetInfo::scaleStagingOffset).
llvm::Value* tcgen05ScaleStagingOffset(llvm::IRBuilderBase& b, const TensorCoreDotPlan& p, unsigned operand,
                                       llvm::Value* row, llvm::Value* block);
/// A dot on Blackwell's tensor cores in the columns e.accMemory names (the
/// lowering's, codegen/gpu/LowerAccumulators.cpp): one tcgen05.mma per
/// 64 or 128 rows (tcgen05RowTiles) and k-step issued by thread 0, reading both operands
/// through descriptors (planWgmmaForm's stagings), committed to the
/// issue's mbarrier. In flight (p.inFlight): the accumulator stored at the
/// first issue only, the registers returned as they came. Otherwise: stored
/// unless it is zero, after a barrier (the columns' earlier readers), the
/// issue's barrier phase waited for, the result loaded back.
std::vector<llvm::Value*> emitTcgen05Dot(DotEmitter& e, std::vector<llvm::Value*> acc);
/// GpuTargetInfo's accumulator memory on tcgen05: a dot's columns (0 where
/// it is not a tcgen05 dot), the allocation by warp 0, its release after
/// the block's barrier, the registers read back.
uint32_t tcgen05AccumulatorColumns(const TensorCoreDotPlan& p);
void allocTensorMemory(llvm::IRBuilderBase& b, llvm::Value* word, llvm::Value* warp, uint32_t columns);
void freeTensorMemory(llvm::IRBuilderBase& b, llvm::Value* base, llvm::Value* warp, uint32_t columns,
                      const std::function<void()>& barrier);
std::vector<llvm::Value*> loadTcgen05Accumulators(DotEmitter& e);

}  // namespace tessera::codegen::nvptx

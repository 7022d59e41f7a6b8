// Tensor-core lowering of the tile IR's dot for the GPU targets: f16/bf16
// operands with an f32 accumulator on NVIDIA mma.sync.m16n8k16 with
// ldmatrix, AMD MFMA 16x16x16 (gfx90a, gfx942) and WMMA 16x16x16 (gfx1100);
// i8 operands with an i32 accumulator on mma.sync.m16n8k32.s8, MFMA
// i32_16x16x16i8 (gfx90a) / i32_16x16x32_i8 (gfx942) and WMMA
// i32_16x16x16_iu8 (gfx1100).
//
// The accumulator lives in the instruction's registers: its layout is the
// `#mma<...>` blocked layout of Layout.h (mmaLayout), so a loop-carried
// accumulator never leaves the registers between iterations. The operands
// are staged in shared memory (LDS) by the threads that hold them, then each
// warp reads its instruction fragments. Staging is written in bytes of the
// element size (DotStaging::elemBytes), so 1-byte operands share one path.
//
// This file is the shared part: the plan (which buffers, their layouts),
// the staging layouts' address arithmetic, and what every family's emitter
// starts from (DotEmitter). How each MMA family stages its operands and
// reads its fragments is the vendor's, behind GpuTargetInfo's dot hooks:
//   codegen/nvptx/NVPTXMmaSync.cpp   mma.sync with ldmatrix (padded or
//                                    XOR-swizzled 16-byte chunks)
//   codegen/nvptx/NVPTXWgmmaDot.cpp  wgmma, B (and A) through descriptors
//   codegen/amdgpu/AMDGPUMfma.cpp    MFMA 32x32x8 / 16x16x16 / 16x16x32
//   codegen/amdgpu/AMDGPUWmma.cpp    WMMA 16x16x16
//   codegen/amdgpu/AMDGPUMatrixCore.cpp  the AMD families' shared staging
//                                    and fragment loop.
// Private to codegen: includes LLVM headers.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "codegen/gpu/GpuTargetInfo.h"
#include "tessera/ir/analysis/Layout.h"

namespace tessera::codegen {

/// One operand's staging buffer: element (row, col) of a rows x cols matrix
/// of `elemBytes`-byte elements (2: f16/bf16, 1: i8).
struct DotStaging {
  int64_t rows = 0, cols = 0;
  int64_t stride = 0;    // elements between rows
  bool swizzle = false;  // XOR swizzle of 16-byte chunks (NVPTX)
  /// Largest number of consecutive elements of a row one store may write
  /// (vector stores stay inside a 16-byte chunk and aligned).
  int64_t maxVec = 1;
  unsigned elemBytes = 2;
  /// Columns stored in blocks of this many (0: one block): block j holds
  /// columns [j * blockCols, (j + 1) * blockCols) of every row, rows of
  /// `stride` = blockCols elements, the blocks one after the other (wgmma's
  /// K-major operands wider than their 128-byte swizzle).
  int64_t blockCols = 0;
  /// Rows permuted for wgmma's A (0: none): with W warps along M, the #mma
  /// layout's row g + 8w + 8W h + 16W j (g < 8, w < W, h < 2) is stored at
  /// row g + 8h + 16w + 16W j, so each warpgroup's 64 instruction rows are
  /// consecutive rows of storage, as a descriptor names them. With
  /// rowGroupTiles T = 2 (tcgen05's M = 128 instruction, whose row 32q + r
  /// is the TMEM lane 32q + r that warp q reads), the rows of the blocks
  /// j = 2p + t go together: g + 8h + 16t + 32w + 32W p.
  int64_t rowGroupWarps = 0;
  int64_t rowGroupTiles = 1;
  /// Rows permuted for MFMA 32x32's B (N x K; 0: none): with W waves
  /// along N, the #mma layout's column x + 8w + 8W j (x < 8, w < W) is
  /// stored at row x + 8(j % 4) + 32w + 32W(j / 4), so the 32 columns of a
  /// wave's instruction tile are 32 consecutive rows and the 16 lanes of
  /// one LDS phase read 16 rows whose 8-byte runs fall in distinct banks
  /// (rows 16 apart of a padded stride share their banks).
  int64_t mfmaColWarps = 0;
  /// Bytes the swizzle permutes as a whole: 16 (a chunk: NVPTX, WMMA) or 8
  /// (MFMA's 8-byte fragment reads).
  int64_t swizzleUnit = 16;
  /// Elements per 16-byte chunk (one ldmatrix row).
  int64_t chunkElems() const { return 16 / static_cast<int64_t>(elemBytes); }
  int64_t unitElems() const { return swizzleUnit / static_cast<int64_t>(elemBytes); }
  /// Rows after which the swizzle repeats: one 128-byte bank cycle of units.
  int64_t swizzlePeriod() const { return 128 / swizzleUnit; }
  uint64_t bytes() const { return static_cast<uint64_t>(rows * (blockCols ? cols : stride)) * elemBytes; }
  /// Bytes of one stored row (of one block).
  int64_t rowBytes() const { return stride * static_cast<int64_t>(elemBytes); }
};

struct TensorCoreDotPlan {
  TensorCoreOp op;
  DType in = DType::F16;
  DType inB = DType::F16;  // B's dtype: `in` but for mixed fp8 (e4m3 x e5m2)
  /// The element formats the instruction reads: a block-scaled dot's
  /// a_elem / b_elem (its operands are u8 containers), else in / inB.
  DType elemA = DType::F16, elemB = DType::F16;
  unsigned elemBytes = 2;  // of `in`
  /// Elements along K per operand element: 2 for a packed block-scaled
  /// dot (fp4 two a byte; ir::dotElemsPerByte), else 1. K and kStep count
  /// operand elements (bytes there).
  int64_t kPerElem = 1;
  int64_t kStep = 16;  // K of one instruction (ir::mmaK; packed: TensorCoreOp::fp4PackedK)
  int64_t M = 0, N = 0, K = 0;
  ir::BlockedLayout acc;     // the #mma layout of the result
  DotStaging a;              // rows = M, cols = K
  DotStaging b;              // rows = K, cols = N, or (bTransposed) rows = N, cols = K
  bool bTransposed = false;  // b holds B^T (AMDGPU; NVPTX 1-byte or K-contiguous global B)
  uint64_t aBytes = 0;       // a's size rounded up to 16 bytes: b starts there (at bAlign)
  /// An instruction that reads its operands from shared memory itself,
  /// through descriptors and the async proxy (NVIDIA's wgmma: the target's
  /// planDotForm sets these): B read from `b`, N x K with its rows swizzled
  /// (stagingIndex), which must start at a shared address that is a
  /// multiple of bAlign (the swizzle is one of address bits); A from
  /// registers (as mma.sync's fragments) unless aFromShared.
  bool bFromShared = false;
  bool bNMajor = false;  // b is K x N (N-major), else N x K (K-major)
  /// A read by the instruction from `a` (K-major) instead of from registers.
  bool aFromShared = false;
  /// Leave the asynchronous MMAs in flight: commit their group, no wait (a
  /// `dot {async}` reading both operands in place from pipeline slots; the
  /// program's dot_wait retires it: emitTensorCoreWait).
  bool inFlight = false;
  uint64_t aAlign = 16, bAlign = 16;
  /// A block-scaled dot (operands 3 and 4, IR.h; `op.mma` is then the
  /// instruction's block-scaled form): its scales, one byte per row of A
  /// (and column of B) and block of scaleBlock elements along K (e8m0 of
  /// 32, or NVFP4's UE4M3 of 16: ir::dotScaleBlock), staged row-major as
  /// [M, scaleBlocks] and then [N, scaleBlocks] bytes (DotEmitter::scales),
  /// or, with scaleAtoms, in the target's atoms of 128 rows and 4 scales
  /// (512 bytes: tessera/support/Tcgen05.h, which an instruction copies
  /// into its accumulator memory): A's atoms, then B's, each operand's
  /// row-tile-major then K-group (ScaleLayouts.h's order), `scaleBuffers`
  /// such sets in turn (an in-flight dot's next issue writes one while the
  /// last is read: GpuTargetInfo::scaleStagingOffset).
  bool scaled = false;
  int64_t scaleBlock = 32;
  int64_t scaleBlocks = 0;  // K * kPerElem / scaleBlock
  bool scaleAtoms = false;
  int64_t scaleBuffers = 1;
  int64_t scaleGroups() const { return (scaleBlocks + 3) / 4; }
  int64_t scaleAtomsA() const { return (M + 127) / 128 * scaleGroups(); }
  int64_t scaleAtomsB() const { return (N + 127) / 128 * scaleGroups(); }
  /// Bytes of one set of staged scales, and of all of them.
  uint64_t scaleSetBytes() const {
    if (!scaled) return 0;
    return static_cast<uint64_t>(scaleAtoms ? 512 * (scaleAtomsA() + scaleAtomsB()) : (M + N) * scaleBlocks);
  }
  uint64_t scaleBytes() const { return scaleSetBytes() * static_cast<uint64_t>(scaleBuffers); }
};

/// The plan of a dot on matrix instruction `op`: the fields every family
/// shares, then the target's staging (GpuTargetInfo::planDotStaging).
TensorCoreDotPlan planTensorCoreDot(const GpuTargetInfo& t, const TensorCoreOp& op, DType in, int64_t M, int64_t N,
                                    int64_t K, const ir::BlockedLayout& acc, int64_t kPerElem = 1);

/// Where a dot's operands come from, as the lowering planned them
/// (Lower::planDotOperands): what a target weighs in choosing between the
/// forms of its matrix instructions (GpuTargetInfo::planDotForm).
struct DotOperandSources {
  bool planned = false;         // the operand sources below are known
  bool aInRegisters = false;    // A's fragments come from registers (a chained dot's, or held across a loop)
  bool bFragmentsHeld = false;  // B's fragments are read once before a loop and held in registers
  bool bGlobalAlongK = false;   // B is copied from global memory where it is contiguous along K
  bool bInSlot = false;         // B is read in place from a shared slot (Lower::planDirectDots)
  bool bSlotKMajor = false;     // ... a slot holding B^T as given, N x K (through a transpose: ir::dotOperandLoad)
  /// The dot is in a loop and completes at every issue (not a `dot {async}`
  /// reading both operands in place from its loop's slots).
  bool completesInLoop = false;
};

/// The address of element (row + dRow, col + dCol) of a staging buffer
/// (dRow, dCol constants): without the swizzle, the thread's address of
/// (row, col) plus a constant offset, so the accesses of a thread share one
/// address register (immediate offsets) instead of one register each.
llvm::Value* stagingAddress(llvm::IRBuilderBase& b, llvm::Type* elemTy, llvm::Value* base, const DotStaging& s,
                            llvm::Value* row, int64_t dRow, llvm::Value* col, int64_t dCol);

/// The row of storage that row `row` of a staging buffer is stored at
/// (DotStaging::rowGroupWarps; else `row` itself; i32 values).
llvm::Value* stagedRow(llvm::IRBuilderBase& b, const DotStaging& s, llvm::Value* row);
/// Element index of (row, col) in a staging buffer (i32 values).
llvm::Value* stagingIndex(llvm::IRBuilderBase& b, const DotStaging& s, llvm::Value* row, llvm::Value* col);
/// The constant d with stagingIndex(row + dRow, col + dCol) ==
/// stagingIndex(row, col) + d for every (row, col), where there is one: the
/// swizzle repeats every 8 rows (wgmma's A row order every 16 rows per
/// warp), column blocks are a block apart. A thread's chunks then share one
/// address register with immediate offsets.
std::optional<int64_t> stagingOffset(const DotStaging& s, int64_t dRow, int64_t dCol);

/// Where a dot keeps its accumulator (GpuTargetInfo's accumulator
/// memory): its columns' address and the mbarrier this issue commits to;
/// in flight (TensorCoreDotPlan::inFlight), whether the memory holds the
/// accumulator already (an earlier issue of the same dot since the last
/// dot_wait that read it); otherwise the parity of the barrier's phase the
/// emitter waits for before reading the result back.
struct AccumulatorMemory {
  llvm::Value* address = nullptr;        // i32
  llvm::Value* commitBarrier = nullptr;  // shared mbarrier
  llvm::Value* resident = nullptr;       // i1, in flight
  llvm::Value* waitParity = nullptr;     // i32, complete at the issue
  /// In flight: the accumulator enters the loop as the constant zero, so
  /// the first issue need not store it (its first MMA ignores D).
  bool entersZero = false;
  /// The barrier of the threads that run the dot: the block's, or a
  /// warp-specialised loop's consumers' (their producer warps run apart).
  std::function<void()> barrier;
  /// A block-scaled dot with scaleAtoms: which of its scaleBuffers sets
  /// this scales are in (i32), in shared memory and in the columns.
  llvm::Value* scaleSet = nullptr;
};

/// What a family's emitter (GpuTargetInfo::emitDot) starts from: the plan,
/// the operands' staging buffers, the lane and warp and the warp's place in
/// the #mma layout (computed when it is made), and the fragments read
/// before (preA, preB) or to be read into `loaded` (only).
struct DotEmitter {
  llvm::IRBuilderBase& b;
  llvm::Module& m;
  const TensorCoreDotPlan& p;
  llvm::Value *aBase, *bBase, *lane, *warp;
  /// A's element (row, col) in registers, relative to the thread's base in
  /// ir::mmaOperandALayout(p.acc) (empty: A is read from aBase).
  const std::function<llvm::Value*(int64_t, int64_t)>& aReg;
  int64_t wm, wn;          // warps along M and N
  llvm::Value *wp0, *wp1;  // the warp's position along M and N
  /// Preloaded fragments (loadTensorCoreFragments), by operand; null: read
  /// at the dot.
  const std::vector<llvm::Value*>* preA = nullptr;
  const std::vector<llvm::Value*>* preB = nullptr;
  /// With `only` set (0: A, 1: B), the emitters load that operand's
  /// fragments of the whole K extent into `loaded` and emit no instruction.
  int only = -1;
  std::vector<llvm::Value*> loaded;
  /// The dot's accumulator memory (null: in registers).
  const AccumulatorMemory* accMemory = nullptr;
  /// A block-scaled dot's staged scales (TensorCoreDotPlan::scaled): the
  /// shared address of A's [M, scaleBlocks] bytes, B's following them (with
  /// scaleAtoms: this set of atoms, AccumulatorMemory::scaleSet).
  llvm::Value* scales = nullptr;

  DotEmitter(llvm::IRBuilderBase& b, llvm::Module& m, const TensorCoreDotPlan& p, llvm::Value* aBase,
             llvm::Value* bBase, llvm::Value* lane, llvm::Value* warp,
             const std::function<llvm::Value*(int64_t, int64_t)>& aReg);
  llvm::Value* i32(int64_t v) { return b.getInt32(static_cast<uint32_t>(v)); }
  /// The address of element (row + dRow, col + dCol) of staging `s` at `base`.
  llvm::Value* addr(llvm::Value* base, const DotStaging& s, llvm::Value* row, int64_t dRow, llvm::Value* col,
                    int64_t dCol) {
    return stagingAddress(b, b.getIntNTy(8 * p.elemBytes), base, s, row, dRow, col, dCol);
  }
};

/// Emits the fragment loads and matrix instructions of the whole K extent
/// through `t`'s family emitters (GpuTargetInfo::emitDot).
/// wgmma: the fragments of A, a fence, one wgmma per 64-row tile and
/// k-step of each warpgroup reading B from bBase, a commit and a wait for
/// all of them (the accumulators are final when it returns; with
/// inFlight, no wait).
/// `acc` holds the accumulator slots in plan.acc's slot order; returns the
/// result slots in the same order. The staging buffers must be written and
/// a barrier passed. `aReg` (NVIDIA; empty: A is read from aBase): the
/// register holding A's element at (row, col) relative to the thread's
/// base in ir::mmaOperandALayout(plan.acc), the A fragments being those
/// registers.
std::vector<llvm::Value*> emitTensorCoreDot(const GpuTargetInfo& t, llvm::IRBuilderBase& b, llvm::Module& m,
                                            const TensorCoreDotPlan& p, llvm::Value* aBase, llvm::Value* bBase,
                                            llvm::Value* lane, llvm::Value* warp, std::vector<llvm::Value*> acc,
                                            const std::function<llvm::Value*(int64_t, int64_t)>& aReg = {},
                                            const std::vector<llvm::Value*>* preA = nullptr,
                                            const std::vector<llvm::Value*>* preB = nullptr,
                                            const AccumulatorMemory* accMemory = nullptr,
                                            llvm::Value* scales = nullptr);

/// Reads every fragment of one operand (0: A, 1: B) of the whole K extent
/// from its staging buffer at `base` into registers, for `preA` / `preB` of
/// emitTensorCoreDot (a loop-invariant operand loaded once before the loop).
std::vector<llvm::Value*> loadTensorCoreFragments(const GpuTargetInfo& t, llvm::IRBuilderBase& b, llvm::Module& m,
                                                  const TensorCoreDotPlan& p, unsigned operand, llvm::Value* base,
                                                  llvm::Value* lane, llvm::Value* warp);

}  // namespace tessera::codegen

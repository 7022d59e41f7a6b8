// Distributed layouts of tile values over the threads of a GPU block.
//
// A program runs as one block of numWarps * warpSize threads. Every tile
// value is spread over those threads by a *blocked* layout (Triton's blocked
// encoding): per parent dim d
//   sizePerThread[d]   consecutive elements one thread holds,
//   threadsPerWarp[d]  lanes of a warp along d,
//   warpsPerBlock[d]   warps along d,
//   order              dims from fastest- to slowest-varying lane/warp id.
// A dim whose extent exceeds spt*tpw*wpb (the "block tile") repeats the
// pattern; a dim smaller than the block tile is replicated (several threads
// hold the same element). Every extent and parameter is a power of two, or
// the dim is held whole by every thread (spt = extent, tpw = wpb = 1), so
// one of extent and block tile always divides the other.
//
// A *slice* layout is the layout of a reduction result: the parent blocked
// layout with some parent dims removed; threads that differed only along a
// removed dim hold the same elements. `dims` maps each value dim to its
// parent dim (identity for a plain blocked layout).
//
// Element placement, for a value of shape S in layout L, value dim i with
// parent dim p = dims[i]:
//   pos_p      = warpPos_p * tpw_p + lanePos_p        (thread position along p)
//   base_i     = pos_p * spt_p, reduced modulo S_i when the dim is replicated
//   slot consts: rep * blockTile_p + s for rep < max(1, S_i / blockTile_p),
//                s < min(spt_p, S_i)
//   index_i    = base_i + const_i(slot)
// Slots are enumerated row-major over the per-dim const lists, so slots
// that differ only in the last dim's s are consecutive elements.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/ir/IR.h"

namespace tessera::ir {

class AxisAnalysis;

/// The matrix instruction whose accumulator registers a layout describes
/// (None: an ordinary blocked layout). See mmaLayout().
enum class MmaKind : uint8_t {
  None,
  NvMmaM16N8K16,    // NVIDIA mma.sync.m16n8k16 f16/bf16 (sm_80+), warp of 32
  AmdMfma16x16x16,  // AMD v_mfma_{f32_16x16x16{f16,bf16_1k},i32_16x16x16i8} (gfx90a, gfx942), wave64
  AmdWmma16x16x16,  // AMD v_wmma_{f32_16x16x16_{f16,bf16},i32_16x16x16_iu8} (gfx1100), wave32
  // The forms with twice the K per instruction (1-byte operands; on gfx950
  // also f16/bf16); their accumulators are placed exactly as those of their
  // 16-bit siblings.
  NvMmaM16N8K32,  // NVIDIA mma.sync.m16n8k32 s8 (sm_80+), warp of 32
  // AMD v_mfma_i32_16x16x32_i8 (gfx942, gfx950), the f32 fp8/bf8 forms
  // (gfx942) and v_mfma_f32_16x16x32_{f16,bf16} (gfx950), wave64.
  AmdMfma16x16x32,
  // AMD v_mfma_f32_32x32x8{f16,bf16_1k} (gfx90a, gfx942), wave64: where every
  // wave owns whole 32 x 32 tiles; otherwise the 16x16x16 layout (and tag).
  AmdMfma32x32x8,
  // NVIDIA wgmma.mma_async.m64nNk16 f16/bf16 (sm_90a): a warpgroup of four
  // warps computes 64 x N, each warp 16 rows placed as mma.m16n8k16's C
  // fragments of N/8 n-tiles. Its accumulator placement is NvMmaM16N8K16's
  // with every warp along M (one instruction covers the whole N), so the
  // lowering may issue either instruction on the same registers.
  NvWgmmaM64K16,
  // NVIDIA wgmma.mma_async.m64nNk32 with fp8 operands (e4m3/e5m2, sm_90a):
  // NvWgmmaM64K16's placement; where it does not fit, NvMmaM16N8K32's
  // layout and tag.
  NvWgmmaM64K32,
  // AMD v_mfma_f32_32x32x16_{f16,bf16} (gfx950), wave64: the 32x32x8 placement
  // with twice the K; where it does not fit, 16x16x32 (K a multiple of 32)
  // or else 16x16x16, as layout and tag.
  AmdMfma32x32x16,
  // AMD v_mfma_f32_16x16x128_f8f6f4 with fp8/bf8 operands (gfx950, the OCP
  // formats), wave64: 16x16x16's placement with eight times the K.
  AmdMfma16x16x128,
  // AMD v_mfma_f32_32x32x64_f8f6f4 (gfx950, fp8/bf8), wave64: the 32x32x8
  // placement where every wave owns whole 32 x 32 tiles and K is a multiple
  // of 64; elsewhere 16x16x128 (K a multiple of 128) or else 16x16x32, as
  // layout and tag.
  AmdMfma32x32x64,
  // AMD v_wmma_{f32_16x16x16_{f16,bf16,fp8_fp8,fp8_bf8,bf8_fp8,bf8_bf8},
  // i32_16x16x16_iu8} on RDNA4 (gfx1200, gfx1201), wave32: 8 operand
  // elements per lane, fed swapped as the MFMAs are (C^T), so each lane
  // holds 8 consecutive columns of one row.
  AmdWmmaGfx12,
  // NVIDIA tcgen05.mma.cta_group::1.kind::f16 (sm_100a, sm_103a): issued by
  // one thread, accumulating in tensor memory, each 64-row tile an M = 64
  // instruction (the data-path layout whose 16 rows per warp sit in the
  // warp's TMEM lanes); read back with tcgen05.ld.16x256b, whose registers
  // are mma.m16n8k16's C fragments. Its register placement is therefore
  // NvWgmmaM64K16's, with the same fallback to NvMmaM16N8K16 where it does
  // not fit.
  NvTcgen05M64K16,
  // NVIDIA tcgen05.mma.cta_group::1.kind::f8f6f4 (fp8 e4m3/e5m2 -> f32) and
  // kind::i8 (s8 -> s32; sm_100a only, Targets.def's tcgen05I8 column):
  // NvTcgen05M64K16 with twice the K; where it does not fit, NvMmaM16N8K32's
  // layout and tag.
  NvTcgen05M64K32,
};
const char* mmaName(MmaKind k);
/// The vendor family of a matrix instruction (false for None).
inline bool isNvWgmma(MmaKind k) { return k == MmaKind::NvWgmmaM64K16 || k == MmaKind::NvWgmmaM64K32; }
inline bool isNvTcgen05(MmaKind k) { return k == MmaKind::NvTcgen05M64K16 || k == MmaKind::NvTcgen05M64K32; }
/// The instructions placed as a warpgroup's: every warp along M, 16 rows
/// each of every 64-row tile (wgmma, and tcgen05's M = 64 data path).
inline bool isNvWarpgroupPlaced(MmaKind k) { return isNvWgmma(k) || isNvTcgen05(k); }
inline bool isNvMma(MmaKind k) {
  return k == MmaKind::NvMmaM16N8K16 || k == MmaKind::NvMmaM16N8K32 || isNvWarpgroupPlaced(k);
}
inline bool isAmdMfma(MmaKind k) {
  return k == MmaKind::AmdMfma16x16x16 || k == MmaKind::AmdMfma16x16x32 || k == MmaKind::AmdMfma32x32x8 ||
         k == MmaKind::AmdMfma32x32x16 || k == MmaKind::AmdMfma16x16x128 || k == MmaKind::AmdMfma32x32x64;
}
/// The instruction runs behind the program (issue, then wait): a `dot
/// {async}` of this kind can stay in flight (IR.h, "Asynchronous dots").
inline bool isAsyncMma(MmaKind k) { return isNvWarpgroupPlaced(k); }
/// The K of one instruction (the dot's K must be a multiple of it).
inline int64_t mmaK(MmaKind k) {
  return k == MmaKind::NvMmaM16N8K32 || k == MmaKind::AmdMfma16x16x32 || k == MmaKind::NvWgmmaM64K32 ||
                 k == MmaKind::NvTcgen05M64K32
             ? 32
         : k == MmaKind::AmdMfma32x32x8   ? 8
         : k == MmaKind::AmdMfma16x16x128 ? 128
         : k == MmaKind::AmdMfma32x32x64  ? 64
                                          : 16;
}
/// The M (= N) of one instruction's tile on AMD (32 for 32x32x8, 32x32x16
/// and 32x32x64, else 16).
inline int64_t amdMmaTile(MmaKind k) {
  return k == MmaKind::AmdMfma32x32x8 || k == MmaKind::AmdMfma32x32x16 || k == MmaKind::AmdMfma32x32x64 ? 32 : 16;
}

struct BlockedLayout {
  std::vector<int64_t> spt, tpw, wpb;
  std::vector<int64_t> order;  // order[0] = fastest parent dim
  /// Set on the accumulator layout of a tensor-core dot: the element
  /// placement is exactly the blocked one above (the instruction's fragment
  /// layout happens to be a blocked layout); the tag names it in dumps and
  /// tells the dot lowering that its registers are the instruction's.
  /// Not part of equality: the placement alone decides conversions.
  MmaKind mma = MmaKind::None;
  int rank() const { return static_cast<int>(spt.size()); }
  int64_t blockTile(int d) const { return spt[d] * tpw[d] * wpb[d]; }
  bool operator==(const BlockedLayout& o) const {
    return spt == o.spt && tpw == o.tpw && wpb == o.wpb && order == o.order;
  }
  std::string str() const;  // #blocked<spt=[4], tpw=[32], wpb=[4], order=[0]> or #mma<...>
};

struct Layout {
  BlockedLayout parent;
  std::vector<int> dims;  // value dim -> parent dim, increasing
  bool isSlice() const { return static_cast<int>(dims.size()) != parent.rank(); }
  bool operator==(const Layout& o) const { return parent == o.parent && dims == o.dims; }
  bool operator!=(const Layout& o) const { return !(*this == o); }
  std::string str() const;  // blocked, or #slice<dims=[..], parent=#blocked<..>>
  static Layout blocked(BlockedLayout b);
  /// The layout with value dim `i` removed (reduction along i).
  Layout sliceDim(int i) const;
  /// The layout with a value dim inserted at `a` that every thread holds
  /// whole (a new parent dim of one element per thread, one thread, one
  /// warp); its sliceDim(a) has this layout's slots.
  Layout withTrivialDim(int a) const;
};

/// Compile-time description of the slots a thread holds for one (layout,
/// shape) pair; the thread-dependent part (base) is computed at run time.
struct SlotTable {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> perDim;      // const list of each value dim
  std::vector<std::vector<int64_t>> consts;      // per slot: const of each dim
  std::map<std::vector<int64_t>, size_t> index;  // consts -> slot
  /// For each value dim: true if threads hold duplicates along it (block
  /// tile larger than the extent).
  std::vector<bool> replicated;
  /// Distinct thread positions along each value dim.
  std::vector<int64_t> distinctPos;
  size_t size() const { return consts.size(); }
};
SlotTable slotTable(const Layout& l, const std::vector<int64_t>& shape);
/// Whether `l` applies to `shape`: the same rank, and along each dim the
/// extent and the layout's block tile and elements per thread divide one
/// another (replicated or repeated, never cut).
bool compatible(const Layout& l, const std::vector<int64_t>& shape);

/// How far the default layout narrows its vector along the last dim to give
/// each element of a tile one thread. A blocked layout whose vector (spt)
/// times the block's threads exceeds the tile holds the tile on several
/// threads: each of them loads and computes every element again.
enum class VectorCap {
  /// No element on two threads whenever the tile has at least as many
  /// elements as the block has threads (narrower vectors then: a 256-element
  /// row on 256 threads takes one element per thread, not 4-wide vectors on
  /// 64 of them, held four times). A tile smaller than the block is
  /// replicated whatever the width and keeps the widest vectors: the same
  /// one access per thread (a GEMV's vector, a GEMM's bias row). The default.
  NoAvoidableCopies,
  /// Also for tiles smaller than the block: at most one element per thread
  /// (register-staged copies, which hold every copy until the LDS store).
  FewestCopies,
  /// The widest vectors, even where that leaves threads holding copies:
  /// accesses whose replicated threads stay idle and keep nothing (hardware
  /// async copies issue the fewest copies).
  WidestVectors,
};

/// Chooses the default blocked layout for `shape` with `vec` elements per
/// thread along the last (contiguous) dim, narrowed as `cap` says.
BlockedLayout defaultBlocked(const std::vector<int64_t>& shape, int64_t vec, int numWarps, int warpSize,
                             VectorCap cap = VectorCap::NoAvoidableCopies);

/// The blocked layout that coalesces accesses varying fastest along
/// `fastDim`: order[0] = fastDim (lanes, then warps, laid along it first),
/// the other dims from last to first; `vec` elements per thread (narrowed as
/// `cap` says) when fastDim is the last dim (vector accesses run along the
/// last dim only). With the default cap, elements are replicated over
/// threads only when the tile is smaller than the block. defaultBlocked is
/// the case fastDim = rank - 1.
BlockedLayout coalescedBlocked(const std::vector<int64_t>& shape, int64_t vec, int fastDim, int numWarps, int warpSize,
                               VectorCap cap = VectorCap::NoAvoidableCopies);

/// The blocked layout with `spt` elements per thread (powers of two
/// dividing the extents, or whole extents of other dims) whose lanes, then
/// warps, go along `order` (fastest first) as far as each dim has room;
/// leftover lanes and warps replicate the slowest dim. coalescedBlocked
/// is this with its own spt and order.
BlockedLayout distributeBlocked(const std::vector<int64_t>& shape, std::vector<int64_t> spt, std::vector<int64_t> order,
                                int numWarps, int warpSize);

/// The accumulator layout of matrix instruction `k` for an MxN (+= MxK * KxN)
/// dot spread over `numWarps` warps, or nullopt when the shape does not fit
/// the instruction (the dot then takes the FMA path):
///   NvMmaM16N8K16   spt=[1,2] tpw=[8,4]  : lane = 4*(row%8) + col%8/2, rows g and
///   (and K32)       g+8 of a 16x8 tile are consecutive repetitions along dim 0
///   AmdMfma16x16x16 spt=[1,4] tpw=[16,4] : lane = row%16 + 16*(col%16/4), order=[0, 1]
///   (and 16x16x32)  (the instruction computes C^T: operands swapped)
///   AmdMfma32x32x8  spt=[1,4] tpw=[32,2] : lane = row%32 + 32*(col%8/4), order=[0, 1];
///                   a 32 x 32 tile is four repetitions along dim 1 (C^T as
///                   16x16x16's); chosen where M is a multiple of 32*wm and
///                   N of 32*wn, else the 16x16x16 layout and tag
///   AmdMfma32x32x16 32x32x8's placement where it fits, else 16x16x32's where
///                   K is a multiple of 32, else 16x16x16's (layout and tag)
///   AmdMfma16x16x128 16x16x16's placement (K a multiple of 128)
///   AmdMfma32x32x64 32x32x8's placement where it fits and K is a multiple
///                   of 64, else 16x16x128's, else 16x16x32's (layout and tag)
///   AmdWmma16x16x16 spt=[1,1] tpw=[2,16] : lane = col%16 + 16*(row%2), eight
///                   repetitions along dim 0 make one 16x16 tile
///   AmdWmmaGfx12    spt=[1,8] tpw=[16,2] : lane = row%16 + 16*(col%16/8), order=[0, 1]
///                   (the instruction computes C^T: operands swapped)
///   NvWgmmaM64K16   NvMmaM16N8K16's placement with wpb=[numWarps, 1]; where
///                   the shape does not allow that (numWarps not a multiple
///                   of 4, M not a multiple of 16*numWarps, N over 256) the
///                   NvMmaM16N8K16 layout (and tag) instead
///   NvWgmmaM64K32   the same, falling back to NvMmaM16N8K32 (fp8)
///   NvTcgen05M64K16 NvWgmmaM64K16's placement and fallback
///   NvTcgen05M64K32 NvWgmmaM64K32's placement and fallback (fp8, i8)
/// with warps split wpb=[wm, wn], order=[1, 0] (MFMA, gfx12 WMMA: [0, 1]). M, N, K must be powers of two,
/// M a multiple of 16*wm, N of 8*wn (NVIDIA) or 16*wn (AMD), K of mmaK(k).
/// `chained` (the dot feeds or is fed by another dot): all warps along M
/// (wn = 1) where M allows, so each warp holds whole rows.
std::optional<BlockedLayout> mmaLayout(MmaKind k, int64_t M, int64_t N, int64_t K, int numWarps, int warpSize,
                                       bool chained = false);

/// The layout whose slots are exactly the A-operand fragments of the dot
/// whose accumulator has #mma layout `acc`, or nullopt when no blocked
/// layout is: for mma.m16n8k16 with all warps along M (wpb = [wm, 1]) it is
/// the accumulator's own placement (the f32 C fragment's (g, 2t..2t+1) and
/// (g+8, 2t..2t+1) of two adjacent n-tiles are the f16 A fragment's a0..a7
/// of one k-step), so a chained dot's result feeds the next dot from
/// registers. (MFMA/WMMA accumulators hold columns, their A operands rows.)
std::optional<BlockedLayout> mmaOperandALayout(const BlockedLayout& acc);

/// The layout of every tile value of a function (scalars, pointers and
/// buffers have none) plus the vector width of each memory op.
class LayoutAnalysis {
 public:
  /// `tensorCore(a, b, acc)`: the target's matrix instruction for a dot of
  /// an `a` by a `b` operand into an `acc` accumulator (empty / None: FMA
  /// dots only).
  LayoutAnalysis(const ir::Function& f, const AxisAnalysis& axis, int numWarps, int warpSize,
                 std::function<MmaKind(DType, DType, DType)> tensorCore = {});
  const Layout& get(const ir::Value* v) const;
  /// Whether tensor-core dot `dot` feeds or is fed by another dot.
  bool chained(const ir::Op& dot) const { return chainedDots_.count(&dot) > 0; }
  bool has(const ir::Value* v) const { return layouts_.count(v) != 0; }
  /// Elements per vector access for a load/store/copy/atomic's pointer tile:
  /// the contiguity run, alignment and 128-bit limit (1 = scalar accesses).
  int64_t vectorWidth(const ir::Op& memOp) const;
  /// Length of aligned runs along the last dim over which `mask` is one
  /// value (so one branch can guard a whole vector access).
  int64_t maskConstancy(const ir::Value* mask) const;
  /// The same along value dim `dim`.
  int64_t maskConstancy(const ir::Value* mask, int dim) const;
  /// The default layout chosen for a shape (used for free ops).
  Layout defaultFor(const std::vector<int64_t>& shape, VectorCap cap = VectorCap::NoAvoidableCopies) const;
  /// The layout that coalesces a load/store/copy/atomic's pointer tile:
  /// threads laid along the dim of largest contiguity (axis info; the last
  /// dim on ties), along the last dim the widest `vectorWidth` of the
  /// accesses of its shape, so that producers and accesses agree; with
  /// `ownWidth`, the access's own width (a store whose value is converted at
  /// the access anyway: an f32 output beside bf16 loads of the same shape
  /// would otherwise run 8 elements per thread, each instruction's lanes 32
  /// bytes apart).
  Layout accessLayout(const ir::Op& memOp, bool ownWidth = false) const;
  /// The default layout of a memory op's shape at the op's own
  /// `vectorWidth` (defaultFor takes the widest of any access of the shape).
  Layout defaultForAccess(const ir::Op& memOp, VectorCap cap = VectorCap::NoAvoidableCopies) const;
  int numWarps() const { return numWarps_; }
  int warpSize() const { return warpSize_; }

 private:
  void assign(const ir::Op& op);
  void propagateFromAccesses(ir::Block& body);
  /// Memory ops anchor layouts: the layout each of their operands is
  /// wanted in, propagated backward through the index math feeding them
  /// (elementwise ops, broadcasts, expand_dims, loop-carried values).
  std::unordered_map<const ir::Value*, Layout> wanted_;
  const Layout* wanted(const ir::Value* v) const;
  std::optional<Layout> dotLayout(const ir::Op& dot) const;
  void findChainedDots(ir::Block& body);
  /// True for values computed from free ops and scalars by elementwise
  /// ops, broadcasts and expand_dims only (offsets, masks): the lowering
  /// re-emits them in any layout.
  bool indexMath(const ir::Value* v) const;
  mutable std::unordered_map<const ir::Value*, bool> indexMath_;
  std::set<const ir::Op*> chainedDots_;
  int64_t computeVec(const ir::Op& memOp) const;
  const AxisAnalysis& axis_;
  int numWarps_, warpSize_;
  std::function<MmaKind(DType, DType, DType)> tensorCore_;
  std::unordered_map<const ir::Value*, Layout> layouts_;
  /// Loop-carried values whose layout is a first guess (a free initial
  /// value): elementwise ops prefer their other operands' layouts, and the
  /// loop then carries what its body yields (see the For case).
  std::set<const void*> weak_;
  std::map<std::vector<int64_t>, int64_t> vecForShape_;
  std::unordered_map<const ir::Op*, int64_t> vec_;
  mutable std::map<std::pair<const ir::Value*, int>, int64_t> maskConst_;
};

/// Adds `layout = "..."` to every tile-producing op of `f` (a copy meant
/// for the tile-IR dump; the attribute is ignored by every consumer).
void annotateLayouts(ir::Function& f, const LayoutAnalysis& la);

}  // namespace tessera::ir

// Tensor-core dot lowering, the part every MMA family shares (see GpuDot.h):
// the plan's common fields, the staging layouts' address arithmetic and the
// emitter every family starts from. The families' fragment layouts and
// instructions are in the vendor folders (GpuDot.h lists them).
//
// The #mma layouts (Layout.cpp) place a warp's instruction tiles on global
// rows that need not be consecutive (e.g. NVIDIA rows g and g+8 of a tile
// are rows wp*8+g and wp*8+g+8*wm of the block tile); the fragment loads
// read exactly the rows the accumulator layout says, so the product is
// right for any warp split.
#include "codegen/gpu/GpuDot.h"

#include <algorithm>

#include "tessera/support/Error.h"

namespace tessera::codegen {

namespace {
llvm::Value* c32(llvm::IRBuilderBase& b, int64_t v) { return b.getInt32(static_cast<uint32_t>(v)); }
}  // namespace

TensorCoreDotPlan planTensorCoreDot(const GpuTargetInfo& t, const TensorCoreOp& op, DType in, int64_t M, int64_t N,
                                    int64_t K, const ir::BlockedLayout& acc, int64_t kPerElem) {
  TS_ASSERT(op.kind != ir::MmaKind::None && op.kind == acc.mma, "tensor-core dot without a matching #mma layout");
  TensorCoreDotPlan p;
  p.op = op;
  p.in = p.inB = p.elemA = p.elemB = in;
  p.elemBytes = byteSize(in);
  // A packed operand (fp4, two elements a byte): the packed instruction's
  // K (TensorCoreOp::fp4PackedK) in bytes.
  TS_ASSERT(kPerElem == 1 || (kPerElem == 2 && op.fp4PackedK > 0), "packed operands of an instruction without them");
  p.kPerElem = kPerElem;
  p.kStep = ir::mmaK(op.kind) * (kPerElem == 2 ? op.fp4PackedK : 1) / kPerElem;
  TS_ASSERT((p.elemBytes == 1 || p.elemBytes == 2) && K % p.kStep == 0, "tensor-core dot: element size or K");
  p.M = M;
  p.N = N;
  p.K = K;
  p.acc = acc;
  t.planDotStaging(p);
  p.aBytes = (p.a.bytes() + 15) & ~uint64_t{15};
  return p;
}

llvm::Value* stagedRow(llvm::IRBuilderBase& b, const DotStaging& s, llvm::Value* row) {
  if (!s.rowGroupWarps) return row;
  // g + 8w + 8W h + 16W (T p + t) -> g + 8h + 16t + 16T w + 16TW p (W, T
  // powers of two).
  const int64_t W = s.rowGroupWarps, T = s.rowGroupTiles;
  int lw = 0, lt = 0;
  while ((int64_t{1} << lw) < W) ++lw;
  while ((int64_t{1} << lt) < T) ++lt;
  TS_ASSERT((int64_t{1} << lw) == W && (int64_t{1} << lt) == T && s.rows % (16 * W * T) == 0, "wgmma A rows");
  llvm::Value* g = b.CreateAnd(row, c32(b, 7));
  llvm::Value* w = b.CreateAnd(b.CreateLShr(row, c32(b, 3)), c32(b, W - 1));
  llvm::Value* h = b.CreateAnd(b.CreateLShr(row, c32(b, 3 + lw)), c32(b, 1));
  llvm::Value* phys;
  if (T == 1) {
    llvm::Value* j = b.CreateAnd(row, c32(b, ~((int64_t{16} << lw) - 1)));
    phys = b.CreateOr(b.CreateOr(g, b.CreateShl(h, c32(b, 3))), b.CreateOr(b.CreateShl(w, c32(b, 4)), j));
  } else {
    llvm::Value* j = b.CreateLShr(row, c32(b, 4 + lw));
    llvm::Value* t = b.CreateShl(b.CreateAnd(j, c32(b, T - 1)), c32(b, 4));
    llvm::Value* p = b.CreateShl(b.CreateLShr(j, c32(b, lt)), c32(b, 4 + lt + lw));
    phys = b.CreateOr(b.CreateOr(g, b.CreateShl(h, c32(b, 3))),
                      b.CreateOr(b.CreateOr(t, b.CreateShl(w, c32(b, 4 + lt))), p));
  }
  return phys;
}

llvm::Value* stagingIndex(llvm::IRBuilderBase& b, const DotStaging& s, llvm::Value* row, llvm::Value* col) {
  if (s.mfmaColWarps) {
    // x + 8w + 8W j -> x + 8(j % 4) + 32w + 32W(j / 4) (W a power of two).
    const int64_t W = s.mfmaColWarps;
    int lw = 0;
    while ((int64_t{1} << lw) < W) ++lw;
    TS_ASSERT((int64_t{1} << lw) == W && s.rows % (32 * W) == 0, "MFMA 32x32 B rows");
    llvm::Value* x = b.CreateAnd(row, c32(b, 7));
    llvm::Value* w = b.CreateAnd(b.CreateLShr(row, c32(b, 3)), c32(b, W - 1));
    llvm::Value* j = b.CreateLShr(row, c32(b, 3 + lw));
    llvm::Value* phys =
        b.CreateOr(b.CreateOr(x, b.CreateShl(b.CreateAnd(j, c32(b, 3)), c32(b, 3))),
                   b.CreateOr(b.CreateShl(w, c32(b, 5)), b.CreateShl(b.CreateLShr(j, c32(b, 2)), c32(b, 5 + lw))));
    DotStaging t = s;
    t.mfmaColWarps = 0;
    return stagingIndex(b, t, phys, col);
  }
  if (s.rowGroupWarps) {
    DotStaging t = s;
    t.rowGroupWarps = 0;
    return stagingIndex(b, t, stagedRow(b, s, row), col);
  }
  if (s.blockCols) {
    // Block col / blockCols of rows x blockCols elements, then the column
    // within it (stagingIndex of one block).
    TS_ASSERT(
        s.swizzle && s.stride == s.blockCols && (s.blockCols & (s.blockCols - 1)) == 0 && s.cols % s.blockCols == 0,
        "column blocks of a swizzled staging buffer");
    DotStaging one = s;
    one.blockCols = 0;
    one.cols = s.blockCols;
    llvm::Value* blk = b.CreateUDiv(col, c32(b, s.blockCols));
    llvm::Value* in = stagingIndex(b, one, row, b.CreateAnd(col, c32(b, s.blockCols - 1)));
    return b.CreateAdd(b.CreateMul(blk, c32(b, s.rows * s.blockCols)), in);
  }
  // Indices into a staging buffer are small and non-negative (nuw nsw: see
  // Lower::bases).
  llvm::Value* rowOff = b.CreateMul(row, c32(b, s.stride), "", true, true);
  if (!s.swizzle) return b.CreateAdd(rowOff, col, "", true, true);
  // Unit c (16 bytes: a chunk; MFMA: 8) of row r is stored at unit c ^ f(r).
  // With R units per row and U = 128 / unit bytes units per 128-byte bank
  // cycle, U consecutive rows (U-aligned, as ldmatrix reads eight 16-byte
  // rows) at one unit must land in U different slots of the cycle: slot =
  // (r * R + c') % U. R >= U: f(r) = r % U. R < U: U/R rows share a 128-byte
  // line and differ in r % (U/R) already; f(r) = (r / (U/R)) % R separates
  // the R lines. (Triton's swizzled shared layout with vec = unit,
  // perPhase = max(1, U/R), maxPhase = min(R, U).)
  const int64_t ue = s.unitElems(), U = s.swizzlePeriod();
  int64_t R = s.cols / ue;
  TS_ASSERT(s.cols % ue == 0 && R >= 1 && (R & (R - 1)) == 0 && s.stride == s.cols && (ue & (ue - 1)) == 0,
            "swizzled staging needs power-of-two rows of power-of-two units");
  llvm::Value* f;
  if (R >= U) {
    f = b.CreateAnd(row, c32(b, U - 1));
  } else {
    int64_t P = U / R;
    f = b.CreateAnd(b.CreateUDiv(row, c32(b, P)), c32(b, R - 1));
  }
  int64_t shift = 0;
  while ((int64_t{1} << shift) < ue) ++shift;
  llvm::Value* unit = b.CreateXor(b.CreateLShr(col, c32(b, shift)), f);
  return b.CreateAdd(rowOff, b.CreateAdd(b.CreateShl(unit, c32(b, shift)), b.CreateAnd(col, c32(b, ue - 1))));
}

std::optional<int64_t> stagingOffset(const DotStaging& s, int64_t dRow, int64_t dCol) {
  if (s.rowGroupWarps ? dRow % (16 * s.rowGroupWarps * s.rowGroupTiles) != 0
                      : s.swizzle && dRow % s.swizzlePeriod() != 0)
    return std::nullopt;
  if (s.mfmaColWarps && dRow % (32 * s.mfmaColWarps) != 0) return std::nullopt;
  if (s.blockCols) {
    if (dCol % s.blockCols != 0) return std::nullopt;
    return (dCol / s.blockCols) * s.rows * s.blockCols + dRow * s.stride;
  }
  if (s.swizzle && dCol != 0) return std::nullopt;
  return dRow * s.stride + dCol;
}

llvm::Value* stagingAddress(llvm::IRBuilderBase& b, llvm::Type* elemTy, llvm::Value* base, const DotStaging& s,
                            llvm::Value* row, int64_t dRow, llvm::Value* col, int64_t dCol) {
  const std::optional<int64_t> off = stagingOffset(s, dRow, dCol);
  // A swizzled row's units move with the column, but the permutation
  // repeats every swizzlePeriod() rows: rows that far apart are the same
  // address plus a constant, so reads of one column in several tiles share
  // a register.
  if (!off && s.swizzle && !s.blockCols && !s.rowGroupWarps && !s.mfmaColWarps && dRow % s.swizzlePeriod() == 0 &&
      dCol != 0) {
    llvm::Value* p =
        b.CreateInBoundsGEP(elemTy, base, stagingIndex(b, s, row, b.CreateAdd(col, c32(b, dCol), "", true, true)));
    return dRow ? b.CreateInBoundsGEP(elemTy, p, c32(b, dRow * s.stride)) : p;
  }
  if (!off)
    return b.CreateInBoundsGEP(elemTy, base,
                               stagingIndex(b, s, dRow ? b.CreateAdd(row, c32(b, dRow), "", true, true) : row,
                                            dCol ? b.CreateAdd(col, c32(b, dCol), "", true, true) : col));
  llvm::Value* p = b.CreateInBoundsGEP(elemTy, base, stagingIndex(b, s, row, col));
  return *off ? b.CreateInBoundsGEP(elemTy, p, c32(b, *off)) : p;
}

DotEmitter::DotEmitter(llvm::IRBuilderBase& bb, llvm::Module& mm, const TensorCoreDotPlan& pp, llvm::Value* a,
                       llvm::Value* bv, llvm::Value* l, llvm::Value* w,
                       const std::function<llvm::Value*(int64_t, int64_t)>& ar)
    : b(bb), m(mm), p(pp), aBase(a), bBase(bv), lane(l), warp(w), aReg(ar), wm(pp.acc.wpb[0]), wn(pp.acc.wpb[1]) {
  // Consecutive warps go along the layout's first dim of `order`: N for
  // order = [1, 0], M for [0, 1] (MFMA; Layout.h).
  if (pp.acc.order[0] == 1) {
    wp1 = b.CreateURem(warp, c32(b, wn));
    wp0 = b.CreateURem(b.CreateUDiv(warp, c32(b, wn)), c32(b, wm));
  } else {
    wp0 = b.CreateURem(warp, c32(b, wm));
    wp1 = b.CreateURem(b.CreateUDiv(warp, c32(b, wm)), c32(b, wn));
  }
}

std::vector<llvm::Value*> emitTensorCoreDot(const GpuTargetInfo& t, llvm::IRBuilderBase& b, llvm::Module& m,
                                            const TensorCoreDotPlan& p, llvm::Value* aBase, llvm::Value* bBase,
                                            llvm::Value* lane, llvm::Value* warp, std::vector<llvm::Value*> acc,
                                            const std::function<llvm::Value*(int64_t, int64_t)>& aReg,
                                            const std::vector<llvm::Value*>* preA,
                                            const std::vector<llvm::Value*>* preB, const AccumulatorMemory* accMemory,
                                            llvm::Value* scales) {
  TS_ASSERT(p.scaled == (scales != nullptr), "a block-scaled dot without its scales, or scales without one");
  DotEmitter e(b, m, p, aBase, bBase, lane, warp, aReg);
  e.preA = preA;
  e.preB = preB;
  e.accMemory = accMemory;
  e.scales = scales;
  return t.emitDot(e, std::move(acc));
}

std::vector<llvm::Value*> loadTensorCoreFragments(const GpuTargetInfo& t, llvm::IRBuilderBase& b, llvm::Module& m,
                                                  const TensorCoreDotPlan& p, unsigned operand, llvm::Value* base,
                                                  llvm::Value* lane, llvm::Value* warp) {
  const std::function<llvm::Value*(int64_t, int64_t)> none;
  DotEmitter e(b, m, p, operand == 0 ? base : nullptr, operand == 1 ? base : nullptr, lane, warp, none);
  e.only = static_cast<int>(operand);
  t.emitDot(e, {});
  return std::move(e.loaded);
}

llvm::Value* GpuTargetInfo::scaleStagingOffset(llvm::IRBuilderBase& b, const TensorCoreDotPlan& p, unsigned operand,
                                               llvm::Value* row, llvm::Value* block) const {
  TS_ASSERT(!p.scaleAtoms, "scales in atoms on a target without them");
  llvm::Value* at = b.CreateAdd(b.CreateMul(row, c32(b, p.scaleBlocks)), block);
  return operand ? b.CreateAdd(at, c32(b, p.M * p.scaleBlocks)) : at;
}

}  // namespace tessera::codegen

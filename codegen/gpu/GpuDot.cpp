// Tensor-core dot lowering (see GpuDot.h). Fragment layouts used here:
//
// NVIDIA mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
// floating point type"), g = lane / 4, t = lane % 4:
//   A 16x16: a{0,1} (g, 2t+{0,1}), a{2,3} (g+8, 2t+{0,1}), a{4,5} (g, 2t+8+{0,1}),
//            a{6,7} (g+8, 2t+8+{0,1})                        (row, k)
//   B 16x8:  b{0,1} (2t+{0,1}, g), b{2,3} (2t+8+{0,1}, g)   (k, col)
//   C/D:     c{0,1} (g, 2t+{0,1}), c{2,3} (g+8, 2t+{0,1})
// ldmatrix.m8n8.x4: lane i gives the address of row i%8 of matrix i/8; each
// lane receives, per matrix, the two elements (i/4, 2(i%4)+{0,1}); .trans
// delivers the transposed matrix, (2(i%4)+{0,1}, i/4). Loading A's four 8x8
// quadrants (rows 0-7 | 8-15) x (k 0-7 | 8-15) in the order above gives
// a0..a7; loading B's (k 0-7, k 8-15) with .trans gives b0..b3.
//
// NVIDIA mma.m16n8k32 .s8 and .e4m3/.e5m2 (PTX ISA, "Matrix Fragments for
// mma.m16n8k32"), four 8-bit elements per 32-bit register, lowest k in the
// low byte (the f32 C/D of the fp8 forms in the s32 places):
//   A 16x32: a0 (g, 4t..4t+3), a1 (g+8, 4t..), a2 (g, 16+4t..), a3 (g+8, 16+4t..)
//   B 32x8:  b0 (k 4t..4t+3, col g), b1 (k 16+4t.., col g)
//   C/D (s32): as m16n8k16's f32 C/D.
// ldmatrix without .trans hands lane l the 4 bytes 4(l%4).. of row l/4 of
// each 8x16-byte matrix: A's quadrants (rows 0-7 | 8-15) x (k 0-15 | 16-31)
// give a0..a3 exactly as for f16 (a chunk is 16 k instead of 8). B's
// register needs 4 consecutive k of one column, which .trans cannot give
// (it moves 16-bit elements: a lane would get k pairs of two columns), so
// B is staged N x K and read without .trans: matrices (n 0-7) x (k 0-15 |
// 16-31) give b0, b1.
//
// AMD v_mfma_f32_16x16x16f16 (wave64), i = lane % 16, q = lane / 16:
//   A: lane holds (row i, k 4q..4q+3); B: (k 4q..4q+3, col i);
//   D: register r holds (row 4q + r, col i).
//   Tessera feeds it B^T as A and A^T as B (both fragments are 4
//   consecutive k of one row of a K-contiguous staging buffer), so D is
//   C^T: register r holds C(row i, col 4q + r), the #mma layout
//   spt=[1,4], tpw=[16,4], order=[0,1].
// AMD v_mfma_i32_16x16x16i8 (gfx90a): as 16x16x16f16, 4 i8 of k 4q..4q+3
//   in one register; v_mfma_i32_16x16x32_i8 (gfx942): 8 i8 of k 8q..8q+7 in
//   two registers (an i64); D (i32) as the f32 D. Swapped the same way.
//   v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} (gfx942): the same with 8 fp8
//   codes and an f32 D; swapped, so the instruction's first format is B's.
// AMD v_mfma_f32_32x32x8f16 (wave64), i = lane % 32, q = lane / 32:
//   A: lane holds (row i, k 4q..4q+3); B: (k 4q..4q+3, col i); D: register
//   r holds (row 8(r/4) + 4q + r%4, col i). Swapped as above: register r
//   holds C(row i, col 8(r/4) + 4q + r%4), four repetitions of the #mma
//   layout spt=[1,4], tpw=[32,2] along the columns.
// AMD v_wmma_f32_16x16x16_f16 (wave32), i = lane % 16, h = lane / 16:
//   A: lane holds (row i, k 0..15); B: (k 0..15, col i) (lanes 16-31 repeat
//   lanes 0-15); D (f32): register r holds (row 2r + h, col i).
//   v_wmma_i32_16x16x16_iu8: the same with 16 i8 in four registers and an
//   i32 D; the A_sign / B_sign flags set (signed operands), clamp off.
//
// The #mma layouts (Layout.cpp) place a warp's instruction tiles on global
// rows that need not be consecutive (e.g. NVIDIA rows g and g+8 of a tile
// are rows wp*8+g and wp*8+g+8*wm of the block tile); the fragment loads
// below read exactly the rows the accumulator layout says, so the product
// is right for any warp split.
#include "codegen/gpu/GpuDot.h"

#include <algorithm>
#include <array>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "codegen/nvptx/NVPTXWgmma.h"
#include "tessera/support/Error.h"

namespace tessera::codegen {

namespace {
llvm::Value* c32(llvm::IRBuilderBase& b, int64_t v) { return b.getInt32(static_cast<uint32_t>(v)); }
}  // namespace

int64_t amdPadBytes(ir::MmaKind k) { return k == ir::MmaKind::AmdWmma16x16x16 ? 16 : 8; }

TensorCoreDotPlan planTensorCoreDot(const TensorCoreOp& op, DType in, int64_t M, int64_t N, int64_t K,
                                    const ir::BlockedLayout& acc) {
  TS_ASSERT(op.kind != ir::MmaKind::None && op.kind == acc.mma, "tensor-core dot without a matching #mma layout");
  TensorCoreDotPlan p;
  p.op = op;
  p.in = in;
  p.inB = in;
  p.elemBytes = byteSize(in);
  p.kStep = ir::mmaK(op.kind);
  TS_ASSERT((p.elemBytes == 1 || p.elemBytes == 2) && K % p.kStep == 0, "tensor-core dot: element size or K");
  p.M = M;
  p.N = N;
  p.K = K;
  p.acc = acc;
  const unsigned eb = p.elemBytes;
  const int64_t ce = 16 / static_cast<int64_t>(eb);  // elements per 16-byte chunk
  if (ir::isNvMma(op.kind)) {
    // Rows padded by one 16-byte chunk: the eight 16-byte rows one
    // ldmatrix phase reads start 16 (mod 128) bytes apart for any row of
    // >= 32 bytes (an odd number of chunks per padded row), so they hit
    // eight different 4-bank groups, and every element's address is affine
    // in (row, col): the staging stores and fragment reads of a thread are
    // one base register plus immediates (the XOR swizzle of the shared
    // slots, nvidiaSlotStaging, gives each a register of its own, held
    // across the loop).
    p.a = {M, K, K + ce, false, ce, eb};
    if (eb == 1) {
      // 1-byte B: N x K (see the fragment table above: no .trans).
      p.b = {N, K, K + ce, false, ce, eb};
      p.bTransposed = true;
    } else {
      p.b = {K, N, N + ce, false, ce, eb};
    }
  } else {
    // Pad rows by 8 bytes: 16 lanes reading 4 or 8 bytes at the same column
    // of 16 consecutive rows then hit 16 distinct banks (bank pairs). WMMA
    // lanes read 32 bytes each (a row of 16): rows padded by 16 bytes keep
    // them 16-byte aligned, so the reads are 128-bit (ds_load_b128), and
    // the 16 rows of one read fall into 16 distinct 4-bank groups.
    const int64_t pad = amdPadBytes(op.kind) / static_cast<int64_t>(eb);
    p.a = {M, K, K + pad, false, pad, eb};
    // Written transposed: runs along K of the copy's register tile
    // (transposedCopyLayout), aligned by the padded stride (bufferRunWidth).
    p.b = {N, K, K + pad, false, 1, eb};
    p.bTransposed = true;
    if (op.kind == ir::MmaKind::AmdMfma32x32x8 && acc.wpb[1] > 1) p.b.mfmaColWarps = acc.wpb[1];
  }
  p.aBytes = (p.a.bytes() + 15) & ~uint64_t{15};
  return p;
}

bool swizzleAmdStaging(TensorCoreDotPlan& p) {
  // The unit: what one lane reads of a row per instruction, up to a chunk
  // (WMMA 32 bytes: two chunks; MFMA 16x16: 8 bytes).
  int64_t unit;
  if (p.op.kind == ir::MmaKind::AmdWmma16x16x16)
    unit = 16;
  else if (p.op.kind == ir::MmaKind::AmdMfma16x16x16 || p.op.kind == ir::MmaKind::AmdMfma16x16x32)
    unit = p.kStep * 16 / 64 * p.elemBytes;  // 4 lane groups along K
  else if (p.op.kind == ir::MmaKind::AmdMfma32x32x8)
    unit = p.kStep * 32 / 64 * p.elemBytes;  // 2 lane groups along K
  else
    return false;
  // MFMA 32x32x8's B rows stay permuted (mfmaColWarps); the swizzle applies
  // to the permuted rows (stagingIndex).
  const int64_t colWarps = p.b.mfmaColWarps;
  const int64_t ue = unit / static_cast<int64_t>(p.elemBytes), R = p.K / ue;
  if (unit != 8 && unit != 16) return false;
  if (p.K % ue != 0 || R < 2 || (R & (R - 1)) != 0) return false;
  p.a = {p.M, p.K, p.K, true, ue, p.elemBytes};
  p.b = {p.N, p.K, p.K, true, 1, p.elemBytes};
  p.b.mfmaColWarps = colWarps;
  p.a.swizzleUnit = p.b.swizzleUnit = unit;
  p.aBytes = (p.a.bytes() + 15) & ~uint64_t{15};
  return true;
}

DotStaging nvidiaSlotStaging(int64_t rows, int64_t cols, unsigned elemBytes) {
  const int64_t ce = 16 / static_cast<int64_t>(elemBytes);
  return {rows, cols, cols, true, ce, elemBytes};
}

DotStaging wgmmaBStaging(int64_t K, int64_t N, unsigned elemBytes) {
  // Rows of at most 128 bytes (the widest swizzle), column blocks beyond.
  const int64_t maxRow = 128 / static_cast<int64_t>(elemBytes), rowElems = std::min<int64_t>(N, maxRow);
  return {K, N, rowElems, true, 16 / static_cast<int64_t>(elemBytes), elemBytes, N > maxRow ? maxRow : 0};
}

uint64_t wgmmaBAlign(const DotStaging& s) { return static_cast<uint64_t>(8 * s.rowBytes()); }

DotStaging wgmmaAStaging(int64_t M, int64_t K, int64_t warps) {
  DotStaging s = wgmmaBStaging(M, K);
  s.rowGroupWarps = warps;
  return s;
}

void useWgmmaSharedA(TensorCoreDotPlan& p) {
  TS_ASSERT(p.wgmma && p.M % (16 * p.acc.wpb[0]) == 0, "wgmma A from shared memory without a wgmma plan");
  p.a = wgmmaAStaging(p.M, p.K, p.acc.wpb[0]);
  p.wgmmaSharedA = true;
  p.aAlign = wgmmaBAlign(p.a);
  p.aBytes = p.a.bytes();
}

void useWgmma(TensorCoreDotPlan& p, bool kMajor) {
  TS_ASSERT(ir::isNvWgmma(p.op.kind) && (p.elemBytes == 2 || (p.elemBytes == 1 && kMajor)) && p.acc.wpb[1] == 1 &&
                p.N <= 256 && p.N >= 16,
            "wgmma plan of a dot that does not fit it");
  // K-major: one swizzled row of K per n (blocks of 128 bytes beyond
  // that): wgmmaBStaging's layout of B^T. fp8 is K-major only.
  p.b = kMajor ? wgmmaBStaging(p.N, p.K, p.elemBytes) : wgmmaBStaging(p.K, p.N, p.elemBytes);
  p.bTransposed = kMajor;
  p.wgmma = true;
  p.wgmmaTransB = !kMajor;
  p.bAlign = wgmmaBAlign(p.b);
}

void useMmaSync(TensorCoreDotPlan& p) {
  if (p.op.kind == ir::MmaKind::NvWgmmaM64K16) p.op.kind = ir::MmaKind::NvMmaM16N8K16;
  if (p.op.kind == ir::MmaKind::NvWgmmaM64K32) p.op.kind = ir::MmaKind::NvMmaM16N8K32;
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
    // g + 8w + 8W h + 16W j -> g + 8h + 16w + 16W j (W a power of two).
    const int64_t W = s.rowGroupWarps;
    int lw = 0;
    while ((int64_t{1} << lw) < W) ++lw;
    TS_ASSERT((int64_t{1} << lw) == W && s.rows % (16 * W) == 0, "wgmma A rows");
    llvm::Value* g = b.CreateAnd(row, c32(b, 7));
    llvm::Value* w = b.CreateAnd(b.CreateLShr(row, c32(b, 3)), c32(b, W - 1));
    llvm::Value* h = b.CreateAnd(b.CreateLShr(row, c32(b, 3 + lw)), c32(b, 1));
    llvm::Value* j = b.CreateAnd(row, c32(b, ~((int64_t{16} << lw) - 1)));
    llvm::Value* phys = b.CreateOr(b.CreateOr(g, b.CreateShl(h, c32(b, 3))), b.CreateOr(b.CreateShl(w, c32(b, 4)), j));
    DotStaging t = s;
    t.rowGroupWarps = 0;
    return stagingIndex(b, t, phys, col);
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
  if (s.rowGroupWarps ? dRow % (16 * s.rowGroupWarps) != 0 : s.swizzle && dRow % s.swizzlePeriod() != 0)
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

namespace {

struct Emitter {
  llvm::IRBuilderBase& b;
  llvm::Module& m;
  const TensorCoreDotPlan& p;
  llvm::Value *aBase, *bBase, *lane, *warp;
  const std::function<llvm::Value*(int64_t, int64_t)>& aReg;
  int64_t wm, wn;
  llvm::Value *wp0, *wp1;  // the warp's position along M and N

  Emitter(llvm::IRBuilderBase& bb, llvm::Module& mm, const TensorCoreDotPlan& pp, llvm::Value* a, llvm::Value* bv,
          llvm::Value* l, llvm::Value* w, const std::function<llvm::Value*(int64_t, int64_t)>& ar)
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
  llvm::Value* i32(int64_t v) { return c32(b, v); }
  llvm::Value* add(llvm::Value* x, int64_t c) { return c ? b.CreateAdd(x, i32(c), "", true, true) : x; }
  llvm::Value* addr(llvm::Value* base, const DotStaging& s, llvm::Value* row, int64_t dRow, llvm::Value* col,
                    int64_t dCol) {
    return stagingAddress(b, b.getIntNTy(8 * p.elemBytes), base, s, row, dRow, col, dCol);
  }
  /// The register type of one element of a tile (A from registers).
  llvm::Type* tileElemTy() { return p.in == DType::F16 ? b.getHalfTy() : b.getBFloatTy(); }

  // Preloaded fragments (loadTensorCoreFragments), by operand; empty: read
  // at the dot.
  const std::vector<llvm::Value*>* preA = nullptr;
  const std::vector<llvm::Value*>* preB = nullptr;
  // With `only` set, the emitters load that operand's fragments of the
  // whole K extent into `loaded` and emit no instruction.
  int only = -1;
  std::vector<llvm::Value*> loaded;

  // ---- NVIDIA ---------------------------------------------------------------
  // Fragments, flattened: A (ks * mT + mi) * 4 + q, B (ks * nT + ni) * 2 + q.
  // m16n8k16 and m16n8k32 alike: every fragment register is 4 bytes of one
  // row of an 8 x 16-byte matrix, a k-step is two such matrices wide (ce
  // elements each).
  std::vector<llvm::Value*> nvidia(std::vector<llvm::Value*> acc) {
    const int64_t mT = p.M / (16 * wm), nT = p.N / (8 * wn), kS = p.K / p.kStep;
    // wgmma: only A's fragments are loaded here (collected in `loaded`),
    // then handed to the warpgroup instruction (wgmmaDot).
    if (p.wgmma && only < 0) {
      TS_ASSERT(wn == 1, "wgmma with warps along N");
      if (p.wgmmaSharedA) return wgmmaDot({}, std::move(acc), mT, nT, kS);
      only = 0;
      nvidia({});
      only = -1;
      std::vector<llvm::Value*> aFrags = std::move(loaded);
      loaded.clear();
      return wgmmaDot(std::move(aFrags), std::move(acc), mT, nT, kS);
    }
    const int64_t ce = 16 / static_cast<int64_t>(p.elemBytes);
    TS_ASSERT(p.kStep == 2 * ce && (p.elemBytes == 2 || p.bTransposed), "mma operand staging");
    TS_ASSERT(only >= 0 || static_cast<int64_t>(acc.size()) == mT * nT * 4, "mma accumulator slot count");
    llvm::Type* ptrTy = llvm::PointerType::get(b.getContext(), 3);  // shared
    llvm::Function* ldA = llvm::Intrinsic::getOrInsertDeclaration(&m, p.op.ldA, {ptrTy});
    auto decl = [&](llvm::Intrinsic::ID id) {
      return id == llvm::Intrinsic::not_intrinsic ? nullptr : llvm::Intrinsic::getOrInsertDeclaration(&m, id, {ptrTy});
    };
    llvm::Function* ldA2 = decl(p.op.ldAx2);
    llvm::Function* ldB4 = decl(p.op.ldBx4);
    llvm::Function* ldB2 = decl(p.op.ldBx2);
    llvm::Function* mma = llvm::Intrinsic::getOrInsertDeclaration(&m, p.op.mma);
    llvm::Value* j = b.CreateLShr(lane, i32(3));  // which 8x8 matrix this lane addresses
    llvm::Value* r = b.CreateAnd(lane, i32(7));   // which row of it
    llvm::Value* jLo = b.CreateAnd(j, i32(1));
    llvm::Value* jHi = b.CreateLShr(j, i32(1));
    // A rows: matrices 0/2 are fragment rows 0-7, 1/3 rows 8-15 (the next
    // repetition along M, 8*wm rows further); matrices 2/3 are k + 8.
    llvm::Value* aRow0 = b.CreateAdd(b.CreateAdd(b.CreateMul(wp0, i32(8)), r), b.CreateMul(jLo, i32(8 * wm)));
    llvm::Value* aCol0 = b.CreateMul(jHi, i32(ce));
    // B rows (k): matrices 0/2 are k 0-7, 1/3 k 8-15; matrices 2/3 the next
    // n-tile (8*wn columns further).
    llvm::Value* bRow0 = b.CreateAdd(r, b.CreateMul(jLo, i32(8)));
    llvm::Value* bCol0 = b.CreateAdd(b.CreateMul(wp1, i32(8)), b.CreateMul(jHi, i32(8 * wn)));
    llvm::Value* bCol2 = b.CreateMul(wp1, i32(8));
    // B stored N x K (bTransposed): ldmatrix without .trans, matrix j of
    // lane l = (n-tile + j/2, k half j%2), row r = n; .x2 (the last of an
    // odd number of n-tiles): matrices 0/1 only.
    llvm::Value* btRow2 = b.CreateAdd(b.CreateMul(wp1, i32(8)), r);
    llvm::Value* btRow0 = b.CreateAdd(btRow2, b.CreateMul(jHi, i32(8 * wn)));
    llvm::Value* btCol0 = b.CreateMul(jLo, i32(ce));
    auto slot = [&](int64_t mi, int64_t ni, int64_t h, int64_t s) { return (2 * mi + h) * (2 * nT) + ni * 2 + s; };
    bool f16 = p.in == DType::F16;
    llvm::Type* h2 = llvm::FixedVectorType::get(b.getHalfTy(), 2);
    auto operand = [&](llvm::Value* x) { return f16 ? b.CreateBitCast(x, h2) : x; };
    for (int64_t ks = 0; ks < kS; ++ks) {
      std::vector<std::array<llvm::Value*, 4>> A(static_cast<size_t>(mT));
      std::vector<std::array<llvm::Value*, 2>> B(static_cast<size_t>(nT));
      for (int64_t mi = 0; mi < mT && only != 1; ++mi) {
        if (aReg) {
          // a{2q, 2q+1}: row + 8 wm for odd q, k + 8 for q >= 2, as ldmatrix
          // would deliver them (see the fragment table above).
          for (unsigned q = 0; q < 4; ++q) {
            int64_t row = mi * 16 * wm + (q % 2) * 8 * wm, col = ks * 16 + (q / 2) * 8;
            llvm::Value* x = llvm::PoisonValue::get(llvm::FixedVectorType::get(tileElemTy(), 2));
            x = b.CreateInsertElement(x, aReg(row, col), uint64_t{0});
            x = b.CreateInsertElement(x, aReg(row, col + 1), uint64_t{1});
            A[mi][q] = f16 ? x : b.CreateBitCast(x, b.getInt32Ty());
          }
          continue;
        }
        if (preA) {
          for (unsigned q = 0; q < 4; ++q) A[mi][q] = (*preA)[static_cast<size_t>((ks * mT + mi) * 4 + q)];
          continue;
        }
        llvm::Value* ld = b.CreateCall(ldA, {addr(aBase, p.a, aRow0, mi * 16 * wm, aCol0, ks * p.kStep)});
        for (unsigned q = 0; q < 4; ++q) A[mi][q] = operand(b.CreateExtractValue(ld, q));
      }
      for (int64_t ni = 0; ni < nT && only != 0; ni += 2) {
        if (preB) {
          for (int64_t n = ni; n < std::min(ni + 2, nT); ++n)
            for (unsigned q = 0; q < 2; ++q) B[n][q] = (*preB)[static_cast<size_t>((ks * nT + n) * 2 + q)];
        } else if (p.bTransposed && ni + 1 < nT) {
          llvm::Value* ld = b.CreateCall(ldA, {addr(bBase, p.b, btRow0, ni * 8 * wn, btCol0, ks * p.kStep)});
          for (unsigned q = 0; q < 4; ++q) B[ni + q / 2][q % 2] = operand(b.CreateExtractValue(ld, q));
        } else if (p.bTransposed) {
          TS_ASSERT(ldA2, "mma: no ldmatrix .x2 for an N x K B operand");
          llvm::Value* ld = b.CreateCall(ldA2, {addr(bBase, p.b, btRow2, ni * 8 * wn, btCol0, ks * p.kStep)});
          for (unsigned q = 0; q < 2; ++q) B[ni][q] = operand(b.CreateExtractValue(ld, q));
        } else if (ni + 1 < nT) {
          llvm::Value* ld = b.CreateCall(ldB4, {addr(bBase, p.b, bRow0, ks * 16, bCol0, ni * 8 * wn)});
          for (unsigned q = 0; q < 4; ++q) B[ni + q / 2][q % 2] = operand(b.CreateExtractValue(ld, q));
        } else {
          // .x2: lanes 0-15 address k 0-7 / 8-15; lanes 16-31 repeat them
          // (their addresses are not used).
          llvm::Value* ld = b.CreateCall(ldB2, {addr(bBase, p.b, bRow0, ks * 16, bCol2, ni * 8 * wn)});
          for (unsigned q = 0; q < 2; ++q) B[ni][q] = operand(b.CreateExtractValue(ld, q));
        }
      }
      if (only == 0)
        for (auto& f : A) loaded.insert(loaded.end(), f.begin(), f.end());
      if (only == 1)
        for (auto& f : B) loaded.insert(loaded.end(), f.begin(), f.end());
      if (only >= 0) continue;
      for (int64_t mi = 0; mi < mT; ++mi)
        for (int64_t ni = 0; ni < nT; ++ni) {
          std::array<int64_t, 4> s = {slot(mi, ni, 0, 0), slot(mi, ni, 0, 1), slot(mi, ni, 1, 0), slot(mi, ni, 1, 1)};
          llvm::Value* d = b.CreateCall(mma, {A[mi][0], A[mi][1], A[mi][2], A[mi][3], B[ni][0], B[ni][1], acc[s[0]],
                                              acc[s[1]], acc[s[2]], acc[s[3]]});
          for (unsigned q = 0; q < 4; ++q) acc[s[q]] = b.CreateExtractValue(d, q);
        }
    }
    return acc;
  }

  // wgmma over A fragments `aFrags` ((ks * mT + mi) * 4 + q, as loaded for
  // mma.sync) and the accumulator slots; B at bBase (useWgmma's layout).
  std::vector<llvm::Value*> wgmmaDot(std::vector<llvm::Value*> aFrags, std::vector<llvm::Value*> acc, int64_t mT,
                                     int64_t nT, int64_t kS) {
    TS_ASSERT(static_cast<int64_t>(acc.size()) == mT * nT * 4 &&
                  static_cast<int64_t>(aFrags.size()) == (p.wgmmaSharedA ? 0 : kS * mT * 4),
              "wgmma fragment counts");
    for (llvm::Value*& x : aFrags) x = b.CreateBitCast(x, b.getInt32Ty());
    auto slot = [&](int64_t mi, int64_t ni, int64_t h, int64_t s) { return (2 * mi + h) * (2 * nT) + ni * 2 + s; };
    // The registers the instructions read, through the fence: A first.
    std::vector<llvm::Value*> regs(aFrags);
    regs.insert(regs.end(), acc.begin(), acc.end());
    regs = nvptx::emitWgmmaPassThrough(b, -1, regs);
    std::copy(regs.begin(), regs.begin() + static_cast<long>(aFrags.size()), aFrags.begin());
    std::copy(regs.begin() + static_cast<long>(aFrags.size()), regs.end(), acc.begin());
    // The descriptor: B's start address (shared window, bits 4-17) per
    // k-step, the rest constant (NVPTXWgmma.h). K-major (N x K): 8-row
    // groups of n SBO = 8 rows apart; k-step ks 32 bytes into its row (of
    // its block). N-major (K x N): 8-row groups of k SBO apart, column
    // blocks LBO = a block apart; k-step ks 16 rows further.
    const DotStaging& st = p.b;
    const auto sw = st.rowBytes() == 128  ? nvptx::WgmmaSwizzle::B128
                    : st.rowBytes() == 64 ? nvptx::WgmmaSwizzle::B64
                                          : nvptx::WgmmaSwizzle::B32;
    TS_ASSERT(st.swizzle && st.rowBytes() == static_cast<int64_t>(nvptx::swizzleBytes(sw)) &&
                  p.bAlign % wgmmaBAlign(st) == 0 && st.rows == (p.wgmmaTransB ? p.K : p.N),
              "wgmma B staging");
    const uint64_t blockBytes = static_cast<uint64_t>(st.rows * st.rowBytes());
    const uint64_t bits =
        nvptx::descriptorBits(sw, p.wgmmaTransB ? blockBytes : 16, static_cast<uint64_t>(8 * st.rowBytes()));
    llvm::Value* addr = b.CreatePtrToInt(bBase, b.getInt64Ty());
    auto fp8 = [](DType d) {
      return d == DType::F8E4M3   ? nvptx::WgmmaFp8::E4M3
             : d == DType::F8E5M2 ? nvptx::WgmmaFp8::E5M2
                                  : nvptx::WgmmaFp8::None;
    };
    const nvptx::WgmmaForm form{static_cast<int>(p.N), p.in == DType::BF16, p.wgmmaTransB,
                                p.wgmmaSharedA,        fp8(p.in),           fp8(p.inB)};
    // A from shared memory (K-major, wgmmaAStaging): the warpgroup's 64
    // rows of tile mi start at storage row 16 W mi + 64 (warp / 4).
    const DotStaging& sa = p.a;
    uint64_t aBits = 0;
    llvm::Value* aAddr = nullptr;
    if (p.wgmmaSharedA) {
      const auto swA = sa.rowBytes() == 128  ? nvptx::WgmmaSwizzle::B128
                       : sa.rowBytes() == 64 ? nvptx::WgmmaSwizzle::B64
                                             : nvptx::WgmmaSwizzle::B32;
      TS_ASSERT(sa.swizzle && sa.rowGroupWarps == wm && sa.rowBytes() == static_cast<int64_t>(nvptx::swizzleBytes(swA)),
                "wgmma A staging");
      aBits = nvptx::descriptorBits(swA, 16, static_cast<uint64_t>(8 * sa.rowBytes()));
      // The warpgroup index through a shuffle from lane 0: ptxas then knows
      // it is warp-uniform and builds the descriptors in uniform registers
      // (the wgmma operand) instead of moving each one over.
      llvm::Value* g = b.CreateUDiv(warp, i32(4));
      g = b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_idx_i32, {},
                            {b.getInt32(0xFFFFFFFFu), g, i32(0), i32(0x1F)});
      llvm::Value* group = b.CreateZExt(g, b.getInt64Ty());
      aAddr = b.CreateAdd(b.CreatePtrToInt(aBase, b.getInt64Ty()),
                          b.CreateMul(group, b.getInt64(static_cast<uint64_t>(64 * sa.rowBytes()))));
    }
    // A descriptor is the operand's base descriptor plus (offset >> 4) in
    // its start-address field: every operand lies below 2^18 bytes of the
    // shared window, so the sum never carries out of the field's 14 bits
    // and one 32-bit add gives each k-step's descriptor from the base.
    auto baseDesc = [&](llvm::Value* base, uint64_t constBits) {
      llvm::Value* lo = b.CreateTrunc(b.CreateAnd(b.CreateLShr(base, 4), b.getInt64(0x3FFF)), b.getInt32Ty());
      return std::pair{b.CreateOr(lo, b.getInt32(static_cast<uint32_t>(constBits))),
                       b.getInt64(constBits & ~uint64_t{0xFFFFFFFF})};
    };
    auto descAt = [&](std::pair<llvm::Value*, llvm::Value*> d, int64_t off) {
      TS_ASSERT(off % 16 == 0 && off < (int64_t{1} << 18), "wgmma descriptor offset");
      llvm::Value* lo =
          off ? b.CreateAdd(d.first, b.getInt32(static_cast<uint32_t>(off >> 4)), "", true, true) : d.first;
      return b.CreateOr(b.CreateZExt(lo, b.getInt64Ty()), d.second, "", /*IsDisjoint=*/true);
    };
    const auto bDesc = baseDesc(addr, bits);
    std::pair<llvm::Value*, llvm::Value*> aDesc{nullptr, nullptr};
    if (p.wgmmaSharedA) aDesc = baseDesc(aAddr, aBits);
    // K-major byte offset of column `col` in staging `s` (its block, then
    // its place in the row).
    auto kMajorOff = [](const DotStaging& s, int64_t col) {
      const int64_t eb = s.elemBytes;
      return s.blockCols ? (col / s.blockCols) * s.rows * s.rowBytes() + (col % s.blockCols) * eb : col * eb;
    };
    for (int64_t ks = 0; ks < kS; ++ks) {
      const int64_t col = ks * p.kStep;
      llvm::Value* desc = descAt(bDesc, p.wgmmaTransB ? col * st.rowBytes() : kMajorOff(st, col));
      for (int64_t mi = 0; mi < mT; ++mi) {
        std::vector<llvm::Value*> a;
        if (p.wgmmaSharedA)
          a.push_back(descAt(aDesc, mi * 16 * wm * sa.rowBytes() + kMajorOff(sa, col)));
        else
          a.assign(aFrags.begin() + (ks * mT + mi) * 4, aFrags.begin() + (ks * mT + mi + 1) * 4);
        std::vector<llvm::Value*> d;
        for (int64_t ni = 0; ni < nT; ++ni)
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t s = 0; s < 2; ++s) d.push_back(acc[slot(mi, ni, h, s)]);
        d = nvptx::emitWgmma(b, form, a, desc, d);
        size_t i = 0;
        for (int64_t ni = 0; ni < nT; ++ni)
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t s = 0; s < 2; ++s) acc[slot(mi, ni, h, s)] = d[i++];
      }
    }
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_wgmma_commit_group_sync_aligned, {});
    // In flight: the results go straight to the next wgmma of the same
    // shape (its accumulator, which PTX allows before the wait) or to the
    // program's dot_wait.
    if (p.wgmmaInFlight) return acc;
    return nvptx::emitWgmmaPassThrough(b, 0, acc);
  }

  // ---- AMD ----------------------------------------------------------------------
  // Fragments, flattened: A ks * mT + mi, B ks * nT + ni.
  std::vector<llvm::Value*> amd(std::vector<llvm::Value*> acc) {
    const bool wmma = p.op.kind == ir::MmaKind::AmdWmma16x16x16;
    // 8-bit operands (i8, fp8) travel packed in 32-bit registers; only i8
    // accumulates in i32.
    const bool packed = p.elemBytes == 1, integer = packed && !isFp8(p.in);
    const int64_t T = ir::amdMmaTile(p.op.kind);  // the instruction's M = N
    const int64_t mT = p.M / (T * wm), nT = p.N / (T * wn), kS = p.K / p.kStep;
    const unsigned regs = wmma ? 8 : static_cast<unsigned>(T * T / 64);  // accumulator registers per lane per tile
    // Operand elements per lane: WMMA a whole row of 16; MFMA the k-step
    // over the 64 / T lane groups (16x16x16: 4, 16x16x32: 8, 32x32x8: 4).
    const unsigned elems = wmma ? 16 : static_cast<unsigned>(p.kStep * T / 64);
    TS_ASSERT(only >= 0 || static_cast<int64_t>(acc.size()) == mT * nT * regs, "matrix-core accumulator slot count");
    // The operand registers as the intrinsic types them: f16 <n x half>,
    // bf16 <n x i16>; i8 and fp8 packed in 32-bit registers (an i32, an i64
    // for two (MFMA 16x16x32), <4 x i32> for four (WMMA)).
    llvm::Type* opTy;
    if (!packed)
      opTy = llvm::FixedVectorType::get(p.in == DType::F16 ? b.getHalfTy() : b.getInt16Ty(), elems);
    else if (wmma)
      opTy = llvm::FixedVectorType::get(b.getInt32Ty(), elems / 4);
    else
      opTy = b.getIntNTy(8 * elems);
    const llvm::Align opAlign(
        std::min<uint64_t>(static_cast<uint64_t>(amdPadBytes(p.op.kind)), uint64_t{elems} * p.elemBytes));
    llvm::Type* accTy = llvm::FixedVectorType::get(integer ? b.getInt32Ty() : b.getFloatTy(), regs);
    llvm::Function* fn = wmma ? llvm::Intrinsic::getOrInsertDeclaration(&m, p.op.mma, {accTy, opTy})
                              : llvm::Intrinsic::getOrInsertDeclaration(&m, p.op.mma);
    llvm::Value* i = b.CreateAnd(lane, i32(T - 1));
    llvm::Value* q = b.CreateLShr(lane, i32(T == 32 ? 5 : 4));
    // Fragment row i of tile mi on the block tile (see the #mma layouts).
    llvm::Value* aRow0;
    if (wmma)
      aRow0 = b.CreateAdd(b.CreateAdd(b.CreateMul(wp0, i32(2)), b.CreateAnd(i, i32(1))),
                          b.CreateMul(b.CreateLShr(i, i32(1)), i32(2 * wm)));
    else
      aRow0 = b.CreateAdd(b.CreateMul(wp0, i32(T)), i);
    const int64_t aRowStep = T * wm;  // a warp's next tile is T * wm rows further (every layout)
    // Column i of a tile (B's row, C's column): 16x16 tiles are whole in a
    // warp's 16 columns; a 32x32 tile is four 8-column repetitions of the
    // layout, 8 * wn columns apart (Layout.h).
    llvm::Value* bRow0 =
        T == 32 ? b.CreateAdd(b.CreateAdd(b.CreateMul(b.CreateLShr(i, i32(3)), i32(8 * wn)), b.CreateMul(wp1, i32(8))),
                              b.CreateAnd(i, i32(7)))
                : b.CreateAdd(b.CreateMul(wp1, i32(16)), i);
    llvm::Value* kOff = wmma ? i32(0) : b.CreateMul(q, i32(elems));
    // Accumulator slots in the #mma layout's order (Layout.h): WMMA's eight
    // registers are eight rows; MFMA's four are four columns (C^T).
    auto slot = [&](int64_t mi, int64_t ni, int64_t r) {
      return wmma ? (8 * mi + r) * nT + ni : (mi * nT + ni) * int64_t{regs} + r;
    };
    // One lane's run of a row: one load, or on swizzled staging (WMMA's
    // 32 bytes) one per 16-byte chunk, put back together.
    const int64_t runBytes = int64_t{elems} * p.elemBytes;
    auto operand = [&](llvm::Value* base, const DotStaging& s, llvm::Value* row, int64_t dRow,
                       int64_t dCol) -> llvm::Value* {
      if (!s.swizzle || runBytes <= 16) return b.CreateAlignedLoad(opTy, addr(base, s, row, dRow, kOff, dCol), opAlign);
      TS_ASSERT(runBytes == 32, "swizzled matrix-core operand run of two chunks");
      const int64_t ce = s.chunkElems();
      auto* chunkTy = llvm::FixedVectorType::get(b.getIntNTy(8 * p.elemBytes), static_cast<unsigned>(ce));
      llvm::Value* lo = b.CreateAlignedLoad(chunkTy, addr(base, s, row, dRow, kOff, dCol), llvm::Align(16));
      llvm::Value* hi = b.CreateAlignedLoad(chunkTy, addr(base, s, row, dRow, kOff, dCol + ce), llvm::Align(16));
      std::vector<int> cat(static_cast<size_t>(2 * ce));
      for (size_t j = 0; j < cat.size(); ++j) cat[j] = static_cast<int>(j);
      return b.CreateBitCast(b.CreateShuffleVector(lo, hi, cat), opTy);
    };
    for (int64_t ks = 0; ks < kS; ++ks) {
      std::vector<llvm::Value*> A, B;
      for (int64_t mi = 0; mi < mT && only != 1; ++mi)
        A.push_back(preA ? (*preA)[static_cast<size_t>(ks * mT + mi)]
                         : operand(aBase, p.a, aRow0, mi * aRowStep, ks * p.kStep));
      for (int64_t ni = 0; ni < nT && only != 0; ++ni)
        B.push_back(preB ? (*preB)[static_cast<size_t>(ks * nT + ni)]
                         : operand(bBase, p.b, bRow0, ni * T * wn, ks * p.kStep));
      if (only >= 0) {
        loaded.insert(loaded.end(), only == 0 ? A.begin() : B.begin(), only == 0 ? A.end() : B.end());
        continue;
      }
      for (int64_t mi = 0; mi < mT; ++mi)
        for (int64_t ni = 0; ni < nT; ++ni) {
          llvm::Value* c = llvm::PoisonValue::get(accTy);
          for (unsigned r = 0; r < regs; ++r) c = b.CreateInsertElement(c, acc[slot(mi, ni, r)], r);
          llvm::Value* d;
          if (wmma && integer)  // A_sign, A, B_sign, B, C, clamp
            d = b.CreateCall(fn, {b.getTrue(), A[mi], b.getTrue(), B[ni], c, b.getFalse()});
          else if (wmma)
            d = b.CreateCall(fn, {A[mi], B[ni], c});
          else
            d = b.CreateCall(fn, {B[ni], A[mi], c, i32(0), i32(0), i32(0)});
          for (unsigned r = 0; r < regs; ++r) acc[slot(mi, ni, r)] = b.CreateExtractElement(d, r);
        }
    }
    return acc;
  }
};

}  // namespace

std::vector<llvm::Value*> emitTensorCoreDot(llvm::IRBuilderBase& b, llvm::Module& m, const TensorCoreDotPlan& p,
                                            llvm::Value* aBase, llvm::Value* bBase, llvm::Value* lane,
                                            llvm::Value* warp, std::vector<llvm::Value*> acc,
                                            const std::function<llvm::Value*(int64_t, int64_t)>& aReg,
                                            const std::vector<llvm::Value*>* preA,
                                            const std::vector<llvm::Value*>* preB) {
  TS_ASSERT(!aReg || p.op.kind == ir::MmaKind::NvMmaM16N8K16 || p.op.kind == ir::MmaKind::NvWgmmaM64K16,
            "A fragments from registers: NVIDIA mma and wgmma only");
  Emitter e(b, m, p, aBase, bBase, lane, warp, aReg);
  e.preA = preA;
  e.preB = preB;
  if (ir::isNvMma(p.op.kind)) return e.nvidia(std::move(acc));
  return e.amd(std::move(acc));
}

std::vector<llvm::Value*> loadTensorCoreFragments(llvm::IRBuilderBase& b, llvm::Module& m, const TensorCoreDotPlan& p,
                                                  unsigned operand, llvm::Value* base, llvm::Value* lane,
                                                  llvm::Value* warp) {
  const std::function<llvm::Value*(int64_t, int64_t)> none;
  Emitter e(b, m, p, operand == 0 ? base : nullptr, operand == 1 ? base : nullptr, lane, warp, none);
  e.only = static_cast<int>(operand);
  if (ir::isNvMma(p.op.kind))
    e.nvidia({});
  else
    e.amd({});
  return std::move(e.loaded);
}

std::vector<llvm::Value*> emitTensorCoreWait(llvm::IRBuilderBase& b, int pending,
                                             const std::vector<llvm::Value*>& regs) {
  return nvptx::emitWgmmaPassThrough(b, pending, regs);
}

}  // namespace tessera::codegen

// What AMD's matrix-core families (MFMA, WMMA) share: operands staged in
// LDS as A M x K and B^T N x K, both contiguous along K, padded or
// XOR-swizzled; each lane reads its run of a row with plain LDS loads; one
// instruction per T x T tile and k-step. The family (AMDGPUDot.h) says
// the rest: its fragment layouts, registers and call.
#include <algorithm>

#include "codegen/amdgpu/AMDGPUDot.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::amdgpu {

const MatrixCoreFamily* matrixCoreFamily(const GpuArch& row) {
  switch (row.matrixCore) {
    case GpuArch::MatrixCore::Mfma: return &mfmaFamily();
    // RDNA3 lanes hold whole rows of K (16 elements), RDNA4's half (8).
    case GpuArch::MatrixCore::Wmma: return row.wmmaLaneElems == 8 ? &wmmaGfx12Family() : &wmmaFamily();
    case GpuArch::MatrixCore::None: break;
  }
  return nullptr;
}

const MatrixCoreFamily& matrixCoreFamily(ir::MmaKind k) {
  if (k == ir::MmaKind::AmdWmma16x16x16) return wmmaFamily();
  if (k == ir::MmaKind::AmdWmmaGfx12) return wmmaGfx12Family();
  return mfmaFamily();
}

void planMatrixCoreStaging(TensorCoreDotPlan& p) {
  const unsigned eb = p.elemBytes;
  // Pad rows by 8 bytes: 16 lanes reading 4 or 8 bytes at the same column
  // of 16 consecutive rows then hit 16 distinct banks (bank pairs). WMMA
  // lanes read 32 bytes each (a row of 16): rows padded by 16 bytes keep
  // them 16-byte aligned, so the reads are 128-bit (ds_load_b128), and
  // the 16 rows of one read fall into 16 distinct 4-bank groups.
  const int64_t pad = matrixCoreFamily(p.op.kind).padBytes(p.op.kind) / static_cast<int64_t>(eb);
  p.a = {p.M, p.K, p.K + pad, false, pad, eb};
  // Written transposed: runs along K of the copy's register tile
  // (transposedCopyLayout), aligned by the padded stride (bufferRunWidth).
  p.b = {p.N, p.K, p.K + pad, false, 1, eb};
  p.bTransposed = true;
  if (ir::isAmdMfma(p.op.kind) && ir::amdMmaTile(p.op.kind) == 32 && p.acc.wpb[1] > 1) p.b.mfmaColWarps = p.acc.wpb[1];
}

bool swizzleMatrixCoreStaging(TensorCoreDotPlan& p) {
  const int64_t unit = matrixCoreFamily(p.op.kind).swizzleUnit(p);
  // MFMA 32x32's B rows stay permuted (mfmaColWarps); the swizzle applies
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

// Fragments, flattened: A ks * mT + mi, B ks * nT + ni.
std::vector<llvm::Value*> emitMatrixCoreDot(DotEmitter& e, std::vector<llvm::Value*> acc) {
  TS_ASSERT(!e.aReg, "A fragments from registers: NVIDIA mma and wgmma only");
  llvm::IRBuilderBase& b = e.b;
  const TensorCoreDotPlan& p = e.p;
  const MatrixCoreFamily& fam = matrixCoreFamily(p.op.kind);
  const int64_t wm = e.wm, wn = e.wn;
  auto i32 = [&](int64_t v) { return e.i32(v); };
  // 8-bit operands (i8, fp8, a block-scaled dot's containers) travel
  // packed in 32-bit registers; only i8 accumulates in i32.
  const bool packed = p.elemBytes == 1, integer = p.elemA == DType::I8;
  const int64_t T = ir::amdMmaTile(p.op.kind);  // the instruction's M = N
  const int64_t mT = p.M / (T * wm), nT = p.N / (T * wn), kS = p.K / p.kStep;
  const unsigned regs = fam.accRegisters(T);
  const unsigned elems = fam.operandElems(p.kStep, T);
  TS_ASSERT(e.only >= 0 || static_cast<int64_t>(acc.size()) == mT * nT * regs, "matrix-core accumulator slot count");
  // The operand registers as the intrinsic types them: f16 <n x half>,
  // bf16 <n x i16>; i8 and fp8 packed (packedOperandType).
  llvm::Type* opTy = packed ? fam.packedOperandType(b, elems)
                            : llvm::FixedVectorType::get(p.in == DType::F16 ? b.getHalfTy() : b.getInt16Ty(), elems);
  const llvm::Align opAlign(
      std::min<uint64_t>(static_cast<uint64_t>(fam.padBytes(p.op.kind)), uint64_t{elems} * p.elemBytes));
  llvm::Type* accTy = llvm::FixedVectorType::get(integer ? b.getInt32Ty() : b.getFloatTy(), regs);
  // The registers the instruction reads (finishOperand's type for each).
  auto finishedTy = [&](unsigned which) {
    llvm::Value* probe = llvm::PoisonValue::get(opTy);
    llvm::Type* t = fam.finishOperand(b, probe, p, which)->getType();
    return t;
  };
  llvm::Function* fn = fam.declare(e.m, p.op.mma, accTy, finishedTy(0), finishedTy(1));
  llvm::Value* i = b.CreateAnd(e.lane, i32(T - 1));
  llvm::Value* q = b.CreateLShr(e.lane, i32(T == 32 ? 5 : 4));
  // Fragment row i of tile mi on the block tile (see the #mma layouts).
  llvm::Value* aRow0 = fam.aRow0(e, i, T);
  const int64_t aRowStep = T * wm;  // a warp's next tile is T * wm rows further (every layout)
  // Column i of a tile (B's row, C's column): 16x16 tiles are whole in a
  // warp's 16 columns; a 32x32 tile is four 8-column repetitions of the
  // layout, 8 * wn columns apart (Layout.h).
  llvm::Value* bRow0 =
      T == 32 ? b.CreateAdd(b.CreateAdd(b.CreateMul(b.CreateLShr(i, i32(3)), i32(8 * wn)), b.CreateMul(e.wp1, i32(8))),
                            b.CreateAnd(i, i32(7)))
              : b.CreateAdd(b.CreateMul(e.wp1, i32(16)), i);
  const unsigned runsA = fam.operandRuns(p, 0), runsB = fam.operandRuns(p, 1);
  llvm::Value* kOffA = fam.kOffset(e, q, elems / runsA);
  llvm::Value* kOffB = runsB == runsA ? kOffA : fam.kOffset(e, q, elems / runsB);
  auto slot = [&](int64_t mi, int64_t ni, int64_t r) { return fam.slot(mi, ni, r, nT, regs); };
  // One lane's elements of a row: one load, or one per 16-byte piece, put
  // back together: the two chunks of WMMA's 32-byte run on swizzled
  // staging, the two runs (half a k-step apart) of MFMA's f8f6f4 forms.
  const int64_t runBytes = int64_t{elems} * p.elemBytes;
  auto operand = [&](unsigned which, llvm::Value* base, const DotStaging& s, llvm::Value* row, int64_t dRow,
                     int64_t dCol) -> llvm::Value* {
    const unsigned runs = which ? runsB : runsA;
    llvm::Value* kOff = which ? kOffB : kOffA;
    if (runs == 1 && (!s.swizzle || runBytes <= 16))
      return fam.finishOperand(b, b.CreateAlignedLoad(opTy, e.addr(base, s, row, dRow, kOff, dCol), opAlign), p, which);
    TS_ASSERT(runBytes == 32, "matrix-core operand of two 16-byte pieces");
    const int64_t ce = s.chunkElems(), gap = runs == 2 ? p.kStep / 2 : ce;
    const llvm::Align align = s.swizzle ? llvm::Align(16) : opAlign;
    auto* chunkTy = llvm::FixedVectorType::get(b.getIntNTy(8 * p.elemBytes), static_cast<unsigned>(ce));
    llvm::Value* lo = b.CreateAlignedLoad(chunkTy, e.addr(base, s, row, dRow, kOff, dCol), align);
    llvm::Value* hi = b.CreateAlignedLoad(chunkTy, e.addr(base, s, row, dRow, kOff, dCol + gap), align);
    std::vector<int> cat(static_cast<size_t>(2 * ce));
    for (size_t j = 0; j < cat.size(); ++j) cat[j] = static_cast<int>(j);
    return fam.finishOperand(b, b.CreateBitCast(b.CreateShuffleVector(lo, hi, cat), opTy), p, which);
  };
  // A block-scaled dot's scales (p.scaled): lane i + T q gives the scale of
  // its row of A (column of B) for block q of the k-step (AMDGPUMfma.cpp),
  // a byte of the staged [M, K / 32] and [N, K / 32] rows (GpuDot.h).
  TS_ASSERT(!p.scaled || p.scaleBlock == 32, "gfx950's scaled MFMAs take e8m0 scales of blocks of 32 only");
  const int64_t kB = p.scaleBlocks, bps = p.kStep * p.kPerElem / 32;
  if (p.scaled && e.only < 0)
    TS_ASSERT(e.scales && bps * 32 == p.kStep * p.kPerElem && bps * T == 64 && kB == p.K * p.kPerElem / 32,
              "block scales: one block per lane group and k-step");
  auto scaleOf = [&](int64_t first, llvm::Value* row, int64_t dRow, int64_t ks) -> llvm::Value* {
    llvm::Value* at =
        b.CreateAdd(b.CreateMul(b.CreateAdd(row, i32(dRow)), i32(kB)), b.CreateAdd(q, i32(first + ks * bps)));
    return b.CreateZExt(b.CreateLoad(b.getInt8Ty(), b.CreateInBoundsGEP(b.getInt8Ty(), e.scales, at)), b.getInt32Ty());
  };
  for (int64_t ks = 0; ks < kS; ++ks) {
    std::vector<llvm::Value*> A, B;
    for (int64_t mi = 0; mi < mT && e.only != 1; ++mi)
      A.push_back(e.preA ? (*e.preA)[static_cast<size_t>(ks * mT + mi)]
                         : operand(0, e.aBase, p.a, aRow0, mi * aRowStep, ks * p.kStep));
    for (int64_t ni = 0; ni < nT && e.only != 0; ++ni)
      B.push_back(e.preB ? (*e.preB)[static_cast<size_t>(ks * nT + ni)]
                         : operand(1, e.bBase, p.b, bRow0, ni * T * wn, ks * p.kStep));
    if (e.only >= 0) {
      e.loaded.insert(e.loaded.end(), e.only == 0 ? A.begin() : B.begin(), e.only == 0 ? A.end() : B.end());
      continue;
    }
    std::vector<llvm::Value*> sA(static_cast<size_t>(mT), nullptr), sB(static_cast<size_t>(nT), nullptr);
    if (p.scaled) {
      for (int64_t mi = 0; mi < mT; ++mi) sA[static_cast<size_t>(mi)] = scaleOf(0, aRow0, mi * aRowStep, ks);
      for (int64_t ni = 0; ni < nT; ++ni) sB[static_cast<size_t>(ni)] = scaleOf(p.M * kB, bRow0, ni * T * wn, ks);
    }
    for (int64_t mi = 0; mi < mT; ++mi)
      for (int64_t ni = 0; ni < nT; ++ni) {
        llvm::Value* c = llvm::PoisonValue::get(accTy);
        for (unsigned r = 0; r < regs; ++r) c = b.CreateInsertElement(c, acc[slot(mi, ni, r)], r);
        llvm::Value* d = fam.call(b, fn, A[mi], B[ni], c, p, sA[static_cast<size_t>(mi)], sB[static_cast<size_t>(ni)]);
        for (unsigned r = 0; r < regs; ++r) acc[slot(mi, ni, r)] = b.CreateExtractElement(d, r);
      }
  }
  return acc;
}

}  // namespace tessera::codegen::amdgpu

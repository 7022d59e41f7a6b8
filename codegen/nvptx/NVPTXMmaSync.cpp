// mma.sync on NVIDIA (sm_80+): operands staged in shared memory, their
// fragments read by ldmatrix, one mma.sync.m16n8k16 (f16/bf16) or m16n8k32
// (s8, fp8) per 16 x 8 tile and k-step. Fragment layouts used here:
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
// The block-scaled m16n8k32 (.kind::mxf8f6f4.block_scale.scale_vec::1X,
// sm_120a: PTX ISA, "Block Scaling for mma.sync") takes the same fragments
// (fp6 and fp4 elements a byte each, as fp8) plus one e8m0 scale per row
// of A and per column of B for its 32 k, each a byte of a 32-bit register
// that the selectors {byte-id, thread-id} pick. With thread-id 0, lane 4g + h (h < 2) gives A's row g + 8h and
// lane 4g gives B's column g; the other lanes' registers are not read
// (Triton's sm_120 scale layout reads the PTX ISA's figures the same way,
// and the emulator runs this reading: runtime/emu/Matrix.cpp). Four k-steps'
// scales are consecutive bytes of a staged row (GpuDot.h), so one 32-bit
// load serves four instructions, byte-id k-step % 4.
//
// fp4 x fp4 packed (p.kPerElem 2): mma.sync.m16n8k64.row.col.kind::mxf4
// .block_scale.scale_vec::2X reads the m16n8k32 fragments above with a
// byte holding two e2m1 codes (k 2j in the low nibble, 2j + 1 in the high:
// a register 8 codes, a k-step 64), so the staging and the ldmatrix reads
// are the fp8 ones over the packed bytes. Its scale register holds two
// scales per row (column), the k-step's blocks of 32 in bytes 0 and 1 with
// byte-id 0 (as CUTLASS and Triton drive it), the same lanes as above: a
// 16-bit load, or the half of a 32-bit one (two k-steps) moved low.
// NVFP4 x NVFP4 (.kind::mxf4nvf4.block_scale.scale_vec::4X, UE4M3 scales
// of blocks of 16) reads the same fragments; its scale register holds the
// k-step's four blocks in bytes 0-3 (byte-id 0): one 32-bit load.
#include <algorithm>
#include <array>

#include "codegen/nvptx/NVPTXDot.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::nvptx {

void planMmaSyncStaging(TensorCoreDotPlan& p) {
  const int64_t M = p.M, N = p.N, K = p.K;
  const unsigned eb = p.elemBytes;
  const int64_t ce = 16 / static_cast<int64_t>(eb);  // elements per 16-byte chunk
  // Rows padded by one 16-byte chunk: the eight 16-byte rows one
  // ldmatrix phase reads start 16 (mod 128) bytes apart for any row of
  // >= 32 bytes (an odd number of chunks per padded row), so they hit
  // eight different 4-bank groups, and every element's address is affine
  // in (row, col): the staging stores and fragment reads of a thread are
  // one base register plus immediates (the XOR swizzle of the shared
  // slots, mmaSyncSlotStaging, gives each a register of its own, held
  // across the loop).
  p.a = {M, K, K + ce, false, ce, eb};
  if (eb == 1) {
    // 1-byte B: N x K (see the fragment table above: no .trans).
    p.b = {N, K, K + ce, false, ce, eb};
    p.bTransposed = true;
  } else {
    p.b = {K, N, N + ce, false, ce, eb};
  }
}

DotStaging mmaSyncSlotStaging(int64_t rows, int64_t cols, unsigned elemBytes) {
  const int64_t ce = 16 / static_cast<int64_t>(elemBytes);
  return {rows, cols, cols, true, ce, elemBytes};
}

void stageBAlongK(TensorCoreDotPlan& p) {
  const int64_t ce = p.b.chunkElems();
  p.b = {p.N, p.K, p.K + ce, false, ce, p.elemBytes};
  p.bTransposed = true;
}

// Fragments, flattened: A (ks * mT + mi) * 4 + q, B (ks * nT + ni) * 2 + q.
// m16n8k16 and m16n8k32 alike: every fragment register is 4 bytes of one
// row of an 8 x 16-byte matrix, a k-step is two such matrices wide (ce
// elements each).
std::vector<llvm::Value*> emitMmaSyncDot(DotEmitter& e, std::vector<llvm::Value*> acc) {
  llvm::IRBuilderBase& b = e.b;
  llvm::Module& m = e.m;
  const TensorCoreDotPlan& p = e.p;
  const int64_t wm = e.wm, wn = e.wn;
  llvm::Value *lane = e.lane, *wp0 = e.wp0, *wp1 = e.wp1, *aBase = e.aBase, *bBase = e.bBase;
  const auto& aReg = e.aReg;
  const std::vector<llvm::Value*>*preA = e.preA, *preB = e.preB;
  const int only = e.only;
  std::vector<llvm::Value*>& loaded = e.loaded;
  auto i32 = [&](int64_t v) { return e.i32(v); };
  auto addr = [&](llvm::Value* base, const DotStaging& s, llvm::Value* row, int64_t dRow, llvm::Value* col,
                  int64_t dCol) { return e.addr(base, s, row, dRow, col, dCol); };
  // The register type of one element of a tile (A from registers).
  auto tileElemTy = [&] { return p.in == DType::F16 ? b.getHalfTy() : b.getBFloatTy(); };
  const int64_t mT = p.M / (16 * wm), nT = p.N / (8 * wn), kS = p.K / p.kStep;
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
  // Block scales (p.scaled): this lane's row of A (g + 8h of the
  // instruction, h = lane % 2) and column of B (g) as rows of the staged
  // [M, kS] and [N, kS] bytes.
  // Blocks per k-step: 1 (32 codes a byte each), 2 (64 packed, blocks of
  // 32) or 4 (64 packed, NVFP4's blocks of 16).
  const int64_t kB = p.scaleBlocks, bps = p.kStep * p.kPerElem / p.scaleBlock;
  const bool wordScales = kB % 4 == 0;
  llvm::Value *sRowA = nullptr, *sRowB = nullptr;
  if (p.scaled && only < 0) {
    TS_ASSERT(e.scales && kB == kS * bps && (bps == 1 || bps == 2 || bps == 4),
              "block scales: one, two or four blocks per k-step");
    llvm::Value* g = b.CreateLShr(lane, i32(2));
    sRowA = b.CreateAdd(b.CreateAdd(b.CreateMul(b.CreateAnd(lane, i32(1)), i32(8 * wm)), b.CreateMul(wp0, i32(8))), g);
    sRowB = b.CreateAdd(b.CreateMul(wp1, i32(8)), g);
  }
  // The scale register of row `row` (+ dRow) of the A (0) or B (1) scales
  // at k-step ks, and its byte-id.
  auto scaleOf = [&](unsigned which, llvm::Value* row, int64_t dRow, int64_t ks) -> std::pair<llvm::Value*, int64_t> {
    const int64_t first = which == 0 ? 0 : p.M * kB, block = ks * bps;
    llvm::Value* at = b.CreateAdd(b.CreateMul(b.CreateAdd(row, i32(dRow)), i32(kB)),
                                  i32(first + (wordScales ? block / 4 * 4 : block)));
    llvm::Value* ptr = b.CreateInBoundsGEP(b.getInt8Ty(), e.scales, at);
    if (bps == 4) return {b.CreateAlignedLoad(b.getInt32Ty(), ptr, llvm::Align(4)), 0};  // bytes 0-3
    if (bps == 2) {  // the k-step's two scales in bytes 0, 1
      if (!wordScales)
        return {b.CreateZExt(b.CreateAlignedLoad(b.getInt16Ty(), ptr, llvm::Align(2)), b.getInt32Ty()), 0};
      llvm::Value* w = b.CreateAlignedLoad(b.getInt32Ty(), ptr, llvm::Align(4));
      return {block % 4 ? b.CreateLShr(w, i32(16)) : w, 0};
    }
    if (wordScales) return {b.CreateAlignedLoad(b.getInt32Ty(), ptr, llvm::Align(4)), block % 4};
    return {b.CreateZExt(b.CreateLoad(b.getInt8Ty(), ptr), b.getInt32Ty()), 0};
  };
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
    std::vector<std::pair<llvm::Value*, int64_t>> sA, sB;
    if (p.scaled) {
      for (int64_t mi = 0; mi < mT; ++mi) sA.push_back(scaleOf(0, sRowA, mi * 16 * wm, ks));
      for (int64_t ni = 0; ni < nT; ++ni) sB.push_back(scaleOf(1, sRowB, ni * 8 * wn, ks));
    }
    auto i16 = [&](int64_t v) { return b.getInt16(static_cast<uint16_t>(v)); };
    for (int64_t mi = 0; mi < mT; ++mi)
      for (int64_t ni = 0; ni < nT; ++ni) {
        std::array<int64_t, 4> s = {slot(mi, ni, 0, 0), slot(mi, ni, 0, 1), slot(mi, ni, 1, 0), slot(mi, ni, 1, 1)};
        std::vector<llvm::Value*> args = {A[mi][0], A[mi][1],  A[mi][2],  A[mi][3],  B[ni][0],
                                          B[ni][1], acc[s[0]], acc[s[1]], acc[s[2]], acc[s[3]]};
        if (p.scaled)  // scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}
          args.insert(args.end(), {sA[mi].first, i16(sA[mi].second), i16(0), sB[ni].first, i16(sB[ni].second), i16(0)});
        llvm::Value* d = b.CreateCall(mma, args);
        for (unsigned q = 0; q < 4; ++q) acc[s[q]] = b.CreateExtractValue(d, q);
      }
  }
  return acc;
}

}  // namespace tessera::codegen::nvptx

// `dot` on x86 AMX tiles: bf16 x bf16 -> f32 (tdpbf16ps) and i8 x i8 -> i32
// (tdpbssd), where the target has them (CpuTargetInfo::amxBf16/amxInt8).
//
// A tile register holds 16 rows of 64 bytes. One tdp instruction multiplies
// A (16 x 64 bytes of K) by B (64 bytes of K x 16 columns) into C (16 x 16
// f32 or i32): 16 x 16 x 32 bf16 or 16 x 16 x 64 i8 multiply-adds, 16x an
// AVX-512 FMA's work. B must be in the "VNNI" layout: K grouped by the
// pack (2 bf16, 4 i8 per 4-byte lane), each group a 64-byte row of 16
// columns x pack elements. So:
//   - A is read in place when its array is already whole tiles (M a
//     multiple of 16, K of the tile's K), else copied into a zero-padded
//     array;
//   - B is packed into panels of 16 columns (Kp / pack rows of 64 bytes),
//     interleaving `pack` rows with one shuffle per 64-byte row; rows and
//     columns past the tile are zeros;
//   - C (the accumulator array, updated in place) is read in place when
//     it is whole tiles, else staged through a padded array.
// Padding is zeroed once per program (in the allocas block), since nothing
// ever writes it; the real elements are rewritten by every dot.
//
// The kernel covers C in blocks of 2 x 2 tiles, which uses all eight tile
// registers (4 C, 2 A, 2 B): per K step two A and two B loads feed four
// tdp. The tiles are loaded, multiplied and stored within one basic block
// (K steps unrolled, in chunks of kChunk), so no tile value crosses a
// block edge and the backend's tile configuration stays one ldtilecfg.
//
// Numerics: tdpbf16ps adds each pair of products to the f32 accumulator
// with round-to-nearest-even and treats denormal inputs and results as
// zero (Intel SDM, TDPBF16PS), so results differ from the vector kernel's
// sequential FMAs in the last bits; i8 dots are exact either way.
#include "codegen/cpu/CpuLowerImpl.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

namespace tessera::codegen::cpu::detail {

namespace {
constexpr int64_t kTileRows = 16;
constexpr int64_t kTileBytes = 64;  // bytes per tile row
constexpr int64_t kChunk = 16;      // K steps unrolled between loads and stores of C
}  // namespace

bool Lowering::dotOnTiles(DType in) const {
  return (in == DType::BF16 && tgt_.amxBf16) || (in == DType::I8 && tgt_.amxInt8);
}

void Lowering::emitTileDot(const ir::Op& op, llvm::Value* aArr, int64_t lda, llvm::Value* bArr, llvm::Value* cArr,
                           const std::function<void(llvm::Value*)>& prefetch, int64_t units) {
  const ir::Value* a = op.operand(0);
  const ir::Value* bv = op.operand(1);
  const int64_t M = a->type().shape()[0], K = a->type().shape()[1], N = bv->type().shape()[1];
  const bool bf16 = a->type().dtype() == DType::BF16;
  // Operands move as bits: i16 for bf16 (no bf16 arithmetic happens here).
  llvm::Type* et = bf16 ? b_.getInt16Ty() : b_.getInt8Ty();
  llvm::Type* ct = bf16 ? b_.getFloatTy() : b_.getInt32Ty();
  const int64_t eb = bf16 ? 2 : 1, pack = 4 / eb, tk = kTileBytes / eb;
  const int64_t Mp = (M + kTileRows - 1) / kTileRows * kTileRows, Np = (N + 15) / 16 * 16, Kp = (K + tk - 1) / tk * tk;
  const int64_t Mt = Mp / kTileRows, Nt = Np / 16, Kt = Kp / tk;
  auto bytes = [&](llvm::Value* base, llvm::Value* off) { return b_.CreateInBoundsGEP(b_.getInt8Ty(), base, off); };
  auto zeroOnce = [&](llvm::Value* arr, uint64_t n) {
    llvm::IRBuilder<>(allocaBlock_)
        .CreateMemSet(arr, llvm::ConstantInt::get(b_.getInt8Ty(), 0), n, llvm::MaybeAlign(64));
  };
  // Row-by-row copy of `rows` rows of `rowBytes` between arrays of other strides.
  auto copyRows = [&](llvm::Value* dst, int64_t dstStride, llvm::Value* src, int64_t srcStride, int64_t rows,
                      int64_t rowBytes) {
    constLoop(0, rows, 1, [&](llvm::Value* r) {
      b_.CreateMemCpy(bytes(dst, b_.CreateMul(r, i64(dstStride))), llvm::MaybeAlign(1),
                      bytes(src, b_.CreateMul(r, i64(srcStride))), llvm::MaybeAlign(1),
                      static_cast<uint64_t>(rowBytes));
    });
  };

  // ---- A: whole tiles in place, else a zero-padded copy
  llvm::Value* aT = aArr;
  int64_t aStride = lda * eb;
  if (M != Mp || K != Kp) {
    aT = entryAlloca(llvm::ArrayType::get(et, static_cast<uint64_t>(Mp * Kp)), 64);
    zeroOnce(aT, static_cast<uint64_t>(Mp * Kp * eb));
    copyRows(aT, Kp * eb, aArr, lda * eb, M, K * eb);
    aStride = Kp * eb;
  }

  // ---- B: VNNI panels of 16 columns, Kp / pack rows of 64 bytes each
  const int64_t panelBytes = Kp / pack * kTileBytes;
  llvm::Value* bT = entryAlloca(llvm::ArrayType::get(b_.getInt8Ty(), static_cast<uint64_t>(Nt * panelBytes)), 64);
  if (K != Kp) zeroOnce(bT, static_cast<uint64_t>(Nt * panelBytes));
  auto* rowTy = llvm::FixedVectorType::get(et, 16);
  // Row group g (rows g*pack ..), panel p: `rowsHere` real rows, `cols` real columns.
  auto packGroup = [&](llvm::Value* g, llvm::Value* p, int64_t rowsHere, int64_t cols) {
    std::vector<llvm::Value*> rows;
    for (int64_t q = 0; q < pack; ++q) {
      if (q >= rowsHere) {
        rows.push_back(llvm::Constant::getNullValue(rowTy));
        continue;
      }
      llvm::Value* k = b_.CreateAdd(b_.CreateMul(g, i64(pack)), i64(q));
      llvm::Value* src =
          b_.CreateInBoundsGEP(et, bArr, b_.CreateAdd(b_.CreateMul(k, i64(N)), b_.CreateMul(p, i64(16))));
      if (cols == 16) {
        rows.push_back(b_.CreateAlignedLoad(rowTy, src, llvm::Align(1)));
      } else {
        std::vector<llvm::Constant*> m;
        for (int64_t i = 0; i < 16; ++i) m.push_back(b_.getInt1(i < cols));
        rows.push_back(b_.CreateMaskedLoad(rowTy, src, llvm::Align(1), llvm::ConstantVector::get(m),
                                           llvm::Constant::getNullValue(rowTy)));
      }
    }
    // Concatenate the rows, then take lane n*pack+q from row q's lane n.
    std::vector<int> cat, ilv;
    for (int i = 0; i < 32; ++i) cat.push_back(i);
    llvm::Value* all = b_.CreateShuffleVector(rows[0], rows[1], cat);
    if (pack == 4) {
      llvm::Value* hi = b_.CreateShuffleVector(rows[2], rows[3], cat);
      for (int i = 32; i < 64; ++i) cat.push_back(i);
      all = b_.CreateShuffleVector(all, hi, cat);
    }
    for (int n = 0; n < 16; ++n)
      for (int q = 0; q < pack; ++q) ilv.push_back(q * 16 + n);
    all = b_.CreateShuffleVector(all, all, ilv);
    llvm::Value* dst = bytes(bT, b_.CreateAdd(b_.CreateMul(p, i64(panelBytes)), b_.CreateMul(g, i64(kTileBytes))));
    b_.CreateAlignedStore(all, dst, llvm::Align(64));
  };
  auto packRows = [&](llvm::Value* g, int64_t rowsHere) {
    if (N / 16) constLoop(0, N / 16, 1, [&](llvm::Value* p) { packGroup(g, p, rowsHere, 16); });
    if (N % 16) packGroup(g, i64(N / 16), rowsHere, N % 16);
  };
  if (K / pack) constLoop(0, K / pack, 1, [&](llvm::Value* g) { packRows(g, pack); });
  if (K % pack) packRows(i64(K / pack), K % pack);

  // ---- C: whole tiles in place, else staged through a padded array
  llvm::Value* cT = cArr;
  int64_t cStride = N * 4;
  const bool staged = M != Mp || N != Np;
  if (staged) {
    cT = entryAlloca(llvm::ArrayType::get(ct, static_cast<uint64_t>(Mp * Np)), 64);
    cStride = Np * 4;
    copyRows(cT, cStride, cArr, N * 4, M, N * 4);
  }

  // ---- the kernel: blocks of up to 2 x 2 C tiles
  llvm::Type* amx = llvm::Type::getX86_AMXTy(ctx_);
  llvm::Value *rows16 = b_.getInt16(kTileRows), *bytes64 = b_.getInt16(kTileBytes);
  auto load = [&](llvm::Value* p, int64_t stride) {
    return b_.CreateIntrinsic(amx, llvm::Intrinsic::x86_tileloadd64_internal, {rows16, bytes64, p, i64(stride)});
  };
  const llvm::Intrinsic::ID tdp =
      bf16 ? llvm::Intrinsic::x86_tdpbf16ps_internal : llvm::Intrinsic::x86_tdpbssd_internal;
  auto block = [&](llvm::Value* i0, int64_t ni, llvm::Value* j0, int64_t nj, llvm::Value* k0, int64_t steps) {
    auto cPtr = [&](int64_t i, int64_t j) {
      llvm::Value* row = b_.CreateMul(b_.CreateAdd(i0, i64(i)), i64(kTileRows * cStride));
      return bytes(cT, b_.CreateAdd(row, b_.CreateMul(b_.CreateAdd(j0, i64(j)), i64(64))));
    };
    llvm::Value* c[2][2];
    for (int64_t i = 0; i < ni; ++i)
      for (int64_t j = 0; j < nj; ++j) c[i][j] = load(cPtr(i, j), cStride);
    for (int64_t s = 0; s < steps; ++s) {
      llvm::Value* k = b_.CreateAdd(k0, i64(s));
      llvm::Value *at[2], *bt[2];
      for (int64_t i = 0; i < ni; ++i) {
        llvm::Value* row = b_.CreateMul(b_.CreateAdd(i0, i64(i)), i64(kTileRows * aStride));
        at[i] = load(bytes(aT, b_.CreateAdd(row, b_.CreateMul(k, i64(kTileBytes)))), aStride);
      }
      for (int64_t j = 0; j < nj; ++j) {
        llvm::Value* panel = b_.CreateMul(b_.CreateAdd(j0, i64(j)), i64(panelBytes));
        bt[j] = load(bytes(bT, b_.CreateAdd(panel, b_.CreateMul(k, i64(kTileRows * kTileBytes)))), kTileBytes);
      }
      for (int64_t i = 0; i < ni; ++i)
        for (int64_t j = 0; j < nj; ++j)
          c[i][j] = b_.CreateIntrinsic(amx, tdp, {rows16, bytes64, bytes64, c[i][j], at[i], bt[j]});
    }
    for (int64_t i = 0; i < ni; ++i)
      for (int64_t j = 0; j < nj; ++j)
        b_.CreateIntrinsic(b_.getVoidTy(), llvm::Intrinsic::x86_tilestored64_internal,
                           {rows16, bytes64, cPtr(i, j), i64(cStride), c[i][j]});
  };
  // K in chunks of kChunk steps (each loads and stores its C tiles once).
  auto overK = [&](llvm::Value* i0, int64_t ni, llvm::Value* j0, int64_t nj) {
    if (Kt / kChunk)
      constLoop(0, Kt / kChunk, 1,
                [&](llvm::Value* kc) { block(i0, ni, j0, nj, b_.CreateMul(kc, i64(kChunk)), kChunk); });
    if (Kt % kChunk) block(i0, ni, j0, nj, i64(Kt / kChunk * kChunk), Kt % kChunk);
  };
  // Each block issues its share of the next iteration's prefetches before
  // its tiles (prefetch code branches, and no tile value may cross a block).
  const int64_t mBlocks = (Mt + 1) / 2, nBlocks = mBlocks * ((Nt + 1) / 2);
  const int64_t share = prefetch && units > 0 ? (units + nBlocks - 1) / nBlocks : 0;
  auto prefetchShare = [&](llvm::Value* i0, llvm::Value* j0) {
    if (!share) return;
    llvm::Value* blk = b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(j0, i64(2)), i64(mBlocks)), b_.CreateUDiv(i0, i64(2)));
    for (int64_t u = 0; u < share; ++u) prefetch(b_.CreateAdd(b_.CreateMul(blk, i64(share)), i64(u)));
  };
  auto overM = [&](llvm::Value* j0, int64_t nj) {
    if (Mt / 2)
      constLoop(0, Mt / 2 * 2, 2, [&](llvm::Value* i0) {
        prefetchShare(i0, j0);
        overK(i0, 2, j0, nj);
      });
    if (Mt % 2) {
      prefetchShare(i64(Mt - 1), j0);
      overK(i64(Mt - 1), 1, j0, nj);
    }
  };
  if (Nt / 2) constLoop(0, Nt / 2 * 2, 2, [&](llvm::Value* j0) { overM(j0, 2); });
  if (Nt % 2) overM(i64(Nt - 1), 1);

  if (staged) copyRows(cArr, N * 4, cT, cStride, M, N * 4);
}

}  // namespace tessera::codegen::cpu::detail

// Register-blocked microkernel for the CPU `dot` (see CpuDot.h).
//
// Loop order: N panels of NR columns outside, M blocks of MR rows inside.
// B arrives packed in panels (K rows of NR contiguous elements, 64 bytes per
// k on AVX2): the panel (K * NR * 4 bytes, 4 KiB for K = 64) is reused by
// every M block and stays in L1, and its rows are consecutive lines rather
// than lines a row of the tile apart, which in a 128-wide tile all fall
// into 8 of the 64 L1 sets. A arrives row-major with rows padded by one
// cache line (DotArrays::lda) so that the MR rows a block broadcasts from
// fall into different sets; its rows are read by broadcasts, which do not
// care about layout otherwise.
//
// Each micro-block also issues its share of the prefetches of the next
// iteration's operands (DotArrays::prefetch): spread over the blocks they
// do not stall the packing loops on a burst of misses.
//
// All trip counts are compile-time constants (tile shapes are static), so
// the edge blocks are separate straight-line instances: at most four per
// dot (full/partial rows x full/partial columns), each one small loop.
#include "codegen/cpu/CpuDot.h"

#include <functional>
#include <vector>

#include <llvm/IR/Constants.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "tessera/support/Error.h"

namespace tessera::codegen::cpu {

DotBlocking dotBlocking(const CpuTargetInfo& t, llvm::Type* elemTy) {
  DotBlocking d;
  unsigned bits = elemTy->getPrimitiveSizeInBits();
  TS_ASSERT(bits == 32, "dot kernel: compute type must be 32-bit");
  d.lanes = t.vectorBits / 32;
  d.nv = 2;
  // Accumulators + NV B vectors + one broadcast must fit the register file
  // (32 zmm with AVX-512, 16 ymm/xmm otherwise).
  d.mr = t.isa == "avx512" ? 14 : 6;
  return d;
}

namespace {

class Emitter {
 public:
  Emitter(llvm::IRBuilder<>& b, const CpuTargetInfo& t, const DotArrays& o)
      : b_(b), o_(o), blk_(dotBlocking(t, o.elemTy)) {
    fl_ = o.elemTy->isFloatTy();
    MR_ = blk_.mr;
    vt_ = llvm::FixedVectorType::get(o.elemTy, static_cast<unsigned>(blk_.lanes));
  }

  void run() {
    const int64_t NR = blk_.nr(), MR = blk_.mr;
    int64_t nFull = o_.N / NR * NR, mFull = o_.M / MR * MR;
    int64_t nRem = o_.N - nFull, mRem = o_.M - mFull;
    auto rows = [&](llvm::Value* col, int nv, int tail) {
      if (mFull) loop(0, mFull, MR, [&](llvm::Value* row) { micro(row, col, static_cast<int>(MR), nv, tail); });
      if (mRem) micro(i64(mFull), col, static_cast<int>(mRem), nv, tail);
    };
    if (nFull) loop(0, nFull, NR, [&](llvm::Value* col) { rows(col, blk_.nv, 0); });
    if (nRem) {
      int nv = static_cast<int>((nRem + blk_.lanes - 1) / blk_.lanes);
      rows(i64(nFull), nv, static_cast<int>(nRem % blk_.lanes));
    }
  }

 private:
  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }

  /// for (iv = lo; iv < hi; iv += step) body(iv); constant bounds, at least
  /// one iteration; a single iteration is emitted straight.
  void loop(int64_t lo, int64_t hi, int64_t step, const std::function<void(llvm::Value*)>& body) {
    if (hi - lo <= step) return body(i64(lo));
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(b_.getContext(), "dot.blk", f);
    auto* exit = llvm::BasicBlock::Create(b_.getContext(), "dot.blk.end", f);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2);
    iv->addIncoming(i64(lo), pre);
    body(iv);
    llvm::Value* next = b_.CreateAdd(iv, i64(step), "", true, true);
    iv->addIncoming(next, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpSLT(next, i64(hi)), head, exit);
    b_.SetInsertPoint(exit);
  }

  llvm::Constant* laneMask(int tail) {
    std::vector<llvm::Constant*> m;
    for (int i = 0; i < blk_.lanes; ++i) m.push_back(b_.getInt1(i < tail));
    return llvm::ConstantVector::get(m);
  }
  llvm::Value* at(llvm::Value* arr, llvm::Value* idx) { return b_.CreateInBoundsGEP(o_.elemTy, arr, idx); }
  llvm::Value* loadVec(llvm::Value* p, bool masked, int tail) {
    if (!masked) return b_.CreateAlignedLoad(vt_, p, llvm::Align(4));
    return b_.CreateMaskedLoad(vt_, p, llvm::Align(4), laneMask(tail), llvm::Constant::getNullValue(vt_));
  }
  void storeVec(llvm::Value* v, llvm::Value* p, bool masked, int tail) {
    if (!masked)
      b_.CreateAlignedStore(v, p, llvm::Align(4));
    else
      b_.CreateMaskedStore(v, p, llvm::Align(4), laneMask(tail));
  }
  llvm::Value* madd(llvm::Value* a, llvm::Value* x, llvm::Value* acc) {
    // fmuladd: one FMA instruction wherever the ISA has FMA, mul + add on
    // plain SSE2 (llvm.fma would become a libm call there).
    if (fl_) return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt_}, {a, x, acc});
    return b_.CreateAdd(b_.CreateMul(a, x), acc);
  }

  /// C[row .. row+mr, col .. col+nv*L) += A[row.., :] B[:, col..]; if
  /// `tail` > 0 only the first `tail` lanes of the last vector are real.
  void micro(llvm::Value* row, llvm::Value* col, int mr, int nv, int tail) {
    const int64_t L = blk_.lanes, N = o_.N, K = o_.K;
    auto masked = [&](int v) { return tail > 0 && v == nv - 1; };
    std::vector<llvm::Value*> cRow(mr), aRow(mr);
    std::vector<llvm::Value*> acc(static_cast<size_t>(mr * nv));
    for (int i = 0; i < mr; ++i) {
      llvm::Value* r = b_.CreateAdd(row, i64(i));
      cRow[i] = at(o_.c, b_.CreateAdd(b_.CreateMul(r, i64(N)), col));
      aRow[i] = at(o_.a, b_.CreateMul(r, i64(o_.lda)));
      for (int v = 0; v < nv; ++v)
        acc[i * nv + v] = loadVec(b_.CreateConstInBoundsGEP1_64(o_.elemTy, cRow[i], v * L), masked(v), tail);
    }
    // B's panel of columns [col, col + NR): K rows of NR, contiguous.
    const int64_t NR = blk_.nr();
    llvm::Value* bCol = at(o_.b, b_.CreateMul(col, i64(K)));
    // This block's share of the prefetches (before its k loop, so that the
    // requests are in flight while it computes).
    if (o_.prefetch && o_.prefetchUnits > 0) {
      const int64_t nMB = (o_.M + MR_ - 1) / MR_, nP = (o_.N + NR - 1) / NR;
      const int64_t q = (o_.prefetchUnits + nMB * nP - 1) / (nMB * nP);
      llvm::Value* blk =
          b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(col, i64(NR)), i64(nMB)), b_.CreateUDiv(row, i64(MR_)));
      for (int64_t u = 0; u < q; ++u) o_.prefetch(b_.CreateAdd(b_.CreateMul(blk, i64(q)), i64(u)));
    }
    // One k step: NV loads of B's row k, MR broadcasts of A's column k.
    auto step = [&](llvm::Value* k, std::vector<llvm::Value*>& cur) {
      llvm::Value* bRow = at(bCol, b_.CreateMul(k, i64(NR)));
      std::vector<llvm::Value*> bv(nv);
      for (int v = 0; v < nv; ++v)
        bv[v] = loadVec(b_.CreateConstInBoundsGEP1_64(o_.elemTy, bRow, v * L), masked(v), tail);
      for (int i = 0; i < mr; ++i) {
        llvm::Value* ae = b_.CreateAlignedLoad(o_.elemTy, at(aRow[i], k), llvm::Align(4));
        llvm::Value* av = b_.CreateVectorSplat(static_cast<unsigned>(L), ae);
        for (int v = 0; v < nv; ++v) cur[i * nv + v] = madd(av, bv[v], cur[i * nv + v]);
      }
    };
    // One k step per iteration: unrolling by 4 measured no faster (the
    // loop is FMA-bound) and compiled 10% slower.
    if (K == 1) {
      step(i64(0), acc);
    } else {
      // The accumulators are loop-carried SSA values (phis): registers.
      llvm::Function* f = b_.GetInsertBlock()->getParent();
      llvm::BasicBlock* pre = b_.GetInsertBlock();
      auto* body = llvm::BasicBlock::Create(b_.getContext(), "dot.k", f);
      auto* exit = llvm::BasicBlock::Create(b_.getContext(), "dot.k.end", f);
      b_.CreateBr(body);
      b_.SetInsertPoint(body);
      llvm::PHINode* k = b_.CreatePHI(b_.getInt64Ty(), 2, "k");
      k->addIncoming(i64(0), pre);
      std::vector<llvm::PHINode*> phis;
      std::vector<llvm::Value*> cur;
      for (llvm::Value* a : acc) {
        llvm::PHINode* p = b_.CreatePHI(vt_, 2);
        p->addIncoming(a, pre);
        phis.push_back(p);
        cur.push_back(p);
      }
      step(k, cur);
      llvm::Value* next = b_.CreateAdd(k, i64(1), "", true, true);
      llvm::BasicBlock* latch = b_.GetInsertBlock();
      k->addIncoming(next, latch);
      for (size_t j = 0; j < phis.size(); ++j) phis[j]->addIncoming(cur[j], latch);
      b_.CreateCondBr(b_.CreateICmpSLT(next, i64(K)), body, exit);
      b_.SetInsertPoint(exit);
      acc = cur;  // dominate the exit: the body is the only predecessor
    }
    for (int i = 0; i < mr; ++i)
      for (int v = 0; v < nv; ++v)
        storeVec(acc[i * nv + v], b_.CreateConstInBoundsGEP1_64(o_.elemTy, cRow[i], v * L), masked(v), tail);
  }

  llvm::IRBuilder<>& b_;
  const DotArrays& o_;
  DotBlocking blk_;
  bool fl_ = true;
  int64_t MR_ = 6;
  llvm::FixedVectorType* vt_ = nullptr;
};

}  // namespace

void emitDotKernel(llvm::IRBuilder<>& b, const CpuTargetInfo& t, const DotArrays& ops) {
  TS_ASSERT(ops.M >= 1 && ops.N >= 1 && ops.K >= 1, "dot kernel: empty tile");
  TS_ASSERT(ops.elemTy->isFloatTy() || ops.elemTy->isIntegerTy(32), "dot kernel: compute type must be f32 or i32");
  Emitter(b, t, ops).run();
}

void legalizeBf16MaskedMemory(llvm::Module& m) {
  auto isBf16Vec = [](llvm::Type* t) { return t->isVectorTy() && t->getScalarType()->isBFloatTy(); };
  std::vector<llvm::IntrinsicInst*> work;
  for (llvm::Function& f : m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb) {
        auto* ii = llvm::dyn_cast<llvm::IntrinsicInst>(&i);
        if (!ii) continue;
        switch (ii->getIntrinsicID()) {
          case llvm::Intrinsic::masked_load:
          case llvm::Intrinsic::masked_gather:
            if (isBf16Vec(ii->getType())) work.push_back(ii);
            break;
          case llvm::Intrinsic::masked_store:
          case llvm::Intrinsic::masked_scatter:
            if (isBf16Vec(ii->getArgOperand(0)->getType())) work.push_back(ii);
            break;
          default: break;
        }
      }
  for (llvm::IntrinsicInst* ii : work) {
    llvm::IRBuilder<> b(ii);
    auto* bt = llvm::cast<llvm::FixedVectorType>(ii->getIntrinsicID() == llvm::Intrinsic::masked_load ||
                                                         ii->getIntrinsicID() == llvm::Intrinsic::masked_gather
                                                     ? ii->getType()
                                                     : ii->getArgOperand(0)->getType());
    auto* it = llvm::FixedVectorType::get(b.getInt16Ty(), bt->getNumElements());
    auto align = [&](unsigned arg) { return ii->getParamAlign(arg).valueOrOne(); };
    switch (ii->getIntrinsicID()) {
      case llvm::Intrinsic::masked_load: {
        llvm::Value* v = b.CreateMaskedLoad(it, ii->getArgOperand(0), align(0), ii->getArgOperand(1),
                                            b.CreateBitCast(ii->getArgOperand(2), it));
        ii->replaceAllUsesWith(b.CreateBitCast(v, bt));
        break;
      }
      case llvm::Intrinsic::masked_gather: {
        llvm::Value* v = b.CreateMaskedGather(it, ii->getArgOperand(0), align(0), ii->getArgOperand(1),
                                              b.CreateBitCast(ii->getArgOperand(2), it));
        ii->replaceAllUsesWith(b.CreateBitCast(v, bt));
        break;
      }
      case llvm::Intrinsic::masked_store:
        b.CreateMaskedStore(b.CreateBitCast(ii->getArgOperand(0), it), ii->getArgOperand(1), align(1),
                            ii->getArgOperand(2));
        break;
      default:
        b.CreateMaskedScatter(b.CreateBitCast(ii->getArgOperand(0), it), ii->getArgOperand(1), align(1),
                              ii->getArgOperand(2));
        break;
    }
    ii->eraseFromParent();
  }
}

}  // namespace tessera::codegen::cpu

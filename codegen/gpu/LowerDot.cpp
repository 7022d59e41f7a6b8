// Dots: the FMA loop through shared memory, and tensor-core dots with
// their operand staging (GpuDot.h).

#include <algorithm>
#include <numeric>

#include <llvm/IR/Intrinsics.h>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

// ======================================================================== dot

void Lower::emitDot(const ir::Op& op) {
  const ir::Value* a = op.operand(0);
  const ir::Value* bv = op.operand(1);
  const ir::Value* acc = op.operand(2);
  int64_t M = a->type().shape()[0], K = a->type().shape()[1], N = bv->type().shape()[1];
  DType in = a->type().dtype(), out = acc->type().dtype();
  const ir::Layout& l = la_.get(op.result());
  if (l.parent.mma != ir::MmaKind::None) return emitTensorCoreDot(op, l);
  // The accumulator first: a layout conversion uses this op's scratch area,
  // which the operands occupy below.
  Slots init = tileIn(acc, l);
  bool fl = isFloat(out);
  llvm::Type* it = memTyOf(in);
  uint64_t eb = bytesOf(it);
  uint64_t aBytes = (static_cast<uint64_t>(M * K) * eb + 15) & ~uint64_t{15};
  llvm::Value* base = scratch(aBytes + static_cast<uint64_t>(K * N) * eb);
  llvm::Value* bBase = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), base, aBytes);
  // Both operands row-major in shared memory, then one FMA chain per
  // accumulator element (tensor cores come later).
  beforeShared();
  for (auto [v, dst] : {std::pair{a, base}, std::pair{bv, bBase}}) {
    const TileV& tv = tile(v);
    ir::SlotTable t = ir::slotTable(tv.layout, v->type().shape());
    guarded(ownerPred(tv.layout, t), [&, v = v, dst = dst] {  // one writer per element
      Slots bs = bases(tv.layout, t);
      for (size_t i = 0; i < t.size(); ++i)
        b_.CreateStore(tv.slots[i], b_.CreateInBoundsGEP(it, dst, linear(indexOf(bs, t, i), v->type().shape())));
    });
  }
  barrier();
  smemDirty_ = true;
  ir::SlotTable t = ir::slotTable(l, {M, N});
  Slots bs = bases(l, t);
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* body = llvm::BasicBlock::Create(ctx_, "dot.k", fn);
  auto* exit = llvm::BasicBlock::Create(ctx_, "dot.end", fn);
  b_.CreateBr(body);
  b_.SetInsertPoint(body);
  llvm::PHINode* k = b_.CreatePHI(b_.getInt32Ty(), 2, "k");
  k->addIncoming(i32(0), pre);
  std::vector<llvm::PHINode*> phis;
  Slots next;
  auto toC = [&](llvm::Value* x) -> llvm::Value* {
    if (!fl) return b_.CreateSExt(x, b_.getInt32Ty());
    return x->getType()->isFloatTy() ? x : b_.CreateFPExt(x, b_.getFloatTy());
  };
  for (size_t i = 0; i < t.size(); ++i) {
    llvm::PHINode* p = b_.CreatePHI(init[i]->getType(), 2);
    p->addIncoming(init[i], pre);
    phis.push_back(p);
  }
  for (size_t i = 0; i < t.size(); ++i) {
    llvm::PHINode* p = phis[i];
    llvm::Value* m = b_.CreateAdd(bs[0], i32(t.consts[i][0]));
    llvm::Value* n = b_.CreateAdd(bs[1], i32(t.consts[i][1]));
    llvm::Value* av = toC(b_.CreateLoad(it, b_.CreateInBoundsGEP(it, base, b_.CreateAdd(b_.CreateMul(m, i32(K)), k))));
    llvm::Value* bw = toC(b_.CreateLoad(it, b_.CreateInBoundsGEP(it, bBase, b_.CreateAdd(b_.CreateMul(k, i32(N)), n))));
    next.push_back(fl ? b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {b_.getFloatTy()}, {av, bw, p})
                      : b_.CreateAdd(b_.CreateMul(av, bw), p));
  }
  llvm::Value* k1 = b_.CreateAdd(k, i32(1));
  for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], body);
  k->addIncoming(k1, body);
  b_.CreateCondBr(b_.CreateICmpSLT(k1, i32(K)), body, exit);
  b_.SetInsertPoint(exit);
  tiles_[op.result()] = TileV{l, next};
}

/// Writes one dot operand into its tensor-core staging buffer. Runs of
/// consecutive elements along the operand's last dim become one vector
/// store when the buffer keeps them contiguous (not transposed) and
/// aligned; only one of the threads holding a replicated element writes it.
void Lower::stageOperand(const ir::Value* v, llvm::Value* base, const DotStaging& st, bool transposed) {
  const TileV& tv = tile(v);
  const auto& shape = v->type().shape();
  ir::SlotTable t = ir::slotTable(tv.layout, shape);
  llvm::Type* et = memTyOf(v->type().dtype());
  int64_t run = std::min(tv.layout.parent.spt[tv.layout.dims[1]], shape[1]);
  int64_t vec = transposed ? 1 : std::gcd(run, st.maxVec);
  ++record_.dotOperandStagings;
  guarded(ownerPred(tv.layout, t), [&] {
    Slots bs = bases(tv.layout, t);
    for (size_t i = 0; i < t.size(); i += static_cast<size_t>(vec)) {
      Slots idx = indexOf(bs, t, i);
      llvm::Value* row = transposed ? idx[1] : idx[0];
      llvm::Value* col = transposed ? idx[0] : idx[1];
      llvm::Value* p = b_.CreateInBoundsGEP(et, base, stagingIndex(b_, st, row, col));
      if (vec == 1) {
        b_.CreateStore(tv.slots[i], p);
        continue;
      }
      llvm::Value* x = llvm::PoisonValue::get(llvm::FixedVectorType::get(et, static_cast<unsigned>(vec)));
      for (int64_t e = 0; e < vec; ++e) x = b_.CreateInsertElement(x, tv.slots[i + static_cast<size_t>(e)], e);
      b_.CreateAlignedStore(x, p, llvm::Align(static_cast<uint64_t>(vec) * bytesOf(et)));
    }
  });
}

void Lower::emitTensorCoreDot(const ir::Op& op, const ir::Layout& l) {
  const ir::Value* a = op.operand(0);
  const ir::Value* bv = op.operand(1);
  const ir::Value* acc = op.operand(2);
  int64_t M = a->type().shape()[0], K = a->type().shape()[1], N = bv->type().shape()[1];
  TensorCoreOp tc = t_.tensorCore(a->type().dtype(), acc->type().dtype());
  TensorCoreDotPlan p = planTensorCoreDot(tc, a->type().dtype(), M, N, K, l.parent);
  Slots init = tileIn(acc, l);  // before the staging: a conversion uses this op's scratch
  // Operands read straight from their swizzled shared slot (planDirectDots)
  // use the slot's address and layout; the others are staged.
  bool directA = directOperands_.count({&op, 0}) != 0, directB = directOperands_.count({&op, 1}) != 0;
  auto slotOf = [&](const ir::Value* v) {
    const ir::Value* buf = v->definingOp()->operand(0);
    const Storage& sg = storage_.at(rootBuffer(buf));
    const DotStaging& want = v == a ? p.a : p.b;
    TS_ASSERT(sg.st.rows == want.rows && sg.st.cols == want.cols && sg.st.stride == want.stride &&
                  sg.st.swizzle == want.swizzle && sg.transposed == (v == bv && p.bTransposed),
              "direct dot operand: slot layout differs from the staging layout");
    return scalar(buf);
  };
  llvm::Value* base = nullptr;
  llvm::Value* bBase = nullptr;
  if (!directA || !directB) {
    llvm::Value* s = scratch(directA ? p.b.bytes() : p.totalBytes());
    base = directA ? nullptr : s;
    bBase = directB ? nullptr : directA ? s : b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), s, p.aBytes);
  }
  if (directA) base = slotOf(a);
  if (directB) bBase = slotOf(bv);
  // The staging stores and the fragment reads are named apart in the
  // emulator's reports (bank conflicts per phase of the dot).
  beforeShared();
  if (!directA || !directB) {
    setTag(op, "operand staging");
    if (!directA) stageOperand(a, base, p.a, false);
    if (!directB) stageOperand(bv, bBase, p.b, p.bTransposed);
    setCurrentOp(op);
    barrier();
    smemDirty_ = true;
  }
  setTag(op, "fragments");
  tiles_[op.result()] = TileV{l, codegen::emitTensorCoreDot(b_, m_, p, base, bBase, lane_, warp_, std::move(init))};
  setCurrentOp(op);
}

}  // namespace tessera::codegen::gpu_lower

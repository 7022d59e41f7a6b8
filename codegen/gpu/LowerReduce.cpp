// Reductions: within the thread, across lanes (shuffles), across warps
// (shared memory).

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <llvm/IR/Intrinsics.h>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

// ================================================================= reductions

llvm::Value* Lower::shuffleXor(llvm::Value* v, unsigned mask, bool uniformGroups) {
  auto exchange = [&](llvm::Value* x) {
    return uniformGroups ? t_.shuffleXorOfUniformGroups(b_, x, mask) : t_.shuffleXor(b_, x, mask);
  };
  llvm::Type* ty = v->getType();
  unsigned bits = static_cast<unsigned>(m_.getDataLayout().getTypeSizeInBits(ty));
  llvm::Type* it = b_.getIntNTy(bits);
  llvm::Value* x = ty->isIntegerTy() ? v : b_.CreateBitCast(v, it);
  llvm::Value* r;
  if (bits <= 32) {
    r = b_.CreateTrunc(exchange(b_.CreateZExt(x, b_.getInt32Ty())), it);
  } else {
    TS_ASSERT(bits == 64, "shuffle of a value wider than 64 bits");
    llvm::Value* lo = b_.CreateTrunc(x, b_.getInt32Ty());
    llvm::Value* hi = b_.CreateTrunc(b_.CreateLShr(x, 32), b_.getInt32Ty());
    lo = exchange(lo);
    hi = exchange(hi);
    r = b_.CreateOr(b_.CreateZExt(lo, it), b_.CreateShl(b_.CreateZExt(hi, it), 32));
  }
  return ty->isIntegerTy() ? r : b_.CreateBitCast(r, ty);
}

void Lower::emitReduce(const ir::Op& op) {
  const ir::Value* in = op.operand(0);
  const std::string& kind = op.strAttr("kind");
  int axis = static_cast<int>(op.intAttr("axis"));
  const auto& shape = in->type().shape();
  DType dt = in->type().dtype();
  bool fl = isFloat(dt);
  bool narrow = dt == DType::F16 || dt == DType::BF16;
  // argmax / argmin: a running best value and its index.
  bool argmax = kind == "argmax" || kind == "argmin";
  bool lowest = kind == "argmin";
  TS_ASSERT(ir::isReduceKind(kind), "reduce: unverified kind '" + kind + "' at " + op.loc().str());
  llvm::Type* ct = narrow ? b_.getFloatTy() : scalarTy(dt);
  const TileV& src = tile(in);
  const ir::Layout& l = src.layout;
  int pa = l.dims[axis];
  ir::SlotTable t = ir::slotTable(l, shape);

  struct RV {
    llvm::Value* v;
    llvm::Value* idx;  // argmax / argmin: i32 position along the axis
  };
  auto better = [&](llvm::Value* x, llvm::Value* best) -> llvm::Value* {
    if (!fl) {
      if (lowest) return comparesUnsigned(dt) ? b_.CreateICmpULT(x, best) : b_.CreateICmpSLT(x, best);
      return comparesUnsigned(dt) ? b_.CreateICmpUGT(x, best) : b_.CreateICmpSGT(x, best);
    }
    // NaN is the maximum for argmax (as for max) and the minimum for argmin
    // (as for min); strict so the first index wins.
    llvm::Value* strict = lowest ? b_.CreateFCmpOLT(x, best) : b_.CreateFCmpOGT(x, best);
    return b_.CreateOr(strict, b_.CreateAnd(b_.CreateFCmpUNO(x, x), b_.CreateFCmpORD(best, best)));
  };
  auto combine = [&](RV a, RV x) -> RV {
    if (argmax) {
      llvm::Value* eq = fl ? b_.CreateOr(b_.CreateFCmpOEQ(x.v, a.v),
                                         b_.CreateAnd(b_.CreateFCmpUNO(x.v, x.v), b_.CreateFCmpUNO(a.v, a.v)))
                           : b_.CreateICmpEQ(x.v, a.v);
      llvm::Value* take = b_.CreateOr(better(x.v, a.v), b_.CreateAnd(eq, b_.CreateICmpSLT(x.idx, a.idx)));
      return {b_.CreateSelect(take, x.v, a.v), b_.CreateSelect(take, x.idx, a.idx)};
    }
    if (kind == "sum") return {fl ? b_.CreateFAdd(a.v, x.v) : b_.CreateAdd(a.v, x.v), nullptr};
    bool isMin = kind == "min";
    if (fl)
      return {b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::minimum : llvm::Intrinsic::maximum, a.v, x.v), nullptr};
    if (comparesUnsigned(dt))
      return {b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::umin : llvm::Intrinsic::umax, a.v, x.v), nullptr};
    return {b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::smin : llvm::Intrinsic::smax, a.v, x.v), nullptr};
  };

  // 1. Within the thread: fold the slots along the axis, per output slot.
  std::vector<int64_t> outShape = shape;
  outShape.erase(outShape.begin() + axis);
  Slots bs = bases(l, t);
  std::map<std::vector<int64_t>, RV> acc;
  std::vector<std::vector<int64_t>> keys;  // in first-seen (row-major) order
  for (size_t i = 0; i < t.size(); ++i) {
    std::vector<int64_t> k = t.consts[i];
    k.erase(k.begin() + axis);
    llvm::Value* x = narrow ? b_.CreateFPExt(src.slots[i], ct) : src.slots[i];
    RV rv{x, argmax ? b_.CreateAdd(bs[axis], i32(t.consts[i][axis])) : nullptr};
    auto it = acc.find(k);
    if (it == acc.end()) {
      acc.emplace(k, rv);
      keys.push_back(k);
    } else {
      it->second = combine(it->second, rv);
    }
  }
  // 2. Across the lanes of the warp along the axis: butterfly over the lane
  // bits that hold distinct elements.
  int64_t tpw = l.parent.tpw[pa];
  int64_t distinct = t.distinctPos[axis];
  int64_t laneStride = 1;
  for (int64_t d : l.parent.order) {
    if (d == pa) break;
    laneStride *= l.parent.tpw[d];
  }
  // Where the axis takes the lowest lane bits, each step after the first
  // finds the lanes below its mask agreeing (combine is symmetric), which
  // lets the target read any lane of the partner group.
  for (int64_t s = 1; s < std::min(tpw, distinct); s *= 2) {
    unsigned mask = static_cast<unsigned>(s * laneStride);
    const bool uniform = laneStride == 1;
    for (auto& k : keys) {
      RV& a = acc.at(k);
      RV other{shuffleXor(a.v, mask, uniform), argmax ? shuffleXor(a.idx, mask, uniform) : nullptr};
      a = combine(a, other);
    }
  }
  // 3. Across warps through shared memory; every thread reads every
  // partial and combines them in warp order, so all threads agree.
  int64_t wd = distinct > tpw ? distinct / tpw : 1;
  if (wd > 1) {
    int64_t nOut = 1;
    for (int64_t s : outShape) nOut *= s;
    uint64_t vbytes = bytesOf(ct);
    uint64_t valsBytes = (static_cast<uint64_t>(nOut * wd) * vbytes + 3) & ~uint64_t{3};
    llvm::Value* base = scratch(valsBytes + (argmax ? static_cast<uint64_t>(nOut * wd) * 4 : 0));
    llvm::Value* idxBase = argmax ? b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), base, valsBytes) : nullptr;
    llvm::Value* wpos = warpPos(l.parent, pa);
    beforeShared();
    auto outLinear = [&](const std::vector<int64_t>& k) -> llvm::Value* {
      Slots idx;
      size_t j = 0;
      for (size_t i = 0; i < shape.size(); ++i)
        if (static_cast<int>(i) != axis) idx.push_back(b_.CreateAdd(bs[i], i32(k[j++])));
      return linear(idx, outShape);
    };
    // One writer per warp partial: lane 0 along the axis, and one of the
    // threads holding copies of the same elements (lanes and warps along
    // dims the input is a slice of, or over which it is replicated). The
    // copies hold the same value, but several writes of one word in a
    // barrier interval are a race by the emulator's model.
    llvm::Value* writer = b_.CreateAnd(b_.CreateICmpEQ(lanePos(l.parent, pa), i32(0)), b_.CreateICmpULT(wpos, i32(wd)));
    if (llvm::Value* own = ownerPred(l, t)) writer = b_.CreateAnd(writer, own);
    guarded(writer, [&] {
      for (auto& k : keys) {
        llvm::Value* slot = b_.CreateAdd(b_.CreateMul(outLinear(k), i32(wd)), wpos);
        b_.CreateStore(acc.at(k).v, b_.CreateInBoundsGEP(ct, base, slot));
        if (argmax) b_.CreateStore(acc.at(k).idx, b_.CreateInBoundsGEP(b_.getInt32Ty(), idxBase, slot));
      }
    });
    barrier();
    smemDirty_ = true;
    for (auto& k : keys) {
      llvm::Value* first = b_.CreateMul(outLinear(k), i32(wd));
      RV r{nullptr, nullptr};
      for (int64_t w = 0; w < wd; ++w) {
        llvm::Value* slot = b_.CreateAdd(first, i32(w));
        RV x{b_.CreateLoad(ct, b_.CreateInBoundsGEP(ct, base, slot)),
             argmax ? b_.CreateLoad(b_.getInt32Ty(), b_.CreateInBoundsGEP(b_.getInt32Ty(), idxBase, slot)) : nullptr};
        r = w == 0 ? x : combine(r, x);
      }
      acc.at(k) = r;
    }
  }
  auto finish = [&](const RV& r) -> llvm::Value* {
    if (argmax) return r.idx;
    return narrow ? b_.CreateFPTrunc(r.v, scalarTy(dt)) : r.v;
  };
  if (!op.result()->type().isTile()) {
    TS_ASSERT(keys.size() == 1, "rank-1 reduce with several outputs");
    scalars_[op.result()] = finish(acc.at(keys[0]));
    return;
  }
  const ir::Layout& ol = la_.get(op.result());
  TS_ASSERT(ol == l.sliceDim(axis), "reduce result layout is not the slice of its input");
  ir::SlotTable to = ir::slotTable(ol, outShape);
  Slots out;
  for (auto& c : to.consts) out.push_back(finish(acc.at(c)));
  tiles_[op.result()] = TileV{ol, std::move(out)};
}

}  // namespace tessera::codegen::gpu_lower

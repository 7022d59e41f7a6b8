// Data movement between tiles: gather along an axis (through shared
// memory, like a layout conversion whose read addresses come from the index
// tile), join and split (in registers: each thread holds both halves of the
// elements it holds, converting split's operand first where it does not).

#include <algorithm>
#include <vector>

#include <llvm/IR/Intrinsics.h>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

void Lower::emitGather(const ir::Op& op) {
  const ir::Value* src = op.operand(0);
  const ir::Value* index = op.operand(1);
  const ir::Value* r = op.result();
  const ir::Layout& l = la_.get(r);
  const auto& shape = r->type().shape();
  const std::vector<int64_t> ss = src->type().shape();
  const auto axis = static_cast<size_t>(op.intAttr("axis"));
  const DType it = index->type().dtype();
  // The index in the result's layout: slot j of the result reads
  // src[.., index slot j, ..].
  const Slots idx = tileIn(index, l);
  const TileV& st = tile(src);
  auto srcLinear = [&](const Slots& at, size_t j) {
    // Widened to at least 32 bits by its signedness, clamped to the axis
    // (an out-of-range index reads some element of the row: IR.h leaves
    // its value unspecified, but it must never leave the scratch area).
    llvm::Value* k = idx[j];
    const unsigned bits = k->getType()->getIntegerBitWidth();
    if (bits < 32) k = isUnsigned(it) ? b_.CreateZExt(k, b_.getInt32Ty()) : b_.CreateSExt(k, b_.getInt32Ty());
    llvm::Type* kt = k->getType();
    k = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, k, llvm::ConstantInt::get(kt, 0));
    k = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, k,
                                 llvm::ConstantInt::get(kt, static_cast<uint64_t>(ss[axis] - 1)));
    Slots si = at;
    si[axis] = b_.CreateTrunc(k, b_.getInt32Ty());
    return linear(si, ss);
  };
  tiles_[r] = TileV{l, convertVia(st.slots, st.layout, ss, src->type().element(), l, shape, srcLinear)};
}

void Lower::emitJoin(const ir::Op& op) {
  const ir::Value* r = op.result();
  const ir::Layout& l = la_.get(r);
  const auto& shape = r->type().shape();
  const int last = static_cast<int>(shape.size()) - 1;
  const ir::Layout hl = l.sliceDim(last);
  const Slots a = tileIn(op.operand(0), hl);
  const Slots b = tileIn(op.operand(1), hl);
  ir::SlotTable t = ir::slotTable(l, shape);
  ir::SlotTable th = ir::slotTable(hl, op.operand(0)->type().shape());
  Slots bs = bases(l, t);
  Slots out;
  for (size_t i = 0; i < t.size(); ++i) {
    std::vector<int64_t> c = t.consts[i];
    const int64_t k = c.back();
    c.pop_back();
    auto h = th.index.find(c);
    TS_ASSERT(h != th.index.end(), "gpu lowering: join operand slot missing");
    // Position along the last dim: a constant where each thread holds the
    // whole pair (the layout analysis' choice), else the thread's.
    llvm::Value* pos = b_.CreateAdd(bs[static_cast<size_t>(last)], i32(k));
    out.push_back(b_.CreateSelect(b_.CreateICmpEQ(pos, i32(0)), a[h->second], b[h->second]));
  }
  tiles_[r] = TileV{l, std::move(out)};
}

void Lower::emitSplit(const ir::Op& op) {
  const ir::Value* x = op.operand(0);
  const auto& xshape = x->type().shape();
  const int last = static_cast<int>(xshape.size()) - 1;
  const ir::Layout& rl = la_.get(op.result(0));
  TS_ASSERT(la_.get(op.result(1)) == rl, "split results in different layouts");
  // x's own layout when each thread holds both halves of its elements and
  // the halves are its slice, else one that does (x converted once).
  const ir::Layout& xl = la_.get(x);
  const int p = xl.dims[static_cast<size_t>(last)];
  const bool pairInThread = xl.parent.tpw[p] * xl.parent.wpb[p] == 1 && xl.sliceDim(last) == rl;
  const ir::Layout use = pairInThread ? xl : rl.withTrivialDim(last);
  const Slots xs = tileIn(x, use);
  ir::SlotTable tx = ir::slotTable(use, xshape);
  ir::SlotTable tr = ir::slotTable(rl, op.result(0)->type().shape());
  Slots lo, hi;
  for (const auto& c : tr.consts) {
    std::vector<int64_t> k = c;
    k.push_back(0);
    auto i0 = tx.index.find(k);
    k.back() = 1;
    auto i1 = tx.index.find(k);
    TS_ASSERT(i0 != tx.index.end() && i1 != tx.index.end(), "gpu lowering: split pair not in one thread");
    lo.push_back(xs[i0->second]);
    hi.push_back(xs[i1->second]);
  }
  tiles_[op.result(0)] = TileV{rl, std::move(lo)};
  tiles_[op.result(1)] = TileV{rl, std::move(hi)};
}

}  // namespace tessera::codegen::gpu_lower

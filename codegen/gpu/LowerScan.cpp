// Scans (inclusive prefix combinations along an axis): within the thread,
// across lanes (xor shuffles), across warps (shared memory), then across the
// repetitions of the layout's block tile.
//
// Along the scanned parent dim p an element's index is
//   rep * blockTile + (warpPos * tpw + lanePos) * spt + s      (Layout.h)
// so elements are ordered by repetition, then warp, then lane, then the
// thread's own slot. Each (other-dims position, repetition) is one chain:
//  1. the thread scans its spt slots sequentially (total T);
//  2. lanes exchange totals over log2(tpw) xor-shuffle levels: at level m
//     a lane in the upper half of a pair of m-lane groups prepends the lower
//     group's total to its exclusive prefix, and both halves combine their
//     group totals in order (lower first), so a combine need not commute;
//  3. with several warps along p, each warp's total goes to shared memory
//     and every thread combines the totals of the warps before its own;
//  4. repetitions are in order: each starts from the total of those before.
// An element's result is carry(rep) . warps before . lanes before . its own
// inclusive slot prefix, where "." is the combine and absent parts (lane 0,
// warp 0, the first repetition) are skipped by selects, so no identity
// element is needed for a user's combine function.

#include <algorithm>
#include <map>
#include <vector>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

llvm::Value* Lower::combineOf(const ir::Op& scan, llvm::Value* a, llvm::Value* b) {
  llvm::Value* r = emitCombineRegion(
      scan.region(0).block(), a, b, [&](const ir::Value* v) { return scalar(v); },
      [&](const ir::Op& op, std::vector<llvm::Value*> v) {
        return op.code() == OpCode::Constant ? constantOf(op, elemTy(op.result()->type())) : compute(op, std::move(v));
      });
  return r;
}

void Lower::emitScan(const ir::Op& op) {
  const ir::Value* in = op.operand(0);
  const int axis = static_cast<int>(op.intAttr("axis"));
  const auto& shape = in->type().shape();
  const ir::Layout& l = la_.get(op.result());
  const Slots src = tileIn(in, l);
  const ir::SlotTable t = ir::slotTable(l, shape);
  const int pa = l.dims[axis];
  const int64_t tpw = l.parent.tpw[pa];
  const int64_t blockTile = l.parent.blockTile(pa);
  const int64_t distinct = t.distinctPos[axis];
  llvm::Type* et = elemTy(op.result()->type());
  auto combine = [&](llvm::Value* a, llvm::Value* b) { return combineOf(op, a, b); };
  // Optional values: `has` false means "no elements" (skipped by combine).
  struct Opt {
    llvm::Value* v = nullptr;
    llvm::Value* has = nullptr;  // i1; nullptr: known present
  };
  auto pick = [&](llvm::Value* c, llvm::Value* x, llvm::Value* y) { return c ? b_.CreateSelect(c, x, y) : x; };
  // x . y where x may be absent (y is present).
  auto prepend = [&](const Opt& x, llvm::Value* y) -> llvm::Value* {
    if (!x.v) return y;
    return pick(x.has, combine(x.v, y), y);
  };
  // x . y where both may be absent.
  auto join = [&](const Opt& x, const Opt& y) -> Opt {
    if (!x.v) return y;
    if (!y.v) return x;
    llvm::Value* both = combine(x.v, y.v);
    if (!x.has && !y.has) return {both, nullptr};
    llvm::Value* v = x.has ? b_.CreateSelect(x.has, y.has ? b_.CreateSelect(y.has, both, x.v) : both, y.v)
                           : b_.CreateSelect(y.has, both, x.v);
    llvm::Value* has = x.has && y.has ? b_.CreateOr(x.has, y.has) : nullptr;
    return {v, has};
  };

  // 1. Chains: slots grouped by (other-dims consts, repetition), in order of s.
  using Key = std::pair<std::vector<int64_t>, int64_t>;
  std::map<Key, std::vector<size_t>> chains;
  std::vector<Key> order;
  for (size_t i = 0; i < t.size(); ++i) {
    std::vector<int64_t> k = t.consts[i];
    int64_t c = k[axis];
    k.erase(k.begin() + axis);
    Key key{k, c / blockTile};
    auto [it, fresh] = chains.try_emplace(key);
    if (fresh) order.push_back(key);
    it->second.push_back(i);
  }
  Slots out(t.size());
  std::map<Key, llvm::Value*> total;  // the thread's chain total, then its group's
  for (const Key& k : order) {
    auto& idx = chains.at(k);
    std::sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return t.consts[x][axis] < t.consts[y][axis]; });
    llvm::Value* acc = src[idx[0]];
    out[idx[0]] = acc;
    for (size_t j = 1; j < idx.size(); ++j) out[idx[j]] = acc = combine(acc, src[idx[j]]);
    total[k] = acc;
  }

  // 2. Across lanes: exclusive prefix of the lanes before, per chain.
  std::map<Key, Opt> laneExcl;
  int64_t laneStride = 1;
  for (int64_t d : l.parent.order) {
    if (d == pa) break;
    laneStride *= l.parent.tpw[d];
  }
  const int64_t levels = std::min(tpw, distinct);
  llvm::Value* lp = levels > 1 ? lanePos(l.parent, pa) : nullptr;
  for (int64_t m = 1; m < levels; m *= 2) {
    llvm::Value* upper = b_.CreateICmpNE(b_.CreateAnd(lp, i32(m)), i32(0));
    for (const Key& k : order) {
      llvm::Value* mine = total.at(k);
      llvm::Value* other = shuffleXor(mine, static_cast<unsigned>(m * laneStride));
      Opt& e = laneExcl[k];
      // Upper half: the lower group's total comes first.
      llvm::Value* lowerFirst = combine(other, mine);
      llvm::Value* upperFirst = combine(mine, other);
      total[k] = b_.CreateSelect(upper, lowerFirst, upperFirst);
      Opt withOther = join(Opt{other, nullptr}, e);
      e = e.v ? Opt{b_.CreateSelect(upper, withOther.v, e.v), b_.CreateOr(upper, e.has)} : Opt{other, upper};
    }
  }

  // 3. Across warps: every warp's group total through shared memory.
  const int64_t wd = distinct > tpw ? distinct / tpw : 1;
  std::map<Key, Opt> warpExcl;
  std::map<Key, llvm::Value*> repTotal = total;
  if (wd > 1) {
    std::vector<int64_t> outShape = shape;
    outShape.erase(outShape.begin() + axis);
    int64_t nOut = 1;
    for (int64_t s : outShape) nOut *= s;
    const int64_t reps = std::max<int64_t>(1, shape[axis] / blockTile);
    const uint64_t eb = bytesOf(et);
    llvm::Value* base = scratch(static_cast<uint64_t>(nOut * reps * wd) * eb);
    Slots bs = bases(l, t);
    // Duplicated warps (a tile narrower than the block) act as their original.
    llvm::Value* wpos = b_.CreateAnd(warpPos(l.parent, pa), i32(wd - 1));
    auto slotOf = [&](const Key& k) -> llvm::Value* {
      Slots oi;
      size_t j = 0;
      for (size_t i = 0; i < shape.size(); ++i)
        if (static_cast<int>(i) != axis) oi.push_back(b_.CreateAdd(bs[i], i32(k.first[j++])));
      llvm::Value* o = outShape.empty() ? i32(0) : linear(oi, outShape);
      return b_.CreateMul(b_.CreateAdd(b_.CreateMul(o, i32(reps)), i32(k.second)), i32(wd));
    };
    beforeShared();
    // One writer per warp total: lane 0 along p, and one of the threads
    // holding copies of the same elements.
    llvm::Value* writer = b_.CreateICmpEQ(lanePos(l.parent, pa), i32(0));
    writer = b_.CreateAnd(writer, b_.CreateICmpULT(warpPos(l.parent, pa), i32(wd)));
    if (llvm::Value* own = ownerPred(l, t)) writer = b_.CreateAnd(writer, own);
    guarded(writer, [&] {
      for (const Key& k : order)
        b_.CreateStore(total.at(k), b_.CreateInBoundsGEP(et, base, b_.CreateAdd(slotOf(k), wpos)));
    });
    barrier();
    smemDirty_ = true;
    for (const Key& k : order) {
      llvm::Value* first = slotOf(k);
      llvm::Value* run = nullptr;  // warps 0..w combined
      Opt before;
      for (int64_t w = 0; w < wd; ++w) {
        llvm::Value* x = b_.CreateLoad(et, b_.CreateInBoundsGEP(et, base, b_.CreateAdd(first, i32(w))));
        if (w > 0) {
          llvm::Value* isNext = b_.CreateICmpEQ(wpos, i32(w));
          before = before.v ? Opt{b_.CreateSelect(isNext, run, before.v), b_.CreateOr(isNext, before.has)}
                            : Opt{run, isNext};
        }
        run = run ? combine(run, x) : x;
      }
      warpExcl[k] = before;
      repTotal[k] = run;
    }
  }

  // 4. Repetitions in order, then each element's prefix.
  std::map<std::vector<int64_t>, Opt> carry;  // per other-dims key: the repetitions so far
  for (const Key& k : order) {
    Opt& c = carry[k.first];
    Opt pre = join(c, join(warpExcl[k], laneExcl[k]));
    for (size_t i : chains.at(k)) out[i] = prepend(pre, out[i]);
    c = join(c, Opt{repTotal.at(k), nullptr});
  }
  tiles_[op.result()] = TileV{l, std::move(out)};
}

}  // namespace tessera::codegen::gpu_lower

// The layout analysis: which layout each tile value of a kernel takes on a
// GPU target (the accesses' coalesced layouts, the dots' MMA layouts, and
// what propagates between them), with the vector width of each access and
// the constancy of masks. The algebra it works in is LayoutAlgebra.cpp.
#include "tessera/ir/ScaledDot.h"
#include "tessera/ir/analysis/Layout.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <numeric>
#include <tuple>
#include <unordered_set>

#include "tessera/ir/analysis/AxisInfo.h"
#include "tessera/ir/Atomics.h"
#include "tessera/support/Error.h"

namespace tessera::ir {

namespace {
// Ops whose value costs nothing to produce in any layout: the lowering
// re-emits them in whatever layout a consumer wants.
bool isFree(const ir::Value* v) {
  const ir::Op* d = v->definingOp();
  if (!d) return false;
  switch (d->code()) {
    case ir::OpCode::Constant:
    case ir::OpCode::Splat:
    case ir::OpCode::Arange: return true;
    case ir::OpCode::Broadcast:
    case ir::OpCode::ExpandDims: return isFree(d->operand(0));
    default: return false;
  }
}
}  // namespace

std::optional<Layout> LayoutAnalysis::dotLayout(const ir::Op& op) const {
  if (!tensorCore_ || op.code() != ir::OpCode::Dot) return std::nullopt;
  const ir::Value* a = op.operand(0);
  const ir::Value* b = op.operand(1);
  MmaKind k = tensorCore_(dotOperandElem(op, 0), dotOperandElem(op, 1), op.result()->type().dtype());
  if (k == MmaKind::None) return std::nullopt;
  // K in elements (a packed block-scaled dot holds two a byte).
  auto bl = mmaLayout(k, a->type().shape()[0], b->type().shape()[1], dotK(op), numWarps_, warpSize_,
                      chainedDots_.count(&op) != 0);
  if (!bl) return std::nullopt;
  return Layout::blocked(*bl);
}

LayoutAnalysis::LayoutAnalysis(const ir::Function& f, const AxisAnalysis& axis, int numWarps, int warpSize,
                               std::function<MmaKind(DType, DType, DType)> tensorCore)
    : axis_(axis), numWarps_(numWarps), warpSize_(warpSize), tensorCore_(std::move(tensorCore)) {
  auto& body = const_cast<ir::Function&>(f).body();
  findChainedDots(body);
  // Memory ops first: their vector widths decide the per-thread run length
  // of every layout of their shape, so producers and the access agree.
  ir::walk(body, [&](ir::Op& op) {
    unsigned pi = op.code() == ir::OpCode::Copy ? 1 : 0;
    switch (op.code()) {
      case ir::OpCode::Load:
      case ir::OpCode::Store:
      case ir::OpCode::Copy:
      case ir::OpCode::AtomicRmw:
      case ir::OpCode::AtomicCas: {
        const ir::Value* p = op.operand(pi);
        if (!p->type().isTile()) break;
        int64_t v = computeVec(op);
        vec_[&op] = v;
        int64_t& cur = vecForShape_[p->type().shape()];
        cur = std::max(cur, v);
        break;
      }
      default: break;
    }
  });
  propagateFromAccesses(body);
  std::function<void(const ir::Block&)> visitBlock = [&](const ir::Block& b) {
    for (auto& opPtr : b.ops()) {
      const ir::Op& op = *opPtr;
      if (op.code() == ir::OpCode::For) {
        const ir::Block& body = op.region(0).block();
        const ir::Op* yield = body.terminator();
        weak_.erase(&op);
        for (unsigned i = 0; i < op.numResults(); ++i) {
          const ir::Value* init = op.operand(3 + i);
          if (init->type().isTile()) {
            // A value carried to a memory op takes the access's layout, so
            // the loop carries it (a pointer tile advanced each iteration)
            // in that layout rather than converting it every iteration.
            const Layout* w = wanted(body.arg(i + 1));
            Layout l = w ? *w : get(init);
            // An accumulator carried through a tensor-core dot stays in the
            // instruction's registers across iterations: a free initial value
            // (zeros) is re-emitted in that layout instead of converting the
            // accumulator through shared memory twice per iteration.
            const ir::Value* y = yield ? yield->operand(i) : nullptr;
            if (isFree(init) && y && y->definingOp() && y->definingOp()->parent() == &body)
              if (auto dl = dotLayout(*y->definingOp())) l = *dl;
            // Any other free initial value (a running max of -inf, a zero
            // sum) has no layout of its own to keep: the loop is visited
            // with a guess that the body's ops do not follow (weak_), and
            // then again carrying whatever the body yields, so the value
            // stays in the layout its updates are computed in instead of
            // being converted there and back every iteration.
            if (!w && isFree(init) && l.parent.mma == MmaKind::None) weak_.insert(body.arg(i + 1));
            layouts_[body.arg(i + 1)] = l;
            layouts_[op.result(i)] = l;
          }
        }
        visitBlock(body);
        bool again = false;
        for (unsigned i = 0; i < op.numResults(); ++i) {
          const ir::Value* a = body.arg(i + 1);
          if (!weak_.count(a) || !yield) continue;
          weak_.erase(a);
          const Layout& yl = get(yield->operand(i));
          if (yl != get(a) && compatible(yl, a->type().shape())) {
            layouts_[a] = yl;
            layouts_[op.result(i)] = yl;
            again = true;
          }
        }
        if (again) visitBlock(body);
        continue;
      }
      // A while loop carries scalars only (no layouts); its body is the
      // kernel's like any other.
      if (op.code() == ir::OpCode::WarpSpecialize || op.code() == ir::OpCode::While) {
        visitBlock(op.region(0).block());
        continue;
      }
      if (op.code() == ir::OpCode::If) {
        for (auto& r : op.regions()) visitBlock(r->block());
        const ir::Op* y = op.region(0).block().terminator();
        for (unsigned i = 0; i < op.numResults(); ++i)
          if (op.result(i)->type().isTile()) layouts_[op.result(i)] = get(y->operand(i));
        continue;
      }
      assign(op);
    }
  };
  visitBlock(f.body());
}

bool LayoutAnalysis::indexMath(const ir::Value* v) const {
  if (!v->type().isTile()) return true;  // a scalar
  if (isFree(v)) return true;
  auto memo = indexMath_.find(v);
  if (memo != indexMath_.end()) return memo->second;
  const ir::Op* d = v->definingOp();
  bool r =
      d && ((ir::isElementwise(d->code()) && d->code() != ir::OpCode::Reshape && d->code() != ir::OpCode::Transpose) ||
            d->code() == ir::OpCode::Broadcast || d->code() == ir::OpCode::ExpandDims);
  if (r)
    for (const ir::Value* o : d->operands()) r = r && indexMath(o);
  indexMath_[v] = r;
  return r;
}

void LayoutAnalysis::findChainedDots(ir::Block& body) {
  // Two dots are chained when one's operands (A, B or the accumulator) are
  // computed from the other's result by ops of the same block (Triton's
  // chained-dot test in its choice of warps per tile).
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != ir::OpCode::Dot) return;
    std::vector<const ir::Value*> work(op.operands().begin(), op.operands().end());
    std::set<const ir::Op*> seen;
    while (!work.empty()) {
      const ir::Value* v = work.back();
      work.pop_back();
      const ir::Op* d = v->definingOp();
      if (!d || d->parent() != op.parent() || !d->regions().empty() || !seen.insert(d).second) continue;
      if (d->code() == ir::OpCode::Dot) {
        chainedDots_.insert(d);
        chainedDots_.insert(&op);
        continue;
      }
      for (const ir::Value* o : d->operands())
        if (o->type().isTile()) work.push_back(o);
    }
  });
}

Layout LayoutAnalysis::accessLayout(const ir::Op& op, bool ownWidth) const {
  const ir::Value* p = op.operand(op.code() == ir::OpCode::Copy ? 1 : 0);
  const auto& shape = p->type().shape();
  int r = static_cast<int>(shape.size());
  AxisInfo ai = axis_.get(p);
  int fast = r - 1;
  if (static_cast<int>(ai.contiguity.size()) == r)
    for (int d = r - 2; d >= 0; --d)
      if (ai.contiguity[d] > ai.contiguity[fast]) fast = d;
  if (fast == r - 1) return ownWidth ? defaultForAccess(op) : defaultFor(shape);
  return Layout::blocked(coalescedBlocked(shape, 1, fast, numWarps_, warpSize_));
}

const Layout* LayoutAnalysis::wanted(const ir::Value* v) const {
  auto it = wanted_.find(v);
  if (it == wanted_.end() || !compatible(it->second, v->type().shape())) return nullptr;
  return &it->second;
}

void LayoutAnalysis::propagateFromAccesses(ir::Block& body) {
  using ir::OpCode;
  // Program order, each access's propagation drained before the next: the
  // first access reaching a value decides its layout (deterministic).
  // Tensor-core dot results, the loop results carrying them, and the
  // elementwise values computed from them (same shape): these stay in the
  // accumulator's layout, and a memory op wanting another layout converts
  // at the access. Pulled into the access's layout instead, an epilogue
  // (bias, activation, the cast to f16) would convert the f32 accumulator
  // where it meets the first such op, twice the bytes of the f16 result,
  // from the accumulator's registers, whose runs are short, and compute
  // the epilogue in the store's layout, which may hold elements twice
  // (a 32x32 f16 store in 16-byte vectors on 256 threads).
  //
  // Except where the accumulator holds 32 or more elements per thread and
  // the epilogue has transcendental math (GELU's erf): computed in registers
  // beside the whole accumulator, the schedulers run many of those
  // evaluations side by side (128x128 tiles: gfx942 on 8 warps, 32 per
  // thread, 90 -> 240 VGPRs; gfx1100 on 4 warps, 128 per thread, 68 bytes
  // of scratch), where converting first streams the epilogue through shared
  // memory a few elements at a time. Such an epilogue takes the store's
  // layout as before. Small tiles (a 32x32 tile: 4 to 8 per thread) and
  // epilogues without transcendentals stay in the accumulator's layout,
  // unless it is WMMA's (below).
  std::unordered_map<const ir::Value*, std::vector<const ir::Value*>> users;  // value -> elementwise results
  std::vector<std::pair<const ir::Value*, Layout>> roots;
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() == OpCode::Dot) {
      if (auto l = dotLayout(op)) roots.emplace_back(op.result(), *l);
    } else if (op.code() == OpCode::For) {
      const ir::Block& b = op.region(0).block();
      const ir::Op* y = b.terminator();
      for (unsigned i = 0; y && i < op.numResults(); ++i) {
        const ir::Op* d = y->operand(i)->definingOp();
        if (d && d->parent() == &b && d->code() == OpCode::Dot)
          if (auto l = dotLayout(*d)) roots.emplace_back(op.result(i), *l);
      }
    } else if (ir::isElementwise(op.code()) && op.code() != OpCode::Reshape && op.code() != OpCode::Transpose &&
               op.numResults() == 1 && op.result()->type().isTile()) {
      for (const ir::Value* o : op.operands())
        if (o->type().isTile() && o->type().shape() == op.result()->type().shape()) users[o].push_back(op.result());
    } else if (op.code() == OpCode::DotWait) {  // the accumulator, completed: the same value
      for (unsigned i = 0; i < op.numOperands(); ++i) users[op.operand(i)].push_back(op.result(i));
    }
  });
  std::unordered_set<const ir::Value*> fromDot, heavy;
  for (const auto& [root, l] : roots) {
    std::vector<const ir::Value*> closure = {root}, stack = {root};
    std::unordered_set<const ir::Value*> seen = {root};
    bool transcendental = false;
    while (!stack.empty()) {
      const ir::Value* v = stack.back();
      stack.pop_back();
      auto it = users.find(v);
      if (it == users.end()) continue;
      for (const ir::Value* u : it->second)
        if (seen.insert(u).second) {
          transcendental = transcendental || ir::isTranscendental(u->definingOp()->code());
          closure.push_back(u);
          stack.push_back(u);
        }
    }
    const bool big = static_cast<int64_t>(slotTable(l, root->type().shape()).size()) >= 32;
    // WMMA's fragment has no two adjacent elements in a lane: its f16
    // result would be converted 2 bytes per LDS store, where the f32
    // accumulator goes 4 bytes at a time, two per ds_store_2addr_b32.
    bool runs = false;
    for (int64_t x : l.parent.spt) runs = runs || x > 1;
    for (const ir::Value* v : closure) ((big && transcendental) || !runs ? heavy : fromDot).insert(v);
  }
  for (const ir::Value* v : heavy) fromDot.erase(v);
  // The broadcasts such an epilogue combines with the accumulator (a row
  // statistic loaded from memory, `s - lse`, `acc + bias`) are wanted in the
  // accumulator's layout, so the small operand is converted (or loaded)
  // once and broadcast in registers; left to take their operand's layout
  // (a 1 x N load's), they would be computed at full size there and
  // converted, or replicated in every thread.
  // The broadcasts of root's shape that the elementwise values computed
  // from `root` (through those `through` accepts) combine with.
  auto broadcastsBeside = [&](const ir::Value* root, auto&& through) {
    std::vector<const ir::Value*> found, stack = {root};
    std::unordered_set<const ir::Value*> seen = {root};
    while (!stack.empty()) {
      const ir::Value* v = stack.back();
      stack.pop_back();
      auto it = users.find(v);
      if (it == users.end()) continue;
      for (const ir::Value* u : it->second) {
        if (!through(u) || !seen.insert(u).second) continue;
        stack.push_back(u);
        for (const ir::Value* o : u->definingOp()->operands()) {
          const ir::Op* d = o->definingOp();
          if (d && d->code() == OpCode::Broadcast && !fromDot.count(o) && o->type().shape() == u->type().shape())
            found.push_back(o);
        }
      }
    }
    return found;
  };
  std::vector<std::pair<const ir::Value*, Layout>> broadcastSeeds;
  for (const auto& [root, l] : roots)
    if (fromDot.count(root))
      for (const ir::Value* o : broadcastsBeside(root, [&](const ir::Value* u) { return fromDot.count(u) > 0; }))
        broadcastSeeds.emplace_back(o, l);
  std::vector<const ir::Value*> work;
  auto seed = [&](const ir::Value* v, const Layout& l) {
    if (!v->type().isTile() || wanted_.count(v) || fromDot.count(v) || !compatible(l, v->type().shape())) return;
    wanted_.emplace(v, l);
    work.push_back(v);
  };
  auto seedFor = [&](const ir::Op& forOp, unsigned i, const Layout& l) {
    ir::Block& b = const_cast<ir::Op&>(forOp).region(0).block();
    seed(forOp.operand(3 + i), l);
    seed(b.arg(i + 1), l);
    seed(forOp.result(i), l);
    if (const ir::Op* y = b.terminator()) seed(y->operand(i), l);
  };
  auto drain = [&] {
    while (!work.empty()) {
      const ir::Value* v = work.back();
      work.pop_back();
      Layout l = wanted_.at(v);
      if (v->isBlockArg()) {
        const ir::Op* owner = v->ownerBlock()->parentOp();
        if (owner && owner->code() == OpCode::For && v->index() >= 1) seedFor(*owner, v->index() - 1, l);
        continue;
      }
      const ir::Op* d = v->definingOp();
      switch (d->code()) {
        // A loop result wanted in some layout after the loop is converted
        // once there: it does not decide the layout the loop carries it in
        // (a running max stored after a flash-attention loop would otherwise
        // be carried in the store's layout and converted every iteration).
        case OpCode::For: break;
        case OpCode::Broadcast: seed(d->operand(0), l); break;
        case OpCode::ExpandDims: seed(d->operand(0), l.sliceDim(static_cast<int>(d->intAttr("axis")))); break;
        case OpCode::Reshape:
        case OpCode::Transpose: break;
        case OpCode::Scan: seed(d->operand(0), l); break;
        case OpCode::Gather: seed(d->operand(1), l); break;
        case OpCode::Join: {
          Layout s = l.sliceDim(static_cast<int>(l.dims.size()) - 1);
          seed(d->operand(0), s);
          seed(d->operand(1), s);
          break;
        }
        case OpCode::Split: break;
        default:
          if (ir::isElementwise(d->code()))
            for (const ir::Value* o : d->operands())
              if (o->type().isTile() && o->type().shape() == v->type().shape()) seed(o, l);
          break;
      }
    }
  };
  for (const auto& [v, l] : broadcastSeeds) {
    seed(v, l);
    drain();
  }
  ir::walk(body, [&](ir::Op& op) {
    switch (op.code()) {
      case OpCode::Load:
      case OpCode::Store:
      case OpCode::Copy:
      case OpCode::AtomicRmw:
      case OpCode::AtomicCas: {
        unsigned pi = op.code() == OpCode::Copy ? 1 : 0;
        const ir::Value* p = op.operand(pi);
        if (!p->type().isTile()) break;
        // A stored accumulator (or its epilogue) is converted on its way to
        // the store whatever the layout (at the store, or, for the `heavy`
        // epilogues, where the epilogue begins): the store takes its own
        // vector width.
        const bool converted =
            op.code() == OpCode::Store && (fromDot.count(op.operand(1)) || heavy.count(op.operand(1)));
        Layout a = accessLayout(op, converted);
        for (unsigned i = pi; i < op.numOperands(); ++i)
          if (op.operand(i)->type().shape() == p->type().shape()) {
            seed(op.operand(i), a);
            drain();
          }
        break;
      }
      default: break;
    }
  });
  // Last, the broadcasts combined with a loaded tile (a GEMV's
  // `a * x[None, :]`, a norm's `* w[None, :]`): wanted in the load's
  // layout, which the elementwise op takes (the full tile, not the
  // broadcast). The small operand is then converted once, where it is
  // expanded; left in its own operand's layout, the broadcast is converted
  // where it meets the tile, and its own expand_dims converts it a second
  // time (GEMV on gfx942: 3 conversions through shared memory per iteration
  // where Triton has 1). After the accesses, which decide first.
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::Load || !op.result()->type().isTile()) return;
    const Layout a = accessLayout(op);
    auto plain = [&](const ir::Value* u) { return !fromDot.count(u) && !heavy.count(u); };
    for (const ir::Value* o : broadcastsBeside(op.result(), plain)) {
      seed(o, a);
      drain();
    }
  });
}

const Layout& LayoutAnalysis::get(const ir::Value* v) const {
  auto it = layouts_.find(v);
  TS_ASSERT(it != layouts_.end(), "no layout for a tile value of type " + v->type().str());
  return it->second;
}

Layout LayoutAnalysis::defaultFor(const std::vector<int64_t>& shape, VectorCap cap) const {
  auto it = vecForShape_.find(shape);
  int64_t vec = it == vecForShape_.end() ? 1 : it->second;
  return Layout::blocked(defaultBlocked(shape, vec, numWarps_, warpSize_, cap));
}

Layout LayoutAnalysis::defaultForAccess(const ir::Op& op, VectorCap cap) const {
  const ir::Value* p = op.operand(op.code() == ir::OpCode::Copy ? 1 : 0);
  return Layout::blocked(defaultBlocked(p->type().shape(), vectorWidth(op), numWarps_, warpSize_, cap));
}

int64_t LayoutAnalysis::computeVec(const ir::Op& op) const {
  if (ir::isAtomic(op.code())) return 1;
  unsigned pi = op.code() == ir::OpCode::Copy ? 1 : 0;
  const ir::Value* p = op.operand(pi);
  int64_t bytes = byteSize(p->type().dtype());
  AxisInfo ai = axis_.get(p);
  int64_t v = std::max<int64_t>(1, 16 / bytes);
  v = std::min(v, ai.contiguity.back());
  // Alignment: the run's first pointer is divisible by `divisibility` bytes.
  int64_t align = 1;
  while (align * 2 * bytes <= ai.divisibility.back() && ai.divisibility.back() % (align * 2 * bytes) == 0 && align < 16)
    align *= 2;
  v = std::min(v, align);
  v = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(std::max<int64_t>(1, v))));
  while (v > 1 && p->type().shape().back() % v != 0) v /= 2;
  return v;
}

int64_t LayoutAnalysis::vectorWidth(const ir::Op& memOp) const {
  auto it = vec_.find(&memOp);
  return it == vec_.end() ? 1 : it->second;
}

int64_t LayoutAnalysis::maskConstancy(const ir::Value* m) const {
  if (!m->type().isTile()) return INT64_MAX;
  return maskConstancy(m, m->type().rank() - 1);
}

int64_t LayoutAnalysis::maskConstancy(const ir::Value* m, int dim) const {
  if (!m->type().isTile()) return INT64_MAX;
  auto memo = maskConst_.find({m, dim});
  if (memo != maskConst_.end()) return memo->second;
  const auto k = static_cast<size_t>(dim);
  int64_t ext = m->type().shape()[k];
  int64_t r = 1;
  const ir::Op* d = m->definingOp();
  if (d) {
    switch (d->code()) {
      case ir::OpCode::Constant:
      case ir::OpCode::Splat: r = ext; break;
      case ir::OpCode::Broadcast: {
        const auto& ss = d->operand(0)->type().shape();
        r = ss[k] == 1 ? ext : maskConstancy(d->operand(0), dim);
        break;
      }
      case ir::OpCode::ExpandDims: {
        const int axis = static_cast<int>(d->intAttr("axis"));
        r = axis == dim ? 1 : maskConstancy(d->operand(0), dim > axis ? dim - 1 : dim);
        break;
      }
      case ir::OpCode::And:
      case ir::OpCode::Or:
      case ir::OpCode::Xor: r = std::gcd(maskConstancy(d->operand(0), dim), maskConstancy(d->operand(1), dim)); break;
      case ir::OpCode::Not: r = maskConstancy(d->operand(0), dim); break;
      case ir::OpCode::Cmp: {
        const ir::Value* a = d->operand(0);
        const ir::Value* b = d->operand(1);
        if (!a->type().isIntLike()) break;
        AxisInfo ai = axis_.get(a), bi = axis_.get(b);
        // A scalar operand is described as rank 1.
        auto at = [&](const std::vector<int64_t>& v) { return v.size() > k ? v[k] : v.back(); };
        r = std::gcd(at(ai.constancy), at(bi.constancy));
        // A contiguous side compared with a side constant over the run: for
        // aligned runs whose start and the bound are multiples of the run
        // length, `a0 + i < b` has one value for the whole run (likewise
        // `>=`, and `>` / `<=` with the sides swapped).
        const std::string& p = d->strAttr("pred");
        auto run = [&](const AxisInfo& c, const AxisInfo& kk) {
          return std::gcd(std::gcd(at(c.contiguity), at(c.divisibility)),
                          std::gcd(at(kk.constancy), at(kk.divisibility)));
        };
        if (p == "lt" || p == "ge") r = std::max(r, run(ai, bi));
        if (p == "gt" || p == "le") r = std::max(r, run(bi, ai));
        break;
      }
      default: break;
    }
  }
  r = std::gcd(r, ext);
  maskConst_[{m, dim}] = r;
  return r;
}

void LayoutAnalysis::assign(const ir::Op& op) {
  using ir::OpCode;
  if (op.code() == OpCode::Split) {
    // Both halves in x's layout without the last dim (LowerMove.cpp reads
    // x[..., 0] and x[..., 1] from one thread's registers, converting x
    // first where its threads split the pair).
    Layout l = get(op.operand(0));
    int last = static_cast<int>(l.dims.size()) - 1;
    for (unsigned i = 0; i < 2; ++i) {
      const auto& shape = op.result(i)->type().shape();
      Layout s = l.sliceDim(last);
      layouts_[op.result(i)] = compatible(s, shape) ? s : defaultFor(shape);
    }
    return;
  }
  if (op.code() == OpCode::DotWait) {  // its operands, completed: their layouts
    for (unsigned i = 0; i < op.numResults(); ++i)
      if (op.result(i)->type().isTile()) layouts_[op.result(i)] = get(op.operand(i));
    return;
  }
  if (op.numResults() != 1 || !op.result()->type().isTile()) return;
  const ir::Value* res = op.result();
  const auto& shape = res->type().shape();
  auto setOr = [&](const Layout& l) { layouts_[res] = compatible(l, shape) ? l : defaultFor(shape); };
  switch (op.code()) {
    case OpCode::Load:
    case OpCode::AtomicRmw:
    case OpCode::AtomicCas: setOr(accessLayout(op)); return;
    case OpCode::Reduce: {
      setOr(get(op.operand(0)).sliceDim(static_cast<int>(op.intAttr("axis"))));
      return;
    }
    case OpCode::Scan:
      // Any layout works (LowerScan.cpp); the operand's, unless a consumer
      // wants another and the operand is converted once instead.
      if (const Layout* w = wanted(res)) {
        layouts_[res] = *w;
        return;
      }
      setOr(get(op.operand(0)));
      return;
    case OpCode::Gather:
      // The result is read element by element from shared memory
      // (LowerMove.cpp): any layout works; a consumer's, else the index's.
      if (const Layout* w = wanted(res)) {
        layouts_[res] = *w;
        return;
      }
      setOr(get(op.operand(1)));
      return;
    case OpCode::Join: {
      // Each thread holds both halves of its elements: the operands are
      // then exactly the result's layout without the last dim.
      if (const Layout* w = wanted(res)) {
        layouts_[res] = *w;
        return;
      }
      const Layout& a = get(op.operand(0));
      setOr(a.withTrivialDim(static_cast<int>(a.dims.size())));
      return;
    }
    case OpCode::Constant:
    case OpCode::Splat:
    case OpCode::Arange:
      // Free: produced in whatever layout its users want.
      if (const Layout* w = wanted(res)) {
        layouts_[res] = *w;
        return;
      }
      break;
    case OpCode::Broadcast: {
      if (const Layout* w = wanted(res)) {
        layouts_[res] = *w;
        return;
      }
      // The operand's layout broadcasts in registers, no data moved, unless
      // it spreads the result over the threads worse than the default does:
      // an operand whose threads sit on parent dims the result lacks (a row
      // in a slice of a 3-D parent) gives each thread most of the result (a
      // 64 x 64 causal mask at 1024 values per thread with 8 warps). Then
      // the default layout, and the small operand is converted once.
      const Layout& l = get(op.operand(0));
      if (compatible(l, shape)) {
        Layout d = defaultFor(shape);
        if (slotTable(l, shape).size() > slotTable(d, shape).size()) {
          layouts_[res] = d;
          return;
        }
      }
      setOr(l);
      return;
    }
    case OpCode::ExpandDims: {
      if (const Layout* w = wanted(res)) {
        layouts_[res] = *w;
        return;
      }
      Layout l = get(op.operand(0));
      int a = static_cast<int>(op.intAttr("axis"));
      int lo = a == 0 ? -1 : l.dims[a - 1];
      int hi = a == static_cast<int>(l.dims.size()) ? l.parent.rank() : l.dims[a];
      for (int p = lo + 1; p < hi; ++p) {
        // A parent dim removed by a reduction fits here: back to the parent.
        l.dims.insert(l.dims.begin() + a, p);
        setOr(l);
        return;
      }
      // Otherwise insert a trivial parent dim (one element, one thread).
      setOr(l.withTrivialDim(a));
      return;
    }
    case OpCode::Dot:
      if (auto l = dotLayout(op)) {
        layouts_[res] = *l;
        return;
      }
      break;
    default: break;
  }
  if (ir::isElementwise(op.code())) {
    if (op.code() != OpCode::Reshape && op.code() != OpCode::Transpose)
      if (const Layout* w = wanted(res)) {
        layouts_[res] = *w;
        return;
      }
    // Otherwise an operand's layout, chosen independently of operand order:
    // full tiles before broadcasts / expand_dims of smaller tiles and before
    // index math (computed from free ops and scalars only: the lowering
    // re-emits it in any layout, where other values are converted through
    // shared memory; e.g. a causal mask `cols <= rows` beside a dot's
    // result), then the layout holding the fewest elements per thread
    // (least replication), then the smallest printed form.
    const Layout* best = nullptr;
    std::tuple<bool, size_t, std::string> bestKey;
    bool strong = false;  // an operand whose layout is not a loop's guess
    for (const ir::Value* v : op.operands())
      strong = strong || (v->type().isTile() && !isFree(v) && layouts_.count(v) && !weak_.count(v));
    for (const ir::Value* v : op.operands()) {
      if (!v->type().isTile() || isFree(v) || !layouts_.count(v) || (strong && weak_.count(v))) continue;
      const Layout& l = get(v);
      if (!compatible(l, shape)) continue;
      const ir::Op* d = v->definingOp();
      bool lowRank = (d && (d->code() == OpCode::Broadcast || d->code() == OpCode::ExpandDims)) || indexMath(v);
      std::tuple<bool, size_t, std::string> key{lowRank, slotTable(l, shape).size(), l.str()};
      if (!best || key < bestKey) {
        best = &l;
        bestKey = std::move(key);
      }
    }
    if (best) {
      layouts_[res] = *best;
      return;
    }
  }
  layouts_[res] = defaultFor(shape);
}

void annotateLayouts(ir::Function& f, const LayoutAnalysis& la) {
  ir::walk(f.body(), [&](ir::Op& op) {
    std::string s;
    for (unsigned i = 0; i < op.numResults(); ++i) {
      const ir::Value* r = op.result(i);
      if (!r->type().isTile() || !la.has(r)) continue;
      if (!s.empty()) s += "; ";
      s += la.get(r).str();
    }
    if (!s.empty()) op.attrs()["layout"] = s;
  });
}

}  // namespace tessera::ir

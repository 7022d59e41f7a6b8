// Thread geometry of layouts, and tiles moved between layouts: re-emitted
// (remat, recompute) or converted through shared memory (convertVia), and
// the layout an access without a register result runs in (freeAccessLayout).

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

llvm::Value* Lower::pos(const ir::BlockedLayout& l, int p) {
  int64_t ls = 1, ws = 1;
  for (int64_t d : l.order) {
    if (d == p) break;
    ls *= l.tpw[d];
    ws *= l.wpb[d];
  }
  llvm::Value* lp = b_.CreateURem(b_.CreateUDiv(lane_, i32(ls)), i32(l.tpw[p]));
  llvm::Value* wp = b_.CreateURem(b_.CreateUDiv(warp_, i32(ws)), i32(l.wpb[p]));
  return b_.CreateAdd(b_.CreateMul(wp, i32(l.tpw[p]), "", true, true), lp, "", true, true);
}

llvm::Value* Lower::lanePos(const ir::BlockedLayout& l, int p) {
  int64_t ls = 1;
  for (int64_t d : l.order) {
    if (d == p) break;
    ls *= l.tpw[d];
  }
  return b_.CreateURem(b_.CreateUDiv(lane_, i32(ls)), i32(l.tpw[p]));
}

llvm::Value* Lower::warpPos(const ir::BlockedLayout& l, int p) {
  int64_t ws = 1;
  for (int64_t d : l.order) {
    if (d == p) break;
    ws *= l.wpb[d];
  }
  return b_.CreateURem(b_.CreateUDiv(warp_, i32(ws)), i32(l.wpb[p]));
}

// Thread positions, element indices and the shared-memory indices made of
// them are small non-negative numbers (bounded by the block and the tile
// shapes): their adds and multiplies are marked nuw nsw, so a 64-bit address
// `sext(base + c)` becomes `sext(base) + c` and a thread's accesses share
// one address register with immediate offsets instead of one register each
// (held across a loop when the index is loop-invariant).
Slots Lower::bases(const ir::Layout& l, const ir::SlotTable& t) {
  Slots r;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    int p = l.dims[i];
    llvm::Value* v = b_.CreateMul(pos(l.parent, p), i32(l.parent.spt[p]), "", true, true);
    if (t.replicated[i]) v = b_.CreateURem(v, i32(t.shape[i]));
    r.push_back(v);
  }
  return r;
}

Slots Lower::indexOf(const Slots& base, const ir::SlotTable& t, size_t slot) {
  Slots r;
  for (size_t i = 0; i < base.size(); ++i) r.push_back(b_.CreateAdd(base[i], i32(t.consts[slot][i]), "", true, true));
  return r;
}

llvm::Value* Lower::linear(const Slots& idx, const std::vector<int64_t>& shape) {
  llvm::Value* l = i32(0);
  for (size_t i = 0; i < idx.size(); ++i)
    l = b_.CreateAdd(b_.CreateMul(l, i32(shape[i]), "", true, true), idx[i], "", true, true);
  return l;
}

llvm::Value* Lower::ownerPred(const ir::Layout& l, const ir::SlotTable& t) {
  llvm::Value* c = nullptr;
  auto andc = [&](llvm::Value* x) { c = c ? b_.CreateAnd(c, x) : x; };
  for (size_t i = 0; i < t.shape.size(); ++i)
    if (t.replicated[i]) andc(b_.CreateICmpULT(pos(l.parent, l.dims[i]), i32(t.distinctPos[i])));
  for (int p = 0; p < l.parent.rank(); ++p) {
    if (std::find(l.dims.begin(), l.dims.end(), p) != l.dims.end()) continue;
    if (l.parent.tpw[p] * l.parent.wpb[p] > 1) andc(b_.CreateICmpEQ(pos(l.parent, p), i32(0)));
  }
  return c;
}

Slots Lower::reindex(const Slots& src, const ir::SlotTable& ts, const ir::SlotTable& td,
                     const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& proj) {
  Slots r;
  for (auto& c : td.consts) {
    auto it = ts.index.find(proj(c));
    TS_ASSERT(it != ts.index.end(), "gpu lowering: slot missing in reindex");
    r.push_back(src[it->second]);
  }
  return r;
}

// ================================================================ conversions

Slots Lower::tileIn(const ir::Value* v, const ir::Layout& l) {
  const TileV& t = tile(v);
  if (t.layout == l) return t.slots;
  const ir::Op* d = v->definingOp();
  // Ops free to recompute (Ops.def) are re-emitted in `l`.
  if (d && ir::isFreeToRecompute(d->code())) {
    ++record_.reemitted;
    return remat(v, l);
  }
  // Cheap index and mask math (n0 + arange(BN) < n) is re-emitted in `l`
  // rather than converted through shared memory with two barriers.
  int budget = 8;
  if (d && ir::isElementwise(d->code()) && cheapToRecompute(v, l, budget)) {
    std::map<std::pair<const ir::Value*, std::string>, Slots> memo;
    int unlimited = 1 << 20;
    ++record_.reemitted;
    return recompute(v, l, memo, unlimited);
  }
  const auto& shape = v->type().shape();
  std::vector<int64_t> sh = shape;
  return convertVia(
      t.slots, t.layout, shape, v->type().element(), l, shape,
      [&](const Slots& idx, size_t) { return linear(idx, sh); },
      /*rowMajorRead=*/true);
}

Slots Lower::remat(const ir::Value* v, const ir::Layout& l) {
  const ir::Op& d = *v->definingOp();
  const auto& shape = v->type().shape();
  ir::SlotTable t = ir::slotTable(l, shape);
  Slots r;
  switch (d.code()) {
    case OpCode::Constant: {
      llvm::Value* c = constantOf(d, elemTy(v->type()));
      r.assign(t.size(), c);
      return r;
    }
    case OpCode::Splat: r.assign(t.size(), scalar(d.operand(0))); return r;
    case OpCode::Arange: {
      Slots base = bases(l, t);
      for (size_t i = 0; i < t.size(); ++i)
        r.push_back(b_.CreateAdd(base[0], i32(t.consts[i][0] + d.intAttr("start"))));
      return r;
    }
    case OpCode::Broadcast: {
      const ir::Value* src = d.operand(0);
      const auto& ss = src->type().shape();
      Slots s = tileIn(src, l);
      ir::SlotTable ts = ir::slotTable(l, ss);
      return reindex(s, ts, t, [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> k = c;
        for (size_t i = 0; i < k.size(); ++i)
          if (ss[i] == 1) k[i] = 0;
        return k;
      });
    }
    case OpCode::ExpandDims: {
      int a = static_cast<int>(d.intAttr("axis"));
      const ir::Value* src = d.operand(0);
      ir::Layout sl = l.sliceDim(a);
      Slots s = tileIn(src, sl);
      ir::SlotTable ts = ir::slotTable(sl, src->type().shape());
      return reindex(s, ts, t, [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> k = c;
        k.erase(k.begin() + a);
        return k;
      });
    }
    default: TS_UNREACHABLE("remat of a non-free op");
  }
}

std::vector<size_t> Lower::slotRun(const ir::SlotTable& t, size_t i, int64_t v, int dim) {
  std::vector<size_t> run;
  std::vector<int64_t> c = t.consts[i];
  for (int64_t k = 0; k < v; ++k, ++c[static_cast<size_t>(dim)]) {
    auto it = t.index.find(c);
    if (it == t.index.end()) return {};
    run.push_back(it->second);
  }
  return run;
}

int64_t Lower::slotRunWidth(const ir::Layout& l, const ir::SlotTable& t, int64_t maxV, int dim) {
  const size_t d = dim < 0 ? t.shape.size() - 1 : static_cast<size_t>(dim);
  // The thread's base along d is pos * spt (mod the extent when
  // replicated): a multiple of v when v divides spt and the extent.
  const int64_t spt = std::min(l.parent.spt[l.dims[d]], t.shape[d]);
  int64_t v = 1;
  while (v * 2 <= maxV && spt % (v * 2) == 0 && t.shape[d] % (v * 2) == 0) v *= 2;
  for (; v > 1; v /= 2) {
    bool ok = true;
    for (size_t i = 0; ok && i < t.size(); ++i)
      if (t.consts[i][d] % v == 0) ok = slotRun(t, i, v, static_cast<int>(d)).size() == static_cast<size_t>(v);
    if (ok) return v;
  }
  return 1;
}

// A conversion's scratch is the whole tile: a 128x128 f32 accumulator
// converted for its epilogue (the cast of gfx1100's WMMA result, the bias
// and GELU of a 128x128 tile on gfx942) takes 65536 bytes, more than the
// pipeline's slots, and alone halves the waves the LDS allows. In chunks of
// whole rows, written, a barrier, read back, a barrier before the next
// chunk's writes, it takes 16 KB for two barriers per chunk, paid once per
// tile (Triton converts in repetitions of the layouts' block tile the same
// way). A slot's chunk must not depend on the lane: its row is the
// thread's base, (warp position * tpw + lane position) * spt, plus the
// slot's constant. The reads need it independent of the warp too (each
// read's value must exist after the last chunk); the writes may depend on
// the warp position, a warp-uniform branch per chunk: the 8-warp MFMA
// 32x32 accumulator of a 128x128 tile has one warp row of 32 rows in each
// chunk of 32 (its 32 lanes run down the rows, its 4 warp rows span all
// 128), the store's layout every row in each.
namespace {
constexpr uint64_t kConversionChunkBytes = 16384;

/// The warp positions along dim 0 of `l` whose threads hold slot `i` in
/// chunk `c` of `rows` rows, as a range [lo, hi] (empty: lo > hi); a slot's
/// chunk never decreases with the warp position.
std::pair<int64_t, int64_t> chunkWarps(const ir::Layout& l, const ir::SlotTable& t, size_t i, int64_t rows, int64_t c) {
  const int p = l.dims[0];
  const int64_t span = l.parent.tpw[p] * l.parent.spt[p];
  int64_t lo = 1, hi = 0;
  for (int64_t w = 0; w < l.parent.wpb[p]; ++w)
    if ((w * span + t.consts[i][0]) / rows == c) {
      if (lo > hi) lo = w;
      hi = w;
    }
  return {lo, hi};
}

/// Whether every slot's chunk is the same in all lanes of a warp (and,
/// with `warps`, in all warps too).
bool chunkIsInvariant(const ir::Layout& l, const ir::SlotTable& t, int64_t rows, bool warps) {
  if (t.replicated[0]) return false;
  const int p = l.dims[0];
  const int64_t spt = l.parent.spt[p], tpw = l.parent.tpw[p], wpb = l.parent.wpb[p];
  for (const auto& c : t.consts)
    for (int64_t w = 0; w < wpb; ++w) {
      const int64_t first = w * tpw * spt + c[0];
      if (first / rows != (first + (tpw - 1) * spt) / rows) return false;
      if (warps && first / rows != c[0] / rows) return false;
    }
  return true;
}
}  // namespace

int64_t Lower::conversionChunks(const ir::Layout& sl, const ir::SlotTable& ts, const ir::Layout& dl,
                                const ir::SlotTable& td, uint64_t bytes) {
  // Rank 2 and up: the vector runs go along the last dim, within a row.
  if (ts.shape.size() < 2 || ts.shape != td.shape) return 1;
  const int64_t rows = ts.shape[0];
  int64_t chunks = 1;
  while (bytes / static_cast<uint64_t>(chunks) > kConversionChunkBytes && rows % (2 * chunks) == 0 &&
         chunkIsInvariant(sl, ts, rows / (2 * chunks), false) && chunkIsInvariant(dl, td, rows / (2 * chunks), true))
    chunks *= 2;
  return chunks;
}

Slots Lower::convertVia(const Slots& src, const ir::Layout& sl, const std::vector<int64_t>& sshape,
                        const ir::Type& elem, const ir::Layout& dl, const std::vector<int64_t>& dshape,
                        const std::function<llvm::Value*(const Slots&, size_t)>& srcLinearOfDst, bool rowMajorRead) {
  llvm::Type* mt = memTy(elem);
  const uint64_t eb = bytesOf(mt);
  int64_t n = 1;
  for (int64_t s : sshape) n *= s;
  ir::SlotTable ts = ir::slotTable(sl, sshape);
  ir::SlotTable td = ir::slotTable(dl, dshape);
  // Chunks only where the read is the row-major identity (a tile moved to
  // another layout, not reshaped): a slot then reads its own row.
  const int64_t chunksAsked = rowMajorRead ? conversionChunks(sl, ts, dl, td, static_cast<uint64_t>(n) * eb) : 1;
  const int64_t chunks = chunkConversions_ ? chunksAsked : 1;
  const int64_t chunkRows = chunks > 1 ? sshape[0] / chunks : 0, chunkElems = n / chunks;
  llvm::Value* base = scratchFor({ScratchRequest::Kind::Conversion, static_cast<uint64_t>(n) * eb,
                                  static_cast<uint64_t>(n / chunksAsked) * eb, 16});
  record_.conversions.push_back(
      {curOp_, ir::shapeStr(sshape) + " " + elem.str() + ": " + sl.str() + " -> " + dl.str() +
                   (chunks > 1 ? " (" + std::to_string(chunks) + " chunks of " + std::to_string(chunkRows) + " rows)"
                               : std::string())});
  record_.sharedConversionBytes += 2 * n * static_cast<int64_t>(eb);  // written, then read back
  // Runs of a thread's consecutive elements move as one access of up to 16
  // bytes (the scratch area is 16-byte aligned, SharedPlan): a quarter of
  // the shared-memory instructions of scalar accesses for f32 runs of 4,
  // an eighth for f16 runs of 8.
  const int64_t maxV = mt->isPointerTy() ? 1 : static_cast<int64_t>(16 / eb);
  const int64_t wv = slotRunWidth(sl, ts, maxV);
  const int64_t rv = rowMajorRead ? slotRunWidth(dl, td, maxV) : 1;
  const int last = static_cast<int>(sshape.size()) - 1;
  auto inChunk = [&](const ir::SlotTable& t, size_t i, int64_t c) {  // the reads': warp-invariant
    return chunks == 1 || t.consts[i][0] / chunkRows == c;
  };
  // The chunk's own offset: element e of chunk c is at e - c * chunkElems.
  auto at = [&](llvm::Value* lin, int64_t c) {
    if (c) lin = b_.CreateSub(lin, i32(c * chunkElems), "", true, true);
    return b_.CreateInBoundsGEP(mt, base, lin);
  };
  Slots bs = bases(sl, ts);
  Slots bd = bases(dl, td);
  Slots r(td.size());
  const int64_t srcWarps = sl.parent.wpb[sl.dims[0]];
  llvm::Value* wpos = chunks > 1 ? warpPos(sl.parent, sl.dims[0]) : nullptr;
  for (int64_t c = 0; c < chunks; ++c) {
    beforeShared();
    // The slots a thread writes in this chunk, by the warp positions that
    // write them (all of them where the chunk does not depend on the warp).
    std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> writers;
    for (size_t i = 0; i < ts.size(); ++i) {
      if (ts.consts[i][static_cast<size_t>(last)] % wv != 0) continue;
      auto w = chunks == 1 ? std::pair<int64_t, int64_t>{0, srcWarps - 1} : chunkWarps(sl, ts, i, chunkRows, c);
      if (w.first <= w.second) writers[w].push_back(i);
    }
    for (auto& [w, slots] : writers) {
      // Only one of the threads holding a replicated element writes it:
      // the others would write the same bytes in the same barrier
      // interval, a race by the emulator's model (and wasted shared
      // bandwidth).
      llvm::Value* cond = ownerPred(sl, ts);
      auto andc = [&](llvm::Value* x) { cond = cond ? b_.CreateAnd(cond, x) : x; };
      if (w.first > 0) andc(b_.CreateICmpUGE(wpos, i32(w.first)));
      if (w.second < srcWarps - 1) andc(b_.CreateICmpULE(wpos, i32(w.second)));
      guarded(cond, [&] {
        for (size_t i : slots) storeRun(src, slotRun(ts, i, wv, last), mt, at(linear(indexOf(bs, ts, i), sshape), c));
      });
    }
    barrier();
    smemDirty_ = true;
    for (size_t j = 0; j < td.size(); j += static_cast<size_t>(rv)) {
      if (!inChunk(td, j, c)) continue;
      llvm::Value* p = at(srcLinearOfDst(indexOf(bd, td, j), j), c);
      if (rv == 1) {
        r[j] = fromMem(b_.CreateLoad(mt, p), elem);
        continue;
      }
      llvm::Type* vt = llvm::FixedVectorType::get(mt, static_cast<unsigned>(rv));
      llvm::Value* vec = b_.CreateAlignedLoad(vt, p, llvm::Align(static_cast<uint64_t>(rv) * eb));
      for (int64_t k = 0; k < rv; ++k) r[j + static_cast<size_t>(k)] = fromMem(b_.CreateExtractElement(vec, k), elem);
    }
  }
  return r;
}

bool Lower::cheapToRecompute(const ir::Value* v, const ir::Layout& l, int& budget) {
  if (!v->type().isTile()) return true;
  if (!elided_.count(v) && tiles_.count(v) && tile(v).layout == l) return true;
  const ir::Op* d = v->definingOp();
  if (!d) return false;
  switch (d->code()) {
    case OpCode::Constant:
    case OpCode::Splat:
    case OpCode::Arange: return true;
    case OpCode::Broadcast: return cheapToRecompute(d->operand(0), l, budget);
    case OpCode::ExpandDims:
      return cheapToRecompute(d->operand(0), l.sliceDim(static_cast<int>(d->intAttr("axis"))), budget);
    default: break;
  }
  if (!ir::isElementwise(d->code()) || d->code() == OpCode::Reshape || d->code() == OpCode::Transpose || --budget < 0)
    return false;
  for (const ir::Value* o : d->operands())
    if (!cheapToRecompute(o, l, budget)) return false;
  return true;
}

/// `v` in layout `l`, re-emitting the chain of elementwise ops (pointer and
/// mask arithmetic) and free ops that produced it in `l` instead of
/// converting it through shared memory; values already in `l` are reused,
/// anything else (or a chain longer than `budget` ops) is converted.
Slots Lower::recompute(const ir::Value* v, const ir::Layout& l,
                       std::map<std::pair<const ir::Value*, std::string>, Slots>& memo, int& budget) {
  std::pair<const ir::Value*, std::string> key{v, l.str()};
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  const bool elided = elided_.count(v) != 0;
  if (!elided) {
    const TileV& cur = tile(v);
    if (cur.layout == l) return cur.slots;
  }
  const ir::Op* d = v->definingOp();
  const auto& shape = v->type().shape();
  Slots r;
  bool viaTileIn = false;
  // An elided value has no slots to fall back on: it is always re-derived
  // (planElision admits only ops this function re-derives).
  if (!d || (budget <= 0 && !elided)) {
    r = tileIn(v, l);
    viaTileIn = true;
  } else if (d->code() == OpCode::Constant || d->code() == OpCode::Splat || d->code() == OpCode::Arange) {
    r = remat(v, l);
  } else if (d->code() == OpCode::Broadcast) {
    --budget;
    const ir::Value* src = d->operand(0);
    const auto& ss = src->type().shape();
    Slots sv = recompute(src, l, memo, budget);
    r = reindex(sv, ir::slotTable(l, ss), ir::slotTable(l, shape), [&](const std::vector<int64_t>& c) {
      std::vector<int64_t> k = c;
      for (size_t i = 0; i < k.size(); ++i)
        if (ss[i] == 1) k[i] = 0;
      return k;
    });
  } else if (d->code() == OpCode::ExpandDims) {
    --budget;
    int a = static_cast<int>(d->intAttr("axis"));
    ir::Layout sl = l.sliceDim(a);
    const ir::Value* src = d->operand(0);
    Slots sv = recompute(src, sl, memo, budget);
    r = reindex(sv, ir::slotTable(sl, src->type().shape()), ir::slotTable(l, shape),
                [&](const std::vector<int64_t>& c) {
                  std::vector<int64_t> k = c;
                  k.erase(k.begin() + a);
                  return k;
                });
  } else if (ir::isElementwise(d->code()) && d->code() != OpCode::Reshape && d->code() != OpCode::Transpose) {
    --budget;
    std::vector<Slots> ins;
    for (const ir::Value* o : d->operands())
      ins.push_back(o->type().isTile() ? recompute(o, l, memo, budget) : Slots{});
    size_t n = ir::slotTable(l, shape).size();
    const bool swap = swapOperands(*d);
    for (size_t i = 0; i < n; ++i) {
      Slots x;
      for (size_t j = 0; j < ins.size(); ++j) x.push_back(ins[j].empty() ? scalar(d->operand(j)) : ins[j][i]);
      if (swap) std::swap(x[0], x[1]);
      r.push_back(compute(*d, std::move(x)));
    }
  } else {
    TS_ASSERT(!elided, "gpu lowering: elided value without a re-derivable definition");
    r = tileIn(v, l);
    viaTileIn = true;
  }
  // Everything but the tileIn fallbacks above re-emitted the value in `l`.
  if (!viaTileIn) ++record_.reemitted;
  memo[key] = r;
  return r;
}

std::optional<ir::Layout> Lower::freeAccessLayout(const ir::Op& op) {
  if (op.code() == OpCode::Store) {
    // A tile store has no register result either: same choice.
    if (!op.operand(0)->type().isTile()) return std::nullopt;
  } else if (op.code() != OpCode::Copy || !op.hasAttr("async") || op.intAttr("async") == 0 ||
             t_.asyncCopyImpl() == AsyncCopyImpl::Synchronous) {
    return std::nullopt;
  }
  const ir::Value* src = op.operand(op.code() == OpCode::Store ? 0 : 1);
  const ir::Layout& l = la_.get(src);
  // A copy has no register result, so an async copy is free to run in the
  // default layout of its shape, whose per-thread run along the last dim is
  // the widest vector access of that shape that the cap below allows (the
  // pointer tile's own layout is inherited from whatever produced it, often
  // a column of pointers with one element per thread, or a layout that
  // replicates the tile over more threads than it has elements, so that
  // each thread would load its elements several times).
  const auto& shape = src->type().shape();
  if (std::optional<ir::Layout> tl = transposedCopyLayout(op)) return tl;
  // Stores run in the default layout of their shape, which has no thread
  // holding another's elements where the tile can be covered without.
  // Register-staged copies hold their values until the LDS store: each
  // element once, also in tiles smaller than the block. Hardware copies keep
  // the widest vectors even where that leaves threads idle (16-byte
  // cp.async.cg from half the warps rather than 8-byte copies from all): no
  // thread keeps the values, and fewer copies are issued.
  ir::VectorCap cap = ir::VectorCap::NoAvoidableCopies;
  if (op.code() == OpCode::Copy)
    cap = t_.asyncCopyImpl() == AsyncCopyImpl::RegisterStaged ? ir::VectorCap::FewestCopies
                                                              : ir::VectorCap::WidestVectors;
  // A store's runs need be no longer than its own vectors: an f32 store
  // beside bf16 loads of its shape would run 8 elements per thread, each
  // instruction's lanes 32 bytes apart.
  ir::Layout want = op.code() == OpCode::Store ? la_.defaultForAccess(op, cap) : la_.defaultFor(shape, cap);
  if (want == l) return l;
  if (want.parent.spt[want.dims.back()] > l.parent.spt[l.dims.back()]) return want;
  if (ir::slotTable(want, shape).size() < ir::slotTable(l, shape).size()) return want;
  return l;
}

}  // namespace tessera::codegen::gpu_lower

namespace tessera::codegen::gpu_lower {

std::optional<ir::Layout> Lower::transposedCopyLayout(const ir::Op& op) {
  if (op.code() != OpCode::Copy || t_.asyncCopyImpl() != AsyncCopyImpl::RegisterStaged) return std::nullopt;
  auto sg = storage_.find(rootBuffer(op.operand(0)));
  if (sg == storage_.end() || !sg->second.transposed) return std::nullopt;
  const ir::Value* src = op.operand(1);
  const auto& shape = src->type().shape();
  const size_t r = shape.size();
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 1 || (s & (s - 1)) != 0) return std::nullopt;
    n *= s;
  }
  const int64_t threads = int64_t{la_.numWarps()} * la_.warpSize();
  const int64_t perThread = n / threads;
  if (perThread < 2) return std::nullopt;
  const int64_t K = shape[r - 2], N = shape[r - 1];
  const int64_t eb = static_cast<int64_t>(bytesOf(memTyOf(src->type().dtype())));
  // Global side: the widest vector the pointers allow along N (alignment,
  // contiguity, the mask's constancy); LDS side: the widest run along K
  // the padded N x K rows keep aligned (as bufferRunWidth computes it).
  const ir::Value* mask = op.numOperands() > 2 ? op.operand(2) : nullptr;
  int64_t g = la_.vectorWidth(op);
  if (mask) g = std::gcd(g, la_.maskConstancy(mask));
  g = std::max<int64_t>(1, std::min(g, 16 / eb));
  int64_t w = sg->second.st.swizzle ? sg->second.st.unitElems() : 16 / eb;  // a swizzle unit stays whole
  while (w > 1 && ((sg->second.st.stride % w) != 0 || (sg->second.slotElems() % w) != 0)) w /= 2;
  // Instructions per thread of each choice, from the gemm_f16 listings on
  // gfx942 / gfx1100 (docs/gpu.md): a global load of one row costs itself
  // and its 64-bit address (sign-extended index, shift, add with carry:
  // ~3 more); an LDS store writes a column of kv elements; a masked load is
  // a branch around it (this target has no predicated access), an
  // exec-mask region of ~4 scalar instructions, shared by the rows of a run
  // over which the mask is one value (cK rows: globalLoad guards them
  // together), one per vector along N; and 16-bit elements loaded as
  // N-pairs must be repacked into K-pairs (one permute per 32-bit word).
  const int64_t cK = mask ? la_.maskConstancy(mask, static_cast<int>(r - 2)) : K;
  constexpr int64_t kAddressCost = 3, kRegionCost = 4;
  // The fewest; on a tie the wider LDS stores.
  int64_t bestK = 0, bestCost = INT64_MAX;
  for (int64_t kv = 1; kv <= std::min(perThread, K); kv *= 2) {
    const int64_t nv = perThread / kv;
    if (nv > N) continue;
    const int64_t vectors = nv / std::min(nv, g);  // per row
    const int64_t loads = kv * vectors * (1 + kAddressCost);
    const int64_t stores = nv * (kv / std::min(kv, w));
    const int64_t regions = mask ? (kv / std::min(kv, cK)) * vectors : 0;
    const int64_t repack = kv > 1 && eb < 4 ? kv * nv * eb / 4 : 0;
    const int64_t cost = loads + stores + kRegionCost * regions + repack;
    if (cost <= bestCost) {
      bestCost = cost;
      bestK = kv;
    }
  }
  if (bestK <= 1) return std::nullopt;
  std::vector<int64_t> spt(r, 1), order;
  spt[r - 2] = bestK;
  spt[r - 1] = perThread / bestK;
  for (size_t k = 0; k < r; ++k) order.push_back(static_cast<int64_t>(r - 1 - k));
  return ir::Layout::blocked(ir::distributeBlocked(shape, spt, order, la_.numWarps(), la_.warpSize()));
}

}  // namespace tessera::codegen::gpu_lower

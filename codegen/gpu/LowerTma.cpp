// Async copies as tensor copies (NVIDIA TMA) completing on transaction
// barriers, where the target has them (GpuTargetInfo::hasTensorCopies).
//
// Which copies. A `copy {async = 1}` whose pointer tile and mask are a box
// of a row-major tensor (ir::matchTiledAccess: base + (r0 + i) * ld +
// (c0 + j), masked by `< bound` per dimension or not at all), aligned as
// TMA requires (a 16-byte base and row stride: the aligned variant a launch
// specialises to), into a buffer whose storage is a set of dense boxes: a
// plain row-major slot, or the swizzled staging layouts of GpuDot.h whose
// rows are 32, 64 or 128 bytes (TMA's swizzle modes are the same XOR of
// 16-byte chunks by address bits), in column blocks, with wgmma's A rows in
// warpgroup order as boxes of 8 rows. Other copies keep cp.async. Out of
// bounds boxes are zero-filled by TMA, which is the masked copy's meaning.
//
// Tensor maps. One per distinct (argument, box, swizzle): a hidden kernel
// parameter after the user's (KernelSignature::tensorMaps), which the
// launch encodes from the arguments (dims from the mask's bounds, the row
// stride from ld; an unmasked dimension is unbounded).
//
// Groups. The IR's async groups (IR.h, docs/pipelining.md) map onto S
// transaction barriers, S = 1 + the largest `pending` of any async_wait
// (the most groups in flight at a wait, plus the one being filled): group
// g uses barrier g mod S, phase g / S. One lane of warp 0 announces each
// copy's bytes (expect_tx) and issues it on the open group's barrier;
// async_commit is that lane's one arrival on it (the phase completes when that arrival and
// the bytes have come); async_wait {pending = N} waits, in every thread,
// for the phases of the groups it retires: a known number of them where
// the outstanding groups are the same on every run of the wait
// (simulateGroups; the pipelined loop retires one), else as many as a
// per-thread counter says, in a loop. Parity reuse: group g + S starts
// only after every thread has waited for group g, which the verified
// schedule guarantees (a barrier separates a slot's reads, which follow
// their group's wait, from the copy that refills it).
#include <algorithm>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

namespace {
constexpr int64_t kUnbounded = INT32_MAX;

TensorMapSpec::Extent extent(const std::optional<ir::ArgExtent>& e) {
  if (!e) return {-1, 1, kUnbounded};
  if (e->arg < 0) return {-1, 1, e->scale};
  return {e->arg, e->scale, 0};
}
}  // namespace

std::optional<TmaCopy> Lower::planTmaCopy(const ir::Op& op) {
  auto acc = ir::matchTiledAccess(f_, op, ax_);
  if (!acc || !acc->aligned) return std::nullopt;
  const ir::Value* buf = op.operand(0);
  if (buf->type().dtype() != acc->dtype || buf->type().shape().size() != 2) return std::nullopt;
  auto sg = storage_.find(rootBuffer(buf));
  if (sg == storage_.end()) return planTmaBoxes(*acc, nullptr, false);
  return planTmaBoxes(*acc, &sg->second.st, sg->second.transposed);
}

std::optional<TmaCopy> Lower::planTmaBoxes(const ir::TiledAccess& acc, const DotStaging* st, bool transposed) {
  const int64_t eb = static_cast<int64_t>(byteSize(acc.dtype));
  if (eb != 1 && eb != 2 && eb != 4 && eb != 8) return std::nullopt;
  // Storage rows are the tensor's rows (a transposed staging buffer holds
  // the tile's dim 1 along its rows, as a transposed access reads them).
  if (transposed != acc.transposed) return std::nullopt;
  const int64_t R = acc.tileRows, C = acc.tileCols;
  // The storage as boxes: rows of `blockCols` elements in column blocks;
  // `swz` bytes of swizzle; wgmma's A rows in groups of 8.
  int64_t blockCols = C, swz = 0, groupRows = 0, W = 0, T = 1;
  if (st) {
    if (st->mfmaColWarps || st->rows != R || st->cols != C) return std::nullopt;
    blockCols = st->blockCols ? st->blockCols : st->cols;
    if (st->stride != blockCols) return std::nullopt;  // padded rows: not dense boxes
    if (st->swizzle) {
      const int64_t rowBytes = blockCols * eb;
      if (rowBytes == 32 || rowBytes == 64 || rowBytes == 128)
        swz = rowBytes;
      else if (rowBytes != 16)
        return std::nullopt;  // rows of more than 128 bytes: no TMA swizzle mode
    }
    W = st->rowGroupWarps;
    T = st->rowGroupTiles;
    if (W) groupRows = 8;
  }
  if ((blockCols * eb) % 16 != 0 || blockCols > 256 || C % blockCols != 0) return std::nullopt;
  const int64_t boxRows = groupRows ? groupRows : std::min<int64_t>(R, 256);
  if (R % boxRows != 0) return std::nullopt;
  // Alignment: TMA writes to 128-byte aligned addresses, a swizzled box to
  // the swizzle's 8 rows.
  const uint64_t align = std::max<uint64_t>(128, swz ? static_cast<uint64_t>(8 * swz) : 0);
  const uint64_t bytes = static_cast<uint64_t>(R * C * eb);
  if (bytes % align != 0 || static_cast<uint64_t>(boxRows * blockCols * eb) % align != 0) return std::nullopt;

  // Columns no mask bounds: the tensor's rows are then taken to be the row
  // stride long, which the driver requires (each dimension within the next
  // one's stride) and which is exact only where the tile's columns provably
  // stay in the row: a constant stride of at least the tile, from column 0.
  if (!acc.cols && (!acc.colStart.terms.empty() || acc.rowStride.arg >= 0 || acc.rowStride.scale < C))
    return std::nullopt;

  TensorMapSpec spec;
  spec.source = static_cast<int>(acc.source);
  spec.dtype = acc.dtype;
  spec.rank = acc.rank;
  spec.dims[0] = acc.cols ? extent(acc.cols) : TensorMapSpec::Extent{-1, 1, acc.rowStride.scale};
  spec.dims[1] = extent(acc.rows);
  spec.dims[2] = extent(std::nullopt);
  spec.strides[0] = {-1, 1, 1};
  spec.strides[1] = extent(acc.rowStride);
  if (acc.rank == 3) spec.strides[2] = extent(acc.planeStride);
  spec.box[0] = static_cast<uint32_t>(blockCols);
  spec.box[1] = static_cast<uint32_t>(boxRows);
  spec.swizzleBytes = static_cast<uint32_t>(swz);
  if (acc.rank == 2) spec.dims[2] = spec.strides[2] = {-1, 1, 0};
  unsigned map = 0;
  while (map < tensorMaps_.size() && !(tensorMaps_[map] == spec)) ++map;
  if (map == tensorMaps_.size()) tensorMaps_.push_back(spec);

  TmaCopy c;
  c.access = acc;
  c.bytes = bytes;
  c.align = align;
  for (int64_t blk = 0; blk < C / blockCols; ++blk)
    for (int64_t s = 0; s < R; s += boxRows) {
      int64_t row = s;
      if (W) {
        // Storage rows 8q.. hold #mma rows g + 8w + 8W h + 16W (T p + t)
        // with q = h + 2t + 2T w + 2TW p (GpuDot.h, DotStaging::
        // rowGroupWarps).
        const int64_t q = s / 8, h = q % 2, t = (q / 2) % T, w = (q / (2 * T)) % W, p = q / (2 * T * W);
        row = 8 * w + 8 * W * h + 16 * W * (T * p + t);
      }
      c.boxes.push_back({map, blk * R * blockCols + s * blockCols, row, blk * blockCols});
    }
  return c;
}

// A store of a tile that is one box of a row-major tensor (the GEMM's
// epilogue): one tensor store from a row-major scratch area, its masked
// edge clipped by the tensor map's dims as the mask would. One box only (at
// most 256 x 256 elements, rows of a multiple of 16 bytes) and at most 64
// KiB of scratch; others keep per-thread stores. So does a value computed
// by a transcendental epilogue (bias + GELU): the per-thread stores' guard
// blocks bound how far ptxas hoists its erf ahead of them, while the
// scratch writes, one straight-line block, let it hold every value at once
// (the 128x128 GEMM with 4 warps: 154 -> 255 registers and spills).
std::optional<TmaCopy> Lower::planTmaStore(const ir::Op& op) {
  if (!op.operand(0)->type().isTile() || op.operand(0)->type().shape().size() != 2) return std::nullopt;
  bool costly = false;
  std::function<void(const ir::Value*, int)> scan = [&](const ir::Value* v, int depth) {
    const ir::Op* d = v->definingOp();
    if (costly || !d || depth > 16 || !v->type().isTile() || d->parent() != op.parent()) return;
    if (ir::isTranscendental(d->code())) costly = true;
    if (ir::isElementwise(d->code()))
      for (const ir::Value* o : d->operands()) scan(o, depth + 1);
  };
  scan(op.operand(1), 0);
  if (costly) return std::nullopt;
  auto acc = ir::matchTiledAccess(f_, op, ax_);
  if (!acc || !acc->aligned || acc->transposed || acc->rank != 2) return std::nullopt;
  const int64_t eb = static_cast<int64_t>(byteSize(acc->dtype));
  const int64_t R = acc->tileRows, C = acc->tileCols;
  if ((eb != 1 && eb != 2 && eb != 4 && eb != 8) || (C * eb) % 16 != 0 || R > 256 || C > 256 || R * C * eb > 64 * 1024)
    return std::nullopt;
  // An unmasked column dimension, as for loads (planTmaBoxes).
  if (!acc->cols && (!acc->colStart.terms.empty() || acc->rowStride.arg >= 0 || acc->rowStride.scale < C))
    return std::nullopt;
  TensorMapSpec spec;
  spec.source = static_cast<int>(acc->source);
  spec.dtype = acc->dtype;
  spec.rank = 2;
  spec.dims[0] = acc->cols ? extent(acc->cols) : TensorMapSpec::Extent{-1, 1, acc->rowStride.scale};
  spec.dims[1] = extent(acc->rows);
  spec.dims[2] = spec.strides[2] = {-1, 1, 0};
  spec.strides[0] = {-1, 1, 1};
  spec.strides[1] = extent(acc->rowStride);
  spec.box[0] = static_cast<uint32_t>(C);
  spec.box[1] = static_cast<uint32_t>(R);
  spec.swizzleBytes = 0;
  unsigned map = 0;
  while (map < tensorMaps_.size() && !(tensorMaps_[map] == spec)) ++map;
  if (map == tensorMaps_.size()) tensorMaps_.push_back(spec);
  TmaCopy c;
  c.access = *acc;
  c.bytes = static_cast<uint64_t>(R * C * eb);
  c.boxes.push_back({map, 0, 0, 0});
  return c;
}

// The value, in the layout it was computed in (no conversion), written by
// its owners to the scratch area row-major; each writer's proxy fence and a
// barrier hand the bytes to the async proxy; one lane of warp 0 stores the
// box and waits for it (so the scratch is free again after the next
// barrier, which every later shared access waits for).
void Lower::emitTmaStore(const ir::Op& op, const TmaCopy& c) {
  const ir::Value* val = op.operand(1);
  const ir::Layout l = la_.get(val);
  const auto& shape = val->type().shape();
  llvm::Type* mt = memTyOf(val->type().dtype());
  const int64_t eb = static_cast<int64_t>(bytesOf(mt));
  llvm::Value* base = scratch(c.bytes, 128);
  Slots vals = tileIn(val, l);
  ir::SlotTable ts = ir::slotTable(l, shape);
  const int64_t wv = slotRunWidth(l, ts, 16 / eb);
  beforeShared();
  beforeGlobal(true);
  record_.accesses.push_back({&op, l, wv});
  guarded(ownerPred(l, ts), [&] {
    Slots bs = bases(l, ts);
    for (size_t i = 0; i < ts.size(); ++i) {
      if (ts.consts[i][1] % wv != 0) continue;
      llvm::Value* p = b_.CreateInBoundsGEP(mt, base, linear(indexOf(bs, ts, i), shape));
      storeRun(vals, slotRun(ts, i, wv, 1), mt, p);
    }
  });
  t_.sharedToAsyncProxyFence(b_);
  barrier();
  guarded(issuingWarp(), [&] {
    auto eval = [&](const ir::ScalarPoly& p) {
      llvm::Value* v = i32(0);
      for (auto& [fs, k] : p.terms) {
        llvm::Value* t = i32(k);
        for (const ir::Value* f : fs) t = b_.CreateMul(t, b_.CreateSExtOrTrunc(scalar(f), b_.getInt32Ty()));
        v = b_.CreateAdd(v, t);
      }
      return v;
    };
    llvm::Value* coords[2] = {eval(c.access.colStart), eval(c.access.rowStart)};
    t_.tensorStore(b_, tensorMapArgs_[c.boxes[0].map], coords, base);
  });
  smemDirty_ = globalDirty_ = true;
}

void Lower::planTma() {
  tma_.clear();
  tmaOperands_.clear();
  tmaStores_.clear();
  tensorMaps_.clear();
  tmaBarriers_ = 0;
  onlyTensorCopies_ = false;
  if (!t_.hasTensorCopies()) return;
  int64_t maxPending = 0;
  bool groups = false;  // async groups (a warp-specialised channel has none)
  auto& body = const_cast<ir::Function&>(f_).body();
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() == OpCode::AsyncWait) maxPending = std::max(maxPending, op.intAttr("pending"));
    groups = groups || op.code() == OpCode::AsyncCommit;
  });
  // The group copies go by TMA only where the reuse of the S barriers is
  // proven safe for this program (simulateGroups); else they keep cp.async.
  tmaBarriers_ = static_cast<unsigned>(maxPending + 1);
  tmaRetire_.clear();
  groupsProven_ = true;
  simulateGroups(f_.body(), GroupState{});
  bool others = false;
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::Copy || !op.hasAttr("async") || op.intAttr("async") == 0) return;
    if (auto c = groupsProven_ ? planTmaCopy(op) : std::nullopt)
      tma_.emplace(&op, std::move(*c));
    else
      others = true;
  });
  // Dot operands copied straight from global memory into the dot's
  // staging buffer (planDotOperands): boxes into that buffer, completing on
  // one more barrier that the dot waits for.
  bool operandsByCpAsync = false;
  for (auto& [key, fast] : globalOperands_) {
    auto [dot, i] = key;
    const ir::Op& ld = *dot->operand(i)->definingOp();
    auto acc = ir::matchTiledAccess(f_, ld, ax_);
    std::optional<TmaCopy> c;
    if (acc && acc->aligned) {
      TensorCoreDotPlan p = dotPlan(*dot);
      if (p.bFromShared) c = planTmaBoxes(*acc, i == 0 ? &p.a : &p.b, i == 1 && p.bTransposed);
    }
    if (c)
      tmaOperands_.emplace(key, std::move(*c));
    else
      operandsByCpAsync = true;
  }
  if (tma_.empty() || !groups) tmaBarriers_ = 0;
  if (tma_.empty() && tmaOperands_.empty()) return;
  // A kernel whose loads are tensor copies stores its tile boxes so too
  // (the GEMMs' epilogue); others keep their stores as they were.
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() == OpCode::Store)
      if (auto c = planTmaStore(op)) tmaStores_.emplace(&op, std::move(*c));
  });
  onlyTensorCopies_ = !others && !operandsByCpAsync;
  // The destination buffers start where their boxes may.
  for (auto& [op, c] : tma_) {
    const ir::Value* root = rootBuffer(op->operand(0));
    if (auto sg = storage_.find(root); sg != storage_.end())
      sg->second.align = std::max(sg->second.align, c.align);
    else
      requireAlign(root, c.align);
  }
}

// The groups as the program runs them, followed per thread through the
// IR: `outstanding` groups committed and not waited for, the newest
// `unsynced` of the waited ones retired since the last block barrier.
//
// * Each async_wait retires outstanding - pending groups (recorded: the
//   lowering then waits for exactly those, no loop); unknown (-1) where the
//   state is, and the wait loops over a per-thread counter.
// * Each async_commit starts group c on barrier c mod S, last used by group
//   c - S. That is safe when every thread has waited for group c - S and
//   passed a block barrier since (so no thread still waits on the phase
//   the new group will complete): outstanding + unsynced < S. A commit
//   where that is not proven (or the state unknown) clears groupsProven_.
// A loop keeps the state known where its body leaves it as it found it
// (the pipelined loop: a barrier, one commit, one wait, a barrier).
std::optional<GroupState> Lower::simulateGroups(const ir::Block& b, std::optional<GroupState> st) {
  for (auto& op : b.ops()) {
    switch (op->code()) {
      case OpCode::AsyncCommit:
        if (!st || st->outstanding + st->unsynced >= int64_t{tmaBarriers_}) groupsProven_ = false;
        if (st) ++st->outstanding;
        break;
      case OpCode::AsyncWait: {
        const int64_t p = op->intAttr("pending");
        const int64_t k = st ? std::max<int64_t>(0, st->outstanding - p) : -1;
        tmaRetire_[op.get()] = k;
        if (st) {
          st->outstanding -= k;
          st->unsynced += k;
        }
        break;
      }
      case OpCode::Barrier:
        if (st) st->unsynced = 0;
        break;
      case OpCode::For:
      case OpCode::While: {
        const bool proven = groupsProven_;
        if (simulateGroups(op->region(0).block(), st) != st) {
          groupsProven_ = proven;  // the second pass decides
          simulateGroups(op->region(0).block(), std::nullopt);
          st.reset();
        }
        break;
      }
      case OpCode::If: {
        auto t = simulateGroups(op->region(0).block(), st);
        auto e = op->numRegions() > 1 ? simulateGroups(op->region(1).block(), st) : st;
        if (t != e)
          st.reset();
        else
          st = t;
        break;
      }
      default: break;
    }
  }
  return st;
}

void Lower::declareTensorMaps(llvm::Function* fn, unsigned firstParam) {
  tensorMapArgs_.clear();
  for (unsigned i = 0; i < tensorMaps_.size(); ++i) {
    t_.declareTensorMapParam(*fn, firstParam + i);
    fn->getArg(firstParam + i)->setName("tensor_map" + std::to_string(i));
    tensorMapArgs_.push_back(fn->getArg(firstParam + i));
  }
}

llvm::Value* Lower::tmaBarrier(llvm::Value* group) {
  llvm::Value* idx = b_.CreateURem(group, i32(tmaBarriers_));
  llvm::Value* base = areaAt(AreaKind::Barriers, nullptr);
  return b_.CreateInBoundsGEP(b_.getInt64Ty(), base, idx, "mbar");
}

// The dot operands' barrier: after the groups' (one phase per dot run).
llvm::Value* Lower::tmaOperandBarrier() { return areaAt(AreaKind::Barriers, nullptr, 8 * uint64_t{tmaBarriers_}); }

// A warp-specialised channel needs its barriers and phase bits even where
// no copy of the producer became a tensor copy (its commits then arrive
// with no bytes).
bool Lower::usesMbarriers() const {
  return !tma_.empty() || !tmaOperands_.empty() || specialize_ != nullptr || accColumns_ != 0;
}

void Lower::initTma() {
  if (!usesMbarriers()) return;
  // Per-thread counters of groups and operand phases (registers after
  // mem2reg).
  llvm::IRBuilderBase::InsertPointGuard g(b_);
  llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
  b_.SetInsertPoint(&entry, entry.getFirstInsertionPt());
  for (llvm::Value** c : {&tmaCommitted_, &tmaWaited_, &tmaOperandPhase_, &chanPhases_}) {
    *c = b_.CreateAlloca(b_.getInt32Ty(), nullptr, "tma.count");
    b_.CreateStore(i32(0), *c);
  }
}

void Lower::initTmaBarriers() {
  if (!usesMbarriers()) return;
  guarded(b_.CreateICmpEQ(tid_, i32(0)), [&] {
    for (unsigned s = 0; s < tmaBarriers_; ++s) t_.mbarrierInit(b_, tmaBarrier(i32(s)), 1);
    if (!tmaOperands_.empty()) t_.mbarrierInit(b_, tmaOperandBarrier(), 1);
    initChannelBarriers();
    for (unsigned s = 0; s < accBarriers_; ++s) t_.mbarrierInit(b_, accBarrier(i32(s)), 1);
    t_.mbarrierInitFence(b_);
  });
  barrier();
}

// Warp 0, as a warp-uniform condition (the warp index broadcast from lane
// 0): the copies and arrivals inside are made by the lane the target
// elects (NVPTXTma.h).
llvm::Value* Lower::issuingWarp() { return b_.CreateICmpEQ(t_.shuffleIdx(b_, warp_, i32(0)), i32(0), "tma.warp"); }

// The copies of a group (or of a dot's operands) are issued together, at
// the commit (the dot's wait), in one region of warp 0: one proxy fence,
// one announcement of all their bytes, the boxes and the arrival, instead of
// a branch, a fence and an announcement per copy. Issuing a copy later than
// written is one of the executions IR.h allows (it happens at some time
// before the wait that retires its group); nothing between touches its
// bytes in a verified program. A copy whose commit is not later in its
// block (an `if` or a loop in between) is issued where it stands.
bool Lower::commitFollows(const ir::Op& op) {
  const auto& ops = op.parent()->ops();
  bool seen = false;
  for (const auto& o : ops) {
    if (o.get() == &op) {
      seen = true;
      continue;
    }
    if (!seen) continue;
    switch (o->code()) {
      case OpCode::AsyncCommit:
      case OpCode::StageCommit: return true;
      case OpCode::For:
      case OpCode::If:
      case OpCode::While:
      case OpCode::Barrier:
      case OpCode::AsyncWait:
      case OpCode::Return: return false;
      default: break;
    }
  }
  return false;
}

void Lower::flushTma(llvm::Value* bar) {
  // The producer of a warp-specialised kernel is one warp already.
  guarded(inProducer_ ? nullptr : issuingWarp(), [&] {
    uint64_t bytes = 0;
    for (const PendingTma& p : tmaPending_) bytes += p.copy->bytes;
    if (!tmaPending_.empty()) {
      // The buffers' earlier readers (generic proxy, ordered by the
      // schedule's barrier) before the tensor copies' writes (async proxy).
      t_.sharedToAsyncProxyFence(b_);
      t_.mbarrierExpectTx(b_, bar, i32(static_cast<int64_t>(bytes)));
    }
    const ir::Op* cur = curOp_;
    for (const PendingTma& p : tmaPending_) {
      setCurrentOp(*p.op);  // the boxes are the copy's (reports name it)
      issueTmaBoxes(*p.copy, p.elemTy, p.base, bar);
    }
    if (cur) setCurrentOp(*cur);
    t_.mbarrierArrive(b_, bar);
  });
  tmaPending_.clear();
}

void Lower::issueTmaBoxes(const TmaCopy& c, llvm::Type* elemTy, llvm::Value* base, llvm::Value* bar) {
  auto eval = [&](const ir::ScalarPoly& p, int64_t plus) {
    llvm::Value* v = i32(plus);
    for (auto& [fs, k] : p.terms) {
      llvm::Value* t = i32(k);
      for (const ir::Value* f : fs) t = b_.CreateMul(t, b_.CreateSExtOrTrunc(scalar(f), b_.getInt32Ty()));
      v = b_.CreateAdd(v, t);
    }
    return v;
  };
  for (const TmaBox& box : c.boxes) {
    llvm::Value* dst = b_.CreateInBoundsGEP(elemTy, base, i32(box.dstElem));
    llvm::Value* coords[3] = {eval(c.access.colStart, box.col), eval(c.access.rowStart, box.row),
                              eval(c.access.zStart, 0)};
    t_.tensorLoad(b_, dst, tensorMapArgs_[box.map], coords, c.access.rank, bar);
  }
}

void Lower::emitTmaCopy(const ir::Op& op, const TmaCopy& c) {
  beforeGlobal(false);
  llvm::Type* mt = memTyOf(op.operand(0)->type().dtype());
  llvm::Value* base = scalar(op.operand(0));
  if (commitFollows(op)) {
    tmaPending_.push_back({&op, &c, mt, base});
    return;
  }
  llvm::Value* bar = tmaBarrier(b_.CreateLoad(b_.getInt32Ty(), tmaCommitted_));
  guarded(issuingWarp(), [&] {
    t_.sharedToAsyncProxyFence(b_);
    t_.mbarrierExpectTx(b_, bar, i32(static_cast<int64_t>(c.bytes)));
    issueTmaBoxes(c, mt, base, bar);
  });
}

bool Lower::emitTmaOperand(const ir::Op& dot, unsigned i, llvm::Value* base) {
  auto it = tmaOperands_.find({&dot, i});
  if (it == tmaOperands_.end()) return false;
  const ir::Op& ld = *dot.operand(i)->definingOp();
  setCurrentOp(ld);
  beforeGlobal(false);
  tmaOperandPending_.push_back({&ld, &it->second, memTyOf(ld.result()->type().dtype()), base});
  setCurrentOp(dot);
  return true;
}

void Lower::waitTmaOperands() {
  // One phase per dot run: the elected lane issues the operands' boxes and
  // arrives, everyone waits.
  std::swap(tmaPending_, tmaOperandPending_);
  flushTma(tmaOperandBarrier());
  std::swap(tmaPending_, tmaOperandPending_);
  llvm::Value* phase = b_.CreateLoad(b_.getInt32Ty(), tmaOperandPhase_);
  t_.mbarrierWait(b_, tmaOperandBarrier(), b_.CreateAnd(phase, i32(1)));
  b_.CreateStore(b_.CreateAdd(phase, i32(1)), tmaOperandPhase_);
}

void Lower::tmaCommit() {
  if (tma_.empty()) return;
  llvm::Value* group = b_.CreateLoad(b_.getInt32Ty(), tmaCommitted_);
  flushTma(tmaBarrier(group));
  b_.CreateStore(b_.CreateAdd(group, i32(1)), tmaCommitted_);
}

void Lower::tmaWait(const ir::Op& op) {
  if (tma_.empty()) return;
  const int64_t pending = op.intAttr("pending");
  auto waitFor = [&](llvm::Value* g) {
    t_.mbarrierWait(b_, tmaBarrier(g), b_.CreateAnd(b_.CreateUDiv(g, i32(tmaBarriers_)), i32(1)));
  };
  if (auto it = tmaRetire_.find(&op); it != tmaRetire_.end() && it->second >= 0) {
    // Known: exactly that many groups, oldest first.
    llvm::Value* waited = b_.CreateLoad(b_.getInt32Ty(), tmaWaited_);
    for (int64_t i = 0; i < it->second; ++i) waitFor(b_.CreateAdd(waited, i32(i)));
    b_.CreateStore(b_.CreateAdd(waited, i32(it->second)), tmaWaited_);
    return;
  }
  // while (waited < committed - pending) wait for group `waited`.
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  auto* head = llvm::BasicBlock::Create(ctx_, "tma.wait", fn);
  auto* body = llvm::BasicBlock::Create(ctx_, "tma.wait.body", fn);
  auto* done = llvm::BasicBlock::Create(ctx_, "tma.wait.done", fn);
  llvm::Value* target = b_.CreateSub(b_.CreateLoad(b_.getInt32Ty(), tmaCommitted_), i32(pending));
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::Value* waited = b_.CreateLoad(b_.getInt32Ty(), tmaWaited_);
  b_.CreateCondBr(b_.CreateICmpSLT(waited, target), body, done);
  b_.SetInsertPoint(body);
  waitFor(waited);
  b_.CreateStore(b_.CreateAdd(waited, i32(1)), tmaWaited_);
  b_.CreateBr(head);
  b_.SetInsertPoint(done);
}

}  // namespace tessera::codegen::gpu_lower

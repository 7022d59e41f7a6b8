// Global memory: loads and copies (masked, contiguous and gather paths,
// next-iteration prefetches), stores (masked, contiguous, scatter,
// streaming, overlap-checked fused loads) and atomics.
#include "codegen/cpu/CpuLowerImpl.h"

#include <llvm/IR/Intrinsics.h>

#include "codegen/cpu/CpuDot.h"
#include "codegen/llvm/Atomics.h"

namespace tessera::codegen::cpu::detail {

namespace {

// Launches writing at least this much through one store op use streaming
// (non-temporal) stores: about the last-level cache a core can count on.
constexpr int64_t kStreamingBytes = int64_t{8} << 20;

}  // namespace

// ===================================================================== memory

Lowering::MemOperands Lowering::memOperands(const ir::Op& op) {
  MemOperands m{};
  bool isLoad = op.code() == OpCode::Load || op.code() == OpCode::Copy;
  unsigned p = op.code() == OpCode::Copy ? 1 : 0;  // copy(dst buffer, src ptr [, mask])
  m.ptr = op.operand(p);
  m.val = isLoad ? nullptr : op.operand(ir::valueOperand(op.code()));
  unsigned mi = isLoad ? p + 1 : ir::maskOperand(op.code());
  m.mask = op.numOperands() > mi ? op.operand(mi) : nullptr;
  m.other = op.code() == OpCode::Load && op.numOperands() > 2 ? op.operand(2) : nullptr;
  m.dt = m.ptr->type().dtype();
  m.isBool = m.dt == DType::I1;
  m.st = memTy(m.dt);
  m.align = llvm::Align(m.st->getPrimitiveSizeInBits() / 8);
  return m;
}

llvm::Value* Lowering::loadValueChunk(const ir::Op& op, llvm::Value* base, int64_t c) {
  const auto [ptr, val, mask, other, dt, isBool, st, align] = memOperands(op);
  (void)val;
  bool contiguous = axis_.contiguousChunks(ptr, c);
  llvm::Value* p = contiguous ? nullptr : emitChunk(ptr, base, c);
  llvm::Value* m = mask ? emitChunk(mask, base, c) : nullptr;
  if (m && llvm::isa<llvm::Constant>(m) && llvm::cast<llvm::Constant>(m)->isAllOnesValue()) m = nullptr;
  llvm::Value* o = other && m ? toStorage(emitChunk(other, base, c), isBool) : llvm::Constant::getNullValue(vec(st, c));
  if (contiguous) {
    llvm::Value* p0 = firstPointer(ptr, base, c);
    if (!m) return b_.CreateAlignedLoad(vec(st, c), p0, align);
    // In the general version of a versioned loop the mask is not known to be
    // mostly on, and a masked load costs about what a plain one does.
    if (c == 1 || general_) return b_.CreateMaskedLoad(vec(st, c), p0, align, m, o);
    // As for stores: chunks with every lane on take a plain load.
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    auto* full = llvm::BasicBlock::Create(ctx_, "load.full", f);
    auto* part = llvm::BasicBlock::Create(ctx_, "load.part", f);
    auto* done = llvm::BasicBlock::Create(ctx_, "load.done", f);
    b_.CreateCondBr(b_.CreateAndReduce(m), full, part);
    b_.SetInsertPoint(full);
    llvm::Value* a = b_.CreateAlignedLoad(vec(st, c), p0, align);
    b_.CreateBr(done);
    b_.SetInsertPoint(part);
    llvm::Value* bm = b_.CreateMaskedLoad(vec(st, c), p0, align, m, o);
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    llvm::PHINode* phi = b_.CreatePHI(a->getType(), 2);
    phi->addIncoming(a, full);
    phi->addIncoming(bm, part);
    return phi;
  }
  return b_.CreateMaskedGather(vec(st, c), p, align, m, m ? o : nullptr);
}

void Lowering::emitLoad(const ir::Op& op, llvm::Value* dstArr) {
  // Used for `load` (result array) and `copy` (into a buffer, dstArr set).
  const auto [ptr, val, mask, other, dt, isBool, st, align] = memOperands(op);
  (void)val;
  if (!ptr->type().isTile()) {
    llvm::Value* p = scalar(ptr);
    llvm::Value* v;
    if (!mask) {
      v = b_.CreateAlignedLoad(st, p, align);
    } else {
      llvm::Value* m = b_.CreateVectorSplat(1, scalar(mask));
      llvm::Value* o = other ? toStorage(scalar(other), isBool) : llvm::Constant::getNullValue(st);
      v = b_.CreateMaskedLoad(vec(st, 1), p, align, m, b_.CreateVectorSplat(1, o));
      v = b_.CreateExtractElement(v, uint64_t{0});
    }
    scalars_[op.result()] = fromStorage(v, isBool);
    return;
  }
  int64_t n = numElems(ptr->type());
  int64_t c = chunkWidth(n);
  ir::Type valT = ir::Type::tile(ir::Type::scalar(dt), ptr->type().shape());
  // A dot's B operand goes straight into the kernel's panel layout: the
  // load is the packing step, at no extra pass over the tile.
  // A dot's A operand goes into rows padded to dotRowStride().
  bool panel = !dstArr && loadsAsDotPanel(op.result());
  bool rows = !dstArr && !panel && loadsAsDotRows(op.result());
  int64_t K = panel ? valT.shape()[0] : 0, N = panel ? valT.shape()[1] : 0;
  int64_t nr = panel ? dotBlocking(tgt_, scalarTy(dt)).nr() : 0;
  int64_t lda = rows ? dotRowStride(valT.shape()[1], st) : 0;
  // Chunks must not straddle rows: the width divides the row length.
  if (panel || rows) c = chunkWidth(valT.shape()[1]);
  llvm::Value* arr = dstArr  ? dstArr
                     : panel ? entryAlloca(llvm::ArrayType::get(st, static_cast<uint64_t>(panelElems(K, N, nr))), 64)
                     : rows  ? entryAlloca(llvm::ArrayType::get(st, static_cast<uint64_t>(valT.shape()[0] * lda)), 64)
                             : allocTile(valT);
  // Stages become prefetches: a dot operand loaded (or a staged copy made)
  // in a loop also prefetches what the same load reads in the next
  // iteration, its pointer evaluated again with iv + step. A K step of a
  // GEMM takes tens of microseconds; that hides the memory latency of the
  // next tiles, which are rows far apart that the hardware prefetchers do
  // not follow. A dot operand's prefetches are handed to the dot, which
  // spreads them over its micro-blocks (see emitDot); a copy issues them
  // here, with its loads.
  const ir::Value* iv = prefetchIv(op);
  llvm::Value* nextIv = nullptr;
  if (iv) {
    const ir::Op* loop = iv->ownerBlock()->parent()->parentOp();
    nextIv = b_.CreateAdd(scalar(iv), scalar(loop->operand(2)));
    if (panel || rows) {
      dotPrefetch_[users_[op.result()][0]].push_back({ptr, iv, nextIv});
      nextIv = nullptr;
    }
  }
  versioned({ptr, mask, other}, [&] {
    chunkLoop(ptr->type().shape(), c, [&](llvm::Value* base) {
      llvm::Value* at = panel ? panelIndex(base, K, N, nr) : rows ? paddedIndex(base, valT.shape()[1], lda) : base;
      b_.CreateAlignedStore(loadValueChunk(op, base, c), b_.CreateInBoundsGEP(st, arr, at), align);
      if (nextIv) {
        llvm::Value* cur = scalars_.at(iv);
        scalars_[iv] = nextIv;
        llvm::Value* p = firstPointer(ptr, base, c);
        scalars_[iv] = cur;
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                           {p, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
      }
    });
  });
  if (panel) panelB_.insert(op.result());
  if (rows) rowStride_[op.result()] = lda;
  if (!dstArr) arrays_[op.result()] = arr;
}

const ir::Value* Lowering::prefetchIv(const ir::Op& op) {
  const ir::Region* r = op.parent()->parent();
  const ir::Op* loop = r ? r->parentOp() : nullptr;
  if (!loop || loop->code() != OpCode::For) return nullptr;
  const ir::Value* ptr = op.operand(op.code() == OpCode::Copy ? 1 : 0);
  if (!ptr->type().isTile() || !axis_.contiguousChunks(ptr, chunkWidth(numElems(ptr->type()))) || !recomputable(ptr))
    return nullptr;
  if (op.code() == OpCode::Load) {
    const ir::Value* v = op.result();
    bool feedsDot = false;
    for (const ir::Op* u : users_[v]) feedsDot |= u->code() == OpCode::Dot && u->operand(2) != v;
    if (!feedsDot) return nullptr;
  }
  return op.parent()->arg(0);
}

bool Lowering::recomputable(const ir::Value* v) const {
  if (!v->type().isTile() || arrays_.count(v)) return true;
  if (pending_.count(v)) return false;  // evaluating it writes its array
  const ir::Op* d = v->definingOp();
  if (!d || !isFusableDef(d->code())) return false;
  for (const ir::Value* o : d->operands())
    if (!recomputable(o)) return false;
  return true;
}

void Lowering::storeLoop(const ir::Op& op) {
  const auto [ptr, val, mask, other, dt, isBool, st, align] = memOperands(op);
  (void)other, (void)st;
  int64_t n = numElems(ptr->type());
  int64_t c = chunkWidth(n);
  bool contiguous = axis_.contiguousChunks(ptr, c);
  uint64_t chunkBytes = static_cast<uint64_t>(c) * align.value();
  // Streaming stores (see below) need whole aligned vectors over one run.
  bool streamable = contiguous && c > 1 && chunkBytes % 16 == 0 && !hasAtomics_ && op.parent() == &fn_.body() &&
                    axis_.contiguousChunks(ptr, n);
  auto loop = [&](bool stream) {
    chunkLoop(ptr->type().shape(), c, [&](llvm::Value* base) {
      llvm::Value* p = contiguous ? nullptr : emitChunk(ptr, base, c);
      llvm::Value* v = toStorage(emitChunk(val, base, c), isBool);
      llvm::Value* m = mask ? emitChunk(mask, base, c) : nullptr;
      if (m && llvm::isa<llvm::Constant>(m) && llvm::cast<llvm::Constant>(m)->isAllOnesValue()) m = nullptr;
      if (contiguous) {
        llvm::Value* p0 = firstPointer(ptr, base, c);
        if (!m || c == 1) {
          if (m) {
            b_.CreateMaskedStore(v, p0, align, m);
          } else if (stream) {
            auto* st = b_.CreateAlignedStore(v, p0, llvm::Align(chunkBytes));
            st->setMetadata(llvm::LLVMContext::MD_nontemporal,
                            llvm::MDNode::get(ctx_, {llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
            usedStreaming_ = true;
          } else {
            b_.CreateAlignedStore(v, p0, align);
          }
          return;
        }
        // Masked vector stores are slow on some cores (microcoded on AMD Zen);
        // chunks with every lane on (all but a tile's tail) take a plain store.
        llvm::Function* f = b_.GetInsertBlock()->getParent();
        auto* full = llvm::BasicBlock::Create(ctx_, "store.full", f);
        auto* part = llvm::BasicBlock::Create(ctx_, "store.part", f);
        auto* done = llvm::BasicBlock::Create(ctx_, "store.done", f);
        b_.CreateCondBr(b_.CreateAndReduce(m), full, part);
        b_.SetInsertPoint(full);
        b_.CreateAlignedStore(v, p0, align);
        b_.CreateBr(done);
        b_.SetInsertPoint(part);
        b_.CreateMaskedStore(v, p0, align, m);
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
      } else {
        b_.CreateMaskedScatter(v, p, align, m);
      }
    });
  };
  if (streamable && !general_) {
    // Not for loops bound by arithmetic (exp, erf...): the second copy of
    // the loop would cost more compile time than streaming saves.
    std::vector<const ir::Value*> unused;
    std::unordered_set<const ir::Value*> seen;
    expensiveBody_ = false;
    for (const ir::Value* r : {ptr, val, mask})
      if (r) collectMasks(r, unused, seen);
    streamable = !expensiveBody_;
  }
  if (!streamable || general_) return versioned({ptr, val, mask}, [&] { loop(false); });
  // When the launch writes more than the caches hold, non-temporal
  // (streaming) stores send the data to memory without first reading each
  // line in (a normal store's read-for-ownership moves half as many bytes
  // again as the store itself). Small outputs keep normal stores: they are
  // likely to be read again from the cache soon. Streaming stores need
  // vector-aligned addresses and every lane on. So the fast version of this
  // loop is the streaming one, taken when one test per tile (masks all on,
  // first address aligned, launch large) passes; everything else takes the
  // general loop, whose per-chunk mask test still gives plain stores to
  // chunks with every lane on.
  llvm::Value* p0 = b_.CreatePtrToInt(b_.CreateExtractElement(emitChunk(ptr, i64(0), 1), uint64_t{0}), b_.getInt64Ty());
  llvm::Value* aligned = b_.CreateICmpEQ(b_.CreateAnd(p0, i64(static_cast<int64_t>(chunkBytes) - 1)), i64(0));
  llvm::Value* programs = i64(1);
  for (llvm::Value* g : grid_) programs = b_.CreateMul(programs, b_.CreateZExt(g, b_.getInt64Ty()));
  int64_t tileBytes = n * static_cast<int64_t>(align.value());
  llvm::Value* big = b_.CreateICmpUGE(programs, i64((kStreamingBytes + tileBytes - 1) / tileBytes));
  versioned({ptr, val, mask}, [&] { loop(true); }, b_.CreateAnd(aligned, big), [&] { loop(false); });
}

void Lowering::emitStore(const ir::Op& op) {
  const auto [ptr, val, mask, other, dt, isBool, st, align] = memOperands(op);
  (void)other;
  if (!ptr->type().isTile()) {
    llvm::Value* v = toStorage(scalar(val), isBool);
    if (!mask) {
      b_.CreateAlignedStore(v, scalar(ptr), align);
    } else {
      b_.CreateMaskedStore(b_.CreateVectorSplat(1, v), scalar(ptr), align, b_.CreateVectorSplat(1, scalar(mask)));
    }
    return;
  }
  auto chk = storeChecks_.find(&op);
  if (chk == storeChecks_.end()) return storeLoop(op);
  // Loads sunk into this loop read memory that the store might write. Each
  // pointer tile is one run of consecutive elements (checked when planning),
  // so [first, first + n) bounds it; if a loaded run overlaps the stored run,
  // load those tiles completely first (program order), else fuse.
  const llvm::DataLayout& dl = mod_.getDataLayout();
  auto span = [&](const ir::Value* p) {
    llvm::Value* first =
        b_.CreatePtrToInt(b_.CreateExtractElement(emitChunk(p, i64(0), 1), uint64_t{0}), b_.getInt64Ty());
    uint64_t bytes = static_cast<uint64_t>(numElems(p->type())) * dl.getTypeAllocSize(memTy(p->type().dtype()));
    return std::make_pair(first, b_.CreateAdd(first, i64(static_cast<int64_t>(bytes))));
  };
  auto [slo, shi] = span(ptr);
  llvm::Value* overlap = b_.getFalse();
  for (const ir::Op* l : chk->second) {
    auto [llo, lhi] = span(l->operand(0));
    overlap = b_.CreateOr(overlap, b_.CreateAnd(b_.CreateICmpULT(slo, lhi), b_.CreateICmpULT(llo, shi)));
  }
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* slow = llvm::BasicBlock::Create(ctx_, "store.overlap", f);
  auto* fast = llvm::BasicBlock::Create(ctx_, "store.fused", f);
  auto* join = llvm::BasicBlock::Create(ctx_, "store.end", f);
  b_.CreateCondBr(overlap, slow, fast);
  b_.SetInsertPoint(slow);
  // In-place updates are rare: this path gets the general loops only (no
  // mask versioning), to keep the code small.
  bool wasGeneral = general_;
  general_ = true;
  for (const ir::Op* l : chk->second) {
    fused_.erase(l->result());
    emitLoad(*l);
  }
  storeLoop(op);
  general_ = wasGeneral;
  for (const ir::Op* l : chk->second) {
    arrays_.erase(l->result());
    fused_.insert(l->result());
  }
  b_.CreateBr(join);
  b_.SetInsertPoint(fast);
  storeLoop(op);
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
}

void Lowering::emitAtomic(const ir::Op& op) {
  const ir::Value* ptr = op.operand(0);
  const ir::Value* val = op.operand(ir::valueOperand(op.code()));
  const ir::Value* cmp = op.code() == OpCode::AtomicCas ? op.operand(1) : nullptr;
  const unsigned mi = ir::maskOperand(op.code());
  const ir::Value* mask = op.numOperands() > mi ? op.operand(mi) : nullptr;
  const DType dt = val->type().dtype();
  if (dt == DType::I1) throw CompileError("atomics on i1 are not supported (at " + op.loc().str() + ")");
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  // A program is one thread here: every scope is the system scope.
  auto one = [&](llvm::Value* p, llvm::Value* v, llvm::Value* c) {
    return codegen::emitAtomicElement(b_, op, dt, p, v, c, llvm::SyncScope::System);
  };
  // One lane: if (mask) old = atomic(p, v) else old = 0.
  auto lane = [&](llvm::Value* p, llvm::Value* v, llvm::Value* c, llvm::Value* m) -> llvm::Value* {
    if (!m) return one(p, v, c);
    auto* doBB = llvm::BasicBlock::Create(ctx_, "atomic", f);
    auto* joinBB = llvm::BasicBlock::Create(ctx_, "atomic.end", f);
    llvm::BasicBlock* from = b_.GetInsertBlock();
    b_.CreateCondBr(m, doBB, joinBB);
    b_.SetInsertPoint(doBB);
    llvm::Value* old = one(p, v, c);
    llvm::BasicBlock* last = b_.GetInsertBlock();
    b_.CreateBr(joinBB);
    b_.SetInsertPoint(joinBB);
    llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2);
    phi->addIncoming(llvm::Constant::getNullValue(v->getType()), from);
    phi->addIncoming(old, last);
    return phi;
  };
  if (!ptr->type().isTile()) {
    scalars_[op.result()] = lane(scalar(ptr), scalar(val), cmp ? scalar(cmp) : nullptr, mask ? scalar(mask) : nullptr);
    return;
  }
  int64_t n = numElems(ptr->type());
  llvm::Value* arr = allocTile(op.result()->type());
  chunkLoop(n, 1, [&](llvm::Value* base) {
    auto e = [&](const ir::Value* x) { return b_.CreateExtractElement(emitChunk(x, base, 1), uint64_t{0}); };
    llvm::Value* old = lane(e(ptr), e(val), cmp ? e(cmp) : nullptr, mask ? e(mask) : nullptr);
    storeChunk(arr, op.result()->type(), base, b_.CreateVectorSplat(1, old));
  });
  arrays_[op.result()] = arr;
}

}  // namespace tessera::codegen::cpu::detail

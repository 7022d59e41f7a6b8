// Global memory (loads, stores, atomics) and program-order writes and
// indexing of shared buffers (writeBuffer, bufIndex).

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

#include <llvm/IR/Constants.h>

#include "codegen/gpu/LowerImpl.h"
#include "codegen/llvm/Atomics.h"
#include "tessera/ir/analysis/UniformSplit.h"

namespace tessera::codegen::gpu_lower {

// ===================================================================== memory

bool Lower::writesGlobal(const ir::Block& blk) {
  for (auto& o : blk.ops()) {
    if (o->code() == OpCode::Store || ir::isAtomic(o->code()) || o->code() == OpCode::Fence) return true;
    for (auto& reg : o->regions())
      if (writesGlobal(reg->block())) return true;
  }
  return false;
}

bool Lower::pipelineSlotBarrier(const ir::Op& op) const {
  const ir::Region* r = op.parent()->parent();
  const ir::Op* loop = r ? r->parentOp() : nullptr;
  if (!op.hasAttr("stage") || !loop || loop->code() != OpCode::For || !loop->hasAttr("pipelined")) return false;
  return !writesGlobal(*op.parent());
}

// The barrier opening a register-staged pipelined body ({stage = S-1}: the
// pipeline pass's write-after-read barrier, iteration k's copies writing the
// slot iteration k-1 read) orders nothing on these targets: the copies'
// stores wait for the end of the body (flushStaged, case (b)), after the
// body's {stage = 0} barrier, which already follows iteration k-1's reads;
// between the two barriers only the copies' global loads and their address
// arithmetic run (a shared access of the lowering's own still finds
// smemDirty_ set and waits at a barrier of its own). Kept where the body
// writes global memory or a global write before it is unordered, and where
// something could store the copies before the {stage = 0} barrier: S = 1
// (the body's wait retires its own copies), a wait with pending = 0, or an
// `if` / `for` in the body (case (c)). One s_barrier fewer per iteration of
// every AMD pipelined loop.
bool Lower::redundantSlotBarrier(const ir::Op& op) const {
  if (t_.asyncCopyImpl() != AsyncCopyImpl::RegisterStaged || globalDirty_ || !pipelineSlotBarrier(op)) return false;
  const ir::Block& body = *op.parent();
  const int64_t S = body.parentOp()->intAttr("pipelined");
  if (S < 2 || op.intAttr("stage") != S - 1 || body.ops().front().get() != &op) return false;
  for (auto& o : body.ops()) {
    if (ir::hasRegions(o->code())) return false;
    if (o->code() == OpCode::AsyncWait && o->intAttr("pending") < 1) return false;
  }
  return true;
}

// Masked accesses through a buffer resource (GpuTargetInfo::bufferLoad):
// the split's uniform part, in 64 bits whatever the offsets' type, is the
// base; its varying part, proven to lie in [0, hi] elements, is each
// slot's offset. Only masked accesses take this form: it exists to drop the
// branch around them.
llvm::Value* Lower::bufferBase(const ir::Value* ptr) {
  if (!t_.hasBufferAccesses() || !ptr->type().isTile() || !ptr->type().isPointerLike()) return nullptr;
  std::optional<ir::UniformSplit> s = ir::splitUniform(ptr);
  if (!s) return nullptr;
  const int64_t es = static_cast<int64_t>(byteSize(ptr->type().dtype()));
  if (s->lo < 0 || s->hi >= GpuTargetInfo::kBufferBytes / es) return nullptr;
  llvm::Value* u = b_.getInt64(static_cast<uint64_t>(s->constant));
  for (auto [v, c] : s->terms) {
    llvm::Value* x = scalar(v);
    x = isUnsigned(v->type().dtype()) ? b_.CreateZExtOrTrunc(x, b_.getInt64Ty())
                                      : b_.CreateSExtOrTrunc(x, b_.getInt64Ty());
    u = b_.CreateAdd(u, c == 1 ? x : b_.CreateMul(x, b_.getInt64(static_cast<uint64_t>(c))));
  }
  return b_.CreateGEP(b_.getInt8Ty(), scalar(s->base), b_.CreateMul(u, b_.getInt64(static_cast<uint64_t>(es))),
                      "buf.base");
}

llvm::Value* Lower::bufferOffset(llvm::Value* base, llvm::Value* p) {
  // The difference of two addresses off the same kernel argument: the
  // pipeline's instcombine reduces it to the varying part's own arithmetic.
  return b_.CreateTrunc(b_.CreatePtrDiff(b_.getInt8Ty(), p, base), b_.getInt32Ty());
}

Slots Lower::globalLoad(const ir::Op& op, const ir::Layout& l, const ir::Type& ptrT, const Slots& ptrs,
                        const Slots* mask, const Slots* other) {
  const auto& shape = ptrT.shape();
  ir::Type vt = ptrT.withDType(ptrT.dtype());
  llvm::Type* mt = memTy(vt);
  uint64_t eb = bytesOf(mt);
  ir::SlotTable t = ir::slotTable(l, shape);
  const ir::Value* maskV = op.code() == OpCode::Copy ? (op.numOperands() > 2 ? op.operand(2) : nullptr)
                                                     : (op.numOperands() > 1 ? op.operand(1) : nullptr);
  int64_t v = accessWidth(op, l, ptrT, t, maskV);
  record_.accesses.push_back({&op, l, v});
  beforeGlobal(false);
  const bool stagedVector = op.code() == OpCode::Copy && op.hasAttr("async") && op.intAttr("async") != 0 &&
                            t_.asyncCopyImpl() == AsyncCopyImpl::RegisterStaged;
  const size_t step = static_cast<size_t>(v);
  // A checked compile masks off the accesses that leave their buffer.
  Slots checkedMask;
  if (o_.checkBounds) {
    if (mask) checkedMask = *mask;
    std::vector<size_t> at;
    for (size_t i = 0; i < t.size(); i += step) at.push_back(i);
    checkAccesses(op, op.code() == OpCode::Copy ? op.operand(1) : op.operand(0), ptrs, at,
                  eb * static_cast<uint64_t>(v), checkedMask);
    mask = &checkedMask;
  }
  llvm::Type* lt = v == 1 ? mt : llvm::FixedVectorType::get(mt, static_cast<unsigned>(v));
  const llvm::Align align(eb * static_cast<uint64_t>(v));
  Slots out(t.size());
  auto elements = [&](size_t i, llvm::Value* x) {
    for (int64_t k = 0; k < v; ++k)
      out[i + static_cast<size_t>(k)] = fromMem(v == 1 ? x : b_.CreateExtractElement(x, static_cast<uint64_t>(k)), vt);
  };
  if (!mask) {
    for (size_t i = 0; i < t.size(); i += step) elements(i, b_.CreateAlignedLoad(lt, ptrs[i], align));
    return out;
  }
  // The value a masked-off vector yields: `other`, or zeros.
  auto alt = [&](size_t i) -> llvm::Value* {
    if (!other) return llvm::Constant::getNullValue(lt);
    if (v == 1) return toMem((*other)[i]);
    llvm::Value* x = llvm::PoisonValue::get(lt);
    for (int64_t k = 0; k < v; ++k)
      x = b_.CreateInsertElement(x, toMem((*other)[i + static_cast<size_t>(k)]), static_cast<uint64_t>(k));
    return x;
  };
  // Masked-off lanes never touch memory: a predicated access where the
  // target has one (the `other` values come in through it), else a branch
  // around the access.
  if (llvm::Value* x = t_.predicatedLoad(b_, lt, ptrs[0], (*mask)[0], alt(0))) {
    elements(0, x);
    for (size_t i = step; i < t.size(); i += step) elements(i, t_.predicatedLoad(b_, lt, ptrs[i], (*mask)[i], alt(i)));
    return out;
  }
  // Or through a buffer resource (the same type for every vector: the first
  // answers for all).
  // Only where masked-off lanes yield zeros, which is what an out-of-range
  // buffer load returns: another `other` costs a select per element after
  // the load, where the branch writes it into the destination registers
  // before (cross_entropy's -inf padding: gfx942 22 -> 28 VGPRs with the
  // selects).
  auto zeroOther = [&] {
    if (other)
      for (llvm::Value* x : *other)
        if (auto* c = llvm::dyn_cast<llvm::Constant>(x); !c || !c->isNullValue()) return false;
    return true;
  };
  llvm::Value* base = zeroOther() ? bufferBase(op.code() == OpCode::Copy ? op.operand(1) : op.operand(0)) : nullptr;
  if (llvm::Value* x = base ? t_.bufferLoad(b_, lt, base, bufferOffset(base, ptrs[0]), (*mask)[0], alt(0)) : nullptr) {
    elements(0, x);
    for (size_t i = step; i < t.size(); i += step)
      elements(i, t_.bufferLoad(b_, lt, base, bufferOffset(base, ptrs[i]), (*mask)[i], alt(i)));
    return out;
  }
  // One branch guards every vector of an aligned run of g rows (dim n-2)
  // of the thread's block over which the mask is one value (a K bound on a
  // tile's rows when the loop's k0 and K are multiples of the run): the
  // rows' loads then share one exec region on AMDGPU instead of one each.
  const size_t r = shape.size();
  int64_t g = 1;
  if (r >= 2 && maskV && !o_.checkBounds)  // checked: each vector's mask is its own
    g = std::gcd(la_.maskConstancy(maskV, static_cast<int>(r - 2)),
                 std::min(l.parent.spt[l.dims[r - 2]], shape[r - 2]));
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  for (size_t i = 0; i < t.size(); i += step) {
    if (t.consts[i][r >= 2 ? r - 2 : 0] % g != 0) continue;  // guarded with its run's first row
    std::vector<size_t> group = {i};
    for (int64_t k = 1; r >= 2 && k < g; ++k) {
      std::vector<int64_t> c = t.consts[i];
      c[r - 2] += k;
      auto it = t.index.find(c);
      TS_ASSERT(it != t.index.end(), "gpu lowering: masked row run missing a slot");
      group.push_back(it->second);
    }
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* ld = llvm::BasicBlock::Create(ctx_, "ld", fn);
    auto* join = llvm::BasicBlock::Create(ctx_, "ld.end", fn);
    b_.CreateCondBr((*mask)[i], ld, join);
    b_.SetInsertPoint(ld);
    std::vector<llvm::Value*> loaded;
    for (size_t j : group) loaded.push_back(b_.CreateAlignedLoad(lt, ptrs[j], align));
    // Byte elements join as one vector too, in 32-bit lanes: a phi per i8
    // element is legalised to a register each, and putting the bytes back
    // together for the shared-memory stores then costs about ten
    // instructions per 16-byte vector (an MX GEMM's masked code tiles on
    // AMDGPU: 585 -> 347 instructions per K step).
    const bool bytes = eb == 1 && v % 4 == 0;
    if (!((stagedVector || bytes) && v > 1 && !other)) {
      // Per element, extracted in the guarded block.
      std::vector<Slots> parts;
      for (llvm::Value* x : loaded) {
        Slots e;
        for (int64_t k = 0; k < v; ++k)
          e.push_back(fromMem(v == 1 ? x : b_.CreateExtractElement(x, static_cast<uint64_t>(k)), vt));
        parts.push_back(std::move(e));
      }
      llvm::BasicBlock* ldEnd = b_.GetInsertBlock();
      b_.CreateBr(join);
      b_.SetInsertPoint(join);
      for (size_t n = 0; n < group.size(); ++n)
        for (int64_t k = 0; k < v; ++k) {
          const size_t s = group[n] + static_cast<size_t>(k);
          llvm::PHINode* phi = b_.CreatePHI(parts[n][k]->getType(), 2);
          phi->addIncoming(parts[n][k], ldEnd);
          phi->addIncoming(other ? (*other)[s] : llvm::Constant::getNullValue(parts[n][k]->getType()), from);
          out[s] = phi;
        }
      continue;
    }
    // A register-staged async copy's data are first used by the deferred
    // shared-memory stores, after the loop body's compute. The phi joins
    // the whole loaded vector and the elements are extracted after the
    // join: with one phi per element, the extraction (e.g. the shift that
    // takes the high half of a 32-bit register of f16 pairs) sits in the
    // guarded block, and the AMDGPU backend must wait for the load
    // (s_waitcnt vmcnt) right there instead of at the deferred stores, so
    // the load latency would not overlap the MFMAs.
    llvm::Type* pt = bytes ? llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(v / 4)) : lt;
    for (llvm::Value*& x : loaded) x = b_.CreateBitCast(x, pt);
    llvm::BasicBlock* ldEnd = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    std::vector<llvm::Value*> phis;
    for (size_t n = 0; n < group.size(); ++n) {
      llvm::PHINode* phi = b_.CreatePHI(pt, 2);
      phi->addIncoming(loaded[n], ldEnd);
      phi->addIncoming(llvm::Constant::getNullValue(pt), from);
      phis.push_back(phi);
    }
    for (llvm::Value*& x : phis) x = b_.CreateBitCast(x, lt);  // after every phi of the block
    for (size_t n = 0; n < group.size(); ++n)
      for (int64_t k = 0; k < v; ++k)
        out[group[n] + static_cast<size_t>(k)] =
            fromMem(b_.CreateExtractElement(phis[n], static_cast<uint64_t>(k)), vt);
  }
  return out;
}

int64_t Lower::accessWidth(const ir::Op& op, const ir::Layout& l, const ir::Type& ptrT, const ir::SlotTable& t,
                           const ir::Value* mask) {
  int64_t v = la_.vectorWidth(op);
  v = std::gcd(v, static_cast<int64_t>(t.perDim.back().size()));
  v = std::gcd(v, std::min(l.parent.spt[l.dims.back()], ptrT.shape().back()));
  if (mask) v = std::gcd(v, la_.maskConstancy(mask));
  return v;
}

void Lower::emitLoad(const ir::Op& op) {
  const ir::Value* ptr = op.operand(0);
  const ir::Value* mask = op.numOperands() > 1 ? op.operand(1) : nullptr;
  const ir::Value* other = op.numOperands() > 2 ? op.operand(2) : nullptr;
  if (!ptr->type().isTile()) {
    beforeGlobal(false);
    ir::Type vt = ptr->type().withDType(ptr->type().dtype());
    llvm::Type* mt = memTy(vt);
    auto ld = [&] { return fromMem(b_.CreateAlignedLoad(mt, scalar(ptr), llvm::Align(bytesOf(mt))), vt); };
    llvm::Value* mk = checkScalar(op, ptr, bytesOf(mt), mask ? scalar(mask) : nullptr);
    if (!mk) {
      scalars_[op.result()] = ld();
      return;
    }
    llvm::Value* alt = other ? toMem(scalar(other)) : llvm::Constant::getNullValue(mt);
    if (llvm::Value* x = t_.predicatedLoad(b_, mt, scalar(ptr), mk, alt)) {
      scalars_[op.result()] = fromMem(x, vt);
      return;
    }
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* bb = llvm::BasicBlock::Create(ctx_, "ld", fn);
    auto* join = llvm::BasicBlock::Create(ctx_, "ld.end", fn);
    b_.CreateCondBr(mk, bb, join);
    b_.SetInsertPoint(bb);
    llvm::Value* x = ld();
    llvm::BasicBlock* end = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(x->getType(), 2);
    phi->addIncoming(x, end);
    phi->addIncoming(other ? scalar(other) : llvm::Constant::getNullValue(x->getType()), from);
    scalars_[op.result()] = phi;
    return;
  }
  const ir::Layout& l = la_.get(op.result());
  Slots ptrs = tileIn(ptr, l);
  Slots m, o;
  if (mask) m = tileIn(mask, l);
  if (other) o = tileIn(other, l);
  tiles_[op.result()] = TileV{l, globalLoad(op, l, ptr->type(), ptrs, mask ? &m : nullptr, other ? &o : nullptr)};
}

void Lower::emitStore(const ir::Op& op) {
  if (auto it = tmaStores_.find(&op); it != tmaStores_.end()) return emitTmaStore(op, it->second);
  const ir::Value* ptr = op.operand(0);
  const ir::Value* val = op.operand(1);
  const ir::Value* mask = op.numOperands() > 2 ? op.operand(2) : nullptr;
  ir::Type vt = ptr->type().withDType(ptr->type().dtype());
  llvm::Type* mt = memTy(vt);
  uint64_t eb = bytesOf(mt);
  if (!ptr->type().isTile()) {
    beforeGlobal(true);
    // One thread stores the (uniform) value.
    llvm::Value* c = b_.CreateICmpEQ(tid_, i32(0));
    if (mask) c = b_.CreateAnd(c, scalar(mask));
    c = checkScalar(op, ptr, eb, c);
    llvm::Value* p = scalar(ptr);
    llvm::Value* x = toMem(scalar(val));
    if (!t_.predicatedStore(b_, x, p, c)) guarded(c, [&] { b_.CreateAlignedStore(x, p, llvm::Align(eb)); });
    return;
  }
  // The store runs in freeAccessLayout (no replication of the pointer tile's
  // elements over threads, the widest runs); its pointers and mask are
  // re-derived there, the value converted.
  const ir::Layout l = *freeAccessLayout(op);
  const auto& shape = ptr->type().shape();
  std::map<std::pair<const ir::Value*, std::string>, Slots> memo;
  int budget = 64;
  Slots ptrs = recompute(ptr, l, memo, budget);
  Slots m;
  if (mask) m = recompute(mask, l, memo, budget);
  Slots vals = tileIn(val, l);
  ir::SlotTable t = ir::slotTable(l, shape);
  int64_t v = la_.vectorWidth(op);
  v = std::gcd(v, static_cast<int64_t>(t.perDim.back().size()));
  v = std::gcd(v, std::min(l.parent.spt[l.dims.back()], shape.back()));
  if (mask) v = std::gcd(v, la_.maskConstancy(mask));
  llvm::Value* owner = ownerPred(l, t);
  record_.accesses.push_back({&op, l, v});
  beforeGlobal(true);
  // Predicated only up to 8 stores per thread. The guard blocks of more
  // stores bound how far ptxas hoists the work feeding each one; in one
  // straight-line block it runs them side by side: the 128x128 f16 GEMM
  // with a GELU epilogue on 4 warps (16 stores of 8 elements per thread,
  // each after an erf) went from 242 registers to 255 and 112 bytes of
  // spills on sm_80 with all 16 predicated. Kernels with fewer stores
  // (every example; the 8-warp 128x128 epilogue) lose nothing by it.
  constexpr size_t kMaxPredicatedStores = 8;
  const bool predicate = t.size() / static_cast<size_t>(v) <= kMaxPredicatedStores;
  if (o_.checkBounds) {
    std::vector<size_t> at;
    for (size_t i = 0; i < t.size(); i += static_cast<size_t>(v)) at.push_back(i);
    checkAccesses(op, ptr, ptrs, at, eb * static_cast<uint64_t>(v), m, owner);
  }
  const bool masked = !m.empty();
  llvm::Value* base = masked ? bufferBase(ptr) : nullptr;
  for (size_t i = 0; i < t.size(); i += static_cast<size_t>(v)) {
    llvm::Value* c = owner;
    if (masked) c = c ? b_.CreateAnd(c, m[i]) : m[i];
    auto value = [&] {
      if (v == 1) return toMem(vals[i]);
      llvm::Value* x = llvm::PoisonValue::get(llvm::FixedVectorType::get(mt, static_cast<unsigned>(v)));
      for (int64_t k = 0; k < v; ++k) x = b_.CreateInsertElement(x, toMem(vals[i + k]), static_cast<uint64_t>(k));
      return x;
    };
    // A predicated store where the target has one, else a branch around it.
    if (c && predicate && t_.predicatedStore(b_, value(), ptrs[i], c)) continue;
    if (c && base && t_.bufferStore(b_, value(), base, bufferOffset(base, ptrs[i]), c)) continue;
    guarded(c, [&] { b_.CreateAlignedStore(value(), ptrs[i], llvm::Align(eb * static_cast<uint64_t>(v))); });
  }
}

void Lower::emitFence(const ir::Op& op) {
  // A fence orders the accesses of the whole program, which is the whole
  // block: the barrier makes every thread's earlier accesses happen before
  // each thread's fence (a fence is cumulative over what happens before it),
  // and every later access waits for a barrier after it (unknownOrder).
  barrier();
  b_.CreateFence(codegen::llvmOrder(ir::memOrder(op)), ctx_.getOrInsertSyncScopeID(t_.syncScope(ir::memScope(op))));
  unknownOrder();
}

void Lower::emitAtomic(const ir::Op& op) {
  const ir::Value* ptr = op.operand(0);
  const ir::Value* val = op.operand(ir::valueOperand(op.code()));
  const ir::Value* cmp = op.code() == OpCode::AtomicCas ? op.operand(1) : nullptr;
  const unsigned mi = ir::maskOperand(op.code());
  const ir::Value* mask = op.numOperands() > mi ? op.operand(mi) : nullptr;
  const ir::MemOrder order = ir::memOrder(op);
  const llvm::SyncScope::ID scope = ctx_.getOrInsertSyncScopeID(t_.syncScope(ir::memScope(op)));
  llvm::Type* et = elemTy(val->type());
  uint64_t eb = bytesOf(et);
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  auto atomicOne = [&](llvm::Value* p, llvm::Value* v, llvm::Value* x) {
    if (op.code() == OpCode::AtomicRmw)
      if (llvm::Value* old = t_.atomicRmw(b_, ir::atomicKind(op), val->type().dtype(), p, v, order, ir::memScope(op)))
        return old;
    return codegen::emitAtomicElement(b_, op, val->type().dtype(), p, v, x, scope);
  };
  // if (c) old = atomic(p, v[, x]) else old = 0
  auto one = [&](llvm::Value* c, llvm::Value* p, llvm::Value* v, llvm::Value* x = nullptr) -> llvm::Value* {
    if (!c) return atomicOne(p, v, x);
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* bb = llvm::BasicBlock::Create(ctx_, "atomic", fn);
    auto* join = llvm::BasicBlock::Create(ctx_, "atomic.end", fn);
    b_.CreateCondBr(c, bb, join);
    b_.SetInsertPoint(bb);
    llvm::Value* old = atomicOne(p, v, x);
    llvm::BasicBlock* last = b_.GetInsertBlock();  // a compare-and-swap loop ends in a block of its own
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(et, 2);
    phi->addIncoming(old, last);
    phi->addIncoming(llvm::Constant::getNullValue(et), from);
    return phi;
  };
  // The order is the program's (IR.h): a release covers the earlier
  // accesses of every thread of the block, not only those of the threads
  // performing the atomic, so they all meet at a barrier first (reads too:
  // a released lock lets another program overwrite what this one read); an
  // acquire makes every later access wait for a barrier after the atomic.
  if (ir::releases(order)) barrier();
  beforeGlobal(true);
  if (!ptr->type().isTile()) {
    // Thread 0 performs it; every thread needs the old value.
    llvm::Value* c = b_.CreateICmpEQ(tid_, i32(0));
    if (mask) c = b_.CreateAnd(c, scalar(mask));
    c = checkScalar(op, ptr, eb, c);
    llvm::Value* old = one(c, scalar(ptr), scalar(val), cmp ? scalar(cmp) : nullptr);
    llvm::Value* s = scratch(eb);
    beforeShared();
    guarded(b_.CreateICmpEQ(tid_, i32(0)), [&] { b_.CreateStore(old, s); });
    barrier();
    smemDirty_ = true;
    scalars_[op.result()] = b_.CreateLoad(et, s);
    return;
  }
  const ir::Layout& l = la_.get(op.result());
  const auto& shape = ptr->type().shape();
  Slots ptrs = tileIn(ptr, l);
  Slots vals = tileIn(val, l);
  Slots cmps, m;
  if (cmp) cmps = tileIn(cmp, l);
  if (mask) m = tileIn(mask, l);
  ir::SlotTable t = ir::slotTable(l, shape);
  llvm::Value* owner = ownerPred(l, t);
  record_.accesses.push_back({&op, l, 1});
  if (o_.checkBounds) {
    std::vector<size_t> at(t.size());
    std::iota(at.begin(), at.end(), size_t{0});
    checkAccesses(op, ptr, ptrs, at, eb, m, owner);
  }
  Slots olds;
  for (size_t i = 0; i < t.size(); ++i) {
    llvm::Value* c = owner;
    if (!m.empty()) c = c ? b_.CreateAnd(c, m[i]) : m[i];
    olds.push_back(one(c, ptrs[i], vals[i], cmp ? cmps[i] : nullptr));
  }
  if (owner) {
    // Other holders of an element get its old value from the owner.
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    llvm::Value* s = scratch(static_cast<uint64_t>(n) * eb);
    beforeShared();
    Slots bs = bases(l, t);
    guarded(owner, [&] {
      for (size_t i = 0; i < t.size(); ++i)
        b_.CreateStore(olds[i], b_.CreateInBoundsGEP(et, s, linear(indexOf(bs, t, i), shape)));
    });
    barrier();
    smemDirty_ = true;
    for (size_t i = 0; i < t.size(); ++i)
      olds[i] = b_.CreateLoad(et, b_.CreateInBoundsGEP(et, s, linear(indexOf(bs, t, i), shape)));
  }
  tiles_[op.result()] = TileV{l, std::move(olds)};
  // (A scalar atomic is followed by a barrier already: its old value's.)
  if (ir::acquires(order)) unknownOrder();
}

void Lower::writeBuffer(const ir::Value* buf, const Slots& vals, const ir::Layout& l, bool ordered) {
  const auto& shape = buf->type().shape();
  llvm::Type* mt = memTyOf(buf->type().dtype());
  llvm::Value* base = scalar(buf);
  ir::SlotTable t = ir::slotTable(l, shape);
  if (ordered)
    beforeShared();
  else
    smemDirty_ = true;
  // Runs of a thread's elements that are consecutive in the buffer go as
  // one vector store (bufferRunWidth); one writer per element (see
  // convertVia).
  int dim = static_cast<int>(shape.size()) - 1;
  const int64_t v = bufferRunWidth(buf, l, t, dim);
  guarded(ownerPred(l, t), [&] {
    Slots bs = bases(l, t);
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.consts[i][static_cast<size_t>(dim)] % v != 0) continue;
      llvm::Value* p = b_.CreateInBoundsGEP(mt, base, bufIndex(buf, indexOf(bs, t, i), shape));
      storeRun(vals, slotRun(t, i, v, dim), mt, p);
    }
  });
}

int64_t Lower::bufferRunWidth(const ir::Value* buf, const ir::Layout& l, const ir::SlotTable& t, int& dim) {
  const auto& shape = buf->type().shape();
  const int64_t eb = static_cast<int64_t>(bytesOf(memTyOf(buf->type().dtype())));
  dim = static_cast<int>(shape.size()) - 1;
  // Shared buffers only: the plan places them (and their slots) on 16-byte
  // boundaries; a local buffer's alignment is not ours to assume.
  if (buf->type().space() != ir::MemSpace::Shared || shape.size() < 1) return 1;
  auto it = storage_.find(rootBuffer(buf));
  if (it == storage_.end()) {
    // Row-major: runs along the last dim, rows of a length v divides.
    int64_t v = slotRunWidth(l, t, 16 / eb, dim);
    int64_t slot = 1;
    for (int64_t s : shape) slot *= s;
    return slot % v == 0 ? v : 1;
  }
  // Dot staging: runs along the staging's rows (the tile's dim n-2 when
  // the slot is stored transposed), within one 16-byte swizzle chunk
  // (maxVec) and aligned in rows of `stride` elements in slots of
  // slotElems elements.
  const Storage& sg = it->second;
  if (sg.transposed) dim = static_cast<int>(shape.size()) - 2;
  int64_t maxV = sg.transposed ? (sg.st.swizzle ? sg.st.unitElems() : 16 / eb) : sg.st.maxVec;
  while (maxV > 1 && ((sg.st.stride % maxV) != 0 || (sg.slotElems() % maxV) != 0)) maxV /= 2;
  return slotRunWidth(l, t, maxV, dim);
}

const ir::Value* rootBuffer(const ir::Value* buf) {
  while (const ir::Op* d = buf->definingOp()) {
    if (d->code() != OpCode::BufferSlot) break;
    buf = d->operand(0);
  }
  return buf;
}

llvm::Value* Lower::bufIndex(const ir::Value* buf, const Slots& idx, const std::vector<int64_t>& shape) {
  auto it = storage_.find(rootBuffer(buf));
  if (it == storage_.end()) return linear(idx, shape);
  const Storage& sg = it->second;
  const DotStaging& st = sg.st;
  const size_t n = shape.size();
  TS_ASSERT(n >= 2, "staged buffer of rank < 2");
  const int64_t r = shape[n - 2], c = shape[n - 1];
  TS_ASSERT(sg.transposed ? (c == st.rows && r == st.cols) : (r == st.rows && c == st.cols),
            "staged buffer: shape mismatch");
  Slots outer(idx.begin(), idx.end() - 2);
  llvm::Value* in =
      sg.transposed ? stagingIndex(b_, st, idx[n - 1], idx[n - 2]) : stagingIndex(b_, st, idx[n - 2], idx[n - 1]);
  if (outer.empty()) return in;
  std::vector<int64_t> os(shape.begin(), shape.end() - 2);
  return b_.CreateAdd(b_.CreateMul(linear(outer, os), i32(sg.slotElems())), in);
}

}  // namespace tessera::codegen::gpu_lower

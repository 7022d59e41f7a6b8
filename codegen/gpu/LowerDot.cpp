// Dots: the FMA loop through shared memory, and tensor-core dots with
// their operand staging (GpuDot.h).

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include <llvm/IR/Intrinsics.h>

#include "codegen/gpu/LowerImpl.h"
#include "codegen/llvm/Fp8.h"

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
  TS_ASSERT(op.numOperands() == 3, "a block-scaled dot without a matrix instruction's placement (gpuScaledDotNative)");
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
  llvm::Value* aRow = b_.CreateInBoundsGEP(it, base, b_.CreateMul(bs[0], i32(K)));
  llvm::Value* bCol = b_.CreateInBoundsGEP(it, bBase, bs[1]);
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
  // fp8 operands (a dot the target's tensor-core table takes whose shape
  // fits no instruction, widen-fp8-dots having left it) are decoded exactly:
  // the products are those of the f16 widening.
  auto toC = [&](llvm::Value* x, DType dt) -> llvm::Value* {
    if (isFp8(dt)) return emitFp8ToF32(b_, x, dt);
    if (!fl) return b_.CreateSExt(x, b_.getInt32Ty());
    return x->getType()->isFloatTy() ? x : b_.CreateFPExt(x, b_.getFloatTy());
  };
  const DType inB = bv->type().dtype();
  for (size_t i = 0; i < t.size(); ++i) {
    llvm::PHINode* p = b_.CreatePHI(init[i]->getType(), 2);
    p->addIncoming(init[i], pre);
    phis.push_back(p);
  }
  for (size_t i = 0; i < t.size(); ++i) {
    llvm::PHINode* p = phis[i];
    // Each address as a per-thread base plus k plus a constant: the
    // constants become the shared loads' immediate offsets, so a thread's
    // rows (columns) share one address register instead of one each.
    llvm::Value* aAt = b_.CreateInBoundsGEP(it, aRow, {b_.CreateAdd(k, i32(t.consts[i][0] * K))});
    llvm::Value* bAt = b_.CreateInBoundsGEP(it, bCol, {b_.CreateAdd(b_.CreateMul(k, i32(N)), i32(t.consts[i][1]))});
    llvm::Value* av = toC(b_.CreateLoad(it, aAt), in);
    llvm::Value* bw = toC(b_.CreateLoad(it, bAt), inB);
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
    const size_t ri = transposed ? 1 : 0, ci = 1 - ri;
    for (size_t i = 0; i < t.size(); i += static_cast<size_t>(vec)) {
      llvm::Value* p = stagingAddress(b_, et, base, st, bs[ri], t.consts[i][ri], bs[ci], t.consts[i][ci]);
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

std::string operandName(const ir::Op& dot, unsigned i) {
  return std::string(i == 0 ? "A" : "B") + " operand of dot at " + dot.loc().str();
}

namespace {
/// Threads laid along `fast` first, `ce` consecutive elements each (one
/// 16-byte chunk), then along the other dim; warps likewise.
ir::BlockedLayout chunkLayout(const std::vector<int64_t>& shape, int fast, int64_t ce, int64_t warps, int64_t lanes) {
  const int other = 1 - fast;
  ir::BlockedLayout b;
  b.spt = {1, 1};
  b.tpw = {1, 1};
  b.wpb = {1, 1};
  b.order = {fast, other};
  b.spt[fast] = ce;
  const int64_t chunks = shape[fast] / ce;
  b.tpw[fast] = std::min(lanes, chunks);
  b.tpw[other] = lanes / b.tpw[fast];
  b.wpb[fast] = std::min(warps, chunks / b.tpw[fast]);
  b.wpb[other] = warps / b.wpb[fast];
  return b;
}
}  // namespace

void Lower::copyOperand(const ir::Op& dot, unsigned i, llvm::Value* base, const DotStaging& st, bool transposed) {
  const ir::Op& ld = *dot.operand(i)->definingOp();
  const ir::Value* ptrV = ld.operand(0);
  const ir::Value* maskV = ld.numOperands() > 1 ? ld.operand(1) : nullptr;
  const auto& shape = ptrV->type().shape();
  const int fast = globalOperands_.at({&dot, i});
  const int64_t chunkBytes = globalChunkBytes(dot);
  const int64_t ce = chunkBytes / static_cast<int64_t>(byteSize(ld.result()->type().dtype()));
  const bool async = t_.asyncCopyImpl() == AsyncCopyImpl::Hardware;
  ir::Layout cl = ir::Layout::blocked(chunkLayout(shape, fast, ce, cfg_.numWarps, t_.warpSize()));
  setCurrentOp(ld);  // the accesses are the load's (emulator reports, layout statistics)
  std::map<std::pair<const ir::Value*, std::string>, Slots> memo;
  int budget = 64;
  Slots ptrs = recompute(ptrV, cl, memo, budget);
  Slots m = maskV ? recompute(maskV, cl, memo, budget) : Slots{};
  ir::SlotTable t = ir::slotTable(cl, shape);
  beforeGlobal(false);
  record_.accesses.push_back({&ld, cl, ce});
  llvm::Type* et = memTyOf(ld.result()->type().dtype());
  guarded(ownerPred(cl, t), [&] {
    Slots bs = bases(cl, t);
    Slots cm = m;
    if (o_.checkBounds) {
      std::vector<size_t> at;
      for (size_t s = 0; s < t.size(); ++s)
        if (t.consts[s][static_cast<size_t>(fast)] % ce == 0) at.push_back(s);
      checkAccesses(ld, ptrV, ptrs, at, static_cast<uint64_t>(chunkBytes), cm);
    }
    const bool masked = !cm.empty();
    llvm::Value* bufBase = masked && !async ? bufferBase(ptrV) : nullptr;
    for (size_t s = 0; s < t.size(); ++s) {
      if (t.consts[s][static_cast<size_t>(fast)] % ce != 0) continue;  // not the first element of a chunk
      const size_t ri = transposed ? 1 : 0, ci = 1 - ri;
      llvm::Value* dst = stagingAddress(b_, et, base, st, bs[ri], t.consts[s][ri], bs[ci], t.consts[s][ci]);
      if (async) {
        t_.asyncCopy(b_, dst, ptrs[s], static_cast<unsigned>(chunkBytes), masked ? cm[s] : nullptr);
        continue;
      }
      // One vector load and one LDS store per chunk; a masked chunk is zeros
      // (predicated, a buffer access or a branch: Lower::globalLoad).
      llvm::Type* vt = llvm::FixedVectorType::get(et, static_cast<unsigned>(ce));
      const llvm::Align align(static_cast<uint64_t>(chunkBytes));
      llvm::Value* x = nullptr;
      if (!masked) {
        x = b_.CreateAlignedLoad(vt, ptrs[s], align);
      } else if (!(x = t_.predicatedLoad(b_, vt, ptrs[s], cm[s], llvm::Constant::getNullValue(vt))) &&
                 !(bufBase && (x = t_.bufferLoad(b_, vt, bufBase, bufferOffset(bufBase, ptrs[s]), cm[s],
                                                 llvm::Constant::getNullValue(vt))))) {
        llvm::BasicBlock* from = b_.GetInsertBlock();
        llvm::Function* fn = from->getParent();
        auto* bb = llvm::BasicBlock::Create(ctx_, "ld", fn);
        auto* join = llvm::BasicBlock::Create(ctx_, "ld.end", fn);
        b_.CreateCondBr(cm[s], bb, join);
        b_.SetInsertPoint(bb);
        llvm::Value* y = b_.CreateAlignedLoad(vt, ptrs[s], align);
        b_.CreateBr(join);
        b_.SetInsertPoint(join);
        llvm::PHINode* phi = b_.CreatePHI(vt, 2);
        phi->addIncoming(y, bb);
        phi->addIncoming(llvm::Constant::getNullValue(vt), from);
        x = phi;
      }
      b_.CreateAlignedStore(x, dst, align);
    }
  });
  setCurrentOp(dot);
}

void Lower::stageHoistedOperands(const ir::Op& loop) {
  for (Hoisted& h : hoisted_) {
    if (h.loop != &loop) continue;
    TensorCoreDotPlan p = dotPlan(*h.dot);
    const DotStaging& st = h.operand == 0 ? p.a : p.b;
    setTag(*h.dot, "operand staging");
    llvm::Value* base = loopArea(hoistKey(h.dot, h.operand), &loop, st.bytes(),
                                 operandName(*h.dot, h.operand) + ", staged before the loop at " + loop.loc().str(),
                                 !h.inRegisters, h.operand == 1 ? p.bAlign : p.aAlign);
    beforeShared();  // the loop body starts with a barrier (unknownOrder) before the dot reads it
    stageOperand(h.dot->operand(h.operand), base, st, h.operand == 1 && p.bTransposed);
    // wgmma reads its shared operands through the async proxy: the
    // generic-proxy stores must be fenced against it before the barrier
    // that publishes them.
    if (h.operand == 1 ? p.bFromShared : p.aFromShared) t_.sharedToAsyncProxyFence(b_);
    if (h.inRegisters) {
      barrier();
      smemDirty_ = true;
      setTag(*h.dot, "fragments");
      h.fragments = loadTensorCoreFragments(t_, b_, m_, p, h.operand, base, lane_, warp_);
    }
  }
  setCurrentOp(loop);
}

DotArea Lower::dotArea(const ir::Op& op, const TensorCoreDotPlan& p) {
  DotArea d;
  const bool inRegisters = registerOperands_.count({&op, 0}) != 0;
  const bool directA = directOperands_.count({&op, 0}) != 0, directB = directOperands_.count({&op, 1}) != 0;
  const bool globalA = globalOperands_.count({&op, 0}) != 0;
  d.stageA = !inRegisters && !directA && !hoistedOf(&op, 0);
  d.stageB = !directB && !hoistedOf(&op, 1);
  // A chained dot whose A and B are both staged here, where A's layout is
  // not the fragments' (AMD: GpuTargetInfo::dotFragmentsFirst): A's
  // fragments read into registers first, then B staged over A
  // (SharedChoices::fragmentsFirst), in one area of max(A, B) bytes.
  d.fragmentsFirstCandidate = d.stageA && d.stageB && !globalA && t_.dotFragmentsFirst() && la_.chained(op);
  d.fragmentsFirst = d.fragmentsFirstCandidate && fragmentsFirst_;
  if (d.fragmentsFirst) {
    d.align = std::max(p.aAlign, p.bAlign);
    d.bytes = std::max(p.a.bytes(), p.b.bytes());
  } else if (d.stageA || d.stageB) {
    // A at the area's start, B after it at a multiple of p.bAlign (wgmma's
    // swizzle is one of address bits; the plan aligns the area to both).
    d.bOff = d.stageA ? alignUp(p.aBytes, p.bAlign) : 0;
    d.align = std::max(d.stageA ? p.aAlign : 16, d.stageB ? p.bAlign : 16);
    d.bytes = d.stageB ? d.bOff + p.b.bytes() : p.a.bytes();
  }
  // A block-scaled dot's scales after the operands, whatever their source;
  // an in-flight dot's in an area of their own (scaleSets).
  if (p.scaled && !scalesInLoopArea(op, p)) {
    d.scaleOff = alignUp(d.bytes, 16);
    d.bytes = d.scaleOff + p.scaleBytes();
  }
  return d;
}

void Lower::stageScales(const ir::Op& op, const TensorCoreDotPlan& p, llvm::Value* base) {
  // Each scale byte by one of the threads holding it (ownerPred), at the
  // target's place for it in the set at `base` (row-major: A's [M, K/32],
  // then B's [N, K/32]).
  for (unsigned i : {0u, 1u}) {
    const ir::Value* v = op.operand(3 + i);
    TS_ASSERT(v->type().shape() == (std::vector<int64_t>{i ? p.N : p.M, p.scaleBlocks}),
              "block scales of other than the plan's shape");
    const TileV& tv = tile(v);
    ir::SlotTable t = ir::slotTable(tv.layout, v->type().shape());
    guarded(ownerPred(tv.layout, t), [&] {
      Slots bs = bases(tv.layout, t);
      for (size_t k = 0; k < t.size(); ++k) {
        const Slots at = indexOf(bs, t, k);
        llvm::Value* off = t_.scaleStagingOffset(b_, p, i, at[0], at[1]);
        b_.CreateStore(tv.slots[k], b_.CreateInBoundsGEP(b_.getInt8Ty(), base, off));
      }
    });
  }
}

void Lower::emitTensorCoreDot(const ir::Op& op, const ir::Layout& l) {
  const ir::Value* a = op.operand(0);
  const ir::Value* bv = op.operand(1);
  const ir::Value* acc = op.operand(2);
  TensorCoreDotPlan p = dotPlan(op);
  Slots init = tileIn(acc, l);  // before the staging: a conversion uses this op's scratch
  // Where each operand's fragments come from (planDirectDots,
  // planDotOperands): A from registers already in the fragment layout; a
  // shared slot read directly; the loop area staged before the loop; or
  // this dot's staging buffer.
  Slots aRegs;
  std::optional<ir::SlotTable> aTable;
  if (registerOperands_.count({&op, 0})) {
    ir::Layout fl = ir::Layout::blocked(*ir::mmaOperandALayout(l.parent));
    aRegs = tileIn(a, fl);
    aTable = ir::slotTable(fl, a->type().shape());
  }
  bool directA = directOperands_.count({&op, 0}) != 0, directB = directOperands_.count({&op, 1}) != 0;
  Hoisted* hA = hoistedOf(&op, 0);
  Hoisted* hB = hoistedOf(&op, 1);
  bool globalA = globalOperands_.count({&op, 0}) != 0, globalB = globalOperands_.count({&op, 1}) != 0;
  const DotArea area = dotArea(op, p);
  if (area.fragmentsFirstCandidate) ++fragmentsFirstCandidates_;
  bool stageA = area.stageA, stageB = area.stageB;  // (global operands: by cp.async)
  // A `dot {async}` stays in flight where keepsInFlight says so; anywhere
  // else it completes here.
  if (keepsInFlight(op, p)) {
    p.inFlight = true;
    if (!t_.accumulatorColumns(p)) dotsInFlight_ = true;  // registers: the target's dot wait
  }
  const AccumulatorMemory* accMemory = issueAccumulator(op, p);
  // An in-flight dot's scales: the set of this issue, in the loop's area,
  // once the issue that last read it has retired.
  llvm::Value* scaleSets = nullptr;
  if (scalesInLoopArea(op, p)) {
    waitAccumulators(p.scaleBuffers - 1);
    scaleSets = scaleSetsOf(op, p);
  }
  // A slot read directly: its storage is the operand's layout for the
  // fragment reads.
  auto slotOf = [&](const ir::Value* v) {
    bool viaTranspose = false;
    const ir::Value* buf = ir::dotOperandLoad(op, v == a ? 0 : 1, &viaTranspose)->operand(0);
    const Storage& sg = storage_.at(rootBuffer(buf));
    DotStaging& want = v == a ? p.a : p.b;
    TS_ASSERT(sg.st.rows == want.rows && sg.st.cols == want.cols &&
                  sg.transposed == (v == bv && p.bTransposed && !viaTranspose),
              "direct dot operand: slot shape differs from the operand's");
    want = sg.st;
    return scalar(buf);
  };
  llvm::Value* base = nullptr;
  llvm::Value* bBase = nullptr;
  llvm::Value* scales = nullptr;
  std::vector<llvm::Value*> aFragments;
  if (area.fragmentsFirst) {
    base = scratchFor({ScratchRequest::Kind::DotStaging, area.bytes, area.bytes, area.align});
    beforeShared();
    setTag(op, "operand staging");
    stageOperand(a, base, p.a, false);
    setCurrentOp(op);
    barrier();
    setTag(op, "fragments");
    aFragments = loadTensorCoreFragments(t_, b_, m_, p, 0, base, lane_, warp_);
    setCurrentOp(op);
    smemDirty_ = true;  // read here: B's staging waits for every wave (beforeShared)
    bBase = base;
    base = nullptr;
    stageA = false;
  } else if (stageA || stageB || (p.scaled && !scaleSets)) {
    llvm::Value* s = scratchFor({ScratchRequest::Kind::DotStaging, area.bytes, area.bytes, area.align});
    if (stageA) base = s;
    if (stageB) bBase = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), s, area.bOff);
    if (p.scaled && !scaleSets) scales = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), s, area.scaleOff);
  }
  if (scaleSets)
    scales = b_.CreateInBoundsGEP(b_.getInt8Ty(), scaleSets,
                                  b_.CreateMul(accMemory->scaleSet, i32(static_cast<int64_t>(p.scaleSetBytes()))));
  if (directA) base = slotOf(a);
  if (directB) bBase = slotOf(bv);
  // A hoisted operand's area (the call made before the loop recorded its size).
  if (hA && !hA->inRegisters)
    base = loopArea(hoistKey(&op, 0), hA->loop, p.a.bytes(), operandName(op, 0), true, p.aAlign);
  if (hB && !hB->inRegisters)
    bBase = loopArea(hoistKey(&op, 1), hB->loop, p.b.bytes(), operandName(op, 1), true, p.bAlign);
  // The staging stores and the fragment reads are named apart in the
  // emulator's reports (bank conflicts per phase of the dot).
  if (base || bBase || scales) beforeShared();
  if (stageA || stageB || scales) {
    // Global operands: TMA boxes where planned (sm_90a), else cp.async.
    bool tmaA = globalA && emitTmaOperand(op, 0, base), tmaB = globalB && emitTmaOperand(op, 1, bBase);
    if (globalA && !tmaA) copyOperand(op, 0, base, p.a, false);
    if (globalB && !tmaB) copyOperand(op, 1, bBase, p.b, p.bTransposed);
    setTag(op, "operand staging");
    if (stageA && !globalA) stageOperand(a, base, p.a, false);
    if (stageB && !globalB) {
      auto st = stagedTransposes_.find(&op);
      if (st != stagedTransposes_.end())
        stageOperand(st->second, bBase, p.b, !p.bTransposed);  // B^T's operand: B stored N x K as it is
      else
        stageOperand(bv, bBase, p.b, p.bTransposed);
    }
    if (scales) stageScales(op, p, scales);
    setCurrentOp(op);
    if (((globalA && !tmaA) || (globalB && !tmaB)) && t_.asyncCopyImpl() == AsyncCopyImpl::Hardware) {
      t_.asyncCommit(b_);
      t_.asyncWait(b_, 0);
    }
    if (tmaA || tmaB) waitTmaOperands();
    // The instruction reads the operands (and scales in atoms: their copy
    // to the accumulator memory) through the async proxy.
    if ((p.bFromShared && stageB) || (p.aFromShared && stageA) || (scales && p.scaleAtoms))
      t_.sharedToAsyncProxyFence(b_);  // see stageHoistedOperands
    barrier();
    smemDirty_ = true;
  }
  setTag(op, "fragments");
  std::function<llvm::Value*(int64_t, int64_t)> aReg;
  if (aTable) aReg = [&](int64_t row, int64_t col) { return aRegs[aTable->index.at({row, col})]; };
  const std::vector<llvm::Value*>* preA = hA && hA->inRegisters ? &hA->fragments
                                          : !aFragments.empty() ? &aFragments
                                                                : nullptr;
  const std::vector<llvm::Value*>* preB = hB && hB->inRegisters ? &hB->fragments : nullptr;
  tiles_[op.result()] = TileV{l, codegen::emitTensorCoreDot(t_, b_, m_, p, base, bBase, lane_, warp_, std::move(init),
                                                            aReg, preA, preB, accMemory, scales)};
  if (accMemory) issuedAccumulator(op, p);
  setCurrentOp(op);
}

// The scales of a block-scaled dot in flight across its loop
// (TensorCoreDotPlan::scaleAtoms): the instruction copies them from shared
// memory while it runs behind the program, so they cannot sit in the
// scratch area the next op reuses; they get an area of the loop's,
// scaleBuffers sets used in turn (AccumulatorMemory::scaleSet), each
// rewritten once the issue that read it last has retired.
bool Lower::scalesInLoopArea(const ir::Op& op, const TensorCoreDotPlan& p) const {
  return p.scaled && p.scaleAtoms && keepsInFlight(op, p);
}

llvm::Value* Lower::scaleSetsOf(const ir::Op& op, const TensorCoreDotPlan& p) {
  const ir::Op* loop = op.parent()->parentOp();
  TS_ASSERT(loop && loop->code() == OpCode::For, "an in-flight dot outside its loop");
  return loopArea(hoistKey(&op, 3), loop, p.scaleBytes(), "block scales of " + operandName(op, 0), true, 16);
}

// A `dot {async}` stays in flight where the instruction runs behind the
// program and reads both operands in place from their pipeline slots,
// which the schedule keeps until its dot_wait (IR.h), and, where it
// accumulates outside the registers, where planAccumulators gave it
// columns; anywhere else (a staging area reused by the next dot, A in
// registers) it completes at the issue.
bool Lower::keepsInFlight(const ir::Op& op, const TensorCoreDotPlan& p) const {
  if (!op.hasAttr("async") || op.intAttr("async") != 1 || !p.bFromShared || !p.aFromShared) return false;
  if (!directOperands_.count({&op, 0}) || !directOperands_.count({&op, 1})) return false;
  return t_.accumulatorColumns(p) == 0 || accColumnOf_.count(&op) != 0;
}

/// dot_wait: its operands, completed. Where some dot was left in flight the
/// instruction's wait retires it (the float registers, accumulators, pass
/// through it); elsewhere every dot has completed where it was issued.
void Lower::emitDotWait(const ir::Op& op) {
  // Dots kept in accumulator memory: their issues retired through their
  // barriers, their accumulators read back into registers.
  if (accColumns_) waitAccumulators(op.intAttr("pending"));
  std::map<unsigned, Slots> loaded;
  for (unsigned i = 0; i < op.numOperands(); ++i)
    if (op.operand(i)->type().isTile())
      if (auto s = loadAccumulator(op.operand(i))) loaded.emplace(i, std::move(*s));
  std::vector<llvm::Value*> regs;
  for (unsigned i = 0; i < op.numOperands(); ++i)
    if (op.operand(i)->type().isTile() && !loaded.count(i))
      for (llvm::Value* x : tile(op.operand(i)).slots)
        if (x->getType()->isFloatTy()) regs.push_back(x);
  if (dotsInFlight_) regs = t_.dotWait(b_, static_cast<int>(op.intAttr("pending")), regs);
  size_t next = 0;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    const ir::Value* v = op.operand(i);
    if (!v->type().isTile()) {
      scalars_[op.result(i)] = scalar(v);
      continue;
    }
    TileV t = tile(v);
    if (auto it = loaded.find(i); it != loaded.end()) {
      t.slots = std::move(it->second);
    } else {
      for (llvm::Value*& x : t.slots)
        if (x->getType()->isFloatTy()) x = regs[next++];
    }
    tiles_[op.result(i)] = std::move(t);
  }
}

}  // namespace tessera::codegen::gpu_lower

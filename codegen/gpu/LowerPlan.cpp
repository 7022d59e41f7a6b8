// Planning before emission: which shared buffers are stored in a dot's
// staging layout and read by it directly (planDirectDots), and which tiles
// are never emitted where they are defined (planElision).

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "codegen/gpu/LowerImpl.h"
#include "tessera/ir/ScaledDot.h"

namespace tessera::codegen::gpu_lower {

namespace {
/// Ops whose result recompute() re-emits in any layout from their operands:
/// those free to recompute (Ops.def) and the elementwise ops.
bool rederivable(const ir::Op& op) { return ir::isFreeToRecompute(op.code()) || ir::isElementwise(op.code()); }

/// True when `op` is inside a loop's body (for or while, at any depth).
bool inLoop(const ir::Op& op) {
  for (const ir::Op* o = op.parent()->parentOp(); o; o = o->parent() ? o->parent()->parentOp() : nullptr)
    if (o->code() == ir::OpCode::For || o->code() == ir::OpCode::While) return true;
  return false;
}
}  // namespace

/// The pipelined GEMM reads each operand tile from a shared slot with a
/// local_load and hands it to a tensor-core dot, which would write it back
/// to shared memory (its staging buffer, in the swizzled layout ldmatrix
/// reads without bank conflicts) and read it again: two round trips through
/// shared memory and a barrier per iteration for data already there. On
/// NVPTX the staging layout of both operands is a row-major matrix with its
/// 16-byte chunks XOR-swizzled (GpuDot.h), which is a permutation of whole
/// chunks of a row-major slot of the same shape. So a shared buffer whose
/// every access is a copy / local_store / local_load (all of which go
/// through bufIndex) can simply be *stored* in that layout, and a dot
/// operand that is a local_load of it reads its fragments straight from the
/// slot (ldmatrix on the slot's address), reading at the dot instead of at
/// the local_load. AMDGPU likewise with its staging layouts: an A slot with
/// rows padded by 4 elements, a B slot stored transposed (N x K, padded), so
/// a slot takes rows * (cols + 4) elements (bufferStorageBytes gives the
/// planner the buffer's size). That move is sound when no op between the two (same
/// block) may write shared memory or order it (copies, stores to buffers,
/// barriers, async groups, control flow): the verified schedule's barriers
/// then order the dot's reads exactly as they ordered the local_load's.
/// The shared-memory planner keeps the buffer live up to such a dot.
void Lower::planDirectDots() {
  storage_.clear();
  directOperands_.clear();
  auto& body = const_cast<ir::Function&>(f_).body();
  std::vector<std::pair<const ir::Op*, unsigned>> cands;
  std::map<const ir::Value*, std::optional<Storage>> roots;  // nullopt: conflicting layouts
  std::set<const ir::Op*> firstChoiceOnly;                   // dots whose B slot only their instruction reads
  auto same = [](const Storage& x, const Storage& y) {
    return x.transposed == y.transposed && x.st.rows == y.st.rows && x.st.cols == y.st.cols &&
           x.st.stride == y.st.stride && x.st.swizzle == y.st.swizzle && x.st.blockCols == y.st.blockCols &&
           x.st.rowGroupWarps == y.st.rowGroupWarps && x.st.rowGroupTiles == y.st.rowGroupTiles &&
           x.st.mfmaColWarps == y.st.mfmaColWarps && x.align == y.align;
  };
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::Dot || !la_.has(op.result())) return;
    if (la_.get(op.result()).parent.mma == ir::MmaKind::None) return;
    TensorCoreDotPlan plan = dotPlan(op);
    for (unsigned i = 0; i < 2; ++i) {
      // The operand's local_load, or B's through a transpose (B^T given,
      // N x K): that slot holds B as the plan stores it transposed, so it
      // is read in place where the plan stores B so (bTransposed).
      bool viaTranspose = false;
      const ir::Op* ld = ir::dotOperandLoad(op, i, &viaTranspose);
      // Through a transpose only for a dot in flight (NVIDIA's warpgroup
      // MMAs, which read B K-major by descriptor).
      const bool inFlight = op.hasAttr("async") && op.intAttr("async") == 1;
      if (!ld || ld->parent() != op.parent() || (viaTranspose && (!plan.bTransposed || !inFlight))) continue;
      const ir::Value* root = rootBuffer(ld->operand(0));
      const ir::Type& rt = root->type();
      if (!root->definingOp() || root->definingOp()->code() != OpCode::Alloc || rt.space() != ir::MemSpace::Shared)
        continue;
      if (rt.dtype() != op.operand(i)->type().dtype() || byteSize(rt.dtype()) != plan.elemBytes) continue;
      Storage sg{i == 0 ? plan.a : plan.b, i == 1 && plan.bTransposed && !viaTranspose};
      // The layout the instruction reads the slot in, if it can.
      if (!t_.directDotStaging(plan, i, sg.transposed, sg.st, sg.align)) continue;
      if (sg.transposed != (i == 1 && plan.bTransposed && !viaTranspose) || viaTranspose) firstChoiceOnly.insert(&op);
      if (sg.st.swizzle) {  // stagingIndex's precondition
        const int64_t rowElems = sg.st.blockCols ? sg.st.blockCols : sg.st.cols;
        const int64_t ce = sg.st.chunkElems(), chunks = rowElems / ce;
        if (rowElems % ce != 0 || chunks < 1 || (chunks & (chunks - 1)) != 0 || sg.st.stride != rowElems) continue;
      }
      // Nothing between the read as written and the dot may touch shared
      // memory's order.
      bool clear = true, seen = false;
      for (auto& o : op.parent()->ops()) {
        if (o.get() == ld) {
          seen = true;
          continue;
        }
        if (o.get() == &op) break;
        if (!seen) continue;
        switch (o->code()) {
          case OpCode::Copy:
          case OpCode::LocalStore:
          case OpCode::Barrier:
          case OpCode::AsyncCommit:
          case OpCode::AsyncWait:
          case OpCode::For:
          case OpCode::If:
          case OpCode::While:
          case OpCode::Return: clear = false; break;
          default: break;
        }
      }
      if (!clear || !seen) continue;
      cands.emplace_back(&op, i);
      auto [it, fresh] = roots.try_emplace(root, sg);
      if (!fresh && it->second && !same(*it->second, sg)) it->second.reset();  // e.g. used as A and as B on AMDGPU
    }
  });
  // Every access of a staged buffer must go through bufIndex, and every view
  // of it must be a slot of the buffer itself (the slot stride is the
  // storage's, see BufferSlot).
  for (auto& [root, sg] : roots) {
    if (!sg) continue;
    bool ok = true;
    ir::walk(body, [&](ir::Op& op) {
      for (unsigned i = 0; i < op.numOperands(); ++i) {
        const ir::Value* v = op.operand(i);
        if (rootBuffer(v) != root) continue;
        bool view = v != root;
        if (view && v->definingOp()->operand(0) != root) ok = false;
        bool fine = (op.code() == OpCode::BufferSlot && i == 0 && !view) || op.code() == OpCode::LocalLoad ||
                    ((op.code() == OpCode::Copy || op.code() == OpCode::LocalStore) && i == 0);
        if (!fine) ok = false;
      }
    });
    if (ok) storage_[root] = *sg;
  }
  auto slotOf = [](const ir::Op* dot, unsigned i) { return rootBuffer(ir::dotOperandLoad(*dot, i)->operand(0)); };
  for (auto& [op, i] : cands)
    if (storage_.count(slotOf(op, i))) directOperands_.insert({op, i});
  // A B slot stored other than the plan's (GpuTargetInfo::directDotStaging)
  // is read only by the dot's first-choice instruction, which takes the dot
  // where both operands are read in place and the dot does not complete at
  // every issue of a loop (DotOperandSources); elsewhere the slot is
  // stored as the plan's, and the dot stages B itself.
  for (const ir::Op* op : firstChoiceOnly) {
    const bool kept = directOperands_.count({op, 0}) && directOperands_.count({op, 1}) &&
                      (!inLoop(*op) || (op->hasAttr("async") && op->intAttr("async") == 1));
    if (kept) continue;
    const ir::Value* root = slotOf(op, 1);
    storage_.erase(root);
    for (auto it = directOperands_.begin(); it != directOperands_.end();)
      it = slotOf(it->first, it->second) == root ? directOperands_.erase(it) : std::next(it);
  }
  asyncProxySlots_ = false;
  for (auto& [buf, sg] : storage_) asyncProxySlots_ = asyncProxySlots_ || sg.align > 16;
}

/// Register-staged pipelines in S-1 physical slots. The pipeline pass gives
/// a staged buffer S slots (docs/pipelining.md): iteration k reads slot
/// k mod S while the copies of iterations k+1 .. k+S-1 are in flight. With
/// AsyncCopyImpl::RegisterStaged a copy issued in iteration k holds its data
/// in registers and stores them at the end of the iteration's body (case (b)
/// of the comment above emitCopy), after the body's last read of tile k: at
/// that point only tiles k+1 .. k+S-2 are in the buffer still to be read,
/// so S-1 physical slots hold them all if tile j lives in slot j mod (S-1)
/// and the store of tile k+S-1, into the slot tile k just left, waits for a
/// barrier after the body's reads (flushStaged). That is Triton's AMD stream
/// pipeline (S-1 LDS buffers and the prefetch in registers); it costs one
/// barrier per iteration and gives back a slot of every staged buffer, which
/// raises the waves per SIMD where the LDS limits them (lowerToGpuLLVM
/// applies it only there).
///
/// A buffer qualifies only in the exact form the pipeline pass emits, each
/// use checked: a shared alloc of S >= 2 slots used only through
/// buffer_slot, whose slots are
///  * outside pipelined loops, constants p <= S-2 written only by async
///    copies (the prologue, slot p = tile p);
///  * in the body of a `for {pipelined = S}`, `(k) rem S` read only by
///    local_load, or `(k + S-1) rem S` written only by async copies, k the
///    loop's index, in a body without nested control flow (an `if` or `for`
///    start flushes the staged copies, case (c), possibly before a read) and
///    whose async_waits leave >= 1 group pending (so a wait never stores the
///    iteration's own copies, case (a)): tile j = k + c is then in physical
///    slot j mod (S-1).
void Lower::planFewerSlots() {
  fewerSlotCands_.clear();
  if (t_.asyncCopyImpl() != AsyncCopyImpl::RegisterStaged) return;
  auto& body = const_cast<ir::Function&>(f_).body();
  auto constant = [](const ir::Value* v) -> std::optional<int64_t> {
    const ir::Op* d = v->definingOp();
    if (!d || d->code() != OpCode::Constant || !v->type().isScalar()) return std::nullopt;
    auto it = d->attrs().find("value");
    if (it == d->attrs().end() || !std::holds_alternative<int64_t>(it->second)) return std::nullopt;
    return std::get<int64_t>(it->second);
  };
  auto asyncCopy = [](const ir::Op& o) { return o.code() == OpCode::Copy && o.hasAttr("async") && o.intAttr("async"); };
  // The offset c of a slot index `(k + c) rem S` in the body of a pipelined
  // loop, k its index; nullopt for another form.
  auto offsetOf = [&](const ir::Op& slotOp, int64_t S) -> std::optional<int64_t> {
    const ir::Op* loop = slotOp.parent()->parentOp();
    if (!loop || loop->code() != OpCode::For || !loop->hasAttr("pipelined") || loop->intAttr("pipelined") != S)
      return std::nullopt;
    const ir::Value* k = loop->region(0).block().arg(0);
    const ir::Op* rem = slotOp.operand(1)->definingOp();
    if (!rem || rem->code() != OpCode::Rem || constant(rem->operand(1)) != S) return std::nullopt;
    const ir::Value* x = rem->operand(0);
    if (x == k) return 0;
    const ir::Op* add = x->definingOp();
    if (!add || add->code() != OpCode::Add) return std::nullopt;
    for (unsigned i = 0; i < 2; ++i)
      if (add->operand(i) == k) return constant(add->operand(1 - i));
    return std::nullopt;
  };
  auto plainBody = [](const ir::Op& loop) {
    for (auto& o : loop.region(0).block().ops()) {
      if (ir::hasRegions(o->code())) return false;
      if (o->code() == OpCode::AsyncWait && o->intAttr("pending") < 1) return false;
    }
    return true;
  };
  // Users of each slot view.
  std::unordered_map<const ir::Value*, std::vector<std::pair<const ir::Op*, unsigned>>> users;
  std::vector<const ir::Op*> allocs;
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() == OpCode::Alloc) allocs.push_back(&op);
    for (unsigned i = 0; i < op.numOperands(); ++i) users[op.operand(i)].emplace_back(&op, i);
  });
  for (const ir::Op* a : allocs) {
    const ir::Value* root = a->result();
    const ir::Type& t = root->type();
    if (t.space() != ir::MemSpace::Shared || t.shape().size() < 3 || t.shape()[0] < 2) continue;
    const int64_t S = t.shape()[0];
    bool ok = true, inLoop = false;
    for (auto& [slotOp, i] : users[root]) {
      if (slotOp->code() != OpCode::BufferSlot || i != 0) {
        ok = false;
        break;
      }
      const auto& us = users[slotOp->result()];
      auto only = [&](auto pred) {
        for (auto& [u, j] : us)
          if (j != 0 || !pred(*u)) return false;
        return true;
      };
      if (std::optional<int64_t> c = offsetOf(*slotOp, S)) {
        inLoop = true;
        ok = plainBody(*slotOp->parent()->parentOp()) &&
             ((*c == 0 && only([](const ir::Op& u) { return u.code() == OpCode::LocalLoad; })) ||
              (*c == S - 1 && only(asyncCopy)));
      } else {
        std::optional<int64_t> p = constant(slotOp->operand(1));
        const ir::Op* up = slotOp->parent()->parentOp();
        ok = p && *p >= 0 && *p <= S - 2 && !(up && up->hasAttr("pipelined")) && only(asyncCopy);
      }
      if (!ok) break;
    }
    if (ok && inLoop) fewerSlotCands_[root] = S;
  }
}

llvm::Value* Lower::physicalSlot(const ir::Op& slotOp) {
  const int64_t n = slotOp.operand(0)->type().shape()[0] - 1;
  const ir::Value* idx = slotOp.operand(1);
  const ir::Op* d = idx->definingOp();
  // planFewerSlots admitted a constant p <= S-2 < n, or (k + c) rem S.
  if (d->code() == OpCode::Constant) return b_.CreateSExtOrTrunc(scalar(idx), b_.getInt32Ty());
  TS_ASSERT(d->code() == OpCode::Rem, "fewer slots: a slot index planFewerSlots did not admit");
  if (n == 1) return b_.getInt32(0);
  llvm::Value* j = scalar(d->operand(0));  // the tile, k + c >= 0
  return b_.CreateSExtOrTrunc(b_.CreateURem(j, llvm::ConstantInt::get(j->getType(), static_cast<uint64_t>(n))),
                              b_.getInt32Ty());
}

TensorCoreDotPlan Lower::dotPlan(const ir::Op& op) {
  const ir::Value* av = op.operand(0);
  const ir::BlockedLayout& acc = la_.get(op.result()).parent;
  TensorCoreOp top = t_.tensorCore(ir::dotOperandElem(op, 0), ir::dotOperandElem(op, 1), op.operand(2)->type().dtype());
  // The layout analysis gave the dot a smaller instruction's placement
  // where the target's first choice does not fit (ir::mmaLayout): that
  // instruction then (TensorCoreOp::small).
  if (top.small != ir::MmaKind::None && top.kind != top.small && acc.mma == top.small) {
    top.kind = top.small;
    if (top.mmaSmall != llvm::Intrinsic::not_intrinsic) top.mma = top.mmaSmall;
    top.mmaBlockScale = top.mmaSmallBlockScale;
  } else if (top.smaller != ir::MmaKind::None && acc.mma == top.smaller) {
    top.kind = top.smaller;
    top.mma = top.mmaSmaller;
    top.mmaBlockScale = llvm::Intrinsic::not_intrinsic;
  }
  // A block-scaled dot (decompose-scaled-dots left it where the target's
  // table has the instruction for this placement: gpuScaledDotNative).
  const bool scaled = op.numOperands() == 5;
  if (scaled) {
    TS_ASSERT(top.mmaBlockScale != llvm::Intrinsic::not_intrinsic && acc.mma == top.kind,
              "a block-scaled dot on a placement without its block-scaled instruction");
    top.mma = top.mmaBlockScale;
    if (ir::dotElemsPerByte(op) == 2 && top.mmaFp4Packed != llvm::Intrinsic::not_intrinsic) top.mma = top.mmaFp4Packed;
    if (ir::dotScaleBlock(op) == 16) {
      TS_ASSERT(top.mmaNvfp4 != llvm::Intrinsic::not_intrinsic && ir::dotElemsPerByte(op) == 2,
                "an NVFP4 block-scaled dot on a target without its instruction");
      top.mma = top.mmaNvfp4;
    }
  }
  TensorCoreDotPlan p =
      planTensorCoreDot(t_, top, av->type().dtype(), av->type().shape()[0], op.operand(1)->type().shape()[1],
                        av->type().shape()[1], acc, ir::dotElemsPerByte(op));
  p.inB = op.operand(1)->type().dtype();
  p.elemA = ir::dotOperandElem(op, 0);
  p.elemB = ir::dotOperandElem(op, 1);
  p.scaled = scaled;
  p.scaleBlock = scaled ? ir::dotScaleBlock(op) : 32;
  p.scaleBlocks = scaled ? p.K * p.kPerElem / p.scaleBlock : 0;
  // Staging swizzled rather than padded (AMD) where that raises the occupancy
  // the kernel's shared memory allows (chooseShared weighs both, and
  // keeps the swizzle only then). The padding (WMMA 16 bytes a row, a
  // quarter of a 32-wide f16 K tile; MFMA 8) is what limits a small GEMM's
  // occupancy (the 32x32x32 example: gfx1100 10240 -> 8192 bytes, 12 -> 16
  // waves; gfx942 9216 -> 8192, 7 -> 8; both Triton's), and with S-1 slots
  // a 128x128x32 tile's on gfx942 (36864 -> 32768 bytes, 1 -> 2 waves on 4
  // warps, 2 -> 4 on 8; Triton's). A swizzled row's units need an address
  // register per column a lane reads: the 128x128 tiles pay 7-14 VGPRs and
  // 16-18 loop instructions for the doubled waves, and where the waves do
  // not rise (the tile's epilogue sets the footprint: a 64x64 i8 tile under
  // its 16 KB i32 conversion, 48 -> 60 VGPRs for the same bytes) the choice
  // is thrown away. Chained dots (flash attention's QK^T and PV) never take
  // it: swizzled, attention 128x64 d64 w4 and the backward pass went into
  // scratch and the flash_attention examples fell from 9 to 8 waves on
  // gfx1100 (tessera_gpu_bench, every gfx1100 row both ways).
  if (!la_.chained(op)) {
    TensorCoreDotPlan q = p;
    if (t_.swizzleDotStaging(q)) {
      swizzleCandidates_ = true;
      if (swizzleDots_) p = q;
    }
  }
  // Where the operands come from decides, on some targets, the instruction
  // form and the staging (GpuTargetInfo::planDotForm): NVIDIA stores a B
  // copied from global memory where it is contiguous along K (flash
  // attention's K^T) N x K, so the copy's 16-byte chunks stay whole, and
  // reads B for wgmma in one of its descriptor layouts: K-major (N x K)
  // where B is copied from K-contiguous global memory, N-major (K x N)
  // otherwise (staged from registers, copied along N, or a shared slot
  // stored that way by planDirectDots); a loop-invariant B whose fragments
  // stay in registers keeps mma.sync on the same accumulator registers.
  // Decided once the operands are planned; until then the plan is
  // mma.sync's.
  DotOperandSources src;
  src.planned = operandsPlanned_;
  auto g = globalOperands_.find({&op, 1});
  src.bGlobalAlongK = g != globalOperands_.end() && g->second == 0;
  const Hoisted* h = nullptr;
  for (const Hoisted& x : hoisted_)
    if (x.dot == &op && x.operand == 1) h = &x;
  const Hoisted* ha = nullptr;
  for (const Hoisted& x : hoisted_)
    if (x.dot == &op && x.operand == 0) ha = &x;
  src.bFragmentsHeld = h && h->inRegisters;
  src.aInRegisters = registerOperands_.count({&op, 0}) || (ha && ha->inRegisters);
  src.bInSlot = directOperands_.count({&op, 1}) != 0;
  bool bViaTranspose = false;
  ir::dotOperandLoad(op, 1, &bViaTranspose);
  src.bSlotKMajor = src.bInSlot && bViaTranspose;
  const bool async = op.hasAttr("async") && op.intAttr("async") == 1 && directOperands_.count({&op, 0}) &&
                     directOperands_.count({&op, 1});
  src.completesInLoop = inLoop(op) && !async;
  t_.planDotForm(p, src);
  // Scales copied into the accumulator memory by an in-flight dot: a set
  // per issue the dot_waits leave unretired, and one more (the next issue
  // writes one while they run), as many as fit beside the accumulator.
  if (p.scaleAtoms && async) {
    int64_t pending = 0;
    ir::walk(const_cast<ir::Function&>(f_).body(), [&](ir::Op& w) {
      if (w.code() == OpCode::DotWait) pending = std::max(pending, w.intAttr("pending"));
    });
    for (p.scaleBuffers = pending + 1; p.scaleBuffers > 1 && t_.accumulatorColumns(p) > t_.accumulatorMemoryColumns();
         --p.scaleBuffers) {
    }
  }
  return p;
}

namespace {
/// True when `v` is defined inside `loop`'s body (at any depth).
bool definedIn(const ir::Value* v, const ir::Op& loop) {
  const ir::Block* b = v->isBlockArg() ? v->ownerBlock() : v->definingOp()->parent();
  while (b) {
    const ir::Op* p = b->parentOp();
    if (p == &loop) return true;
    b = p ? p->parent() : nullptr;
  }
  return false;
}
}  // namespace

/// The operands of a tensor-core dot that are not read from a shared slot
/// (planDirectDots) go through the dot's staging buffer every time it runs:
/// written by the threads that hold them, a barrier, the fragment reads.
/// Three cases need less:
/// * (NVIDIA) an operand that is a global `load` of the dot's block read by
///   the dot only (flash attention's K^T and V, a GEMM's tiles without
///   `for_pipelined`) is copied global -> shared by cp.async straight into
///   the staging buffer (copyOperand): the tile never occupies registers.
///   Only where the program has no async groups of its own (the copy waits
///   for all groups) and the pointers prove 16-byte chunks (globalCopyDim);
///   (AMD) the same where the operand is contiguous along K, the dim the
///   staging keeps contiguous (A M x K, B N x K), by vector loads and LDS
///   stores of the padded rows' alignment (8 or 16 bytes), in place of a
///   load in the layout of the tile's last dim -- flash attention's K^T,
///   one 16-bit load, LDS store and exec branch per element otherwise;
/// * an A operand whose layout is the instruction's A fragments
///   (ir::mmaOperandALayout; flash attention's P = softmax(S) in the first
///   dot's accumulator layout, chained dots having all warps along M) is
///   handed to the instruction from its registers;
/// * an operand defined outside a loop that holds the dot (flash
///   attention's Q) is staged once, before the outermost such loop, into an
///   area live across that loop (SharedPlan's loop areas); the dot reads its
///   fragments from there every iteration and its registers die at the
///   staging instead of living through the loop. Where a thread has 512
///   registers (CDNA's VGPRs and accumulation registers) and shared memory,
///   64 KiB per CU, is what limits occupancy, the fragments are instead
///   read into registers once before the loop and the area is only used
///   there; elsewhere too when the loop areas would not fit the shared
///   memory (chooseShared weighs that).
/// The dim along which operand i of tensor-core dot `op` can be copied
/// global->shared in 16-byte chunks (a `load` in the dot's block whose only
/// user is the dot, masked lanes 0, pointers contiguous and 16-byte aligned
/// along that dim, the mask constant over each chunk, and the chunk
/// contiguous in the staging buffer), or -1.
int64_t Lower::globalChunkBytes(const ir::Op& dot) const {
  return t_.dotCopyChunkBytes(la_.get(dot.result()).parent.mma);
}

int Lower::globalCopyDim(const ir::Op& op, unsigned i, const std::unordered_map<const ir::Value*, int>& uses) {
  const ir::Value* v = op.operand(i);
  const ir::Op* ld = v->definingOp();
  if (!ld || ld->code() != OpCode::Load || ld->parent() != op.parent() || uses.at(v) != 1) return -1;
  if (ld->numOperands() > 2) {  // an `other` value: only zeros, what cp.async fills masked chunks with
    const ir::Op* o = ld->operand(2)->definingOp();
    if (!o || o->code() != OpCode::Constant) return -1;
    const auto& val = o->attrs().at("value");
    const double* f = std::get_if<double>(&val);
    const int64_t* n = std::get_if<int64_t>(&val);
    if (!((f && *f == 0 && !std::signbit(*f)) || (n && *n == 0))) return -1;
  }
  const ir::Value* ptr = ld->operand(0);
  const auto& shape = ptr->type().shape();
  const int64_t eb = static_cast<int64_t>(byteSize(v->type().dtype()));
  const int64_t ce = globalChunkBytes(op) / eb;
  ir::AxisInfo ai = ax_.get(ptr);
  if (shape.size() != 2 || ai.contiguity.size() != 2) return -1;
  int fast = ai.contiguity[0] > ai.contiguity[1] ? 0 : 1;
  if (ai.contiguity[fast] % ce != 0 || shape[fast] % ce != 0 || ai.divisibility[fast] % (ce * eb) != 0) return -1;
  if (ld->numOperands() > 1) {
    ir::AxisInfo mi = ax_.get(ld->operand(1));
    if (mi.constancy.size() != 2 || mi.constancy[fast] % ce != 0) return -1;
  }
  // The chunks must run along a dim the staging keeps contiguous.
  return t_.dotCopyDim(i, fast, eb, shape[1], la_.get(op.result()).parent);
}

void Lower::planDotOperands() {
  registerOperands_.clear();
  hoisted_.clear();
  globalOperands_.clear();
  auto& body = const_cast<ir::Function&>(f_).body();
  // Global operands need the hardware async copy, and no async group of the
  // program's own that the copy's wait would retire early.
  bool ownGroups = false;
  std::unordered_map<const ir::Value*, int> uses;
  ir::walk(body, [&](ir::Op& op) {
    ownGroups = ownGroups || op.code() == OpCode::AsyncCommit || op.code() == OpCode::AsyncWait;
    for (const ir::Value* v : op.operands()) ++uses[v];
  });
  const bool copies = t_.asyncCopyImpl() == AsyncCopyImpl::Hardware && !ownGroups;
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::Dot || !la_.has(op.result())) return;
    const ir::Layout& dl = la_.get(op.result());
    if (dl.parent.mma == ir::MmaKind::None) return;
    // The hardware async copy (NVIDIA: cp.async), else synchronous chunks
    // (AMD: no async groups involved).
    const bool chunked = t_.dotCopiesAsync() ? copies : true;
    for (unsigned i = 0; i < 2 && chunked; ++i) {
      if (directOperands_.count({&op, i})) continue;
      if (int fast = globalCopyDim(op, i, uses); fast >= 0) {
        globalOperands_[{&op, i}] = fast;
        elidedLoads_.insert(op.operand(i));
      }
    }
    if (!directOperands_.count({&op, 0}) && !globalOperands_.count({&op, 0}))
      if (auto fl = ir::mmaOperandALayout(dl.parent); fl && la_.get(op.operand(0)) == ir::Layout::blocked(*fl))
        registerOperands_.insert({&op, 0});
    for (unsigned i = 0; i < 2; ++i) {
      if (directOperands_.count({&op, i}) || registerOperands_.count({&op, i}) || globalOperands_.count({&op, i}))
        continue;
      const ir::Value* v = op.operand(i);
      const ir::Op* loop = nullptr;
      for (const ir::Op* p = op.parent()->parentOp(); p && p->code() == OpCode::For && !definedIn(v, *p);
           p = p->parent() ? p->parent()->parentOp() : nullptr)
        loop = p;
      if (loop) hoisted_.push_back({&op, i, loop, invariantsInRegisters_, {}});
    }
  });
}

/// Pointer and mask tiles of async copies are re-derived by the copy in its
/// own layout (emitCopy). Emitting them where they are defined as well would
/// be dead code, and not free: an elementwise op whose operands come in
/// other layouts converts them through shared memory (stores, loads and
/// barriers, which no later pass removes). A tile is elided when every use
/// is the pointer or mask of such a copy or an operand of another elided
/// tile's definition; a value with any other consumer (e.g. the epilogue's
/// store) is emitted as usual, and the copies reuse it when its layout fits.
void Lower::planElision() {
  elided_.clear();
  std::unordered_map<const ir::Value*, std::vector<std::pair<const ir::Op*, unsigned>>> uses;
  std::vector<const ir::Op*> defs;
  auto& body = const_cast<ir::Function&>(f_).body();
  ir::walk(body, [&](ir::Op& op) {
    for (unsigned i = 0; i < op.numOperands(); ++i) uses[op.operand(i)].emplace_back(&op, i);
    if (op.numResults() == 1 && op.result()->type().isTile() && rederivable(op)) defs.push_back(&op);
  });
  std::unordered_map<const ir::Op*, bool> asyncCopy;
  for (auto& [v, us] : uses)
    for (auto& [user, i] : us)
      if ((user->code() == OpCode::Copy || user->code() == OpCode::Store) && !asyncCopy.count(user))
        asyncCopy[user] = freeAccessLayout(*user).has_value();
  for (const ir::Op* d : defs)
    if (uses.count(d->result())) elided_.insert(d->result());
  // A local_load all of whose uses are dots reading the slot directly.
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::LocalLoad || !uses.count(op.result())) return;
    for (auto& [user, i] : uses.at(op.result()))
      if (!directOperands_.count({user, i})) return;
    elidedLoads_.insert(op.result());
  });
  // A B^T read in place through its transpose (ir::dotOperandLoad): neither
  // the transpose nor its local_load is emitted, where the dot is their
  // only use (after the fixpoint below, which keeps only copies' operands).
  std::vector<const ir::Value*> viaTranspose;
  ir::walk(body, [&](ir::Op& op) {
    bool through = false;
    const ir::Op* ld =
        op.code() == OpCode::Dot && directOperands_.count({&op, 1}) ? ir::dotOperandLoad(op, 1, &through) : nullptr;
    if (!ld || !through || uses.at(op.operand(1)).size() != 1 || uses.at(ld->result()).size() != 1) return;
    viaTranspose.push_back(op.operand(1));
    elidedLoads_.insert(ld->result());
  });
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = elided_.begin(); it != elided_.end();) {
      bool ok = true;
      for (auto& [user, i] : uses.at(*it)) {
        bool copyOperand = (user->code() == OpCode::Copy && i >= 1 && asyncCopy.at(user)) ||
                           (user->code() == OpCode::Store && i != 1 && asyncCopy.at(user));
        bool feedsElided = user->numResults() == 1 && elided_.count(user->result()) != 0;
        // The pointers and mask of a load copied by a dot (copyOperand)
        // are re-derived there.
        bool copiedLoad = user->code() == OpCode::Load && elidedLoads_.count(user->result()) != 0;
        if (!copyOperand && !feedsElided && !copiedLoad) ok = false;
      }
      if (ok) {
        ++it;
      } else {
        it = elided_.erase(it);
        changed = true;
      }
    }
  }
  elided_.insert(viaTranspose.begin(), viaTranspose.end());
}

void Lower::planStagedTransposes() {
  stagedTransposes_.clear();
  std::unordered_map<const ir::Value*, int> uses;
  auto& body = const_cast<ir::Function&>(f_).body();
  ir::walk(body, [&](ir::Op& op) {
    for (const ir::Value* v : op.operands()) ++uses[v];
  });
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::Dot || op.numOperands() != 5 || !la_.has(op.result()) ||
        la_.get(op.result()).parent.mma == ir::MmaKind::None)
      return;
    const ir::Value* b = op.operand(1);
    const ir::Op* t = b->definingOp();
    if (!t || t->code() != OpCode::Transpose || uses[b] != 1 || t->parent() != op.parent()) return;
    const TensorCoreDotPlan p = dotPlan(op);
    if (!p.bTransposed || !dotArea(op, p).stageB || globalOperands_.count({&op, 1})) return;
    elided_.insert(b);
    stagedTransposes_[&op] = t->operand(0);
  });
}

// Packed f32 math (CDNA's v_pk_add/mul/fma_f32) halves the instructions of
// f32 arithmetic, but a packed product can no longer be contracted with the
// scalar additions of a sum reduction into FMAs (under approximate math): a
// GEMV's products feed one, and packing them made its loop longer. So a
// multiply is packed unless a sum reduction reads it, and an addition or
// subtraction unless an operand is such an unpacked product.
void Lower::planPackedMath() {
  packedOps_.clear();
  if (!t_.packedF32Math()) return;
  auto& body = const_cast<ir::Function&>(f_).body();
  auto packable = [&](const ir::Op& op) {
    switch (op.code()) {
      case OpCode::Add:
      case OpCode::Sub:
      case OpCode::Mul:
      case OpCode::Fma: break;
      default: return false;
    }
    const ir::Type& t = op.result()->type();
    return t.isTile() && t.dtype() == DType::F32 && la_.has(op.result());
  };
  std::unordered_map<const ir::Value*, std::vector<const ir::Op*>> users;
  ir::walk(body, [&](ir::Op& op) {
    for (const ir::Value* v : op.operands()) users[v].push_back(&op);
  });
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::Mul || !packable(op)) return;
    if (auto it = users.find(op.result()); it != users.end())
      for (const ir::Op* u : it->second)
        if (u->code() == OpCode::Reduce && u->strAttr("kind") == "sum") return;
    packedOps_.insert(&op);
  });
  ir::walk(body, [&](ir::Op& op) {
    if (!packable(op) || op.code() == OpCode::Mul) return;
    if (op.code() != OpCode::Fma)
      for (const ir::Value* v : op.operands())
        if (const ir::Op* d = v->definingOp(); d && d->code() == OpCode::Mul && !packedOps_.count(d)) return;
    packedOps_.insert(&op);
  });
}

}  // namespace tessera::codegen::gpu_lower

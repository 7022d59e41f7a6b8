// Copies into shared buffers, asynchronous ones per the target's
// AsyncCopyImpl (hardware cp.async or register-staged; see below).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

// ========================================================= asynchronous copies
//
// `copy {async = 1}` (IR.h: the copy happens at some time between its issue
// and the async_wait that retires its group; the program orders it against
// everything else) is lowered per the target's AsyncCopyImpl:
//
// Hardware (NVPTX cp.async): one asyncCopy per thread-owned chunk of 4, 8 or
// 16 bytes. A chunk is a run of the thread's slots that the same analysis
// as the vectorised global loads proves contiguous and aligned in global
// memory (vectorWidth: contiguity and divisibility, bounded by the mask's
// constancy, so one chunk has one mask bit) and that lands on consecutive,
// equally aligned bytes of the row-major buffer at exactly the addresses
// writeBuffer would use for those slots. A copy whose chunks would be
// narrower than 4 bytes or cannot be proven aligned takes the synchronous
// path (a program-order copy is one of the executions the model allows).
// No barrier is emitted: the schedule's async_wait + barrier order it.
//
// RegisterStaged (AMDGPU): globalLoad at the copy (the loads are issued
// there, so their latency overlaps whatever follows), writeBuffer deferred
// to the earliest of
//   (a) the async_wait that retires the copy's group,
//   (b) the end of the enclosing loop body, just before the back edge,
//   (c) the start of a `for` or `if` (copies issued before the loop, i.e.
//       the prologue, are stored before entering it) and `return`.
// Storing at any point between the issue and the retiring wait is one of
// the executions IR.h allows, provided nothing else touches the slot in
// between, which the verified program guarantees (reuse rule: a barrier
// separates the copy from every earlier read of the slot; visibility rule:
// no read before the retiring wait and a later barrier). For (b), with the
// pipeline pass's schedule (docs/pipelining.md) the copy issued in iteration
// k writes slot (k+S-1) mod S; that slot was last read in iteration k-1
// (slot (k-1) mod S), before the barrier at the top of iteration k that
// precedes the copy, so storing at the end of iteration k cannot race with
// that read; the data is first read in iteration k+S-1 >= k+1 (S >= 2;
// with S = 1 the wait in iteration k retires it first, case (a)), after the
// async_wait and the barrier there, which follow the store. The stores need
// no barrier of their own either: no other shared access of the lowering
// overlaps a live buffer (the shared-memory plan keeps the buffer's bytes
// for every op of the loop).

void Lower::emitCopy(const ir::Op& op) {
  const ir::Value* src = op.operand(1);
  const ir::Value* maskV = op.numOperands() > 2 ? op.operand(2) : nullptr;
  TS_ASSERT(src->type().shape() == op.operand(0)->type().shape(), "copy: pointer tile and buffer shapes differ");
  if (auto it = tma_.find(&op); it != tma_.end()) return emitTmaCopy(op, it->second);
  bool async = op.hasAttr("async") && op.intAttr("async") != 0;
  AsyncCopyImpl impl = async ? t_.asyncCopyImpl() : AsyncCopyImpl::Synchronous;
  ir::Layout l = la_.get(src);
  Slots ptrs, m;
  // An async copy runs in freeAccessLayout; its pointers and mask are
  // re-emitted in that layout (reused where already there), not converted.
  // Program-order copies keep their layout.
  if (std::optional<ir::Layout> al = freeAccessLayout(op)) {
    std::map<std::pair<const ir::Value*, std::string>, Slots> memo;
    int budget = 64;
    l = *al;
    ptrs = recompute(src, l, memo, budget);
    if (maskV) m = recompute(maskV, l, memo, budget);
  } else {
    ptrs = tile(src).slots;
    if (maskV) m = tileIn(maskV, l);
  }
  if (impl == AsyncCopyImpl::Hardware && emitHardwareCopy(op, l, ptrs, maskV ? &m : nullptr)) return;
  Slots v = globalLoad(op, l, src->type(), ptrs, maskV ? &m : nullptr, nullptr);
  if (impl == AsyncCopyImpl::RegisterStaged) {
    staged_.push_back(StagedCopy{&op, op.operand(0), std::move(v), l, committed_});
    return;
  }
  writeBuffer(op.operand(0), v, l);
}

bool Lower::emitHardwareCopy(const ir::Op& op, const ir::Layout& l, const Slots& ptrs, const Slots* mask) {
  const ir::Value* buf = op.operand(0);
  const ir::Type& ptrT = op.operand(1)->type();
  const auto& shape = buf->type().shape();
  llvm::Type* mt = memTyOf(buf->type().dtype());
  const int64_t eb = static_cast<int64_t>(bytesOf(mt));
  ir::SlotTable t = ir::slotTable(l, shape);
  int64_t v = accessWidth(op, l, ptrT, t, op.numOperands() > 2 ? op.operand(2) : nullptr);
  int64_t runBytes = v * eb;
  int64_t cb = runBytes % 16 == 0 ? 16 : runBytes % 8 == 0 ? 8 : runBytes % 4 == 0 ? 4 : 0;
  if (cb == 0) return false;   // chunks narrower than 4 bytes: no cp.async for them
  const int64_t ce = cb / eb;  // elements per chunk; divides v
  // Shared side: rows of the row-major buffer (and so each slot of a staged
  // buffer, and the buffer base, which the plan aligns to 16) start on chunk
  // boundaries; the thread's first column (pos * spt, mod the row when
  // replicated) is a multiple of the chunk; each chunk is ce consecutive
  // columns starting at a multiple of ce.
  if ((shape.back() * eb) % cb != 0 || l.parent.spt[l.dims.back()] % ce != 0) return false;
  // Padded / transposed slots: chunks would not stay contiguous. Column
  // blocks (wgmma's B) hold whole rows of 64 elements: chunks stay whole.
  if (auto sg = storage_.find(rootBuffer(buf));
      sg != storage_.end() &&
      (sg->second.transposed ||
       sg->second.st.stride != (sg->second.st.blockCols ? sg->second.st.blockCols : sg->second.st.cols)))
    return false;
  const size_t r = shape.size() - 1;
  for (size_t i = 0; i < t.size(); i += static_cast<size_t>(ce)) {
    if (t.consts[i][r] % ce != 0) return false;
    for (int64_t k = 1; k < ce; ++k) {
      std::vector<int64_t> want = t.consts[i];
      want[r] += k;
      if (t.consts[i + static_cast<size_t>(k)] != want) return false;
    }
  }
  beforeGlobal(false);
  record_.accesses.push_back({&op, l, v, /*idleCopies=*/true});
  llvm::Value* base = scalar(buf);
  // One writer per element, as in writeBuffer.
  auto sg = storage_.find(rootBuffer(buf));
  guarded(ownerPred(l, t), [&] {
    Slots bs = bases(l, t);
    // A chunk whose staging index is a constant away from an earlier
    // chunk's (stagingOffset: the swizzle repeats every 8 rows) takes that
    // chunk's address plus an immediate: one address register per thread
    // instead of one per chunk.
    std::vector<std::pair<size_t, llvm::Value*>> anchors;
    auto fromAnchor = [&](size_t i) -> llvm::Value* {
      if (sg == storage_.end()) return nullptr;
      for (auto& [a, ptr] : anchors) {
        bool outerSame = true;
        for (size_t d = 0; d + 2 < shape.size(); ++d) outerSame = outerSame && t.consts[i][d] == t.consts[a][d];
        if (!outerSame) continue;
        auto off =
            stagingOffset(sg->second.st, t.consts[i][r - 1] - t.consts[a][r - 1], t.consts[i][r] - t.consts[a][r]);
        if (off) return *off ? b_.CreateInBoundsGEP(mt, ptr, i32(*off)) : ptr;
      }
      return nullptr;
    };
    Slots cm = mask ? *mask : Slots{};
    if (o_.checkBounds) {
      std::vector<size_t> at;
      for (size_t i = 0; i < t.size(); i += static_cast<size_t>(ce)) at.push_back(i);
      checkAccesses(op, op.operand(1), ptrs, at, static_cast<uint64_t>(cb), cm);
    }
    for (size_t i = 0; i < t.size(); i += static_cast<size_t>(ce)) {
      // A swizzled buffer permutes whole 16-byte chunks: a chunk of <= 16
      // bytes starting at a multiple of its size stays contiguous.
      llvm::Value* dst = fromAnchor(i);
      if (!dst) {
        dst = b_.CreateInBoundsGEP(mt, base, bufIndex(buf, indexOf(bs, t, i), shape));
        anchors.emplace_back(i, dst);
      }
      t_.asyncCopy(b_, dst, ptrs[i], static_cast<unsigned>(cb), cm.empty() ? nullptr : cm[i]);
    }
  });
  return true;
}

/// Stores the staged copies of every group < beforeGroup (INT64_MAX: all),
/// in issue order; see the comment above emitCopy.
void Lower::flushStaged(int64_t beforeGroup, bool endOfBody) {
  if (staged_.empty() || staged_.front().group >= beforeGroup) return;
  // A copy into a fewer-slot buffer (planFewerSlots) stores into the slot the
  // body has just read: every thread must be past those reads. Only LDS is
  // ordered; the loads of the copies stay in flight until the stores.
  bool war = false;
  for (const StagedCopy& s : staged_)
    if (s.group < beforeGroup && fewer(rootBuffer(s.buf))) {
      const ir::Op* up = s.op->parent()->parentOp();
      TS_ASSERT(endOfBody || !(up && up->hasAttr("pipelined")),
                "fewer slots: a pipelined copy stored before the end of its iteration's body");
      war = war || endOfBody;
    }
  if (war) {
    const bool gd = globalDirty_;  // an LDS-only barrier orders no global write
    barrier(/*sharedOnly=*/true);
    globalDirty_ = gd;
  }
  // Without this the AMDGPU scheduler hoists the deferred LDS stores above
  // the iteration's WMMA/MFMAs, and the stores' wait for the loads
  // (s_waitcnt vmcnt) comes before the compute again (seen on gfx1100).
  t_.schedulingBarrier(b_);
  const ir::Op* cur = curOp_;
  std::vector<StagedCopy> keep;
  for (StagedCopy& s : staged_) {
    if (s.group >= beforeGroup) {
      keep.push_back(std::move(s));
      continue;
    }
    setCurrentOp(*s.op);  // the stores are the copy's accesses
    writeBuffer(s.buf, s.vals, s.layout, /*ordered=*/false);
  }
  staged_ = std::move(keep);
  if (cur) setCurrentOp(*cur);
}

}  // namespace tessera::codegen::gpu_lower

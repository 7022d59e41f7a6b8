// Shared memory in the GPU lowering (SharedNeeds.h): the areas addressed
// through placeholders, what a lowering asked for (recorded), the model of
// what it would ask under other choices (needs), and the placement of the
// areas once the plan exists (placeAreas).
#include <algorithm>
#include <string>
#include <utility>

#include <llvm/IR/Constants.h>
#include <llvm/IR/Module.h>

#include "codegen/gpu/LowerImpl.h"

namespace tessera::codegen::gpu_lower {

llvm::Value* Lower::areaAt(AreaKind kind, const void* key, uint64_t within) {
  llvm::GlobalVariable*& g = placeholderOf_[{kind, key, within}];
  if (!g) {
    // Shared address space, so every use types as the final address will;
    // removed by placeAreas.
    auto* ty = llvm::ArrayType::get(b_.getInt8Ty(), 0);
    g = new llvm::GlobalVariable(m_, ty, false, llvm::GlobalValue::ExternalLinkage, nullptr, "tessera.area", nullptr,
                                 llvm::GlobalValue::NotThreadLocal, t_.sharedAS());
    placeholders_.push_back({kind, key, within, g});
  }
  return g;
}

llvm::Value* Lower::scratchFor(const ScratchRequest& r) {
  const uint64_t bytes = r.kind == ScratchRequest::Kind::Conversion && chunkConversions_ ? r.chunkedBytes : r.bytes;
  uint64_t& m = req_[curOp_];
  m = std::max(m, bytes);
  requireAlign(curOp_, r.align);
  requests_.byOp[curOp_].push_back(r);
  return areaAt(AreaKind::Scratch, curOp_);
}

llvm::Value* Lower::loopArea(const void* key, const ir::Op* loop, uint64_t bytes, const std::string& what,
                             bool wholeLoop, uint64_t align) {
  auto it = std::find_if(loopReq_.begin(), loopReq_.end(), [&](const auto& e) { return e.first == key; });
  if (it == loopReq_.end()) {
    it = loopReq_.insert(loopReq_.end(), {key, ir::LoopArea{loop, 0, what, wholeLoop}});
    requests_.loopAreaOrder.push_back(key);
  }
  it->second.bytes = std::max(it->second.bytes, bytes);
  requireAlign(key, align);
  return areaAt(AreaKind::LoopArea, key);
}

std::unordered_map<const ir::Value*, uint64_t> Lower::bufferStorageBytes(bool fewerSlots) const {
  std::unordered_map<const ir::Value*, uint64_t> r;
  // Leading dims times the elements of one slot; a fewer-slot buffer's
  // leading dim (its S slots) is stored as S-1.
  auto lead = [&](const ir::Value* buf) {
    const auto& shape = buf->type().shape();
    int64_t n = 1;
    for (size_t i = 0; i + 2 < shape.size(); ++i) n *= shape[i];
    if (fewerSlots && fewerSlotCands_.count(buf)) n = n / shape[0] * (shape[0] - 1);
    return n;
  };
  for (auto& [buf, sg] : storage_)
    r[buf] = static_cast<uint64_t>(lead(buf) * sg.slotElems()) * ir::sharedElemBytes(buf->type().dtype());
  if (fewerSlots)
    for (auto& [buf, S] : fewerSlotCands_) {
      if (storage_.count(buf)) continue;
      const auto& shape = buf->type().shape();
      int64_t slot = 1;
      for (size_t i = shape.size() - 2; i < shape.size(); ++i) slot *= shape[i];
      r[buf] = static_cast<uint64_t>(lead(buf) * slot) * ir::sharedElemBytes(buf->type().dtype());
    }
  return r;
}

void Lower::commonNeeds(SharedNeeds& n, std::unordered_map<const void*, uint64_t> aligns,
                        const ScratchRequests& r) const {
  n.storage = bufferStorageBytes(fewerSlots_);
  n.fewerStorage = bufferStorageBytes(true);
  // The buffers stored for wgmma (Storage::align) on top of the areas'.
  for (auto& [buf, sg] : storage_)
    if (sg.align > 16) aligns[buf] = sg.align;
  n.aligns = std::move(aligns);
  n.tmaBarrierBytes = tmaBarrierBytes();
  n.threads = blockThreads();
  n.swizzleCandidates = swizzleCandidates_;
  n.fewerCandidates = !fewerSlotCands_.empty();
  for (auto& [op, rs] : r.byOp)
    for (const ScratchRequest& q : rs)
      if (q.kind == ScratchRequest::Kind::Conversion && q.chunkedBytes < q.bytes) n.chunkCandidates = true;
}

SharedNeeds Lower::recorded() const {
  SharedNeeds n;
  n.scratch = req_;
  n.loopAreas = loopReq_;
  commonNeeds(n, alignReq_, requests_);
  n.fragmentsCandidates = fragmentsFirstCandidates_;
  return n;
}

SharedNeeds Lower::needs(const ScratchRequests& r) {
  SharedNeeds n;
  // Alignments of the planning phase (tensor copies' buffers); the ops'
  // and loop areas' are added below as the lowering would ask them.
  std::unordered_map<const void*, uint64_t> aligns = alignReq_;
  auto align = [&](const void* key, uint64_t a) {
    if (a > 16) aligns[key] = std::max(aligns[key], a);
  };
  for (auto& [op, rs] : r.byOp) {
    uint64_t& bytes = n.scratch[op];
    for (const ScratchRequest& q : rs) {
      switch (q.kind) {
        case ScratchRequest::Kind::Fixed:
          bytes = std::max(bytes, q.bytes);
          align(op, q.align);
          break;
        case ScratchRequest::Kind::Conversion:
          bytes = std::max(bytes, chunkConversions_ ? q.chunkedBytes : q.bytes);
          break;
        case ScratchRequest::Kind::DotStaging: {
          const DotArea d = dotArea(*op, dotPlan(*op));
          TS_ASSERT(d.bytes > 0, "shared needs: a dot staging request the model does not stage");
          bytes = std::max(bytes, d.bytes);
          align(op, d.align);
          break;
        }
      }
    }
  }
  // Every tensor-core dot's plan (the lowering asks each for one), which
  // also tells the swizzle's candidates; the fragments-first candidates.
  ir::walk(const_cast<ir::Function&>(f_).body(), [&](ir::Op& op) {
    if (op.code() != OpCode::Dot || !la_.has(op.result()) || la_.get(op.result()).parent.mma == ir::MmaKind::None)
      return;
    n.fragmentsCandidates += dotArea(op, dotPlan(op)).fragmentsFirstCandidate ? 1 : 0;
  });
  // Loop areas: the hoisted operands' and in-flight dots' block scales
  // (scaleSetsOf), in the order the lowering first asked for them.
  for (const void* key : r.loopAreaOrder) {
    const Hoisted* h = nullptr;
    for (const Hoisted& x : hoisted_)
      if (hoistKey(x.dot, x.operand) == key) h = &x;
    const ir::Op* scaled = nullptr;
    ir::walk(const_cast<ir::Function&>(f_).body(), [&](ir::Op& op) {
      if (op.code() == OpCode::Dot && op.numOperands() == 5 && hoistKey(&op, 3) == key) scaled = &op;
    });
    if (!h && scaled) {
      const TensorCoreDotPlan p = dotPlan(*scaled);
      const ir::Op* loop = scaled->parent()->parentOp();
      n.loopAreas.push_back(
          {key, ir::LoopArea{loop, p.scaleBytes(), "block scales of " + operandName(*scaled, 0), true}});
      align(key, 16);
      continue;
    }
    TS_ASSERT(h, "shared needs: a loop area of no hoisted operand");
    TensorCoreDotPlan p = dotPlan(*h->dot);
    const DotStaging& st = h->operand == 0 ? p.a : p.b;
    n.loopAreas.push_back(
        {key, ir::LoopArea{h->loop, st.bytes(),
                           operandName(*h->dot, h->operand) + ", staged before the loop at " + h->loop->loc().str(),
                           !h->inRegisters}});
    align(key, h->operand == 1 ? p.bAlign : p.aAlign);
  }
  commonNeeds(n, std::move(aligns), r);
  return n;
}

void Lower::placeAreas(const ir::SharedPlan& plan, uint64_t barrierOffset, uint64_t sharedBytes) {
  // The shared array of its final size, where run() declared it (its size
  // unknown then; nothing uses it but the placeholders' replacements).
  TS_ASSERT(smem_->use_empty(), "shared array used before its areas were placed");
  llvm::GlobalVariable* smem = t_.declareShared(m_, sharedBytes);
  smem->removeFromParent();
  const std::string name = smem_->getName().str();
  auto where = std::next(smem_->getIterator());
  smem_->eraseFromParent();
  m_.insertGlobalVariable(where, smem);
  smem->setName(name);
  smem_ = smem;
  auto* i8 = b_.getInt8Ty();
  for (const Placeholder& p : placeholders_) {
    uint64_t off = 0, align = 16;
    switch (p.kind) {
      case AreaKind::Scratch:
        off = plan.scratchOffset(static_cast<const ir::Op*>(p.key));
        if (auto it = alignReq_.find(p.key); it != alignReq_.end()) align = it->second;
        break;
      case AreaKind::LoopArea:
        off = plan.loopAreaOffset(p.key);
        if (auto it = alignReq_.find(p.key); it != alignReq_.end()) align = it->second;
        break;
      case AreaKind::Buffer:
        off = plan.bufferOffset(static_cast<const ir::Value*>(p.key));
        if (auto it = storage_.find(static_cast<const ir::Value*>(p.key)); it != storage_.end())
          align = it->second.align;
        break;
      case AreaKind::Barriers: off = barrierOffset; break;
    }
    TS_ASSERT(off % align == 0, "shared plan: an area misaligned");
    off += p.within;
    llvm::Constant* at =
        off ? llvm::ConstantExpr::getInBoundsGetElementPtr(i8, smem, llvm::ConstantInt::get(b_.getInt64Ty(), off))
            : static_cast<llvm::Constant*>(smem);
    p.global->replaceAllUsesWith(at);
    p.global->eraseFromParent();
  }
  placeholders_.clear();
  placeholderOf_.clear();
}

}  // namespace tessera::codegen::gpu_lower

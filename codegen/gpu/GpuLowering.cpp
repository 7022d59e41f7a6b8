// Tile IR -> LLVM IR for GPUs (see GpuLowering.h).
//
// Ordering. IR.h makes a program's ops take effect in program order even
// though the program is spread over many threads. Two flags track effects
// that another thread of the block may observe: `smemDirty_` (a shared
// access since the last barrier) and `globalDirty_` (a global store or
// atomic since the last barrier). Every shared access waits for a barrier
// when smemDirty_ is set, every global access when globalDirty_ is set, so
// a value written by one thread and read by another is always separated by
// a barrier, and shared bytes reused by the allocator are never read and
// written at once. At region boundaries both flags are assumed set.
//
// Shared memory is needed by: alloc buffers (shared and local: a local
// buffer is private to the program, and the program is the whole block),
// layout conversions, cross-warp reductions, dot operands, and results of
// atomics that several threads hold. The lowering addresses each area
// through a placeholder and records what it needs; SharedPlan places
// everything afterwards and the placeholders become offsets. The choices
// that trade shared bytes for registers are weighed on a model of those
// needs (SharedNeeds.h), so the kernel is lowered once, and a second time
// only where the chosen code is not the first lowering's.
//
// This file holds the entry (lowerToGpuLLVM, Lower::run); the class Lower is
// declared in LowerImpl.h, and its methods are split by concern over the
// Lower*.cpp files of this directory.
#include "codegen/gpu/GpuLowering.h"

#include <cstdint>
#include <map>
#include <tuple>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <llvm/IR/Module.h>

#include "codegen/gpu/LowerImpl.h"
#include "tessera/ir/analysis/ResourceCheck.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

namespace gpu_lower {

void Lower::plan() {
  planDirectDots();
  planFewerSlots();
  planDotOperands();
  operandsPlanned_ = true;
  planElision();
  planStagedTransposes();
  planPackedMath();
  planTma();
  planSpecialize();
  planAccumulators();
  planCancel();
}

void Lower::run() {
  std::vector<llvm::Type*> params;
  for (unsigned i = 0; i < f_.numArgs(); ++i) {
    const ir::Type& t = f_.arg(i)->type();
    if (!t.isScalar() && !t.isPointer())
      throw CompileError("kernel argument " + std::to_string(i) + " of @" + f_.name() + " has type " + t.str() +
                         "; kernel arguments must be scalars or pointers");
    if (t.isPointer() && t.space() != ir::MemSpace::Global)
      throw CompileError("kernel argument " + std::to_string(i) + " of @" + f_.name() + " has type " + t.str() +
                         "; pointer arguments must be global");
    // i1 travels as a byte (as in CUDA's kernelParams).
    params.push_back(t.isScalar() && t.dtype() == DType::I1 ? b_.getInt8Ty() : elemTy(t));
  }
  plan();
  // Tensor maps: hidden parameters after the user's (by value).
  for (size_t i = 0; i < tensorMaps_.size(); ++i) params.push_back(b_.getPtrTy());
  numberCheckedOps();
  checkParams(params);  // a checked kernel's extents and record, after those
  numberProbes();
  profileParams(params);  // a profiled kernel's buffer, last
  unsigned threads = blockThreads();
  auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  llvm::Function* fn = t_.createKernel(m_, f_.name(), fty, threads);
  declareTensorMaps(fn, f_.numArgs());
  smem_ = t_.declareShared(m_, 0);  // its size once placed (placeAreas)
  startProvenance(fn);
  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn);
  b_.SetInsertPoint(entry);
  for (unsigned i = 0; i < f_.numArgs(); ++i) {
    llvm::Value* a = fn->getArg(i);
    a->setName(f_.arg(i)->nameHint);
    if (a->getType()->isIntegerTy(8) && f_.arg(i)->type().dtype() == DType::I1) a = b_.CreateICmpNE(a, b_.getInt8(0));
    scalars_[f_.arg(i)] = a;
  }
  tid_ = t_.threadId(b_, 0);
  initChecks(fn, f_.numArgs() + static_cast<unsigned>(tensorMaps_.size()));
  unsigned ws = t_.warpSize();
  lane_ = b_.CreateURem(tid_, i32(ws), "lane");
  warp_ = t_.warpUniform(b_, b_.CreateUDiv(tid_, i32(ws), "warp"));
  initProfile(fn);
  initTma();
  initTmaBarriers();
  initAccumulators();
  initCancel();
  splitWarps();
  emitBlock(f_.body());
  TS_ASSERT(b_.GetInsertBlock() == nullptr, "kernel body does not end in return");
  finishProfile(fn);
  finishProvenance();
}

}  // namespace gpu_lower

namespace {

using gpu_lower::Lower;

/// The ResourceError of a plan over the target's shared-memory limit. The
/// user controls only their buffers (tile shapes, stages); the lowering's
/// own areas (layout conversions, dot operand staging, local buffers) come
/// on top and barely depend on the stage count. So the buffers are judged
/// by ir::checkSharedMemory against what the scratch leaves of the limit:
/// its per-buffer list and its suggestion ("with stages = 2 instead of 4",
/// or which tiles to halve) then hold for the whole plan.
ResourceError sharedMemoryError(const ir::Function& f, const ir::SharedPlan& plan, const GpuTargetInfo& t) {
  const uint64_t limit = t.maxSharedBytes(), total = plan.totalBytes();
  const uint64_t user = plan.userSharedBytes();
  // The buffers may share bytes with scratch areas of other ops (disjoint
  // live ranges): the scratch is what the plan adds beyond the buffers.
  const uint64_t scratch = total > user ? total - user : 0;
  std::string head = "@" + f.name() + " needs " + std::to_string(total) + " bytes of shared memory; " + t.arch() +
                     " allows " + std::to_string(limit) + " per block, of which the compiler's own areas take " +
                     std::to_string(scratch) + " bytes.\n";
  std::string buffers;
  if (user > 0 && scratch < limit) {
    try {
      ir::checkSharedMemory(f, static_cast<int64_t>(limit - scratch),
                            t.arch() + " (" + std::to_string(limit) + " bytes minus " + std::to_string(scratch) +
                                " bytes of compiler scratch)");
    } catch (const ResourceError& e) {
      buffers = std::string(e.what()) + "\n";
    }
  }
  if (buffers.empty())
    buffers = scratch >= limit ? "the compiler's own areas alone exceed the limit: use smaller tiles\n"
                               : "use smaller tiles (or fewer buffers live at once)\n";
  return ResourceError(head + buffers + "Shared areas as planned:\n" + plan.describe());
}

}  // namespace

namespace {
/// The model of the needs under any choices, from the planning phase and
/// `requests` (SharedNeeds.h).
SharedNeeds modelNeeds(const ir::Function& f, GpuTargetInfo& t, const ir::LayoutAnalysis& la,
                       const ir::AxisAnalysis& axis, llvm::LLVMContext& ctx, llvm::Module& planning,
                       const ScratchRequests& requests, const SharedChoices& c) {
  Lower planner(f, t, la, axis, ctx, planning, c);
  planner.plan();
  return planner.needs(requests);
}
}  // namespace

std::string sharedNeedsModelErrors(const ir::Function& f, GpuTargetInfo& t, const ir::LayoutAnalysis& la,
                                   const ir::AxisAnalysis& axis, llvm::LLVMContext& ctx, const llvm::DataLayout& dl) {
  llvm::Module first("first", ctx), planning("planning", ctx);
  first.setDataLayout(dl);
  planning.setDataLayout(dl);
  Lower low(f, t, la, axis, ctx, first, SharedChoices{});
  low.run();
  std::string errors;
  for (unsigned bits = 0; bits < 32; ++bits) {
    SharedChoices c;
    c.invariantsInRegisters = bits & 1;
    c.swizzle = bits & 2;
    c.fewerSlots = bits & 4;
    c.chunk = bits & 8;
    c.fragmentsFirst = bits & 16;
    const SharedNeeds predicted = modelNeeds(f, t, la, axis, ctx, planning, low.requests(), c);
    llvm::Module m("choices", ctx);
    m.setDataLayout(dl);
    Lower other(f, t, la, axis, ctx, m, c);
    other.setPriorNeeds(&predicted);
    other.run();
    const std::string d = other.recorded().differences(predicted);
    if (!d.empty()) errors += "choices " + c.str() + ": " + d + "\n";
  }
  return errors;
}

GpuLoweringResult lowerToGpuLLVM(const ir::Function& f, GpuTargetInfo& t, const ir::LayoutAnalysis& la,
                                 const ir::AxisAnalysis& axis, llvm::LLVMContext& ctx, const llvm::DataLayout& dl) {
  TS_ASSERT(t.config().numWarps >= 1 && t.config().threadsPerBlock() <= t.maxThreadsPerBlock(),
            "numWarps reached the lowering unchecked");
  auto newModule = [&] {
    auto m = std::make_unique<llvm::Module>(f.name(), ctx);
    m->setDataLayout(dl);
    m->setTargetTriple(llvm::Triple(t.triple()));
    return m;
  };
  // The first lowering, with no choice taken: its scratch requests feed
  // the model.
  const SharedChoices start;
  auto m = newModule();
  auto low = std::make_unique<Lower>(f, t, la, axis, ctx, *m, start);
  low->run();
  const ScratchRequests requests = low->requests();
  // The needs under other choices: the planning phase under those choices
  // (no code), applied to the first lowering's requests.
  llvm::Module planning("planning", ctx);
  planning.setDataLayout(dl);
  auto model = [&](const SharedChoices& c) { return modelNeeds(f, t, la, axis, ctx, planning, requests, c); };
  // A lowering's own record must be what the model says of its choices.
  auto check = [&](const Lower& l, const SharedChoices& c, const SharedNeeds& predicted) {
    const std::string d = l.recorded().differences(predicted);
    TS_ASSERT(d.empty(), "@" + f.name() + " on " + t.arch() + ", choices " + c.str() +
                             ": the shared-needs model differs from the lowering: " + d);
  };
  check(*low, start, model(start));
  const SharedChoice choice = chooseShared(f, t, start, model);
  const SharedNeeds needs = model(choice.choices);
  // Lowered again where the chosen code differs, or where a warp-
  // specialised loop's barriers look ahead at the needs
  // (Lower::onlyChannelReads).
  const bool again = !(choice.choices == start) || low->warpSpecialized();
  if (again) {
    low.reset();  // before the module its builder and placeholders refer to
    m = newModule();
    low = std::make_unique<Lower>(f, t, la, axis, ctx, *m, choice.choices);
    low->setPriorNeeds(&needs);
    low->run();
    check(*low, choice.choices, needs);
  }
  ir::SharedPlan plan = needs.plan(f);
  GpuLoweringResult res;
  res.invariantsForLds = choice.invariantsForLds;
  res.ldsWavesWithoutInvariants = choice.ldsWavesWithoutInvariants;
  res.fragmentsForLds = choice.fragmentsForLds;
  res.ldsWavesWithoutFragments = choice.ldsWavesWithoutFragments;
  // Transaction barriers (tensor copies) after the plan's areas, for the
  // whole kernel.
  const uint64_t barrierOffset = (plan.totalBytes() + 15) & ~uint64_t{15};
  res.sharedBytes = needs.tmaBarrierBytes ? barrierOffset + needs.tmaBarrierBytes : plan.totalBytes();
  res.sharedPlan = plan.describe();
  if (choice.choices.fewerSlots)
    res.sharedPlan +=
        "register-staged pipelines: each staged buffer of S slots is stored in S-1 (the slot a tile leaves takes "
        "the tile of iteration k+S-1 after a barrier)\n";
  if (needs.tmaBarrierBytes)
    res.sharedPlan += "transaction barriers (tensor copies): " + std::to_string(needs.tmaBarrierBytes) + " bytes at " +
                      std::to_string(barrierOffset) + "\n";
  res.sharedPlan += "choices: " + choice.choices.str() + "; lowered " +
                    (again ? std::string(choice.choices == start ? "twice (a warp-specialised loop's barriers look "
                                                                   "ahead at its scratch)"
                                                                 : "twice (the chosen code differs from the first)")
                           : std::string("once")) +
                    "\n";
  res.threadsPerBlock = needs.threads;
  if (res.sharedBytes > t.maxSharedBytes()) throw sharedMemoryError(f, plan, t);
  low->placeAreas(plan, barrierOffset, res.sharedBytes);
  res.module = std::move(m);
  res.record = low->record();
  res.tensorMaps = low->tensorMaps();
  res.checkedOps = low->checkedOps();
  res.profileScopes = low->profileScopes();
  return res;
}

}  // namespace tessera::codegen

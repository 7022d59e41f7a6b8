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
// atomics that several threads hold. The lowering runs twice: a measuring
// run records each op's scratch need, SharedPlan places everything, and
// the real run emits the offsets.
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

std::unordered_map<const ir::Value*, uint64_t> Lower::bufferStorageBytes() const {
  return bufferStorageBytes(fewerSlots_);
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

std::unordered_map<const void*, uint64_t> Lower::areaAlignments() const {
  std::unordered_map<const void*, uint64_t> r = alignReq_;
  for (auto& [buf, sg] : storage_)
    if (sg.align > 16) r[buf] = sg.align;
  return r;
}

void Lower::run(uint64_t smemBytes) {
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
  planDirectDots();
  planFewerSlots();
  planDotOperands();
  operandsPlanned_ = true;
  planElision();
  planPackedMath();
  planTma();
  planSpecialize();
  // Tensor maps: hidden parameters after the user's (by value).
  for (size_t i = 0; i < tensorMaps_.size(); ++i) params.push_back(b_.getPtrTy());
  unsigned threads = blockThreads();
  auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  llvm::Function* fn = t_.createKernel(m_, f_.name(), fty, threads);
  declareTensorMaps(fn, f_.numArgs());
  smem_ = t_.declareShared(m_, smemBytes);
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
  unsigned ws = t_.warpSize();
  lane_ = b_.CreateURem(tid_, i32(ws), "lane");
  warp_ = t_.warpUniform(b_, b_.CreateUDiv(tid_, i32(ws), "warp"));
  initTma();
  initTmaBarriers();
  splitWarps();
  emitBlock(f_.body());
  TS_ASSERT(b_.GetInsertBlock() == nullptr, "kernel body does not end in return");
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

GpuLoweringResult lowerToGpuLLVM(const ir::Function& f, GpuTargetInfo& t, const ir::LayoutAnalysis& la,
                                 const ir::AxisAnalysis& axis, llvm::LLVMContext& ctx, const llvm::DataLayout& dl) {
  const GpuOptions& o = t.options();
  unsigned threads = t.config().threadsPerBlock();
  TS_ASSERT(t.config().numWarps >= 1 && threads <= t.maxThreadsPerBlock(), "numWarps reached the lowering unchecked");
  // Measuring run: records every op's scratch need.
  std::map<const ir::Op*, uint64_t> req;
  std::vector<std::pair<const void*, ir::LoopArea>> loopReq;
  std::unordered_map<const ir::Value*, uint64_t> storageBytes;
  std::unordered_map<const void*, uint64_t> aligns;
  // Loop-invariant dot operands are kept in shared memory across their loop
  // where the target's registers are scarce (Lower::planDotOperands); when
  // that does not fit the shared memory, their fragments go to registers.
  bool invariantsInRegisters = false;
  // AMD matrix-core dots (not chained) swizzled where that shrinks the plan (see
  // Lower::dotPlan): measured padded, then swizzled.
  bool swizzle = false, candidates = false;
  // Register-staged pipelines in S-1 physical slots (Lower::planFewerSlots)
  // where that raises the waves the shared memory allows.
  bool fewerSlots = false, fewerCandidates = false;
  std::unordered_map<const ir::Value*, uint64_t> fewerStorage;
  // Large layout conversions in row chunks (Lower::conversionChunks) where
  // that, with the two choices above made again, raises those waves.
  bool chunk = false, chunkCandidates = false;
  // (AMD) Chained dots' A fragments read before B is staged over them
  // (Lower::setFragmentsFirst), where that raises those waves.
  bool fragmentsFirst = false;
  int fragmentsCandidates = 0;
  uint64_t tmaBarrierBytes = 0;
  auto measure = [&] {
    req.clear();
    loopReq.clear();
    llvm::Module scratchMod("measure", ctx);
    scratchMod.setDataLayout(dl);
    scratchMod.setTargetTriple(llvm::Triple(t.triple()));
    Lower low(f, t, la, axis, ctx, scratchMod, req, loopReq, nullptr, invariantsInRegisters);
    low.setSwizzleDots(swizzle);
    low.setFewerSlots(fewerSlots);
    low.setChunkConversions(chunk);
    low.setFragmentsFirst(fragmentsFirst);
    low.run(0);
    storageBytes = low.bufferStorageBytes();
    fewerStorage = low.bufferStorageBytes(true);
    fewerCandidates = low.fewerSlotsCandidates();
    aligns = low.areaAlignments();
    tmaBarrierBytes = low.tmaBarrierBytes();
    threads = low.blockThreads();
    candidates = low.swizzleCandidates();
    chunkCandidates = low.chunkCandidates();
    fragmentsCandidates = low.fragmentsFirstCandidates();
  };
  measure();
  auto wholeLoopAreas = [&] {
    for (auto& [key, a] : loopReq)
      if (a.wholeLoop) return true;
    return false;
  };
  if (wholeLoopAreas() && ir::SharedPlan(f, req, storageBytes, loopReq, aligns).totalBytes() > t.maxSharedBytes()) {
    invariantsInRegisters = true;
    measure();
  }
  // Kept only where the shared memory is what limits the occupancy and the
  // swizzle raises it: a swizzled read costs address registers, which buy
  // nothing when the waves are limited elsewhere (a 64x64 i8 tile under
  // its 16 KB epilogue conversion: the same bytes, 60 VGPRs against 48;
  // moe_grouped_gemm_swiglu on gfx942: 20736 -> 18432 bytes, 3 waves
  // either way). The second measuring run only where it can pay.
  const GpuArch* arch =
      (candidates || fewerCandidates || chunkCandidates) && t.tradesSharedForOccupancy() ? &t.row() : nullptr;
  auto ldsWaves = [&](uint64_t bytes) {
    return occupancy(*arch, 1, static_cast<int64_t>(bytes), static_cast<int>(threads)).value;
  };
  auto planBytes = [&] { return ir::SharedPlan(f, req, storageBytes, loopReq, aligns).totalBytes(); };
  // Fewer slots first: no measuring run (only the staged buffers' sizes
  // change). The swizzle is then tried against the smaller plan, and with
  // the fewer slots even where they alone gained nothing: the two together
  // may (a 128x128 tile's two padded slots 36864 bytes, swizzled 32768).
  auto chooseStaging = [&] {
    const uint64_t all = planBytes();
    const bool limited = ldsWaves(all) < ldsWaves(0);
    if (limited && fewerCandidates &&
        ldsWaves(ir::SharedPlan(f, req, fewerStorage, loopReq, aligns).totalBytes()) > ldsWaves(all)) {
      fewerSlots = true;
      storageBytes = fewerStorage;
    }
    const uint64_t base = ir::SharedPlan(f, req, storageBytes, loopReq, aligns).totalBytes();
    if (candidates && ldsWaves(base) < ldsWaves(0)) {
      auto keep = std::make_tuple(req, loopReq, storageBytes, aligns, tmaBarrierBytes, threads, fewerSlots);
      swizzle = true;
      fewerSlots = fewerSlots || fewerCandidates;
      measure();
      if (ldsWaves(planBytes()) <= ldsWaves(base)) {
        swizzle = false;
        std::tie(req, loopReq, storageBytes, aligns, tmaBarrierBytes, threads, fewerSlots) = std::move(keep);
      }
    }
  };
  // Chunked conversions last, as a whole second choice: a 128x128 f32
  // epilogue conversion (65536 bytes) hides what the staging choices would
  // gain until it shrinks (gfx1100 128x128x32: 65536 bytes whatever the
  // slots; chunked, two swizzled slots bring it to 32768).
  if (arch) {
    chooseStaging();
    const int64_t waves = ldsWaves(planBytes());
    if (chunkCandidates && waves < ldsWaves(0)) {
      auto keep = std::make_tuple(req, loopReq, storageBytes, aligns, tmaBarrierBytes, threads, fewerSlots, swizzle);
      chunk = true;
      swizzle = fewerSlots = false;
      measure();
      chooseStaging();
      if (ldsWaves(planBytes()) <= waves) {
        chunk = false;
        std::tie(req, loopReq, storageBytes, aligns, tmaBarrierBytes, threads, fewerSlots, swizzle) = std::move(keep);
      }
    }
  }
  // Loop-invariant dot operands in registers (Hoisted::inRegisters) also
  // where the LDS limits the waves and freeing their loop areas raises
  // them: the targets with 256 VGPRs per lane (gfx1100) keep them in LDS
  // otherwise. Whether the fragments' registers then cost the waves back,
  // or spill, only the code generator tells: compileGpu compiles again
  // without them unless the code's occupancy beats the waves the LDS
  // allowed before (GpuLoweringResult::ldsWavesWithoutInvariants,
  // GpuOptions::invariantsForLds). Flash attention's Q on gfx1100, 64x64
  // d64: 27648 -> 18432 bytes, 4 -> 6 waves, 143 -> 202 VGPRs.
  bool invariantsByTrial = false;
  int64_t ldsWavesWithoutInvariants = 0;
  if (!invariantsInRegisters && o.invariantsForLds && wholeLoopAreas())
    if (const GpuArch* model = t.tradesSharedForOccupancy() ? &t.row() : nullptr) {
      auto wavesOf = [&](uint64_t bytes) {
        return occupancy(*model, 1, static_cast<int64_t>(bytes), static_cast<int>(threads)).value;
      };
      // Tried only where the LDS allows fewer waves than 128 VGPRs would
      // (10 on gfx1100): a loop holding a dot's fragments and accumulators
      // rarely fits below that, so above it the registers set the waves
      // and the trial would only cost the second compile (the
      // flash_attention example on gfx1100: 12288 bytes and 10 waves
      // either way, twice the compile time). And only for one invariant
      // operand: the fragments of several stay live through the whole loop
      // together (the attention backward examples hold four, K, V and
      // their transposes: 6 -> 14 waves by the LDS, 6 by the VGPRs before
      // and no more after, for twice the compile time).
      int wholeLoop = 0;
      for (auto& [key, a] : loopReq) wholeLoop += a.wholeLoop ? 1 : 0;
      const int64_t waves = wavesOf(planBytes());
      if (wholeLoop == 1 && waves < wavesOf(0) && waves < occupancy(*model, 128, 0, static_cast<int>(threads)).value) {
        auto keep = std::make_tuple(req, loopReq, storageBytes, aligns, tmaBarrierBytes, threads);
        invariantsInRegisters = true;
        measure();
        if (fewerSlots) storageBytes = fewerStorage;
        const int64_t now = wavesOf(planBytes());
        invariantsByTrial = now > waves;
        ldsWavesWithoutInvariants = waves;
        if (!invariantsByTrial) {
          invariantsInRegisters = false;
          std::tie(req, loopReq, storageBytes, aligns, tmaBarrierBytes, threads) = std::move(keep);
        }
      }
    }
  // A chained dot's staged A (flash attention's P = softmax(S), whose
  // accumulator layout is not the MFMA / WMMA A fragments' as it is
  // mma.sync's) read into its fragments before its B (V) is staged over
  // it: the dot's area holds max(A, B) bytes instead of A + B, for the A
  // fragments of all K in registers at once instead of one k-step's
  // (Lower::emitTensorCoreDot). Tried, as the invariants above, only where
  // the LDS allows fewer waves than 128 VGPRs would; kept where the plan's
  // waves rise. The fragments of all K cost registers (a few, or a spill:
  // attention 128x64 d64 w4 on gfx1100) and loop instructions, or save
  // some, so compileGpu weighs the code (GpuOptions::fragmentsForLds).
  // Attention 64x64 d64 w4: gfx942 17408 -> 8704 bytes, 3 -> 4 waves;
  // gfx1100 18432 -> 16384, 6 -> 7. Only for one
  // such dot, where the waves rarely fall back to the registers': the
  // attention backward examples have three, and on gfx1100 the causal one
  // keeps 6 waves with them (230 VGPRs) and a loop 18 instructions longer,
  // which compileGpu's tie rule would keep; the other would gain one
  // (6 -> 7), given up for that.
  bool fragmentsByTrial = false;
  int64_t ldsWavesWithoutFragments = 0;
  if (o.fragmentsForLds && fragmentsCandidates == 1)
    if (const GpuArch* model = t.tradesSharedForOccupancy() ? &t.row() : nullptr) {
      auto wavesOf = [&](uint64_t bytes) {
        return occupancy(*model, 1, static_cast<int64_t>(bytes), static_cast<int>(threads)).value;
      };
      const int64_t waves = wavesOf(planBytes());
      if (waves < occupancy(*model, 128, 0, static_cast<int>(threads)).value) {
        auto keep = std::make_tuple(req, loopReq, storageBytes, aligns, tmaBarrierBytes, threads);
        fragmentsFirst = true;
        measure();
        if (fewerSlots) storageBytes = fewerStorage;
        fragmentsByTrial = wavesOf(planBytes()) > waves;
        // With the conversions in row chunks too, where the epilogue's
        // conversion of the f32 output is then what sizes the plan (attention
        // 128x64 d64 w8 on gfx1100, Q in registers: 32768 bytes either way,
        // 18432 with both; 7 -> 8 waves, 212 -> 188 VGPRs).
        if (!fragmentsByTrial && !chunk && chunkCandidates) {
          chunk = true;
          measure();
          if (fewerSlots) storageBytes = fewerStorage;
          fragmentsByTrial = wavesOf(planBytes()) > waves;
          chunk = fragmentsByTrial;
        }
        ldsWavesWithoutFragments = waves;
        if (!fragmentsByTrial) {
          fragmentsFirst = false;
          std::tie(req, loopReq, storageBytes, aligns, tmaBarrierBytes, threads) = std::move(keep);
        }
      }
    }
  ir::SharedPlan plan(f, req, storageBytes, loopReq, aligns);
  GpuLoweringResult res;
  res.invariantsForLds = invariantsByTrial;
  res.ldsWavesWithoutInvariants = ldsWavesWithoutInvariants;
  res.fragmentsForLds = fragmentsByTrial;
  res.ldsWavesWithoutFragments = ldsWavesWithoutFragments;
  // Transaction barriers (tensor copies) after the plan's areas, for the
  // whole kernel.
  const uint64_t barrierOffset = (plan.totalBytes() + 15) & ~uint64_t{15};
  res.sharedBytes = tmaBarrierBytes ? barrierOffset + tmaBarrierBytes : plan.totalBytes();
  res.sharedPlan = plan.describe();
  if (fewerSlots)
    res.sharedPlan +=
        "register-staged pipelines: each staged buffer of S slots is stored in S-1 (the slot a tile leaves takes "
        "the tile of iteration k+S-1 after a barrier)\n";
  if (tmaBarrierBytes)
    res.sharedPlan += "transaction barriers (tensor copies): " + std::to_string(tmaBarrierBytes) + " bytes at " +
                      std::to_string(barrierOffset) + "\n";
  res.threadsPerBlock = threads;
  if (res.sharedBytes > t.maxSharedBytes()) throw sharedMemoryError(f, plan, t);
  auto m = std::make_unique<llvm::Module>(f.name(), ctx);
  m->setDataLayout(dl);
  m->setTargetTriple(llvm::Triple(t.triple()));
  Lower low(f, t, la, axis, ctx, *m, req, loopReq, &plan, invariantsInRegisters);
  low.setSwizzleDots(swizzle);
  low.setFewerSlots(fewerSlots);
  low.setChunkConversions(chunk);
  low.setFragmentsFirst(fragmentsFirst);
  low.setTmaBarrierOffset(barrierOffset);
  low.run(res.sharedBytes);
  res.module = std::move(m);
  res.record = low.record();
  res.tensorMaps = low.tensorMaps();
  return res;
}

}  // namespace tessera::codegen

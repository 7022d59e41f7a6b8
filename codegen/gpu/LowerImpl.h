// The GPU lowering's private class: Lower (one kernel's tile IR -> LLVM IR),
// its value types and small helpers. Its methods are defined by concern in
// GpuLowering.cpp (entry) and the Lower*.cpp files of this directory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <llvm/IR/DIBuilder.h>
#include <llvm/IR/IRBuilder.h>

#include "codegen/gpu/GpuDot.h"
#include "codegen/gpu/GpuLowering.h"
#include "codegen/gpu/IdentityFolder.h"
#include "codegen/gpu/LowerTypes.h"
#include "codegen/gpu/SharedNeeds.h"
#include "codegen/llvm/Elementwise.h"
#include "tessera/ir/analysis/AxisInfo.h"
#include "tessera/ir/analysis/PointerOrigin.h"
#include "tessera/ir/analysis/ProbeScopes.h"
#include "tessera/ir/analysis/TiledAccess.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::gpu_lower {

using ir::OpCode;
/// The alloc result a buffer value is (a view of).
const ir::Value* rootBuffer(const ir::Value* buf);
/// "A operand of dot at file:line" (shared-plan and report texts).
std::string operandName(const ir::Op& dot, unsigned i);

class Lower {
 public:
  Lower(const ir::Function& f, GpuTargetInfo& t, const ir::LayoutAnalysis& la, const ir::AxisAnalysis& ax,
        llvm::LLVMContext& ctx, llvm::Module& m, const SharedChoices& choices)
      : f_(f),
        t_(t),
        la_(la),
        ax_(ax),
        cfg_(t.config()),
        o_(t.options()),
        ctx_(ctx),
        m_(m),
        invariantsInRegisters_(choices.invariantsInRegisters || t.maxRegistersPerThread() >= 512),
        fragmentsFirst_(choices.fragmentsFirst),
        chunkConversions_(choices.chunk),
        fewerSlots_(choices.fewerSlots),
        swizzleDots_(choices.swizzle),
        b_(ctx, IdentityFolder(), llvm::IRBuilderCallbackInserter([this](llvm::Instruction* i) { tag(i); })),
        opKind_(ctx.getMDKindID("tessera.op")) {
    // Approximate math lets the backend contract a * b + c into an FMA,
    // as Triton does; accurate math rounds each operation.
    if (o_.precision == Precision::Approximate) {
      llvm::FastMathFlags fmf;
      fmf.setAllowContract();
      b_.setFastMathFlags(fmf);
    }
  }

  /// The planning phase: where each dot's operands come from, elided and
  /// packed values, tensor copies, warp roles. Emits nothing.
  void plan();
  /// plan(), then the kernel's code, its shared areas addressed through
  /// placeholders (placeAreas resolves them).
  void run();
  /// What this lowering asked of shared memory (after run()).
  SharedNeeds recorded() const;
  /// Its scratch requests, in the terms needs() re-evaluates.
  const ScratchRequests& requests() const { return requests_; }
  /// The model: what a lowering under this Lower's choices would ask of
  /// shared memory, from its planning state (after plan()) and the scratch
  /// requests `r` of a lowering under any choices (SharedNeeds.h).
  SharedNeeds needs(const ScratchRequests& r);
  /// Replaces the placeholders by their offsets in `plan`, the transaction
  /// barriers' by `barrierOffset`, and declares the shared array of
  /// `sharedBytes` (after run()).
  void placeAreas(const ir::SharedPlan& plan, uint64_t barrierOffset, uint64_t sharedBytes);
  /// Bytes of the shared buffers stored otherwise than their type says
  /// (padded staging layouts; S-1 slots where `fewerSlots`).
  std::unordered_map<const ir::Value*, uint64_t> bufferStorageBytes(bool fewerSlots) const;
  /// The needs of an earlier lowering under the same choices, for the one
  /// decision that looks ahead of the code emitted so far
  /// (onlyChannelReads); without them it decides conservatively.
  void setPriorNeeds(const SharedNeeds* n) { prior_ = n; }
  /// Whether the kernel has a warp-specialised loop (after plan()).
  bool warpSpecialized() const { return specialize_ != nullptr; }
  /// The global accesses and layout conversions emitted (ir/analysis/LayoutStats.h).
  const ir::LoweringRecord& record() const { return record_; }
  /// Tensor copies (LowerTma.cpp), known after run(): the kernel's tensor
  /// maps, and the bytes of its transaction barriers, which the caller
  /// places after the plan's areas (setTmaBarrierOffset before run()).
  const std::vector<TensorMapSpec>& tensorMaps() const { return tensorMaps_; }
  uint64_t tmaBarrierBytes() const {
    return cancels_ ? cancelOffset() + 32 : 8 * (accBarrierFirst() + uint64_t{accBarriers_} + (accColumns_ ? 1 : 0));
  }
  /// Threads per block: the layouts' warps, plus a warp-specialised
  /// kernel's producer warps.
  unsigned blockThreads() const;

 private:
  // ---- types -------------------------------------------------------------
  llvm::Type* scalarTy(DType d) { return scalarType(b_, d); }
  unsigned asOf(ir::MemSpace s) {
    switch (s) {
      case ir::MemSpace::Global: return t_.globalAS();
      case ir::MemSpace::Shared: return t_.sharedAS();
      case ir::MemSpace::Local: return t_.localAS();
    }
    TS_UNREACHABLE("space");
  }
  /// Register type of one element of `t` (scalar or pointer).
  llvm::Type* elemTy(const ir::Type& t) {
    if (t.isPointerLike()) return llvm::PointerType::get(ctx_, asOf(t.space()));
    return scalarTy(t.dtype());
  }
  /// Memory type of one element (i1 is a byte in memory).
  llvm::Type* memTy(const ir::Type& t) {
    if (t.isPointerLike()) return elemTy(t);
    return t.dtype() == DType::I1 ? b_.getInt8Ty() : scalarTy(t.dtype());
  }
  llvm::Type* memTyOf(DType d) { return d == DType::I1 ? b_.getInt8Ty() : scalarTy(d); }
  uint64_t bytesOf(llvm::Type* t) { return m_.getDataLayout().getTypeAllocSize(t); }
  llvm::Value* toMem(llvm::Value* v) { return v->getType()->isIntegerTy(1) ? b_.CreateZExt(v, b_.getInt8Ty()) : v; }
  llvm::Value* fromMem(llvm::Value* v, const ir::Type& t) {
    if (!t.isPointerLike() && t.dtype() == DType::I1) return b_.CreateICmpNE(v, b_.getInt8(0));
    return v;
  }
  llvm::Value* i32(int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); }

  // ---- thread geometry -----------------------------------------------------
  llvm::Value* pos(const ir::BlockedLayout& l, int p);
  llvm::Value* lanePos(const ir::BlockedLayout& l, int p);
  llvm::Value* warpPos(const ir::BlockedLayout& l, int p);
  Slots bases(const ir::Layout& l, const ir::SlotTable& t);
  Slots indexOf(const Slots& base, const ir::SlotTable& t, size_t slot);
  llvm::Value* linear(const Slots& idx, const std::vector<int64_t>& shape);
  /// True in exactly one of the threads holding each element (nullptr when
  /// no element is held twice).
  llvm::Value* ownerPred(const ir::Layout& l, const ir::SlotTable& t);

  // ---- provenance ---------------------------------------------------------------
  /// Attaches `!tessera.op !{!"<op> @ <file>:<line>"}` to every memory
  /// access and every barrier / warp collective the lowering emits, so that
  /// a race or an out-of-bounds access found by the SIMT emulator (which
  /// reads this metadata) names the tile op and the user's source line, not
  /// an LLVM instruction. Arithmetic stays untagged: it cannot misbehave.
  ///
  /// The optimiser drops metadata it does not know when it rewrites an
  /// access (InstCombine scalarising a vector load whose lanes are only
  /// extracted creates fresh scalar loads), but every pass carries the
  /// DebugLoc of what it replaces over. So each instruction also gets a
  /// DILocation(line of the op, column = id of its tag text) in the
  /// kernel's DISubprogram, and the module keeps the id -> text table in
  /// `!tessera.ops` (see finishProvenance), which the emulator consults for
  /// an access that lost its tag. The compile unit is NoDebug: locations
  /// are tracked but no backend emits debug sections for them.
  void tag(llvm::Instruction* i);
  void setCurrentOp(const ir::Op& op);
  /// Tags what follows as `op` (`what` names a phase of it, e.g. the
  /// operand staging of a dot, reported apart).
  void setTag(const ir::Op& op, const std::string& what);
  /// Compile unit and subprogram of the kernel `fn` (see tag()).
  void startProvenance(llvm::Function* fn);
  void finishProvenance();

  // ---- shared memory & ordering -------------------------------------------------
  /// Where an area lies is known only after the lowering (SharedNeeds.h):
  /// the code addresses it through a placeholder global, `within` bytes
  /// into the area, which placeAreas replaces by the constant address.
  enum class AreaKind { Scratch, LoopArea, Buffer, Barriers };
  llvm::Value* areaAt(AreaKind kind, const void* key, uint64_t within = 0);
  /// The current op's scratch area of `bytes`, at a multiple of `align` (a
  /// power of two from 16; the plan places it so): a request the same
  /// under every SharedChoices.
  llvm::Value* scratch(uint64_t bytes, uint64_t align = 16) {
    return scratchFor({ScratchRequest::Kind::Fixed, bytes, bytes, align});
  }
  /// The same for a request whose size depends on the choices.
  llvm::Value* scratchFor(const ScratchRequest& r);
  void requireAlign(const void* key, uint64_t align) {
    if (align <= 16) return;
    uint64_t& a = alignReq_[key];
    a = std::max(a, align);
  }
  /// The area of `key` live across `loop` (SharedPlan::LoopArea), its
  /// start rounded up to a multiple of `align` (a power of two from 16; the
  /// area is made that much larger).
  llvm::Value* loopArea(const void* key, const ir::Op* loop, uint64_t bytes, const std::string& what,
                        bool wholeLoop = true, uint64_t align = 16);
  /// `off` rounded up to a multiple of `align` (a power of two). The
  /// shared array is aligned to the largest alignment the lowering asks
  /// for (GpuTargetInfo::declareShared), so an offset's alignment is its
  /// address's.
  static uint64_t alignUp(uint64_t off, uint64_t align) { return (off + align - 1) & ~(align - 1); }

  /// A cluster of more than one block (GpuOptions::cluster).
  bool clustered() const { return t_.options().clusterBlocks() > 1; }
  void emitClusterBarrier(const ir::Op& op);
  void barrier(bool sharedOnly = false) {
    // The producer touches shared memory only through tensor copies and
    // mbarriers, which order themselves: it needs no barrier, and must not
    // wait at the consumers' one.
    if (!inProducer_) {
      if (consumersOnly_)
        t_.barrierCount(b_, 1, static_cast<unsigned>(cfg_.numWarps) * t_.warpSize());
      else
        t_.barrier(b_, sharedOnly);
    }
    smemDirty_ = globalDirty_ = false;
  }
  /// True for a barrier of the pipeline schedule (`stage` attribute) in a
  /// `for {pipelined}` body that writes no global memory: it orders the
  /// slots in shared memory only, and the loads of the next stage, which
  /// nothing in the loop writes, may stay in flight across it.
  bool pipelineSlotBarrier(const ir::Op& op) const;
  /// True for a pipeline barrier that orders nothing with register-staged
  /// copies (see the definition): not emitted.
  bool redundantSlotBarrier(const ir::Op& op) const;
  /// Whether `blk` (nested regions included) may write global memory: a
  /// store, an atomic or a fence.
  static bool writesGlobal(const ir::Block& blk);
  void beforeShared() {
    if (smemDirty_) barrier();
    smemDirty_ = true;
  }
  void beforeGlobal(bool writes) {
    if (globalDirty_) barrier();
    if (writes) globalDirty_ = true;
  }
  void unknownOrder() { smemDirty_ = globalDirty_ = true; }
  /// if (cond) { body } with a fresh block; returns after the join.
  void guarded(llvm::Value* cond, const std::function<void()>& body) {
    if (!cond) return body();
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* then = llvm::BasicBlock::Create(ctx_, "guard", fn);
    auto* join = llvm::BasicBlock::Create(ctx_, "guard.end", fn);
    b_.CreateCondBr(cond, then, join);
    b_.SetInsertPoint(then);
    body();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
  }

  // ---- values ----------------------------------------------------------------
  llvm::Value* scalar(const ir::Value* v) {
    auto it = scalars_.find(v);
    TS_ASSERT(it != scalars_.end(), "gpu lowering: scalar used before definition");
    return it->second;
  }
  const TileV& tile(const ir::Value* v) {
    auto it = tiles_.find(v);
    TS_ASSERT(it != tiles_.end(), "gpu lowering: tile used before definition");
    return it->second;
  }
  /// `v`'s slots in layout `l`: its own, re-emitted (free ops) or converted.
  Slots tileIn(const ir::Value* v, const ir::Layout& l);
  Slots remat(const ir::Value* v, const ir::Layout& l);
  /// Converts through shared memory: src (layout sl, shape sshape) is
  /// written row-major, a barrier, then each slot of dl (shape dshape) reads
  /// element srcLinearOfDst(its index, its slot number). `rowMajorRead`:
  /// that map is the row-major index of dshape (== sshape), so reads may be
  /// vectorised too.
  Slots convertVia(const Slots& src, const ir::Layout& sl, const std::vector<int64_t>& sshape, const ir::Type& elem,
                   const ir::Layout& dl, const std::vector<int64_t>& dshape,
                   const std::function<llvm::Value*(const Slots&, size_t)>& srcLinearOfDst, bool rowMajorRead = false);
  /// The widest v <= maxV (a power of two) such that every slot of `t` whose
  /// index along `dim` (default: the last) is a multiple of v starts a run of
  /// v slots of consecutive indices along `dim`, in every thread (v divides
  /// the thread's base, pos * spt, and the extent). Where `dim` is the
  /// contiguous dim of a buffer, each run is one v-aligned vector access.
  int64_t slotRunWidth(const ir::Layout& l, const ir::SlotTable& t, int64_t maxV, int dim = -1);
  /// Stores vals[run[0]], vals[run[1]], ... at p, p+1, ...: one store, a
  /// vector one (aligned to its size) for a run longer than 1.
  void storeRun(const Slots& vals, const std::vector<size_t>& run, llvm::Type* mt, llvm::Value* p) {
    if (run.size() == 1) {
      b_.CreateStore(toMem(vals[run[0]]), p);
      return;
    }
    llvm::Type* vt = llvm::FixedVectorType::get(mt, static_cast<unsigned>(run.size()));
    llvm::Value* vec = llvm::PoisonValue::get(vt);
    for (size_t k = 0; k < run.size(); ++k) vec = b_.CreateInsertElement(vec, toMem(vals[run[k]]), k);
    b_.CreateAlignedStore(vec, p, llvm::Align(run.size() * bytesOf(mt)));
  }
  /// The slots of the run of width v starting at slot i along `dim`.
  std::vector<size_t> slotRun(const ir::SlotTable& t, size_t i, int64_t v, int dim);
  Slots reindex(const Slots& src, const ir::SlotTable& ts, const ir::SlotTable& td,
                const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& proj);

  // ---- ops ----------------------------------------------------------------
  void emitBlock(const ir::Block& b) {
    proxyPending_ = true;  // a region may be entered from anywhere (a back edge)
    for (auto& op : b.ops()) emitOp(*op);
    proxyPending_ = true;
  }
  void emitOp(const ir::Op& op);
  llvm::Value* compute(const ir::Op& op, Slots v);
  /// True when a commutative binary op's two tile operands are emitted
  /// swapped: they are ordered by a structural key of their definitions
  /// (opcode, source shape of a broadcast / expand_dims), so the code does
  /// not depend on the order the program wrote them in.
  static bool swapOperands(const ir::Op& op);
  llvm::Value* floatOp(const ir::Op& op, Slots& v);
  llvm::Value* deviceLibraryCall(const ir::Op& op, const std::string& fn, Slots& v);
  llvm::Value* castValue(llvm::Value* x, DType from, DType to);
  llvm::Value* constantOf(const ir::Op& op, llvm::Type* t);
  void emitElementwiseLike(const ir::Op& op);
  void emitLoad(const ir::Op& op);
  Slots globalLoad(const ir::Op& op, const ir::Layout& l, const ir::Type& ptrT, const Slots& ptrs, const Slots* mask,
                   const Slots* other);
  /// Where the target has buffer accesses (GpuTargetInfo::bufferLoad) and
  /// the pointer tile `ptr` has a uniform split whose varying part fits a
  /// buffer offset: the uniform base every slot's offset is taken from
  /// (bufferOffset); else nullptr.
  llvm::Value* bufferBase(const ir::Value* ptr);
  /// The i32 byte offset of slot pointer `p` from bufferBase's `base`.
  llvm::Value* bufferOffset(llvm::Value* base, llvm::Value* p);
  void emitStore(const ir::Op& op);
  void emitAtomic(const ir::Op& op);
  void emitFence(const ir::Op& op);
  /// `ordered`: wait for a barrier first if shared memory is dirty (a
  /// program-order write). Async writes skip it: IR.h makes the program
  /// order them (see flushStaged).
  void writeBuffer(const ir::Value* buf, const Slots& vals, const ir::Layout& l, bool ordered = true);
  /// The vector width writeBuffer uses for `buf`'s slots in layout `l`, and
  /// in `dim` the tile dim along which the run's elements are consecutive
  /// in the buffer.
  int64_t bufferRunWidth(const ir::Value* buf, const ir::Layout& l, const ir::SlotTable& t, int& dim);
  void emitCopy(const ir::Op& op);
  /// The layout an async copy or a tile store (ops without a register
  /// result, free to pick one) runs in, re-deriving its pointers and mask
  /// there (emitCopy, emitStore); nullopt for a program-order copy or a
  /// scalar store.
  std::optional<ir::Layout> freeAccessLayout(const ir::Op& op);
  /// A register-staged copy into a slot stored transposed (AMDGPU's B
  /// operand, N x K): a layout whose threads hold a block of kv rows (K) by
  /// nv columns (N), so the global loads move nv elements and the LDS stores
  /// kv consecutive K elements (the default layout's runs along N would be
  /// stored one 16-bit element at a time); nullopt where that is no better.
  std::optional<ir::Layout> transposedCopyLayout(const ir::Op& op);
  void planElision();
  /// A block-scaled dot's B given as transpose(x) of its [N, K] codes and
  /// staged N x K (TensorCoreDotPlan::bTransposed): x is staged as it is
  /// and the transpose is never emitted (stagedTransposes_), instead of a
  /// conversion through shared memory that the staging would undo.
  void planStagedTransposes();
  /// The f32 adds, subtracts, multiplies and fmas emitted two elements at a
  /// time where the target has packed f32 math (packedOps_).
  void planPackedMath();
  void planDirectDots();
  /// The shared buffers of register-staged pipelines that can keep S-1
  /// physical slots where the pipeline pass gave them S (fewerSlotCands_):
  /// see the comment at its definition (LowerPlan.cpp).
  void planFewerSlots();
  /// The physical slot of a buffer_slot of a fewer-slot buffer.
  llvm::Value* physicalSlot(const ir::Op& bufferSlot);
  void planDotOperands();
  int globalCopyDim(const ir::Op& op, unsigned i, const std::unordered_map<const ir::Value*, int>& uses);
  /// The bytes of one chunk of a dot operand copied from global memory
  /// (GpuTargetInfo::dotCopyChunkBytes: cp.async's 16 on NVIDIA; on AMD the
  /// staging rows' alignment, 8 for MFMA, 16 for WMMA).
  int64_t globalChunkBytes(const ir::Op& dot) const;
  /// Stages the loop-invariant dot operands of `loop` (planDotOperands)
  /// into their loop areas, before the loop.
  void stageHoistedOperands(const ir::Op& loop);
  /// The staging plan of a tensor-core dot (its result has an #mma layout).
  TensorCoreDotPlan dotPlan(const ir::Op& dot);
  /// Element index of `idx` in buffer (or slot view) `buf` of `shape`:
  /// row-major, with the last two dims in the swizzled tensor-core layout
  /// when the buffer's storage is (see planDirectDots).
  llvm::Value* bufIndex(const ir::Value* buf, const Slots& idx, const std::vector<int64_t>& shape);
  /// True when `v` in layout `l` can be re-derived from free ops, scalars
  /// and values already in `l` by at most `budget` elementwise ops (index
  /// and mask math), so tileIn re-emits it instead of converting it.
  bool cheapToRecompute(const ir::Value* v, const ir::Layout& l, int& budget);
  Slots recompute(const ir::Value* v, const ir::Layout& l,
                  std::map<std::pair<const ir::Value*, std::string>, Slots>& memo, int& budget);
  bool emitHardwareCopy(const ir::Op& op, const ir::Layout& l, const Slots& ptrs, const Slots* mask);
  /// Elements per access of a global load / copy / store through `ptrT` in
  /// layout `l`: the proven vector width, bounded by the thread's run along
  /// the last dim and by the mask's constancy.
  int64_t accessWidth(const ir::Op& op, const ir::Layout& l, const ir::Type& ptrT, const ir::SlotTable& t,
                      const ir::Value* mask);
  /// `endOfBody`: the flush before a loop's back edge (case (b)), the only
  /// place the copies into fewer-slot buffers are stored (planFewerSlots).
  void flushStaged(int64_t beforeGroup, bool endOfBody = false);
  void emitReduce(const ir::Op& op);
  void emitScan(const ir::Op& op);
  void emitGather(const ir::Op& op);
  void emitJoin(const ir::Op& op);
  void emitSplit(const ir::Op& op);
  /// combine(a, b) of a scan: its region evaluated on scalars.
  llvm::Value* combineOf(const ir::Op& scan, llvm::Value* a, llvm::Value* b);
  /// uniformGroups: GpuTargetInfo::shuffleXorOfUniformGroups's promise holds.
  llvm::Value* shuffleXor(llvm::Value* v, unsigned mask, bool uniformGroups = false);
  void emitDot(const ir::Op& op);
  void emitTensorCoreDot(const ir::Op& op, const ir::Layout& l);
  void emitDotWait(const ir::Op& op);
  void stageOperand(const ir::Value* v, llvm::Value* base, const DotStaging& st, bool transposed);
  void emitFor(const ir::Op& op);
  void emitIf(const ir::Op& op);
  void emitWhile(const ir::Op& op);
  std::vector<std::pair<const ir::Value*, Slots>> emitLoopBody(const ir::Op& loop, const ir::Block& body);
  void bindResult(const ir::Value* res, Slots merged);

  const ir::Function& f_;
  GpuTargetInfo& t_;
  const ir::LayoutAnalysis& la_;
  const ir::AxisAnalysis& ax_;
  const GpuConfig& cfg_;  // warps, warp size, target: the compile's one configuration
  const GpuOptions& o_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  bool invariantsInRegisters_;  // see Hoisted::inRegisters
  bool fragmentsFirst_;         // see SharedChoices
  bool chunkConversions_;
  bool fewerSlots_;
  bool swizzleDots_;
  // What the lowering asks of shared memory (SharedNeeds.h): the largest
  // scratch request per op, the loop areas, alignments beyond 16 bytes,
  // every request as made, and the placeholders of the areas.
  std::map<const ir::Op*, uint64_t> req_;
  std::unordered_map<const void*, uint64_t> alignReq_;  // see requireAlign
  std::vector<std::pair<const void*, ir::LoopArea>> loopReq_;
  ScratchRequests requests_;
  const SharedNeeds* prior_ = nullptr;
  struct Placeholder {
    AreaKind kind;
    const void* key;
    uint64_t within;
    llvm::GlobalVariable* global;
  };
  std::vector<Placeholder> placeholders_;
  std::map<std::tuple<AreaKind, const void*, uint64_t>, llvm::GlobalVariable*> placeholderOf_;

 private:
  bool swizzleCandidates_ = false;
  int fragmentsFirstCandidates_ = 0;  // dots whose DotArea says so, as lowered
  DotArea dotArea(const ir::Op& op, const TensorCoreDotPlan& p);
  /// A block-scaled dot's scale tiles stored at `base` where the target
  /// wants them (TensorCoreDotPlan::scaled, GpuTargetInfo::scaleStagingOffset).
  void stageScales(const ir::Op& op, const TensorCoreDotPlan& p, llvm::Value* base);
  /// Whether a block-scaled dot's scales are staged in an area of its loop
  /// (in flight, the target's atoms), and that area.
  bool scalesInLoopArea(const ir::Op& op, const TensorCoreDotPlan& p) const;
  llvm::Value* scaleSetsOf(const ir::Op& op, const TensorCoreDotPlan& p);
  /// The needs read from the planning phase alone (buffer storage, the
  /// alignments beyond `aligns`, barriers, threads, the candidates), the
  /// same for a lowering's record and for the model.
  void commonNeeds(SharedNeeds& n, std::unordered_map<const void*, uint64_t> aligns, const ScratchRequests& r) const;
  /// Into how many chunks of whole rows a conversion of `shape` (`bytes`
  /// in all) from `sl` to `dl` would go where asked (SharedChoices::chunk):
  /// where every slot's chunk is the same in every thread of both layouts,
  /// the fewest (a power of two) that bring a chunk to
  /// kConversionChunkBytes, else 1.
  int64_t conversionChunks(const ir::Layout& sl, const ir::SlotTable& ts, const ir::Layout& dl, const ir::SlotTable& td,
                           uint64_t bytes);
  std::unordered_map<const ir::Value*, int64_t> fewerSlotCands_;  // root buffer -> its S
  bool fewer(const ir::Value* root) const { return fewerSlots_ && fewerSlotCands_.count(root); }
  // Every instruction goes through tag(): see there. IdentityFolder: see there.
  llvm::IRBuilder<IdentityFolder, llvm::IRBuilderCallbackInserter> b_;
  unsigned opKind_;
  llvm::MDNode* opTag_ = nullptr;  // !{!"<op> @ <file>:<line>"} of curOp_
  std::unique_ptr<llvm::DIBuilder> di_;
  llvm::DISubprogram* sp_ = nullptr;
  std::unordered_map<std::string, unsigned> tagIds_;  // tag text -> DILocation column (0: none)
  std::vector<llvm::MDNode*> tagTable_;               // !{i32 line, i32 column, !"text"}, in column order
  llvm::GlobalVariable* smem_ = nullptr;
  llvm::Value* tid_ = nullptr;
  llvm::Value* lane_ = nullptr;
  llvm::Value* warp_ = nullptr;
  const ir::Op* curOp_ = nullptr;
  bool smemDirty_ = false, globalDirty_ = false;
  std::unordered_map<const ir::Value*, llvm::Value*> scalars_;
  std::unordered_map<const ir::Value*, TileV> tiles_;
  // Tiles never emitted where they are defined: every consumer re-derives
  // them (see planElision).
  std::unordered_set<const ir::Value*> elided_;
  // Dots whose B is staged from the operand of its transpose (see
  // planStagedTransposes), that operand.
  std::unordered_map<const ir::Op*, const ir::Value*> stagedTransposes_;
  // Shared buffers (alloc results) stored in a tensor-core staging layout,
  // and the dot operands read straight from them (see planDirectDots).
  std::unordered_map<const ir::Value*, Storage> storage_;
  std::set<std::pair<const ir::Op*, unsigned>> directOperands_;
  // Set once planDirectDots and planDotOperands have run: dotPlan may then
  // choose wgmma, which depends on where the operands come from.
  bool operandsPlanned_ = false;
  // Some buffer is stored for wgmma (Storage::align > 16): its slots are
  // read through the async proxy (see the Barrier op).
  bool asyncProxySlots_ = false;
  // Shared memory may have been written since the last barrier, as far as
  // program order tells (conservatively true at region boundaries): that
  // barrier needs the async-proxy fence first.
  bool proxyPending_ = true;
  // Some dot was left in flight (TensorCoreDotPlan::inFlight): a
  // dot_wait is the instruction's wait, else nothing.
  bool dotsInFlight_ = false;
  // Tensor-core dot operands (dot, operand index) planned by
  // planDotOperands: A operands already in the fragment registers' layout
  // (no staging), and operands defined outside a loop that holds the dot,
  // staged once before the outermost such loop (loop -> its operands).
  std::set<std::pair<const ir::Op*, unsigned>> registerOperands_;
  // Tensor-core dot operands that are global loads read by the dot only,
  // copied global->shared by the hardware async copy (cp.async) straight
  // into the dot's staging buffer instead of through registers
  // (planDotOperands): (dot, operand) -> the dim along which the pointer
  // tile is contiguous. Their loads are in elidedLoads_.
  std::map<std::pair<const ir::Op*, unsigned>, int> globalOperands_;
  /// Issues the cp.async chunks of global operand i of `dot` into the
  /// staging buffer `base` (layout `st`, B transposed when `transposed`).
  void copyOperand(const ir::Op& dot, unsigned i, llvm::Value* base, const DotStaging& st, bool transposed);
  std::vector<Hoisted> hoisted_;  // in program order (the staging order)
  const Hoisted* hoistedOf(const ir::Op* dot, unsigned i) const {
    for (const Hoisted& h : hoisted_)
      if (h.dot == dot && h.operand == i) return &h;
    return nullptr;
  }
  Hoisted* hoistedOf(const ir::Op* dot, unsigned i) {
    for (Hoisted& h : hoisted_)
      if (h.dot == dot && h.operand == i) return &h;
    return nullptr;
  }
  /// The loop-area key of a hoisted operand: the address of its operand
  /// slot in the dot, unique and stable while the IR is.
  static const void* hoistKey(const ir::Op* dot, unsigned i) { return &dot->operands()[i]; }
  std::unordered_set<const ir::Value*> elidedLoads_;
  // Elementwise f32 ops lowered on <2 x float> (planPackedMath).
  std::unordered_set<const ir::Op*> packedOps_;
  std::vector<std::vector<std::pair<const ir::Value*, Slots>>> yields_;  // per open region
  // AsyncCopyImpl::RegisterStaged: copies whose global loads are issued and
  // whose shared stores are pending, with their group (the number of
  // async_commits emitted before them); `committed_` counts the commits.
  std::vector<StagedCopy> staged_;
  int64_t committed_ = 0;
  // ---- tensor copies (LowerTma.cpp) -----------------------------------------
  std::map<const ir::Op*, TmaCopy> tma_;
  // Stores of a tile box by one tensor store from a shared scratch area.
  std::map<const ir::Op*, TmaCopy> tmaStores_;
  std::optional<TmaCopy> planTmaStore(const ir::Op& store);
  void emitTmaStore(const ir::Op& store, const TmaCopy& c);
  // Dot operands copied from global memory by TMA (see planTma).
  std::map<std::pair<const ir::Op*, unsigned>, TmaCopy> tmaOperands_;
  llvm::Value* tmaOperandPhase_ = nullptr;
  std::optional<TmaCopy> planTmaBoxes(const ir::TiledAccess& acc, const DotStaging* st, bool transposed);
  void issueTmaBoxes(const TmaCopy& c, llvm::Type* elemTy, llvm::Value* base, llvm::Value* bar);
  // Copies of the open group (and of the current dot's operands) waiting
  // to be issued together (see commitFollows).
  std::vector<PendingTma> tmaPending_, tmaOperandPending_;
  bool commitFollows(const ir::Op& copy);
  /// Issues the pending copies and one arrival on `bar` from warp 0's
  /// elected lane.
  void flushTma(llvm::Value* bar);
  llvm::Value* tmaOperandBarrier();
  bool usesMbarriers() const;
  /// Issues global operand i of `dot` by TMA into `base`, if planned so.
  bool emitTmaOperand(const ir::Op& dot, unsigned i, llvm::Value* base);
  void waitTmaOperands();
  std::vector<TensorMapSpec> tensorMaps_;
  std::vector<llvm::Value*> tensorMapArgs_;
  unsigned tmaBarriers_ = 0;
  // Every async copy is a tensor copy: no cp.async groups to commit or wait.
  bool onlyTensorCopies_ = false;
  llvm::Value* tmaCommitted_ = nullptr;  // per-thread counters (allocas)
  llvm::Value* tmaWaited_ = nullptr;
  std::optional<TmaCopy> planTmaCopy(const ir::Op& copy);
  void planTma();
  void declareTensorMaps(llvm::Function* fn, unsigned firstParam);
  llvm::Value* tmaBarrier(llvm::Value* group);
  llvm::Value* issuingWarp();
  void initTma();
  void initTmaBarriers();
  void emitTmaCopy(const ir::Op& op, const TmaCopy& c);
  void tmaCommit();
  void tmaWait(const ir::Op& wait);
  std::optional<GroupState> simulateGroups(const ir::Block& b, std::optional<GroupState> st);
  bool groupsProven_ = false;
  std::unordered_map<const ir::Op*, int64_t> tmaRetire_;  // async_wait -> groups it retires (-1: unknown)
  // ---- accumulator memory (LowerAccumulators.cpp; GpuTargetInfo) ---------------
  /// The in-flight dots that keep their accumulators in the target's
  /// accumulator memory, each at its first column, and the columns the
  /// others share; the columns allocated (a power of two, 0: none) and the
  /// mbarriers the issues commit to, in the Barriers area after the
  /// channels' (then the word the allocation writes).
  std::map<const ir::Op*, uint32_t> accColumnOf_;
  uint32_t accShared_ = 0;  // the first column of the dots that complete at their issue
  uint32_t accColumns_ = 0;
  unsigned accBarriers_ = 0;
  // cancel_program (LowerCancel.cpp): its response (16 bytes) and mbarrier
  // after the accumulators' words, 16-byte aligned in the Barriers area.
  bool cancels_ = false;
  llvm::Value* cancelRequests_ = nullptr;  // per-thread count of requests (alloca)
  uint64_t cancelOffset() const {
    return (8 * (accBarrierFirst() + uint64_t{accBarriers_} + (accColumns_ ? 1 : 0)) + 15) & ~uint64_t{15};
  }
  void planCancel();
  void initCancel();
  void emitCancelProgram(const ir::Op& op);
  uint64_t accBarrierFirst() const {
    return uint64_t{tmaBarriers_} + (tmaOperands_.empty() ? 0 : 1) + 2 * uint64_t{chanSlots_};
  }
  llvm::Value* accBase_ = nullptr;                            // the columns' address (after initAccumulators)
  llvm::Value *accIssued_ = nullptr, *accRetired_ = nullptr;  // per-thread counters (allocas)
  std::map<const ir::Op*, llvm::Value*> accResident_;         // per dot: i1 alloca
  AccumulatorMemory accIssue_;                                // of the dot being emitted
  bool keepsInFlight(const ir::Op& dot, const TensorCoreDotPlan& p) const;
  void planAccumulators();
  void initAccumulators();
  void freeAccumulators();
  llvm::Value* accBarrier(llvm::Value* index);
  /// The accumulator memory of `dot`'s issue under plan `p` (null: none).
  const AccumulatorMemory* issueAccumulator(const ir::Op& dot, const TensorCoreDotPlan& p);
  void issuedAccumulator(const ir::Op& dot, const TensorCoreDotPlan& p);
  /// dot_wait {pending}: the issues beyond the newest `pending` retired.
  void waitAccumulators(int64_t pending);
  /// A dot_wait operand carried in accumulator memory: its registers.
  std::optional<Slots> loadAccumulator(const ir::Value* v);
  // ---- probes (LowerProfile.cpp; GpuOptions::profile) -------------------------
  /// The probes' scopes (ir::ProbeScopes: the binary's profileScopes).
  void numberProbes();
  /// A profiled kernel's last parameter: the profile buffer's address.
  void profileParams(std::vector<llvm::Type*>& params);
  /// This warp's slot and whether it records (after lane_ and warp_).
  void initProfile(llvm::Function* fn);
  void emitProbe(const ir::Op& op);
  /// The count's alloca into registers, once the kernel is emitted.
  void finishProfile(llvm::Function* fn);
  std::optional<ir::ProbeScopes> probes_;
  llvm::Value *profSlot_ = nullptr, *profRecords_ = nullptr, *profCapMask_ = nullptr;
  llvm::AllocaInst* profCount_ = nullptr;

 public:
  /// The scopes' names, by scope index (after run()).
  std::vector<std::string> profileScopes() const { return probes_ ? probes_->names : std::vector<std::string>{}; }

 private:
  // ---- bounds checks (LowerChecks.cpp; GpuOptions::checkBounds) -------------
  /// Numbers the global accesses of the kernel in program order: the op
  /// ids a checked kernel records (the binary's opNames).
  void numberCheckedOps();
  /// The hidden parameters of a checked kernel: one i64 extent per pointer
  /// argument, then the record's address.
  void checkParams(std::vector<llvm::Type*>& params);
  void initChecks(llvm::Function* fn, unsigned firstParam);
  /// Tests the accesses of `op` at the slots `at` of `ptrs` (each `bytes`
  /// long) through pointer tile `ptrV`: `mask` (empty: all active) comes
  /// back with the failing slots off; a failure of an active slot (under
  /// `active` too, when given) is recorded. Nothing when not checking.
  void checkAccesses(const ir::Op& op, const ir::Value* ptrV, const Slots& ptrs, const std::vector<size_t>& at,
                     uint64_t bytes, Slots& mask, llvm::Value* active = nullptr);
  /// The same for one uniform pointer: the access's new mask (null: none).
  llvm::Value* checkScalar(const ir::Op& op, const ir::Value* ptrV, uint64_t bytes, llvm::Value* mask,
                           llvm::Value* active = nullptr);
  /// The slot index of buffer_slot `op`, tested against its slots (an
  /// index outside is recorded and replaced by 0). Itself when not checking.
  llvm::Value* checkSlotIndex(const ir::Op& op, llvm::Value* idx);
  /// A checked compile's `assert`: a thread holding a false element records
  /// it (IR.h, "Assertions").
  void emitAssert(const ir::Op& op);
  /// if (bad) the first thread to get here fills the record; `slots`: the
  /// shared buffer's slot count (arg kSharedSlot).
  void recordViolation(llvm::Value* bad, int32_t opId, int arg, llvm::Value* offset, int64_t slots = 0);
  std::unordered_map<const ir::Op*, int32_t> checkedIds_;
  std::optional<ir::PointerOrigins> origins_;  // the arguments each pointer may point into
  std::vector<std::string> checkedOps_;
  std::vector<llvm::Value*> checkBase_, checkExtent_;  // per argument (pointers only): address, bytes
  llvm::Value* checkRecord_ = nullptr;

 public:
  /// The checked accesses' names, by op id (after run()).
  const std::vector<std::string>& checkedOps() const { return checkedOps_; }

 private:
  // ---- warp specialisation (LowerSpecialize.cpp) ----------------------------
  // The kernel's warp_specialize (null: none), its channel's slots and the
  // producer's entry block, branched to at the kernel's start.
  const ir::Op* specialize_ = nullptr;
  unsigned chanSlots_ = 0;
  unsigned producerWarps_ = 0;
  bool inProducer_ = false;     // lowering the producer's region
  bool consumersOnly_ = false;  // past the split: barriers count the consumers
  bool rebalance_ = false;      // setmaxnreg between producer and consumers
  llvm::BasicBlock* producerEntry_ = nullptr;
  llvm::Value* chanPhases_ = nullptr;  // per-thread bit per slot: the next round's parity (alloca)
  void planSpecialize();
  bool rebalancesRegisters() const;
  void splitWarps();
  void emitWarpSpecialize(const ir::Op& op);
  void emitStageOp(const ir::Op& op);
  bool onlyChannelReads(const ir::Block& loopBody) const;
  llvm::Value* chanBarrier(bool full, llvm::Value* slot);
  void initChannelBarriers();
  ir::LoweringRecord record_;
};

}  // namespace tessera::codegen::gpu_lower

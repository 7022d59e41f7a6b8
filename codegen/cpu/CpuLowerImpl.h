// Private to the CPU lowering: the Lowering class, whose methods the
// codegen/cpu/CpuLower*.cpp files and CpuLowering.cpp define, and the small
// helpers they share. The design of the lowering follows.
//
// Representation. Scalars (rank-0 values, pointers) are LLVM scalars. A tile
// is flattened row-major and processed in *chunks* of C lanes (C = the
// largest power of two <= the ISA's lane count dividing the element count,
// so no chunk is ever partial). A tile is either
//   * fused: computed per chunk inside its consumer's chunk loop
//     (recursively): single-use pure ops (elementwise, splat, arange,
//     constant, broadcast, expand_dims, reshape); cheap pure ops with several
//     uses (recomputed in each consumer, see plan()); single-use loads with
//     no memory effect between them and the loop that computes them;
//   * materialised: a 64-byte-aligned stack array (allocas only in the entry
//     block), written by one chunk loop at the op's position, or, for a value
//     first read by a reduction, inside that reduction's loop (deferred).
// Reductions, dot, transpose, gather, join, split, loop-carried and if
// results, expensive values with several uses and values used in a nested
// region are materialised.
//
// Memory ops use the axis-info analysis: a pointer tile whose chunks are
// runs of consecutive addresses becomes one (masked) vector load/store from
// the chunk's first pointer, anything else a masked gather/scatter.
#pragma once

#include <optional>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "codegen/cpu/CpuLowering.h"
#include "codegen/llvm/Elementwise.h"
#include "tessera/ir/analysis/PointerOrigin.h"
#include "tessera/ir/analysis/ProbeScopes.h"
#include "tessera/ir/Atomics.h"
#include "tessera/ir/analysis/AxisInfo.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::cpu::detail {

using ir::OpCode;

inline int64_t numElems(const ir::Type& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n *= d;
  return n;
}

inline std::vector<int64_t> stridesOf(const ir::Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// Pure ops computed per chunk in their consumer's loop: the elementwise
// ops, and the others cheap to recompute (Ops.def: constant, splat,
// arange, broadcast, expand_dims, reshape).
inline bool isFusableDef(OpCode c) { return ir::isElementwise(c) || ir::isCheapToRecompute(c); }

// Elementwise ops whose per-chunk cost is more than a few vector
// instructions (Ops.def's ops not cheap to recompute: libm-style
// expansions, divisions, which x86 does not vectorise for integers, square
// roots): values made of them are computed once and kept, never recomputed
// per consumer.
inline bool isExpensive(OpCode c) { return ir::isElementwise(c) && !ir::isCheapToRecompute(c); }

class Lowering {
 public:
  Lowering(const ir::Function& f, llvm::LLVMContext& ctx, llvm::Module& m, const CpuTargetInfo& t,
           std::vector<std::string>* checkedOps, bool profile = false)
      : fn_(f), ctx_(ctx), mod_(m), tgt_(t), axis_(f), b_(ctx), checkedOps_(checkedOps) {
    if (profile) probes_.emplace(f);
  }
  /// A profiled lowering's scopes, by index (empty otherwise).
  std::vector<std::string> profileScopes() const { return probes_ ? probes_->names : std::vector<std::string>{}; }

  void run(const std::string& entryName);

  /// The bytes each op keeps on the stack of the thread running a program
  /// (its tiles, staged panels, accumulators: the entry block's allocas),
  /// in the order they were asked for; the op is null for the entry's own.
  const std::vector<std::pair<uint64_t, const ir::Op*>>& stackUse() const { return stackUse_; }

 private:
  // ---- types ----------------------------------------------------------
  llvm::Type* scalarTy(DType d) { return scalarType(b_, d); }
  /// The in-register type of one element of `t` (pointer or scalar).
  llvm::Type* elemTy(const ir::Type& t) {
    if (t.isPointerLike()) return b_.getPtrTy();
    return scalarTy(t.dtype());
  }
  /// The in-memory type of one element (i1 is a byte in memory).
  llvm::Type* storageTy(const ir::Type& t) {
    if (t.isPointerLike()) return b_.getPtrTy();
    if (t.dtype() == DType::I1) return b_.getInt8Ty();
    return scalarTy(t.dtype());
  }
  llvm::Type* memTy(DType d) { return d == DType::I1 ? b_.getInt8Ty() : scalarTy(d); }
  llvm::VectorType* vec(llvm::Type* e, int64_t c) { return llvm::FixedVectorType::get(e, static_cast<unsigned>(c)); }
  llvm::Value* toStorage(llvm::Value* v, bool isBool) {
    if (!isBool) return v;
    llvm::Type* t = v->getType();
    llvm::Type* i8 =
        t->isVectorTy()
            ? static_cast<llvm::Type*>(vec(b_.getInt8Ty(), llvm::cast<llvm::FixedVectorType>(t)->getNumElements()))
            : b_.getInt8Ty();
    return b_.CreateZExt(v, i8);
  }
  llvm::Value* fromStorage(llvm::Value* v, bool isBool) {
    if (!isBool) return v;
    return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }

  int64_t chunkWidth(int64_t n) const {
    int64_t c = tgt_.lanes;
    while (c > 1 && n % c != 0) c /= 2;
    return c;
  }
  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }

  // ---- bounds-checked launches (tessera/support/BoundsCheck.h) -------------
  llvm::Value* record_ = nullptr;                  // the BoundsCheckRecord (a body parameter)
  std::vector<llvm::Value*> argBase_, argExtent_;  // per pointer argument: address (i64), bytes
  std::optional<ir::PointerOrigins> origins_;      // the arguments each pointer may point into
  /// Tests every active address of a global memory op against its buffer;
  /// on a violation records it and returns from the program.
  void emitBoundsCheck(const ir::Op& op);
  /// A checked compile's `assert`: a false element stops the program and
  /// records the assert (IR.h, "Assertions").
  void emitAssert(const ir::Op& op);
  /// if (bad): the first program to get here fills the record (op, arg,
  /// offset); every program that gets here returns.
  void failAndReturn(llvm::Value* bad, int32_t opId, int32_t arg, llvm::Value* offset);

  // ---- profiled launches (tessera/support/Profile.h; CpuLowerProfile.cpp) ----
  std::optional<ir::ProbeScopes> probes_;  // set: a profiled compile
  llvm::Value *profOn_ = nullptr, *profSlot_ = nullptr, *profRecords_ = nullptr, *profCapMask_ = nullptr;
  llvm::Value* profCount_ = nullptr;
  /// The program's slot in the buffer `buf` (a body parameter).
  void initProfile(llvm::Value* buf);
  void emitProbe(const ir::Op& op);
  /// The time-stamp counter, and the core it was read on (null where the
  /// target has no rdtscp).
  std::pair<llvm::Value*, llvm::Value*> readClock();

  // ---- planning ---------------------------------------------------------
  void plan();
  bool broadcastFast(const ir::Op& bc, int64_t c) const;
  bool canFuseInto(const ir::Op& user, const ir::Value* v) const;
  /// Position of `op`'s ancestor in `blk` (nullptr if `op` is not inside it).
  const ir::Op* ancestorIn(const ir::Op* op, const ir::Block* blk) const;
  bool effectsBetween(const ir::Op* from, const ir::Op* to) const;
  void evalPoints(const ir::Value* v, const ir::Block* blk, std::vector<const ir::Op*>& out) const;
  bool reachesElementwise(const ir::Value* x, const ir::Value* v) const;
  void planDeferral(const ir::Block& blk);
  void planLoadFusion(const ir::Block& blk);

  // ---- structure ----------------------------------------------------------
  llvm::Value* entryAlloca(llvm::Type* t, uint64_t align = 0) {
    llvm::IRBuilder<> ab(allocaBlock_);
    auto* a = ab.CreateAlloca(t);
    if (align) a->setAlignment(llvm::Align(align));
    stackUse_.emplace_back(mod_.getDataLayout().getTypeAllocSize(t).getFixedValue() + align, curOp_);
    return a;
  }
  llvm::Value* allocTile(const ir::Type& t) {
    return entryAlloca(llvm::ArrayType::get(storageTy(t), static_cast<uint64_t>(numElems(t))), 64);
  }
  /// Emits `for (iv = lo; iv < hi; iv += step) body(iv)` over i64 constants
  /// with at least one iteration (do-while form).
  void constLoop(int64_t lo, int64_t hi, int64_t step, const std::function<void(llvm::Value*)>& body);
  void chunkLoop(int64_t n, int64_t c, const std::function<void(llvm::Value*)>& body) {
    if (n == c) return body(i64(0));
    constLoop(0, n, c, body);
  }
  /// The chunk loop over a tile of shape `s`. When chunks never straddle a
  /// row (the last dimension is a multiple of `c`) it is two loops, rows
  /// outside and chunks of the row inside, and `coords_` gives the body's
  /// flat index as (row, column): broadcasts then index their sources
  /// without dividing the flat index, and what depends on the row only (a
  /// row's base pointer, its mask bit) is invariant in the inner loop and
  /// hoisted out of it. One row, or rows not a multiple of `c`: flat loop.
  void chunkLoop(const ir::Shape& s, int64_t c, const std::function<void(llvm::Value*)>& body);
  /// The (row, column) of the chunk the innermost 2-D chunk loop is at, and
  /// the flat index it hands to its body; valid for values of `shape` whose
  /// chunk index is exactly `base` (see emitBroadcast).
  struct Coords {
    llvm::Value* base = nullptr;
    llvm::Value* row = nullptr;  // flat index over all but the last dimension
    llvm::Value* col = nullptr;
    ir::Shape shape;
  };
  Coords coords_;

  // ---- values ------------------------------------------------------------
  llvm::Value* scalar(const ir::Value* v) {
    auto it = scalars_.find(v);
    TS_ASSERT(it != scalars_.end(), "cpu lowering: scalar used before definition");
    return it->second;
  }
  llvm::Value* loadChunk(llvm::Value* arr, const ir::Type& t, llvm::Value* base, int64_t c);
  void storeChunk(llvm::Value* arr, const ir::Type& t, llvm::Value* base, llvm::Value* v);
  llvm::Value* emitChunk(const ir::Value* v, llvm::Value* base, int64_t c);
  /// The operands of a load, copy, store or atomic, decoded once: the
  /// pointer (a copy's source), value (stores, atomics), mask and `other`
  /// (loads), and the element's in-memory type and alignment.
  struct MemOperands {
    const ir::Value *ptr, *val, *mask, *other;
    DType dt;
    bool isBool;
    llvm::Type* st;
    llvm::Align align;
  };
  MemOperands memOperands(const ir::Op& op);
  /// One chunk of a load's (or copy's) value, in storage form.
  llvm::Value* loadValueChunk(const ir::Op& op, llvm::Value* base, int64_t c);
  void storeLoop(const ir::Op& op);
  llvm::Value* emitDef(const ir::Op& op, llvm::Value* base, int64_t c);
  llvm::Value* emitBroadcast(const ir::Op& op, llvm::Value* base, int64_t c);
  llvm::Value* gatherFrom(const ir::Value* src, llvm::Value* idx, int64_t c);
  llvm::Value* iotaI64(llvm::Value* base, int64_t c) {
    std::vector<llvm::Constant*> lanes;
    for (int64_t i = 0; i < c; ++i) lanes.push_back(b_.getInt64(static_cast<uint64_t>(i)));
    return b_.CreateAdd(b_.CreateVectorSplat(static_cast<unsigned>(c), base), llvm::ConstantVector::get(lanes));
  }
  llvm::Value* iotaI32(int64_t c) {
    std::vector<llvm::Constant*> lanes;
    for (int64_t i = 0; i < c; ++i) lanes.push_back(b_.getInt32(static_cast<uint32_t>(i)));
    return llvm::ConstantVector::get(lanes);
  }
  /// Writes tile `v` into the array `dst` (copy if materialised, else one
  /// chunk loop).
  void writeTile(llvm::Value* dst, const ir::Value* v);
  void materialize(const ir::Value* v);

  // ---- mask versioning ----------------------------------------------------
  /// Lane bounds of an integer tile (or scalar): every lane lies in
  /// [lo, hi] (i128 scalars) provided `ok` holds (no lane's computation
  /// wrapped). False if the bounds are not derivable from the definition.
  struct Range {
    llvm::Value *lo, *hi, *ok;
  };
  bool intRange(const ir::Value* v, Range& r);
  /// A scalar i1, true iff every lane of the mask tile `m` is on, or
  /// nullptr if no such test is derivable.
  llvm::Value* allOnCondition(const ir::Value* m);
  /// Masks with an all-on test among the values a chunk loop over `roots`
  /// computes per chunk (through fused values).
  void collectMasks(const ir::Value* v, std::vector<const ir::Value*>& out, std::unordered_set<const ir::Value*>& seen);
  /// Emits `body` (one op's chunk loops) twice when the values it computes
  /// contain masks with an all-on test: a fast version in which those masks
  /// are known to be all on (plain loads and stores, selects folded), taken
  /// when one scalar test per tile passes, and the general version.
  /// With `extra`, the fast version also requires it, and `generalBody`
  /// (if given) replaces `body` in the general version.
  void versioned(std::vector<const ir::Value*> roots, const std::function<void()>& body, llvm::Value* extra = nullptr,
                 const std::function<void()>& generalBody = nullptr);
  std::unordered_set<const ir::Value*> assumeOn_;  // masks known all-on in the loop being emitted
  bool general_ = false;                           // emitting the general version of a versioned loop
  bool expensiveBody_ = false;                     // collectMasks met an expensive op
  bool loadsBody_ = false;                         // collectMasks met a load from memory
  bool hasAtomics_ = false;                        // the kernel has atomics (no streaming stores then)
  bool usedStreaming_ = false;                     // some store is non-temporal: fence before returning

  // ---- ops -------------------------------------------------------------
  void emitBlock(const ir::Block& blk);
  void emitOp(const ir::Op& op);
  llvm::Value* elementwise(const ir::Op& op, std::vector<llvm::Value*> v);
  llvm::Value* floatOp(const ir::Op& op, std::vector<llvm::Value*>& v);
  llvm::Value* castValue(llvm::Value* x, DType from, DType to);
  llvm::Value* fpTrunc(llvm::Value* x, llvm::Type* to);

  llvm::Value* constantOf(const ir::Op& op, llvm::Type* t);
  void emitLoad(const ir::Op& op, llvm::Value* dstArr = nullptr);
  void emitStore(const ir::Op& op);
  void emitAtomic(const ir::Op& op);
  void emitReduce(const ir::Op& op);
  void emitScan(const ir::Op& op);
  void emitGather(const ir::Op& op);
  void emitJoin(const ir::Op& op);
  void emitSplit(const ir::Op& op);
  void emitDot(const ir::Op& op);
  /// True when dots of `in` operands run on the target's AMX tiles.
  bool dotOnTiles(DType in) const;
  /// C (cArr, M x N, updated in place) += A (aArr, row stride lda) B (bArr,
  /// dense K x N) on AMX tiles (CpuLowerTileDot.cpp), issuing `prefetch`'s
  /// `units` (dotPrefetcher) spread over its blocks.
  void emitTileDot(const ir::Op& op, llvm::Value* aArr, int64_t lda, llvm::Value* bArr, llvm::Value* cArr,
                   const std::function<void(llvm::Value*)>& prefetch, int64_t units);
  /// The prefetches of the next iteration's operands of `op` (planned in
  /// dotPrefetch_): `prefetch(u)` emits unit u (one row of an operand tile)
  /// and does nothing for u >= `units`; null when there are none.
  std::function<void(llvm::Value*)> dotPrefetcher(const ir::Op& op, int64_t& units);
  /// True if `v` (a rank-2 tile) is loaded straight into the panel layout
  /// the dot kernel reads B in (CpuDot.h): its only use is as the B operand
  /// of a dot that needs no widening.
  bool loadsAsDotPanel(const ir::Value* v);
  /// True if `v` is loaded straight into the padded row-major layout the
  /// dot kernel reads A in: its only use is as the A operand of a dot that
  /// needs no widening.
  bool loadsAsDotRows(const ir::Value* v);
  /// Row stride of A's array for the dot kernel: K plus one cache line, so
  /// that the MR rows a micro-block reads fall into different L1 sets (with
  /// K a multiple of 64 elements they would all share a few).
  int64_t dotRowStride(int64_t K, llvm::Type* t) const {
    return K + 64 / static_cast<int64_t>(t->getPrimitiveSizeInBits() / 8);
  }
  std::unordered_map<const ir::Value*, int64_t> rowStride_;  // A arrays with a padded row stride
  /// Next-iteration prefetches of a dot's operand loads, issued by the dot.
  struct PrefetchStream {
    const ir::Value* ptr;  // the load's pointer tile (recomputable)
    const ir::Value* iv;   // the loop's induction variable
    llvm::Value* nextIv;   // its value in the next iteration
  };
  std::unordered_map<const ir::Op*, std::vector<PrefetchStream>> dotPrefetch_;
  /// Index into B's panel layout of the chunk at flat index `base` of a
  /// K x N tile (coordinates from the 2-D chunk loop when it is at `base`).
  llvm::Value* panelIndex(llvm::Value* base, int64_t K, int64_t N, int64_t nr);
  /// Index of flat index `base` of a tile with rows of L elements stored
  /// with row stride `stride`.
  llvm::Value* paddedIndex(llvm::Value* base, int64_t L, int64_t stride);
  int64_t panelElems(int64_t K, int64_t N, int64_t nr) const { return (N + nr - 1) / nr * nr * K; }
  std::unordered_set<const ir::Value*> panelB_;  // arrays already in panel layout
  /// The induction variable of the `for` whose next iteration `op` (a load
  /// or copy of a tile) should prefetch for, or nullptr. See emitLoad.
  const ir::Value* prefetchIv(const ir::Op& op);
  /// True if the chunks of `v` can be evaluated again with other scalars
  /// (pure fused computations over scalars and arrays, nothing deferred).
  bool recomputable(const ir::Value* v) const;
  /// The pointer of the first lane of the chunk of `ptr` at `base`: the
  /// pointer computation evaluated for one lane where it has no effect
  /// (LLVM does not narrow a vector of pointers to the one lane used),
  /// else lane 0 of the whole chunk.
  llvm::Value* firstPointer(const ir::Value* ptr, llvm::Value* base, int64_t c) {
    int64_t w = recomputable(ptr) ? 1 : c;
    return b_.CreateExtractElement(emitChunk(ptr, base, w), uint64_t{0});
  }
  void emitFor(const ir::Op& op);
  void emitIf(const ir::Op& op);
  void emitWhile(const ir::Op& op);
  void bindResults(const ir::Op& op, const std::vector<llvm::Value*>& storage);
  void emitYield(const ir::Op& op);

  const ir::Function& fn_;
  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  const CpuTargetInfo& tgt_;
  ir::AxisAnalysis axis_;
  llvm::IRBuilder<> b_;
  std::vector<std::string>* checkedOps_;  // non-null: emit bounds checks; opId -> op text
  llvm::BasicBlock* allocaBlock_ = nullptr;
  const ir::Op* curOp_ = nullptr;  // the op being emitted (stackUse_ names it)
  std::vector<std::pair<uint64_t, const ir::Op*>> stackUse_;
  llvm::Value* pid_[3] = {};
  llvm::Value* grid_[3] = {};

  std::unordered_map<const ir::Value*, llvm::Value*> scalars_;
  std::unordered_map<const ir::Value*, llvm::Value*> arrays_;
  // buffer_slot results: their arrays are interior pointers (see LocalLoad).
  std::unordered_set<const ir::Value*> slotViews_;
  std::unordered_map<const ir::Value*, int> uses_;
  std::unordered_map<const ir::Value*, std::vector<const ir::Op*>> users_;  // one entry per use
  std::unordered_map<const ir::Op*, size_t> pos_;                           // index of an op in its block
  // Tiles never stored: computed in every consumer's chunk loop. Single-use
  // pure values and loads (sunk into their consumer), and `remat_` values:
  // cheap pure values with several uses, recomputed in each consumer
  // (a few vector ops cost less than a store and reload per chunk).
  std::unordered_set<const ir::Value*> fused_;
  std::unordered_set<const ir::Value*> remat_;
  std::unordered_set<const ir::Value*> cheap_;  // fused pure values made of cheap ops only
  // Deferred materialisation: a value whose first consumer is a reduction is
  // written to its array inside that reduction's chunk loop (one pass over
  // the data instead of two). Keyed by the reduction.
  std::unordered_map<const ir::Op*, std::vector<const ir::Value*>> deferredAt_;
  std::unordered_set<const ir::Value*> deferred_;
  std::unordered_map<const ir::Value*, llvm::Value*> pending_;  // deferred value -> array being written
  std::map<std::tuple<const ir::Value*, llvm::Value*, int64_t>, llvm::Value*> memo_;  // pending chunks
  // Stores with loads sunk into their loop whose addresses may overlap the
  // stored ones: the fused loop runs only after a run-time disjointness test.
  std::unordered_map<const ir::Op*, std::vector<const ir::Op*>> storeChecks_;

  // Where a `yield` writes: one storage slot per yielded value, and whether
  // the values must go through temporaries first (loops: the yielded values
  // may read the very storage being overwritten).
  struct YieldTarget {
    std::vector<llvm::Value*> storage;
    bool viaTemps;
  };
  std::vector<YieldTarget> yieldTargets_;
};

}  // namespace tessera::codegen::cpu::detail

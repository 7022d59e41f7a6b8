// Tile IR -> LLVM IR for the host CPU.
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
// Reductions, dot, transpose, loop-carried and if results, expensive values
// with several uses and values used in a nested region are materialised.
//
// Memory ops use the axis-info analysis: a pointer tile whose chunks are
// runs of consecutive addresses becomes one (masked) vector load/store from
// the chunk's first pointer, anything else a masked gather/scatter.
#include "codegen/cpu/CpuLowering.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include "codegen/cpu/CpuDot.h"
#include "codegen/cpu/CpuMath.h"
#include "tessera/ir/analysis/AxisInfo.h"
#include "codegen/llvm/Elementwise.h"
#include "tessera/support/BoundsCheck.h"
#include "tessera/support/Error.h"

namespace tessera::codegen::cpu {

namespace {

using ir::OpCode;

// Launches writing at least this much through one store op use streaming
// (non-temporal) stores: about the last-level cache a core can count on.
constexpr int64_t kStreamingBytes = int64_t{8} << 20;

int64_t numElems(const ir::Type& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n *= d;
  return n;
}

std::vector<int64_t> stridesOf(const ir::Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

bool isFusableDef(OpCode c) {
  return ir::isElementwise(c) || c == OpCode::Splat || c == OpCode::Arange || c == OpCode::Constant ||
         c == OpCode::Broadcast || c == OpCode::ExpandDims || c == OpCode::Reshape;
}

// Ops whose per-chunk cost is more than a few vector instructions (libm-style
// expansions, divisions, which x86 does not vectorise for integers): values
// made of them are computed once and kept, never recomputed per consumer.
bool isExpensive(OpCode c) {
  switch (c) {
    case OpCode::Exp: case OpCode::Exp2: case OpCode::Log: case OpCode::Log2: case OpCode::Tanh:
    case OpCode::Erf: case OpCode::Pow: case OpCode::Div: case OpCode::Rem: case OpCode::Sqrt:
    case OpCode::Rsqrt:
      return true;
    default: return false;
  }
}

// True if running `op` may change memory that a load reads (global stores,
// atomics, buffer writes), directly or inside its regions. Loads are never
// moved across such an op.
bool mayWriteMemory(const ir::Op& op) {
  if (ir::writesMemory(op.code())) return true;
  for (auto& r : op.regions())
    for (auto& o : r->block().ops())
      if (mayWriteMemory(*o)) return true;
  return false;
}

// Structural equality of two pure index/pointer computations: the same
// ops on the same leaves produce the same per-lane values.
bool sameComputation(const ir::Value* a, const ir::Value* b) {
  if (a == b) return true;
  const ir::Op* da = a->definingOp();
  const ir::Op* db = b->definingOp();
  if (!da || !db || da->code() != db->code() || !(a->type() == b->type())) return false;
  switch (da->code()) {
    case OpCode::PtrAdd: case OpCode::Splat: case OpCode::Add: case OpCode::Mul: case OpCode::Sub:
    case OpCode::ExpandDims: case OpCode::Reshape: case OpCode::Broadcast:
      break;
    default: return false;  // ops with attributes or effects: only identity counts
  }
  if (da->numOperands() != db->numOperands()) return false;
  for (unsigned i = 0; i < da->numOperands(); ++i)
    if (!sameComputation(da->operand(i), db->operand(i))) return false;
  return true;
}

class Lowering {
 public:
  Lowering(const ir::Function& f, llvm::LLVMContext& ctx, llvm::Module& m, const CpuTargetInfo& t,
           std::vector<std::string>* checkedOps)
      : fn_(f), ctx_(ctx), mod_(m), tgt_(t), axis_(f), b_(ctx), checkedOps_(checkedOps) {}

  void run(const std::string& entryName);

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
  llvm::VectorType* vec(llvm::Type* e, int64_t c) {
    return llvm::FixedVectorType::get(e, static_cast<unsigned>(c));
  }
  llvm::Value* toStorage(llvm::Value* v, bool isBool) {
    if (!isBool) return v;
    llvm::Type* t = v->getType();
    llvm::Type* i8 = t->isVectorTy() ? static_cast<llvm::Type*>(vec(b_.getInt8Ty(), llvm::cast<llvm::FixedVectorType>(t)->getNumElements()))
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
  llvm::Value* record_ = nullptr;         // the BoundsCheckRecord (a body parameter)
  std::vector<llvm::Value*> argBase_, argExtent_;  // per pointer argument: address (i64), bytes
  /// The argument a global pointer (tile) derives from, or -1.
  int rootArg(const ir::Value* v) const;
  /// Tests every active address of a global memory op against its buffer;
  /// on a violation records it and returns from the program.
  void emitBoundsCheck(const ir::Op& op);

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
  MemOperands memOperands(const ir::Op& op) {
    MemOperands m{};
    bool isLoad = op.code() == OpCode::Load || op.code() == OpCode::Copy;
    unsigned p = op.code() == OpCode::Copy ? 1 : 0;  // copy(dst buffer, src ptr [, mask])
    m.ptr = op.operand(p);
    m.val = isLoad ? nullptr : op.operand(1);
    unsigned mi = isLoad ? p + 1 : 2;
    m.mask = op.numOperands() > mi ? op.operand(mi) : nullptr;
    m.other = op.code() == OpCode::Load && op.numOperands() > 2 ? op.operand(2) : nullptr;
    m.dt = m.ptr->type().dtype();
    m.isBool = m.dt == DType::I1;
    m.st = memTy(m.dt);
    m.align = llvm::Align(m.st->getPrimitiveSizeInBits() / 8);
    return m;
  }
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
  bool general_ = false;  // emitting the general version of a versioned loop
  bool expensiveBody_ = false;  // collectMasks met an expensive op
  bool loadsBody_ = false;      // collectMasks met a load from memory
  bool hasAtomics_ = false;      // the kernel has atomics (no streaming stores then)
  bool usedStreaming_ = false;   // some store is non-temporal: fence before returning

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
  void emitDot(const ir::Op& op);
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
  void emitYield(const ir::Op& op);
  llvm::Value* atomicLane(const ir::Op& op, llvm::Value* p, llvm::Value* v);

  const ir::Function& fn_;
  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  const CpuTargetInfo& tgt_;
  ir::AxisAnalysis axis_;
  llvm::IRBuilder<> b_;
  std::vector<std::string>* checkedOps_;  // non-null: emit bounds checks; opId -> op text
  llvm::BasicBlock* allocaBlock_ = nullptr;
  llvm::Value* pid_[3] = {};
  llvm::Value* grid_[3] = {};

  std::unordered_map<const ir::Value*, llvm::Value*> scalars_;
  std::unordered_map<const ir::Value*, llvm::Value*> arrays_;
  // buffer_slot results: their arrays are interior pointers (see LocalLoad).
  std::unordered_set<const ir::Value*> slotViews_;
  std::unordered_map<const ir::Value*, int> uses_;
  std::unordered_map<const ir::Value*, std::vector<const ir::Op*>> users_;  // one entry per use
  std::unordered_map<const ir::Op*, size_t> pos_;  // index of an op in its block
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

// ===================================================================== plan

bool Lowering::broadcastFast(const ir::Op& bc, int64_t c) const {
  const ir::Shape& r = bc.result()->type().shape();
  const ir::Shape& s = bc.operand(0)->type().shape();
  int64_t L = r.back();
  return L % c == 0 && (s.back() == L || s.back() == 1);
}

bool Lowering::canFuseInto(const ir::Op& u, const ir::Value* v) const {
  // These consumers index their operands arbitrarily: they need arrays.
  if (u.code() == OpCode::Dot && v != u.operand(2)) return false;
  if (u.code() == OpCode::Transpose) return false;
  if (u.code() == OpCode::Broadcast && !broadcastFast(u, chunkWidth(numElems(u.result()->type())))) return false;
  return true;
}

const ir::Op* Lowering::ancestorIn(const ir::Op* op, const ir::Block* blk) const {
  while (op && op->parent() != blk) {
    const ir::Region* r = op->parent() ? op->parent()->parent() : nullptr;
    op = r ? r->parentOp() : nullptr;
  }
  return op;
}

bool Lowering::effectsBetween(const ir::Op* from, const ir::Op* to) const {
  const ir::Block* blk = from->parent();
  TS_ASSERT(to->parent() == blk, "effectsBetween: ops in different blocks");
  for (size_t i = pos_.at(from) + 1; i < pos_.at(to); ++i)
    if (mayWriteMemory(*blk->ops()[i])) return true;
  return false;
}

// The ops of `blk` at whose position `v` is evaluated: its non-fused users,
// the roots of its fused users, and the enclosing op of nested users.
void Lowering::evalPoints(const ir::Value* v, const ir::Block* blk, std::vector<const ir::Op*>& out) const {
  auto it = users_.find(v);
  if (it == users_.end()) return;
  for (const ir::Op* u : it->second) {
    const ir::Op* a = ancestorIn(u, blk);
    TS_ASSERT(a, "cpu lowering: a use outside its value's scope");
    if (a == u && u->numResults() == 1 && fused_.count(u->result())) evalPoints(u->result(), blk, out);
    else out.push_back(a);
  }
}

// True if `x` is `v`, or a fused single-use elementwise value computed from
// `v` through such values only (same shape, so the same flat index).
bool Lowering::reachesElementwise(const ir::Value* x, const ir::Value* v) const {
  if (x == v) return true;
  const ir::Op* d = x->definingOp();
  if (!d || !fused_.count(x) || remat_.count(x) || !ir::isElementwise(d->code())) return false;
  for (const ir::Value* o : d->operands())
    if (o->type().isTile() && reachesElementwise(o, v)) return true;
  return false;
}

void Lowering::planDeferral(const ir::Block& blk) {
  for (auto& opp : blk.ops()) {
    const ir::Op& op = *opp;
    for (auto& r : op.regions()) planDeferral(r->block());
    if (op.numResults() != 1 || !(op.code() == OpCode::Load || isFusableDef(op.code()))) continue;
    const ir::Value* v = op.result();
    if (!v->type().isTile() || fused_.count(v) || uses_[v] == 0) continue;
    std::vector<const ir::Op*> pts;
    evalPoints(v, &blk, pts);
    const ir::Op* first = nullptr;
    for (const ir::Op* p : pts)
      if (!first || pos_.at(p) < pos_.at(first)) first = p;
    if (!first || first->code() != OpCode::Reduce || !reachesElementwise(first->operand(0), v)) continue;
    if (effectsBetween(&op, first)) continue;
    deferred_.insert(v);
    deferredAt_[first].push_back(v);
  }
}

void Lowering::planLoadFusion(const ir::Block& blk) {
  for (auto& opp : blk.ops()) {
    const ir::Op& op = *opp;
    for (auto& r : op.regions()) planLoadFusion(r->block());
    if (op.code() != OpCode::Load || !op.result()->type().isTile() || uses_[op.result()] != 1) continue;
    if (deferred_.count(op.result())) continue;
    // Walk up the single-use fused chain to the op whose loop computes it.
    const ir::Value* x = op.result();
    const ir::Op* u = users_[x][0];
    bool ok = u->parent() == &blk && canFuseInto(*u, x);
    while (ok && u->numResults() == 1 && fused_.count(u->result())) {
      x = u->result();
      if (remat_.count(x)) ok = false;  // would be loaded once per consumer
      else u = users_[x][0];
    }
    if (!ok) continue;
    const ir::Op* root = u;
    if (u->numResults() == 1 && deferred_.count(u->result())) {
      for (auto& [r, vals] : deferredAt_)
        for (const ir::Value* d : vals)
          if (d == u->result()) root = r;
    }
    if (root->code() == OpCode::AtomicAdd || root->code() == OpCode::AtomicMax || root->code() == OpCode::Copy) continue;
    if (effectsBetween(&op, root)) continue;
    if (root->code() == OpCode::Store) {
      // Chunk k of the store runs before chunk k+1 of the load: only safe if
      // no stored address is read by a later chunk. Both pointer tiles must
      // be single runs (so [first, first + n) bounds them); identical
      // address computations are safe outright, others get a run-time test.
      const ir::Value* sp = root->operand(0);
      const ir::Value* lp = op.operand(0);
      if (!sp->type().isTile() || !axis_.contiguousChunks(sp, numElems(sp->type())) ||
          !axis_.contiguousChunks(lp, numElems(lp->type())))
        continue;
      if (!sameComputation(sp, lp)) storeChecks_[root].push_back(&op);
    }
    fused_.insert(op.result());
  }
}

void Lowering::plan() {
  std::function<void(const ir::Block&)> count = [&](const ir::Block& blk) {
    size_t i = 0;
    for (auto& op : blk.ops()) {
      pos_[op.get()] = i++;
      for (const ir::Value* v : op->operands()) {
        uses_[v]++;
        users_[v].push_back(op.get());
      }
      for (auto& r : op->regions()) count(r->block());
    }
  };
  count(fn_.body());
  std::function<void(const ir::Block&)> decide = [&](const ir::Block& blk) {
    for (auto& op : blk.ops()) {
      for (auto& r : op->regions()) decide(r->block());
      if (op->numResults() != 1 || !isFusableDef(op->code())) continue;
      const ir::Value* v = op->result();
      if (!v->type().isTile() || uses_[v] == 0) continue;
      bool fusable = true;
      for (const ir::Op* u : users_[v]) fusable = fusable && canFuseInto(*u, v);
      if (!fusable) continue;
      bool cheap = !isExpensive(op->code());
      for (const ir::Value* o : op->operands())
        if (o->type().isTile() && fused_.count(o) && !cheap_.count(o)) cheap = false;
      if (uses_[v] == 1 && users_[v][0]->parent() == op->parent()) {
        fused_.insert(v);
      } else if (cheap) {
        fused_.insert(v);
        remat_.insert(v);
      }
      if (cheap && fused_.count(v)) cheap_.insert(v);
    }
  };
  decide(fn_.body());
  std::function<void(const ir::Block&)> atomics = [&](const ir::Block& blk) {
    for (auto& op : blk.ops()) {
      if (op->code() == OpCode::AtomicAdd || op->code() == OpCode::AtomicMax) hasAtomics_ = true;
      for (auto& r : op->regions()) atomics(r->block());
    }
  };
  atomics(fn_.body());
  planDeferral(fn_.body());
  planLoadFusion(fn_.body());
}

// ================================================================ structure

void Lowering::constLoop(int64_t lo, int64_t hi, int64_t step, const std::function<void(llvm::Value*)>& body) {
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ctx_, "chunk", f);
  auto* exit = llvm::BasicBlock::Create(ctx_, "chunk.end", f);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
  iv->addIncoming(i64(lo), pre);
  body(iv);
  llvm::Value* next = b_.CreateAdd(iv, i64(step), "", /*HasNUW=*/true, /*HasNSW=*/true);
  iv->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpSLT(next, i64(hi)), loop, exit);
  b_.SetInsertPoint(exit);
}

void Lowering::chunkLoop(const ir::Shape& s, int64_t c, const std::function<void(llvm::Value*)>& body) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  int64_t L = s.empty() ? 1 : s.back();
  if (s.size() < 2 || L % c != 0 || n == L) return chunkLoop(n, c, body);
  Coords saved = coords_;
  constLoop(0, n / L, 1, [&](llvm::Value* r) {
    llvm::Value* rowBase = b_.CreateMul(r, i64(L), "", /*HasNUW=*/true, /*HasNSW=*/true);
    auto inner = [&](llvm::Value* j) {
      llvm::Value* base = j == nullptr ? rowBase : b_.CreateAdd(rowBase, j, "", true, true);
      coords_ = {base, r, j ? j : i64(0), s};
      body(base);
    };
    if (L == c) inner(nullptr);
    else constLoop(0, L, c, inner);
  });
  coords_ = saved;
}

// =================================================================== values

llvm::Value* Lowering::loadChunk(llvm::Value* arr, const ir::Type& t, llvm::Value* base, int64_t c) {
  llvm::Type* st = storageTy(t);
  llvm::Value* p = b_.CreateInBoundsGEP(st, arr, base);
  auto align = llvm::Align(st->isPointerTy() ? 8 : st->getPrimitiveSizeInBits() / 8);
  llvm::Value* v = b_.CreateAlignedLoad(vec(st, c), p, align);
  return fromStorage(v, !t.isPointerLike() && t.dtype() == DType::I1);
}

void Lowering::storeChunk(llvm::Value* arr, const ir::Type& t, llvm::Value* base, llvm::Value* v) {
  llvm::Type* st = storageTy(t);
  llvm::Value* p = b_.CreateInBoundsGEP(st, arr, base);
  auto align = llvm::Align(st->isPointerTy() ? 8 : st->getPrimitiveSizeInBits() / 8);
  b_.CreateAlignedStore(toStorage(v, !t.isPointerLike() && t.dtype() == DType::I1), p, align);
}

llvm::Value* Lowering::emitChunk(const ir::Value* v, llvm::Value* base, int64_t c) {
  if (assumeOn_.count(v)) return llvm::ConstantInt::getTrue(vec(b_.getInt1Ty(), c));
  auto it = arrays_.find(v);
  if (it != arrays_.end()) return loadChunk(it->second, v->type(), base, c);
  const ir::Op* def = v->definingOp();
  auto pend = pending_.find(v);
  if (pend != pending_.end()) {
    // Deferred materialisation: compute the chunk once, keep it in the array
    // for later consumers and hand it to this one.
    auto key = std::make_tuple(v, base, c);
    auto m = memo_.find(key);
    if (m != memo_.end()) return m->second;
    llvm::Value* x = emitDef(*def, base, c);
    storeChunk(pend->second, v->type(), base, x);
    memo_[key] = x;
    return x;
  }
  // Transpose reaches here only while being materialised at its own position.
  TS_ASSERT(def && (isFusableDef(def->code()) || def->code() == OpCode::Transpose ||
                    (def->code() == OpCode::Load && fused_.count(v))),
            "cpu lowering: tile used before it was materialised");
  return emitDef(*def, base, c);
}

llvm::Value* Lowering::constantOf(const ir::Op& op, llvm::Type* t) {
  const ir::Attr& a = op.attrs().at("value");
  llvm::Type* s = t->getScalarType();
  if (s->isFloatingPointTy()) {
    double d = std::holds_alternative<double>(a) ? std::get<double>(a) : static_cast<double>(std::get<int64_t>(a));
    return llvm::ConstantFP::get(t, d);
  }
  int64_t i = std::holds_alternative<int64_t>(a) ? std::get<int64_t>(a) : static_cast<int64_t>(std::get<double>(a));
  return llvm::ConstantInt::get(t, static_cast<uint64_t>(i), /*isSigned=*/true);
}

llvm::Value* Lowering::emitDef(const ir::Op& op, llvm::Value* base, int64_t c) {
  const ir::Type& rt = op.result()->type();
  switch (op.code()) {
    case OpCode::Constant: return constantOf(op, vec(elemTy(rt), c));
    case OpCode::Splat: return b_.CreateVectorSplat(static_cast<unsigned>(c), scalar(op.operand(0)));
    case OpCode::Arange: {
      llvm::Value* start = b_.CreateTrunc(base, b_.getInt32Ty());
      start = b_.CreateAdd(start, b_.getInt32(static_cast<uint32_t>(op.intAttr("start"))));
      return b_.CreateAdd(b_.CreateVectorSplat(static_cast<unsigned>(c), start), iotaI32(c));
    }
    case OpCode::ExpandDims:
    case OpCode::Reshape: return emitChunk(op.operand(0), base, c);
    case OpCode::Broadcast: return emitBroadcast(op, base, c);
    case OpCode::Load:
      return fromStorage(loadValueChunk(op, base, c), !rt.isPointerLike() && rt.dtype() == DType::I1);
    case OpCode::Transpose: {
      const ir::Shape& rs = rt.shape();
      const ir::Shape& ss = op.operand(0)->type().shape();
      const auto& perm = op.intsAttr("perm");
      auto rst = stridesOf(rs), sst = stridesOf(ss);
      llvm::Value* flat = iotaI64(base, c);
      llvm::Value* src = llvm::ConstantInt::get(flat->getType(), 0);
      for (size_t d = 0; d < rs.size(); ++d) {
        llvm::Value* idx = b_.CreateURem(b_.CreateUDiv(flat, llvm::ConstantInt::get(flat->getType(), rst[d])),
                                         llvm::ConstantInt::get(flat->getType(), rs[d]));
        src = b_.CreateAdd(src, b_.CreateMul(idx, llvm::ConstantInt::get(flat->getType(), sst[perm[d]])));
      }
      return gatherFrom(op.operand(0), src, c);
    }
    default: break;
  }
  TS_ASSERT(ir::isElementwise(op.code()), std::string("cpu lowering: cannot fuse ") + op.name());
  std::vector<llvm::Value*> ops;
  for (const ir::Value* o : op.operands()) ops.push_back(emitChunk(o, base, c));
  return elementwise(op, std::move(ops));
}

llvm::Value* Lowering::gatherFrom(const ir::Value* src, llvm::Value* idx, int64_t c) {
  auto it = arrays_.find(src);
  TS_ASSERT(it != arrays_.end(), "cpu lowering: gather source not materialised");
  llvm::Type* st = storageTy(src->type());
  llvm::Value* ptrs = b_.CreateGEP(st, it->second, idx);
  auto align = llvm::Align(st->isPointerTy() ? 8 : st->getPrimitiveSizeInBits() / 8);
  llvm::Value* v = b_.CreateMaskedGather(vec(st, c), ptrs, align);
  return fromStorage(v, !src->type().isPointerLike() && src->type().dtype() == DType::I1);
}

llvm::Value* Lowering::emitBroadcast(const ir::Op& op, llvm::Value* base, int64_t c) {
  const ir::Value* srcV = op.operand(0);
  const ir::Shape& rs = op.result()->type().shape();
  const ir::Shape& ss = srcV->type().shape();
  auto rst = stridesOf(rs), sst = stridesOf(ss);
  // Source flat index of result flat index `flat` (scalar or vector).
  auto srcIndex = [&](llvm::Value* flat) {
    llvm::Type* t = flat->getType();
    llvm::Value* src = llvm::ConstantInt::get(t, 0);
    if (flat == coords_.base && rs == coords_.shape) {
      // Inside a 2-D chunk loop over this very shape: the coordinates are
      // the row index split over the leading dimensions and the column.
      llvm::Value* rest = coords_.row;
      for (size_t d = rs.size() - 1; d-- > 0;) {
        llvm::Value* idx = d == 0 ? rest : b_.CreateURem(rest, llvm::ConstantInt::get(t, rs[d]));
        if (d > 0) rest = b_.CreateUDiv(rest, llvm::ConstantInt::get(t, rs[d]));
        if (ss[d] != 1) src = b_.CreateAdd(src, b_.CreateMul(idx, llvm::ConstantInt::get(t, sst[d])));
      }
      if (ss.back() != 1) src = b_.CreateAdd(src, coords_.col);
      return src;
    }
    for (size_t d = 0; d < rs.size(); ++d) {
      if (ss[d] == 1) continue;
      llvm::Value* idx = b_.CreateURem(b_.CreateUDiv(flat, llvm::ConstantInt::get(t, rst[d])),
                                       llvm::ConstantInt::get(t, rs[d]));
      src = b_.CreateAdd(src, b_.CreateMul(idx, llvm::ConstantInt::get(t, sst[d])));
    }
    return src;
  };
  int64_t L = rs.back();
  if (L % c == 0 && ss.back() == L)  // chunk = a contiguous piece of one source row
    return emitChunk(srcV, srcIndex(base), c);
  if (L % c == 0 && ss.back() == 1) {  // chunk = one source element repeated
    llvm::Value* e = b_.CreateExtractElement(emitChunk(srcV, srcIndex(base), 1), uint64_t{0});
    return b_.CreateVectorSplat(static_cast<unsigned>(c), e);
  }
  if (arrays_.count(srcV)) return gatherFrom(srcV, srcIndex(iotaI64(base, c)), c);
  // Fallback (not planned for, kept for robustness): one lane at a time.
  llvm::Value* r = llvm::PoisonValue::get(vec(elemTy(srcV->type()), c));
  for (int64_t j = 0; j < c; ++j) {
    llvm::Value* e = emitChunk(srcV, srcIndex(b_.CreateAdd(base, i64(j))), 1);
    r = b_.CreateInsertElement(r, b_.CreateExtractElement(e, uint64_t{0}), static_cast<uint64_t>(j));
  }
  return r;
}

void Lowering::writeTile(llvm::Value* dst, const ir::Value* v) {
  const ir::Type& t = v->type();
  int64_t n = numElems(t);
  auto it = arrays_.find(v);
  if (it != arrays_.end()) {
    if (it->second == dst) return;
    uint64_t bytes = static_cast<uint64_t>(n) * mod_.getDataLayout().getTypeAllocSize(storageTy(t));
    b_.CreateMemCpy(dst, llvm::MaybeAlign(64), it->second, llvm::MaybeAlign(64), bytes);
    return;
  }
  int64_t c = chunkWidth(n);
  versioned({v}, [&] { chunkLoop(t.shape(), c, [&](llvm::Value* base) { storeChunk(dst, t, base, emitChunk(v, base, c)); }); });
}

void Lowering::materialize(const ir::Value* v) {
  llvm::Value* arr = allocTile(v->type());
  writeTile(arr, v);
  arrays_[v] = arr;
}

// ========================================================== mask versioning
//
// Masks are nearly always `offsets < bound` with offsets an arange plus a
// scalar, and nearly always all on (only a row's or an array's tail is
// partial). Rather than testing every chunk's mask, an op's chunk loops are
// emitted twice: one scalar comparison per tile (the largest offset against
// the bound) selects a version in which the mask is the constant true —
// plain vector loads and stores, `where(mask, ...)` folded away — and
// otherwise the general version runs.

bool Lowering::intRange(const ir::Value* v, Range& r) {
  const ir::Type& t = v->type();
  if (t.isPointerLike() || !isInteger(t.dtype()) || t.dtype() == DType::I1) return false;
  // i128 holds every i32/i64 sum and difference of two lanes exactly, so the
  // bounds themselves never wrap; `ok` checks that the IR's arithmetic
  // (modulo 2^bits) did not wrap either.
  llvm::Type* w = b_.getInt128Ty();
  if (!t.isTile()) {
    llvm::Value* s = b_.CreateSExt(scalar(v), w);
    r = {s, s, b_.getTrue()};
    return true;
  }
  const ir::Op* d = v->definingOp();
  if (!d) return false;  // loop-carried tiles: anything
  switch (d->code()) {
    case OpCode::Arange:
      r = {llvm::ConstantInt::get(w, static_cast<uint64_t>(d->intAttr("start")), true),
           llvm::ConstantInt::get(w, static_cast<uint64_t>(d->intAttr("end") - 1), true), b_.getTrue()};
      return true;
    case OpCode::Splat: return intRange(d->operand(0), r);
    case OpCode::Constant: {
      llvm::Value* c = constantOf(*d, w);
      r = {c, c, b_.getTrue()};
      return true;
    }
    case OpCode::Broadcast: case OpCode::ExpandDims: case OpCode::Reshape: return intRange(d->operand(0), r);
    case OpCode::Add: case OpCode::Sub: {
      Range a, b;
      if (!intRange(d->operand(0), a) || !intRange(d->operand(1), b)) return false;
      bool add = d->code() == OpCode::Add;
      llvm::Value* lo = add ? b_.CreateAdd(a.lo, b.lo) : b_.CreateSub(a.lo, b.hi);
      llvm::Value* hi = add ? b_.CreateAdd(a.hi, b.hi) : b_.CreateSub(a.hi, b.lo);
      unsigned bits = scalarTy(t.dtype())->getIntegerBitWidth();
      auto* tmin = llvm::ConstantInt::get(w, llvm::APInt::getSignedMinValue(bits).sext(128));
      auto* tmax = llvm::ConstantInt::get(w, llvm::APInt::getSignedMaxValue(bits).sext(128));
      llvm::Value* inRange = b_.CreateAnd(b_.CreateICmpSGE(lo, tmin), b_.CreateICmpSLE(hi, tmax));
      r = {lo, hi, b_.CreateAnd(b_.CreateAnd(a.ok, b.ok), inRange)};
      return true;
    }
    default: return false;
  }
}

llvm::Value* Lowering::allOnCondition(const ir::Value* m) {
  const ir::Type& t = m->type();
  if (!t.isTile() || t.isPointerLike() || t.dtype() != DType::I1) return nullptr;
  const ir::Op* d = m->definingOp();
  if (!d) return nullptr;
  switch (d->code()) {
    case OpCode::Splat: return scalar(d->operand(0));
    case OpCode::Constant: return constantOf(*d, b_.getInt1Ty());
    case OpCode::Broadcast: case OpCode::ExpandDims: case OpCode::Reshape: return allOnCondition(d->operand(0));
    case OpCode::And: {
      llvm::Value* a = allOnCondition(d->operand(0));
      llvm::Value* b = a ? allOnCondition(d->operand(1)) : nullptr;
      return b ? b_.CreateAnd(a, b) : nullptr;
    }
    case OpCode::Cmp: {
      Range a, b;
      if (!intRange(d->operand(0), a) || !intRange(d->operand(1), b)) return nullptr;
      const std::string& p = d->strAttr("pred");
      llvm::Value* all;
      if (p == "lt") all = b_.CreateICmpSLT(a.hi, b.lo);
      else if (p == "le") all = b_.CreateICmpSLE(a.hi, b.lo);
      else if (p == "gt") all = b_.CreateICmpSGT(a.lo, b.hi);
      else if (p == "ge") all = b_.CreateICmpSGE(a.lo, b.hi);
      else return nullptr;
      return b_.CreateAnd(b_.CreateAnd(a.ok, b.ok), all);
    }
    default: return nullptr;
  }
}

void Lowering::collectMasks(const ir::Value* v, std::vector<const ir::Value*>& out,
                            std::unordered_set<const ir::Value*>& seen) {
  if (!v->type().isTile() || !seen.insert(v).second || assumeOn_.count(v)) return;
  const ir::Op* d = v->definingOp();
  // A candidate if some load or store of the kernel uses it as its mask
  // (other selects may well be partial by design: making them part of the
  // test would send every tile down the general path). A loop where such a
  // mask only feeds a select is versioned too: layernorm's variance loop,
  // `where(mask, x - mean, 0)`, runs measurably faster with the select
  // folded away. Operands are still searched (a float compare's operand may
  // be a masked load).
  if (!v->type().isPointerLike() && v->type().dtype() == DType::I1) {
    bool memMask = false;
    for (const ir::Op* u : users_[v]) {
      unsigned idx = u->code() == OpCode::Load ? 1 : 2;
      bool mem = u->code() == OpCode::Load || u->code() == OpCode::Store || u->code() == OpCode::Copy ||
                 u->code() == OpCode::AtomicAdd || u->code() == OpCode::AtomicMax;
      if (mem && u->numOperands() > idx && u->operand(idx) == v) memMask = true;
    }
    if (memMask) out.push_back(v);
  }
  // Only values computed per chunk by the loop: arrays are read as they are.
  if (!d || (arrays_.count(v) && !pending_.count(v))) return;
  if (!fused_.count(v) && !pending_.count(v) && !isFusableDef(d->code())) return;
  if (isExpensive(d->code())) expensiveBody_ = true;
  if (d->code() == OpCode::Load) loadsBody_ = true;
  for (const ir::Value* o : d->operands()) collectMasks(o, out, seen);
}

void Lowering::versioned(std::vector<const ir::Value*> roots, const std::function<void()>& body,
                         llvm::Value* extra, const std::function<void()>& generalBody) {
  const std::function<void()>& general = generalBody ? generalBody : body;
  if (general_) return general();
  std::vector<const ir::Value*> masks;
  std::unordered_set<const ir::Value*> seen;
  expensiveBody_ = false;
  for (const ir::Value* r : roots)
    if (r) collectMasks(r, masks, seen);
  // A loop computing exp, erf, divisions... per chunk is bound by that
  // arithmetic; a second copy of it would cost more compile time (code
  // generation is most of it) than the per-chunk mask tests it saves.
  if (expensiveBody_ && !extra) return body();
  std::vector<const ir::Value*> on;
  llvm::Value* cond = extra;
  for (const ir::Value* m : masks) {
    llvm::Value* c = allOnCondition(m);
    if (!c) continue;
    on.push_back(m);
    cond = cond ? b_.CreateAnd(cond, c) : c;
  }
  if (!cond) return body();
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* fast = llvm::BasicBlock::Create(ctx_, "mask.on", f);
  auto* slow = llvm::BasicBlock::Create(ctx_, "mask.some", f);
  auto* join = llvm::BasicBlock::Create(ctx_, "mask.end", f);
  b_.CreateCondBr(cond, fast, slow);
  b_.SetInsertPoint(fast);
  for (const ir::Value* m : on) assumeOn_.insert(m);
  body();
  for (const ir::Value* m : on) assumeOn_.erase(m);
  memo_.clear();  // chunks computed in one version do not dominate the other
  b_.CreateBr(join);
  b_.SetInsertPoint(slow);
  general_ = true;
  general();
  general_ = false;
  memo_.clear();
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
}

// ================================================================ elementwise

// Narrowing float conversions with one round-to-nearest-even, done here
// rather than by LLVM because the x86 backend lowers f32 -> bf16 and
// f64 -> f16 to compiler-rt calls (__truncsfbf2, __truncdfhf2) that the
// host process may not provide.
llvm::Value* Lowering::fpTrunc(llvm::Value* x, llvm::Type* to) {
  llvm::Type* xt = x->getType();
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(xt);
  auto shaped = [&](llvm::Type* s) -> llvm::Type* { return vt ? static_cast<llvm::Type*>(vec(s, vt->getNumElements())) : s; };
  llvm::Type* dst = to->getScalarType();
  if (xt->getScalarType()->isDoubleTy() && !dst->isFloatTy()) {
    // f64 -> f32 rounding to odd, so the second rounding (to 8 or 11
    // significant bits) is the correctly rounded one.
    llvm::Value* f = b_.CreateFPTrunc(x, shaped(b_.getFloatTy()));
    llvm::Value* back = b_.CreateFPExt(f, xt);
    llvm::Type* i32t = shaped(b_.getInt32Ty());
    llvm::Value* u = b_.CreateBitCast(f, i32t);
    llvm::Value* inexact = b_.CreateFCmpUNE(back, x);
    llvm::Value* away = b_.CreateFCmpOGT(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                                         b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x));
    u = b_.CreateSelect(away, b_.CreateSub(u, llvm::ConstantInt::get(i32t, 1)), u);
    u = b_.CreateSelect(inexact, b_.CreateOr(u, llvm::ConstantInt::get(i32t, 1)), u);
    x = b_.CreateBitCast(u, shaped(b_.getFloatTy()));
    xt = x->getType();
  }
  if (!dst->isBFloatTy()) return b_.CreateFPTrunc(x, to);
  // f32 -> bf16: add half an ulp (ties to even) and keep the top 16 bits;
  // NaNs stay quiet NaNs.
  llvm::Type* i32t = shaped(b_.getInt32Ty());
  llvm::Value* u = b_.CreateBitCast(x, i32t);
  llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(u, llvm::ConstantInt::get(i32t, 16)), llvm::ConstantInt::get(i32t, 1));
  llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(u, b_.CreateAdd(lsb, llvm::ConstantInt::get(i32t, 0x7fff))),
                                       llvm::ConstantInt::get(i32t, 16));
  llvm::Value* nan = b_.CreateOr(b_.CreateLShr(u, llvm::ConstantInt::get(i32t, 16)), llvm::ConstantInt::get(i32t, 0x40));
  llvm::Value* r = b_.CreateSelect(b_.CreateFCmpUNO(x, x), nan, rounded);
  return b_.CreateBitCast(b_.CreateTrunc(r, shaped(b_.getInt16Ty())), to);
}

llvm::Value* Lowering::castValue(llvm::Value* x, DType from, DType to) {
  return emitCast(b_, x, from, to, [&](llvm::Value* y, llvm::Type* t) { return fpTrunc(y, t); });
}

llvm::Value* Lowering::floatOp(const ir::Op& op, std::vector<llvm::Value*>& v) {
  if (llvm::Value* r = emitFloatOp(b_, op, v)) return r;
  // pow and the transcendentals are this target's own: LLVM's pow
  // intrinsic (a libm call the JIT resolves) and the vectorised
  // polynomials of CpuMath.
  if (op.code() == OpCode::Pow) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, v[0], v[1]);
  return emitTranscendental(b_, op.code(), v[0]);
}

llvm::Value* Lowering::elementwise(const ir::Op& op, std::vector<llvm::Value*> v) {
  switch (op.code()) {
    case OpCode::Cast: return castValue(v[0], op.operand(0)->type().dtype(), op.result()->type().dtype());
    case OpCode::Select: return b_.CreateSelect(v[0], v[1], v[2]);
    case OpCode::PtrAdd: {
      llvm::Value* off = v[1];
      llvm::Type* i64t = off->getType()->isVectorTy()
                             ? static_cast<llvm::Type*>(vec(b_.getInt64Ty(), llvm::cast<llvm::FixedVectorType>(off->getType())->getNumElements()))
                             : b_.getInt64Ty();
      off = b_.CreateSExtOrTrunc(off, i64t);
      return b_.CreateGEP(memTy(op.operand(0)->type().dtype()), v[0], off);
    }
    default: break;
  }
  const ir::Type& t0 = op.operand(0)->type();
  if (t0.isPointerLike()) {
    if (op.code() == OpCode::Cmp) {
      std::vector<llvm::Value*> w = v;
      auto* it = llvm::isa<llvm::VectorType>(v[0]->getType())
                     ? static_cast<llvm::Type*>(vec(b_.getInt64Ty(), llvm::cast<llvm::FixedVectorType>(v[0]->getType())->getNumElements()))
                     : b_.getInt64Ty();
      for (auto& x : w) x = b_.CreatePtrToInt(x, it);
      return emitIntegerOp(b_, op, w, DType::I64);
    }
    throw CompileError(std::string(op.name()) + " is not defined on pointers (at " + op.loc().str() + ")");
  }
  DType dt = t0.dtype();
  if (!isFloat(dt)) return emitIntegerOp(b_, op, v, dt);
  return emitFloatElementwise(
      b_, op, v, dt, [&](std::vector<llvm::Value*>& w) { return floatOp(op, w); },
      [&](llvm::Value* y, llvm::Type* t) { return fpTrunc(y, t); });
}

// ===================================================================== memory

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
  llvm::Value* arr =
      dstArr  ? dstArr
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

bool Lowering::loadsAsDotRows(const ir::Value* v) {
  if (!v->type().isTile() || v->type().rank() != 2 || uses_[v] != 1) return false;
  const ir::Op* u = users_[v][0];
  return u->code() == OpCode::Dot && u->operand(0) == v && u->operand(1) != v &&
         u->operand(2)->type().dtype() == v->type().dtype();
}

llvm::Value* Lowering::paddedIndex(llvm::Value* base, int64_t L, int64_t stride) {
  if (coords_.base == base) return b_.CreateAdd(b_.CreateMul(coords_.row, i64(stride)), coords_.col);
  return b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(base, i64(L)), i64(stride)), b_.CreateURem(base, i64(L)));
}

bool Lowering::loadsAsDotPanel(const ir::Value* v) {
  if (!v->type().isTile() || v->type().rank() != 2 || uses_[v] != 1) return false;
  const ir::Op* u = users_[v][0];
  return u->code() == OpCode::Dot && u->operand(1) == v && u->operand(0) != v &&
         u->operand(2)->type().dtype() == v->type().dtype();
}

llvm::Value* Lowering::panelIndex(llvm::Value* base, int64_t K, int64_t N, int64_t nr) {
  llvm::Value *k, *j;
  if (coords_.base == base) {
    k = coords_.row;
    j = coords_.col;
  } else {
    k = b_.CreateUDiv(base, i64(N));
    j = b_.CreateURem(base, i64(N));
  }
  // Panel p = j / nr holds columns [p nr, p nr + nr) as K rows of nr.
  llvm::Value* p = b_.CreateMul(b_.CreateUDiv(j, i64(nr)), i64(K * nr));
  return b_.CreateAdd(b_.CreateAdd(p, b_.CreateMul(k, i64(nr))), b_.CreateURem(j, i64(nr)));
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
  auto loop = [&](bool stream) { chunkLoop(ptr->type().shape(), c, [&](llvm::Value* base) {
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
  }); };
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
    llvm::Value* first = b_.CreatePtrToInt(b_.CreateExtractElement(emitChunk(p, i64(0), 1), uint64_t{0}), b_.getInt64Ty());
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

llvm::Value* Lowering::atomicLane(const ir::Op& op, llvm::Value* p, llvm::Value* v) {
  bool fl = v->getType()->isFloatingPointTy();
  llvm::AtomicRMWInst::BinOp kind;
  if (op.code() == OpCode::AtomicAdd) kind = fl ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add;
  // fmaximum: NaN-propagating, -0 < +0, like the IR's max.
  else kind = fl ? llvm::AtomicRMWInst::FMaximum : llvm::AtomicRMWInst::Max;
  return b_.CreateAtomicRMW(kind, p, v, llvm::MaybeAlign(), llvm::AtomicOrdering::Monotonic);
}

void Lowering::emitAtomic(const ir::Op& op) {
  const ir::Value* ptr = op.operand(0);
  const ir::Value* val = op.operand(1);
  const ir::Value* mask = op.numOperands() > 2 ? op.operand(2) : nullptr;
  if (ptr->type().dtype() == DType::I1) throw CompileError("atomics on i1 are not supported (at " + op.loc().str() + ")");
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  // One lane: if (mask) old = atomic(p, v) else old = 0.
  auto lane = [&](llvm::Value* p, llvm::Value* v, llvm::Value* m) -> llvm::Value* {
    if (!m) return atomicLane(op, p, v);
    auto* doBB = llvm::BasicBlock::Create(ctx_, "atomic", f);
    auto* joinBB = llvm::BasicBlock::Create(ctx_, "atomic.end", f);
    llvm::BasicBlock* from = b_.GetInsertBlock();
    b_.CreateCondBr(m, doBB, joinBB);
    b_.SetInsertPoint(doBB);
    llvm::Value* old = atomicLane(op, p, v);
    b_.CreateBr(joinBB);
    b_.SetInsertPoint(joinBB);
    llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2);
    phi->addIncoming(llvm::Constant::getNullValue(v->getType()), from);
    phi->addIncoming(old, doBB);
    return phi;
  };
  if (!ptr->type().isTile()) {
    scalars_[op.result()] = lane(scalar(ptr), scalar(val), mask ? scalar(mask) : nullptr);
    return;
  }
  int64_t n = numElems(ptr->type());
  llvm::Value* arr = allocTile(op.result()->type());
  chunkLoop(n, 1, [&](llvm::Value* base) {
    auto e = [&](const ir::Value* x) { return b_.CreateExtractElement(emitChunk(x, base, 1), uint64_t{0}); };
    llvm::Value* old = lane(e(ptr), e(val), mask ? e(mask) : nullptr);
    storeChunk(arr, op.result()->type(), base, b_.CreateVectorSplat(1, old));
  });
  arrays_[op.result()] = arr;
}

// ================================================================= reductions

void Lowering::emitReduce(const ir::Op& op) {
  const ir::Value* in = op.operand(0);
  const std::string& kind = op.strAttr("kind");
  int axis = static_cast<int>(op.intAttr("axis"));
  const ir::Shape& s = in->type().shape();
  DType dt = in->type().dtype();
  bool fl = isFloat(dt);
  bool narrow = dt == DType::F16 || dt == DType::BF16;
  bool argmax = kind == "argmax";
  if (kind != "sum" && kind != "max" && kind != "min" && !argmax)
    throw CompileError("reduce: unknown kind '" + kind + "' at " + op.loc().str());
  // Compute type: narrow floats accumulate in f32.
  llvm::Type* ct = narrow ? b_.getFloatTy() : scalarTy(dt);
  int64_t outer = 1, inner = 1, R = s[axis];
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];

  auto ext = [&](llvm::Value* x) -> llvm::Value* {
    if (!narrow) return x;
    return b_.CreateFPExt(x, vec(b_.getFloatTy(), llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements()));
  };
  auto identity = [&](llvm::Type* t) -> llvm::Value* {
    if (kind == "sum") return fl ? llvm::ConstantFP::getNegativeZero(t) : llvm::Constant::getNullValue(t);
    bool wantMin = kind == "min";
    if (fl) return llvm::ConstantFP::getInfinity(t, /*Negative=*/!wantMin);
    unsigned bw = t->getScalarSizeInBits();
    llvm::APInt v = wantMin ? llvm::APInt::getSignedMaxValue(bw) : llvm::APInt::getSignedMinValue(bw);
    if (dt == DType::I1) v = wantMin ? llvm::APInt::getAllOnes(1) : llvm::APInt(1, 0);
    return llvm::ConstantInt::get(t, v);
  };
  auto combine = [&](llvm::Value* a, llvm::Value* x) -> llvm::Value* {
    if (kind == "sum") return fl ? b_.CreateFAdd(a, x) : b_.CreateAdd(a, x);
    bool isMin = kind == "min";
    if (fl) return b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::minimum : llvm::Intrinsic::maximum, a, x);
    if (dt == DType::I1) return b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::umin : llvm::Intrinsic::umax, a, x);
    return b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::smin : llvm::Intrinsic::smax, a, x);
  };
  // Argmax step: lanes take x where it is greater, or NaN over a non-NaN
  // (NaN is the maximum, as for max); strict so the first index wins.
  auto better = [&](llvm::Value* x, llvm::Value* best) -> llvm::Value* {
    if (!fl) return dt == DType::I1 ? b_.CreateICmpUGT(x, best) : b_.CreateICmpSGT(x, best);
    return b_.CreateOr(b_.CreateFCmpOGT(x, best), b_.CreateAnd(b_.CreateFCmpUNO(x, x), b_.CreateFCmpORD(best, best)));
  };
  auto horizontal = [&](llvm::Value* v) -> llvm::Value* {
    if (kind == "sum") {
      if (!fl) return b_.CreateAddReduce(v);
      auto* r = b_.CreateFAddReduce(llvm::ConstantFP::getNegativeZero(ct), v);
      r->setHasAllowReassoc(true);  // a tree, as the IR allows for reduce
      return r;
    }
    bool isMin = kind == "min";
    if (fl) return isMin ? b_.CreateFPMinimumReduce(v) : b_.CreateFPMaximumReduce(v);
    if (dt == DType::I1) return isMin ? b_.CreateIntMinReduce(v, false) : b_.CreateIntMaxReduce(v, false);
    return isMin ? b_.CreateIntMinReduce(v, true) : b_.CreateIntMaxReduce(v, true);
  };
  auto finish = [&](llvm::Value* x) -> llvm::Value* {
    return narrow ? fpTrunc(x, x->getType()->isVectorTy()
                                            ? static_cast<llvm::Type*>(vec(scalarTy(dt), llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements()))
                                            : scalarTy(dt))
                  : x;
  };

  const ir::Type& rt = op.result()->type();
  bool scalarOut = !rt.isTile();
  llvm::Value* outArr = scalarOut ? nullptr : allocTile(rt);
  llvm::Value* scalarSlot = scalarOut ? entryAlloca(argmax ? b_.getInt32Ty() : scalarTy(dt)) : nullptr;

  auto forRange = [&](int64_t n, int64_t step, const std::function<void(llvm::Value*)>& body) {
    if (n == step) body(i64(0));
    else constLoop(0, n, step, body);
  };

  versioned({in}, [&] {
  if (inner == 1) {
    // Along the contiguous axis: vector accumulators over the row's chunks,
    // then one horizontal reduction per row. (The general version of a
    // versioned reduction, for partial rows, is kept small: one accumulator.)
    int64_t c = chunkWidth(R);
    int64_t chunks = R / c;
    // Accumulators: each more copy of the loop body costs code-generation
    // time, so as few as pay. A pass reading memory keeps four: more loads
    // in flight (measured: 4096x4096 layernorm and rmsnorm ~10% faster than
    // with two). A pass over cached data needs two to hide the adder's
    // latency; an input costing tens of instructions per chunk (softmax's
    // exp) hides it with one.
    int64_t U = 1;
    if (!argmax && !general_) {
      std::vector<const ir::Value*> unused;
      std::unordered_set<const ir::Value*> seen;
      expensiveBody_ = loadsBody_ = false;
      collectMasks(in, unused, seen);
      int64_t want = expensiveBody_ ? 1 : loadsBody_ ? 4 : 2;
      while (want > 1 && chunks % want != 0) want /= 2;
      U = want;
    }
    llvm::Type* vt = vec(ct, c);
    forRange(outer, 1, [&](llvm::Value* o) {
      llvm::Value* rowBase = b_.CreateMul(o, i64(R));
      std::vector<llvm::Value*> acc(U);
      llvm::Value* bestIdx = nullptr;
      for (int64_t u = 0; u < U; ++u) {
        acc[u] = entryAlloca(vt);
        b_.CreateStore(identity(vt), acc[u]);
      }
      if (argmax) {
        bestIdx = entryAlloca(vec(b_.getInt32Ty(), c));
        b_.CreateStore(iotaI32(c), bestIdx);
      }
      forRange(R, U * c, [&](llvm::Value* k) {
        for (int64_t u = 0; u < U; ++u) {
          llvm::Value* off = b_.CreateAdd(k, i64(u * c));
          llvm::Value* x = ext(emitChunk(in, b_.CreateAdd(rowBase, off), c));
          llvm::Value* a = b_.CreateLoad(vt, acc[u]);
          if (argmax) {
            llvm::Value* bi = b_.CreateLoad(vec(b_.getInt32Ty(), c), bestIdx);
            llvm::Value* upd = better(x, a);
            llvm::Value* idx = b_.CreateAdd(b_.CreateVectorSplat(static_cast<unsigned>(c), b_.CreateTrunc(off, b_.getInt32Ty())), iotaI32(c));
            b_.CreateStore(b_.CreateSelect(upd, x, a), acc[u]);
            b_.CreateStore(b_.CreateSelect(upd, idx, bi), bestIdx);
          } else {
            b_.CreateStore(combine(a, x), acc[u]);
          }
        }
      });
      llvm::Value* result;
      if (argmax) {
        llvm::Value* vals = b_.CreateLoad(vt, acc[0]);
        llvm::Value* idxs = b_.CreateLoad(vec(b_.getInt32Ty(), c), bestIdx);
        llvm::Value* bv = b_.CreateExtractElement(vals, uint64_t{0});
        llvm::Value* bi = b_.CreateExtractElement(idxs, uint64_t{0});
        for (int64_t j = 1; j < c; ++j) {
          llvm::Value* v = b_.CreateExtractElement(vals, static_cast<uint64_t>(j));
          llvm::Value* i = b_.CreateExtractElement(idxs, static_cast<uint64_t>(j));
          llvm::Value* eq = fl ? b_.CreateOr(b_.CreateFCmpOEQ(v, bv), b_.CreateAnd(b_.CreateFCmpUNO(v, v), b_.CreateFCmpUNO(bv, bv)))
                               : b_.CreateICmpEQ(v, bv);
          llvm::Value* take = b_.CreateOr(better(v, bv), b_.CreateAnd(eq, b_.CreateICmpSLT(i, bi)));
          bv = b_.CreateSelect(take, v, bv);
          bi = b_.CreateSelect(take, i, bi);
        }
        result = bi;
      } else {
        llvm::Value* a = b_.CreateLoad(vt, acc[0]);
        for (int64_t u = 1; u < U; ++u) a = combine(a, b_.CreateLoad(vt, acc[u]));
        result = finish(horizontal(a));
      }
      if (scalarOut) b_.CreateStore(result, scalarSlot);
      else storeChunk(outArr, rt, o, b_.CreateVectorSplat(1, result));
    });
  } else {
    // Along a non-last axis: vectorised over the inner dims, each lane
    // accumulating one output element across the reduced axis.
    int64_t c = chunkWidth(inner);
    llvm::Type* vt = vec(ct, c);
    llvm::Value* acc = entryAlloca(vt);
    llvm::Value* bestIdx = argmax ? entryAlloca(vec(b_.getInt32Ty(), c)) : nullptr;
    forRange(outer, 1, [&](llvm::Value* o) {
      forRange(inner, c, [&](llvm::Value* ic) {
        b_.CreateStore(identity(vt), acc);
        if (argmax) b_.CreateStore(llvm::Constant::getNullValue(vec(b_.getInt32Ty(), c)), bestIdx);
        forRange(R, 1, [&](llvm::Value* r) {
          llvm::Value* base = b_.CreateAdd(b_.CreateAdd(b_.CreateMul(o, i64(R * inner)), b_.CreateMul(r, i64(inner))), ic);
          llvm::Value* x = ext(emitChunk(in, base, c));
          llvm::Value* a = b_.CreateLoad(vt, acc);
          if (argmax) {
            llvm::Value* upd = better(x, a);
            llvm::Value* bi = b_.CreateLoad(vec(b_.getInt32Ty(), c), bestIdx);
            llvm::Value* idx = b_.CreateVectorSplat(static_cast<unsigned>(c), b_.CreateTrunc(r, b_.getInt32Ty()));
            b_.CreateStore(b_.CreateSelect(upd, x, a), acc);
            b_.CreateStore(b_.CreateSelect(upd, idx, bi), bestIdx);
          } else {
            b_.CreateStore(combine(a, x), acc);
          }
        });
        llvm::Value* res = argmax ? b_.CreateLoad(vec(b_.getInt32Ty(), c), bestIdx) : finish(b_.CreateLoad(vt, acc));
        storeChunk(outArr, rt, b_.CreateAdd(b_.CreateMul(o, i64(inner)), ic), res);
      });
    });
  }
  });
  if (scalarOut) scalars_[op.result()] = b_.CreateLoad(argmax ? b_.getInt32Ty() : scalarTy(dt), scalarSlot);
  else arrays_[op.result()] = outArr;
}

// ======================================================================== dot

void Lowering::emitDot(const ir::Op& op) {
  // C = acc + A B through the register-blocked microkernel (CpuDot.h). The
  // kernel wants A (M x K) row-major and B (K x N) in its panel layout,
  // both in the compute type (f32, or i32 for i8 dots), and updates C in
  // place.
  const ir::Value* a = op.operand(0);
  const ir::Value* bv = op.operand(1);
  const ir::Value* acc = op.operand(2);
  int64_t M = a->type().shape()[0], K = a->type().shape()[1], N = bv->type().shape()[1];
  DType in = a->type().dtype(), out = acc->type().dtype();  // out: f32 or i32 (verifier)
  for (const ir::Value* v : {a, bv}) {
    if (arrays_.count(v)) continue;
    // A load sunk into the dot (planLoadFusion: nothing writes memory in
    // between) is emitted here as a whole-tile load: B lands in the panel
    // layout and the next iteration's tiles are prefetched.
    const ir::Op* d = v->definingOp();
    if (d && d->code() == OpCode::Load && fused_.count(v)) {
      fused_.erase(v);
      emitLoad(*d);
    } else {
      materialize(v);
    }
  }
  // f16/bf16/i8 operands are widened once here, not per use in the kernel
  // (each element of A is used N times, each of B M times).
  llvm::Value* aArr = arrays_.at(a);
  auto rs = rowStride_.find(a);
  int64_t lda = rs != rowStride_.end() ? rs->second : K;
  if (in != out) {
    ir::Type wt = ir::Type::tile(ir::Type::scalar(out), a->type().shape());
    aArr = allocTile(wt);
    int64_t c = chunkWidth(numElems(wt));
    chunkLoop(wt.shape(), c, [&](llvm::Value* base) { storeChunk(aArr, wt, base, castValue(emitChunk(a, base, c), in, out)); });
  }
  // B into the panel layout (widened on the way) unless its load put it there.
  llvm::Value* bArr = arrays_.at(bv);
  if (!panelB_.count(bv)) {
    llvm::Type* ct = scalarTy(out);
    int64_t nr = dotBlocking(tgt_, ct).nr(), c = chunkWidth(N);
    bArr = entryAlloca(llvm::ArrayType::get(ct, static_cast<uint64_t>(panelElems(K, N, nr))), 64);
    chunkLoop(bv->type().shape(), c, [&](llvm::Value* base) {
      llvm::Value* x = emitChunk(bv, base, c);
      if (in != out) x = castValue(x, in, out);
      b_.CreateAlignedStore(x, b_.CreateInBoundsGEP(ct, bArr, panelIndex(base, K, N, nr)), llvm::Align(4));
    });
  }
  // The accumulator is updated in place when nothing can observe the old
  // value: its only use is this dot, it belongs to this block (not to an
  // enclosing one, whose value must survive the loop), and, for a loop-carried
  // accumulator, the result goes straight back into the same carried slot
  // (a yield into another slot would copy from storage it has overwritten).
  const ir::Block* blk = op.parent();
  bool inPlace = false;
  if (arrays_.count(acc) && uses_[acc] == 1 && !pending_.count(acc) && acc->ownerBlock() == blk) {
    if (!acc->isBlockArg()) {
      inPlace = true;
    } else if (const ir::Region* r = blk->parent(); r && r->parentOp() && r->parentOp()->code() == OpCode::For &&
                                                    acc->index() >= 1 && uses_[op.result()] == 1) {
      const ir::Op* u = users_[op.result()][0];
      inPlace = u->code() == OpCode::Yield && u->parent() == blk && u->numOperands() > acc->index() - 1 &&
                u->operand(acc->index() - 1) == op.result();
    }
  }
  llvm::Value* outArr;
  if (inPlace) {
    outArr = arrays_.at(acc);
  } else {
    outArr = allocTile(op.result()->type());
    writeTile(outArr, acc);
  }
  DotArrays d;
  d.a = aArr;
  d.b = bArr;
  d.c = outArr;
  d.M = M;
  d.N = N;
  d.K = K;
  d.elemTy = scalarTy(out);
  d.lda = lda;
  // Prefetch units: one row of an operand's next tile each (a row pointer
  // computed once, then one prefetch per cache line of the row).
  auto pf = dotPrefetch_.find(&op);
  if (pf != dotPrefetch_.end()) {
    std::vector<PrefetchStream> streams = pf->second;
    struct Rows {
      int64_t first, count, len, lines;  // unit range, row length, lines per row
    };
    std::vector<Rows> rows;
    int64_t units = 0;
    for (const PrefetchStream& st : streams) {
      const ir::Shape& sh = st.ptr->type().shape();
      int64_t bytes = static_cast<int64_t>(mod_.getDataLayout().getTypeAllocSize(memTy(st.ptr->type().dtype())));
      rows.push_back({units, sh[0], sh[1], (sh[1] * bytes + 63) / 64});
      units += sh[0];
    }
    d.prefetchUnits = units;
    d.prefetch = [this, streams, rows](llvm::Value* unit) {
      // unit < units (the kernel guards it). Streams are few (A and B):
      // select the stream's row by comparisons, no division by a variable.
      for (size_t s = 0; s < streams.size(); ++s) {
        const PrefetchStream& st = streams[s];
        const Rows& r = rows[s];
        llvm::Function* f = b_.GetInsertBlock()->getParent();
        auto* in = llvm::BasicBlock::Create(ctx_, "pf.row", f);
        auto* next = llvm::BasicBlock::Create(ctx_, "pf.next", f);
        llvm::Value* rel = b_.CreateSub(unit, i64(r.first));
        b_.CreateCondBr(b_.CreateICmpULT(rel, i64(r.count)), in, next);
        b_.SetInsertPoint(in);
        llvm::Value* cur = scalars_.at(st.iv);
        scalars_[st.iv] = st.nextIv;
        Coords saved = coords_;
        coords_ = {};
        llvm::Value* p = firstPointer(st.ptr, b_.CreateMul(rel, i64(r.len)), 1);
        coords_ = saved;
        scalars_[st.iv] = cur;
        for (int64_t l = 0; l < r.lines; ++l)
          b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                             {b_.CreateConstGEP1_64(b_.getInt8Ty(), p, static_cast<uint64_t>(l * 64)), b_.getInt32(0),
                              b_.getInt32(3), b_.getInt32(1)});
        b_.CreateBr(next);
        b_.SetInsertPoint(next);
      }
    };
  }
  emitDotKernel(b_, tgt_, d);
  arrays_[op.result()] = outArr;
}

// ============================================================== control flow

void Lowering::emitFor(const ir::Op& op) {
  llvm::Value* lo = scalar(op.operand(0));
  llvm::Value* hi = scalar(op.operand(1));
  llvm::Value* step = scalar(op.operand(2));
  std::vector<llvm::Value*> storage;
  for (unsigned i = 0; i < op.numResults(); ++i) {
    const ir::Value* init = op.operand(3 + i);
    if (init->type().isTile()) {
      storage.push_back(allocTile(init->type()));
      writeTile(storage.back(), init);
    } else {
      storage.push_back(entryAlloca(elemTy(init->type())));
      b_.CreateStore(scalar(init), storage.back());
    }
  }
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, "for.head", f);
  auto* body = llvm::BasicBlock::Create(ctx_, "for.body", f);
  auto* exit = llvm::BasicBlock::Create(ctx_, "for.end", f);
  // A non-positive step runs zero iterations (IR semantics), so the test
  // is evaluated once outside the loop.
  llvm::Value* positive = b_.CreateICmpSGT(step, llvm::ConstantInt::get(step->getType(), 0));
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* iv = b_.CreatePHI(lo->getType(), 2, "iv");
  iv->addIncoming(lo, pre);
  b_.CreateCondBr(b_.CreateAnd(positive, b_.CreateICmpSLT(iv, hi)), body, exit);
  b_.SetInsertPoint(body);
  const ir::Block& blk = op.region(0).block();
  scalars_[blk.arg(0)] = iv;
  for (unsigned i = 0; i < op.numResults(); ++i) {
    const ir::Value* a = blk.arg(i + 1);
    if (a->type().isTile()) arrays_[a] = storage[i];
    else scalars_[a] = b_.CreateLoad(elemTy(a->type()), storage[i]);
  }
  yieldTargets_.push_back({storage, true});
  emitBlock(blk);
  yieldTargets_.pop_back();
  // iv + step may overflow only when the loop is about to exit; the wrap
  // would restart it, so exit explicitly on overflow.
  llvm::Value* sum = b_.CreateBinaryIntrinsic(llvm::Intrinsic::sadd_with_overflow, iv, step);
  llvm::Value* next = b_.CreateExtractValue(sum, 0);
  llvm::Value* ovf = b_.CreateExtractValue(sum, 1);
  iv->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(ovf, exit, header);
  b_.SetInsertPoint(exit);
  for (unsigned i = 0; i < op.numResults(); ++i) {
    const ir::Value* r = op.result(i);
    if (r->type().isTile()) arrays_[r] = storage[i];
    else scalars_[r] = b_.CreateLoad(elemTy(r->type()), storage[i]);
  }
}

void Lowering::emitIf(const ir::Op& op) {
  std::vector<llvm::Value*> storage;
  for (unsigned i = 0; i < op.numResults(); ++i) {
    const ir::Type& t = op.result(i)->type();
    storage.push_back(t.isTile() ? allocTile(t) : entryAlloca(elemTy(t)));
  }
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* thenBB = llvm::BasicBlock::Create(ctx_, "if.then", f);
  auto* elseBB = llvm::BasicBlock::Create(ctx_, "if.else", f);
  auto* endBB = llvm::BasicBlock::Create(ctx_, "if.end", f);
  b_.CreateCondBr(scalar(op.operand(0)), thenBB, elseBB);
  for (unsigned r = 0; r < 2; ++r) {
    b_.SetInsertPoint(r == 0 ? thenBB : elseBB);
    if (r < op.numRegions()) {
      yieldTargets_.push_back({storage, false});
      emitBlock(op.region(r).block());
      yieldTargets_.pop_back();
    }
    b_.CreateBr(endBB);
  }
  b_.SetInsertPoint(endBB);
  for (unsigned i = 0; i < op.numResults(); ++i) {
    const ir::Value* r = op.result(i);
    if (r->type().isTile()) arrays_[r] = storage[i];
    else scalars_[r] = b_.CreateLoad(elemTy(r->type()), storage[i]);
  }
}

void Lowering::emitYield(const ir::Op& op) {
  TS_ASSERT(!yieldTargets_.empty(), "yield outside a region");
  const YieldTarget& t = yieldTargets_.back();
  TS_ASSERT(t.storage.size() == op.numOperands(), "yield arity");
  // First compute everything (tiles that are not yet arrays go to
  // temporaries), then write the storage: a yielded value may read the
  // storage of another carried value.
  std::vector<llvm::Value*> vals(op.numOperands());
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    const ir::Value* v = op.operand(i);
    if (!v->type().isTile()) {
      vals[i] = scalar(v);
    } else if (t.viaTemps && !arrays_.count(v)) {
      materialize(v);
    }
  }
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    const ir::Value* v = op.operand(i);
    if (v->type().isTile()) writeTile(t.storage[i], v);
    else b_.CreateStore(vals[i], t.storage[i]);
  }
}

// ======================================================================= ops

void Lowering::emitBlock(const ir::Block& blk) {
  for (auto& op : blk.ops()) emitOp(*op);
}

void Lowering::emitOp(const ir::Op& op) {
  if (checkedOps_) emitBoundsCheck(op);
  switch (op.code()) {
    case OpCode::ProgramId: scalars_[op.result()] = pid_[op.intAttr("axis")]; return;
    case OpCode::NumPrograms: scalars_[op.result()] = grid_[op.intAttr("axis")]; return;
    case OpCode::Load:
      // No effect to keep if unused; fused and deferred loads are emitted
      // by their consumer.
      if (uses_[op.result()] == 0 || fused_.count(op.result()) || deferred_.count(op.result())) return;
      return emitLoad(op);
    case OpCode::Store: return emitStore(op);
    case OpCode::AtomicAdd:
    case OpCode::AtomicMax: return emitAtomic(op);
    case OpCode::Alloc: arrays_[op.result()] = allocTile(op.result()->type()); return;
    case OpCode::LocalLoad: {
      // A copy: later local_stores must not change this value.
      llvm::Value* arr = allocTile(op.result()->type());
      const ir::Value* buf = op.operand(0);
      arrays_[op.result()] = arr;
      uint64_t elem = mod_.getDataLayout().getTypeAllocSize(memTy(buf->type().dtype()));
      uint64_t bytes = static_cast<uint64_t>(numElems(buf->type())) * elem;
      // A slot view starts at index * slot bytes: only element-aligned.
      llvm::Align srcAlign(slotViews_.count(buf) ? elem : 64);
      b_.CreateMemCpy(arr, llvm::MaybeAlign(64), arrays_.at(buf), srcAlign, bytes);
      return;
    }
    case OpCode::LocalStore: return writeTile(arrays_.at(op.operand(0)), op.operand(1));
    // `copy {async = 1}` may complete at any time up to the async_wait that
    // retires it; completing it right here, in program order, is one of the
    // allowed executions (masked-off lanes load 0, as the model requires).
    case OpCode::Copy: return emitLoad(op, arrays_.at(op.operand(0)));
    case OpCode::BufferSlot: {
      // A view: the slot's elements are the contiguous run starting at
      // index * (elements per slot) of the buffer's row-major array.
      const ir::Value* buf = op.operand(0);
      llvm::Value* idx = b_.CreateSExtOrTrunc(scalar(op.operand(1)), b_.getInt64Ty());
      llvm::Value* off = b_.CreateMul(idx, i64(numElems(op.result()->type())));
      arrays_[op.result()] = b_.CreateGEP(storageTy(buf->type()), arrays_.at(buf), off);
      slotViews_.insert(op.result());
      return;
    }
    // Every copy has completed when it was issued (above): nothing to wait for.
    case OpCode::AsyncCommit:
    case OpCode::AsyncWait: return;
    case OpCode::Barrier: return;  // one thread runs a whole program on the CPU
    case OpCode::Reduce: {
      auto d = deferredAt_.find(&op);
      if (d == deferredAt_.end()) return emitReduce(op);
      for (const ir::Value* v : d->second) pending_[v] = allocTile(v->type());
      emitReduce(op);
      for (const ir::Value* v : d->second) arrays_[v] = pending_.at(v);
      pending_.clear();
      memo_.clear();
      return;
    }
    case OpCode::Dot: return emitDot(op);
    case OpCode::For: return emitFor(op);
    case OpCode::If: return emitIf(op);
    case OpCode::Yield: return emitYield(op);
    case OpCode::Return: b_.CreateRetVoid(); b_.ClearInsertionPoint(); return;
    case OpCode::Transpose:
      if (!arrays_.count(op.operand(0))) TS_UNREACHABLE("transpose source not materialised");
      if (uses_[op.result()]) materialize(op.result());
      return;
    default: break;
  }
  TS_ASSERT(isFusableDef(op.code()), std::string("cpu lowering: unhandled op ") + op.name());
  const ir::Value* r = op.result();
  if (!r->type().isTile()) {
    if (op.code() == OpCode::Constant) {
      scalars_[r] = constantOf(op, elemTy(r->type()));
      return;
    }
    std::vector<llvm::Value*> v;
    for (const ir::Value* o : op.operands()) v.push_back(scalar(o));
    scalars_[r] = elementwise(op, std::move(v));
    return;
  }
  if (fused_.count(r) || deferred_.count(r) || uses_[r] == 0) return;  // emitted by its consumer / dead
  materialize(r);
}

// ============================================================ bounds checks

int Lowering::rootArg(const ir::Value* v) const {
  // Global pointers come from pointer arguments through offsets and shape
  // changes only (pointers are never loaded from memory); a select between
  // two arguments has no single origin.
  while (const ir::Op* d = v->definingOp()) {
    switch (d->code()) {
      case OpCode::PtrAdd: case OpCode::Splat: case OpCode::Broadcast: case OpCode::ExpandDims:
      case OpCode::Reshape: case OpCode::Transpose:
        v = d->operand(0);
        continue;
      default: return -1;
    }
  }
  for (unsigned i = 0; i < fn_.numArgs(); ++i)
    if (fn_.arg(i) == v) return static_cast<int>(i);
  return -1;
}

void Lowering::emitBoundsCheck(const ir::Op& op) {
  switch (op.code()) {
    case OpCode::Load: case OpCode::Store: case OpCode::AtomicAdd: case OpCode::AtomicMax: case OpCode::Copy: break;
    default: return;
  }
  if (op.code() == OpCode::Load && uses_[op.result()] == 0) return;  // never performed
  const MemOperands m = memOperands(op);
  if (m.ptr->type().space() != ir::MemSpace::Global) return;  // shared / local buffers are sized by the compiler
  const int32_t opId = static_cast<int32_t>(checkedOps_->size());
  checkedOps_->push_back(op.name() + (op.loc().known() ? " @ " + op.loc().str() : std::string()));
  const int arg = rootArg(m.ptr);
  const int64_t eb = static_cast<int64_t>(mod_.getDataLayout().getTypeAllocSize(m.st));
  llvm::Type* i64t = b_.getInt64Ty();

  // out(addr) for a vector (or scalar) of i64 addresses: outside
  // [base, base + extent - eb] of the pointer's argument, or of every pointer
  // argument when its origin is not static. Offsets are signed, so an
  // address below the base is caught too.
  auto outside = [&](llvm::Value* addr, int64_t c) -> std::pair<llvm::Value*, llvm::Value*> {
    auto splat = [&](llvm::Value* x) { return c == 1 ? x : b_.CreateVectorSplat(static_cast<unsigned>(c), x); };
    auto outOf = [&](unsigned i) {
      llvm::Value* off = b_.CreateSub(addr, splat(argBase_[i]));
      llvm::Value* last = splat(b_.CreateSub(argExtent_[i], b_.getInt64(static_cast<uint64_t>(eb))));
      return std::make_pair(b_.CreateOr(b_.CreateICmpSLT(off, llvm::Constant::getNullValue(off->getType())),
                                        b_.CreateICmpSGT(off, last)),
                            off);
    };
    if (arg >= 0) return outOf(static_cast<unsigned>(arg));
    llvm::Value* out = nullptr;
    for (unsigned i = 0; i < fn_.numArgs(); ++i)
      if (argBase_[i]) out = out ? b_.CreateAnd(out, outOf(i).first) : outOf(i).first;
    if (!out) out = c == 1 ? b_.getTrue() : llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), static_cast<unsigned>(c)));
    return {out, addr};
  };

  llvm::Value* badFlag = entryAlloca(b_.getInt1Ty());
  llvm::Value* badOff = entryAlloca(i64t);
  b_.CreateStore(b_.getFalse(), badFlag);
  if (!m.ptr->type().isTile()) {
    auto [out, off] = outside(b_.CreatePtrToInt(scalar(m.ptr), i64t), 1);
    if (m.mask) out = b_.CreateAnd(out, scalar(m.mask));
    b_.CreateStore(out, badFlag);
    b_.CreateStore(off, badOff);
  } else {
    const int64_t c = chunkWidth(numElems(m.ptr->type()));
    chunkLoop(m.ptr->type().shape(), c, [&](llvm::Value* base) {
      llvm::Value* p = emitChunk(m.ptr, base, c);
      llvm::Value* addr = c == 1 ? b_.CreatePtrToInt(b_.CreateExtractElement(p, uint64_t{0}), i64t)
                                 : b_.CreatePtrToInt(p, llvm::FixedVectorType::get(i64t, static_cast<unsigned>(c)));
      auto [out, off] = outside(addr, c);
      if (m.mask) {
        llvm::Value* mk = emitChunk(m.mask, base, c);
        out = b_.CreateAnd(out, c == 1 ? b_.CreateExtractElement(mk, uint64_t{0}) : mk);
      }
      llvm::Value* any = c == 1 ? out : b_.CreateOrReduce(out);
      // The smallest offending offset of the chunk (all that is reported).
      llvm::Value* first = off;
      if (c > 1) {
        llvm::Value* masked = b_.CreateSelect(out, off, llvm::ConstantInt::get(off->getType(), UINT64_MAX));
        first = b_.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_umin, masked);
      }
      llvm::Value* was = b_.CreateLoad(b_.getInt1Ty(), badFlag);
      b_.CreateStore(b_.CreateOr(was, any), badFlag);
      b_.CreateStore(b_.CreateSelect(b_.CreateAnd(any, b_.CreateNot(was)), first, b_.CreateLoad(i64t, badOff)), badOff);
    });
  }
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* fail = llvm::BasicBlock::Create(ctx_, "bounds.fail", f);
  auto* ok = llvm::BasicBlock::Create(ctx_, "bounds.ok", f);
  b_.CreateCondBr(b_.CreateLoad(b_.getInt1Ty(), badFlag), fail, ok, llvm::MDBuilder(ctx_).createUnlikelyBranchWeights());
  b_.SetInsertPoint(fail);
  // The first program to fail fills the record; every failing program stops
  // before the access.
  auto* won = llvm::BasicBlock::Create(ctx_, "bounds.record", f);
  auto* out = llvm::BasicBlock::Create(ctx_, "bounds.return", f);
  llvm::Value* violated = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), record_, BoundsCheckRecord::kViolated);
  llvm::Value* cas = b_.CreateAtomicCmpXchg(violated, b_.getInt32(0), b_.getInt32(1), llvm::MaybeAlign(4),
                                            llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic);
  b_.CreateCondBr(b_.CreateExtractValue(cas, 1), won, out);
  b_.SetInsertPoint(won);
  auto field = [&](size_t at) { return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), record_, at); };
  b_.CreateStore(b_.getInt32(static_cast<uint32_t>(opId)), field(BoundsCheckRecord::kOpId));
  b_.CreateStore(b_.getInt32(static_cast<uint32_t>(arg)), field(BoundsCheckRecord::kArg));
  b_.CreateStore(b_.CreateLoad(i64t, badOff), field(BoundsCheckRecord::kOffset));
  b_.CreateBr(out);
  b_.SetInsertPoint(out);
  b_.CreateRetVoid();
  b_.SetInsertPoint(ok);
}

// ===================================================================== module

void Lowering::run(const std::string& entryName) {
  plan();
  llvm::Type* i32 = b_.getInt32Ty();
  std::vector<llvm::Type*> params;
  for (unsigned i = 0; i < fn_.numArgs(); ++i) params.push_back(elemTy(fn_.arg(i)->type()));
  for (int i = 0; i < 6; ++i) params.push_back(i32);
  if (checkedOps_) params.push_back(b_.getPtrTy());  // the BoundsCheckRecord
  auto* bodyTy = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  auto* body = llvm::Function::Create(bodyTy, llvm::Function::InternalLinkage, "program." + fn_.name(), mod_);
  auto* entryTy = llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy(), b_.getInt64Ty(), b_.getInt64Ty(), b_.getPtrTy()}, false);
  auto* entry = llvm::Function::Create(entryTy, llvm::Function::ExternalLinkage, entryName, mod_);
  for (llvm::Function* f : {body, entry}) {
    f->addFnAttr("target-cpu", tgt_.cpu);
    if (!tgt_.features.empty()) f->addFnAttr("target-features", tgt_.features);
    f->addFnAttr("prefer-vector-width", std::to_string(tgt_.vectorBits));
    f->addFnAttr("min-legal-vector-width", std::to_string(tgt_.vectorBits));
    f->addFnAttr(llvm::Attribute::NoUnwind);
  }
  body->addFnAttr(llvm::Attribute::AlwaysInline);

  // ---- the per-program body
  allocaBlock_ = llvm::BasicBlock::Create(ctx_, "allocas", body);
  auto* start = llvm::BasicBlock::Create(ctx_, "start", body);
  b_.SetInsertPoint(start);
  for (unsigned i = 0; i < fn_.numArgs(); ++i) {
    body->getArg(i)->setName(fn_.arg(i)->nameHint);
    scalars_[fn_.arg(i)] = body->getArg(i);
  }
  for (int i = 0; i < 3; ++i) {
    pid_[i] = body->getArg(fn_.numArgs() + i);
    grid_[i] = body->getArg(fn_.numArgs() + 3 + i);
  }
  if (checkedOps_) {
    record_ = body->getArg(fn_.numArgs() + 6);
    llvm::Value* extents = b_.CreateLoad(b_.getPtrTy(), record_);  // BoundsCheckRecord::kExtents == 0
    argBase_.assign(fn_.numArgs(), nullptr);
    argExtent_.assign(fn_.numArgs(), nullptr);
    for (unsigned i = 0; i < fn_.numArgs(); ++i) {
      if (!fn_.arg(i)->type().isPointer()) continue;
      argBase_[i] = b_.CreatePtrToInt(body->getArg(i), b_.getInt64Ty());
      argExtent_[i] = b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), extents, i));
    }
  }
  emitBlock(fn_.body());
  TS_ASSERT(b_.GetInsertBlock() == nullptr, "kernel body does not end in return");
  llvm::IRBuilder<>(allocaBlock_).CreateBr(start);

  // ---- the entry: for id in [begin, end): body(args..., pid(id), grid)
  auto* e0 = llvm::BasicBlock::Create(ctx_, "entry", entry);
  auto* loop = llvm::BasicBlock::Create(ctx_, "programs", entry);
  auto* done = llvm::BasicBlock::Create(ctx_, "done", entry);
  b_.SetInsertPoint(e0);
  llvm::Value* args = entry->getArg(0);
  llvm::Value* begin = entry->getArg(1);
  llvm::Value* end = entry->getArg(2);
  llvm::Value* gridP = entry->getArg(3);
  std::vector<llvm::Value*> callArgs;
  for (unsigned i = 0; i < fn_.numArgs(); ++i) {
    const ir::Type& t = fn_.arg(i)->type();
    if (!t.isScalar() && !t.isPointer())
      throw CompileError("kernel argument " + std::to_string(i) + " of @" + fn_.name() + " has type " + t.str() +
                         "; kernel arguments must be scalars or pointers");
    llvm::Value* slot = b_.CreateLoad(b_.getPtrTy(), b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), args, i));
    llvm::Value* v = b_.CreateLoad(t.isPointer() ? b_.getPtrTy() : memTy(t.dtype()), slot);
    if (t.isScalar() && t.dtype() == DType::I1) v = b_.CreateICmpNE(v, b_.getInt8(0));
    callArgs.push_back(v);
  }
  llvm::Value* g[3];
  for (int i = 0; i < 3; ++i) g[i] = b_.CreateLoad(i32, b_.CreateConstInBoundsGEP1_64(i32, gridP, i));
  llvm::Value* gx = b_.CreateZExt(g[0], b_.getInt64Ty());
  llvm::Value* gxy = b_.CreateMul(gx, b_.CreateZExt(g[1], b_.getInt64Ty()));
  b_.CreateCondBr(b_.CreateICmpSLT(begin, end), loop, done);
  b_.SetInsertPoint(loop);
  llvm::PHINode* id = b_.CreatePHI(b_.getInt64Ty(), 2, "id");
  id->addIncoming(begin, e0);
  llvm::Value* px = b_.CreateURem(id, gx);
  llvm::Value* py = b_.CreateURem(b_.CreateUDiv(id, gx), b_.CreateZExt(g[1], b_.getInt64Ty()));
  llvm::Value* pz = b_.CreateUDiv(id, gxy);
  std::vector<llvm::Value*> full = callArgs;
  for (llvm::Value* p : {px, py, pz}) full.push_back(b_.CreateTrunc(p, i32));
  for (int i = 0; i < 3; ++i) full.push_back(g[i]);
  if (checkedOps_)
    full.push_back(b_.CreateLoad(b_.getPtrTy(), b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), args, fn_.numArgs())));
  b_.CreateCall(body, full);
  llvm::Value* next = b_.CreateAdd(id, b_.getInt64(1));
  id->addIncoming(next, loop);
  b_.CreateCondBr(b_.CreateICmpSLT(next, end), loop, done);
  b_.SetInsertPoint(done);
  // Streaming stores are weakly ordered (they bypass the store buffer's
  // ordering): an sfence makes them globally visible before the launch
  // reports completion to another thread through ordinary synchronisation.
  if (usedStreaming_) {
    if (llvm::Triple(tgt_.triple).isX86())
      b_.CreateCall(llvm::Intrinsic::getOrInsertDeclaration(&mod_, llvm::Intrinsic::x86_sse_sfence));
    else
      b_.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
  }
  b_.CreateRetVoid();
}

}  // namespace

std::unique_ptr<llvm::Module> lowerToLLVM(const ir::Function& f, llvm::LLVMContext& ctx,
                                          const CpuTargetInfo& target, const llvm::DataLayout& layout,
                                          const std::string& entryName, std::vector<std::string>* checkedOps) {
  auto m = std::make_unique<llvm::Module>(f.name(), ctx);
  m->setTargetTriple(llvm::Triple(target.triple));
  m->setDataLayout(layout);
  Lowering l(f, ctx, *m, target, checkedOps);
  l.run(entryName);
  legalizeBf16MaskedMemory(*m);  // CpuDot.h: x86 has no bf16 masked moves
  return m;
}

}  // namespace tessera::codegen::cpu

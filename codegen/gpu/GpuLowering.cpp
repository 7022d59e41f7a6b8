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
#include "codegen/gpu/GpuLowering.h"

#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <llvm/BinaryFormat/Dwarf.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DIBuilder.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/ConstantFolder.h>
#include <llvm/IR/IRBuilderFolder.h>

#include "tessera/ir/analysis/AxisInfo.h"
#include "codegen/llvm/Elementwise.h"
#include "codegen/gpu/GpuDot.h"
#include "codegen/llvm/VectorMath.h"
#include "tessera/ir/analysis/ResourceCheck.h"
#include "tessera/support/Error.h"

namespace tessera::codegen {

namespace {

using ir::OpCode;
using Slots = std::vector<llvm::Value*>;

/// ConstantFolder plus the algebraic identities of the lowering's unrolled
/// index arithmetic (x + 0, x * 1, x * 0, x udiv 1, x urem 1, x & 0, x | 0,
/// x >> 0, GEP by 0, select on a constant): the module handed to LLVM is
/// smaller, so printing, verification, the passes and instruction selection
/// all have less to do. Only identities of an instruction's own operands:
/// llvm::InstSimplifyFolder also looks through operands, which is wrong
/// while a loop's phis still miss their back-edge value (it would fold
/// `urem %iv, 3` of a phi whose only incoming value so far is 0 to 0).
class IdentityFolder final : public llvm::IRBuilderFolder {
 public:
  llvm::Value* FoldBinOp(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r) const override {
    if (llvm::Value* v = identity(opc, l, r)) return v;
    return cf_.FoldBinOp(opc, l, r);
  }
  llvm::Value* FoldExactBinOp(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r,
                              bool exact) const override {
    if (llvm::Value* v = identity(opc, l, r)) return v;
    return cf_.FoldExactBinOp(opc, l, r, exact);
  }
  llvm::Value* FoldNoWrapBinOp(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r, bool nuw,
                               bool nsw) const override {
    if (llvm::Value* v = identity(opc, l, r)) return v;
    return cf_.FoldNoWrapBinOp(opc, l, r, nuw, nsw);
  }
  llvm::Value* FoldBinOpFMF(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r,
                            llvm::FastMathFlags fmf) const override {
    return cf_.FoldBinOpFMF(opc, l, r, fmf);
  }
  llvm::Value* FoldUnOpFMF(llvm::Instruction::UnaryOps opc, llvm::Value* v, llvm::FastMathFlags fmf) const override {
    return cf_.FoldUnOpFMF(opc, v, fmf);
  }
  llvm::Value* FoldCmp(llvm::CmpInst::Predicate p, llvm::Value* l, llvm::Value* r) const override {
    return cf_.FoldCmp(p, l, r);
  }
  llvm::Value* FoldGEP(llvm::Type* ty, llvm::Value* ptr, llvm::ArrayRef<llvm::Value*> idx,
                       llvm::GEPNoWrapFlags nw) const override {
    if (idx.size() == 1)
      if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(idx[0]); c && c->isZero() && !ptr->getType()->isVectorTy())
        return ptr;
    return cf_.FoldGEP(ty, ptr, idx, nw);
  }
  llvm::Value* FoldSelect(llvm::Value* c, llvm::Value* t, llvm::Value* f) const override {
    if (auto* k = llvm::dyn_cast<llvm::ConstantInt>(c)) return k->isOne() ? t : f;
    if (t == f) return t;
    return cf_.FoldSelect(c, t, f);
  }
  llvm::Value* FoldExtractValue(llvm::Value* agg, llvm::ArrayRef<unsigned> idx) const override {
    return cf_.FoldExtractValue(agg, idx);
  }
  llvm::Value* FoldInsertValue(llvm::Value* agg, llvm::Value* val, llvm::ArrayRef<unsigned> idx) const override {
    return cf_.FoldInsertValue(agg, val, idx);
  }
  llvm::Value* FoldExtractElement(llvm::Value* vec, llvm::Value* idx) const override {
    return cf_.FoldExtractElement(vec, idx);
  }
  llvm::Value* FoldInsertElement(llvm::Value* vec, llvm::Value* elt, llvm::Value* idx) const override {
    return cf_.FoldInsertElement(vec, elt, idx);
  }
  llvm::Value* FoldShuffleVector(llvm::Value* a, llvm::Value* b, llvm::ArrayRef<int> mask) const override {
    return cf_.FoldShuffleVector(a, b, mask);
  }
  llvm::Value* FoldCast(llvm::Instruction::CastOps op, llvm::Value* v, llvm::Type* to) const override {
    return cf_.FoldCast(op, v, to);
  }
  llvm::Value* FoldBinaryIntrinsic(llvm::Intrinsic::ID id, llvm::Value* l, llvm::Value* r, llvm::Type* ty,
                                   llvm::Instruction* fmf) const override {
    return cf_.FoldBinaryIntrinsic(id, l, r, ty, fmf);
  }
  llvm::Value* CreatePointerCast(llvm::Constant* c, llvm::Type* to) const override {
    return cf_.CreatePointerCast(c, to);
  }
  llvm::Value* CreatePointerBitCastOrAddrSpaceCast(llvm::Constant* c, llvm::Type* to) const override {
    return cf_.CreatePointerBitCastOrAddrSpaceCast(c, to);
  }

 private:
  /// Integer scalars only (floating-point x + 0 is not x for x = -0).
  static llvm::Value* identity(llvm::Instruction::BinaryOps opc, llvm::Value* l, llvm::Value* r) {
    if (!l->getType()->isIntegerTy()) return nullptr;
    auto* cl = llvm::dyn_cast<llvm::ConstantInt>(l);
    auto* cr = llvm::dyn_cast<llvm::ConstantInt>(r);
    using I = llvm::Instruction;
    switch (opc) {
      case I::Add:
      case I::Or:
      case I::Xor:
        if (cr && cr->isZero()) return l;
        if (cl && cl->isZero()) return r;
        return nullptr;
      case I::Sub:
      case I::Shl:
      case I::LShr:
      case I::AShr:
        return cr && cr->isZero() ? l : nullptr;
      case I::Mul:
        if (cr && cr->isOne()) return l;
        if (cl && cl->isOne()) return r;
        if ((cr && cr->isZero()) || (cl && cl->isZero())) return llvm::ConstantInt::get(l->getType(), 0);
        return nullptr;
      case I::UDiv:
      case I::SDiv:
        return cr && cr->isOne() ? l : nullptr;
      case I::URem:
      case I::SRem:
        return cr && cr->isOne() ? llvm::ConstantInt::get(l->getType(), 0) : nullptr;
      case I::And:
        if ((cr && cr->isZero()) || (cl && cl->isZero())) return llvm::ConstantInt::get(l->getType(), 0);
        if (cr && cr->isMinusOne()) return l;
        if (cl && cl->isMinusOne()) return r;
        return nullptr;
      default: return nullptr;
    }
  }
  llvm::ConstantFolder cf_;
};

struct TileV {
  ir::Layout layout;
  Slots slots;
};

class Lower {
 public:
  Lower(const ir::Function& f, GpuTargetInfo& t, const ir::LayoutAnalysis& la, const ir::AxisAnalysis& ax,
        const GpuOptions& o, llvm::LLVMContext& ctx, llvm::Module& m, std::map<const ir::Op*, uint64_t>& req,
        const ir::SharedPlan* plan)
      : f_(f), t_(t), la_(la), ax_(ax), o_(o), ctx_(ctx), m_(m), req_(req), plan_(plan),
        b_(ctx, IdentityFolder(), llvm::IRBuilderCallbackInserter([this](llvm::Instruction* i) { tag(i); })),
        opKind_(ctx.getMDKindID("tessera.op")) {}

  void run(uint64_t smemBytes);
  /// Bytes of the shared buffers stored in a padded staging layout (known
  /// after run()).
  std::unordered_map<const ir::Value*, uint64_t> bufferStorageBytes() const {
    std::unordered_map<const ir::Value*, uint64_t> r;
    for (auto& [buf, sg] : storage_) {
      const auto& shape = buf->type().shape();
      int64_t lead = 1;
      for (size_t i = 0; i + 2 < shape.size(); ++i) lead *= shape[i];
      r[buf] = static_cast<uint64_t>(lead * sg.slotElems()) * ir::sharedElemBytes(buf->type().dtype());
    }
    return r;
  }

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
  llvm::Value* pos(const ir::BlockedLayout& l, int p) {
    int64_t ls = 1, ws = 1;
    for (int64_t d : l.order) {
      if (d == p) break;
      ls *= l.tpw[d];
      ws *= l.wpb[d];
    }
    llvm::Value* lp = b_.CreateURem(b_.CreateUDiv(lane_, i32(ls)), i32(l.tpw[p]));
    llvm::Value* wp = b_.CreateURem(b_.CreateUDiv(warp_, i32(ws)), i32(l.wpb[p]));
    return b_.CreateAdd(b_.CreateMul(wp, i32(l.tpw[p])), lp);
  }
  llvm::Value* lanePos(const ir::BlockedLayout& l, int p) {
    int64_t ls = 1;
    for (int64_t d : l.order) {
      if (d == p) break;
      ls *= l.tpw[d];
    }
    return b_.CreateURem(b_.CreateUDiv(lane_, i32(ls)), i32(l.tpw[p]));
  }
  llvm::Value* warpPos(const ir::BlockedLayout& l, int p) {
    int64_t ws = 1;
    for (int64_t d : l.order) {
      if (d == p) break;
      ws *= l.wpb[d];
    }
    return b_.CreateURem(b_.CreateUDiv(warp_, i32(ws)), i32(l.wpb[p]));
  }
  Slots bases(const ir::Layout& l, const ir::SlotTable& t) {
    Slots r;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      int p = l.dims[i];
      llvm::Value* v = b_.CreateMul(pos(l.parent, p), i32(l.parent.spt[p]));
      if (t.replicated[i]) v = b_.CreateURem(v, i32(t.shape[i]));
      r.push_back(v);
    }
    return r;
  }
  Slots indexOf(const Slots& base, const ir::SlotTable& t, size_t slot) {
    Slots r;
    for (size_t i = 0; i < base.size(); ++i) r.push_back(b_.CreateAdd(base[i], i32(t.consts[slot][i])));
    return r;
  }
  llvm::Value* linear(const Slots& idx, const std::vector<int64_t>& shape) {
    llvm::Value* l = i32(0);
    for (size_t i = 0; i < idx.size(); ++i) l = b_.CreateAdd(b_.CreateMul(l, i32(shape[i])), idx[i]);
    return l;
  }
  /// True in exactly one of the threads holding each element (nullptr when
  /// no element is held twice).
  llvm::Value* ownerPred(const ir::Layout& l, const ir::SlotTable& t) {
    llvm::Value* c = nullptr;
    auto andc = [&](llvm::Value* x) { c = c ? b_.CreateAnd(c, x) : x; };
    for (size_t i = 0; i < t.shape.size(); ++i)
      if (t.replicated[i]) andc(b_.CreateICmpULT(pos(l.parent, l.dims[i]), i32(t.distinctPos[i])));
    for (int p = 0; p < l.parent.rank(); ++p) {
      if (std::find(l.dims.begin(), l.dims.end(), p) != l.dims.end()) continue;
      if (l.parent.tpw[p] * l.parent.wpb[p] > 1) andc(b_.CreateICmpEQ(pos(l.parent, p), i32(0)));
    }
    return c;
  }

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
  void tag(llvm::Instruction* i) {
    if (!opTag_) return;
    bool wanted = llvm::isa<llvm::LoadInst, llvm::StoreInst, llvm::AtomicRMWInst, llvm::AtomicCmpXchgInst>(i);
    if (auto* call = llvm::dyn_cast<llvm::CallBase>(i))
      if (const llvm::Function* callee = call->getCalledFunction())
        // Convergent calls (barriers, collectives) and intrinsics that access
        // memory (cp.async): the emulator names them in its reports.
        wanted = callee->isConvergent() || (callee->isIntrinsic() && !callee->doesNotAccessMemory());
    if (wanted) i->setMetadata(opKind_, opTag_);
  }
  void setCurrentOp(const ir::Op& op) {
    curOp_ = &op;
    setTag(op, "");
  }
  /// Tags what follows as `op` (`what` names a phase of it, e.g. the
  /// operand staging of a dot, reported apart).
  void setTag(const ir::Op& op, const std::string& what) {
    std::string s = op.name();
    if (!what.empty()) s += " " + what;
    uint32_t line = 0;
    if (op.loc().known()) {
      s += " @ " + op.loc().file + ":" + std::to_string(op.loc().line);
      line = op.loc().line;
    }
    opTag_ = llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, s)});
    if (!sp_) return;
    auto [it, fresh] = tagIds_.try_emplace(s, 0);
    if (fresh) {
      // DILocation columns are 16 bits; past that, tags are not told apart
      // by location (column 0 is in no table entry).
      if (tagTable_.size() + 1 < (1u << 16)) {
        it->second = static_cast<unsigned>(tagTable_.size() + 1);
        tagTable_.push_back(llvm::MDNode::get(
            ctx_, {llvm::ConstantAsMetadata::get(b_.getInt32(line)),
                   llvm::ConstantAsMetadata::get(b_.getInt32(it->second)), llvm::MDString::get(ctx_, s)}));
      }
    }
    b_.SetCurrentDebugLocation(llvm::DILocation::get(ctx_, line, it->second, sp_));
  }
  /// Compile unit and subprogram of the kernel `fn` (see tag()).
  void startProvenance(llvm::Function* fn) {
    di_ = std::make_unique<llvm::DIBuilder>(m_);
    std::string file = f_.loc().known() ? f_.loc().file : "<tessera>";
    llvm::DIFile* df = di_->createFile(file, "");
    di_->createCompileUnit(llvm::dwarf::DW_LANG_C_plus_plus_14, df, "tessera", /*isOptimized=*/true, "", 0, "",
                           llvm::DICompileUnit::DebugEmissionKind::NoDebug);
    sp_ = di_->createFunction(df, f_.name(), fn->getName(), df, f_.loc().line,
                              di_->createSubroutineType(di_->getOrCreateTypeArray({})), f_.loc().line,
                              llvm::DINode::FlagZero, llvm::DISubprogram::SPFlagDefinition);
    fn->setSubprogram(sp_);
  }
  void finishProvenance() {
    di_->finalize();
    // Without the version flag, reading the module back (the emulator
    // parses the optimised text) silently drops all debug locations.
    m_.addModuleFlag(llvm::Module::Warning, "Debug Info Version", llvm::DEBUG_METADATA_VERSION);
    llvm::NamedMDNode* table = m_.getOrInsertNamedMetadata("tessera.ops");
    for (llvm::MDNode* n : tagTable_) table->addOperand(n);
  }

  // ---- shared memory & ordering -------------------------------------------------
  llvm::Value* smemAt(uint64_t off) { return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_, off); }
  llvm::Value* scratch(uint64_t bytes) {
    uint64_t& r = req_[curOp_];
    r = std::max(r, bytes);
    return smemAt(plan_ ? plan_->scratchOffset(curOp_) : 0);
  }
  void barrier(bool sharedOnly = false) {
    t_.barrier(b_, sharedOnly);
    smemDirty_ = globalDirty_ = false;
  }
  /// True for a barrier of the pipeline schedule (`stage` attribute) in a
  /// `for {pipelined}` body that writes no global memory: it orders the
  /// slots in shared memory only, and the loads of the next stage, which
  /// nothing in the loop writes, may stay in flight across it.
  bool pipelineSlotBarrier(const ir::Op& op) const;
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
  Slots convertVia(const Slots& src, const ir::Layout& sl, const std::vector<int64_t>& sshape, const ir::Type& elem,
                   const ir::Layout& dl, const std::vector<int64_t>& dshape,
                   const std::function<llvm::Value*(const Slots&)>& srcLinearOfDst);
  Slots reindex(const Slots& src, const ir::SlotTable& ts, const ir::SlotTable& td,
                const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& proj) {
    Slots r;
    for (auto& c : td.consts) {
      auto it = ts.index.find(proj(c));
      TS_ASSERT(it != ts.index.end(), "gpu lowering: slot missing in reindex");
      r.push_back(src[it->second]);
    }
    return r;
  }

  // ---- ops ----------------------------------------------------------------
  void emitBlock(const ir::Block& b) {
    for (auto& op : b.ops()) emitOp(*op);
  }
  void emitOp(const ir::Op& op);
  llvm::Value* compute(const ir::Op& op, Slots v);
  llvm::Value* floatOp(const ir::Op& op, Slots& v);
  llvm::Value* castValue(llvm::Value* x, DType from, DType to);
  llvm::Value* constantOf(const ir::Op& op, llvm::Type* t);
  void emitElementwiseLike(const ir::Op& op);
  void emitLoad(const ir::Op& op);
  Slots globalLoad(const ir::Op& op, const ir::Layout& l, const ir::Type& ptrT, const Slots& ptrs, const Slots* mask,
                   const Slots* other);
  void emitStore(const ir::Op& op);
  void emitAtomic(const ir::Op& op);
  llvm::Value* atomicOne(const ir::Op& op, llvm::Value* p, llvm::Value* v);
  /// `ordered`: wait for a barrier first if shared memory is dirty (a
  /// program-order write). Async writes skip it: IR.h makes the program
  /// order them (see flushStaged).
  void writeBuffer(const ir::Value* buf, const Slots& vals, const ir::Layout& l, bool ordered = true);
  void emitCopy(const ir::Op& op);
  /// The layout an async copy or a tile store (ops without a register
  /// result, free to pick one) runs in, re-deriving its pointers and mask
  /// there (emitCopy, emitStore); nullopt for a program-order copy or a
  /// scalar store.
  std::optional<ir::Layout> freeAccessLayout(const ir::Op& op);
  void planElision();
  void planDirectDots();
  /// Element index of `idx` in buffer (or slot view) `buf` of `shape`:
  /// row-major, with the last two dims in the swizzled tensor-core layout
  /// when the buffer's storage is (see planDirectDots).
  llvm::Value* bufIndex(const ir::Value* buf, const Slots& idx, const std::vector<int64_t>& shape);
  Slots recompute(const ir::Value* v, const ir::Layout& l, std::map<std::pair<const ir::Value*, std::string>, Slots>& memo, int& budget);
  bool emitHardwareCopy(const ir::Op& op, const ir::Layout& l, const Slots& ptrs, const Slots* mask);
  /// Elements per access of a global load / copy / store through `ptrT` in
  /// layout `l`: the proven vector width, bounded by the thread's run along
  /// the last dim and by the mask's constancy.
  int64_t accessWidth(const ir::Op& op, const ir::Layout& l, const ir::Type& ptrT, const ir::SlotTable& t,
                      const ir::Value* mask);
  void flushStaged(int64_t beforeGroup);
  void emitReduce(const ir::Op& op);
  llvm::Value* shuffleXor(llvm::Value* v, unsigned mask);
  void emitDot(const ir::Op& op);
  void emitTensorCoreDot(const ir::Op& op, const ir::Layout& l);
  void stageOperand(const ir::Value* v, llvm::Value* base, const DotStaging& st, bool transposed);
  void emitFor(const ir::Op& op);
  void emitIf(const ir::Op& op);

  const ir::Function& f_;
  GpuTargetInfo& t_;
  const ir::LayoutAnalysis& la_;
  const ir::AxisAnalysis& ax_;
  const GpuOptions& o_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  std::map<const ir::Op*, uint64_t>& req_;
  const ir::SharedPlan* plan_;
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
  // Shared buffers (alloc results) stored in a tensor-core staging layout,
  // and the dot operands read straight from them (see planDirectDots).
  struct Storage {
    DotStaging st;            // of one slot: the last two dims
    bool transposed = false;  // the slot's (r, c) is staging element (c, r)
    int64_t slotElems() const { return st.rows * st.stride; }
  };
  std::unordered_map<const ir::Value*, Storage> storage_;
  std::set<std::pair<const ir::Op*, unsigned>> directOperands_;
  std::unordered_set<const ir::Value*> elidedLoads_;
  std::vector<std::vector<std::pair<const ir::Value*, Slots>>> yields_;  // per open region
  // AsyncCopyImpl::RegisterStaged: copies whose global loads are issued and
  // whose shared stores are pending, with their group (the number of
  // async_commits emitted before them); `committed_` counts the commits.
  struct StagedCopy {
    const ir::Op* op;
    const ir::Value* buf;
    Slots vals;
    ir::Layout layout;
    int64_t group;
  };
  std::vector<StagedCopy> staged_;
  int64_t committed_ = 0;
};

// ================================================================ conversions

Slots Lower::tileIn(const ir::Value* v, const ir::Layout& l) {
  const TileV& t = tile(v);
  if (t.layout == l) return t.slots;
  const ir::Op* d = v->definingOp();
  if (d && (d->code() == OpCode::Constant || d->code() == OpCode::Splat || d->code() == OpCode::Arange ||
            d->code() == OpCode::Broadcast || d->code() == OpCode::ExpandDims))
    return remat(v, l);
  const auto& shape = v->type().shape();
  std::vector<int64_t> sh = shape;
  return convertVia(t.slots, t.layout, shape, v->type().element(), l, shape,
                    [&](const Slots& idx) { return linear(idx, sh); });
}

Slots Lower::remat(const ir::Value* v, const ir::Layout& l) {
  const ir::Op& d = *v->definingOp();
  const auto& shape = v->type().shape();
  ir::SlotTable t = ir::slotTable(l, shape);
  Slots r;
  switch (d.code()) {
    case OpCode::Constant: {
      llvm::Value* c = constantOf(d, elemTy(v->type()));
      r.assign(t.size(), c);
      return r;
    }
    case OpCode::Splat: r.assign(t.size(), scalar(d.operand(0))); return r;
    case OpCode::Arange: {
      Slots base = bases(l, t);
      for (size_t i = 0; i < t.size(); ++i)
        r.push_back(b_.CreateAdd(base[0], i32(t.consts[i][0] + d.intAttr("start"))));
      return r;
    }
    case OpCode::Broadcast: {
      const ir::Value* src = d.operand(0);
      const auto& ss = src->type().shape();
      Slots s = tileIn(src, l);
      ir::SlotTable ts = ir::slotTable(l, ss);
      return reindex(s, ts, t, [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> k = c;
        for (size_t i = 0; i < k.size(); ++i)
          if (ss[i] == 1) k[i] = 0;
        return k;
      });
    }
    case OpCode::ExpandDims: {
      int a = static_cast<int>(d.intAttr("axis"));
      const ir::Value* src = d.operand(0);
      ir::Layout sl = l.sliceDim(a);
      Slots s = tileIn(src, sl);
      ir::SlotTable ts = ir::slotTable(sl, src->type().shape());
      return reindex(s, ts, t, [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> k = c;
        k.erase(k.begin() + a);
        return k;
      });
    }
    default: TS_UNREACHABLE("remat of a non-free op");
  }
}

Slots Lower::convertVia(const Slots& src, const ir::Layout& sl, const std::vector<int64_t>& sshape, const ir::Type& elem,
                        const ir::Layout& dl, const std::vector<int64_t>& dshape,
                        const std::function<llvm::Value*(const Slots&)>& srcLinearOfDst) {
  llvm::Type* mt = memTy(elem);
  int64_t n = 1;
  for (int64_t s : sshape) n *= s;
  llvm::Value* base = scratch(static_cast<uint64_t>(n) * bytesOf(mt));
  ir::SlotTable ts = ir::slotTable(sl, sshape);
  beforeShared();
  // Only one of the threads holding a replicated element writes it: the
  // others would write the same bytes in the same barrier interval, a race
  // by the emulator's model (and wasted shared bandwidth).
  guarded(ownerPred(sl, ts), [&] {
    Slots bs = bases(sl, ts);
    for (size_t i = 0; i < ts.size(); ++i) {
      llvm::Value* p = b_.CreateInBoundsGEP(mt, base, linear(indexOf(bs, ts, i), sshape));
      b_.CreateStore(toMem(src[i]), p);
    }
  });
  barrier();
  smemDirty_ = true;
  ir::SlotTable td = ir::slotTable(dl, dshape);
  Slots bd = bases(dl, td);
  Slots r;
  for (size_t j = 0; j < td.size(); ++j) {
    llvm::Value* p = b_.CreateInBoundsGEP(mt, base, srcLinearOfDst(indexOf(bd, td, j)));
    r.push_back(fromMem(b_.CreateLoad(mt, p), elem));
  }
  return r;
}

// ================================================================ elementwise

llvm::Value* Lower::constantOf(const ir::Op& op, llvm::Type* t) {
  const ir::Attr& a = op.attrs().at("value");
  if (t->isFloatingPointTy()) {
    double v = std::holds_alternative<double>(a) ? std::get<double>(a) : static_cast<double>(std::get<int64_t>(a));
    return llvm::ConstantFP::get(t, v);
  }
  return llvm::ConstantInt::get(t, static_cast<uint64_t>(std::get<int64_t>(a)), true);
}

// GPU backends lower every fptrunc (f64 -> bf16 included) correctly
// rounded, so casts narrow with a plain fptrunc; the CPU needs its own.
llvm::Value* Lower::castValue(llvm::Value* x, DType from, DType to) {
  return emitCast(b_, x, from, to, [&](llvm::Value* y, llvm::Type* t) { return b_.CreateFPTrunc(y, t); });
}

llvm::Value* Lower::floatOp(const ir::Op& op, Slots& v) {
  if (llvm::Value* r = emitFloatOp(b_, op, v)) return r;
  // pow and the transcendentals: what each target can do is its math
  // table's choice (libdevice-free polynomials or unsupported).
  DType dt = v[0]->getType()->isDoubleTy() ? DType::F64 : DType::F32;
  MathChoice c = t_.math(op.code(), dt);
  if (c.impl == MathImpl::Unsupported)
    throw CompileError(std::string(op.name()) + " on " + name(dt) + " is not supported on " + t_.arch() + " (" +
                       c.why + ") at " + op.loc().str());
  TS_ASSERT(c.impl == MathImpl::Polynomial && dt == DType::F32, "math table: unexpected choice");
  switch (op.code()) {
    case OpCode::Exp: return emitExpF32(b_, v[0]);
    case OpCode::Exp2: return emitExp2F32(b_, v[0]);
    case OpCode::Log: return emitLogF32(b_, v[0]);
    case OpCode::Log2: return emitLog2F32(b_, v[0]);
    case OpCode::Tanh: return emitTanhF32(b_, v[0]);
    case OpCode::Erf: return emitErfF32(b_, v[0]);
    default: TS_UNREACHABLE("math table: polynomial for an op without one");
  }
}

llvm::Value* Lower::compute(const ir::Op& op, Slots v) {
  switch (op.code()) {
    case OpCode::Cast: return castValue(v[0], op.operand(0)->type().dtype(), op.result()->type().dtype());
    case OpCode::Select: return b_.CreateSelect(v[0], v[1], v[2]);
    case OpCode::PtrAdd: {
      llvm::Value* off = b_.CreateSExtOrTrunc(v[1], b_.getInt64Ty());
      return b_.CreateGEP(memTyOf(op.operand(0)->type().dtype()), v[0], off);
    }
    default: break;
  }
  const ir::Type& t0 = op.operand(0)->type();
  if (t0.isPointerLike()) throw CompileError(std::string(op.name()) + " is not defined on pointers (at " + op.loc().str() + ")");
  DType dt = t0.dtype();
  if (!isFloat(dt)) return emitIntegerOp(b_, op, v, dt);
  return emitFloatElementwise(
      b_, op, v, dt, [&](Slots& w) { return floatOp(op, w); },
      [&](llvm::Value* y, llvm::Type* t) { return b_.CreateFPTrunc(y, t); });
}

void Lower::emitElementwiseLike(const ir::Op& op) {
  const ir::Value* r = op.result();
  if (!r->type().isTile()) {
    if (op.code() == OpCode::Constant) {
      scalars_[r] = constantOf(op, elemTy(r->type()));
      return;
    }
    Slots v;
    for (const ir::Value* o : op.operands()) v.push_back(scalar(o));
    scalars_[r] = compute(op, std::move(v));
    return;
  }
  const ir::Layout& l = la_.get(r);
  const auto& shape = r->type().shape();
  switch (op.code()) {
    case OpCode::Constant:
    case OpCode::Splat:
    case OpCode::Arange:
    case OpCode::Broadcast:
    case OpCode::ExpandDims: {
      // Emitted in the op's own layout here; consumers wanting another
      // layout re-emit them (remat) instead of converting.
      tiles_[r] = TileV{l, remat(r, l)};
      return;
    }
    case OpCode::Reshape:
    case OpCode::Transpose: {
      const ir::Value* s = op.operand(0);
      const TileV& st = tile(s);
      std::vector<int64_t> ss = s->type().shape();
      std::function<llvm::Value*(const Slots&)> map;
      if (op.code() == OpCode::Reshape) {
        map = [&](const Slots& idx) { return linear(idx, shape); };
      } else {
        const auto& perm = op.intsAttr("perm");
        map = [&, perm](const Slots& idx) {
          Slots si(idx.size());
          for (size_t k = 0; k < perm.size(); ++k) si[static_cast<size_t>(perm[k])] = idx[k];
          return linear(si, ss);
        };
      }
      tiles_[r] = TileV{l, convertVia(st.slots, st.layout, ss, s->type().element(), l, shape, map)};
      return;
    }
    default: break;
  }
  TS_ASSERT(ir::isElementwise(op.code()), std::string("gpu lowering: unhandled op ") + op.name());
  std::vector<Slots> ins;
  for (const ir::Value* o : op.operands()) ins.push_back(tileIn(o, l));
  Slots out;
  for (size_t i = 0; i < ins[0].size(); ++i) {
    Slots v;
    for (auto& in : ins) v.push_back(in[i]);
    out.push_back(compute(op, std::move(v)));
  }
  tiles_[r] = TileV{l, std::move(out)};
}

// ===================================================================== memory

bool Lower::pipelineSlotBarrier(const ir::Op& op) const {
  const ir::Region* r = op.parent()->parent();
  const ir::Op* loop = r ? r->parentOp() : nullptr;
  if (!op.hasAttr("stage") || !loop || loop->code() != OpCode::For || !loop->hasAttr("pipelined")) return false;
  std::function<bool(const ir::Block&)> writesGlobal = [&](const ir::Block& blk) {
    for (auto& o : blk.ops()) {
      if (o->code() == OpCode::Store || o->code() == OpCode::AtomicAdd || o->code() == OpCode::AtomicMax) return true;
      for (auto& reg : o->regions())
        if (writesGlobal(reg->block())) return true;
    }
    return false;
  };
  return !writesGlobal(*op.parent());
}

Slots Lower::globalLoad(const ir::Op& op, const ir::Layout& l, const ir::Type& ptrT, const Slots& ptrs, const Slots* mask,
                        const Slots* other) {
  const auto& shape = ptrT.shape();
  ir::Type vt = ptrT.withDType(ptrT.dtype());
  llvm::Type* mt = memTy(vt);
  uint64_t eb = bytesOf(mt);
  ir::SlotTable t = ir::slotTable(l, shape);
  const ir::Value* maskV = op.code() == OpCode::Copy ? (op.numOperands() > 2 ? op.operand(2) : nullptr)
                                                      : (op.numOperands() > 1 ? op.operand(1) : nullptr);
  int64_t v = accessWidth(op, l, ptrT, t, maskV);
  beforeGlobal(false);
  const bool stagedVector = op.code() == OpCode::Copy && op.hasAttr("async") && op.intAttr("async") != 0 &&
                            t_.asyncCopyImpl() == AsyncCopyImpl::RegisterStaged;
  Slots out(t.size());
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  for (size_t i = 0; i < t.size(); i += static_cast<size_t>(v)) {
    llvm::Type* lt = v == 1 ? mt : llvm::FixedVectorType::get(mt, static_cast<unsigned>(v));
    auto doLoad = [&]() -> Slots {
      llvm::Value* x = b_.CreateAlignedLoad(lt, ptrs[i], llvm::Align(eb * static_cast<uint64_t>(v)));
      Slots e;
      for (int64_t k = 0; k < v; ++k)
        e.push_back(fromMem(v == 1 ? x : b_.CreateExtractElement(x, static_cast<uint64_t>(k)), vt));
      return e;
    };
    if (!mask) {
      Slots e = doLoad();
      for (int64_t k = 0; k < v; ++k) out[i + k] = e[k];
      continue;
    }
    // Masked-off lanes never touch memory: branch around the access.
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* ld = llvm::BasicBlock::Create(ctx_, "ld", fn);
    auto* join = llvm::BasicBlock::Create(ctx_, "ld.end", fn);
    b_.CreateCondBr((*mask)[i], ld, join);
    b_.SetInsertPoint(ld);
    if (stagedVector && v > 1 && !other) {
      // A register-staged async copy's data are first used by the deferred
      // shared-memory stores, after the loop body's compute. The phi joins
      // the whole loaded vector and the elements are extracted after the
      // join: with one phi per element, the extraction (e.g. the shift
      // that takes the high half of a 32-bit register of f16 pairs) sits in
      // the guarded block, and the AMDGPU backend must wait for the load
      // (s_waitcnt vmcnt) right there instead of at the deferred stores, so
      // the load latency would not overlap the MFMAs.
      llvm::Value* x = b_.CreateAlignedLoad(lt, ptrs[i], llvm::Align(eb * static_cast<uint64_t>(v)));
      llvm::BasicBlock* ldEnd = b_.GetInsertBlock();
      b_.CreateBr(join);
      b_.SetInsertPoint(join);
      llvm::PHINode* phi = b_.CreatePHI(lt, 2);
      phi->addIncoming(x, ldEnd);
      phi->addIncoming(llvm::Constant::getNullValue(lt), from);
      for (int64_t k = 0; k < v; ++k)
        out[i + k] = fromMem(b_.CreateExtractElement(phi, static_cast<uint64_t>(k)), vt);
      continue;
    }
    Slots e = doLoad();
    llvm::BasicBlock* ldEnd = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    for (int64_t k = 0; k < v; ++k) {
      llvm::PHINode* phi = b_.CreatePHI(e[k]->getType(), 2);
      phi->addIncoming(e[k], ldEnd);
      phi->addIncoming(other ? (*other)[i + k] : llvm::Constant::getNullValue(e[k]->getType()), from);
      out[i + k] = phi;
    }
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
    if (!mask) {
      scalars_[op.result()] = ld();
      return;
    }
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* bb = llvm::BasicBlock::Create(ctx_, "ld", fn);
    auto* join = llvm::BasicBlock::Create(ctx_, "ld.end", fn);
    b_.CreateCondBr(scalar(mask), bb, join);
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
    llvm::Value* p = scalar(ptr);
    llvm::Value* x = toMem(scalar(val));
    guarded(c, [&] { b_.CreateAlignedStore(x, p, llvm::Align(eb)); });
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
  beforeGlobal(true);
  for (size_t i = 0; i < t.size(); i += static_cast<size_t>(v)) {
    llvm::Value* c = owner;
    if (mask) c = c ? b_.CreateAnd(c, m[i]) : m[i];
    guarded(c, [&] {
      llvm::Value* x;
      if (v == 1) {
        x = toMem(vals[i]);
      } else {
        x = llvm::PoisonValue::get(llvm::FixedVectorType::get(mt, static_cast<unsigned>(v)));
        for (int64_t k = 0; k < v; ++k) x = b_.CreateInsertElement(x, toMem(vals[i + k]), static_cast<uint64_t>(k));
      }
      b_.CreateAlignedStore(x, ptrs[i], llvm::Align(eb * static_cast<uint64_t>(v)));
    });
  }
}

llvm::Value* Lower::atomicOne(const ir::Op& op, llvm::Value* p, llvm::Value* v) {
  bool fl = v->getType()->isFloatingPointTy();
  llvm::AtomicRMWInst::BinOp kind;
  if (op.code() == OpCode::AtomicAdd) kind = fl ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add;
  // fmaximum: NaN-propagating, -0 < +0, like the IR's max.
  else kind = fl ? llvm::AtomicRMWInst::FMaximum : llvm::AtomicRMWInst::Max;
  return b_.CreateAtomicRMW(kind, p, v, llvm::MaybeAlign(), llvm::AtomicOrdering::Monotonic,
                            ctx_.getOrInsertSyncScopeID(t_.deviceSyncScope()));
}

void Lower::emitAtomic(const ir::Op& op) {
  const ir::Value* ptr = op.operand(0);
  const ir::Value* val = op.operand(1);
  const ir::Value* mask = op.numOperands() > 2 ? op.operand(2) : nullptr;
  llvm::Type* et = elemTy(val->type());
  uint64_t eb = bytesOf(et);
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  // if (c) old = atomic(p, v) else old = 0
  auto one = [&](llvm::Value* c, llvm::Value* p, llvm::Value* v) -> llvm::Value* {
    if (!c) return atomicOne(op, p, v);
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* bb = llvm::BasicBlock::Create(ctx_, "atomic", fn);
    auto* join = llvm::BasicBlock::Create(ctx_, "atomic.end", fn);
    b_.CreateCondBr(c, bb, join);
    b_.SetInsertPoint(bb);
    llvm::Value* old = atomicOne(op, p, v);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(et, 2);
    phi->addIncoming(old, bb);
    phi->addIncoming(llvm::Constant::getNullValue(et), from);
    return phi;
  };
  beforeGlobal(true);
  if (!ptr->type().isTile()) {
    // Thread 0 performs it; every thread needs the old value.
    llvm::Value* c = b_.CreateICmpEQ(tid_, i32(0));
    if (mask) c = b_.CreateAnd(c, scalar(mask));
    llvm::Value* old = one(c, scalar(ptr), scalar(val));
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
  Slots m;
  if (mask) m = tileIn(mask, l);
  ir::SlotTable t = ir::slotTable(l, shape);
  llvm::Value* owner = ownerPred(l, t);
  Slots olds;
  for (size_t i = 0; i < t.size(); ++i) {
    llvm::Value* c = owner;
    if (mask) c = c ? b_.CreateAnd(c, m[i]) : m[i];
    olds.push_back(one(c, ptrs[i], vals[i]));
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
}

void Lower::writeBuffer(const ir::Value* buf, const Slots& vals, const ir::Layout& l, bool ordered) {
  const auto& shape = buf->type().shape();
  llvm::Type* mt = memTyOf(buf->type().dtype());
  llvm::Value* base = scalar(buf);
  ir::SlotTable t = ir::slotTable(l, shape);
  if (ordered) beforeShared();
  else smemDirty_ = true;
  // One writer per element (see convertVia).
  guarded(ownerPred(l, t), [&] {
    Slots bs = bases(l, t);
    for (size_t i = 0; i < t.size(); ++i)
      b_.CreateStore(toMem(vals[i]), b_.CreateInBoundsGEP(mt, base, bufIndex(buf, indexOf(bs, t, i), shape)));
  });
}

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

/// `v` in layout `l`, re-emitting the chain of elementwise ops (pointer and
/// mask arithmetic) and free ops that produced it in `l` instead of
/// converting it through shared memory; values already in `l` are reused,
/// anything else (or a chain longer than `budget` ops) is converted.
Slots Lower::recompute(const ir::Value* v, const ir::Layout& l, std::map<std::pair<const ir::Value*, std::string>, Slots>& memo, int& budget) {
  std::pair<const ir::Value*, std::string> key{v, l.str()};
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  const bool elided = elided_.count(v) != 0;
  if (!elided) {
    const TileV& cur = tile(v);
    if (cur.layout == l) return cur.slots;
  }
  const ir::Op* d = v->definingOp();
  const auto& shape = v->type().shape();
  Slots r;
  // An elided value has no slots to fall back on: it is always re-derived
  // (planElision admits only ops this function re-derives).
  if (!d || (budget <= 0 && !elided)) {
    r = tileIn(v, l);
  } else if (d->code() == OpCode::Constant || d->code() == OpCode::Splat || d->code() == OpCode::Arange) {
    r = remat(v, l);
  } else if (d->code() == OpCode::Broadcast) {
    --budget;
    const ir::Value* src = d->operand(0);
    const auto& ss = src->type().shape();
    Slots sv = recompute(src, l, memo, budget);
    r = reindex(sv, ir::slotTable(l, ss), ir::slotTable(l, shape), [&](const std::vector<int64_t>& c) {
      std::vector<int64_t> k = c;
      for (size_t i = 0; i < k.size(); ++i)
        if (ss[i] == 1) k[i] = 0;
      return k;
    });
  } else if (d->code() == OpCode::ExpandDims) {
    --budget;
    int a = static_cast<int>(d->intAttr("axis"));
    ir::Layout sl = l.sliceDim(a);
    const ir::Value* src = d->operand(0);
    Slots sv = recompute(src, sl, memo, budget);
    r = reindex(sv, ir::slotTable(sl, src->type().shape()), ir::slotTable(l, shape), [&](const std::vector<int64_t>& c) {
      std::vector<int64_t> k = c;
      k.erase(k.begin() + a);
      return k;
    });
  } else if (ir::isElementwise(d->code()) && d->code() != OpCode::Reshape && d->code() != OpCode::Transpose) {
    --budget;
    std::vector<Slots> ins;
    for (const ir::Value* o : d->operands())
      ins.push_back(o->type().isTile() ? recompute(o, l, memo, budget) : Slots{});
    size_t n = ir::slotTable(l, shape).size();
    for (size_t i = 0; i < n; ++i) {
      Slots x;
      for (size_t j = 0; j < ins.size(); ++j) x.push_back(ins[j].empty() ? scalar(d->operand(j)) : ins[j][i]);
      r.push_back(compute(*d, std::move(x)));
    }
  } else {
    TS_ASSERT(!elided, "gpu lowering: elided value without a re-derivable definition");
    r = tileIn(v, l);
  }
  memo[key] = r;
  return r;
}

namespace {
/// Ops whose result recompute() re-emits in any layout from their operands.
bool rederivable(const ir::Op& op) {
  switch (op.code()) {
    case OpCode::Constant:
    case OpCode::Splat:
    case OpCode::Arange:
    case OpCode::Broadcast:
    case OpCode::ExpandDims: return true;
    case OpCode::Reshape:
    case OpCode::Transpose: return false;
    default: return ir::isElementwise(op.code());
  }
}
}  // namespace

std::optional<ir::Layout> Lower::freeAccessLayout(const ir::Op& op) {
  if (op.code() == OpCode::Store) {
    // A tile store has no register result either: same choice.
    if (!op.operand(0)->type().isTile()) return std::nullopt;
  } else if (op.code() != OpCode::Copy || !op.hasAttr("async") || op.intAttr("async") == 0 ||
             t_.asyncCopyImpl() == AsyncCopyImpl::Synchronous) {
    return std::nullopt;
  }
  const ir::Value* src = op.operand(op.code() == OpCode::Store ? 0 : 1);
  const ir::Layout& l = la_.get(src);
  // A copy has no register result, so an async copy is free to run in the
  // default layout of its shape, whose per-thread run along the last dim is
  // the widest vector access of that shape (the pointer tile's own layout is
  // inherited from whatever produced it, often a column of pointers with
  // one element per thread, or a layout that replicates the tile over more
  // threads than it has elements, so that each thread would load its
  // elements several times).
  const auto& shape = src->type().shape();
  ir::Layout want = la_.defaultFor(shape);
  if (want == l) return l;
  if (want.parent.spt[want.dims.back()] > l.parent.spt[l.dims.back()]) return want;
  if (ir::slotTable(want, shape).size() < ir::slotTable(l, shape).size()) return want;
  return l;
}

namespace {
/// The alloc result a buffer value is (a view of).
const ir::Value* rootBuffer(const ir::Value* buf) {
  while (const ir::Op* d = buf->definingOp()) {
    if (d->code() != OpCode::BufferSlot) break;
    buf = d->operand(0);
  }
  return buf;
}
}  // namespace

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
  llvm::Value* in = sg.transposed ? stagingIndex(b_, st, idx[n - 1], idx[n - 2]) : stagingIndex(b_, st, idx[n - 2], idx[n - 1]);
  if (outer.empty()) return in;
  std::vector<int64_t> os(shape.begin(), shape.end() - 2);
  return b_.CreateAdd(b_.CreateMul(linear(outer, os), i32(sg.slotElems())), in);
}

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
  auto same = [](const Storage& x, const Storage& y) {
    return x.transposed == y.transposed && x.st.rows == y.st.rows && x.st.cols == y.st.cols &&
           x.st.stride == y.st.stride && x.st.swizzle == y.st.swizzle;
  };
  ir::walk(body, [&](ir::Op& op) {
    if (op.code() != OpCode::Dot || !la_.has(op.result())) return;
    const ir::Layout& dl = la_.get(op.result());
    if (dl.parent.mma == ir::MmaKind::None) return;
    const ir::Value* av = op.operand(0);
    TensorCoreDotPlan plan = planTensorCoreDot(t_.tensorCore(av->type().dtype(), op.operand(2)->type().dtype()),
                                               av->type().dtype(), av->type().shape()[0], op.operand(1)->type().shape()[1],
                                               av->type().shape()[1], dl.parent);
    for (unsigned i = 0; i < 2; ++i) {
      const ir::Value* v = op.operand(i);
      const ir::Op* ld = v->definingOp();
      if (!ld || ld->code() != OpCode::LocalLoad || ld->parent() != op.parent()) continue;
      const ir::Value* root = rootBuffer(ld->operand(0));
      const ir::Type& rt = root->type();
      if (!root->definingOp() || root->definingOp()->code() != OpCode::Alloc || rt.space() != ir::MemSpace::Shared)
        continue;
      if (rt.dtype() != DType::F16 && rt.dtype() != DType::BF16) continue;
      Storage sg{i == 0 ? plan.a : plan.b, i == 1 && plan.bTransposed};
      if (sg.st.swizzle) {  // stagingIndex's precondition
        const int64_t chunks = sg.st.cols / 8;
        if (sg.st.cols % 8 != 0 || chunks < 1 || (chunks & (chunks - 1)) != 0 || sg.st.stride != sg.st.cols) continue;
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
  for (auto& [op, i] : cands)
    if (storage_.count(rootBuffer(op->operand(i)->definingOp()->operand(0)))) directOperands_.insert({op, i});
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
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = elided_.begin(); it != elided_.end();) {
      bool ok = true;
      for (auto& [user, i] : uses.at(*it)) {
        bool copyOperand = (user->code() == OpCode::Copy && i >= 1 && asyncCopy.at(user)) ||
                           (user->code() == OpCode::Store && i != 1 && asyncCopy.at(user));
        bool feedsElided = user->numResults() == 1 && elided_.count(user->result()) != 0;
        if (!copyOperand && !feedsElided) ok = false;
      }
      if (ok) {
        ++it;
      } else {
        it = elided_.erase(it);
        changed = true;
      }
    }
  }
}

void Lower::emitCopy(const ir::Op& op) {
  const ir::Value* src = op.operand(1);
  const ir::Value* maskV = op.numOperands() > 2 ? op.operand(2) : nullptr;
  TS_ASSERT(src->type().shape() == op.operand(0)->type().shape(), "copy: pointer tile and buffer shapes differ");
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
  if (cb == 0) return false;  // chunks narrower than 4 bytes: no cp.async for them
  const int64_t ce = cb / eb;  // elements per chunk; divides v
  // Shared side: rows of the row-major buffer (and so each slot of a staged
  // buffer, and the buffer base, which the plan aligns to 16) start on chunk
  // boundaries; the thread's first column (pos * spt, mod the row when
  // replicated) is a multiple of the chunk; each chunk is ce consecutive
  // columns starting at a multiple of ce.
  if ((shape.back() * eb) % cb != 0 || l.parent.spt[l.dims.back()] % ce != 0) return false;
  if (auto sg = storage_.find(rootBuffer(buf));
      sg != storage_.end() && (sg->second.transposed || sg->second.st.stride != sg->second.st.cols))
    return false;  // padded / transposed slots: chunks would not stay contiguous
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
  llvm::Value* base = scalar(buf);
  // One writer per element, as in writeBuffer.
  guarded(ownerPred(l, t), [&] {
    Slots bs = bases(l, t);
    for (size_t i = 0; i < t.size(); i += static_cast<size_t>(ce)) {
      // A swizzled buffer permutes whole 16-byte chunks: a chunk of <= 16
      // bytes starting at a multiple of its size stays contiguous.
      llvm::Value* dst = b_.CreateInBoundsGEP(mt, base, bufIndex(buf, indexOf(bs, t, i), shape));
      llvm::Value* srcBytes = mask ? b_.CreateSelect((*mask)[i], i32(cb), i32(0)) : i32(cb);
      t_.asyncCopy(b_, dst, ptrs[i], static_cast<unsigned>(cb), srcBytes);
    }
  });
  return true;
}

/// Stores the staged copies of every group < beforeGroup (INT64_MAX: all),
/// in issue order; see the comment above emitCopy.
void Lower::flushStaged(int64_t beforeGroup) {
  if (staged_.empty() || staged_.front().group >= beforeGroup) return;
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

// ================================================================= reductions

llvm::Value* Lower::shuffleXor(llvm::Value* v, unsigned mask) {
  llvm::Type* ty = v->getType();
  unsigned bits = static_cast<unsigned>(m_.getDataLayout().getTypeSizeInBits(ty));
  llvm::Type* it = b_.getIntNTy(bits);
  llvm::Value* x = ty->isIntegerTy() ? v : b_.CreateBitCast(v, it);
  llvm::Value* r;
  if (bits <= 32) {
    r = b_.CreateTrunc(t_.shuffleXor(b_, b_.CreateZExt(x, b_.getInt32Ty()), mask), it);
  } else {
    TS_ASSERT(bits == 64, "shuffle of a value wider than 64 bits");
    llvm::Value* lo = b_.CreateTrunc(x, b_.getInt32Ty());
    llvm::Value* hi = b_.CreateTrunc(b_.CreateLShr(x, 32), b_.getInt32Ty());
    lo = t_.shuffleXor(b_, lo, mask);
    hi = t_.shuffleXor(b_, hi, mask);
    r = b_.CreateOr(b_.CreateZExt(lo, it), b_.CreateShl(b_.CreateZExt(hi, it), 32));
  }
  return ty->isIntegerTy() ? r : b_.CreateBitCast(r, ty);
}

void Lower::emitReduce(const ir::Op& op) {
  const ir::Value* in = op.operand(0);
  const std::string& kind = op.strAttr("kind");
  int axis = static_cast<int>(op.intAttr("axis"));
  const auto& shape = in->type().shape();
  DType dt = in->type().dtype();
  bool fl = isFloat(dt);
  bool narrow = dt == DType::F16 || dt == DType::BF16;
  bool argmax = kind == "argmax";
  if (kind != "sum" && kind != "max" && kind != "min" && !argmax)
    throw CompileError("reduce: unknown kind '" + kind + "' at " + op.loc().str());
  llvm::Type* ct = narrow ? b_.getFloatTy() : scalarTy(dt);
  const TileV& src = tile(in);
  const ir::Layout& l = src.layout;
  int pa = l.dims[axis];
  ir::SlotTable t = ir::slotTable(l, shape);

  struct RV {
    llvm::Value* v;
    llvm::Value* idx;  // argmax: i32 position along the axis
  };
  auto better = [&](llvm::Value* x, llvm::Value* best) -> llvm::Value* {
    if (!fl) return dt == DType::I1 ? b_.CreateICmpUGT(x, best) : b_.CreateICmpSGT(x, best);
    // NaN is the maximum (as for max); strict so the first index wins.
    return b_.CreateOr(b_.CreateFCmpOGT(x, best), b_.CreateAnd(b_.CreateFCmpUNO(x, x), b_.CreateFCmpORD(best, best)));
  };
  auto combine = [&](RV a, RV x) -> RV {
    if (argmax) {
      llvm::Value* eq = fl ? b_.CreateOr(b_.CreateFCmpOEQ(x.v, a.v), b_.CreateAnd(b_.CreateFCmpUNO(x.v, x.v), b_.CreateFCmpUNO(a.v, a.v)))
                           : b_.CreateICmpEQ(x.v, a.v);
      llvm::Value* take = b_.CreateOr(better(x.v, a.v), b_.CreateAnd(eq, b_.CreateICmpSLT(x.idx, a.idx)));
      return {b_.CreateSelect(take, x.v, a.v), b_.CreateSelect(take, x.idx, a.idx)};
    }
    if (kind == "sum") return {fl ? b_.CreateFAdd(a.v, x.v) : b_.CreateAdd(a.v, x.v), nullptr};
    bool isMin = kind == "min";
    if (fl) return {b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::minimum : llvm::Intrinsic::maximum, a.v, x.v), nullptr};
    if (dt == DType::I1) return {b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::umin : llvm::Intrinsic::umax, a.v, x.v), nullptr};
    return {b_.CreateBinaryIntrinsic(isMin ? llvm::Intrinsic::smin : llvm::Intrinsic::smax, a.v, x.v), nullptr};
  };

  // 1. Within the thread: fold the slots along the axis, per output slot.
  std::vector<int64_t> outShape = shape;
  outShape.erase(outShape.begin() + axis);
  Slots bs = bases(l, t);
  std::map<std::vector<int64_t>, RV> acc;
  std::vector<std::vector<int64_t>> keys;  // in first-seen (row-major) order
  for (size_t i = 0; i < t.size(); ++i) {
    std::vector<int64_t> k = t.consts[i];
    k.erase(k.begin() + axis);
    llvm::Value* x = narrow ? b_.CreateFPExt(src.slots[i], ct) : src.slots[i];
    RV rv{x, argmax ? b_.CreateAdd(bs[axis], i32(t.consts[i][axis])) : nullptr};
    auto it = acc.find(k);
    if (it == acc.end()) {
      acc.emplace(k, rv);
      keys.push_back(k);
    } else {
      it->second = combine(it->second, rv);
    }
  }
  // 2. Across the lanes of the warp along the axis: butterfly over the lane
  // bits that hold distinct elements.
  int64_t tpw = l.parent.tpw[pa];
  int64_t distinct = t.distinctPos[axis];
  int64_t laneStride = 1;
  for (int64_t d : l.parent.order) {
    if (d == pa) break;
    laneStride *= l.parent.tpw[d];
  }
  for (int64_t s = 1; s < std::min(tpw, distinct); s *= 2) {
    unsigned mask = static_cast<unsigned>(s * laneStride);
    for (auto& k : keys) {
      RV& a = acc.at(k);
      RV other{shuffleXor(a.v, mask), argmax ? shuffleXor(a.idx, mask) : nullptr};
      a = combine(a, other);
    }
  }
  // 3. Across warps through shared memory; every thread reads every
  // partial and combines them in warp order, so all threads agree.
  int64_t wd = distinct > tpw ? distinct / tpw : 1;
  if (wd > 1) {
    int64_t nOut = 1;
    for (int64_t s : outShape) nOut *= s;
    uint64_t vbytes = bytesOf(ct);
    uint64_t valsBytes = (static_cast<uint64_t>(nOut * wd) * vbytes + 3) & ~uint64_t{3};
    llvm::Value* base = scratch(valsBytes + (argmax ? static_cast<uint64_t>(nOut * wd) * 4 : 0));
    llvm::Value* idxBase = argmax ? b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), base, valsBytes) : nullptr;
    llvm::Value* wpos = warpPos(l.parent, pa);
    beforeShared();
    auto outLinear = [&](const std::vector<int64_t>& k) -> llvm::Value* {
      Slots idx;
      size_t j = 0;
      for (size_t i = 0; i < shape.size(); ++i)
        if (static_cast<int>(i) != axis) idx.push_back(b_.CreateAdd(bs[i], i32(k[j++])));
      return linear(idx, outShape);
    };
    llvm::Value* writer = b_.CreateAnd(b_.CreateICmpEQ(lanePos(l.parent, pa), i32(0)), b_.CreateICmpULT(wpos, i32(wd)));
    guarded(writer, [&] {
      for (auto& k : keys) {
        llvm::Value* slot = b_.CreateAdd(b_.CreateMul(outLinear(k), i32(wd)), wpos);
        b_.CreateStore(acc.at(k).v, b_.CreateInBoundsGEP(ct, base, slot));
        if (argmax) b_.CreateStore(acc.at(k).idx, b_.CreateInBoundsGEP(b_.getInt32Ty(), idxBase, slot));
      }
    });
    barrier();
    smemDirty_ = true;
    for (auto& k : keys) {
      llvm::Value* first = b_.CreateMul(outLinear(k), i32(wd));
      RV r{nullptr, nullptr};
      for (int64_t w = 0; w < wd; ++w) {
        llvm::Value* slot = b_.CreateAdd(first, i32(w));
        RV x{b_.CreateLoad(ct, b_.CreateInBoundsGEP(ct, base, slot)),
             argmax ? b_.CreateLoad(b_.getInt32Ty(), b_.CreateInBoundsGEP(b_.getInt32Ty(), idxBase, slot)) : nullptr};
        r = w == 0 ? x : combine(r, x);
      }
      acc.at(k) = r;
    }
  }
  auto finish = [&](const RV& r) -> llvm::Value* {
    if (argmax) return r.idx;
    return narrow ? b_.CreateFPTrunc(r.v, scalarTy(dt)) : r.v;
  };
  if (!op.result()->type().isTile()) {
    TS_ASSERT(keys.size() == 1, "rank-1 reduce with several outputs");
    scalars_[op.result()] = finish(acc.at(keys[0]));
    return;
  }
  const ir::Layout& ol = la_.get(op.result());
  TS_ASSERT(ol == l.sliceDim(axis), "reduce result layout is not the slice of its input");
  ir::SlotTable to = ir::slotTable(ol, outShape);
  Slots out;
  for (auto& c : to.consts) out.push_back(finish(acc.at(c)));
  tiles_[op.result()] = TileV{ol, std::move(out)};
}

// ======================================================================== dot

void Lower::emitDot(const ir::Op& op) {
  const ir::Value* a = op.operand(0);
  const ir::Value* bv = op.operand(1);
  const ir::Value* acc = op.operand(2);
  int64_t M = a->type().shape()[0], K = a->type().shape()[1], N = bv->type().shape()[1];
  DType in = a->type().dtype(), out = acc->type().dtype();
  const ir::Layout& l = la_.get(op.result());
  if (l.parent.mma != ir::MmaKind::None) return emitTensorCoreDot(op, l);
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
  auto toC = [&](llvm::Value* x) -> llvm::Value* {
    if (!fl) return b_.CreateSExt(x, b_.getInt32Ty());
    return x->getType()->isFloatTy() ? x : b_.CreateFPExt(x, b_.getFloatTy());
  };
  for (size_t i = 0; i < t.size(); ++i) {
    llvm::PHINode* p = b_.CreatePHI(init[i]->getType(), 2);
    p->addIncoming(init[i], pre);
    phis.push_back(p);
  }
  for (size_t i = 0; i < t.size(); ++i) {
    llvm::PHINode* p = phis[i];
    llvm::Value* m = b_.CreateAdd(bs[0], i32(t.consts[i][0]));
    llvm::Value* n = b_.CreateAdd(bs[1], i32(t.consts[i][1]));
    llvm::Value* av = toC(b_.CreateLoad(it, b_.CreateInBoundsGEP(it, base, b_.CreateAdd(b_.CreateMul(m, i32(K)), k))));
    llvm::Value* bw = toC(b_.CreateLoad(it, b_.CreateInBoundsGEP(it, bBase, b_.CreateAdd(b_.CreateMul(k, i32(N)), n))));
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
  guarded(ownerPred(tv.layout, t), [&] {
    Slots bs = bases(tv.layout, t);
    for (size_t i = 0; i < t.size(); i += static_cast<size_t>(vec)) {
      Slots idx = indexOf(bs, t, i);
      llvm::Value* row = transposed ? idx[1] : idx[0];
      llvm::Value* col = transposed ? idx[0] : idx[1];
      llvm::Value* p = b_.CreateInBoundsGEP(et, base, stagingIndex(b_, st, row, col));
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

void Lower::emitTensorCoreDot(const ir::Op& op, const ir::Layout& l) {
  const ir::Value* a = op.operand(0);
  const ir::Value* bv = op.operand(1);
  const ir::Value* acc = op.operand(2);
  int64_t M = a->type().shape()[0], K = a->type().shape()[1], N = bv->type().shape()[1];
  TensorCoreOp tc = t_.tensorCore(a->type().dtype(), acc->type().dtype());
  TensorCoreDotPlan p = planTensorCoreDot(tc, a->type().dtype(), M, N, K, l.parent);
  Slots init = tileIn(acc, l);  // before the staging: a conversion uses this op's scratch
  // Operands read straight from their swizzled shared slot (planDirectDots)
  // use the slot's address and layout; the others are staged.
  bool directA = directOperands_.count({&op, 0}) != 0, directB = directOperands_.count({&op, 1}) != 0;
  auto slotOf = [&](const ir::Value* v) {
    const ir::Value* buf = v->definingOp()->operand(0);
    const Storage& sg = storage_.at(rootBuffer(buf));
    const DotStaging& want = v == a ? p.a : p.b;
    TS_ASSERT(sg.st.rows == want.rows && sg.st.cols == want.cols && sg.st.stride == want.stride &&
                  sg.st.swizzle == want.swizzle && sg.transposed == (v == bv && p.bTransposed),
              "direct dot operand: slot layout differs from the staging layout");
    return scalar(buf);
  };
  llvm::Value* base = nullptr;
  llvm::Value* bBase = nullptr;
  if (!directA || !directB) {
    llvm::Value* s = scratch(directA ? p.b.bytes() : p.totalBytes());
    base = directA ? nullptr : s;
    bBase = directB ? nullptr : directA ? s : b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), s, p.aBytes);
  }
  if (directA) base = slotOf(a);
  if (directB) bBase = slotOf(bv);
  // The staging stores and the fragment reads are named apart in the
  // emulator's reports (bank conflicts per phase of the dot).
  beforeShared();
  if (!directA || !directB) {
    setTag(op, "operand staging");
    if (!directA) stageOperand(a, base, p.a, false);
    if (!directB) stageOperand(bv, bBase, p.b, p.bTransposed);
    setCurrentOp(op);
    barrier();
    smemDirty_ = true;
  }
  setTag(op, "fragments");
  tiles_[op.result()] = TileV{l, codegen::emitTensorCoreDot(b_, m_, p, base, bBase, lane_, warp_, std::move(init))};
  setCurrentOp(op);
}

// ============================================================== control flow

void Lower::emitFor(const ir::Op& op) {
  flushStaged(INT64_MAX);  // (c): the prologue's copies land before the loop
  llvm::Value* lo = scalar(op.operand(0));
  llvm::Value* hi = scalar(op.operand(1));
  llvm::Value* step = scalar(op.operand(2));
  const ir::Block& blk = op.region(0).block();
  unsigned n = op.numResults();
  // Flattened carried state: scalars, then the slots of each tile.
  std::vector<Slots> inits(n);
  for (unsigned i = 0; i < n; ++i) {
    const ir::Value* v = op.operand(3 + i);
    inits[i] = v->type().isTile() ? tileIn(v, la_.get(blk.arg(i + 1))) : Slots{scalar(v)};
  }
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, "for.head", fn);
  auto* body = llvm::BasicBlock::Create(ctx_, "for.body", fn);
  auto* exit = llvm::BasicBlock::Create(ctx_, "for.end", fn);
  // A non-positive step runs zero iterations (IR semantics).
  llvm::Value* positive = b_.CreateICmpSGT(step, llvm::ConstantInt::get(step->getType(), 0));
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* iv = b_.CreatePHI(lo->getType(), 2, "iv");
  iv->addIncoming(lo, pre);
  std::vector<std::vector<llvm::PHINode*>> phis(n);
  for (unsigned i = 0; i < n; ++i)
    for (llvm::Value* x : inits[i]) {
      llvm::PHINode* p = b_.CreatePHI(x->getType(), 2);
      p->addIncoming(x, pre);
      phis[i].push_back(p);
    }
  b_.CreateCondBr(b_.CreateAnd(positive, b_.CreateICmpSLT(iv, hi)), body, exit);
  b_.SetInsertPoint(body);
  unknownOrder();
  scalars_[blk.arg(0)] = iv;
  for (unsigned i = 0; i < n; ++i) {
    const ir::Value* a = blk.arg(i + 1);
    if (a->type().isTile()) tiles_[a] = TileV{la_.get(a), Slots(phis[i].begin(), phis[i].end())};
    else scalars_[a] = phis[i][0];
  }
  yields_.emplace_back();
  emitBlock(blk);
  flushStaged(INT64_MAX);  // (b): before the back edge
  setCurrentOp(op);
  auto ys = std::move(yields_.back());
  yields_.pop_back();
  TS_ASSERT(ys.size() == n, "for: yield arity");
  // iv + step may overflow only when the loop is about to exit; the wrap
  // would restart it, so exit explicitly on overflow.
  llvm::Value* sum = b_.CreateBinaryIntrinsic(llvm::Intrinsic::sadd_with_overflow, iv, step);
  llvm::Value* nextIv = b_.CreateExtractValue(sum, 0);
  llvm::Value* ovf = b_.CreateExtractValue(sum, 1);
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  iv->addIncoming(nextIv, latch);
  for (unsigned i = 0; i < n; ++i)
    for (size_t j = 0; j < phis[i].size(); ++j) phis[i][j]->addIncoming(ys[i].second[j], latch);
  b_.CreateCondBr(ovf, exit, header);
  b_.SetInsertPoint(exit);
  unknownOrder();
  for (unsigned i = 0; i < n; ++i) {
    Slots r;
    for (size_t j = 0; j < phis[i].size(); ++j) {
      llvm::PHINode* p = b_.CreatePHI(phis[i][j]->getType(), 2);
      p->addIncoming(phis[i][j], header);
      p->addIncoming(ys[i].second[j], latch);
      r.push_back(p);
    }
    const ir::Value* res = op.result(i);
    if (res->type().isTile()) tiles_[res] = TileV{la_.get(res), std::move(r)};
    else scalars_[res] = r[0];
  }
}

void Lower::emitIf(const ir::Op& op) {
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  auto* thenBB = llvm::BasicBlock::Create(ctx_, "if.then", fn);
  auto* elseBB = llvm::BasicBlock::Create(ctx_, "if.else", fn);
  auto* endBB = llvm::BasicBlock::Create(ctx_, "if.end", fn);
  // (c): a region's staged values do not dominate the code after the `if`.
  flushStaged(INT64_MAX);
  b_.CreateCondBr(scalar(op.operand(0)), thenBB, elseBB);
  bool sd = smemDirty_, gd = globalDirty_;
  std::vector<std::pair<llvm::BasicBlock*, std::vector<Slots>>> ends;
  for (unsigned r = 0; r < 2; ++r) {
    b_.SetInsertPoint(r == 0 ? thenBB : elseBB);
    smemDirty_ = sd;
    globalDirty_ = gd;
    std::vector<Slots> vals;
    if (r < op.numRegions()) {
      yields_.emplace_back();
      emitBlock(op.region(r).block());
      flushStaged(INT64_MAX);
      setCurrentOp(op);
      for (auto& y : yields_.back()) vals.push_back(y.second);
      yields_.pop_back();
    }
    ends.emplace_back(b_.GetInsertBlock(), std::move(vals));
    b_.CreateBr(endBB);
  }
  b_.SetInsertPoint(endBB);
  unknownOrder();
  for (unsigned i = 0; i < op.numResults(); ++i) {
    Slots r;
    for (size_t j = 0; j < ends[0].second[i].size(); ++j) {
      llvm::PHINode* p = b_.CreatePHI(ends[0].second[i][j]->getType(), 2);
      for (auto& e : ends) p->addIncoming(e.second[i][j], e.first);
      r.push_back(p);
    }
    const ir::Value* res = op.result(i);
    if (res->type().isTile()) tiles_[res] = TileV{la_.get(res), std::move(r)};
    else scalars_[res] = r[0];
  }
}

// ======================================================================= ops

void Lower::emitOp(const ir::Op& op) {
  if (op.numResults() == 1 && (elided_.count(op.result()) || elidedLoads_.count(op.result())))
    return;  // re-derived by its consumers / read by the dots from shared memory
  setCurrentOp(op);
  switch (op.code()) {
    case OpCode::ProgramId: scalars_[op.result()] = t_.blockId(b_, static_cast<int>(op.intAttr("axis"))); return;
    case OpCode::NumPrograms: scalars_[op.result()] = t_.gridDim(b_, static_cast<int>(op.intAttr("axis"))); return;
    case OpCode::Load: return emitLoad(op);
    case OpCode::Store: return emitStore(op);
    case OpCode::AtomicAdd:
    case OpCode::AtomicMax: return emitAtomic(op);
    case OpCode::Alloc:
      // The buffer's bytes may have been an earlier op's scratch (the plan
      // reuses bytes of areas whose live ranges are disjoint). A program-
      // order access would wait for a barrier by itself (beforeShared), but
      // the async copies into the buffer do not (their ordering is the
      // schedule's): separate them from the earlier accesses here, once.
      if (smemDirty_) barrier();
      scalars_[op.result()] = smemAt(plan_ ? plan_->bufferOffset(op.result()) : 0);
      return;
    case OpCode::LocalLoad: {
      const ir::Value* buf = op.operand(0);
      const ir::Layout& l = la_.get(op.result());
      const auto& shape = buf->type().shape();
      ir::SlotTable t = ir::slotTable(l, shape);
      llvm::Type* mt = memTyOf(buf->type().dtype());
      beforeShared();
      Slots bs = bases(l, t);
      Slots r;
      for (size_t i = 0; i < t.size(); ++i)
        r.push_back(fromMem(b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, scalar(buf), bufIndex(buf, indexOf(bs, t, i), shape))),
                            op.result()->type()));
      tiles_[op.result()] = TileV{l, std::move(r)};
      return;
    }
    case OpCode::LocalStore: {
      const TileV& v = tile(op.operand(1));
      return writeBuffer(op.operand(0), v.slots, v.layout);
    }
    case OpCode::Copy: return emitCopy(op);
    case OpCode::BufferSlot: {
      // A view: slot i is the contiguous run at i * (elements per slot) of
      // the buffer's row-major shared array; no code beyond the address.
      const ir::Value* buf = op.operand(0);
      llvm::Type* mt = memTyOf(buf->type().dtype());
      llvm::Value* idx = b_.CreateSExtOrTrunc(scalar(op.operand(1)), b_.getInt32Ty());
      auto sg = storage_.find(buf);  // a padded staging layout makes slots longer
      int64_t slotElems = sg != storage_.end() ? sg->second.slotElems() : op.result()->type().numElements();
      llvm::Value* off = b_.CreateMul(idx, b_.getInt32(static_cast<uint32_t>(slotElems)));
      scalars_[op.result()] = b_.CreateInBoundsGEP(mt, scalar(buf), off);
      return;
    }
    // Groups: see emitCopy. With the synchronous lowering every copy has
    // completed where it was issued, so there is nothing to wait for.
    case OpCode::AsyncCommit:
      if (t_.asyncCopyImpl() == AsyncCopyImpl::Hardware) t_.asyncCommit(b_);
      ++committed_;
      return;
    case OpCode::AsyncWait: {
      int64_t pending = op.intAttr("pending");
      TS_ASSERT(pending >= 0, "async_wait with a negative count");
      switch (t_.asyncCopyImpl()) {
        case AsyncCopyImpl::Hardware:
          t_.asyncWait(b_, static_cast<unsigned>(pending));
          // The retired copies wrote shared memory after any earlier access
          // of the lowering: order the next shared access behind a barrier.
          smemDirty_ = true;
          return;
        case AsyncCopyImpl::RegisterStaged: return flushStaged(committed_ - pending);
        case AsyncCopyImpl::Synchronous: return;
      }
      return;
    }
    case OpCode::Barrier: barrier(pipelineSlotBarrier(op)); return;
    case OpCode::Reduce: return emitReduce(op);
    case OpCode::Dot: return emitDot(op);
    case OpCode::For: return emitFor(op);
    case OpCode::If: return emitIf(op);
    case OpCode::Yield: {
      TS_ASSERT(!yields_.empty(), "yield outside a region");
      const ir::Op* parent = op.parent()->parentOp();
      TS_ASSERT(parent != nullptr, "yield in the kernel body");
      for (unsigned i = 0; i < op.numOperands(); ++i) {
        const ir::Value* v = op.operand(i);
        Slots s;
        if (v->type().isTile()) {
          // Carried / result layout: the for's block argument, the if's result.
          const ir::Value* target = parent->code() == OpCode::For ? parent->region(0).block().arg(i + 1) : parent->result(i);
          s = tileIn(v, la_.get(target));
        } else {
          s = {scalar(v)};
        }
        yields_.back().emplace_back(v, std::move(s));
      }
      return;
    }
    case OpCode::Return:
      flushStaged(INT64_MAX);  // (c): nothing may be in flight at return
      b_.CreateRetVoid();
      b_.ClearInsertionPoint();
      return;
    default: break;
  }
  emitElementwiseLike(op);
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
  unsigned threads = static_cast<unsigned>(o_.numWarps) * t_.warpSize();
  auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  llvm::Function* fn = t_.createKernel(m_, f_.name(), fty, threads);
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
  planDirectDots();
  planElision();
  tid_ = t_.threadId(b_, 0);
  unsigned ws = t_.warpSize();
  lane_ = b_.CreateURem(tid_, i32(ws), "lane");
  warp_ = b_.CreateUDiv(tid_, i32(ws), "warp");
  emitBlock(f_.body());
  TS_ASSERT(b_.GetInsertBlock() == nullptr, "kernel body does not end in return");
  finishProvenance();
}

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
                                 const ir::AxisAnalysis& axis, const GpuOptions& o, llvm::LLVMContext& ctx,
                                 const llvm::DataLayout& dl) {
  unsigned threads = static_cast<unsigned>(o.numWarps) * t.warpSize();
  TS_ASSERT(o.numWarps >= 1 && threads <= t.maxThreadsPerBlock(), "numWarps reached the lowering unchecked");
  // Measuring run: records every op's scratch need.
  std::map<const ir::Op*, uint64_t> req;
  std::unordered_map<const ir::Value*, uint64_t> storageBytes;
  {
    llvm::Module scratchMod("measure", ctx);
    scratchMod.setDataLayout(dl);
    scratchMod.setTargetTriple(llvm::Triple(t.triple()));
    Lower low(f, t, la, axis, o, ctx, scratchMod, req, nullptr);
    low.run(0);
    storageBytes = low.bufferStorageBytes();
  }
  ir::SharedPlan plan(f, req, storageBytes);
  GpuLoweringResult res;
  res.sharedBytes = plan.totalBytes();
  res.sharedPlan = plan.describe();
  res.threadsPerBlock = threads;
  if (plan.totalBytes() > t.maxSharedBytes()) throw sharedMemoryError(f, plan, t);
  auto m = std::make_unique<llvm::Module>(f.name(), ctx);
  m->setDataLayout(dl);
  m->setTargetTriple(llvm::Triple(t.triple()));
  Lower low(f, t, la, axis, o, ctx, *m, req, &plan);
  low.run(plan.totalBytes());
  res.module = std::move(m);
  return res;
}

}  // namespace tessera::codegen

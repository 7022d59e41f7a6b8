// The `pipeline` pass: rewrites every loop as written `for {stages = S}`
// into its explicit software-pipelined schedule (IR.h, docs/pipelining.md).
//
//   n = trip count of the loop (0 for a non-positive step)
//   prologue, p = 0 .. S-2 (ops {stage = p}):
//     for each staged copy: copy {async = 1} of iteration p into slot p,
//       masked by the user's mask and p < n
//     async_commit
//   for k = 0 .. n-1 {pipelined = S}:
//     barrier                                   {stage = S-1}  WAR: slot (k+S-1) mod S
//                                                               was read by iteration k-1
//     copy {async = 1} of iteration k+S-1 into slot (k+S-1) mod S,
//       masked by the user's mask and k+S-1 < n  {stage = S-1}
//     async_commit                              {stage = S-1}
//     async_wait {pending = S-1}                {stage = 0}    iteration k's group retired
//     barrier                                   {stage = 0}    ... and visible
//     the original body for iv = lo + k*step, reading slot k mod S  {stage = 0}
//   async_wait {pending = 0}                    drains the trailing (masked) copies
//
// A loop nested in another loop or a branch is scheduled in its own block,
// the prologue preceded by a barrier (that block may run again while slow
// threads still read the slots of its previous run).
//
// The loop as written guarantees (the verifier checks it first) that the
// staged copies' addresses depend only on the induction variable, values
// defined before the loop and global loads of memory the loop does not
// write, so computing them S-1 iterations ahead is exact; those loads are
// masked off for iterations >= n.
// Copies of iterations >= n are issued fully masked: they touch no global
// memory and write zeros to a slot no one reads, which keeps the schedule
// uniform (no branches) at the cost of S-1 idle copies per loop.
#include <functional>
#include <optional>
#include <unordered_map>

#include "PassUtils.h"
#include "tessera/ir/Builder.h"
#include "tessera/ir/Pass.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

namespace tessera::ir {
namespace {

using passutil::cloneOp;
using passutil::mapped;
using passutil::Staged;
using passutil::ValueMap;

class PipelineSchedule : public Pass {
 public:
  const char* name() const override { return "pipeline"; }

  void run(Function& f) override {
    // The rewrite relies on the form rules of loops as written.
    verify(f);
    // Loops as written at any depth (the verifier rejects one inside
    // another): each is scheduled in the block that holds it.
    std::vector<Op*> loops;
    walk(f.body(), [&](Op& op) {
      if (op.code() == OpCode::For && op.hasAttr("stages")) loops.push_back(&op);
    });
    for (Op* l : loops) schedule(f, *l);
    // A wrong schedule here is a bug of this pass; the pass manager reports
    // it as such, and direct callers get the verifier's precise message.
    verifyPipelines(f);
  }

 private:
  static size_t indexOf(const Block& b, const Op* op) {
    for (size_t i = 0; i < b.ops().size(); ++i)
      if (b.ops()[i].get() == op) return i;
    TS_UNREACHABLE("pipeline: op not in its block");
  }

  static void setStage(Block& b, size_t from, size_t to, int64_t stage) {
    for (size_t i = from; i < to; ++i) b.ops()[i]->attrs()["stage"] = stage;
  }

  void schedule(Function& f, Op& loop) {
    const int64_t S = loop.intAttr("stages");
    Block& body = loop.region(0).block();
    Value* iv = body.arg(0);
    std::vector<Staged> staged = passutil::stagedCopies(body);
    if (staged.empty()) {
      // Nothing to overlap: the loop as written is already its schedule.
      loop.attrs().erase("stages");
      return;
    }

    Block& top = *loop.parent();
    Builder b;
    b.setInsertionPoint(&top, indexOf(top, &loop));
    b.setLoc(loop.loc());
    // Nested in a loop (or a branch of one), the block runs again: the last
    // iterations of the previous run read slots the prologue is about to
    // refill, so every thread must be past them first.
    if (&top != &f.body()) b.barrier();
    Value* lo = loop.operand(0);
    Value* hi = loop.operand(1);
    Value* step = loop.operand(2);
    const Type ty = lo->type();
    auto cst = [&](Builder& bb, int64_t v) { return bb.constant(ty, v); };

    // Trip count: max(ceil((hi - lo) / step), 0) for step > 0, else 0.
    Value* zero = cst(b, 0);
    // One op per statement: the order of a call's arguments is unspecified in
    // C++, and the ops' order is the IR text, hence cache keys and goldens.
    Value* span = b.binary(OpCode::Sub, hi, lo);
    Value* stepLess1 = b.binary(OpCode::Sub, step, cst(b, 1));
    Value* num = b.binary(OpCode::Add, span, stepLess1);
    Value* q = b.binary(OpCode::Max, b.binary(OpCode::Div, num, step), zero);
    Value* n = b.select(b.cmp("gt", step, zero), q, zero);

    // The staged copies of iteration `it` (a value of the iv type) with the
    // original induction variable `ivAt`, into slot `slot`.
    const bool stepPositive = constantOf(step).value_or(0) > 0;
    auto issue = [&](Builder& bb, Value* it, Value* ivAt, Value* slot) {
      ValueMap m{{iv, ivAt}};
      // it < n, made where first needed.
      Value* inRangeValue = nullptr;
      const std::function<Value*()> inRange = [&] {
        if (!inRangeValue) inRangeValue = bb.cmp("lt", it, n);
        return inRangeValue;
      };
      for (const Staged& s : staged) {
        Value* src = cloneSlice(bb, body, s.copy->operand(1), m, inRange);
        Value* user = s.copy->numOperands() > 2 ? s.copy->operand(2) : nullptr;
        Value* mask = nullptr;
        if (user) mask = cloneSlice(bb, body, user, m, inRange);
        // A user mask bounding the induction variable by the loop's own
        // upper bound (`iv + r < hi`, r >= 0: the GEMM's `k < K`) is false
        // in every lane of an iteration past the end already.
        if (!user || !stepPositive || !boundsIv(user, iv, hi)) {
          Value* guard = bb.splat(inRange(), src->type().shape());
          mask = mask ? bb.binary(OpCode::And, mask, guard) : guard;
        }
        // Prologue and prefetch copies carry the user's location: an error
        // about them points at the stage_copy the user wrote.
        bb.setLoc(s.copy->loc());
        Value* view = bb.bufferSlot(s.buffer, slot);
        bb.copyAsync(view, src, mask);
        bb.setLoc(loop.loc());
      }
      bb.asyncCommit();
    };

    for (int64_t p = 0; p + 1 < S; ++p) {
      size_t from = indexOf(top, &loop);
      Value* pv = cst(b, p);
      Value* ivp = p == 0 ? lo : b.binary(OpCode::Add, lo, b.binary(OpCode::Mul, pv, step));
      issue(b, pv, ivp, pv);
      setStage(top, from, indexOf(top, &loop), p);
    }

    std::vector<Value*> inits(loop.operands().begin() + 3, loop.operands().end());
    Op* newLoop = nullptr;
    auto results = b.forLoop(zero, n, cst(b, 1), inits, [&](Builder& in, Value* k, std::vector<Value*> carried) {
      Block& nb = *in.block();
      newLoop = nb.parentOp();
      in.setLoc(loop.loc());
      // Prefetch stage: iteration k + S - 1.
      in.barrier();
      Value* kp = S > 1 ? in.binary(OpCode::Add, k, cst(in, S - 1)) : k;
      Value* ivp = in.binary(OpCode::Add, lo, in.binary(OpCode::Mul, kp, step));
      issue(in, kp, ivp, in.binary(OpCode::Rem, kp, cst(in, S)));
      setStage(nb, 0, nb.ops().size(), S - 1);
      // Compute stage: iteration k.
      size_t from = nb.ops().size();
      in.asyncWait(S - 1);
      in.barrier();
      Value* ivk = in.binary(OpCode::Add, lo, in.binary(OpCode::Mul, k, step));
      Value* slotK = in.binary(OpCode::Rem, k, cst(in, S));
      ValueMap m{{iv, ivk}};
      for (size_t i = 0; i < carried.size(); ++i) m[body.arg(static_cast<unsigned>(i + 1))] = carried[i];
      std::vector<Value*> ys;
      for (auto& op : body.ops()) {
        bool isStagedCopy = false, isView = false;
        for (const Staged& s : staged) {
          isStagedCopy = isStagedCopy || op.get() == s.copy;
          isView = isView || op.get() == s.view;
        }
        if (isStagedCopy) continue;
        if (op->code() == OpCode::Yield) {
          for (Value* v : op->operands()) ys.push_back(mapped(m, v));
          continue;
        }
        if (isView) {
          in.setLoc(op->loc());
          m[op->result()] = in.bufferSlot(op->operand(0), slotK);
          in.setLoc(loop.loc());
          continue;
        }
        cloneOp(in, *op, m);
      }
      setStage(nb, from, nb.ops().size(), 0);
      return ys;
    });
    TS_ASSERT(newLoop != nullptr, "pipeline: loop body not built");
    newLoop->attrs()["pipelined"] = S;
    b.asyncWait(0);

    for (unsigned i = 0; i < loop.numResults(); ++i) passutil::replaceAllUsesWith(f, loop.result(i), results[i]);
    top.ops().erase(top.ops().begin() + static_cast<std::ptrdiff_t>(indexOf(top, &loop)));
    passutil::removeDeadPureOps(f, newLoop->region(0).block());
  }

  static std::optional<int64_t> constantOf(const Value* v) {
    const Op* d = v->definingOp();
    if (!d || d->code() != OpCode::Constant || !v->type().isScalar()) return std::nullopt;
    auto it = d->attrs().find("value");
    if (it == d->attrs().end() || !std::holds_alternative<int64_t>(it->second)) return std::nullopt;
    return std::get<int64_t>(it->second);
  }
  /// `v` through splats, broadcasts and expand_dims (same values per lane).
  static const Value* stripShape(const Value* v) {
    while (const Op* d = v->definingOp()) {
      if (d->code() != OpCode::Splat && d->code() != OpCode::Broadcast && d->code() != OpCode::ExpandDims) break;
      v = d->operand(0);
    }
    return v;
  }
  /// True when every lane of `r` is >= 0: an arange from a non-negative
  /// start, a non-negative constant, through shape ops.
  static bool nonNegative(const Value* r) {
    r = stripShape(r);
    if (auto c = constantOf(r)) return *c >= 0;
    const Op* d = r->definingOp();
    if (!d) return false;
    if (d->code() == OpCode::Arange) return d->intAttr("start") >= 0;
    if (d->code() == OpCode::Constant) {
      auto it = d->attrs().find("value");
      return it != d->attrs().end() && std::holds_alternative<int64_t>(it->second) &&
             std::get<int64_t>(it->second) >= 0;
    }
    return false;
  }
  /// True when mask `m` (an and-tree) has a conjunct `iv + r < hi` (r >= 0
  /// in every lane, `hi` the loop's upper bound): a lane can then be on
  /// only for iv < hi, i.e. in an iteration of the loop (step > 0).
  static bool boundsIv(const Value* m, const Value* iv, const Value* hi) {
    m = stripShape(m);
    const Op* d = m->definingOp();
    if (!d) return false;
    if (d->code() == OpCode::And) return boundsIv(d->operand(0), iv, hi) || boundsIv(d->operand(1), iv, hi);
    if (d->code() != OpCode::Cmp || d->strAttr("pred") != "lt" || stripShape(d->operand(1)) != hi) return false;
    const Value* x = stripShape(d->operand(0));
    if (x == iv) return true;
    const Op* a = x->definingOp();
    if (!a || a->code() != OpCode::Add) return false;
    for (unsigned i = 0; i < 2; ++i)
      if (stripShape(a->operand(i)) == iv && nonNegative(a->operand(1 - i))) return true;
    return false;
  }

  /// Clones the ops of `body` that `v` depends on (the address slice of a
  /// staged copy), in dependency order, at the builder's insertion point.
  /// A global load among them (a page table entry) reads only where
  /// `inRange` holds: an iteration past the end may index past the table.
  Value* cloneSlice(Builder& b, const Block& body, Value* v, ValueMap& m, const std::function<Value*()>& inRange) {
    auto it = m.find(v);
    if (it != m.end()) return it->second;
    Op* d = v->definingOp();
    if (!d || d->parent() != &body) return v;  // defined before the loop
    for (Value* o : d->operands()) cloneSlice(b, body, o, m, inRange);
    if (d->code() != OpCode::Load) {
      cloneOp(b, *d, m);
      return m.at(v);
    }
    const Type& t = v->type();
    Value* guard = t.isTile() ? b.splat(inRange(), t.shape()) : inRange();
    Value* mask = d->numOperands() > 1 ? b.binary(OpCode::And, mapped(m, d->operand(1)), guard) : guard;
    std::vector<Value*> operands{mapped(m, d->operand(0)), mask};
    if (d->numOperands() > 2) operands.push_back(mapped(m, d->operand(2)));
    Location saved = b.loc();
    b.setLoc(d->loc());
    m[v] = b.create(OpCode::Load, std::move(operands), {t}, d->attrs())->result();
    b.setLoc(saved);
    return m.at(v);
  }
};

}  // namespace

std::unique_ptr<Pass> createPipelineSchedulePass() { return std::make_unique<PipelineSchedule>(); }

}  // namespace tessera::ir

// The `warp-specialize` pass: rewrites a loop as written `for {stages = S,
// specialize = 1}` in the kernel body into a producer and a consumer linked
// by a channel of S slots (IR.h, "Warp-specialised pipelines";
// docs/pipelining.md):
//
//   warp_specialize {warps = W} {                  the producer warps
//     n = trip count (recomputed from the kernel's arguments)
//     for i = 0 .. n-1 {pipelined = S}:
//       stage_acquire(i mod S)                     slot free again
//       copy {async = 1} of iteration i into slot i mod S, for each staged copy
//       stage_commit(i mod S)
//   }
//   n = trip count
//   for i = 0 .. n-1 {pipelined = S}:              the kernel's own warps
//     stage_wait(i mod S)                          iteration i's tiles landed
//     the body for iv = lo + i*step, reading slot i mod S
//     stage_release(i mod S)                       the producer may refill it
//
// Where the body is one dot of two staged tiles into a carried accumulator
// that the target keeps in flight (`inFlight`: wgmma), the dot is async and
// the slot is released one iteration later, once the next dot_wait retired
// the dot reading it:
//
//     d = dot(slot i mod S ...) {async = 1}
//     dot_wait {pending = 1}                        dot i-1 retired
//     stage_release((i + S - 1) mod S) if i >= 1    ... so its slot is free
//   dot_wait(result) {pending = 0}                  after the loop
//
// The producer runs nothing but the copies' address arithmetic, so all of
// it is cloned into its region from the kernel's arguments: a loop whose
// addresses depend on a load, or on anything but pure arithmetic, keeps the
// usual schedule (and the compile's warnings say why), as does every loop
// where `refuse` (the target: codegen::gpuWarpSpecializeRefusal) gives a
// reason. Without `refuse` (the pass by name), every loop that can be.
#include <functional>
#include <optional>
#include <set>
#include <string>

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

class WarpSpecialize : public Pass {
 public:
  WarpSpecialize(std::function<std::string(const Function&, const Op&)> refuse, std::function<bool(const Op&)> inFlight,
                 std::function<int64_t(const Op&)> producerWarps, std::vector<std::string>* warnings)
      : refuse_(std::move(refuse)),
        inFlight_(std::move(inFlight)),
        producerWarps_(std::move(producerWarps)),
        warnings_(warnings) {}
  const char* name() const override { return "warp-specialize"; }

  void run(Function& f) override {
    verify(f);
    std::vector<Op*> loops;
    walk(f.body(), [&](Op& op) {
      if (op.code() == OpCode::For && op.hasAttr("stages") && op.hasAttr("specialize")) loops.push_back(&op);
    });
    bool done = false;
    for (Op* l : loops) {
      std::string why = done ? "the kernel has a warp-specialised loop already" : reason(f, *l);
      if (why.empty()) {
        rewrite(f, *l);
        done = true;
        continue;
      }
      l->attrs().erase("specialize");
      if (warnings_)
        warnings_->push_back(l->loc().str() + ": warning: for_pipelined: not warp-specialised (" + why +
                             "); it keeps the usual schedule");
    }
    if (done) verify(f);
  }

 private:
  std::function<std::string(const Function&, const Op&)> refuse_;
  std::function<bool(const Op&)> inFlight_;
  std::function<int64_t(const Op&)> producerWarps_;
  std::vector<std::string>* warnings_;
  std::vector<Staged> staged_;

  static bool isArg(const Function& f, const Value* v) {
    for (unsigned i = 0; i < f.numArgs(); ++i)
      if (f.arg(i) == v) return true;
    return false;
  }

  /// Why `v` cannot be recomputed by the producer from the kernel's
  /// arguments (empty: it can).
  static std::string sliceProblem(const Function& f, const Value* v, std::set<const Value*>& seen) {
    if (!seen.insert(v).second || isArg(f, v)) return "";
    const Op* d = v->definingOp();
    if (!d) return "";  // a block argument: the loop's own (mapped) or checked by the caller
    if (d->code() == OpCode::Alloc) return "";
    if (d->code() == OpCode::Load) return "a staged copy's address depends on the load at " + d->loc().str();
    if (hasSideEffects(d->code()) || d->numRegions() != 0)
      return std::string("a staged copy's address depends on '") + d->name() + "' at " + d->loc().str();
    for (const Value* o : d->operands())
      if (auto p = sliceProblem(f, o, seen); !p.empty()) return p;
    return "";
  }

  std::string reason(const Function& f, const Op& loop) {
    if (loop.parent() != &f.body()) return "the loop is not in the kernel's body";
    Block& body = loop.region(0).block();
    staged_ = passutil::stagedCopies(body);
    if (staged_.empty()) return "it stages no copy";
    std::set<const Value*> seen{body.arg(0)};
    for (unsigned i = 1; i < body.numArgs(); ++i) seen.insert(body.arg(i));
    for (const Staged& s : staged_) {
      for (unsigned i = 1; i < s.copy->numOperands(); ++i)
        if (auto p = sliceProblem(f, s.copy->operand(i), seen); !p.empty()) return p;
      const Op* a = s.buffer->definingOp();
      if (!a || a->code() != OpCode::Alloc || a->parent() != &f.body())
        return "a staged buffer is not allocated in the kernel's body";
      // The body reads the slot only through loads of the view.
      walk(body, [&](Op& o) {
        for (Value* v : o.operands())
          if (v == s.view->result() && o.code() != OpCode::LocalLoad && &o != s.copy) seen.insert(nullptr);
      });
      if (seen.count(nullptr)) return "a staged slot is used other than by loads";
    }
    for (Value* v : {loop.operand(0), loop.operand(1), loop.operand(2)})
      if (auto p = sliceProblem(f, v, seen); !p.empty()) return "the loop's bounds: " + p;
    if (refuse_) return refuse_(f, loop);
    return "";
  }

  /// The value `v` of the kernel body (or of the loop body, through `m`)
  /// recomputed at the builder: its pure slice cloned, arguments and allocs
  /// as they are.
  static Value* recompute(Builder& b, const Function& f, Value* v, ValueMap& m) {
    if (auto it = m.find(v); it != m.end()) return it->second;
    const Op* d = v->definingOp();
    if (!d || isArg(f, v) || d->code() == OpCode::Alloc) return v;
    for (Value* o : d->operands()) recompute(b, f, o, m);
    cloneOp(b, *d, m);
    return m.at(v);
  }

  static bool isStagedOp(const std::vector<Staged>& st, const Op* op) {
    for (const Staged& s : st)
      if (op == s.copy || op == s.view) return true;
    return false;
  }

  /// The dot kept in flight: the body's only reads of staged slots are the
  /// two operands of one dot whose accumulator is a carried value used by it
  /// alone and whose result is only yielded back in its place.
  const Op* asyncDot(const Function& f, const Op& loop) {
    const Block& body = loop.region(0).block();
    const Op* dot = nullptr;
    int loads = 0;
    for (auto& op : body.ops()) {
      if (op->code() == OpCode::LocalLoad)
        for (const Staged& s : staged_)
          if (op->operand(0) == s.view->result()) ++loads;
      if (op->code() != OpCode::Dot) continue;
      if (dot) return nullptr;
      dot = op.get();
    }
    if (!dot || loads != 2 || loop.intAttr("stages") < 2 || (inFlight_ && !inFlight_(*dot))) return nullptr;
    for (unsigned i = 0; i < 2; ++i) {
      const Op* ld = dot->operand(i)->definingOp();
      if (!ld || ld->code() != OpCode::LocalLoad) return nullptr;
      bool staged = false;
      for (const Staged& s : staged_) staged = staged || ld->operand(0) == s.view->result();
      if (!staged) return nullptr;
    }
    const Value* acc = dot->operand(2);
    unsigned carried = 0;
    for (unsigned i = 1; i < body.numArgs(); ++i)
      if (body.arg(i) == acc) carried = i;
    if (!carried) return nullptr;
    auto uses = passutil::countUses(const_cast<Function&>(f));
    const Op* y = body.terminator();
    if (uses[acc] != 1 || uses[dot->result()] != 1 || y->operand(carried - 1) != dot->result()) return nullptr;
    return dot;
  }

  static Value* tripCount(Builder& b, Value* lo, Value* hi, Value* step) {
    const Type ty = lo->type();
    Value* zero = b.constant(ty, int64_t{0});
    Value* span = b.binary(OpCode::Sub, hi, lo);
    Value* stepLess1 = b.binary(OpCode::Sub, step, b.constant(ty, int64_t{1}));
    Value* num = b.binary(OpCode::Add, span, stepLess1);
    Value* q = b.binary(OpCode::Max, b.binary(OpCode::Div, num, step), zero);
    return b.select(b.cmp("gt", step, zero), q, zero);
  }

  static Op* stageOp(Builder& b, OpCode c, Value* slot, int64_t S, Value* cond = nullptr) {
    std::vector<Value*> ops{slot};
    if (cond) ops.push_back(cond);
    return b.create(c, std::move(ops), {}, {{"slots", S}});
  }

  void rewrite(Function& f, Op& loop) {
    const int64_t S = loop.intAttr("stages");
    Block& body = loop.region(0).block();
    Value* iv = body.arg(0);
    const Op* dot = asyncDot(f, loop);
    Block& top = f.body();
    size_t at = 0;
    while (top.ops()[at].get() != &loop) ++at;
    Builder b;
    b.setInsertionPoint(&top, at);
    b.setLoc(loop.loc());
    Value* lo = loop.operand(0);
    Value* hi = loop.operand(1);
    Value* step = loop.operand(2);
    const Type ty = lo->type();

    // The producer.
    const int64_t warps = producerWarps_ ? producerWarps_(loop) : kProducerWarps;
    Op* ws = b.create(OpCode::WarpSpecialize, {}, {}, {{"warps", warps}});
    {
      Builder pb(&ws->addRegion()->block());
      pb.setLoc(loop.loc());
      ValueMap outer;
      Value* plo = recompute(pb, f, lo, outer);
      Value* pstep = recompute(pb, f, step, outer);
      Value* pn = tripCount(pb, plo, recompute(pb, f, hi, outer), pstep);
      pb.forLoop(pb.constant(ty, int64_t{0}), pn, pb.constant(ty, int64_t{1}), {},
                 [&](Builder& in, Value* i, std::vector<Value*>) {
                   in.setLoc(loop.loc());
                   in.block()->parentOp()->attrs()["pipelined"] = S;
                   Value* slot = in.binary(OpCode::Rem, i, in.constant(ty, S));
                   stageOp(in, OpCode::StageAcquire, slot, S);
                   ValueMap m = outer;
                   m[iv] = in.binary(OpCode::Add, plo, in.binary(OpCode::Mul, i, pstep));
                   for (const Staged& s : staged_) {
                     Value* src = recompute(in, f, s.copy->operand(1), m);
                     Value* mask = s.copy->numOperands() > 2 ? recompute(in, f, s.copy->operand(2), m) : nullptr;
                     in.setLoc(s.copy->loc());
                     in.copyAsync(in.bufferSlot(s.buffer, slot), src, mask);
                     in.setLoc(loop.loc());
                   }
                   stageOp(in, OpCode::StageCommit, slot, S);
                   return std::vector<Value*>{};
                 });
      pb.yield({});
    }

    // The consumer.
    Value* n = tripCount(b, lo, hi, step);
    std::vector<Value*> inits(loop.operands().begin() + 3, loop.operands().end());
    Op* newLoop = nullptr;
    auto results = b.forLoop(
        b.constant(ty, int64_t{0}), n, b.constant(ty, int64_t{1}), inits,
        [&](Builder& in, Value* i, std::vector<Value*> carried) {
          in.setLoc(loop.loc());
          newLoop = in.block()->parentOp();
          Value* slot = in.binary(OpCode::Rem, i, in.constant(ty, S));
          stageOp(in, OpCode::StageWait, slot, S);
          ValueMap m{{iv, in.binary(OpCode::Add, lo, in.binary(OpCode::Mul, i, step))}};
          for (size_t k = 0; k < carried.size(); ++k) m[body.arg(static_cast<unsigned>(k + 1))] = carried[k];
          std::vector<Value*> ys;
          for (auto& op : body.ops()) {
            if (op->code() == OpCode::Yield) {
              for (Value* v : op->operands()) ys.push_back(mapped(m, v));
              continue;
            }
            if (isStagedOp(staged_, op.get())) {
              if (op->code() == OpCode::BufferSlot) {
                in.setLoc(op->loc());
                m[op->result()] = in.bufferSlot(op->operand(0), slot);
                in.setLoc(loop.loc());
              }
              continue;
            }
            Op* c = cloneOp(in, *op, m);
            if (op.get() != dot) continue;
            c->attrs()["async"] = int64_t{1};
            in.dotWait({}, 1);
            Value* prev = in.binary(OpCode::Rem, in.binary(OpCode::Add, i, in.constant(ty, S - 1)), in.constant(ty, S));
            stageOp(in, OpCode::StageRelease, prev, S, in.cmp("ge", i, in.constant(ty, int64_t{1})));
          }
          if (!dot) stageOp(in, OpCode::StageRelease, slot, S);
          return ys;
        });
    TS_ASSERT(newLoop != nullptr, "warp-specialize: loop body not built");
    newLoop->attrs()["pipelined"] = S;
    if (dot) {
      // The accumulator leaves the loop still in flight: complete it.
      const Op* y = body.terminator();
      for (unsigned k = 0; k < y->numOperands(); ++k)
        if (y->operand(k) == dot->result()) results[k] = b.dotWait({results[k]}, 0)->result(0);
    }
    for (unsigned k = 0; k < loop.numResults(); ++k) passutil::replaceAllUsesWith(f, loop.result(k), results[k]);
    while (top.ops()[at].get() != &loop) ++at;
    top.ops().erase(top.ops().begin() + static_cast<std::ptrdiff_t>(at));
    // The consumer keeps the copies' address arithmetic, now unused.
    passutil::removeDeadPureOps(f, newLoop->region(0).block());
  }
};

}  // namespace

std::unique_ptr<Pass> createWarpSpecializePass(std::function<std::string(const Function& f, const Op& loop)> refuse,
                                               std::function<bool(const Op& dot)> inFlight,
                                               std::function<int64_t(const Op& loop)> producerWarps,
                                               std::vector<std::string>* warnings) {
  return std::make_unique<WarpSpecialize>(std::move(refuse), std::move(inFlight), std::move(producerWarps), warnings);
}

}  // namespace tessera::ir

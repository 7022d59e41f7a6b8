// The `async-dots` pass: in a pipelined loop whose dot reads both operands
// from the loop's staged slots, keeps the dot's matrix instructions in
// flight across iterations (IR.h, "Asynchronous dots"; docs/pipelining.md).
//
// The `pipeline` pass's schedule (S >= 2 stages) waits for every dot inside
// the iteration that issues it, so the tensor cores idle from the end of
// dot k to the start of dot k + 1 (the copies' wait, the barrier, the
// issue). Here the loop body
//
//   barrier; copies of k+S-1 into slot (k-1) mod S; async_commit    (prefetch)
//   async_wait {pending = S-1}; barrier
//   ... %d = dot(local_load(slot k mod S)..., %acc) ...; yield %d   (compute)
//
// becomes
//
//   async_wait {pending = S-2}; barrier
//   ... %d = dot(...) {async = 1} ...                  dot k issued, not waited
//   dot_wait() {pending = D}                           dot k-1 retired (D dots per iteration)
//   barrier; copies of k+S-1 into slot (k-1) mod S; async_commit
//   yield %d
//
// and the loop is followed by `dot_wait(results) {pending = 0}`, whose
// results replace the loop's. Slot (k-1) mod S is the one dot k-1 read: it
// is refilled only after the wait that retires dot k-1 and a barrier (every
// warp has retired it), which is the reuse rule the verifier checks. The
// copy of iteration k+S-1 is now issued after dot k rather than before it,
// so the schedule is worth it only where the dot really runs behind the
// program: the caller's `inFlight(dot)` says where (the GPU targets'
// tensor-core tables: codegen::gpuKeepsDotInFlight; by name, every
// candidate). A dot qualifies when both operands are local_loads of staged
// slots of the loop (B also through a transpose only it reads), its accumulator is a loop-carried value used by
// nothing else, and its result is only yielded back into that position.
#include <functional>
#include <optional>
#include <unordered_map>
#include <set>
#include <vector>

#include "PassUtils.h"
#include "tessera/ir/Builder.h"
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

std::optional<int64_t> intAttrOf(const Op& op, const char* k) {
  auto it = op.attrs().find(k);
  if (it == op.attrs().end() || !std::holds_alternative<int64_t>(it->second)) return std::nullopt;
  return std::get<int64_t>(it->second);
}

bool isAsyncCopy(const Op& op) { return op.code() == OpCode::Copy && intAttrOf(op, "async").value_or(0) == 1; }

class AsyncDots : public Pass {
 public:
  explicit AsyncDots(std::function<bool(const Op&)> inFlight) : inFlight_(std::move(inFlight)) {}
  const char* name() const override { return "async-dots"; }

  void run(Function& f) override {
    std::vector<Op*> loops;
    walk(f.body(), [&](Op& op) {
      if (op.code() == OpCode::For && intAttrOf(op, "pipelined").value_or(0) >= 2) loops.push_back(&op);
    });
    for (Op* l : loops) rewrite(f, *l);
  }

 private:
  /// The loop-carried position (0-based) of the accumulator that dot `d`
  /// can keep in flight, or -1.
  int candidate(const Op& d, const Block& body, const std::set<const Value*>& stagedSlots,
                const std::unordered_map<const Value*, unsigned>& uses) const {
    if (d.code() != OpCode::Dot || d.hasAttr("async") || d.parent() != &body) return -1;
    auto count = [&](const Value* v) {
      auto it = uses.find(v);
      return it == uses.end() ? 0u : it->second;
    };
    // Each operand a local_load of a staged slot (B also through a
    // transpose that only the dot reads: ir::dotOperandLoad).
    for (unsigned i = 0; i < 2; ++i) {
      bool transposed = false;
      const Op* ld = dotOperandLoad(d, i, &transposed);
      if (!ld || !stagedSlots.count(ld->operand(0)) || (transposed && count(d.operand(i)) != 1)) return -1;
    }
    const Value* acc = d.operand(2);
    if (!acc->isBlockArg() || acc->ownerBlock() != &body || acc->index() == 0 || count(acc) != 1) return -1;
    const unsigned pos = acc->index() - 1;
    const Op* y = body.terminator();
    if (count(d.result()) != 1 || y->operand(pos) != d.result()) return -1;
    if (inFlight_ && !inFlight_(d)) return -1;
    return static_cast<int>(pos);
  }

  void rewrite(Function& f, Op& loop) {
    const int64_t S = loop.intAttr("pipelined");
    Block& body = loop.region(0).block();
    auto& ops = body.ops();
    // The pipeline pass's shape: barrier, prefetch (stage S-1) ending in
    // async_commit, async_wait {pending = S-1}, barrier, compute, yield.
    size_t commit = 0;
    while (commit < ops.size() && intAttrOf(*ops[commit], "stage") == S - 1) ++commit;
    if (commit < 2 || commit + 2 >= ops.size()) return;
    --commit;  // the last op of the prefetch stage
    Op& wait = *ops[commit + 1];
    if (ops[0]->code() != OpCode::Barrier || ops[commit]->code() != OpCode::AsyncCommit ||
        wait.code() != OpCode::AsyncWait || wait.intAttr("pending") != S - 1 ||
        ops[commit + 2]->code() != OpCode::Barrier)
      return;
    // The slots the loop's async copies fill, and their views read in the
    // compute stage (the same buffers at slot k mod S).
    std::set<const Value*> staged;
    for (size_t i = 0; i < commit; ++i)
      if (isAsyncCopy(*ops[i])) staged.insert(ops[i]->operand(0)->definingOp()->operand(0));
    std::set<const Value*> stagedSlots;
    for (size_t i = commit + 3; i < ops.size(); ++i)
      if (ops[i]->code() == OpCode::BufferSlot && staged.count(ops[i]->operand(0)))
        stagedSlots.insert(ops[i]->result());
    auto uses = passutil::countUses(f);
    std::vector<Op*> dots;
    std::vector<unsigned> carried;
    for (size_t i = commit + 3; i < ops.size(); ++i)
      if (int pos = candidate(*ops[i], body, stagedSlots, uses); pos >= 0) {
        dots.push_back(ops[i].get());
        carried.push_back(static_cast<unsigned>(pos));
      }
    if (dots.empty()) return;
    // The prefetch stage moves behind the compute stage: nothing computed
    // there may be used by the compute stage (the pipeline pass clones the
    // copies' address slices apart, so this holds for its schedules).
    std::set<const Value*> prefetchValues;
    for (size_t i = 0; i <= commit; ++i)
      for (auto& r : ops[i]->results()) prefetchValues.insert(r.get());
    for (size_t i = commit + 1; i < ops.size(); ++i)
      for (Value* v : ops[i]->operands())
        if (prefetchValues.count(v)) return;

    for (Op* d : dots) d->attrs()["async"] = int64_t{1};
    wait.attrs()["pending"] = S - 2;
    std::vector<std::unique_ptr<Op>> prefetch;
    for (size_t i = 0; i <= commit; ++i) prefetch.push_back(std::move(ops[i]));
    ops.erase(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(commit + 1));
    Builder in;
    in.setInsertionPoint(&body, ops.size() - 1);  // before the yield
    in.setLoc(loop.loc());
    Op* retire = in.dotWait({}, static_cast<int64_t>(dots.size()));
    retire->attrs()["stage"] = int64_t{0};
    for (auto& p : prefetch) body.insert(ops.size() - 1, std::move(p));

    // After the loop (and the async_wait that drains its copies): complete
    // the accumulators.
    Block& top = *loop.parent();
    size_t at = 0;
    while (top.ops()[at].get() != &loop) ++at;
    ++at;
    if (at < top.ops().size() && top.ops()[at]->code() == OpCode::AsyncWait) ++at;
    Builder after;
    after.setInsertionPoint(&top, at);
    after.setLoc(loop.loc());
    std::vector<Value*> results;
    for (unsigned pos : carried) results.push_back(loop.result(pos));
    Op* done = after.dotWait(results, 0);
    for (size_t i = 0; i < results.size(); ++i) {
      Value* from = results[i];
      Value* to = done->result(static_cast<unsigned>(i));
      walk(f.body(), [&](Op& user) {
        if (&user == done) return;
        for (unsigned k = 0; k < user.numOperands(); ++k)
          if (user.operand(k) == from) user.setOperand(k, to);
      });
    }
  }

  std::function<bool(const Op&)> inFlight_;
};

}  // namespace

std::unique_ptr<Pass> createAsyncDotsPass(std::function<bool(const Op&)> inFlight) {
  return std::make_unique<AsyncDots>(std::move(inFlight));
}

}  // namespace tessera::ir

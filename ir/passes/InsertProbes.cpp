// The `insert-probes` pass: the automatic scopes of a profiled compile
// (CompileOptions::profile; IR.h, "Profiling"). It runs after the passes
// that move code (warp-specialize, pipeline, async-dots), so each scope
// covers the code that really runs there -- a probe placed before the
// pipeline would measure an iteration the schedule has since split over
// several (the reason other profilers turn their source-level probes off).
//
// Scopes, outermost first:
//   kernel                the kernel body (the consumer's warps, where the
//                         kernel is warp-specialised)
//   producer / consumer   a warp_specialize region, and the ops after it
//   prologue              the copies a pipelined loop issues ahead of it
//   mainloop              a pipelined loop (`for {pipelined}`)
//   epilogue              the ops after a block's last pipelined loop
//   stage D (iteration k+D)  within a pipelined loop, each run of ops of
//                         one stage (the schedule's `stage` attribute)
//   wait: ... / barrier   every op that waits: async_wait, dot_wait,
//                         stage_wait, stage_acquire and barrier
// A scope's probes take the location of the first op they cover, so a
// trace names the line each scope came from.
#include <string>
#include <vector>

#include "tessera/ir/Builder.h"
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

const char* waitName(OpCode c) {
  switch (c) {
    case OpCode::AsyncWait: return "wait: async copies";
    case OpCode::DotWait: return "wait: async dots";
    case OpCode::StageWait: return "wait: stage filled";
    case OpCode::StageAcquire: return "wait: slot released";
    case OpCode::Barrier: return "barrier";
    default: return nullptr;
  }
}

bool isMainLoop(const Op& op) { return op.code() == OpCode::For && op.hasAttr("pipelined"); }

class InsertProbes : public Pass {
 public:
  const char* name() const override { return "insert-probes"; }

  void run(Function& f) override { scope(f.body(), /*kernel=*/true); }

 private:
  /// Where a block's probes go: before[i] begins before op i (outermost
  /// first), after[i] ends after it (innermost first). Scopes are added
  /// outermost first, so each begin goes last and each end first.
  struct Marks {
    std::vector<std::vector<std::pair<std::string, Location>>> before, after;
    explicit Marks(size_t n) : before(n), after(n) {}
    void add(size_t from, size_t to, const std::string& name, const Location& loc) {
      before[from].push_back({name, loc});
      after[to].insert(after[to].begin(), {name, loc});
    }
  };

  void scope(Block& b, bool kernel) {
    auto& ops = b.ops();
    const size_t n = ops.size();
    if (n < 2) return;          // the terminator alone
    const size_t last = n - 2;  // the last op before the terminator
    Marks m(n);
    if (kernel) m.add(0, last, "kernel", ops[0]->loc());
    for (size_t i = 0; i <= last; ++i) {
      Op& op = *ops[i];
      if (op.code() == OpCode::WarpSpecialize) {
        Block& producer = op.region(0).block();
        scopeRange(producer, "producer");
        if (i < last) m.add(i + 1, last, "consumer", ops[i + 1]->loc());
      }
    }
    size_t lastLoop = n;
    for (size_t i = 0; i <= last; ++i)
      if (isMainLoop(*ops[i])) lastLoop = i;
    size_t after = 0;  // the first op after the previous pipelined loop
    for (size_t i = 0; i <= last; ++i) {
      Op& op = *ops[i];
      if (!isMainLoop(op)) continue;
      // The prologue: from the first op of the schedule (`stage`) since the
      // previous loop, with what the schedule computes between its copies.
      size_t p = after;
      while (p < i && !ops[p]->hasAttr("stage")) ++p;
      after = i + 1;
      if (p < i) m.add(p, i - 1, "prologue", ops[p]->loc());
      m.add(i, i, "mainloop", op.loc());
      if (i == lastLoop && i < last) m.add(i + 1, last, "epilogue", ops[i + 1]->loc());
      stages(op.region(0).block());
    }
    for (size_t i = 0; i <= last; ++i) {
      Op& op = *ops[i];
      if (const char* w = waitName(op.code())) m.add(i, i, w, op.loc());
      // Regions not handled above: an `if`'s branches, a loop as written,
      // a scan's combine (elementwise only: nothing to mark).
      if (op.code() == OpCode::WarpSpecialize || isMainLoop(op) || op.code() == OpCode::Scan) continue;
      for (auto& r : op.regions()) scope(r->block(), false);
    }
    rebuild(b, m);
  }

  /// A producer region: the whole of it as one scope, then its own marks.
  void scopeRange(Block& b, const std::string& name) {
    scope(b, false);
    auto& ops = b.ops();
    if (ops.size() < 2) return;
    Marks m(ops.size());
    m.add(0, ops.size() - 2, name, ops[0]->loc());
    rebuild(b, m);
  }

  /// A pipelined loop's body: each run of one stage, and the waits.
  void stages(Block& b) {
    auto& ops = b.ops();
    const size_t n = ops.size();
    if (n < 2) return;
    Marks m(n);
    for (size_t i = 0; i + 1 < n;) {
      if (!ops[i]->hasAttr("stage")) {
        ++i;
        continue;
      }
      const int64_t s = ops[i]->intAttr("stage");
      size_t j = i;
      while (j + 2 < n && ops[j + 1]->hasAttr("stage") && ops[j + 1]->intAttr("stage") == s) ++j;
      m.add(i, j, "stage " + std::to_string(s) + " (iteration k+" + std::to_string(s) + ")", ops[i]->loc());
      i = j + 1;
    }
    for (size_t i = 0; i + 1 < n; ++i) {
      Op& op = *ops[i];
      if (const char* w = waitName(op.code())) m.add(i, i, w, op.loc());
      if (op.code() == OpCode::Scan) continue;
      for (auto& r : op.regions()) scope(r->block(), false);
    }
    rebuild(b, m);
  }

  static void rebuild(Block& b, const Marks& m) {
    std::vector<std::unique_ptr<Op>> old = std::move(b.ops());
    b.ops().clear();
    for (size_t i = 0; i < old.size(); ++i) {
      for (const auto& [name, loc] : m.before[i]) probe(b, name, loc, false);
      b.ops().push_back(std::move(old[i]));
      for (const auto& [name, loc] : m.after[i]) probe(b, name, loc, true);
    }
  }

  static void probe(Block& b, const std::string& name, const Location& loc, bool end) {
    Builder bb;
    bb.setInsertionPointToEnd(&b);
    bb.setLoc(loc);
    bb.probe(name, end);
  }
};

}  // namespace

std::unique_ptr<Pass> createInsertProbesPass() { return std::make_unique<InsertProbes>(); }

}  // namespace tessera::ir

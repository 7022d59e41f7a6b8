// The pipeline verifier's checker (not a public header): one class whose form
// rules are in PipelineVerifier.cpp and whose abstract execution, the proof
// of async-copy schedules, is in PipelineSimulation.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "PrinterDetail.h"
#include "tessera/ir/IR.h"
#include "tessera/support/Error.h"

namespace tessera::ir::detail {

bool isAsyncCopy(const Op& op);
bool isAsyncDot(const Op& op);
std::optional<int64_t> intAttrOf(const Op& op, const char* k);
std::optional<int64_t> constantInt(const Value* v);
// A slot index as a function of the iteration number k >= 0 of the enclosing
// pipelined loop: (a*k + b), reduced modulo m when m > 0.
struct Affine {
  int64_t a = 0, b = 0, m = 0;
};
std::optional<Affine> evalAffine(const Value* v, const Value* iv);
// The stage protocol of a warp-specialised pipeline (StageProtocol.cpp):
// the buffers its producer copies into (which the async-copy proof leaves
// to it), and its proof.
std::set<const Value*> channelBuffers(const Function& f);
void verifyStageProtocol(const Function& f);
// A slot relative to the iteration i, "(i+c) mod n", and an iteration, "i+d".
std::string relSlot(int64_t c, int64_t n);
std::string relIter(int64_t d);

/// The diagnostics of the checkers: ops and buffers named with their
/// locations, failures as VerifyErrors; `prefix` opens every message.
class CheckerText {
 public:
  CheckerText(const Function& f, std::string prefix) : f_(f), names_(f), prefix_(std::move(prefix)) {}

 protected:
  std::string where(const Location& l) const { return l.known() ? l.str() : f_.name(); }
  std::string at(const Op& op) const {
    std::string r = "'";  // built piecewise: GCC 12 -Wrestrict false positive on "x" + std::string
    r += op.name();
    r += "' at ";
    r += where(op.loc());
    return r;
  }
  std::string bufName(const Value* b) const {
    std::string r = names_.name(b);
    if (b->definingOp() && b->definingOp()->loc().known()) r += " (allocated at " + b->definingOp()->loc().str() + ")";
    return r;
  }
  [[noreturn]] void fail(const Op& op, const std::string& msg) const {
    throw VerifyError(where(op.loc()) + ": error: " + prefix_ + msg + "\n" + detail::opHeader(op, names_, true));
  }

  const Function& f_;
  detail::ValueNames names_;
  std::string prefix_;
};

class PipelineChecker : CheckerText {
 public:
  explicit PipelineChecker(const Function& f) : CheckerText(f, "") {}

  void run();

 private:
  // ---- use lists ----------------------------------------------------------
  void collectUses() {
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      for (Value* v : op.operands()) users_[v].push_back(&op);
    });
  }
  const std::vector<const Op*>& usersOf(const Value* v) const {
    static const std::vector<const Op*> none;
    auto it = users_.find(v);
    return it == users_.end() ? none : it->second;
  }

  static const Value* root(const Value* v) {
    while (v->definingOp() && v->definingOp()->code() == OpCode::BufferSlot) v = v->definingOp()->operand(0);
    return v;
  }
  /// The buffer_slot applied directly to the root buffer (null: the whole buffer).
  static const Op* firstSlot(const Value* v) {
    const Op* s = nullptr;
    while (v->definingOp() && v->definingOp()->code() == OpCode::BufferSlot) {
      s = v->definingOp();
      v = s->operand(0);
    }
    return s;
  }

  /// The top-level op of `b` that contains `op` (op itself if it is in b).
  static const Op* ancestorIn(const Op* op, const Block* b) {
    while (op && op->parent() != b) op = op->parent() ? op->parent()->parentOp() : nullptr;
    return op;
  }
  static size_t indexIn(const Op* op, const Block& b) {
    for (size_t i = 0; i < b.ops().size(); ++i)
      if (b.ops()[i].get() == op) return i;
    return b.ops().size();
  }

  // ---- loops as written: for {stages = S} --------------------------------
  void checkWrittenLoop(const Op& loop);
  void checkAddressSlice(const Op& loop, const Op& copy, const Value* v) const;

  // ---- placement of async operations and tracked accesses -----------------
  enum class Ctx { Top, LoopBody, InLoopNested, Nested };

  void checkPlacement();
  void placeOp(const Op& op, Ctx ctx, const Op* loop);

  static const Value* accessedBuffer(const Op& op) {
    switch (op.code()) {
      case OpCode::LocalLoad:
      case OpCode::LocalStore:
      case OpCode::Copy: return op.operand(0);
      default: return nullptr;
    }
  }

  // Which slot an access touches. Outside a loop: a constant, or all slots
  // (c = -1). In a scheduled loop: relative slot c, i.e. (k + c) mod N, or all.
  struct SlotForm {
    bool all = false;
    int64_t c = 0;
  };
  SlotForm slotForm(const Op& op, const Value* buf, const Op* loop);

  // ---- abstract state --------------------------------------------------------
  enum class St { InFlight, Done, Visible };
  struct Write {
    const Op* op = nullptr;
    bool tagged = false;  // belongs to an iteration of a scheduled loop
    int epoch = -1;       // which scheduled loop (index in the kernel body)
    int64_t iter = 0;
    St st = St::Visible;
    int64_t group = -1;  // -1: the open group
  };
  // A read's matrix-instruction state: kNoMma (an ordinary read, over at
  // the next barrier), kOpenMma (feeds an async dot not issued yet), or the
  // async dot's group, in flight until a dot_wait retires it.
  static constexpr int64_t kNoMma = -2, kOpenMma = -1, kJoinedMma = -3;
  struct Read {
    const Op* op = nullptr;
    bool tagged = false;
    int64_t iter = 0;
    int64_t mma = kNoMma;
    const Op* dot = nullptr;  // the async dot it feeds
  };
  struct Slot {
    std::optional<Write> w;
    std::vector<Read> reads;
  };
  struct State {
    std::map<std::pair<const Value*, int64_t>, Slot> slots;
    std::deque<int64_t> committed;
    int64_t nextGroup = 0;
    std::deque<int64_t> mmaInFlight;  // async dots' groups, oldest first
    int64_t nextMma = 0;
  };

  // Context of the abstract execution, for messages and tags.
  struct Iter {
    const Op* loop = nullptr;  // null: straight-line code
    int epoch = -1;
    int64_t k = 0;
  };

  std::string slotText(const Value* r, int64_t absSlot, const Iter& it) const;
  std::string iterText(const Write& w, const Iter& it) const;
  std::string stagesHint(const Value* r, const Iter& it) const;
  std::vector<int64_t> slotsOf(const Op& op, const Value* buf, const Iter& it);
  void asyncCopy(State& st, const Op& op, const Iter& it);
  std::string firstReader(const Value* r) const;
  void syncWrite(State& st, const Op& op, const Iter& it);
  void read(State& st, const Op& op, const Iter& it);
  void commit(State& st);
  void wait(State& st, int64_t pending);
  void asyncDot(State& st, const Op& dot);
  void dotWait(State& st, int64_t pending);
  /// The first read of `sl` by an async dot not yet retired, or null.
  static const Read* mmaRead(const Slot& sl);
  /// Appends `r` unless the slot holds the same read already (joins).
  static void addRead(Slot& sl, const Read& r);
  std::string mmaHazard(const Read& r) const;
  /// Async dots' results are used only by async dots (as the accumulator),
  /// yields and dot_wait (IR.h, "Asynchronous dots").
  void checkAsyncValues();
  void barrier(State& st);
  /// Executes one op (and, for reads, its nested regions) abstractly.
  void exec(State& st, const Op& op, const Iter& it, bool nested);

  // ---- canonical form relative to iteration k -------------------------------
  std::string canonical(const State& st, const Iter& it) const;

  void simulateKernel();
  /// The ops of `b` in order from `st`; the state after them.
  State simulateBlock(State st, const Block& b);
  State simulateLoop(State st, const Op& loop, int epoch, const Op* next);
  /// A plain loop or a branch holding async operations (holdsAsync_): its
  /// regions from `st`, every path through it, joined.
  State simulateRegionOp(const State& st, const Op& op);
  /// Nothing asynchronous in flight (groups, copies, dots): required where
  /// paths join around such a region.
  void requireQuiet(const State& st, const Op& op, const char* where) const;
  /// The same at the end of an iteration of a plain loop holding async
  /// operations (a persistent loop over tiles): what one iteration leaves
  /// in flight, named with the op of the next iteration that would count it
  /// as its own.
  void requireQuietIteration(const State& st, const Op& loop) const;
  /// Where the read `r` of a slot that `w` overwrites was left by the
  /// previous iteration of such a loop (carried_), the hazard as one
  /// iteration's leak into the next; empty otherwise.
  std::string carriedHazard(const Read& r, const Op& w, const Value* buf, const std::string& slot) const;
  /// The worst of quiet states: per slot the least visible write and every
  /// read.
  static State joinQuiet(const std::vector<State>& states);
  /// The epoch of the first scheduled loop at or after position `i` of `b`
  /// (-1: none): the loop a prologue copy there belongs to.
  int nextLoopEpoch(const Block& b, size_t i) const;

  std::unordered_map<const Value*, std::vector<const Op*>> users_;
  std::set<const Value*> tracked_;
  std::unordered_map<const Op*, SlotForm> forms_;
  std::vector<const Op*> loops_;
  int prologueEpoch_ = -1;
  // Plain loops and branches whose regions hold async operations, scheduled
  // loops or writes of tracked buffers: simulated path by path.
  std::set<const Op*> holdsAsync_;
  // The plain loop whose iteration k >= 1 is being simulated, and the reads
  // of tracked slots its previous iteration left (no barrier after them).
  const Op* carriedLoop_ = nullptr;
  std::set<const Op*> carriedReads_;
};

}  // namespace tessera::ir::detail

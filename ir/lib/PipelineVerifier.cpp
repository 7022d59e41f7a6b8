// The pipeline verifier: static proof that async-copy schedules obey the
// memory model of IR.h, plus the form rules of loops as written
// (`for {stages = S}`) that the `pipeline` pass relies on.
//
// How the proof works. Every shared buffer written by an async copy is
// "tracked"; each of its slots (index along the leading dimension) has an
// abstract state: the last write (which op, which iteration of which
// pipelined loop it belongs to, and whether it is in flight, complete but
// not yet published by a barrier, or visible), and the reads since the last
// barrier. The kernel body is executed abstractly op by op: async copies,
// commits, waits, barriers, reads and writes update that state, and every
// access is checked against the rules (read only visible data of the right
// iteration; never overwrite a slot with a read or a copy still pending).
//
// A `for {pipelined = S}` loop runs an unknown number of times, so its body
// is executed abstractly for iterations k = 0, 1, 2, ... and after each one
// the state is put in a canonical form relative to k: iterations are
// renamed i -> i - k and slots s -> (s - k) mod N. Every slot index in the
// body is required to be (k + c) mod N, so one iteration acts on the
// canonical state the same way whatever k is: the canonical state at the
// start of iteration k+1 is a fixed function of the one at k. As soon as a
// canonical state repeats, the sequence is periodic and every later
// iteration repeats checks already passed, which proves the schedule for
// every trip count. For the modular schedule the pass emits this happens
// after S+1 iterations: each slot is rewritten every S iterations, so by
// iteration S the state no longer remembers the prologue, and iteration S+1
// starts in the same canonical state as iteration S. Schedules whose state
// never repeats (e.g. a group that is never waited for, so the in-flight
// list grows) are rejected after a bounded number of iterations.
//
// Masks are ignored: a masked async copy still counts as a write of its
// whole slot (masked-off lanes write 0), which is what the hardware does.
#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "PrinterDetail.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

namespace tessera::ir {
namespace {

bool isAsyncCopy(const Op& op) {
  if (op.code() != OpCode::Copy) return false;
  auto it = op.attrs().find("async");
  return it != op.attrs().end() && std::holds_alternative<int64_t>(it->second) && std::get<int64_t>(it->second) == 1;
}

std::optional<int64_t> intAttrOf(const Op& op, const char* k) {
  auto it = op.attrs().find(k);
  if (it == op.attrs().end() || !std::holds_alternative<int64_t>(it->second)) return std::nullopt;
  return std::get<int64_t>(it->second);
}

std::optional<int64_t> constantInt(const Value* v) {
  const Op* d = v->definingOp();
  if (!d || d->code() != OpCode::Constant || !v->type().isScalar()) return std::nullopt;
  return intAttrOf(*d, "value");
}

// A slot index as a function of the iteration number k >= 0 of the enclosing
// pipelined loop: (a*k + b), reduced modulo m when m > 0.
struct Affine {
  int64_t a = 0, b = 0, m = 0;
};

std::optional<Affine> evalAffine(const Value* v, const Value* iv) {
  if (iv && v == iv) return Affine{1, 0, 0};
  if (auto c = constantInt(v)) return Affine{0, *c, 0};
  const Op* d = v->definingOp();
  if (!d || !v->type().isScalar()) return std::nullopt;
  auto small = [](int64_t x) { return x > -(int64_t{1} << 40) && x < (int64_t{1} << 40); };
  switch (d->code()) {
    case OpCode::Cast: {
      if (!d->operand(0)->type().isIntLike() || !v->type().isIntLike()) return std::nullopt;
      return evalAffine(d->operand(0), iv);
    }
    case OpCode::Add: case OpCode::Sub: case OpCode::Mul: {
      auto x = evalAffine(d->operand(0), iv), y = evalAffine(d->operand(1), iv);
      if (!x || !y || x->m || y->m) return std::nullopt;
      Affine r;
      if (d->code() == OpCode::Add) r = {x->a + y->a, x->b + y->b, 0};
      else if (d->code() == OpCode::Sub) r = {x->a - y->a, x->b - y->b, 0};
      else if (x->a == 0) r = {x->b * y->a, x->b * y->b, 0};
      else if (y->a == 0) r = {y->b * x->a, y->b * x->b, 0};
      else return std::nullopt;
      if (!small(r.a) || !small(r.b)) return std::nullopt;
      return r;
    }
    case OpCode::Rem: {
      auto x = evalAffine(d->operand(0), iv);
      auto n = constantInt(d->operand(1));
      // rem truncates toward zero: it is the modulus only for x >= 0, which
      // holds for every k >= 0 when a, b >= 0.
      if (!x || x->m || !n || *n <= 0 || x->a < 0 || x->b < 0) return std::nullopt;
      if (x->a == 0) return Affine{0, x->b % *n, 0};
      return Affine{x->a, x->b, *n};
    }
    default:
      return std::nullopt;
  }
}

std::string relSlot(int64_t c, int64_t n) {
  if (n == 1) return "0";
  return c == 0 ? "(i) mod " + std::to_string(n) : "(i+" + std::to_string(c) + ") mod " + std::to_string(n);
}
std::string relIter(int64_t d) { return d == 0 ? "i" : (d > 0 ? "i+" : "i") + std::to_string(d); }

class PipelineChecker {
 public:
  explicit PipelineChecker(const Function& f) : f_(f), names_(f) {}

  void run() {
    collectUses();
    bool any = false;
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      if (op.code() == OpCode::For && op.hasAttr("stages")) checkWrittenLoop(op);
      if (isAsyncCopy(op)) tracked_.insert(root(op.operand(0)));
      if (isAsyncCopy(op) || op.code() == OpCode::AsyncCommit || op.code() == OpCode::AsyncWait ||
          (op.code() == OpCode::For && op.hasAttr("pipelined")))
        any = true;
    });
    if (!any) return;  // nothing asynchronous: the program-order semantics hold
    checkPlacement();
    simulateKernel();
  }

 private:
  // ---- diagnostics -------------------------------------------------------
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
    throw VerifyError(where(op.loc()) + ": error: " + msg + "\n" + detail::opHeader(op, names_, true));
  }

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
  void checkWrittenLoop(const Op& loop) {
    const int64_t S = intAttrOf(loop, "stages").value_or(1);
    if (loop.parent() != &f_.body())
      fail(loop, "pipelined loop: a loop with 'stages' must be at the top level of the kernel (nesting in 'for' or "
                 "'if' is not supported)");
    const Block& body = loop.region(0).block();
    for (auto& r : loop.regions())
      walk(const_cast<Block&>(r->block()), [&](Op& op) {
        if (op.code() == OpCode::For && (op.hasAttr("stages") || op.hasAttr("pipelined")))
          fail(op, "pipelined loop: cannot be nested in the pipelined loop at " + where(loop.loc()));
        if (isAsyncCopy(op) || op.code() == OpCode::AsyncCommit || op.code() == OpCode::AsyncWait)
          fail(op, "pipelined loop: a loop as written ('stages') holds no async operations; the 'pipeline' pass "
                   "creates them");
      });
    std::set<const Value*> staged;
    for (size_t i = 0; i < body.ops().size(); ++i) {
      const Op& c = *body.ops()[i];
      if (c.code() != OpCode::Copy) continue;
      const Op* view = c.operand(0)->definingOp();
      if (!view || view->code() != OpCode::BufferSlot || view->parent() != &body) continue;
      const Value* buf = view->operand(0);
      // A staged copy: the pass moves it S-1 iterations ahead.
      if (!buf->definingOp() || buf->definingOp()->code() != OpCode::Alloc || buf->ownerBlock() != &f_.body())
        fail(c, "pipelined loop: the staged buffer " + names_.name(buf) +
                    " must be allocated ('alloc') in the kernel body before the loop");
      if (buf->type().space() != MemSpace::Shared)
        fail(c, "pipelined loop: the staged buffer " + bufName(buf) + " must be in shared memory, got " +
                    buf->type().str());
      if (buf->type().shape()[0] != S)
        fail(c, "pipelined loop: buffer " + bufName(buf) + " has " + std::to_string(buf->type().shape()[0]) +
                    " slots but the loop keeps " + std::to_string(S) + " stages in flight; allocate " +
                    std::to_string(S) + " slots");
      if (!staged.insert(buf).second)
        fail(c, "pipelined loop: buffer " + bufName(buf) + " is staged twice in one iteration");
      for (const Op* u : usersOf(buf))
        if (u != view)
          fail(*u, "pipelined loop: buffer " + bufName(buf) + " is staged by " + at(c) +
                       "; it may be used only through that copy's slot");
      for (const Op* u : usersOf(view->result())) {
        if (u == &c) continue;
        if (u->code() != OpCode::LocalLoad)
          fail(*u, "pipelined loop: the staged slot written by " + at(c) + " may only be read ('local_load')");
        const Op* top = ancestorIn(u, &body);
        if (!top || indexIn(top, body) < i)
          fail(*u, "pipelined loop: reads the staged slot before " + at(c) + " fills it");
      }
      for (unsigned k = 1; k < c.numOperands(); ++k) checkAddressSlice(loop, c, c.operand(k));
    }
  }

  // The operands of a staged copy are recomputed S-1 iterations ahead, so
  // they may depend only on the induction variable and values defined before
  // the loop, through pure ops that do not read memory.
  void checkAddressSlice(const Op& loop, const Op& copy, const Value* v) const {
    const Block& body = loop.region(0).block();
    std::vector<const Value*> work{v};
    std::unordered_set<const Value*> seen;
    while (!work.empty()) {
      const Value* x = work.back();
      work.pop_back();
      if (!seen.insert(x).second || x->ownerBlock() != &body) continue;
      if (x->isBlockArg()) {
        if (x != body.arg(0))
          fail(copy, "pipelined loop: the addresses and mask of a staged copy are computed S-1 iterations ahead, "
                     "so they cannot depend on a loop-carried value (" + names_.name(x) + ")");
        continue;
      }
      const Op& d = *x->definingOp();
      bool ok = !hasSideEffects(d.code()) && d.numRegions() == 0 && d.code() != OpCode::Load &&
                d.code() != OpCode::LocalLoad && d.code() != OpCode::Alloc && d.code() != OpCode::BufferSlot;
      if (!ok)
        fail(copy, "pipelined loop: the addresses and mask of a staged copy are computed S-1 iterations ahead, "
                   "so they cannot depend on " + at(d) + " (only on the loop index, values defined before the "
                   "loop and arithmetic)");
      for (Value* o : d.operands()) work.push_back(o);
    }
  }

  // ---- placement of async operations and tracked accesses -----------------
  enum class Ctx { Top, LoopBody, InLoopNested, Nested };

  void checkPlacement() {
    for (auto& op : f_.body().ops()) placeOp(*op, Ctx::Top, nullptr);
  }

  void placeOp(const Op& op, Ctx ctx, const Op* loop) {
    bool asyncOp = isAsyncCopy(op) || op.code() == OpCode::AsyncCommit || op.code() == OpCode::AsyncWait;
    if (asyncOp && ctx != Ctx::Top && ctx != Ctx::LoopBody)
      fail(op, "async copies, async_commit and async_wait may appear only in the kernel body or directly in a "
               "scheduled loop ('pipelined') at the top level of the kernel");
    if (op.code() == OpCode::For && op.hasAttr("pipelined")) {
      if (ctx != Ctx::Top) fail(op, "pipelined loop: a scheduled loop must be at the top level of the kernel");
      auto lo = constantInt(op.operand(0)), step = constantInt(op.operand(2));
      if (!lo || *lo != 0 || !step || *step != 1)
        fail(op, "pipelined loop: a scheduled loop runs over the iteration number: lo must be the constant 0 and "
                 "step the constant 1");
    }
    const Value* buf = accessedBuffer(op);
    if (buf && tracked_.count(root(buf))) {
      bool write = op.code() != OpCode::LocalLoad;
      if (ctx == Ctx::Nested || (ctx == Ctx::InLoopNested && write))
        fail(op, "buffer " + bufName(root(buf)) + " is written by async copies; it may be " +
                     (write ? "written" : "read") + " only in the kernel body or in a scheduled loop" +
                     (write ? " (not in a nested region)" : ""));
      slotForm(op, buf, ctx == Ctx::Top ? nullptr : loop);  // checks the index form
    }
    for (auto& r : op.regions()) {
      Ctx inner = Ctx::Nested;
      const Op* l = loop;
      if (ctx == Ctx::Top && op.code() == OpCode::For && op.hasAttr("pipelined")) {
        inner = Ctx::LoopBody;
        l = &op;
      } else if (ctx == Ctx::LoopBody || ctx == Ctx::InLoopNested) {
        inner = Ctx::InLoopNested;
      }
      for (auto& o : r->block().ops()) placeOp(*o, inner, l);
    }
  }

  static const Value* accessedBuffer(const Op& op) {
    switch (op.code()) {
      case OpCode::LocalLoad: case OpCode::LocalStore: case OpCode::Copy: return op.operand(0);
      default: return nullptr;
    }
  }

  // Which slot an access touches. Outside a loop: a constant, or all slots
  // (c = -1). In a scheduled loop: relative slot c, i.e. (k + c) mod N, or all.
  struct SlotForm {
    bool all = false;
    int64_t c = 0;
  };
  SlotForm slotForm(const Op& op, const Value* buf, const Op* loop) {
    auto memo = forms_.find(&op);
    if (memo != forms_.end()) return memo->second;
    const Value* r = root(buf);
    const int64_t n = r->type().shape()[0];
    const Op* s = firstSlot(buf);
    SlotForm form;
    if (!s) {
      form.all = true;
    } else {
      const Value* iv = loop ? loop->region(0).block().arg(0) : nullptr;
      auto aff = evalAffine(s->operand(1), iv);
      if (!loop) {
        if (!aff || aff->a != 0 || aff->m != 0 || aff->b < 0 || aff->b >= n)
          fail(op, "buffer " + bufName(r) + " is written by async copies; outside a scheduled loop its slot index "
                       "must be a constant in [0, " + std::to_string(n) + ") (computed by " + at(*s) + ")");
        form.c = aff->b;
      } else {
        bool ok = aff.has_value();
        if (ok && n == 1) {
          ok = (aff->a == 0 && aff->m == 0 && aff->b == 0) || aff->m == 1;
          form.c = 0;
        } else if (ok) {
          ok = aff->m == n && ((aff->a - 1) % n) == 0;
          form.c = ok ? aff->b % n : 0;
        }
        if (!ok)
          fail(op, "pipelined loop: the slot index of buffer " + bufName(r) + " (computed by " + at(*s) +
                       ") must have the form (i + c) mod " + std::to_string(n) +
                       ", i the iteration number, c >= 0 a constant");
      }
      // (c): an async copy writes the slot of the iteration it belongs to.
      if (isAsyncCopy(op)) {
        auto st = intAttrOf(op, "stage");
        if (loop && !st)
          fail(op, "pipelined loop: an async copy in a scheduled loop needs a 'stage' attribute (the iteration "
                   "offset it belongs to)");
        if (st && *st < 0) fail(op, "pipelined loop: 'stage' must be >= 0");
        if (st && ((*st - form.c) % n + n) % n != 0) {
          std::string got = loop ? relSlot(form.c, n) : std::to_string(form.c);
          std::string want = loop ? relSlot(*st % n, n) : std::to_string(*st % n);
          fail(op, "pipelined loop: wrong slot on buffer " + bufName(r) + ": " + at(op) + " copies iteration " +
                       (loop ? relIter(*st) : std::to_string(*st)) + " into slot " + got + " computed by " + at(*s) +
                       ", but that iteration's slot is " + want + " (slot = iteration mod " + std::to_string(n) +
                       ")");
        }
      }
    }
    forms_[&op] = form;
    return form;
  }

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
  struct Read {
    const Op* op = nullptr;
    bool tagged = false;
    int64_t iter = 0;
  };
  struct Slot {
    std::optional<Write> w;
    std::vector<Read> reads;
  };
  struct State {
    std::map<std::pair<const Value*, int64_t>, Slot> slots;
    std::deque<int64_t> committed;
    int64_t nextGroup = 0;
  };

  // Context of the abstract execution, for messages and tags.
  struct Iter {
    const Op* loop = nullptr;  // null: straight-line code
    int epoch = -1;
    int64_t k = 0;
  };

  std::string slotText(const Value* r, int64_t absSlot, const Iter& it) const {
    int64_t n = r->type().shape()[0];
    if (!it.loop) return std::to_string(absSlot);
    return relSlot(((absSlot - it.k) % n + n) % n, n);
  }
  std::string iterText(const Write& w, const Iter& it) const {
    if (!w.tagged) return "outside the loop";
    if (it.loop && w.epoch == it.epoch) return "iteration " + relIter(w.iter - it.k);
    return "iteration " + std::to_string(w.iter) + " of the loop at " + where(loops_.at(w.epoch)->loc());
  }
  std::string stagesHint(const Value* r, const Iter& it) const {
    if (!it.loop) return "";
    int64_t S = intAttrOf(*it.loop, "pipelined").value_or(1), n = r->type().shape()[0];
    if (n >= S) return "";
    return " (the buffer has " + std::to_string(n) + " slots but the loop keeps " + std::to_string(S) +
           " stages in flight)";
  }

  std::vector<int64_t> slotsOf(const Op& op, const Value* buf, const Iter& it) {
    const Value* r = root(buf);
    int64_t n = r->type().shape()[0];
    SlotForm f = slotForm(op, buf, it.loop);
    std::vector<int64_t> out;
    if (f.all) {
      for (int64_t s = 0; s < n; ++s) out.push_back(s);
    } else {
      out.push_back(it.loop ? (it.k + f.c) % n : f.c);
    }
    return out;
  }

  void asyncCopy(State& st, const Op& op, const Iter& it) {
    const Value* r = root(op.operand(0));
    Write w;
    w.op = &op;
    w.st = St::InFlight;
    auto stage = intAttrOf(op, "stage");
    if (it.loop) {
      w.tagged = true;
      w.epoch = it.epoch;
      w.iter = it.k + stage.value_or(0);
    } else if (stage && prologueEpoch_ >= 0) {
      w.tagged = true;
      w.epoch = prologueEpoch_;
      w.iter = *stage;
    }
    for (int64_t s : slotsOf(op, op.operand(0), it)) {
      Slot& sl = st.slots[{r, s}];
      if (!sl.reads.empty()) {
        const Op& rd = *sl.reads.front().op;
        fail(op, "pipelined loop: write-after-read hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                     ": " + at(op) + " may overwrite data " + at(rd) +
                     " still reads; insert a barrier between them or use more stages" + stagesHint(r, it));
      }
      if (sl.w && sl.w->st == St::InFlight) {
        std::string reader = firstReader(r);
        fail(op, "pipelined loop: write-after-write hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                     ": " + at(op) + " (" + iterText(w, it) + ") may overwrite the slot while " + at(*sl.w->op) +
                     " (" + iterText(*sl.w, it) + ") is still in flight" +
                     (reader.empty() ? "" : " and before " + reader + " reads its data") +
                     "; wait for the older copy first or use more slots" + stagesHint(r, it));
      }
      sl.w = w;
    }
  }

  std::string firstReader(const Value* r) const {
    const Op* found = nullptr;
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      if (!found && op.code() == OpCode::LocalLoad && root(op.operand(0)) == r) found = &op;
    });
    return found ? at(*found) : std::string();
  }

  void syncWrite(State& st, const Op& op, const Iter& it) {
    const Value* r = root(op.operand(0));
    for (int64_t s : slotsOf(op, op.operand(0), it)) {
      Slot& sl = st.slots[{r, s}];
      if (sl.w && sl.w->st != St::Visible)
        fail(op, "pipelined loop: write-after-write hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                     ": " + at(op) + " writes while " + at(*sl.w->op) +
                     " may still be writing; an async_wait that retires it and a barrier must come first");
      Write w;
      w.op = &op;
      sl.w = w;
    }
  }

  void read(State& st, const Op& op, const Iter& it) {
    const Value* r = root(op.operand(0));
    Read rd;
    rd.op = &op;
    if (it.loop) {
      rd.tagged = true;
      rd.iter = it.k + intAttrOf(op, "stage").value_or(0);
    }
    for (int64_t s : slotsOf(op, op.operand(0), it)) {
      Slot& sl = st.slots[{r, s}];
      if (sl.w) {
        const Write& w = *sl.w;
        if (w.st == St::InFlight)
          fail(op, "pipelined loop: read-before-wait hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                       ": " + at(op) + " reads data that " + at(*w.op) + " (" + iterText(w, it) +
                       ") may still be copying; an async_wait whose 'pending' count retires that copy's group, "
                       "then a barrier, must come first");
        if (w.st == St::Done)
          fail(op, "pipelined loop: read-before-barrier hazard on buffer " + bufName(r) + " slot " +
                       slotText(r, s, it) + ": " + at(op) + " reads data that " + at(*w.op) + " (" + iterText(w, it) +
                       ") copied, which is complete but not yet visible to all threads; insert a barrier after the "
                       "async_wait");
        if (rd.tagged && (!w.tagged || w.epoch != it.epoch || w.iter != rd.iter))
          fail(op, "pipelined loop: wrong data on buffer " + bufName(r) + " slot " + slotText(r, s, it) + ": " + at(op) +
                       " (iteration " + relIter(rd.iter - it.k) + ") reads the slot last written by " + at(*w.op) +
                       " (" + iterText(w, it) + ")" + stagesHint(r, it));
      } else if (rd.tagged) {
        fail(op, "pipelined loop: " + at(op) + " reads buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                     " before any copy fills it");
      }
      sl.reads.push_back(rd);
    }
  }

  void commit(State& st) {
    for (auto& [k, sl] : st.slots)
      if (sl.w && sl.w->st == St::InFlight && sl.w->group < 0) sl.w->group = st.nextGroup;
    st.committed.push_back(st.nextGroup++);
  }
  void wait(State& st, int64_t pending) {
    while (static_cast<int64_t>(st.committed.size()) > pending) {
      int64_t g = st.committed.front();
      st.committed.pop_front();
      for (auto& [k, sl] : st.slots)
        if (sl.w && sl.w->st == St::InFlight && sl.w->group == g) sl.w->st = St::Done;
    }
  }
  void barrier(State& st) {
    for (auto& [k, sl] : st.slots) {
      if (sl.w && sl.w->st == St::Done) sl.w->st = St::Visible;
      sl.reads.clear();
    }
  }

  /// Executes one op (and, for reads, its nested regions) abstractly.
  void exec(State& st, const Op& op, const Iter& it, bool nested) {
    switch (op.code()) {
      case OpCode::Copy:
        if (!tracked_.count(root(op.operand(0)))) break;
        if (isAsyncCopy(op)) asyncCopy(st, op, it);
        else syncWrite(st, op, it);
        break;
      case OpCode::LocalStore:
        if (tracked_.count(root(op.operand(0)))) syncWrite(st, op, it);
        break;
      case OpCode::LocalLoad:
        if (tracked_.count(root(op.operand(0)))) read(st, op, it);
        break;
      case OpCode::AsyncCommit: commit(st); break;
      case OpCode::AsyncWait: wait(st, intAttrOf(op, "pending").value_or(0)); break;
      // A barrier in a nested region may not execute: ignoring it is the
      // conservative choice (it can only hide a hazard, never invent one).
      case OpCode::Barrier:
        if (!nested) barrier(st);
        break;
      default: break;
    }
    for (auto& r : op.regions())
      for (auto& o : r->block().ops()) exec(st, *o, it, true);
  }

  // ---- canonical form relative to iteration k -------------------------------
  std::string canonical(const State& st, const Iter& it) const {
    std::string key = std::to_string(st.committed.size()) + ";";
    std::map<std::pair<const Value*, int64_t>, std::string> rel;
    for (auto& [k, sl] : st.slots) {
      int64_t n = k.first->type().shape()[0];
      std::string s;
      if (sl.w) {
        const Write& w = *sl.w;
        s += std::to_string(reinterpret_cast<uintptr_t>(w.op)) + ":" + std::to_string(static_cast<int>(w.st));
        s += w.tagged ? ":" + std::to_string(w.epoch) + "@" + std::to_string(w.iter - it.k) : ":-";
        if (w.st == St::InFlight) {
          auto pos = std::find(st.committed.begin(), st.committed.end(), w.group);
          // Appended piecewise: `"..." + std::string` trips a GCC 12 -Wrestrict false positive.
          s += "/g";
          s += w.group < 0 ? std::string("open") : std::to_string(pos - st.committed.begin());
        }
      }
      for (const Read& r : sl.reads) {
        s += "|r";
        s += std::to_string(reinterpret_cast<uintptr_t>(r.op));
        if (r.tagged) {
          s += '@';
          s += std::to_string(r.iter - it.k);
        }
      }
      if (s.empty()) continue;
      rel[{k.first, ((k.second - it.k) % n + n) % n}] = s;
    }
    for (auto& [k, s] : rel)
      key += std::to_string(reinterpret_cast<uintptr_t>(k.first)) + "#" + std::to_string(k.second) + "=" + s + ";";
    return key;
  }

  void simulateKernel() {
    for (auto& op : f_.body().ops())
      if (op->code() == OpCode::For && op->hasAttr("pipelined")) loops_.push_back(op.get());
    State st;
    int epoch = 0;
    const auto& ops = f_.body().ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = *ops[i];
      prologueEpoch_ = epoch < static_cast<int>(loops_.size()) ? epoch : -1;
      if (op.code() == OpCode::For && op.hasAttr("pipelined")) {
        st = simulateLoop(st, op, epoch++, i + 1 < ops.size() ? ops[i + 1].get() : nullptr);
        continue;
      }
      if (op.code() == OpCode::Return) {
        for (auto& [k, sl] : st.slots)
          if (sl.w && sl.w->st == St::InFlight)
            fail(*sl.w->op, "async copy into buffer " + bufName(k.first) +
                                " is never waited for before the kernel returns; add async_wait {pending = 0}");
      }
      // Region ops at the top level (plain loops, ifs) never touch tracked
      // buffers or async state (checkPlacement): only their barriers could
      // matter, and ignoring them is conservative.
      exec(st, op, Iter{}, false);
    }
  }

  State simulateLoop(State st, const Op& loop, int epoch, const Op* next) {
    const int64_t S = intAttrOf(loop, "pipelined").value_or(1);
    int64_t maxSlots = 1;
    for (const Value* r : tracked_) maxSlots = std::max(maxSlots, r->type().shape()[0]);
    const int64_t cap = 2 * std::max(S, maxSlots) + 8;
    std::set<std::string> seen;
    std::vector<State> exits;
    const Block& body = loop.region(0).block();
    bool proved = false;
    for (int64_t k = 0; k <= cap; ++k) {
      Iter it{&loop, epoch, k};
      std::string c = canonical(st, it);
      if (!seen.insert(std::move(c)).second) {
        proved = true;
        break;
      }
      exits.push_back(st);
      for (auto& op : body.ops()) exec(st, *op, it, false);
    }
    if (!proved)
      fail(loop, "pipelined loop: cannot prove the schedule: its state does not repeat within " +
                     std::to_string(cap) + " iterations (an async_commit whose group is never waited for?)");
    // The loop may exit after any number of iterations: join every reachable
    // state. Slots lose their identity (all slots of a buffer get the worst
    // status and every pending read), which is conservative.
    State out;
    bool inFlight = false;
    const Op* flying = nullptr;
    std::map<const Value*, Slot> perBuf;
    for (const State& s : exits)
      for (auto& [k, sl] : s.slots) {
        Slot& j = perBuf[k.first];
        if (sl.w) {
          if (sl.w->st == St::InFlight && !flying) flying = sl.w->op;
          if (!j.w || static_cast<int>(sl.w->st) < static_cast<int>(j.w->st)) j.w = sl.w;
        }
        for (const Read& r : sl.reads) j.reads.push_back({r.op, false, 0});
      }
    for (auto& [r, j] : perBuf)
      if (j.w) {
        inFlight = inFlight || j.w->st == St::InFlight;
        j.w->tagged = false;
      }
    if (inFlight) {
      auto pending = next && next->code() == OpCode::AsyncWait ? intAttrOf(*next, "pending") : std::nullopt;
      if (!pending || *pending != 0)
        fail(loop, "pipelined loop: async copies (" + at(*flying) +
                       ") may still be in flight when the loop exits; follow the loop with async_wait {pending = 0}");
      for (auto& [r, j] : perBuf)
        if (j.w && j.w->st == St::InFlight) j.w->st = St::Done;
    }
    for (auto& [r, j] : perBuf)
      for (int64_t s = 0; s < r->type().shape()[0]; ++s) out.slots[{r, s}] = j;
    out.nextGroup = st.nextGroup;
    return out;
  }

  const Function& f_;
  detail::ValueNames names_;
  std::unordered_map<const Value*, std::vector<const Op*>> users_;
  std::set<const Value*> tracked_;
  std::unordered_map<const Op*, SlotForm> forms_;
  std::vector<const Op*> loops_;
  int prologueEpoch_ = -1;
};

}  // namespace

void verifyPipelines(const Function& f) { PipelineChecker(f).run(); }

}  // namespace tessera::ir

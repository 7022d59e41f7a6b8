// The pipeline verifier's proof: the abstract execution of the kernel body,
// and of each pipelined loop until its canonical state repeats.
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
#include "PipelineChecker.h"

#include <algorithm>
#include <functional>

namespace tessera::ir::detail {

// ---- abstract state --------------------------------------------------------
std::string PipelineChecker::slotText(const Value* r, int64_t absSlot, const Iter& it) const {
  int64_t n = r->type().shape()[0];
  if (!it.loop) return std::to_string(absSlot);
  return relSlot(((absSlot - it.k) % n + n) % n, n);
}
std::string PipelineChecker::iterText(const Write& w, const Iter& it) const {
  if (!w.tagged) return "outside the loop";
  if (it.loop && w.epoch == it.epoch) return "iteration " + relIter(w.iter - it.k);
  return "iteration " + std::to_string(w.iter) + " of the loop at " + where(loops_.at(w.epoch)->loc());
}
std::string PipelineChecker::stagesHint(const Value* r, const Iter& it) const {
  if (!it.loop) return "";
  int64_t S = intAttrOf(*it.loop, "pipelined").value_or(1), n = r->type().shape()[0];
  if (n >= S) return "";
  return " (the buffer has " + std::to_string(n) + " slots but the loop keeps " + std::to_string(S) +
         " stages in flight)";
}

std::vector<int64_t> PipelineChecker::slotsOf(const Op& op, const Value* buf, const Iter& it) {
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

void PipelineChecker::asyncCopy(State& st, const Op& op, const Iter& it) {
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
    if (const Read* m = mmaRead(sl)) {
      if (std::string leak = carriedHazard(*m, op, r, slotText(r, s, it)); !leak.empty()) fail(op, leak);
      fail(op, "pipelined loop: write-after-read hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                   ": " + at(op) + " may overwrite data " + mmaHazard(*m) + stagesHint(r, it));
    }
    if (!sl.reads.empty()) {
      const Op& rd = *sl.reads.front().op;
      if (std::string leak = carriedHazard(sl.reads.front(), op, r, slotText(r, s, it)); !leak.empty()) fail(op, leak);
      fail(op, "pipelined loop: write-after-read hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                   ": " + at(op) + " may overwrite data " + at(rd) +
                   " still reads; insert a barrier between them or use more stages" + stagesHint(r, it));
    }
    if (sl.w && sl.w->st == St::InFlight) {
      std::string reader = firstReader(r);
      fail(op, "pipelined loop: write-after-write hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                   ": " + at(op) + " (" + iterText(w, it) + ") may overwrite the slot while " + at(*sl.w->op) + " (" +
                   iterText(*sl.w, it) + ") is still in flight" +
                   (reader.empty() ? "" : " and before " + reader + " reads its data") +
                   "; wait for the older copy first or use more slots" + stagesHint(r, it));
    }
    sl.w = w;
  }
}

std::string PipelineChecker::firstReader(const Value* r) const {
  const Op* found = nullptr;
  walk(const_cast<Block&>(f_.body()), [&](Op& op) {
    if (!found && op.code() == OpCode::LocalLoad && root(op.operand(0)) == r) found = &op;
  });
  return found ? at(*found) : std::string();
}

void PipelineChecker::syncWrite(State& st, const Op& op, const Iter& it) {
  const Value* r = root(op.operand(0));
  for (int64_t s : slotsOf(op, op.operand(0), it)) {
    Slot& sl = st.slots[{r, s}];
    // A synchronous write is ordered after plain reads by the backend; only
    // an async dot still reading the slot is a hazard.
    if (const Read* m = mmaRead(sl)) {
      if (std::string leak = carriedHazard(*m, op, r, slotText(r, s, it)); !leak.empty()) fail(op, leak);
      fail(op, "pipelined loop: write-after-read hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                   ": " + at(op) + " writes data " + mmaHazard(*m));
    }
    if (sl.w && sl.w->st != St::Visible)
      fail(op, "pipelined loop: write-after-write hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                   ": " + at(op) + " writes while " + at(*sl.w->op) +
                   " may still be writing; an async_wait that retires it and a barrier must come first");
    Write w;
    w.op = &op;
    sl.w = w;
  }
}

void PipelineChecker::read(State& st, const Op& op, const Iter& it) {
  const Value* r = root(op.operand(0));
  Read rd;
  rd.op = &op;
  // An async dot reading the slot in place: the load is its operand, or
  // the operand's transpose reads it (ir::dotOperandLoad).
  auto readsInPlace = [&](const Op* u) {
    return isAsyncDot(*u) && (dotOperandLoad(*u, 0) == &op || dotOperandLoad(*u, 1) == &op);
  };
  for (const Op* u : usersOf(op.result())) {
    std::vector<const Op*> readers{u};
    if (u->code() == OpCode::Transpose)
      for (const Op* t : usersOf(u->result())) readers.push_back(t);
    for (const Op* x : readers)
      if (readsInPlace(x)) {
        rd.mma = kOpenMma;
        rd.dot = x;
      }
  }
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
        fail(op, "pipelined loop: read-before-barrier hazard on buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                     ": " + at(op) + " reads data that " + at(*w.op) + " (" + iterText(w, it) +
                     ") copied, which is complete but not yet visible to all threads; insert a barrier after the "
                     "async_wait");
      if (rd.tagged && (!w.tagged || w.epoch != it.epoch || w.iter != rd.iter))
        fail(op, "pipelined loop: wrong data on buffer " + bufName(r) + " slot " + slotText(r, s, it) + ": " + at(op) +
                     " (iteration " + relIter(rd.iter - it.k) + ") reads the slot last written by " + at(*w.op) + " (" +
                     iterText(w, it) + ")" + stagesHint(r, it));
    } else if (rd.tagged) {
      fail(op, "pipelined loop: " + at(op) + " reads buffer " + bufName(r) + " slot " + slotText(r, s, it) +
                   " before any copy fills it");
    }
    addRead(sl, rd);
  }
}

void PipelineChecker::commit(State& st) {
  for (auto& [k, sl] : st.slots)
    if (sl.w && sl.w->st == St::InFlight && sl.w->group < 0) sl.w->group = st.nextGroup;
  st.committed.push_back(st.nextGroup++);
}
void PipelineChecker::wait(State& st, int64_t pending) {
  while (static_cast<int64_t>(st.committed.size()) > pending) {
    int64_t g = st.committed.front();
    st.committed.pop_front();
    for (auto& [k, sl] : st.slots)
      if (sl.w && sl.w->st == St::InFlight && sl.w->group == g) sl.w->st = St::Done;
  }
}
void PipelineChecker::barrier(State& st) {
  // Reads by async dots last until a dot_wait retires the dot, whatever the
  // barriers: the matrix instruction reads behind the program.
  for (auto& [k, sl] : st.slots) {
    if (sl.w && sl.w->st == St::Done) sl.w->st = St::Visible;
    sl.reads.erase(std::remove_if(sl.reads.begin(), sl.reads.end(), [](const Read& r) { return r.mma == kNoMma; }),
                   sl.reads.end());
  }
}
void PipelineChecker::asyncDot(State& st, const Op& dot) {
  const int64_t g = st.nextMma++;
  for (auto& [k, sl] : st.slots)
    for (Read& r : sl.reads)
      if (r.mma == kOpenMma && r.dot == &dot) r.mma = g;
  st.mmaInFlight.push_back(g);
}
void PipelineChecker::dotWait(State& st, int64_t pending) {
  while (static_cast<int64_t>(st.mmaInFlight.size()) > pending) {
    const int64_t g = st.mmaInFlight.front();
    st.mmaInFlight.pop_front();
    for (auto& [k, sl] : st.slots)
      for (Read& r : sl.reads)
        if (r.mma == g) r.mma = kNoMma;
  }
}
void PipelineChecker::addRead(Slot& sl, const Read& r) {
  for (const Read& x : sl.reads)
    if (x.op == r.op && x.tagged == r.tagged && x.iter == r.iter && x.mma == r.mma) return;
  sl.reads.push_back(r);
}
const PipelineChecker::Read* PipelineChecker::mmaRead(const Slot& sl) {
  for (const Read& r : sl.reads)
    if (r.mma != kNoMma) return &r;
  return nullptr;
}
std::string PipelineChecker::mmaHazard(const Read& r) const {
  return "that the async dot " + at(*r.dot) + " may still be reading (its operand " + at(*r.op) +
         "); a dot_wait whose 'pending' count retires that dot, then a barrier, must come first";
}

/// Executes one op (and, for reads, its nested regions) abstractly.
void PipelineChecker::exec(State& st, const Op& op, const Iter& it, bool nested) {
  switch (op.code()) {
    case OpCode::Copy:
      if (!tracked_.count(root(op.operand(0)))) break;
      if (isAsyncCopy(op))
        asyncCopy(st, op, it);
      else
        syncWrite(st, op, it);
      break;
    case OpCode::LocalStore:
      if (tracked_.count(root(op.operand(0)))) syncWrite(st, op, it);
      break;
    case OpCode::LocalLoad:
      if (tracked_.count(root(op.operand(0)))) read(st, op, it);
      break;
    case OpCode::AsyncCommit: commit(st); break;
    case OpCode::AsyncWait: wait(st, intAttrOf(op, "pending").value_or(0)); break;
    case OpCode::Dot:
      if (isAsyncDot(op)) asyncDot(st, op);
      break;
    case OpCode::DotWait: dotWait(st, intAttrOf(op, "pending").value_or(0)); break;
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
std::string PipelineChecker::canonical(const State& st, const Iter& it) const {
  std::string key = std::to_string(st.committed.size()) + "," + std::to_string(st.mmaInFlight.size()) + ";";
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
      if (r.mma != kNoMma) {
        auto pos = std::find(st.mmaInFlight.begin(), st.mmaInFlight.end(), r.mma);
        s += "/m";
        s += r.mma == kOpenMma ? std::string("open") : std::to_string(pos - st.mmaInFlight.begin());
      }
    }
    if (s.empty()) continue;
    rel[{k.first, ((k.second - it.k) % n + n) % n}] = s;
  }
  for (auto& [k, s] : rel)
    key += std::to_string(reinterpret_cast<uintptr_t>(k.first)) + "#" + std::to_string(k.second) + "=" + s + ";";
  return key;
}

void PipelineChecker::simulateKernel() {
  walk(const_cast<Block&>(f_.body()), [&](Op& op) {
    if (op.code() == OpCode::For && op.hasAttr("pipelined")) loops_.push_back(&op);
  });
  // Which region ops need path-by-path simulation: those holding async
  // operations, scheduled loops or writes of tracked buffers.
  std::function<bool(const Op&)> holds = [&](const Op& op) {
    bool any = false;
    for (auto& r : op.regions())
      for (auto& o : r->block().ops()) {
        const Value* buf = accessedBuffer(*o);
        bool write = buf && tracked_.count(root(buf)) && o->code() != OpCode::LocalLoad;
        bool self = isAsyncCopy(*o) || o->code() == OpCode::AsyncCommit || o->code() == OpCode::AsyncWait ||
                    isAsyncDot(*o) || o->code() == OpCode::DotWait ||
                    (o->code() == OpCode::For && o->hasAttr("pipelined")) || write;
        bool inner = o->numRegions() != 0 && holds(*o);
        any = any || self || inner;
      }
    if (any && op.numRegions() != 0 && !(op.code() == OpCode::For && op.hasAttr("pipelined"))) holdsAsync_.insert(&op);
    return any;
  };
  for (auto& op : f_.body().ops()) holds(*op);
  simulateBlock(State{}, f_.body());
}

int PipelineChecker::nextLoopEpoch(const Block& b, size_t i) const {
  for (; i < b.ops().size(); ++i) {
    const Op* op = b.ops()[i].get();
    if (op->code() != OpCode::For || !op->hasAttr("pipelined")) continue;
    auto it = std::find(loops_.begin(), loops_.end(), op);
    return static_cast<int>(it - loops_.begin());
  }
  return -1;
}

PipelineChecker::State PipelineChecker::simulateBlock(State st, const Block& b) {
  const auto& ops = b.ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    prologueEpoch_ = nextLoopEpoch(b, i);
    if (op.code() == OpCode::For && op.hasAttr("pipelined")) {
      // The op after the loop, probes aside (they order nothing).
      size_t n = i + 1;
      while (n < ops.size() && ops[n]->code() == OpCode::Probe) ++n;
      st = simulateLoop(st, op, prologueEpoch_, n < ops.size() ? ops[n].get() : nullptr);
      continue;
    }
    if (op.code() == OpCode::Return) {
      for (auto& [k, sl] : st.slots) {
        if (sl.w && sl.w->st == St::InFlight)
          fail(*sl.w->op, "async copy into buffer " + bufName(k.first) +
                              " is never waited for before the kernel returns; add async_wait {pending = 0}");
        if (const Read* m = mmaRead(sl))
          fail(*m->dot, "async dot " + at(*m->dot) +
                            " may still be in flight when the kernel returns; add dot_wait {pending = 0}");
      }
    }
    if (holdsAsync_.count(&op)) {
      st = simulateRegionOp(st, op);
      continue;
    }
    // Other region ops never touch async state or write tracked buffers:
    // only their reads matter (executed as if they happen) and their
    // barriers, which are ignored (conservative).
    exec(st, op, Iter{}, false);
  }
  return st;
}

void PipelineChecker::requireQuiet(const State& st, const Op& op, const char* when) const {
  const Op* flying = nullptr;
  for (auto& [k, sl] : st.slots) {
    if (!flying && sl.w && sl.w->st == St::InFlight) flying = sl.w->op;
    if (const Read* m = mmaRead(sl); !flying && m) flying = m->dot;
  }
  if (flying || !st.committed.empty() || !st.mmaInFlight.empty())
    fail(op, "async operations" + (flying ? " (" + at(*flying) + ")" : std::string()) + " may still be in flight " +
                 when + " " + at(op) +
                 ", which holds async operations; retire them first (async_wait {pending = 0}, dot_wait {pending "
                 "= 0})");
}

void PipelineChecker::requireQuietIteration(const State& st, const Op& loop) const {
  const Op* copy = nullptr;
  const Op* dot = nullptr;
  for (auto& [k, sl] : st.slots) {
    if (!copy && sl.w && sl.w->st == St::InFlight) copy = sl.w->op;
    if (const Read* m = mmaRead(sl); !dot && m) dot = m->dot;
  }
  // The next iteration's first wait of the kind left pending: it counts
  // groups (async dots) from wherever the program is, so a leftover one
  // takes the place of one of its own.
  auto firstOf = [&](OpCode code) {
    const Op* found = nullptr;
    walk(const_cast<Block&>(loop.region(0).block()), [&](Op& o) {
      if (!found && o.code() == code) found = &o;
    });
    return found;
  };
  const bool copies = copy || !st.committed.empty();
  if (!copies && !dot && st.mmaInFlight.empty()) return;
  const Op* next = firstOf(copies ? OpCode::AsyncWait : OpCode::DotWait);
  std::string left = copies ? (copy ? "the async copy " + at(*copy) : std::string("a committed group of async copies"))
                            : (dot ? "the async dot " + at(*dot) : std::string("an async dot"));
  fail(loop, "iteration leak: one iteration of " + at(loop) + " leaves " + left + " in flight; " +
                 (next ? "the next iteration's " + at(*next) + " counts it as one of its own " +
                             (copies ? "groups" : "dots") + " and may return before its own complete"
                       : std::string("the next iteration starts with it still running")) +
                 "; retire it before the iteration ends (" +
                 (copies ? "async_wait {pending = 0}" : "dot_wait {pending = 0}") + ")");
}

std::string PipelineChecker::carriedHazard(const Read& r, const Op& w, const Value* buf,
                                           const std::string& slot) const {
  if (!carriedLoop_ || !carriedReads_.count(r.op)) return "";
  return "iteration leak: one iteration of " + at(*carriedLoop_) + " leaves buffer " + bufName(buf) + " slot " + slot +
         " read by " + at(*r.op) + (r.dot ? " (the async dot " + at(*r.dot) + ")" : std::string()) +
         " with no barrier after it; the next iteration's " + at(w) +
         " may overwrite the slot while that read is still under way; end each iteration with a barrier";
}

PipelineChecker::State PipelineChecker::joinQuiet(const std::vector<State>& states) {
  State out;
  for (const State& s : states) {
    out.nextGroup = std::max(out.nextGroup, s.nextGroup);
    out.nextMma = std::max(out.nextMma, s.nextMma);
    for (auto& [k, sl] : s.slots) {
      Slot& j = out.slots[k];
      if (sl.w && (!j.w || static_cast<int>(sl.w->st) < static_cast<int>(j.w->st))) {
        j.w = sl.w;
        j.w->tagged = false;
      }
      for (const Read& r : sl.reads) addRead(j, {r.op, false, 0, kNoMma, r.dot});
    }
  }
  return out;
}

PipelineChecker::State PipelineChecker::simulateRegionOp(const State& st, const Op& op) {
  requireQuiet(st, op, "on entering");
  std::vector<State> outs;
  if (op.code() == OpCode::For) {
    // Zero or more iterations: run the body until the state at its start
    // repeats, then every later iteration repeats checks already passed.
    // A later iteration starts in the state the one before left: its
    // hazards against that state's reads are one iteration's leak into the
    // next (a persistent loop's tile into the next tile), and say so.
    outs.push_back(st);
    std::set<std::string> seen{canonical(st, Iter{})};
    State cur = st;
    const Op* savedLoop = carriedLoop_;
    std::set<const Op*> savedReads = carriedReads_;
    for (int k = 0;; ++k) {
      if (k == 8)
        fail(op, "cannot prove the async operations of " + at(op) + ": its state does not repeat within 8 iterations");
      carriedLoop_ = k == 0 ? savedLoop : &op;
      carriedReads_ = savedReads;
      if (k > 0)
        for (auto& [key, sl] : cur.slots)
          for (const Read& r : sl.reads) carriedReads_.insert(r.op);
      cur = simulateBlock(cur, op.region(0).block());
      requireQuietIteration(cur, op);
      outs.push_back(cur);
      if (!seen.insert(canonical(cur, Iter{})).second) break;
    }
    carriedLoop_ = savedLoop;
    carriedReads_ = std::move(savedReads);
    return joinQuiet(outs);
  }
  for (auto& r : op.regions()) {
    State x = simulateBlock(st, r->block());
    requireQuiet(x, op, "at the end of a branch of");
    outs.push_back(std::move(x));
  }
  if (outs.empty()) outs.push_back(st);
  return joinQuiet(outs);
}

PipelineChecker::State PipelineChecker::simulateLoop(State st, const Op& loop, int epoch, const Op* next) {
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
    fail(loop, "pipelined loop: cannot prove the schedule: its state does not repeat within " + std::to_string(cap) +
                   " iterations (an async_commit whose group is never waited for?)");
  // The loop may exit after any number of iterations: join every reachable
  // state. Slots lose their identity (all slots of a buffer get the worst
  // status and every pending read), which is conservative.
  State out;
  size_t mmaDepth = st.mmaInFlight.size();
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
      // An async dot's read stays in flight, in the newest group: only a
      // dot_wait {pending = 0} after the loop is sure to retire it.
      for (const Read& r : sl.reads) addRead(j, {r.op, false, 0, r.mma == kNoMma ? kNoMma : kJoinedMma, r.dot});
      mmaDepth = std::max(mmaDepth, s.mmaInFlight.size());
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
  // The joined in-flight groups: mmaDepth of them, the joined reads in the
  // newest (kJoinedMma above, renumbered here).
  out.nextMma = st.nextMma;
  for (size_t i = 0; i < mmaDepth; ++i) out.mmaInFlight.push_back(out.nextMma++);
  const int64_t newest = mmaDepth ? out.mmaInFlight.back() : kNoMma;
  for (auto& [k, sl] : out.slots)
    for (Read& r : sl.reads)
      if (r.mma == kJoinedMma) r.mma = newest;
  return out;
}

}  // namespace tessera::ir::detail

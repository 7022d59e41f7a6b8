// The pipeline verifier: static proof that async-copy schedules obey the
// memory model of IR.h, plus the form rules of loops as written
// (`for {stages = S}`) that the `pipeline` pass relies on.
// This file holds those form rules and the entry point; the proof itself is
// in PipelineSimulation.cpp.
#include "PipelineChecker.h"

#include <set>
#include <unordered_set>

#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

namespace tessera::ir {
namespace detail {

bool isAsyncCopy(const Op& op) {
  if (op.code() != OpCode::Copy) return false;
  auto it = op.attrs().find("async");
  return it != op.attrs().end() && std::holds_alternative<int64_t>(it->second) && std::get<int64_t>(it->second) == 1;
}

bool isAsyncDot(const Op& op) { return op.code() == OpCode::Dot && intAttrOf(op, "async").value_or(0) == 1; }

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
    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::Mul: {
      auto x = evalAffine(d->operand(0), iv), y = evalAffine(d->operand(1), iv);
      if (!x || !y || x->m || y->m) return std::nullopt;
      Affine r;
      if (d->code() == OpCode::Add)
        r = {x->a + y->a, x->b + y->b, 0};
      else if (d->code() == OpCode::Sub)
        r = {x->a - y->a, x->b - y->b, 0};
      else if (x->a == 0)
        r = {x->b * y->a, x->b * y->b, 0};
      else if (y->a == 0)
        r = {y->b * x->a, y->b * x->b, 0};
      else
        return std::nullopt;
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
    default: return std::nullopt;
  }
}

std::string relSlot(int64_t c, int64_t n) {
  if (n == 1) return "0";
  return c == 0 ? "(i) mod " + std::to_string(n) : "(i+" + std::to_string(c) + ") mod " + std::to_string(n);
}
std::string relIter(int64_t d) { return d == 0 ? "i" : (d > 0 ? "i+" : "i") + std::to_string(d); }

void PipelineChecker::run() {
  collectUses();
  // A warp-specialised pipeline's buffers follow the stage protocol, proven
  // on its own (StageProtocol.cpp); the rest of the kernel is proven here.
  verifyStageProtocol(f_);
  const std::set<const Value*> channel = channelBuffers(f_);
  bool any = false;
  walk(const_cast<Block&>(f_.body()), [&](Op& op) {
    if (op.code() == OpCode::For && op.hasAttr("stages")) checkWrittenLoop(op);
    if (isAsyncCopy(op) && !channel.count(root(op.operand(0)))) tracked_.insert(root(op.operand(0)));
    if (isAsyncCopy(op) || op.code() == OpCode::AsyncCommit || op.code() == OpCode::AsyncWait || isAsyncDot(op) ||
        op.code() == OpCode::DotWait || (op.code() == OpCode::For && op.hasAttr("pipelined")))
      any = true;
    // A slot an async dot reads is tracked too: its reuse waits for the dot.
    if (isAsyncDot(op))
      for (unsigned i = 0; i < 2; ++i)
        if (const Op* ld = dotOperandLoad(op, i); ld && !channel.count(root(ld->operand(0))))
          tracked_.insert(root(ld->operand(0)));
  });
  if (!any) return;  // nothing asynchronous: the program-order semantics hold
  checkAsyncValues();
  checkPlacement();
  simulateKernel();
}

// ---- loops as written: for {stages = S} --------------------------------
void PipelineChecker::checkWrittenLoop(const Op& loop) {
  const int64_t S = intAttrOf(loop, "stages").value_or(1);
  for (const Op* up = loop.parent()->parentOp(); up; up = up->parent()->parentOp())
    if (up->code() == OpCode::For && (up->hasAttr("stages") || up->hasAttr("pipelined")))
      fail(loop, "pipelined loop: cannot be nested in the pipelined loop at " + where(up->loc()));
  const Block& body = loop.region(0).block();
  for (auto& r : loop.regions())
    walk(const_cast<Block&>(r->block()), [&](Op& op) {
      if (op.code() == OpCode::For && (op.hasAttr("stages") || op.hasAttr("pipelined")))
        fail(op, "pipelined loop: cannot be nested in the pipelined loop at " + where(loop.loc()));
      if (isAsyncCopy(op) || op.code() == OpCode::AsyncCommit || op.code() == OpCode::AsyncWait || isAsyncDot(op) ||
          op.code() == OpCode::DotWait)
        fail(op,
             "pipelined loop: a loop as written ('stages') holds no async operations; the 'pipeline' pass "
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
    // Allocated before the loop in a block that holds it (the kernel body,
    // or the loop or branch the pipelined loop is nested in).
    const Op* holder = ancestorIn(&loop, buf->ownerBlock());
    if (!buf->definingOp() || buf->definingOp()->code() != OpCode::Alloc || !holder ||
        indexIn(buf->definingOp(), *buf->ownerBlock()) > indexIn(holder, *buf->ownerBlock()))
      fail(c, "pipelined loop: the staged buffer " + names_.name(buf) +
                  " must be allocated ('alloc') before the loop, in the kernel body or a block that holds the loop");
    if (buf->type().space() != MemSpace::Shared)
      fail(c,
           "pipelined loop: the staged buffer " + bufName(buf) + " must be in shared memory, got " + buf->type().str());
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
// the loop, through pure ops and global loads (a page table entry: the
// schedule issues the load ahead too, masked off for iterations past the
// end). A load moved ahead must not be able to see a write of the loop, so
// then the loop may not write global memory.
void PipelineChecker::checkAddressSlice(const Op& loop, const Op& copy, const Value* v) const {
  const Block& body = loop.region(0).block();
  std::vector<const Value*> work{v};
  std::unordered_set<const Value*> seen;
  const Op* load = nullptr;
  while (!work.empty()) {
    const Value* x = work.back();
    work.pop_back();
    if (!seen.insert(x).second || x->ownerBlock() != &body) continue;
    if (x->isBlockArg()) {
      if (x != body.arg(0))
        fail(copy,
             "pipelined loop: the addresses and mask of a staged copy are computed S-1 iterations ahead, "
             "so they cannot depend on a loop-carried value (" +
                 names_.name(x) + ")");
      continue;
    }
    const Op& d = *x->definingOp();
    bool ok = !hasSideEffects(d.code()) && d.numRegions() == 0 && d.code() != OpCode::LocalLoad &&
              d.code() != OpCode::Alloc && d.code() != OpCode::BufferSlot;
    if (!ok)
      fail(copy,
           "pipelined loop: the addresses and mask of a staged copy are computed S-1 iterations ahead, "
           "so they cannot depend on " +
               at(d) +
               " (only on the loop index, values defined before the "
               "loop, arithmetic and global loads)");
    if (d.code() == OpCode::Load && !load) load = &d;
    for (Value* o : d.operands()) work.push_back(o);
  }
  if (!load) return;
  const Op* write = nullptr;
  walk(const_cast<Block&>(body), [&](Op& op) {
    if (!write && writesMemory(op.code()) && op.code() != OpCode::Copy && op.code() != OpCode::LocalStore &&
        op.code() != OpCode::Barrier)
      write = &op;
  });
  if (write)
    fail(copy, "pipelined loop: the addresses of a staged copy depend on " + at(*load) +
                   ", which the schedule issues S-1 iterations ahead; the loop writes global memory (" + at(*write) +
                   "), which that load could read, so it cannot move: load the value before the loop, or write "
                   "after it");
}

// ---- async dots' results ---------------------------------------------------
void PipelineChecker::checkAsyncValues() {
  // Pending values: async dots' results, and what a loop carries from a
  // pending yield operand (its block argument and its result).
  std::map<const Value*, const Op*> pending;  // value -> the async dot behind it
  walk(const_cast<Block&>(f_.body()), [&](Op& op) {
    if (isAsyncDot(op)) pending[op.result()] = &op;
  });
  for (bool grew = true; grew;) {
    grew = false;
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      if (op.code() != OpCode::For) return;
      const Block& b = op.region(0).block();
      const Op* y = b.terminator();
      for (unsigned i = 0; y && i < y->numOperands() && i < op.numResults(); ++i) {
        auto it = pending.find(y->operand(i));
        if (it == pending.end() || pending.count(op.result(i))) continue;
        pending[op.result(i)] = it->second;
        pending[b.arg(i + 1)] = it->second;
        grew = true;
      }
    });
  }
  for (auto& [v, dot] : pending)
    for (const Op* u : usersOf(v)) {
      bool ok = u->code() == OpCode::Yield || u->code() == OpCode::DotWait ||
                (isAsyncDot(*u) && u->operand(0) != v && u->operand(1) != v);
      if (!ok)
        fail(*u, "the result of the async dot " + at(*dot) + " is used by " + at(*u) +
                     " while the dot may still be in flight; use the result of a dot_wait {pending = 0} "
                     "instead (only another async dot may take it, as its accumulator)");
    }
}

// ---- placement of async operations and tracked accesses -----------------
void PipelineChecker::checkPlacement() {
  for (auto& op : f_.body().ops()) placeOp(*op, Ctx::Top, nullptr);
}

// Outside scheduled loops (the kernel body and the blocks of plain loops and
// branches: Top, Nested) async operations and writes of tracked buffers
// may appear anywhere; in a scheduled loop only directly in its body.
void PipelineChecker::placeOp(const Op& op, Ctx ctx, const Op* loop) {
  bool asyncOp = isAsyncCopy(op) || op.code() == OpCode::AsyncCommit || op.code() == OpCode::AsyncWait ||
                 isAsyncDot(op) || op.code() == OpCode::DotWait;
  if (asyncOp && ctx == Ctx::InLoopNested)
    fail(op,
         "async copies, async_commit, async_wait, async dots and dot_wait may appear in a scheduled loop "
         "('pipelined') only directly in its body, not in a loop or branch nested in it");
  if (op.code() == OpCode::For && op.hasAttr("pipelined")) {
    if (ctx == Ctx::LoopBody || ctx == Ctx::InLoopNested)
      fail(op, "pipelined loop: a scheduled loop cannot be nested in another scheduled loop (at " + where(loop->loc()) +
                   ")");
    auto lo = constantInt(op.operand(0)), step = constantInt(op.operand(2));
    if (!lo || *lo != 0 || !step || *step != 1)
      fail(op,
           "pipelined loop: a scheduled loop runs over the iteration number: lo must be the constant 0 and "
           "step the constant 1");
  }
  const Value* buf = accessedBuffer(op);
  if (buf && tracked_.count(root(buf))) {
    bool write = op.code() != OpCode::LocalLoad;
    if (ctx == Ctx::InLoopNested && write)
      fail(op, "buffer " + bufName(root(buf)) +
                   " is written by async copies; in a scheduled loop it may be written only directly in the "
                   "loop's body (not in a nested region)");
    const bool inLoop = ctx == Ctx::LoopBody || ctx == Ctx::InLoopNested;
    slotForm(op, buf, inLoop ? loop : nullptr);  // checks the index form
  }
  for (auto& r : op.regions()) {
    Ctx inner = Ctx::Nested;
    const Op* l = loop;
    if ((ctx == Ctx::Top || ctx == Ctx::Nested) && op.code() == OpCode::For && op.hasAttr("pipelined")) {
      inner = Ctx::LoopBody;
      l = &op;
    } else if (ctx == Ctx::LoopBody || ctx == Ctx::InLoopNested) {
      inner = Ctx::InLoopNested;
    }
    for (auto& o : r->block().ops()) placeOp(*o, inner, l);
  }
}

PipelineChecker::SlotForm PipelineChecker::slotForm(const Op& op, const Value* buf, const Op* loop) {
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
        fail(op, "buffer " + bufName(r) +
                     " is written by async copies; outside a scheduled loop its slot index "
                     "must be a constant in [0, " +
                     std::to_string(n) + ") (computed by " + at(*s) + ")");
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
        fail(op,
             "pipelined loop: an async copy in a scheduled loop needs a 'stage' attribute (the iteration "
             "offset it belongs to)");
      if (st && *st < 0) fail(op, "pipelined loop: 'stage' must be >= 0");
      if (st && ((*st - form.c) % n + n) % n != 0) {
        std::string got = loop ? relSlot(form.c, n) : std::to_string(form.c);
        std::string want = loop ? relSlot(*st % n, n) : std::to_string(*st % n);
        fail(op, "pipelined loop: wrong slot on buffer " + bufName(r) + ": " + at(op) + " copies iteration " +
                     (loop ? relIter(*st) : std::to_string(*st)) + " into slot " + got + " computed by " + at(*s) +
                     ", but that iteration's slot is " + want + " (slot = iteration mod " + std::to_string(n) + ")");
      }
    }
  }
  forms_[&op] = form;
  return form;
}

}  // namespace detail

void verifyPipelines(const Function& f) { detail::PipelineChecker(f).run(); }

}  // namespace tessera::ir

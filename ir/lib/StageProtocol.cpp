// The static proof of a warp-specialised pipeline's stage protocol (IR.h,
// "Warp-specialised pipelines"): a producer loop in a `warp_specialize`
// region filling the slots of its channel buffers, a consumer loop after it
// reading them.
//
// How the proof works. Rounds are numbered by the iteration they carry:
// round j of the channel is slot j mod N. Both loops are `for(0, n, 1)
// {pipelined = N}` with the same trip count (compared structurally) and
// every slot index of the form (i + c) mod N, so an op in iteration i acts
// on round i + c. Each side is simulated alone, iteration by iteration,
// with the state relative to i (which rounds are open or held, which async
// dots still read them) until it repeats:
//
// * producer: acquire(j), then copies into round j's slot only, then
//   commit(j), once per iteration and for the same j; a copy outside an
//   acquired round could overwrite data the consumer still reads.
// * consumer: wait(j) before any read of round j, release(j) after its last
//   read and after the dot_wait that retires every async dot reading it;
//   the wait of iteration i is for the round the producer's iteration i
//   fills, so both see the same data.
// * deadlock: the producer fills round j only after the consumer released
//   round j - N; the consumer must therefore have released every round
//   up to j - N before it waits for round j (else both wait forever). A
//   release whose condition skips an existing round, or that names a round
//   before 0, is rejected too.
//
// Both sides go through rounds in order, so the cross-agent interleavings
// reduce to these per-side facts: a wait of round j returns only after the
// producer's commit of j, which follows its acquire of j, which follows the
// consumer's release of j - N, which follows every consumer read of j - N.
#include <functional>
#include <map>
#include <set>

#include "PipelineChecker.h"
#include "tessera/ir/Verifier.h"

namespace tessera::ir::detail {
namespace {

bool isStageOp(const Op& op) {
  switch (op.code()) {
    case OpCode::StageAcquire:
    case OpCode::StageCommit:
    case OpCode::StageWait:
    case OpCode::StageRelease: return true;
    default: return false;
  }
}

const Value* rootOf(const Value* v) {
  while (v->definingOp() && v->definingOp()->code() == OpCode::BufferSlot) v = v->definingOp()->operand(0);
  return v;
}

class StageChecker : CheckerText {
 public:
  explicit StageChecker(const Function& f) : CheckerText(f, "stage protocol: ") {}

  void run() {
    bool any = false;
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      if (op.code() == OpCode::WarpSpecialize) {
        if (ws_) fail(op, "a kernel has at most one warp_specialize (the first is at " + where(ws_->loc()) + ")");
        ws_ = &op;
      }
      any = any || isStageOp(op);
    });
    if (!ws_ && !any) return;
    if (!ws_) {
      walk(const_cast<Block&>(f_.body()), [&](Op& op) {
        if (isStageOp(op)) fail(op, "stage ops need a warp_specialize producer in the kernel");
      });
    }
    if (ws_->parent() != &f_.body()) fail(*ws_, "warp_specialize must be in the kernel body, not in a region");
    checkProducerRegion();
    findConsumer();
    checkProducerLoop();
    checkConsumerLoop();
  }

  std::set<const Value*> buffers() {
    walk(const_cast<Block&>(f_.body()), [&](Op& op) {
      if (op.code() == OpCode::WarpSpecialize) ws_ = &op;
    });
    if (!ws_) return {};
    std::set<const Value*> out;
    walk(ws_->region(0).block(), [&](Op& op) {
      if (isAsyncCopy(op)) out.insert(rootOf(op.operand(0)));
    });
    return out;
  }

 private:
  std::string slotText(int64_t c) const { return relSlot(((c % n_) + n_) % n_, n_); }

  // ---- form ----------------------------------------------------------------
  // The producer: only the kernel's arguments and allocs from outside, no
  // global writes, async copies only into the channel, its one loop.
  void checkProducerRegion() {
    n_ = -1;
    std::set<const Value*> inside;
    walk(ws_->region(0).block(), [&](Op& op) {
      for (auto& r : op.regions())
        for (auto& a : r->block().args()) inside.insert(a.get());
      for (auto& r : op.results()) inside.insert(r.get());
    });
    walk(ws_->region(0).block(), [&](Op& op) {
      for (const Value* v : op.operands()) {
        if (inside.count(v)) continue;
        const Op* d = v->definingOp();
        bool arg = false;
        for (unsigned i = 0; i < f_.numArgs(); ++i) arg = arg || f_.arg(i) == v;
        if (!arg && !(d && d->code() == OpCode::Alloc))
          fail(op, "the producer may use only the kernel's arguments and allocs from outside its region; " +
                       names_.name(v) + " is defined at " + (d ? where(d->loc()) : f_.name()));
      }
      switch (op.code()) {
        case OpCode::Store:
        case OpCode::AtomicRmw:
        case OpCode::AtomicCas:
        case OpCode::LocalStore:
        case OpCode::LocalLoad:
        case OpCode::Barrier:
        case OpCode::AsyncCommit:
        case OpCode::AsyncWait:
        case OpCode::Dot:
        case OpCode::DotWait:
        case OpCode::StageWait:
        case OpCode::StageRelease:
        case OpCode::WarpSpecialize:
          fail(op, std::string("'") + op.name() +
                       "' cannot be in the producer: it issues the channel's copies only "
                       "(stage_acquire, copy {async = 1}, stage_commit)");
        case OpCode::Copy:
          if (!isAsyncCopy(op)) fail(op, "the producer's copies must be async (copy {async = 1})");
          break;
        default: break;
      }
      if (isStageOp(op)) slotsOf(op);
    });
    for (auto& op : ws_->region(0).block().ops())
      if (op->code() == OpCode::For) {
        if (prodLoop_) fail(*op, "the producer holds one loop (the first is at " + where(prodLoop_->loc()) + ")");
        prodLoop_ = op.get();
      }
    if (!prodLoop_ || !prodLoop_->hasAttr("pipelined")) fail(*ws_, "the producer must hold one 'for {pipelined}' loop");
  }

  int64_t slotsOf(const Op& op) {
    const int64_t s = intAttrOf(op, "slots").value_or(0);
    if (n_ < 0) n_ = s;
    if (s != n_) fail(op, "'slots' = " + std::to_string(s) + " but the channel has " + std::to_string(n_));
    return s;
  }

  void findConsumer() {
    const auto& ops = f_.body().ops();
    bool after = false;
    for (auto& op : ops) {
      if (op.get() == ws_) {
        after = true;
        continue;
      }
      auto visit = [&](Op& o) {
        if (o.code() != OpCode::StageWait && o.code() != OpCode::StageRelease) return;
        slotsOf(o);
        if (!after) fail(o, "a consumer stage op must follow the warp_specialize at " + where(ws_->loc()));
        if (op->code() != OpCode::For || !op->hasAttr("pipelined") || o.parent() != &op->region(0).block())
          fail(o,
               "stage_wait and stage_release must be directly in the body of a 'for {pipelined}' loop of the "
               "kernel body");
        if (consLoop_ && consLoop_ != op.get())
          fail(o, "the channel has one consumer loop (the first is at " + where(consLoop_->loc()) + ")");
        consLoop_ = op.get();
      };
      visit(*op);
      for (auto& r : op->regions()) walk(r->block(), visit);
    }
    if (!consLoop_) fail(*ws_, "no consumer loop (stage_wait, stage_release) follows the producer");
    for (auto& [buf, _] : readersOf())
      if (buf->type().shape()[0] != n_)
        fail(*ws_, "buffer " + bufName(buf) + " has " + std::to_string(buf->type().shape()[0]) +
                       " slots but the channel has " + std::to_string(n_));
    const Op& p = *prodLoop_;
    const Op& c = *consLoop_;
    for (const Op* l : {&p, &c}) {
      auto lo = constantInt(l->operand(0)), st = constantInt(l->operand(2));
      if (!lo || *lo != 0 || !st || *st != 1) fail(*l, "a stage-protocol loop runs from the constant 0 by 1");
    }
    if (!sameValue(p.operand(1), c.operand(1)))
      fail(c, "the consumer loop's trip count is not the producer's (at " + where(p.loc()) +
                  "): both must compute the same value from the kernel's arguments");
  }

  // The channel's buffers with a consumer read of each (for messages).
  std::map<const Value*, const Op*> readersOf() {
    std::map<const Value*, const Op*> out;
    walk(ws_->region(0).block(), [&](Op& op) {
      if (isAsyncCopy(op)) out.emplace(rootOf(op.operand(0)), nullptr);
    });
    walk(consLoop_->region(0).block(), [&](Op& op) {
      if (op.code() != OpCode::LocalLoad) return;
      auto it = out.find(rootOf(op.operand(0)));
      if (it != out.end() && !it->second) it->second = &op;
    });
    return out;
  }

  /// Equal values computed the same way from the same arguments and
  /// constants (the pass clones the trip count into the producer).
  static bool sameValue(const Value* a, const Value* b) {
    if (a == b) return true;
    const Op* x = a->definingOp();
    const Op* y = b->definingOp();
    if (!x || !y || x->code() != y->code() || x->numOperands() != y->numOperands() || x->numRegions() != 0 ||
        y->numRegions() != 0 || hasSideEffects(x->code()) || x->code() == OpCode::Load || a->type() != b->type() ||
        x->attrs() != y->attrs())
      return false;
    for (unsigned i = 0; i < x->numOperands(); ++i)
      if (!sameValue(x->operand(i), y->operand(i))) return false;
    return true;
  }

  /// c of a slot index (i + c) mod N in loop `l` (a buffer_slot's index or a
  /// stage op's slot).
  int64_t offsetOf(const Op& op, const Value* idx, const Op& l) const {
    auto aff = evalAffine(idx, l.region(0).block().arg(0));
    bool ok = aff.has_value();
    if (ok && n_ == 1) return 0;
    ok = ok && aff->m == n_ && ((aff->a - 1) % n_) == 0;
    if (!ok)
      fail(op, "the slot index must have the form (i + c) mod " + std::to_string(n_) +
                   ", i the iteration number, c >= 0 a constant");
    return aff->b;
  }
  const Op* slotOp(const Value* buf) const {
    const Op* d = buf->definingOp();
    return d && d->code() == OpCode::BufferSlot ? d : nullptr;
  }

  // ---- producer ------------------------------------------------------------
  void checkProducerLoop() {
    const Op& l = *prodLoop_;
    std::optional<int64_t> open;
    const Op* openOp = nullptr;
    int rounds = 0;
    for (auto& o : l.region(0).block().ops()) {
      const Op& op = *o;
      switch (op.code()) {
        case OpCode::StageAcquire:
          if (open)
            fail(op, "acquires a slot while the round acquired at " + where(openOp->loc()) + " is not committed");
          open = offsetOf(op, op.operand(0), l);
          openOp = &op;
          ++rounds;
          if (prodOffset_ && *prodOffset_ != *open)
            fail(op, "the producer acquires two different rounds per iteration");
          prodOffset_ = open;
          break;
        case OpCode::StageCommit: {
          const int64_t c = offsetOf(op, op.operand(0), l);
          if (!open) fail(op, "commits slot " + slotText(c) + " that no stage_acquire of this iteration opened");
          if (c != *open)
            fail(op, "commits slot " + slotText(c) + " but the round open is slot " + slotText(*open) + " (" +
                         at(*openOp) + ")");
          open.reset();
          break;
        }
        case OpCode::Copy: {
          const Value* r = rootOf(op.operand(0));
          const Op* s = slotOp(op.operand(0));
          if (!s || s->operand(0) != r)
            fail(op, "a producer copy writes one slot of a channel buffer (buffer_slot of the buffer)");
          const int64_t c = offsetOf(*s, s->operand(1), l);
          const Op* rd = readersOf()[r];
          const std::string victim = rd ? " data " + at(*rd) + " may still read" : " the consumer's data";
          if (!open)
            fail(op, "write-after-read hazard on buffer " + bufName(r) + " slot " + slotText(c) + ": " + at(op) +
                         " is not between a stage_acquire and a stage_commit, so it may overwrite" + victim);
          if (((c - *open) % n_ + n_) % n_ != 0)
            fail(op, "wrong slot on buffer " + bufName(r) + ": " + at(op) + " writes slot " + slotText(c) +
                         " but the round acquired (" + at(*openOp) + ") is slot " + slotText(*open) +
                         ", so it may overwrite" + victim);
          break;
        }
        default:
          if (op.numRegions() != 0) {
            for (auto& r : op.regions())
              walk(r->block(), [&](Op& in) {
                if (isStageOp(in) || isAsyncCopy(in))
                  fail(in, "stage ops and copies must be directly in the producer loop's body");
              });
          }
          break;
      }
    }
    if (open) fail(*openOp, "the round acquired here is never committed: the consumer's stage_wait would wait forever");
    if (rounds != 1) fail(l, "the producer loop must acquire and commit one round per iteration");
  }

  // ---- consumer ------------------------------------------------------------
  struct Held {
    const Op* wait = nullptr;
  };
  struct CState {
    std::map<int64_t, Held> held;  // rounds waited and not released (absolute)
    // Async dots in flight, in issue order, with the round they read (-1: none).
    std::vector<std::pair<const Op*, int64_t>> dots;
    bool operator==(const CState&) const = default;
  };

  /// The condition of a release at iteration k, where it is `cmp(i, c)` or
  /// `cmp(c, i)`; no condition is true.
  bool condAt(const Op& rel, int64_t k) const {
    if (rel.numOperands() < 2) return true;
    const Op* d = rel.operand(1)->definingOp();
    const Value* iv = consLoop_->region(0).block().arg(0);
    if (d && d->code() == OpCode::Cmp) {
      const std::string& p = d->strAttr("pred");
      auto x = evalAffine(d->operand(0), iv), y = evalAffine(d->operand(1), iv);
      if (x && y && !x->m && !y->m) {
        if (auto r = foldIntCmp(p, x->a * k + x->b, y->a * k + y->b, d->operand(0)->type().dtype())) return *r;
      }
    }
    fail(rel, "cannot prove the release condition: it must compare the iteration number with a constant");
  }

  const Op* roundOfRead(const Op& ld, int64_t k, const CState& st, int64_t& round) const {
    const Op* s = slotOp(ld.operand(0));
    const Value* r = rootOf(ld.operand(0));
    const Op& l = *consLoop_;
    if (!s || s->operand(0) != r) fail(ld, "a read of channel buffer " + bufName(r) + " must read one slot");
    const int64_t c = offsetOf(*s, s->operand(1), l);
    // The round of this slot that the consumer holds (at most one).
    for (auto& [j, h] : st.held)
      if (((j - (k + c)) % n_ + n_) % n_ == 0) {
        round = j;
        return h.wait;
      }
    round = -1;
    return nullptr;
  }

  void consumerIteration(CState& st, int64_t k) {
    const Op& l = *consLoop_;
    const std::map<const Value*, const Op*> readers = readersOf();
    std::map<const Value*, int64_t> readRound;  // local_load result -> round
    int waits = 0;
    for (auto& o : l.region(0).block().ops()) {
      const Op& op = *o;
      if (op.numRegions() != 0)
        for (auto& r : op.regions())
          walk(r->block(), [&](Op& in) {
            if (in.code() == OpCode::LocalLoad && readers.count(rootOf(in.operand(0))))
              fail(in, "reads of a channel buffer must be directly in the consumer loop's body");
          });
      switch (op.code()) {
        case OpCode::StageWait: {
          const int64_t j = k + offsetOf(op, op.operand(0), l);
          ++waits;
          if (prodOffset_ && j - k != *prodOffset_)
            fail(op, "wrong slot: the consumer's iteration i waits for slot " + slotText(j - k) +
                         " but the producer's iteration i fills slot " + slotText(*prodOffset_) + " (" +
                         at(*prodLoop_) + ")");
          for (auto& [h, w] : st.held)
            if (h <= j - n_)
              fail(op, "deadlock: this wait needs the producer to refill slot " + slotText(j - k) +
                           ", which it does only after the release of the round waited for at " + at(*w.wait) +
                           ", which this consumer has not released yet; release it before this wait, or use more "
                           "slots");
          st.held[j] = Held{&op};
          break;
        }
        case OpCode::StageRelease: {
          // The slot names the round of it that the consumer holds.
          const int64_t c = offsetOf(op, op.operand(0), l);
          auto h = st.held.begin();
          while (h != st.held.end() && ((h->first - (k + c)) % n_ + n_) % n_ != 0) ++h;
          if (!condAt(op, k)) {
            if (h != st.held.end() && h->first + 1 < k)
              fail(op, "skips the release of the round waited for at " + at(*h->second.wait) + " in iteration " +
                           std::to_string(k) + ": the producer would wait for it forever");
            break;
          }
          if (h == st.held.end())
            fail(op, "releases slot " + slotText(c) + " in iteration " + std::to_string(k) +
                         ", where this consumer holds no round of it" +
                         (k < n_ ? " (before its first wait of that slot: give the release a condition on i)" : ""));
          const int64_t j = h->first;
          for (auto& [dot, rd] : st.dots)
            if (rd == j)
              fail(op, "write-after-read hazard on the channel: after " + at(op) + " the producer may refill slot " +
                           slotText(c) + " while the async dot " + at(*dot) +
                           " still reads it; retire the dot first (dot_wait)");
          st.held.erase(h);
          break;
        }
        case OpCode::LocalLoad: {
          const Value* r = rootOf(op.operand(0));
          if (!readers.count(r)) break;
          int64_t round = -1;
          const Op* w = roundOfRead(op, k, st, round);
          if (!w) {
            const Op* copy = nullptr;
            walk(ws_->region(0).block(), [&](Op& c) {
              if (!copy && isAsyncCopy(c) && rootOf(c.operand(0)) == r) copy = &c;
            });
            fail(op, "read-before-wait hazard on buffer " + bufName(r) + ": " + at(op) +
                         " reads a slot that no stage_wait holds, while " + (copy ? at(*copy) : "the producer") +
                         " may be writing it");
          }
          readRound[op.result()] = round;
          break;
        }
        case OpCode::Dot:
          if (isAsyncDot(op)) {
            int64_t rd = -1;
            for (unsigned i = 0; i < 2; ++i)
              if (auto it = readRound.find(op.operand(i)); it != readRound.end()) rd = it->second;
            st.dots.emplace_back(&op, rd);
          }
          break;
        case OpCode::DotWait: {
          const int64_t p = intAttrOf(op, "pending").value_or(0);
          while (static_cast<int64_t>(st.dots.size()) > p) st.dots.erase(st.dots.begin());
          break;
        }
        default: break;
      }
    }
    if (waits != 1) fail(l, "the consumer loop must wait for one round per iteration");
  }

  void checkConsumerLoop() {
    // Iterate until the state relative to the iteration repeats (the
    // release conditions settle after their first iterations).
    CState st;
    std::set<std::string> seen;
    for (int64_t k = 0;; ++k) {
      if (k == 4 * n_ + 16)
        fail(*consLoop_,
             "cannot prove the stage protocol: its state does not repeat within " + std::to_string(k) + " iterations");
      consumerIteration(st, k);
      std::string key;
      for (auto& [j, h] : st.held) key += std::to_string(j - k) + ",";
      key += "|";
      for (auto& [d, rd] : st.dots) key += std::to_string(rd < 0 ? -1000 : rd - k) + ",";
      if (k > 2 * n_ && !seen.insert(key).second) break;
    }
  }

  const Op* ws_ = nullptr;
  const Op* prodLoop_ = nullptr;
  const Op* consLoop_ = nullptr;
  std::optional<int64_t> prodOffset_;
  int64_t n_ = -1;
};

}  // namespace

std::set<const Value*> channelBuffers(const Function& f) { return StageChecker(f).buffers(); }
void verifyStageProtocol(const Function& f) { StageChecker(f).run(); }

}  // namespace tessera::ir::detail

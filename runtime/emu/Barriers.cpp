// The block's named barriers: the whole-block barrier (bar.sync 0 /
// s_barrier), released once every live thread has arrived, and the counted
// ones (bar.sync id, count), released once `count` threads have arrived;
// the divergent-barrier check and barrier misuse (bad ids and counts, one
// barrier used with two counts).
#include <string>

#include "EmulatorImpl.h"

namespace tessera::emu::detail {

namespace {

/// The instruction as PTX spells it, for messages: with its count, and as
/// a phase's (whose count kWholeBlock is the whole-block barrier's).
std::string countedName(int32_t id, int32_t count) {
  return "bar.sync " + std::to_string(id) + ", " + std::to_string(count);
}
std::string barName(int32_t id, int32_t count) {
  return count == kWholeBlock ? "bar.sync " + std::to_string(id) : countedName(id, count);
}
std::string countName(int32_t count) { return count == kWholeBlock ? "none (whole block)" : std::to_string(count); }

/// Misuse of a barrier: reported as DivergentBarrier (threads of the block
/// cannot all have met at it) naming the op, and the block is aborted (as
/// Worker::misuse; `what` builds the message inside report()).
template <class What>
[[noreturn]] void barrierMisuse(Worker& w, Fiber* f, int64_t other, int32_t site, int32_t otherSite, const What& what) {
  w.report(IssueKind::DivergentBarrier, f->linear, other, site, otherSite,
           [&] { return w.where(f->linear) + ": " + what(); });
  w.abortBlock(tlsFiber);
}

}  // namespace

void Worker::releaseBarrier(int32_t id, Fiber* self) {
  NamedBarrier& b = namedBarriers[id];
  const bool whole = b.count == kWholeBlock;
  if (whole) {
    const Fiber& ref = fibers[b.waiters.front()];
    for (uint32_t i : b.waiters) {
      const Fiber& f = fibers[i];
      // A release needs every live thread, so waiters always share one
      // barrier count; divergence shows as different barrier sites.
      TS_ASSERT(f.barriers == ref.barriers, "barrier waiters with different barrier counts");
      if (f.barrierSite >= 0 && ref.barrierSite >= 0 && f.barrierSite != ref.barrierSite) {
        report(IssueKind::DivergentBarrier, f.linear, ref.linear, f.barrierSite, ref.barrierSite, [&] {
          return where(f.linear) + ": waits at barrier #" + std::to_string(f.barriers + 1) + " (" +
                 opLabel(*cfg, f.barrierSite) + ") while " + threadName(ref.linear) + " waits at barrier #" +
                 std::to_string(ref.barriers + 1) + " (" + opLabel(*cfg, ref.barrierSite) +
                 "); all threads of a block must reach the same barriers";
        });
        abortBlock(tlsFiber);
      }
    }
  }
  // Accesses before and after this barrier are ordered. The epoch orders
  // every thread's accesses: exact for the whole-block barrier, and a
  // conservative approximation for a counted one, whose release also
  // orders the threads outside it (a race between such a thread and a
  // participant across the barrier goes unreported, never the reverse).
  ++epoch;
  // The profile clock (tessera_emu_clock): everyone leaves at the count of
  // the last to arrive, so a trace shows the wait.
  uint64_t latest = 0;
  for (uint32_t i : b.waiters) latest = std::max(latest, fibers[i].clock);
  for (uint32_t i : b.waiters) {
    Fiber& f = fibers[i];
    f.clock = latest;
    if (whole) ++f.barriers;
    if (&f == self)
      f.state = FState::Running;
    else
      push(i);
  }
  b.waiters.clear();
}

void Worker::barrier(Fiber* f, int32_t site) {
  NamedBarrier& b = namedBarriers[0];
  if (!b.waiters.empty() && b.count != kWholeBlock) {
    const Fiber& ref = fibers[b.waiters.front()];
    barrierMisuse(*this, f, ref.linear, site, ref.barrierSite, [&] {
      return "barrier 0 used with counts " + countName(b.count) + " and " + countName(kWholeBlock) +
             " in one phase: this thread arrives at " + barName(0, kWholeBlock) + " (" + opLabel(*cfg, site) +
             ") while " + threadName(ref.linear) + " waits at " + barName(0, b.count) + " (" +
             opLabel(*cfg, ref.barrierSite) + ")";
    });
  }
  b.count = kWholeBlock;
  f->state = FState::AtBarrier;
  f->barrierSite = site;
  b.waiters.push_back(f->linear);
  if (b.waiters.size() + exited == L->nThreads)
    releaseBarrier(0, f);
  else
    yield(f);
}

void Worker::barrierCount(Fiber* f, int32_t site, int32_t id, int32_t count) {
  if (id < 0 || id >= kNamedBarriers)
    barrierMisuse(*this, f, -1, site, -1, [&] {
      return countedName(id, count) + " (" + opLabel(*cfg, site) + "): the barrier id must be in 0.." +
             std::to_string(kNamedBarriers - 1);
    });
  if (count <= 0 || count % static_cast<int32_t>(L->W) != 0 || static_cast<uint32_t>(count) > L->nThreads)
    barrierMisuse(*this, f, -1, site, -1, [&] {
      return countedName(id, count) + " (" + opLabel(*cfg, site) +
             "): the thread count must be a positive multiple of the warp size (" + std::to_string(L->W) +
             ") and at most the block's " + std::to_string(L->nThreads) + " threads";
    });
  NamedBarrier& b = namedBarriers[id];
  // One named barrier, whatever the sites that reach it; but every arrival
  // of a phase must give the same count.
  if (!b.waiters.empty() && b.count != count) {
    const Fiber& ref = fibers[b.waiters.front()];
    barrierMisuse(*this, f, ref.linear, site, ref.barrierSite, [&] {
      return "barrier " + std::to_string(id) + " used with counts " + countName(b.count) + " and " + countName(count) +
             " in one phase: this thread arrives at " + barName(id, count) + " (" + opLabel(*cfg, site) + ") while " +
             threadName(ref.linear) + " waits at " + barName(id, b.count) + " (" + opLabel(*cfg, ref.barrierSite) + ")";
    });
  }
  b.count = count;
  f->state = FState::AtBarrier;
  f->barrierSite = site;
  b.waiters.push_back(f->linear);
  // Exited threads do not count: the count is of arriving threads.
  if (b.waiters.size() == static_cast<size_t>(count))
    releaseBarrier(id, f);
  else
    yield(f);
}

void Worker::barrierOnExit() {
  const NamedBarrier& b = namedBarriers[0];
  if (!b.waiters.empty() && b.count == kWholeBlock && b.waiters.size() + exited == L->nThreads)
    releaseBarrier(0, nullptr);
}

std::string Worker::barrierWaits() const {
  std::string r;
  const uint32_t live = L->nThreads - exited;
  for (int32_t id = 0; id < kNamedBarriers; ++id) {
    const NamedBarrier& b = namedBarriers[id];
    if (b.waiters.empty()) continue;
    const size_t n = b.waiters.size();
    r += "; barrier " + std::to_string(id) + " (" + barName(id, b.count) + ", first at " +
         opLabel(*cfg, fibers[b.waiters.front()].barrierSite) + "): ";
    if (b.count == kWholeBlock) {
      r += std::to_string(n) + " of the " + std::to_string(live) + " live threads arrived";
    } else {
      r += std::to_string(n) + " of " + std::to_string(b.count) + " threads arrived";
      if (live < static_cast<uint32_t>(b.count))
        r += ", and only " + std::to_string(live) + " threads are live (" + std::to_string(exited) + " exited)";
    }
  }
  return r;
}

}  // namespace tessera::emu::detail

// ---- hooks --------------------------------------------------------------------
using tessera::emu::detail::current;
using tessera::emu::detail::Fiber;

extern "C" {

void tessera_emu_barrier(int32_t siteId) {
  Fiber* f = current(__func__);
  f->w->barrier(f, siteId);
}

void tessera_emu_barrier_count(int32_t siteId, int32_t id, int32_t count) {
  Fiber* f = current(__func__);
  f->w->barrierCount(f, siteId, id, count);
}

}  // extern "C"

// Block-wide barriers (bar.sync / s_barrier): arrival, release once every
// live thread has arrived, and the divergent-barrier check.
#include <string>

#include "EmulatorImpl.h"

namespace tessera::emu::detail {

/// All live threads have arrived (exited ones count as arrived). `self` is
/// the arriving fiber that continues without yielding, or null.
void Worker::releaseBarrier(Fiber* self) {
  const Fiber& ref = fibers[barrierWaiters.front()];
  for (uint32_t i : barrierWaiters) {
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
  ++epoch;  // accesses before and after this barrier are ordered
  for (uint32_t i : barrierWaiters) {
    Fiber& f = fibers[i];
    ++f.barriers;
    if (&f == self)
      f.state = FState::Running;
    else
      push(i);
  }
  barrierWaiters.clear();
  arrived = 0;
}

void Worker::barrier(Fiber* f, int32_t site) {
  f->state = FState::AtBarrier;
  f->barrierSite = site;
  barrierWaiters.push_back(f->linear);
  ++arrived;
  if (arrived + exited == L->nThreads)
    releaseBarrier(f);
  else
    yield(f);
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

}  // extern "C"

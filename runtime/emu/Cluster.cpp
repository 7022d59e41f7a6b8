// NVIDIA thread-block clusters: the co-scheduled run of a cluster's blocks,
// the cluster barrier (barrier.cluster.arrive / wait), distributed shared
// memory (mapa, shared::cluster accesses) and its cross-block race check;
// their hooks. The model is docs/emulator.md's "Clusters".
#include <algorithm>
#include <string>

#include "EmulatorImpl.h"
#include "tessera/support/Targets.h"

namespace tessera::emu::detail {

uint32_t maxClusterBlocks() {
  static const uint32_t m = [] {
    int v = 0;
    for (const GpuArch& a : gpuArchs())
      if (a.vendor == GpuArch::Vendor::NVIDIA) v = std::max(v, a.maxClusterBlocks);
    return static_cast<uint32_t>(v);
  }();
  return m;
}

namespace {

std::string blockName(const Worker& w) {
  return "block (" + std::to_string(w.blockIdx[0]) + "," + std::to_string(w.blockIdx[1]) + "," +
         std::to_string(w.blockIdx[2]) + ") (cluster rank " + std::to_string(w.rank) + ")";
}

}  // namespace

void Cluster::start() {
  ++generation;
  phase = 0;
  pending = static_cast<uint32_t>(blocks.size()) * L->nThreads;
  waiters.clear();
}

void Cluster::run(uint64_t c) {
  const LaunchConfig& cfg = *L->cfg;
  const uint32_t* dim = cfg.cluster;
  const uint64_t n0 = cfg.grid[0] / dim[0], n1 = cfg.grid[1] / dim[1];
  const uint64_t id[3] = {c % n0, c / n0 % n1, c / (n0 * n1)};
  for (uint32_t r = 0; r < blocks.size(); ++r) {
    const uint64_t cta[3] = {r % dim[0], r / dim[0] % dim[1], r / (dim[0] * dim[1])};
    uint64_t b[3];
    for (int d = 0; d < 3; ++d) b[d] = id[d] * dim[d] + cta[d];
    blocks[r]->startBlock((b[2] * cfg.grid[1] + b[1]) * cfg.grid[0] + b[0]);
  }
  // Round-robin: each block runs its ready fibers, which may wake fibers
  // of the others (a cluster barrier's last arrival), until none is ready.
  bool aborted = false, ran = true;
  while (ran && !aborted) {
    ran = false;
    for (Worker* w : blocks) {
      if (w->qCount) {
        ran = true;
        w->runReady();
      }
      // One block's misuse stops the cluster: the others may wait for it.
      if ((aborted = w->aborted)) break;
    }
  }
  if (!aborted && std::any_of(blocks.begin(), blocks.end(), [&](Worker* w) { return w->exited != L->nThreads; }))
    reportDeadlock();
  for (Worker* w : blocks) w->finishBlock();
}

Worker* Cluster::holder(uintptr_t addr) const {
  for (Worker* w : blocks) {
    const auto base = reinterpret_cast<uintptr_t>(w->shared);
    if (addr >= base && addr - base < w->sharedBytes) return w;
  }
  return nullptr;
}

void Cluster::arrive(Fiber* f, int32_t site, bool /*relaxed*/) {
  if (f->clusterArrives != f->clusterWaits)
    f->w->opMisuse(IssueKind::DivergentBarrier, f, site, [&] {
      return "barrier.cluster.arrive a second time (the previous one at " + opLabel(*L->cfg, f->clusterSite) +
             ") without a barrier.cluster.wait in between: each arrive must be followed by a wait";
    });
  f->clusterSite = site;
  ++f->clusterArrives;
  if (--pending == 0) completePhase();
}

void Cluster::wait(Fiber* f, int32_t site) {
  if (f->clusterArrives == f->clusterWaits)
    f->w->opMisuse(IssueKind::DivergentBarrier, f, site, [&] {
      return std::string("barrier.cluster.wait without a barrier.cluster.arrive before it") +
             (f->clusterWaits ? " (since the previous wait)" : "");
    });
  f->clusterSite = site;
  if (phase >= f->clusterArrives) {  // every thread has arrived already
    ++f->clusterWaits;
    return;
  }
  f->state = FState::AtClusterBarrier;
  waiters.push_back(f);
  f->w->yield(f);
}

void Cluster::completePhase() {
  ++phase;
  pending = 0;
  for (Worker* w : blocks) {
    pending += L->nThreads - w->exited;
    // Orders the accesses of each block's threads before the barrier
    // against those after it, as a block barrier does (Shadow's epochs).
    ++w->epoch;
  }
  uint64_t latest = 0;
  for (Fiber* f : waiters) latest = std::max(latest, f->clock);
  for (Fiber* f : waiters) {
    f->clock = latest;
    ++f->clusterWaits;
    f->w->push(f->linear);
  }
  waiters.clear();
}

std::string Cluster::barrierWaits() const {
  if (waiters.empty()) return {};
  uint32_t live = 0;
  for (const Worker* w : blocks) live += L->nThreads - w->exited;
  return "; barrier.cluster (first waiter at " + opLabel(*L->cfg, waiters.front()->clusterSite) +
         "): " + std::to_string(live - pending) + " of the cluster's " + std::to_string(live) +
         " live threads arrived in phase " + std::to_string(phase + 1);
}

void Cluster::reportDeadlock() {
  Worker* first = nullptr;
  uint32_t thread = 0;
  std::string detail;
  for (Worker* w : blocks) {
    if (w->exited == L->nThreads) {
      detail += "; " + blockName(*w) + ": all threads exited";
      continue;
    }
    uint32_t t = 0;
    detail += "; " + blockName(*w) + ": " + w->waitState(t);
    if (!first) {
      first = w;
      thread = t;
    }
  }
  detail += barrierWaits();
  first->report(IssueKind::Deadlock, thread, -1, -1, -1,
                [&] { return first->where(thread) + ": no thread of the cluster can proceed" + detail; });
}

void* Worker::clusterAccess(Fiber* f, void* addr, uint64_t bytes, int32_t kind, int32_t op) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  Worker* h = cluster->holder(a);
  if (h == this) return sharedAccess(f, addr, bytes, kind, op);
  const uint64_t off = h ? a - reinterpret_cast<uintptr_t>(h->shared) : 0;
  if (!h || bytes > h->sharedBytes - off) {
    if (!cfg->checkBounds) return addr;
    report(IssueKind::SharedOutOfBounds, f->linear, -1, op, -1, [&] {
      return where(f->linear) + ": " + accessName(kind) + " of " + std::to_string(bytes) + " bytes at " +
             (h ? "shared offset " + std::to_string(off) + " of " + blockName(*h) + ", past its " +
                      std::to_string(h->sharedBytes) + " bytes of shared memory"
                : "shared::cluster address " + hex(a) + ", outside the shared memory of every block of the cluster") +
             " [" + opLabel(*cfg, op) + "]";
    });
    return scratchFor(bytes);
  }
  if (h->exited == L->nThreads) {
    report(IssueKind::SharedOutOfBounds, f->linear, -1, op, -1, [&] {
      return where(f->linear) + ": " + accessName(kind) + " of " + std::to_string(bytes) + " bytes at shared offset " +
             std::to_string(off) + " of " + blockName(*h) +
             ", whose threads have all exited: its shared memory is gone (the blocks of a cluster must meet at a "
             "barrier.cluster before exiting while others may still access their shared memory) [" +
             opLabel(*cfg, op) + "]";
    });
    return scratchFor(bytes);
  }
  if (!h->remoteShadow.empty()) h->checkRemote(f, off, bytes, kind, op);
  return addr;
}

// Two accesses of different blocks are ordered only by the cluster barrier:
// one by thread X before its arrival number j, one by thread Y after its
// wait number j (phase j needed X's arrival). So an access is ordered after
// a recorded one iff its thread has passed more waits than the recorder had
// made arrivals. Two accesses by one other block are ordered as its own
// barriers order them (its epoch); pairs of the holder's own threads are
// Shadow's (checkRace).
void Worker::checkRemote(Fiber* f, uint64_t off, uint64_t bytes, int32_t kind, int32_t op) {
  Worker* from = f->w;
  const uint32_t gen = cluster->generation;
  const bool writes = kind != TESSERA_EMU_LOAD;
  const uint8_t atomic = kind == TESSERA_EMU_ATOMIC;
  const RemoteAccess me{
      gen, f->clusterArrives, from->epoch, static_cast<uint16_t>(f->linear), static_cast<uint8_t>(from->rank), atomic,
      op};
  auto ordered = [&](const RemoteAccess& p) {
    if (p.gen != gen) return true;
    if (p.rank == me.rank) return p.rank == rank || p.thread == me.thread || p.epoch != me.epoch;
    return f->clusterWaits > p.arrives;
  };
  bool reported = false;
  auto race = [&](uint64_t at, const RemoteAccess& p, const char* otherKind) {
    if (reported) return;  // one report per access, not per byte
    reported = true;
    const Worker& other = *cluster->blocks[p.rank];
    from->report(IssueKind::SharedRace, f->linear, p.thread, op, p.op, [&] {
      return from->where(f->linear) + " (cluster rank " + std::to_string(from->rank) + "): " + accessName(kind) +
             " of " + std::to_string(bytes) + " bytes at shared offset " + std::to_string(at) + " of " +
             blockName(*this) + " [" + opLabel(*cfg, op) + "] conflicts with a " + otherKind + " by " +
             blockName(other) + " " + other.threadName(p.thread) + " [" + opLabel(*cfg, p.op) +
             "] with no cluster barrier in between (a block barrier orders only its own block's accesses)";
    });
  };
  for (uint64_t i = off; i < off + bytes; ++i) {
    RemoteShadow& s = remoteShadow[i];
    if (!ordered(s.write) && !(atomic && s.write.atomic)) race(i, s.write, s.write.atomic ? "atomic" : "write");
    if (writes) {
      if (!ordered(s.read)) race(i, s.read, "read");  // plain reads race with atomics too
      s.write = me;
    } else {
      s.read = me;
    }
  }
}

}  // namespace tessera::emu::detail

// ---- hooks --------------------------------------------------------------------
using tessera::emu::detail::current;
using tessera::emu::detail::Fiber;
using tessera::emu::detail::Worker;

extern "C" {

void tessera_emu_cluster_arrive(int32_t siteId, int32_t relaxed) {
  Fiber* f = current(__func__);
  f->w->cluster->arrive(f, siteId, relaxed != 0);
}

void tessera_emu_cluster_wait(int32_t siteId) {
  Fiber* f = current(__func__);
  f->w->cluster->wait(f, siteId);
}

void* tessera_emu_mapa(void* addr, int32_t rank, int32_t opId) {
  Fiber* f = current(__func__);
  Worker& w = *f->w;
  const auto& blocks = w.cluster->blocks;
  const uint64_t off = reinterpret_cast<uintptr_t>(addr) - reinterpret_cast<uintptr_t>(w.shared);
  if (rank < 0 || static_cast<size_t>(rank) >= blocks.size() || off > w.sharedBytes) {
    w.report(tessera::emu::IssueKind::SharedOutOfBounds, f->linear, -1, opId, -1, [&] {
      return w.where(f->linear) + ": mapa of " +
             (off > w.sharedBytes
                  ? "address " + Worker::hex(reinterpret_cast<uintptr_t>(addr)) + ", outside the block's shared memory,"
                  : "shared offset " + std::to_string(off)) +
             " to cluster rank " + std::to_string(rank) + " of a cluster of " + std::to_string(blocks.size()) +
             " blocks [" + tessera::emu::detail::opLabel(*w.cfg, opId) + "]";
    });
    return addr;
  }
  return blocks[rank]->shared + off;
}

void* tessera_emu_cluster_access(void* addr, uint64_t bytes, int32_t kind, int32_t opId) {
  Fiber* f = current(__func__);
  return f->w->clusterAccess(f, addr, bytes, kind, opId);
}

}  // extern "C"

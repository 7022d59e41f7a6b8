// The SIMT machine's scheduling: Workers on host threads run the blocks, a
// fiber per GPU thread, resumed in FIFO order by the block's loop; launch(),
// the special-register hooks and the table of every hook's address.
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "EmulatorImpl.h"
#include "tessera/runtime/LaunchLimits.h"

namespace tessera::emu::detail {

__attribute__((tls_model("initial-exec"))) constinit thread_local Fiber* tlsFiber = nullptr;

namespace {
[[noreturn]] void fiberMain();
}  // namespace

Worker::Worker(Launch* l) : L(l), cfg(l->cfg) {
  const uint32_t n = L->nThreads;
  fibers.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    Fiber& f = fibers[i];
    f.w = this;
    f.linear = i;
    f.lane = i % L->W;
    f.warp = i / L->W;
    f.tid[0] = static_cast<int32_t>(i % cfg->block[0]);
    f.tid[1] = static_cast<int32_t>(i / cfg->block[0] % cfg->block[1]);
    f.tid[2] = static_cast<int32_t>(i / (cfg->block[0] * cfg->block[1]));
  }
  stacks.reserve(n);
  for (uint32_t i = 0; i < n; ++i) stacks.push_back(detail::acquireStack(cfg->stackBytes));
  warps.resize(L->nWarps);
  queue.resize(std::bit_ceil(n));
  qMask = queue.size() - 1;
  for (NamedBarrier& b : namedBarriers) b.waiters.reserve(n);
  sharedBytes = cfg->sharedBytes;
  // 256-byte alignment: the compiler may assume aligned shared layouts.
  sharedStore.reset(new unsigned char[sharedBytes + 256]);
  shared = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(sharedStore.get()) + 255) & ~uintptr_t{255});
  if (cfg->checkRaces) shadow.resize(sharedBytes);
  scratch.resize(4096);
  if (cfg->countBankConflicts) {
    occOps = std::max<size_t>(cfg->opNames.size(), 1);
    occ.assign(occOps * n, 0);
    warpAccesses.resize(L->nWarps);
  }
}
Worker::~Worker() { detail::releaseStacks(stacks); }

/// Stops the block for good: its remaining fibers are never resumed (their
/// stacks are reused by the next block). Called from a fiber.
[[noreturn]] void Worker::abortBlock(Fiber* f) {
  aborted = true;
  f->state = FState::Abandoned;
  for (;;) detail::switchContext(f->ctx, sched);
}

void Worker::runBlock(uint64_t b) {
  startBlock(b);
  runReady();
  if (!aborted && exited != L->nThreads) reportDeadlock();
  finishBlock();
}

void Worker::startBlock(uint64_t b) {
  const uint32_t n = L->nThreads;
  blockIdx[0] = static_cast<uint32_t>(b % cfg->grid[0]);
  blockIdx[1] = static_cast<uint32_t>(b / cfg->grid[0] % cfg->grid[1]);
  blockIdx[2] = static_cast<uint32_t>(b / (uint64_t{cfg->grid[0]} * cfg->grid[1]));
  // GPUs do not clear shared memory: poison it so uninitialised reads show.
  if (sharedBytes) std::memset(shared, 0xCD, sharedBytes);
  ++epoch;
  clcFailed = false;
  for (uint32_t wi = 0; wi < L->nWarps; ++wi) {
    Warp& wp = warps[wi];
    uint32_t lanes = std::min(L->W, n - wi * L->W);
    wp.live = lanes >= 64 ? ~uint64_t{0} : (uint64_t{1} << lanes) - 1;
    wp.exited = wp.waiting = 0;
    // An aborted block may leave wgmma reads in flight: drop their marks.
    for (const WgmmaRead& r : wp.wgmmaReads) markMmaRead(r.off, r.op, 0, -1);
    wp.wgmmaReads.clear();
  }
  if (cfg->countBankConflicts) {
    std::fill(occ.begin(), occ.end(), 0);
    for (auto& v : warpAccesses) v.clear();
  }
  qHead = qCount = 0;
  // A worker is one SM of the profile clock: its next block starts where
  // its last one ended.
  uint64_t clock = 0;
  for (uint32_t i = 0; i < n; ++i) clock = std::max(clock, fibers[i].clock);
  for (uint32_t i = 0; i < n; ++i) {
    Fiber& f = fibers[i];
    f.clock = clock;
    f.barriers = 0;
    f.barrierSite = -1;
    // An aborted block may leave copies behind: drop them and their marks.
    for (const AsyncCopy& c : f.asyncCopies) markInFlight(c, -1);
    f.asyncCopies.clear();
    f.commits = 0;
    f.wgmmaCommits = 0;
    f.tmaCopies = 0;
    f.clusterArrives = f.clusterWaits = 0;
    f.clusterSite = -1;
    // Stack colouring: stacks are page-aligned, so without an offset every
    // fiber's hot top frames would fall into the same cache sets.
    detail::makeContext(f.ctx, stacks[i].low, stacks[i].bytes - (i % 64) * 64, &fiberMain);
    push(i);
  }
  resetMbarriers();
  exited = 0;
  for (NamedBarrier& nb : namedBarriers) nb.waiters.clear();
  aborted = false;
}

void Worker::runReady() {
  while (!aborted && qCount) {
    Fiber& f = fibers[pop()];
    f.state = FState::Running;
    tlsFiber = &f;
    ++switches;
    detail::switchContext(sched, f.ctx);
  }
  tlsFiber = nullptr;
}

void Worker::finishBlock() {
  tcgen05BlockEnd();
  ++blocksRun;
  if (cfg->countBankConflicts) accountBanks();
}

/// The fiber's kernel returned (or threw).
void Worker::onExit(Fiber* f) {
  if (!f->asyncCopies.empty()) {
    const AsyncCopy& c = f->asyncCopies.front();
    size_t open = 0;
    for (const AsyncCopy& x : f->asyncCopies) open += x.group == f->commits;
    report(IssueKind::AsyncCopyMisuse, f->linear, -1, c.op, -1, [&] {
      return where(f->linear) + ": the thread exits with " + std::to_string(f->asyncCopies.size()) +
             " cp.async copies in flight (" + std::to_string(open) + " never committed), first of " +
             std::to_string(c.bytes) + " bytes to shared offset " + std::to_string(c.dstOff) + " [" +
             opLabel(*cfg, c.op) + "]; retire them with cp.async.wait_group before the kernel returns";
    });
    // Never performed, and still in flight for the rest of the block (a
    // GPU may write them at any time): the marks stay until the next
    // block start clears them with the list.
  }
  if (f->tmaCopies) tmaOnExit(f);
  f->state = FState::Exited;
  ++exited;
  Warp& wp = warps[f->warp];
  const uint64_t bit = uint64_t{1} << f->lane;
  wp.exited |= bit;
  if (wp.waiting) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(wp.waiting));
    const Deposit& o = wp.dep[l];
    if (isWaveWide(o.kind)) {
      uint64_t group = wp.live & ~wp.exited;
      if ((wp.waiting & group) == group) complete(nullptr, f->warp, group);
    } else {
      for (uint64_t wl = wp.waiting; wl; wl &= wl - 1) {
        uint32_t w = static_cast<uint32_t>(std::countr_zero(wl));
        if (wp.dep[w].mask & bit)
          misuse(f, [&] {
            return "lane exited while lane " + std::to_string(w) + " waits for it in " + collName(wp.dep[w].kind) +
                   " with member mask " + hex(wp.dep[w].mask);
          });
      }
    }
  }
  barrierOnExit();
  cluster->onExit(*f);
}

namespace {

[[noreturn]] TESSERA_CALLS_JIT_CODE void fiberMain() {
  Fiber* f = tlsFiber;
  Worker* w = f->w;
  try {
    w->L->fn(w->L->args);
  } catch (const std::exception& e) {
    std::string what = e.what();
    w->report(IssueKind::KernelException, f->linear, -1, -1, -1,
              [&] { return w->where(f->linear) + ": the kernel threw: " + what; });
  } catch (...) {
    w->report(IssueKind::KernelException, f->linear, -1, -1, -1,
              [&] { return w->where(f->linear) + ": the kernel threw a non-standard exception"; });
  }
  // The hooks below may have switched fibers; tlsFiber is this fiber again.
  w->onExit(f);
  for (;;) detail::switchContext(f->ctx, w->sched);
}

void validate(ThreadFn fn, const LaunchConfig& cfg) {
  auto bad = [&](const std::string& m) {
    throw LaunchError("emulator launch of kernel '" + cfg.kernelName + "': " + m);
  };
  if (!fn) bad("null kernel function");
  for (int i = 0; i < 3; ++i) {
    if (!cfg.grid[i]) bad("grid dimension " + std::to_string(i) + " is zero");
    if (!cfg.block[i]) bad("block dimension " + std::to_string(i) + " is zero");
  }
  const uint64_t clusterBlocks = uint64_t{cfg.cluster[0]} * cfg.cluster[1] * cfg.cluster[2];
  if (clusterBlocks != 1) {
    const std::string shape = "cluster {" + std::to_string(cfg.cluster[0]) + ", " + std::to_string(cfg.cluster[1]) +
                              ", " + std::to_string(cfg.cluster[2]) + "}";
    if (cfg.vendor != Vendor::NVIDIA) bad(shape + ": thread-block clusters are NVIDIA's (sm_90 on), not AMD's");
    for (int i = 0; i < 3; ++i) {
      if (!cfg.cluster[i]) bad(shape + ": cluster dimension " + std::to_string(i) + " is zero");
      if (cfg.grid[i] % cfg.cluster[i])
        bad(shape + ": grid dimension " + std::to_string(i) + " (" + std::to_string(cfg.grid[i]) +
            " blocks) is not a multiple of the cluster's " + std::to_string(cfg.cluster[i]));
    }
    if (clusterBlocks > maxClusterBlocks())
      bad(shape + " has " + std::to_string(clusterBlocks) + " blocks, over the portable maximum of " +
          std::to_string(maxClusterBlocks()) + " blocks per cluster");
  }
  // The vendor's launch limits, as its driver enforces them: a launch no
  // GPU of that vendor would run does not run here either.
  const bool amd = cfg.vendor == Vendor::AMD;
  const std::string limits =
      rt::launchLimitViolation(rt::launchLimits(amd ? GpuArch::Vendor::AMD : GpuArch::Vendor::NVIDIA), cfg.grid,
                               cfg.block, amd ? "an AMD GPU (HIP)" : "an NVIDIA GPU");
  if (!limits.empty()) bad(limits);
  if (cfg.vendor == Vendor::NVIDIA && cfg.warpSize != 32)
    bad("NVIDIA warps have 32 lanes, not " + std::to_string(cfg.warpSize));
  if (cfg.vendor == Vendor::AMD && cfg.warpSize != 32 && cfg.warpSize != 64)
    bad("AMD waves have 32 or 64 lanes, not " + std::to_string(cfg.warpSize));
  if (cfg.stackBytes < 16 * 1024) bad("fiber stacks need at least 16 KiB");
}

}  // namespace

}  // namespace tessera::emu::detail

namespace tessera::emu {

using detail::Cluster;
using detail::failureMessage;
using detail::Launch;
using detail::mergeReports;
using detail::validate;
using detail::Worker;

LaunchReport launch(ThreadFn fn, void* const* args, const LaunchConfig& cfg) {
  validate(fn, cfg);
  auto t0 = std::chrono::steady_clock::now();
  Launch L;
  L.cfg = &cfg;
  L.fn = fn;
  L.args = args;
  L.W = cfg.warpSize;
  L.nThreads = cfg.block[0] * cfg.block[1] * cfg.block[2];
  L.nWarps = (L.nThreads + L.W - 1) / L.W;
  L.nBlocks = uint64_t{cfg.grid[0]} * cfg.grid[1] * cfg.grid[2];
  L.clusterBlocks = cfg.cluster[0] * cfg.cluster[1] * cfg.cluster[2];
  L.nClusters = L.nBlocks / L.clusterBlocks;
  for (const auto& [p, n] : cfg.globalBuffers) {
    if (!p || !n) continue;
    auto b = reinterpret_cast<uintptr_t>(p);
    L.globals.emplace_back(b, b + n);
  }
  std::sort(L.globals.begin(), L.globals.end());

  // One cluster per host thread, one Worker per block of it.
  unsigned nHosts = cfg.hostThreads ? cfg.hostThreads : std::max(1u, std::thread::hardware_concurrency());
  nHosts = static_cast<unsigned>(std::min<uint64_t>(nHosts, L.nClusters));
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::unique_ptr<Cluster>> clusters;
  for (unsigned i = 0; i < nHosts; ++i) {
    clusters.push_back(std::make_unique<Cluster>());
    Cluster& c = *clusters.back();
    c.L = &L;
    for (uint32_t r = 0; r < L.clusterBlocks; ++r) {
      workers.push_back(std::make_unique<Worker>(&L));
      Worker& w = *workers.back();
      w.index = i;
      w.cluster = &c;
      w.rank = r;
      if (L.clusterBlocks > 1 && cfg.checkRaces) w.remoteShadow.resize(w.sharedBytes);
      c.blocks.push_back(&w);
    }
  }

  std::vector<std::exception_ptr> errors(nHosts);
  auto run = [&](unsigned i) {
    try {
      Cluster& c = *clusters[i];
      for (;;) {
        uint64_t next = L.nextCluster.fetch_add(1, std::memory_order_relaxed);
        if (next >= L.nClusters) break;
        c.start();
        if (L.clusterBlocks == 1)
          c.blocks[0]->runBlock(next);
        else
          c.run(next);
      }
    } catch (...) {
      errors[i] = std::current_exception();
      L.nextCluster.store(L.nClusters);  // stop the others soon
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < nHosts; ++i) threads.emplace_back(run, i);
  run(0);
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  LaunchReport rep = mergeReports(L, workers);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (cfg.throwOnError && rep.hasErrors()) throw EmulatorError(failureMessage(rep, cfg));
  return rep;
}

const std::vector<std::pair<const char*, void*>>& hookSymbols() {
  static const std::vector<std::pair<const char*, void*>> hooks = {
#define TS_EMU_HOOK(name, effects, ret, ...) {"tessera_emu_" #name, reinterpret_cast<void*>(&tessera_emu_##name)},
#include "tessera/support/EmuHooks.def"
  };
  return hooks;
}

}  // namespace tessera::emu

// ---- hooks --------------------------------------------------------------------
using tessera::emu::detail::current;

extern "C" {

int32_t tessera_emu_thread_id_x(void) { return current(__func__)->tid[0]; }
int32_t tessera_emu_thread_id_y(void) { return current(__func__)->tid[1]; }
int32_t tessera_emu_thread_id_z(void) { return current(__func__)->tid[2]; }
int32_t tessera_emu_block_id_x(void) { return static_cast<int32_t>(current(__func__)->w->blockIdx[0]); }
int32_t tessera_emu_block_id_y(void) { return static_cast<int32_t>(current(__func__)->w->blockIdx[1]); }
int32_t tessera_emu_block_id_z(void) { return static_cast<int32_t>(current(__func__)->w->blockIdx[2]); }
int32_t tessera_emu_block_dim_x(void) { return static_cast<int32_t>(current(__func__)->w->cfg->block[0]); }
int32_t tessera_emu_block_dim_y(void) { return static_cast<int32_t>(current(__func__)->w->cfg->block[1]); }
int32_t tessera_emu_block_dim_z(void) { return static_cast<int32_t>(current(__func__)->w->cfg->block[2]); }
int32_t tessera_emu_grid_dim_x(void) { return static_cast<int32_t>(current(__func__)->w->cfg->grid[0]); }
int32_t tessera_emu_grid_dim_y(void) { return static_cast<int32_t>(current(__func__)->w->cfg->grid[1]); }
int32_t tessera_emu_grid_dim_z(void) { return static_cast<int32_t>(current(__func__)->w->cfg->grid[2]); }
int32_t tessera_emu_lane_id(void) { return static_cast<int32_t>(current(__func__)->lane); }
int32_t tessera_emu_warp_size(void) { return static_cast<int32_t>(current(__func__)->w->L->W); }
uint64_t tessera_emu_clock(void) { return current(__func__)->clock; }
int32_t tessera_emu_unit(void) { return static_cast<int32_t>(current(__func__)->w->index); }

// The cluster registers follow from the block index and the shape: a
// cluster is an aligned box of blocks (validate), ranked x fastest.
namespace {
int32_t clusterCta(const char* hook, int d) {
  const tessera::emu::detail::Worker* w = current(hook)->w;
  return static_cast<int32_t>(w->blockIdx[d] % w->cfg->cluster[d]);
}
int32_t clusterDim(const char* hook, int d) { return static_cast<int32_t>(current(hook)->w->cfg->cluster[d]); }
int32_t clusterId(const char* hook, int d) {
  const tessera::emu::detail::Worker* w = current(hook)->w;
  return static_cast<int32_t>(w->blockIdx[d] / w->cfg->cluster[d]);
}
int32_t clusterCount(const char* hook, int d) {
  const tessera::emu::detail::Worker* w = current(hook)->w;
  return static_cast<int32_t>(w->cfg->grid[d] / w->cfg->cluster[d]);
}
}  // namespace

int32_t tessera_emu_cluster_ctarank(void) { return static_cast<int32_t>(current(__func__)->w->rank); }
int32_t tessera_emu_cluster_nctarank(void) { return static_cast<int32_t>(current(__func__)->w->L->clusterBlocks); }
int32_t tessera_emu_cluster_ctaid_x(void) { return clusterCta(__func__, 0); }
int32_t tessera_emu_cluster_ctaid_y(void) { return clusterCta(__func__, 1); }
int32_t tessera_emu_cluster_ctaid_z(void) { return clusterCta(__func__, 2); }
int32_t tessera_emu_cluster_nctaid_x(void) { return clusterDim(__func__, 0); }
int32_t tessera_emu_cluster_nctaid_y(void) { return clusterDim(__func__, 1); }
int32_t tessera_emu_cluster_nctaid_z(void) { return clusterDim(__func__, 2); }
int32_t tessera_emu_cluster_id_x(void) { return clusterId(__func__, 0); }
int32_t tessera_emu_cluster_id_y(void) { return clusterId(__func__, 1); }
int32_t tessera_emu_cluster_id_z(void) { return clusterId(__func__, 2); }
int32_t tessera_emu_cluster_nid_x(void) { return clusterCount(__func__, 0); }
int32_t tessera_emu_cluster_nid_y(void) { return clusterCount(__func__, 1); }
int32_t tessera_emu_cluster_nid_z(void) { return clusterCount(__func__, 2); }
int32_t tessera_emu_cluster_explicit(void) { return current(__func__)->w->L->clusterBlocks > 1; }

}  // extern "C"

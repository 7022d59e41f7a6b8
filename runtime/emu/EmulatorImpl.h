// Private to runtime/emu: the SIMT machine's internal types (fibers, warps,
// the shared-memory shadow, one launch) and the Worker that runs blocks,
// shared by Machine, Barriers, Cluster, Collectives, Memory, AsyncCopy, Tma and
// Reports.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "Fiber.h"
#include "tessera/runtime/Emulator.h"

namespace tessera::emu::detail {

enum class FState : uint8_t {
  Ready,
  Running,
  AtBarrier,
  InCollective,
  AtMbarrier,
  AtClusterBarrier,
  Exited,
  Abandoned
};

enum class Coll : uint8_t {
  Shfl,
  Vote,
  Ballot,
  SyncWarp,
  Ldmatrix,
  Mma,    // NVIDIA: member mask
  Wgmma,  // NVIDIA: the whole warp (each warp of the warpgroup computes its own rows)
  Bpermute,
  Readlane,
  Readfirstlane,
  WaveBallot,
  Mfma,
  Wmma,  // AMD: the live lanes
};
// Matrix instructions need every lane of the warp.
inline bool isMatrix(Coll k) {
  return k == Coll::Ldmatrix || k == Coll::Mma || k == Coll::Wgmma || k == Coll::Mfma || k == Coll::Wmma;
}
// AMD-style collectives involve all live lanes of the wave; NVIDIA-style ones
// the lanes named in a member mask.
inline bool isWaveWide(Coll k) { return k >= Coll::Bpermute; }
const char* collName(Coll k);  // Collectives.cpp

struct Worker;
struct Cluster;

// One cp.async recorded by a thread and not yet performed (see
// tessera_emu_cp_async): shared offset, global source, sizes, its op and
// group (the thread's commit count when it was issued).
struct AsyncCopy {
  uint64_t dstOff;
  const void* src;
  uint32_t bytes, srcBytes;
  int32_t op;
  uint64_t group;
};

// One TMA tile load (tessera_emu_tma_load) not yet performed: the box as
// it will lie in shared memory (already swizzled; a swizzle only permutes
// 16-byte chunks within the box's footprint, so that is [dstOff, dstOff +
// data.size())), read from global memory at the issue; its op and thread.
struct TmaCopy {
  uint64_t dstOff;
  std::vector<unsigned char> data;
  int32_t op;
  uint32_t thread;
};

// One mbarrier of the block, keyed by its shared offset (Worker::mbarriers).
// A phase completes once `pending` arrivals have come and `tx` (bytes
// announced by expect_tx, minus those the copies delivered) is back to 0.
struct Mbarrier {
  uint64_t off = 0;
  int32_t expected = 0, pending = 0;
  int64_t tx = 0;  // signed: more bytes delivered than announced is misuse
  uint64_t phase = 0;
  int32_t initOp = -1;
  std::vector<TmaCopy> copies;    // issued on the current phase, not yet performed
  std::vector<uint32_t> waiters;  // fibers parked in try_wait on the current phase
};

// One of the block's 16 named barriers (bar.sync id[, count]; Barriers.cpp).
// The whole-block barrier is barrier 0 without a count (kWholeBlock): it
// completes once every live thread has arrived, exited threads counting as
// arrived. A counted one completes once `count` threads have arrived; the
// first arrival of a phase fixes its count.
inline constexpr int32_t kNamedBarriers = 16;
inline constexpr int32_t kWholeBlock = 0;
struct NamedBarrier {
  int32_t count = kWholeBlock;    // of the current phase (meaningful while waiters is not empty)
  std::vector<uint32_t> waiters;  // fibers arrived in the current phase, in arrival order
};

struct Fiber {
  Context ctx;
  Worker* w = nullptr;
  uint32_t linear = 0, lane = 0, warp = 0;
  int32_t tid[3] = {0, 0, 0};
  FState state = FState::Ready;
  uint32_t barriers = 0;  // whole-block barriers this thread has passed in this block
  int32_t barrierSite = -1;
  /// The profile clock (tessera_emu_clock): hooks this thread called in
  /// this block -- its memory accesses, synchronisations, matrix
  /// instructions and register reads -- raised to the latest arrival at
  /// each barrier it passes.
  uint64_t clock = 0;
  std::vector<AsyncCopy> asyncCopies;  // issued, not yet performed, in issue order
  uint64_t commits = 0;                // cp.async groups committed so far
  uint64_t wgmmaCommits = 0;           // wgmma groups committed so far
  uint32_t tmaCopies = 0;              // TMA loads issued, not yet performed
  uint64_t mbarOff = 0;                // AtMbarrier: the barrier's shared offset
  int32_t mbarParity = 0;              // AtMbarrier: the parity waited for
  /// barrier.cluster: arrivals made and waits passed in this cluster run
  /// (equal between phases; arrivals one ahead between arrive and wait).
  uint32_t clusterArrives = 0, clusterWaits = 0;
  int32_t clusterSite = -1;  // the latest barrier.cluster op, for reports
};

struct Deposit {
  Coll kind = Coll::Shfl;
  int32_t mode = 0;
  uint64_t mask = 0;
  int32_t value = 0, b = 0, c = 0;
  uint64_t result = 0;
  // Matrix instructions: the lane's fragment registers (on its own fiber
  // stack, which stays put while it waits).
  const void *pa = nullptr, *pb = nullptr, *pc = nullptr;
  void* pd = nullptr;
};

// The B operand of a wgmma as a lane deposits it (Deposit::pb).
struct WgmmaOperand {
  uint64_t desc;
  int32_t op;
};
// 16 shared bytes a wgmma of a warp read, in flight until every lane of the
// warp has passed a wait that retires `group` (the issuing lanes' wgmma
// commit count at the issue); `waited`: the lanes that have.
struct WgmmaRead {
  uint32_t off;
  int32_t op;
  uint64_t group;
  uint64_t waited;
};

struct Warp {
  std::vector<WgmmaRead> wgmmaReads;  // not yet retired (see tessera_emu_wgmma_wait)
  uint64_t live = 0;                  // lanes that exist (the last warp may be partial)
  uint64_t exited = 0;
  uint64_t waiting = 0;  // lanes parked in a collective
  Deposit dep[64];
};

// Race-checker state of one shared byte. Epochs are per worker and never
// reused (bumped at every block start and barrier), so the shadow needs no
// clearing between blocks.
struct Shadow {
  uint32_t wEpoch = 0, rEpoch = 0;
  uint16_t writer = 0, reader1 = 0, reader2 = 0;
  uint8_t wAtomic = 0;  // atomics are recorded as writes only
  int32_t wOp = -1, rOp1 = -1, rOp2 = -1;
  // cp.async / TMA copies into this byte issued and not yet performed
  // (they may write it at any moment), and the thread and op of the latest
  // one, and whether that one is a TMA load (for the report's wording).
  uint16_t inFlight = 0, aThread = 0;
  int32_t aOp = -1;
  uint8_t aTma = 0;
  // wgmma operand reads of this byte not yet retired by a wgmma.wait_group
  // (writing it meanwhile changes what the MMA may read), and the thread
  // and op of the latest one.
  uint16_t mmaReads = 0, mThread = 0;
  int32_t mOp = -1;
};
constexpr uint16_t kNoThread = 0xFFFF;

// Cluster race checking (Cluster.cpp): one access of a shared byte as the
// cross-block check sees it. Kept only in launches with clusters of more
// than one block, beside Shadow, for every ld/st/atomic of the byte by any
// block of the cluster. `gen` is the cluster run (Cluster::generation), so
// the records need no clearing; `arrives` the accessing thread's
// barrier.cluster arrivals before the access (a later access is ordered
// after it once its thread has passed more cluster waits than that);
// `epoch` its block's epoch (two accesses by one other block are ordered
// by that block's barriers).
struct RemoteAccess {
  uint32_t gen = 0, arrives = 0, epoch = 0;
  uint16_t thread = 0;
  uint8_t rank = 0, atomic = 0;
  int32_t op = -1;
};
struct RemoteShadow {
  RemoteAccess write, read;  // the latest of each
};

struct Access {  // one lane's shared access, for the bank-conflict model
  int32_t op;
  uint32_t occ;
  uint32_t lane;
  uint32_t off;
  uint32_t bytes;
};

struct OpStat {
  uint64_t warpAccesses = 0, wavefronts = 0, conflicts = 0;
};

struct Launch {
  const LaunchConfig* cfg = nullptr;
  ThreadFn fn = nullptr;
  void* const* args = nullptr;
  uint32_t nThreads = 0, nWarps = 0, W = 32;
  uint64_t nBlocks = 0;
  uint32_t clusterBlocks = 1;                            // blocks per cluster
  uint64_t nClusters = 0;                                // nBlocks / clusterBlocks
  std::vector<std::pair<uintptr_t, uintptr_t>> globals;  // [begin, end), sorted
  std::atomic<uint64_t> nextCluster{0};                  // the next cluster (block) a host thread takes,
                                                         // or a cancellation request cancels
};

// The fiber running on this host thread (defined in Machine.cpp).
extern __attribute__((tls_model("initial-exec"))) constinit thread_local Fiber* tlsFiber;

// Names for reports (Reports.cpp).
std::string opLabel(const LaunchConfig& cfg, int32_t op);
const char* accessName(int32_t kind);
/// A shared read by an asynchronous unit on a thread's behalf (tcgen05.mma
/// and tcgen05.cp operands): checked against writes as a read is, but not
/// recorded as the thread's, so a later write by another thread is no race
/// once the unit's completion (its commit's mbarrier phase) orders it;
/// while in flight its bytes are marked apart (markMmaRead).
inline constexpr int32_t kAsyncLoad = 3;

// The SIMT machine: blocks on host threads, GPU threads as fibers, hooks.
//
// A Worker runs one block at a time. Each host thread takes clusters from a
// shared counter (a block, when clusters have one block) and owns one
// Worker per block of a cluster (Cluster). A block's threads are fibers
// scheduled cooperatively by the worker: a fiber runs until it waits at a
// barrier or in a warp collective, or exits; the scheduler then resumes the
// next ready fiber. Everything about one block (fibers, warps, shared memory
// and its shadow) lives in its Worker, and everything about a cluster in
// its Cluster, touched by one host thread only, so the hooks take no locks.
struct Worker {
  Launch* L = nullptr;
  const LaunchConfig* cfg = nullptr;
  Context sched;
  std::vector<Fiber> fibers;
  std::vector<detail::Stack> stacks;
  std::vector<Warp> warps;
  std::vector<uint32_t> queue;              // ring of ready fibers; each is in it at most once
  size_t qHead = 0, qCount = 0, qMask = 0;  // capacity: a power of two
  uint32_t blockIdx[3] = {0, 0, 0};
  uint32_t exited = 0;
  uint32_t index = 0;                                      // among the launch's workers (tessera_emu_unit)
  std::array<NamedBarrier, kNamedBarriers> namedBarriers;  // [0]: also the whole-block barrier
  bool aborted = false;
  uint32_t epoch = 0;
  Cluster* cluster = nullptr;  // the host thread's, this block's rank in it:
  uint32_t rank = 0;           // x fastest, as %cluster_ctarank

  std::unique_ptr<unsigned char[]> sharedStore;
  unsigned char* shared = nullptr;
  size_t sharedBytes = 0;
  std::vector<Shadow> shadow;
  std::vector<unsigned char> scratch;
  std::map<uint64_t, Mbarrier> mbarriers;  // this block's, by shared offset
  std::vector<Shadow> savedShadow;         // Tma.cpp: race check without recording
  std::vector<RemoteShadow> remoteShadow;  // clusters of several blocks (Cluster.cpp)

  std::vector<uint32_t> occ;  // [op * nThreads + thread]: dynamic instance counters
  size_t occOps = 0;
  std::vector<std::vector<Access>> warpAccesses;
  std::map<int32_t, OpStat> opStats;

  size_t globalHint = 0;
  uint64_t switches = 0, blocksRun = 0;
  std::array<uint64_t, kIssueKinds> counts{};
  std::vector<Issue> issues;
  std::set<std::tuple<int, int32_t, int32_t>> seen;

  explicit Worker(Launch* l);
  ~Worker();

  // ---- reports (Reports.cpp; report() below) --------------------------------
  void coords(uint32_t linear, uint32_t out[3]) const;
  std::string where(uint32_t linear) const;
  std::string threadName(uint32_t linear) const;
  template <class MakeMessage>
  void report(IssueKind k, uint32_t thread, int64_t other, int32_t op, int32_t otherOp, MakeMessage&& make);
  void reportDeadlock();
  /// What the block's threads wait for (the deadlock report's body);
  /// `first`: the first thread that has not exited.
  std::string waitState(uint32_t& first) const;
  static std::string hex(uint64_t v);

  // ---- scheduling (Machine.cpp) ---------------------------------------------
  void push(uint32_t i) {
    fibers[i].state = FState::Ready;
    queue[(qHead + qCount) & qMask] = i;
    ++qCount;
  }
  uint32_t pop() {
    uint32_t i = queue[qHead];
    qHead = (qHead + 1) & qMask;
    --qCount;
    return i;
  }

  void yield(Fiber* f) { detail::switchContext(f->ctx, sched); }
  [[noreturn]] void abortBlock(Fiber* f);
  /// A block's run: startBlock, runReady until no fiber is ready (once, or
  /// round-robin with the cluster's other blocks), finishBlock.
  void runBlock(uint64_t b);
  void startBlock(uint64_t b);
  void runReady();
  void finishBlock();
  void onExit(Fiber* f);

  // ---- barriers (Barriers.cpp) ----------------------------------------------
  /// Completes the phase of barrier `id`: every waiter passes it. `self`
  /// is the arriving fiber that continues without yielding, or null.
  void releaseBarrier(int32_t id, Fiber* self);
  void barrier(Fiber* f, int32_t site);
  void barrierCount(Fiber* f, int32_t site, int32_t id, int32_t count);
  /// A thread exited: the whole-block barrier may now be complete.
  void barrierOnExit();
  /// Deadlock report: each barrier with waiters, its count and arrivals.
  std::string barrierWaits() const;

  // ---- warp collectives (Collectives.cpp; misuse() below) -------------------
  template <class What>
  [[noreturn]] void misuse(Fiber* f, const What& what);
  /// Misuse of an op's instruction (an mbarrier, a TMA copy, tensor
  /// memory): reported as `k` naming the op, and the block is aborted.
  template <class What>
  [[noreturn]] void opMisuse(IssueKind k, Fiber* f, int32_t op, const What& what);
  uint64_t collective(Fiber* f, Coll kind, int32_t mode, uint64_t mask, int32_t value, int32_t b, int32_t c);
  void complete(Fiber* self, uint32_t warpIdx, uint64_t group);
  void wake(Fiber* self, uint32_t warpIdx, uint64_t group);
  void completeMatrix(Fiber* self, uint32_t warpIdx, uint64_t group, Coll kind);
  void completeWgmma(Fiber* blame, uint32_t warpIdx, int32_t mode);
  /// wgmma.wait_group `pending` by `f`: retires its warp's wgmma reads of
  /// every committed group but the newest `pending`.
  void wgmmaWait(Fiber* f, int32_t pending);
  /// Counts 16 bytes a wgmma reads in (+1) or out (-1) of flight.
  void markMmaRead(uint32_t off, int32_t op, uint16_t thread, int delta);
  void matrix(Fiber* f, Coll kind, int32_t mode, const void* a, const void* b, const void* c, void* d);

  // ---- memory (Memory.cpp) --------------------------------------------------
  void* scratchFor(uint64_t bytes);
  void* sharedAccess(Fiber* f, void* addr, uint64_t bytes, int32_t kind, int32_t op);
  void checkRace(Fiber* f, uint64_t off, uint64_t bytes, int32_t kind, int32_t op);
  void* globalAccess(Fiber* f, void* addr, uint64_t bytes, int32_t kind, int32_t op);
  void accountBanks();

  // ---- distributed shared memory (Cluster.cpp) ------------------------------
  /// ld/st/atomic through a shared::cluster address by `f`, a thread of
  /// this block: checked against the block that holds it.
  void* clusterAccess(Fiber* f, void* addr, uint64_t bytes, int32_t kind, int32_t op);
  /// The cross-block race check of an access by `f` (of any block of the
  /// cluster) to [off, off + bytes) of this block's shared memory.
  void checkRemote(Fiber* f, uint64_t off, uint64_t bytes, int32_t kind, int32_t op);

  // ---- cp.async (AsyncCopy.cpp) ---------------------------------------------
  void markInFlight(const AsyncCopy& c, int delta);
  void cpAsync(Fiber* f, void* dst, const void* src, int32_t bytes, int32_t srcBytes, int32_t op);
  void cpAsyncWait(Fiber* f, int32_t pending);

  // ---- mbarrier and TMA (Tma.cpp) -------------------------------------------
  Mbarrier& mbarrier(Fiber* f, void* bar, const char* inst, int32_t op, bool init = false);
  void mbarrierInit(Fiber* f, void* bar, int32_t count, int32_t op);
  void mbarrierExpectTx(Fiber* f, void* bar, int32_t bytes, int32_t op);
  void mbarrierArrive(Fiber* f, void* bar, int32_t op);
  int32_t mbarrierTryWait(Fiber* f, void* bar, int32_t parity, int32_t op);
  void tmaLoad(Fiber* f, void* dst, const void* map, int32_t rank, const int32_t c[3], void* bar, int32_t op);
  void tmaStore(Fiber* f, const void* src, const void* map, const int32_t c[2], int32_t op);
  /// `data` written to shared `off` by the asynchronous proxy when `b`'s
  /// phase completes (a TMA load's box, a cancellation's response).
  void asyncWrite(Fiber* f, Mbarrier& b, uint64_t off, std::vector<unsigned char> data, int32_t op);
  void clcTryCancel(Fiber* f, void* response, void* bar, int32_t op);
  bool clcFailed = false;        // a cancellation request of this block failed
  uint64_t blocksCancelled = 0;  // clusters this worker's requests cancelled
  TensorMap checkedTensorMap(Fiber* f, const void* mapPtr, int32_t rank, int32_t op);
  void completePhase(Fiber* f, Mbarrier& b);
  /// Block start: drops the previous block's barriers and their copies.
  void resetMbarriers();
  /// A thread exits: its TMA loads not yet performed are misuse.
  void tmaOnExit(Fiber* f);
  /// Deadlock report: what each barrier with parked threads still lacks.
  std::string mbarrierWaits() const;

  // ---- tensor memory and tcgen05 (Tcgen05.cpp) ------------------------------
  std::vector<uint32_t> tmem;  // 128 lanes x 512 columns, made at the first allocation
  uint32_t tmemUsed = 0;       // allocated 32-column granules (bit i: columns 32i .. 32i + 31)
  int32_t tmemAllocOp = -1;    // the latest allocation, for the leak report
  /// The bytes the block's tcgen05.mma read since the last commit (in
  /// flight: a write of them meanwhile is a race).
  std::vector<std::pair<uint32_t, int32_t>> tcgen05Reads;
  void tcgen05Alloc(Fiber* f, void* dst, int32_t columns, int32_t op);
  void tcgen05Dealloc(Fiber* f, uint32_t addr, int32_t columns, int32_t op);
  void tcgen05Mma(Fiber* f, uint32_t d, uint64_t aDesc, uint64_t bDesc, uint32_t idesc, bool accumulate, int32_t kind,
                  int32_t op);
  /// The block-scaled kinds (tcgen05::ScaledKind), scales at `sfa` / `sfb`.
  void tcgen05MmaScaled(Fiber* f, uint32_t d, uint64_t aDesc, uint64_t bDesc, uint32_t idesc, bool accumulate,
                        uint32_t sfa, uint32_t sfb, int32_t kind, int32_t op);
  struct Tcgen05Mma;
  void tcgen05Compute(Fiber* f, const Tcgen05Mma& mma, uint64_t aDesc, uint64_t bDesc, int32_t op);
  /// tcgen05.cp .32x128b.warpx4 from the shared matrix `sdesc` names to `taddr`.
  void tcgen05Cp(Fiber* f, uint32_t taddr, uint64_t sdesc, int32_t op);
  void tcgen05Commit(Fiber* f, void* bar, int32_t op);
  /// tcgen05.ld (store false) / st .16x256b.x`reps`.
  void tcgen05Move(Fiber* f, uint32_t addr, int32_t reps, uint32_t* regs, bool store, int32_t op);
  /// Block end: memory still allocated is reported; all of it is freed.
  void tcgen05BlockEnd();
};

// One host thread's cluster: the Workers of its blocks (by rank) and the
// cluster barrier (Cluster.cpp). A launch without clusters gives each host
// thread a cluster of one block, whose barrier.cluster is a block barrier.
struct Cluster {
  Launch* L = nullptr;
  std::vector<Worker*> blocks;  // by rank
  uint32_t generation = 0;      // bumped at every cluster run (RemoteAccess::gen)
  uint32_t phase = 0;           // barrier.cluster phases completed in this run
  uint32_t pending = 0;         // threads neither arrived in the current phase nor exited
  std::vector<Fiber*> waiters;  // threads parked in barrier.cluster.wait

  /// A new run: the barrier starts at phase 0 with every thread pending.
  void start();
  /// Runs cluster `c` (of several blocks) to completion.
  void run(uint64_t c);
  /// The block whose shared memory holds `addr`, or null.
  Worker* holder(uintptr_t addr) const;
  void arrive(Fiber* f, int32_t site, bool relaxed);
  void wait(Fiber* f, int32_t site);
  /// A thread exited: it counts as arrived in this and every later phase.
  void onExit(const Fiber& f) {
    if (f.clusterArrives == phase && --pending == 0) completePhase();
  }
  /// Every waiter passes; the next phase waits for every live thread.
  void completePhase();
  /// Deadlock report: the barrier's arrivals, if threads wait at it.
  std::string barrierWaits() const;
  void reportDeadlock();
};

/// Counts every issue; keeps a message only for the first of each distinct
/// (kind, op, other op), so a racy loop does not format a million strings.
template <class MakeMessage>
void Worker::report(IssueKind k, uint32_t thread, int64_t other, int32_t op, int32_t otherOp, MakeMessage&& make) {
  ++counts[static_cast<size_t>(k)];
  if (issues.size() >= cfg->maxReports) return;
  if (!seen.emplace(static_cast<int>(k), op, otherOp).second) return;
  Issue is;
  is.kind = k;
  std::copy(blockIdx, blockIdx + 3, is.block);
  coords(thread, is.thread);
  if (other >= 0) {
    is.hasOther = true;
    coords(static_cast<uint32_t>(other), is.otherThread);
  }
  is.opId = op;
  is.otherOpId = otherOp;
  is.message = std::string(name(k)) + " in " + make();
  issues.push_back(std::move(is));
}

/// `what` is a callable returning the message: the fiber is abandoned,
/// never unwound, so no frame on its stack may own memory when it stops.
/// The message is built and consumed inside report(), before abortBlock.
template <class What>
[[noreturn]] void Worker::misuse(Fiber* f, const What& what) {
  report(IssueKind::CollectiveMisuse, f->linear, -1, -1, -1, [&] {
    return where(f->linear) + " (warp " + std::to_string(f->warp) + " lane " + std::to_string(f->lane) + "): " + what();
  });
  abortBlock(tlsFiber);  // the running fiber, whichever lane is blamed
}

/// `what` builds the message inside report(), since the fiber is never
/// unwound (as misuse).
template <class What>
[[noreturn]] void Worker::opMisuse(IssueKind k, Fiber* f, int32_t op, const What& what) {
  report(k, f->linear, -1, op, -1, [&] { return where(f->linear) + ": " + what() + " [" + opLabel(*cfg, op) + "]"; });
  abortBlock(tlsFiber);
}

// The fiber of the running hook, which must be inside a kernel run by launch.
inline Fiber* current(const char* hook) {
  Fiber* f = tlsFiber;
  if (!f) throw EmulatorError(std::string(hook) + " called outside a kernel run by tessera::emu::launch");
  ++f->clock;
  return f;
}

// The launch's report from its workers' counts, issues and bank statistics,
// and the message of the EmulatorError a failed launch throws (Reports.cpp).
LaunchReport mergeReports(const Launch& L, std::vector<std::unique_ptr<Worker>>& workers);
/// The largest cluster of blocks an NVIDIA GPU launches (Targets.def).
uint32_t maxClusterBlocks();
std::string failureMessage(const LaunchReport& rep, const LaunchConfig& cfg);

}  // namespace tessera::emu::detail

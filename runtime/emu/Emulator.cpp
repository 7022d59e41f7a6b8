// The SIMT machine: blocks on host threads, GPU threads as fibers, hooks.
//
// One Worker per host thread takes blocks from a shared counter. A block's
// threads are fibers scheduled cooperatively by the worker: a fiber runs
// until it waits at a barrier or in a warp collective, or exits; the
// scheduler then resumes the next ready fiber. Everything about one block
// (fibers, warps, shared memory and its shadow) lives in its Worker and is
// touched by one host thread only, so the hooks take no locks.
#include "tessera/runtime/Emulator.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "Fiber.h"
#include "Matrix.h"

namespace tessera::emu {

const char* name(IssueKind k) {
  switch (k) {
    case IssueKind::SharedRace: return "shared-memory race";
    case IssueKind::SharedOutOfBounds: return "out-of-bounds shared access";
    case IssueKind::GlobalOutOfBounds: return "out-of-bounds global access";
    case IssueKind::DivergentBarrier: return "divergent barrier";
    case IssueKind::Deadlock: return "deadlock";
    case IssueKind::CollectiveMisuse: return "warp collective misuse";
    case IssueKind::KernelException: return "kernel exception";
    case IssueKind::AsyncCopyMisuse: return "asynchronous copy misuse";
  }
  return "?";
}

bool LaunchReport::hasErrors() const {
  for (uint64_t c : counts)
    if (c) return true;
  return false;
}

const BankConflictStat* LaunchReport::conflictsOf(int32_t opId) const {
  for (const auto& s : bankConflicts)
    if (s.opId == opId) return &s;
  return nullptr;
}

std::string LaunchReport::summary() const {
  std::ostringstream os;
  os << blocks << " blocks, " << threads << " threads, " << fiberSwitches << " fiber switches, "
     << totalBankConflicts << " bank conflicts";
  for (size_t k = 0; k < kIssueKinds; ++k)
    if (counts[k]) os << ", " << counts[k] << " x " << name(static_cast<IssueKind>(k));
  return os.str();
}

namespace {

using detail::Context;

enum class FState : uint8_t { Ready, Running, AtBarrier, InCollective, Exited, Abandoned };

enum class Coll : uint8_t {
  Shfl, Vote, Ballot, SyncWarp, Ldmatrix, Mma,                // NVIDIA: member mask
  Bpermute, Readlane, Readfirstlane, WaveBallot, Mfma, Wmma,  // AMD: the live lanes
};
// Matrix instructions need every lane of the warp.
bool isMatrix(Coll k) { return k == Coll::Ldmatrix || k == Coll::Mma || k == Coll::Mfma || k == Coll::Wmma; }
// AMD-style collectives involve all live lanes of the wave; NVIDIA-style ones
// the lanes named in a member mask.
bool isWaveWide(Coll k) { return k >= Coll::Bpermute; }
const char* collName(Coll k) {
  switch (k) {
    case Coll::Shfl: return "shfl.sync";
    case Coll::Vote: return "vote.sync";
    case Coll::Ballot: return "vote.sync.ballot";
    case Coll::SyncWarp: return "bar.warp.sync";
    case Coll::Bpermute: return "ds_bpermute";
    case Coll::Readlane: return "readlane";
    case Coll::Readfirstlane: return "readfirstlane";
    case Coll::WaveBallot: return "wave ballot";
    case Coll::Ldmatrix: return "ldmatrix";
    case Coll::Mma: return "mma.sync";
    case Coll::Mfma: return "mfma";
    case Coll::Wmma: return "wmma";
  }
  return "?";
}

struct Worker;

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

struct Fiber {
  Context ctx;
  Worker* w = nullptr;
  uint32_t linear = 0, lane = 0, warp = 0;
  int32_t tid[3] = {0, 0, 0};
  FState state = FState::Ready;
  uint32_t barriers = 0;  // barriers this thread has passed in this block
  int32_t barrierSite = -1;
  std::vector<AsyncCopy> asyncCopies;  // issued, not yet performed, in issue order
  uint64_t commits = 0;                // cp.async groups committed so far
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

struct Warp {
  uint64_t live = 0;     // lanes that exist (the last warp may be partial)
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
  // cp.async copies into this byte issued and not yet performed (they may
  // write it at any moment), and the thread and op of the latest one.
  uint16_t inFlight = 0, aThread = 0;
  int32_t aOp = -1;
};
constexpr uint16_t kNoThread = 0xFFFF;

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
  std::vector<std::pair<uintptr_t, uintptr_t>> globals;  // [begin, end), sorted
  std::atomic<uint64_t> nextBlock{0};
};

__attribute__((tls_model("initial-exec"))) thread_local Fiber* tlsFiber = nullptr;

[[noreturn]] void fiberMain();

std::string opLabel(const LaunchConfig& cfg, int32_t op) {
  if (op >= 0 && static_cast<size_t>(op) < cfg.opNames.size())
    return "op #" + std::to_string(op) + " '" + cfg.opNames[op] + "'";
  return "op#" + std::to_string(op);
}

const char* accessName(int32_t kind) {
  return kind == TESSERA_EMU_STORE ? "write" : kind == TESSERA_EMU_ATOMIC ? "atomic" : "read";
}

struct Worker {
  Launch* L = nullptr;
  const LaunchConfig* cfg = nullptr;
  Context sched;
  std::vector<Fiber> fibers;
  std::vector<detail::Stack> stacks;
  std::vector<Warp> warps;
  std::vector<uint32_t> queue;  // ring of ready fibers; each is in it at most once
  size_t qHead = 0, qCount = 0, qMask = 0;  // capacity: a power of two
  uint32_t blockIdx[3] = {0, 0, 0};
  uint32_t exited = 0, arrived = 0;
  std::vector<uint32_t> barrierWaiters;
  bool aborted = false;
  uint32_t epoch = 0;

  std::unique_ptr<unsigned char[]> sharedStore;
  unsigned char* shared = nullptr;
  size_t sharedBytes = 0;
  std::vector<Shadow> shadow;
  std::vector<unsigned char> scratch;

  std::vector<uint32_t> occ;  // [op * nThreads + thread]: dynamic instance counters
  size_t occOps = 0;
  std::vector<std::vector<Access>> warpAccesses;
  std::map<int32_t, OpStat> opStats;

  size_t globalHint = 0;
  uint64_t switches = 0, blocksRun = 0;
  std::array<uint64_t, kIssueKinds> counts{};
  std::vector<Issue> issues;
  std::set<std::tuple<int, int32_t, int32_t>> seen;

  explicit Worker(Launch* l) : L(l), cfg(l->cfg) {
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
    barrierWaiters.reserve(n);
    sharedBytes = cfg->sharedBytes;
    // 256-byte alignment: the compiler may assume aligned shared layouts.
    sharedStore.reset(new unsigned char[sharedBytes + 256]);
    shared = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(sharedStore.get()) + 255) &
                                              ~uintptr_t{255});
    if (cfg->checkRaces) shadow.resize(sharedBytes);
    scratch.resize(4096);
    if (cfg->countBankConflicts) {
      occOps = std::max<size_t>(cfg->opNames.size(), 1);
      occ.assign(occOps * n, 0);
      warpAccesses.resize(L->nWarps);
    }
  }
  ~Worker() { detail::releaseStacks(stacks); }

  // ---- reports --------------------------------------------------------------
  void coords(uint32_t linear, uint32_t out[3]) const {
    out[0] = linear % cfg->block[0];
    out[1] = linear / cfg->block[0] % cfg->block[1];
    out[2] = linear / (cfg->block[0] * cfg->block[1]);
  }
  std::string where(uint32_t linear) const {
    uint32_t t[3];
    coords(linear, t);
    std::ostringstream os;
    os << "kernel '" << cfg->kernelName << "' block (" << blockIdx[0] << "," << blockIdx[1] << ","
       << blockIdx[2] << ") thread (" << t[0] << "," << t[1] << "," << t[2] << ")";
    return os.str();
  }
  std::string threadName(uint32_t linear) const {
    uint32_t t[3];
    coords(linear, t);
    return "thread (" + std::to_string(t[0]) + "," + std::to_string(t[1]) + "," + std::to_string(t[2]) + ")";
  }

  /// Counts every issue; keeps a message only for the first of each distinct
  /// (kind, op, other op), so a racy loop does not format a million strings.
  template <class MakeMessage>
  void report(IssueKind k, uint32_t thread, int64_t other, int32_t op, int32_t otherOp, MakeMessage&& make) {
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

  // ---- scheduling -------------------------------------------------------------
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

  /// Stops the block for good: its remaining fibers are never resumed (their
  /// stacks are reused by the next block). Called from a fiber.
  [[noreturn]] void abortBlock(Fiber* f) {
    aborted = true;
    f->state = FState::Abandoned;
    for (;;) detail::switchContext(f->ctx, sched);
  }

  void runBlock(uint64_t b) {
    const uint32_t n = L->nThreads;
    blockIdx[0] = static_cast<uint32_t>(b % cfg->grid[0]);
    blockIdx[1] = static_cast<uint32_t>(b / cfg->grid[0] % cfg->grid[1]);
    blockIdx[2] = static_cast<uint32_t>(b / (uint64_t{cfg->grid[0]} * cfg->grid[1]));
    // GPUs do not clear shared memory: poison it so uninitialised reads show.
    if (sharedBytes) std::memset(shared, 0xCD, sharedBytes);
    ++epoch;
    for (uint32_t wi = 0; wi < L->nWarps; ++wi) {
      Warp& wp = warps[wi];
      uint32_t lanes = std::min(L->W, n - wi * L->W);
      wp.live = lanes >= 64 ? ~uint64_t{0} : (uint64_t{1} << lanes) - 1;
      wp.exited = wp.waiting = 0;
    }
    if (cfg->countBankConflicts) {
      std::fill(occ.begin(), occ.end(), 0);
      for (auto& v : warpAccesses) v.clear();
    }
    qHead = qCount = 0;
    for (uint32_t i = 0; i < n; ++i) {
      Fiber& f = fibers[i];
      f.barriers = 0;
      f.barrierSite = -1;
      // An aborted block may leave copies behind: drop them and their marks.
      for (const AsyncCopy& c : f.asyncCopies) markInFlight(c, -1);
      f.asyncCopies.clear();
      f.commits = 0;
      // Stack colouring: stacks are page-aligned, so without an offset every
      // fiber's hot top frames would fall into the same cache sets.
      detail::makeContext(f.ctx, stacks[i].low, stacks[i].bytes - (i % 64) * 64, &fiberMain);
      push(i);
    }
    exited = arrived = 0;
    barrierWaiters.clear();
    aborted = false;

    while (!aborted) {
      if (qCount == 0) {
        if (exited != n) reportDeadlock();
        break;
      }
      Fiber& f = fibers[pop()];
      f.state = FState::Running;
      tlsFiber = &f;
      ++switches;
      detail::switchContext(sched, f.ctx);
    }
    tlsFiber = nullptr;
    ++blocksRun;
    if (cfg->countBankConflicts) accountBanks();
  }

  void reportDeadlock() {
    uint32_t atBarrier = 0, inColl = 0, first = L->nThreads;
    std::ostringstream detail;
    for (const Fiber& f : fibers) {
      if (f.state == FState::AtBarrier) ++atBarrier;
      if (f.state == FState::InCollective) ++inColl;
      if (f.state != FState::Exited && first == L->nThreads) first = f.linear;
    }
    for (uint32_t wi = 0; wi < L->nWarps; ++wi) {
      const Warp& wp = warps[wi];
      if (!wp.waiting) continue;
      uint32_t l = static_cast<uint32_t>(std::countr_zero(wp.waiting));
      char mask[40];
      std::snprintf(mask, sizeof mask, "0x%llx", static_cast<unsigned long long>(wp.dep[l].mask));
      detail << "; warp " << wi << " lanes 0x" << std::hex << wp.waiting << std::dec << " wait in "
             << collName(wp.dep[l].kind)
             << (isWaveWide(wp.dep[l].kind) ? std::string(" (whole wave)") : std::string(" with mask ") + mask);
    }
    report(IssueKind::Deadlock, first, -1, -1, -1, [&] {
      return where(first) + ": no thread can proceed: " + std::to_string(atBarrier) +
             " threads wait at a barrier, " + std::to_string(inColl) + " in warp collectives, " +
             std::to_string(exited) + " exited" + detail.str();
    });
  }

  // ---- barriers ---------------------------------------------------------------
  /// All live threads have arrived (exited ones count as arrived). `self` is
  /// the arriving fiber that continues without yielding, or null.
  void releaseBarrier(Fiber* self) {
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

  void barrier(Fiber* f, int32_t site) {
    f->state = FState::AtBarrier;
    f->barrierSite = site;
    barrierWaiters.push_back(f->linear);
    ++arrived;
    if (arrived + exited == L->nThreads)
      releaseBarrier(f);
    else
      yield(f);
  }

  // ---- warp collectives -------------------------------------------------------
  /// `what` is a callable returning the message: the fiber is abandoned,
  /// never unwound, so no frame on its stack may own memory when it stops.
  /// The message is built and consumed inside report(), before abortBlock.
  template <class What>
  [[noreturn]] void misuse(Fiber* f, const What& what) {
    report(IssueKind::CollectiveMisuse, f->linear, -1, -1, -1,
           [&] { return where(f->linear) + " (warp " + std::to_string(f->warp) + " lane " +
                        std::to_string(f->lane) + "): " + what(); });
    abortBlock(tlsFiber);  // the running fiber, whichever lane is blamed
  }

  static std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
  }

  uint64_t collective(Fiber* f, Coll kind, int32_t mode, uint64_t mask, int32_t value, int32_t b, int32_t c) {
    Warp& wp = warps[f->warp];
    const uint64_t bit = uint64_t{1} << f->lane;
    if (isWaveWide(kind)) {
      mask = 0;  // the group is decided at completion: the live lanes then
    } else {
      if (L->W < 64) mask &= (uint64_t{1} << L->W) - 1;
      if (!(mask & bit))
        misuse(f, [&] { return std::string(collName(kind)) + " with member mask " + hex(mask) +
                      " that does not name the executing lane"; });
      mask &= wp.live;  // lanes past the end of a partial warp never exist
      if (mask & wp.exited)
        misuse(f, [&] { return std::string(collName(kind)) + " with member mask " + hex(mask) + " names exited lanes " +
                      hex(mask & wp.exited); });
    }
    // Lanes already waiting must be in the same collective, or in a disjoint one.
    for (uint64_t wl = wp.waiting; wl; wl &= wl - 1) {
      uint32_t l = static_cast<uint32_t>(std::countr_zero(wl));
      const Deposit& o = wp.dep[l];
      bool overlaps = isWaveWide(kind) || isWaveWide(o.kind) || (o.mask & bit) || (mask & (uint64_t{1} << l));
      if (!overlaps) continue;
      if (o.kind != kind || o.mask != mask || o.mode != mode)
        misuse(f, [&] { return std::string(collName(kind)) + " (mode " + std::to_string(mode) + ", mask " + hex(mask) +
                      ") while lane " + std::to_string(l) + " waits in " + collName(o.kind) + " (mode " +
                      std::to_string(o.mode) + ", mask " + hex(o.mask) +
                      "): lanes of one collective must execute the same instruction with the same mask"; });
    }
    Deposit& d = wp.dep[f->lane];
    d.kind = kind;
    d.mode = mode;
    d.mask = mask;
    d.value = value;
    d.b = b;
    d.c = c;
    wp.waiting |= bit;
    f->state = FState::InCollective;
    uint64_t group = isWaveWide(kind) ? (wp.live & ~wp.exited) : mask;
    if ((wp.waiting & group) == group)
      complete(f, f->warp, group);
    else
      yield(f);
    return d.result;
  }

  /// Every lane of `group` has deposited: compute all results and wake them.
  void complete(Fiber* self, uint32_t warpIdx, uint64_t group) {
    Warp& wp = warps[warpIdx];
    const uint32_t W = L->W;
    const uint32_t first = static_cast<uint32_t>(std::countr_zero(group));
    const Coll kind = wp.dep[first].kind;
    if (isMatrix(kind)) return completeMatrix(self, warpIdx, group, kind);
    uint64_t votes = 0;
    for (uint64_t g = group; g; g &= g - 1) {
      uint32_t l = static_cast<uint32_t>(std::countr_zero(g));
      if (wp.dep[l].value) votes |= uint64_t{1} << l;
    }
    for (uint64_t g = group; g; g &= g - 1) {
      uint32_t l = static_cast<uint32_t>(std::countr_zero(g));
      Deposit& d = wp.dep[l];
      switch (kind) {
        case Coll::Shfl: {
          // PTX ISA, shfl.sync: c packs the clamp value (c[4:0]) and the
          // segment mask (c[12:8]); lanes outside [minLane, maxLane] read
          // their own value and get p = false.
          const int32_t lm = static_cast<int32_t>(W - 1);
          const int32_t lane = static_cast<int32_t>(l);
          const int32_t bval = d.b & lm, cval = d.c & lm, seg = (d.c >> 8) & lm;
          const int32_t maxLane = (lane & seg) | (cval & ~seg);
          const int32_t minLane = lane & seg;
          int32_t j = lane;
          bool p = false;
          switch (d.mode) {
            case TESSERA_EMU_SHFL_UP: j = lane - bval; p = j >= maxLane; break;
            case TESSERA_EMU_SHFL_DOWN: j = lane + bval; p = j <= maxLane; break;
            case TESSERA_EMU_SHFL_BFLY: j = lane ^ bval; p = j <= maxLane; break;
            case TESSERA_EMU_SHFL_IDX: j = minLane | (bval & ~seg); p = j <= maxLane; break;
            default: break;  // rejected at the hook
          }
          if (!p) j = lane;
          if (!(group >> j & 1)) {
            misuse(&fibers[warpIdx * W + l], [&] { return "shfl.sync: lane " + std::to_string(l) + " reads lane " + std::to_string(j) +
                                           ", which is not in the member mask " + hex(group) +
                                           " (its value is undefined)"; });
          }
          d.result = static_cast<uint32_t>(wp.dep[j].value) | (uint64_t{p} << 32);
          break;
        }
        case Coll::Vote:
          d.result = d.mode == TESSERA_EMU_VOTE_ALL   ? votes == group
                     : d.mode == TESSERA_EMU_VOTE_ANY ? votes != 0
                                                      : (votes == 0 || votes == group);
          break;
        case Coll::Ballot: d.result = votes; break;
        case Coll::SyncWarp: d.result = 0; break;
        case Coll::Bpermute: {
          uint32_t src = (static_cast<uint32_t>(d.b) >> 2) & (W - 1);
          d.result = (group >> src & 1) ? static_cast<uint32_t>(wp.dep[src].value) : 0;
          break;
        }
        case Coll::Readlane: {
          uint32_t src = static_cast<uint32_t>(d.b) & (W - 1);
          d.result = (group >> src & 1) ? static_cast<uint32_t>(wp.dep[src].value) : 0;
          break;
        }
        case Coll::Readfirstlane: d.result = static_cast<uint32_t>(wp.dep[first].value); break;
        case Coll::WaveBallot: d.result = votes; break;
        case Coll::Ldmatrix: case Coll::Mma: case Coll::Mfma: case Coll::Wmma: break;  // completeMatrix
      }
    }
    wp.waiting &= ~group;
    for (uint64_t g = group; g; g &= g - 1) {
      uint32_t i = warpIdx * W + static_cast<uint32_t>(std::countr_zero(g));
      if (&fibers[i] == self)
        self->state = FState::Running;
      else
        push(i);
    }
  }

  void wake(Fiber* self, uint32_t warpIdx, uint64_t group) {
    Warp& wp = warps[warpIdx];
    wp.waiting &= ~group;
    for (uint64_t g = group; g; g &= g - 1) {
      uint32_t i = warpIdx * L->W + static_cast<uint32_t>(std::countr_zero(g));
      if (&fibers[i] == self)
        self->state = FState::Running;
      else
        push(i);
    }
  }

  /// A matrix instruction: every lane of the warp has deposited pointers to
  /// its fragment registers; compute all outputs at once (Matrix.cpp).
  void completeMatrix(Fiber* self, uint32_t warpIdx, uint64_t group, Coll kind) {
    Warp& wp = warps[warpIdx];
    const uint32_t W = L->W;
    const uint64_t full = W == 64 ? ~uint64_t{0} : (uint64_t{1} << W) - 1;
    const uint32_t first = static_cast<uint32_t>(std::countr_zero(group));
    Fiber* blame = &fibers[warpIdx * W + first];
    if (group != full)
      misuse(blame, [&] { return std::string(collName(kind)) + " executed by lanes " + hex(group) +
                        " only: the whole warp must execute it (a partial or exited warp cannot)"; });
    const int32_t mode = wp.dep[first].mode;
    if (kind == Coll::Ldmatrix) {
      const int count = mode & 7;
      const unsigned char* rows[32];
      uint32_t* out[32];
      for (uint32_t l = 0; l < 32; ++l) {
        rows[l] = static_cast<const unsigned char*>(wp.dep[l].pa);
        out[l] = static_cast<uint32_t*>(wp.dep[l].pd);
      }
      detail::ldmatrix(count, (mode & TESSERA_EMU_LDMATRIX_TRANS) != 0, rows, out);
    } else {
      detail::LaneFrag lanes[64];
      for (uint32_t l = 0; l < W; ++l)
        lanes[l] = {static_cast<const uint32_t*>(wp.dep[l].pa), static_cast<const uint32_t*>(wp.dep[l].pb),
                    static_cast<const float*>(wp.dep[l].pc), static_cast<float*>(wp.dep[l].pd)};
      if (kind == Coll::Mma) detail::mmaSync(mode, lanes);
      else if (kind == Coll::Mfma) detail::mfma(mode, lanes);
      else detail::wmma(mode, lanes);
    }
    wake(self, warpIdx, group);
  }

  /// Entry of the matrix hooks: validates the mode and the warp size,
  /// deposits the fragment pointers and joins the warp's rendezvous.
  void matrix(Fiber* f, Coll kind, int32_t mode, const void* a, const void* b, const void* c, void* d) {
    const uint32_t W = L->W;
    bool ok = false;
    switch (kind) {
      case Coll::Ldmatrix: {
        int n = mode & 7;
        ok = cfg->vendor == Vendor::NVIDIA && (n == 1 || n == 2 || n == 4) && (mode & ~15) == 0;
        break;
      }
      case Coll::Mma: ok = cfg->vendor == Vendor::NVIDIA && (mode == 0 || mode == 1); break;
      case Coll::Mfma: ok = cfg->vendor == Vendor::AMD && W == 64 && mode >= 0 && mode <= 3; break;
      case Coll::Wmma: ok = cfg->vendor == Vendor::AMD && W == 32 && (mode == 0 || mode == 1); break;
      default: break;
    }
    if (!ok)
      misuse(f, [&] { return std::string(collName(kind)) + " with mode " + std::to_string(mode) + " is not an instruction of " +
                    (cfg->vendor == Vendor::NVIDIA ? "NVIDIA" : "AMD") + " warps of " + std::to_string(W) + " lanes"; });
    Deposit& dep = warps[f->warp].dep[f->lane];
    dep.pa = a;
    dep.pb = b;
    dep.pc = c;
    dep.pd = d;
    const uint64_t all = W == 64 ? ~uint64_t{0} : (uint64_t{1} << W) - 1;
    collective(f, kind, mode, isWaveWide(kind) ? 0 : all, 0, 0, 0);
  }

  /// The fiber's kernel returned (or threw).
  void onExit(Fiber* f) {
    if (!f->asyncCopies.empty()) {
      const AsyncCopy& c = f->asyncCopies.front();
      size_t open = 0;
      for (const AsyncCopy& x : f->asyncCopies) open += x.group == f->commits;
      report(IssueKind::AsyncCopyMisuse, f->linear, -1, c.op, -1, [&] {
        return where(f->linear) + ": the thread exits with " + std::to_string(f->asyncCopies.size()) +
               " cp.async copies in flight (" + std::to_string(open) +
               " never committed), first of " + std::to_string(c.bytes) + " bytes to shared offset " +
               std::to_string(c.dstOff) + " [" + opLabel(*cfg, c.op) +
               "]; retire them with cp.async.wait_group before the kernel returns";
      });
      // Never performed, and still in flight for the rest of the block (a
      // GPU may write them at any time): the marks stay until the next
      // block start clears them with the list.
    }
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
            misuse(f, [&] { return "lane exited while lane " + std::to_string(w) + " waits for it in " +
                          collName(wp.dep[w].kind) + " with member mask " + hex(wp.dep[w].mask); });
        }
      }
    }
    if (arrived && arrived + exited == L->nThreads) releaseBarrier(nullptr);
  }

  // ---- memory -----------------------------------------------------------------
  void* scratchFor(uint64_t bytes) {
    if (bytes > scratch.size()) scratch.resize(bytes);
    return scratch.data();
  }

  void* sharedAccess(Fiber* f, void* addr, uint64_t bytes, int32_t kind, int32_t op) {
    const uint64_t off = reinterpret_cast<uintptr_t>(addr) - reinterpret_cast<uintptr_t>(shared);
    if (off > sharedBytes || bytes > sharedBytes - off) {
      if (cfg->checkBounds) {
        report(IssueKind::SharedOutOfBounds, f->linear, -1, op, -1, [&] {
          return where(f->linear) + ": " + accessName(kind) + " of " + std::to_string(bytes) +
                 " bytes at shared offset " + std::to_string(static_cast<int64_t>(off)) +
                 " outside the block's " + std::to_string(sharedBytes) + " bytes of shared memory [" +
                 opLabel(*cfg, op) + "]";
        });
        return scratchFor(bytes);
      }
      return addr;
    }
    if (cfg->countBankConflicts && op >= 0) {
      if (static_cast<size_t>(op) >= occOps) {
        occ.resize((op + 1) * size_t{L->nThreads}, 0);
        occOps = op + 1;
      }
      uint32_t k = occ[op * size_t{L->nThreads} + f->linear]++;
      warpAccesses[f->warp].push_back(
          Access{op, k, f->lane, static_cast<uint32_t>(off), static_cast<uint32_t>(bytes)});
    }
    if (cfg->checkRaces) checkRace(f, off, bytes, kind, op);
    return addr;
  }

  void checkRace(Fiber* f, uint64_t off, uint64_t bytes, int32_t kind, int32_t op) {
    const uint16_t t = static_cast<uint16_t>(f->linear);
    const uint8_t atomic = kind == TESSERA_EMU_ATOMIC;
    const bool writes = kind != TESSERA_EMU_LOAD;
    bool reported = false;
    auto race = [&](uint64_t at, uint16_t other, int32_t otherOp, const char* otherKind,
                    const char* why = "with no barrier in between") {
      if (reported) return;  // one report per access, not per byte
      reported = true;
      report(IssueKind::SharedRace, f->linear, other, op, otherOp, [&] {
        return where(f->linear) + ": " + accessName(kind) + " of " + std::to_string(bytes) +
               " bytes at shared offset " + std::to_string(at) + " [" + opLabel(*cfg, op) + "] conflicts with a " +
               otherKind + " by " + threadName(other) + " [" + opLabel(*cfg, otherOp) +
               "] " + why;
      });
    };
    for (uint64_t i = off; i < off + bytes; ++i) {
      Shadow& s = shadow[i];
      // A pending cp.async may write this byte at any time, even for the
      // thread that issued it (it has not waited for it).
      if (s.inFlight)
        race(i, s.aThread, s.aOp, "cp.async",
             "that is still in flight (no cp.async.wait_group has retired its group)");
      if (s.wEpoch == epoch && s.writer != t && !(atomic && s.wAtomic))
        race(i, s.writer, s.wOp, s.wAtomic ? "atomic" : "write");
      if (writes) {
        if (s.rEpoch == epoch) {  // plain reads race with atomics too
          uint16_t other = s.reader1 != t ? s.reader1 : s.reader2;
          int32_t otherOp = s.reader1 != t ? s.rOp1 : s.rOp2;
          if (other != kNoThread) race(i, other, otherOp, "read");
        }
        s.wEpoch = epoch;
        s.writer = t;
        s.wOp = op;
        s.wAtomic = atomic;
      } else if (s.rEpoch != epoch) {
        s.rEpoch = epoch;
        s.reader1 = t;
        s.rOp1 = op;
        s.reader2 = kNoThread;
      } else if (s.reader1 != t && s.reader2 == kNoThread) {
        s.reader2 = t;
        s.rOp2 = op;
      }
    }
  }

  // ---- cp.async ---------------------------------------------------------------
  /// Counts a copy's shared bytes in (+1) or out (-1) of flight.
  void markInFlight(const AsyncCopy& c, int delta) {
    if (shadow.empty()) return;
    for (uint64_t i = c.dstOff; i < c.dstOff + c.bytes && i < shadow.size(); ++i) {
      Shadow& s = shadow[i];
      if (delta < 0) {
        if (s.inFlight) --s.inFlight;
      } else {
        ++s.inFlight;
      }
    }
  }

  /// Records a cp.async. The issue is where a real copy may start writing:
  /// its shared bytes are checked now as a write (an earlier read in this
  /// barrier interval, or another copy in flight, is a race), and marked in
  /// flight until the copy is performed.
  void cpAsync(Fiber* f, void* dst, const void* src, int32_t bytes, int32_t srcBytes, int32_t op) {
    if (bytes != 4 && bytes != 8 && bytes != 16)
      misuse(f, [&] { return "cp.async of " + std::to_string(bytes) + " bytes (4, 8 or 16 only)"; });
    if (srcBytes < 0 || srcBytes > bytes)
      misuse(f, [&] { return "cp.async with src-size " + std::to_string(srcBytes) + " for a copy of " + std::to_string(bytes) +
                    " bytes"; });
    const uint64_t off = reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(shared);
    if (off < sharedBytes && off % static_cast<uint64_t>(bytes) != 0)
      misuse(f, [&] { return "cp.async destination at shared offset " + std::to_string(off) + " is not aligned to its " +
                    std::to_string(bytes) + " bytes"; });
    if (srcBytes > 0 && reinterpret_cast<uintptr_t>(src) % static_cast<uintptr_t>(bytes) != 0)
      misuse(f, [&] { return "cp.async source " + hex(reinterpret_cast<uintptr_t>(src)) + " is not aligned to its " +
                    std::to_string(bytes) + " bytes"; });
    // Bounds are checked now (the report then names the issuing op); an
    // out-of-bounds copy is dropped.
    bool ok = true;
    if (off > sharedBytes || static_cast<uint64_t>(bytes) > sharedBytes - off) {
      sharedAccess(f, dst, static_cast<uint64_t>(bytes), TESSERA_EMU_STORE, op);
      ok = false;
    } else if (cfg->checkRaces) {
      checkRace(f, off, static_cast<uint64_t>(bytes), TESSERA_EMU_STORE, op);
    }
    if (srcBytes > 0 && globalAccess(f, const_cast<void*>(src), static_cast<uint64_t>(srcBytes), TESSERA_EMU_LOAD,
                                     op) != src)
      ok = false;
    if (!ok) return;
    AsyncCopy c{off, src, static_cast<uint32_t>(bytes), static_cast<uint32_t>(srcBytes), op, f->commits};
    markInFlight(c, +1);
    if (!shadow.empty())
      for (uint64_t i = off; i < off + c.bytes; ++i) {
        shadow[i].aThread = static_cast<uint16_t>(f->linear);
        shadow[i].aOp = op;
      }
    f->asyncCopies.push_back(c);
  }

  /// cp.async.wait_group: performs the copies of every committed group but
  /// the newest `pending`, in issue order. Each is a write of its shared
  /// bytes by the thread now (racing with other threads' accesses in this
  /// barrier interval), counted for the bank model as the copy's op.
  void cpAsyncWait(Fiber* f, int32_t pending) {
    if (pending < 0) misuse(f, [&] { return "cp.async.wait_group with a negative count " + std::to_string(pending); });
    const uint64_t n = static_cast<uint64_t>(pending);
    const uint64_t retireBelow = f->commits > n ? f->commits - n : 0;
    size_t keep = 0;
    for (size_t i = 0; i < f->asyncCopies.size(); ++i) {
      AsyncCopy c = f->asyncCopies[i];
      if (c.group >= retireBelow) {
        f->asyncCopies[keep++] = c;
        continue;
      }
      markInFlight(c, -1);
      unsigned char* dst = shared + c.dstOff;
      void* d = sharedAccess(f, dst, c.bytes, TESSERA_EMU_STORE, c.op);
      std::memcpy(d, c.src, c.srcBytes);
      std::memset(static_cast<unsigned char*>(d) + c.srcBytes, 0, c.bytes - c.srcBytes);
    }
    f->asyncCopies.resize(keep);
  }

  void* globalAccess(Fiber* f, void* addr, uint64_t bytes, int32_t kind, int32_t op) {
    if (!cfg->checkBounds) return addr;
    const auto& g = L->globals;
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    auto inside = [&](size_t i) { return a >= g[i].first && a <= g[i].second && bytes <= g[i].second - a; };
    if (globalHint < g.size() && inside(globalHint)) return addr;
    auto it = std::upper_bound(g.begin(), g.end(), a, [](uintptr_t v, const auto& r) { return v < r.first; });
    if (it != g.begin()) {
      size_t i = static_cast<size_t>(it - g.begin()) - 1;
      if (inside(i)) {
        globalHint = i;
        return addr;
      }
    }
    report(IssueKind::GlobalOutOfBounds, f->linear, -1, op, -1, [&] {
      std::string near = "no buffer is registered";
      if (!g.empty()) {
        // Name the buffer just below (or the first one) to show how far off it is.
        size_t i = it == g.begin() ? 0 : static_cast<size_t>(it - g.begin()) - 1;
        int64_t rel = static_cast<int64_t>(a - g[i].first);
        near = "nearest buffer [" + hex(g[i].first) + ", +" + std::to_string(g[i].second - g[i].first) +
               " bytes) at offset " + std::to_string(rel);
      }
      return where(f->linear) + ": " + accessName(kind) + " of " + std::to_string(bytes) + " bytes at " + hex(a) +
             " outside every registered global buffer; " + near + " [" + opLabel(*cfg, op) + "]";
    });
    return scratchFor(bytes);
  }

  /// Bank model: 32 banks of 4 bytes. The lanes of one warp access (same
  /// warp, op and dynamic instance) are served in phases of 128 bytes worth
  /// of lanes (32 lanes for 4-byte accesses, 16 for 8-byte, 8 for 16-byte;
  /// a wave64 b32 access thus takes two phases, as LDS serves 32 lanes per
  /// cycle). Within a phase, distinct 4-byte words in one bank serialise
  /// (one word read by several lanes is a broadcast); extra wavefronts =
  /// max over banks of distinct words - 1.
  void accountBanks() {
    std::vector<uint32_t> words;
    for (auto& acc : warpAccesses) {
      if (acc.empty()) continue;
      std::sort(acc.begin(), acc.end(), [](const Access& x, const Access& y) {
        return std::tie(x.op, x.occ, x.lane) < std::tie(y.op, y.occ, y.lane);
      });
      for (size_t i = 0; i < acc.size();) {
        size_t j = i;
        uint32_t maxBytes = 0;
        while (j < acc.size() && acc[j].op == acc[i].op && acc[j].occ == acc[i].occ) {
          maxBytes = std::max(maxBytes, acc[j].bytes);
          ++j;
        }
        const uint32_t lanesPerPhase = maxBytes <= 4 ? 32 : std::max<uint32_t>(1, 128 / maxBytes);
        OpStat& st = opStats[acc[i].op];
        ++st.warpAccesses;
        for (size_t p = i; p < j;) {
          const uint32_t phase = acc[p].lane / lanesPerPhase;
          words.clear();
          size_t q = p;
          for (; q < j && acc[q].lane / lanesPerPhase == phase; ++q) {
            uint32_t w0 = acc[q].off / 4, w1 = (acc[q].off + std::max(acc[q].bytes, 1u) - 1) / 4;
            for (uint32_t w = w0; w <= w1; ++w) words.push_back(w);
          }
          std::sort(words.begin(), words.end());
          words.erase(std::unique(words.begin(), words.end()), words.end());
          uint32_t perBank[32] = {};
          uint32_t degree = 0;
          for (uint32_t w : words) degree = std::max(degree, ++perBank[w % 32]);
          st.wavefronts += degree;
          st.conflicts += degree - 1;
          p = q;
        }
        i = j;
      }
    }
  }

  void work() {
    for (;;) {
      uint64_t b = L->nextBlock.fetch_add(1, std::memory_order_relaxed);
      if (b >= L->nBlocks) return;
      runBlock(b);
    }
  }
};

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

Fiber* current(const char* hook) {
  Fiber* f = tlsFiber;
  if (!f) throw EmulatorError(std::string(hook) + " called outside a kernel run by tessera::emu::launch");
  return f;
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
  uint64_t threads = uint64_t{cfg.block[0]} * cfg.block[1] * cfg.block[2];
  if (threads > 1024) bad(std::to_string(threads) + " threads per block exceed the limit of 1024");
  if (cfg.vendor == Vendor::NVIDIA && cfg.warpSize != 32)
    bad("NVIDIA warps have 32 lanes, not " + std::to_string(cfg.warpSize));
  if (cfg.vendor == Vendor::AMD && cfg.warpSize != 32 && cfg.warpSize != 64)
    bad("AMD waves have 32 or 64 lanes, not " + std::to_string(cfg.warpSize));
  if (cfg.stackBytes < 16 * 1024) bad("fiber stacks need at least 16 KiB");
}

}  // namespace

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
  for (const auto& [p, n] : cfg.globalBuffers) {
    if (!p || !n) continue;
    auto b = reinterpret_cast<uintptr_t>(p);
    L.globals.emplace_back(b, b + n);
  }
  std::sort(L.globals.begin(), L.globals.end());

  unsigned nWorkers = cfg.hostThreads ? cfg.hostThreads : std::max(1u, std::thread::hardware_concurrency());
  nWorkers = static_cast<unsigned>(std::min<uint64_t>(nWorkers, L.nBlocks));
  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned i = 0; i < nWorkers; ++i) workers.push_back(std::make_unique<Worker>(&L));

  std::vector<std::exception_ptr> errors(nWorkers);
  auto run = [&](unsigned i) {
    try {
      workers[i]->work();
    } catch (...) {
      errors[i] = std::current_exception();
      L.nextBlock.store(L.nBlocks);  // stop the others soon
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < nWorkers; ++i) threads.emplace_back(run, i);
  run(0);
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  LaunchReport rep;
  rep.blocks = L.nBlocks;
  rep.threads = L.nBlocks * L.nThreads;
  std::map<int32_t, OpStat> stats;
  std::set<std::tuple<int, int32_t, int32_t>> seen;
  for (auto& w : workers) {
    rep.fiberSwitches += w->switches;
    for (size_t k = 0; k < kIssueKinds; ++k) rep.counts[k] += w->counts[k];
    for (auto& is : w->issues)
      if (seen.emplace(static_cast<int>(is.kind), is.opId, is.otherOpId).second) rep.issues.push_back(std::move(is));
    for (const auto& [op, s] : w->opStats) {
      OpStat& d = stats[op];
      d.warpAccesses += s.warpAccesses;
      d.wavefronts += s.wavefronts;
      d.conflicts += s.conflicts;
    }
  }
  // Deterministic order whatever the host-thread interleaving.
  auto key = [&](const Issue& is) {
    uint64_t b = (uint64_t{is.block[2]} * cfg.grid[1] + is.block[1]) * cfg.grid[0] + is.block[0];
    uint64_t t = (uint64_t{is.thread[2]} * cfg.block[1] + is.thread[1]) * cfg.block[0] + is.thread[0];
    return std::make_tuple(b, t, static_cast<int>(is.kind));
  };
  std::stable_sort(rep.issues.begin(), rep.issues.end(),
                   [&](const Issue& a, const Issue& b) { return key(a) < key(b); });
  if (rep.issues.size() > cfg.maxReports) rep.issues.resize(cfg.maxReports);
  for (const auto& [op, s] : stats) {
    BankConflictStat b;
    b.opId = op;
    b.opName = op >= 0 && static_cast<size_t>(op) < cfg.opNames.size() ? cfg.opNames[op] : "op#" + std::to_string(op);
    b.warpAccesses = s.warpAccesses;
    b.wavefronts = s.wavefronts;
    b.conflicts = s.conflicts;
    rep.totalBankConflicts += s.conflicts;
    rep.bankConflicts.push_back(std::move(b));
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (cfg.throwOnError && rep.hasErrors()) {
    std::ostringstream os;
    os << "emulated kernel '" << cfg.kernelName << "' failed: " << rep.summary();
    size_t shown = 0;
    for (const auto& is : rep.issues) {
      if (shown++ == 5) {
        os << "\n  ... (" << rep.issues.size() - 5 << " more distinct reports)";
        break;
      }
      os << "\n  " << is.message;
    }
    throw EmulatorError(os.str());
  }
  return rep;
}

}  // namespace tessera::emu

// ---- hooks --------------------------------------------------------------------
using tessera::emu::Coll;
using tessera::emu::current;
using tessera::emu::Fiber;

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

void tessera_emu_barrier(int32_t siteId) {
  Fiber* f = current(__func__);
  f->w->barrier(f, siteId);
}

void tessera_emu_syncwarp(uint64_t mask) {
  Fiber* f = current(__func__);
  f->w->collective(f, Coll::SyncWarp, 0, mask, 0, 0, 0);
}

uint64_t tessera_emu_shfl_sync_pred(int32_t mode, uint64_t mask, int32_t value, int32_t b, int32_t c) {
  Fiber* f = current(__func__);
  if (mode < TESSERA_EMU_SHFL_IDX || mode > TESSERA_EMU_SHFL_BFLY)
    f->w->misuse(f, [&] { return "shfl.sync with unknown mode " + std::to_string(mode); });
  return f->w->collective(f, Coll::Shfl, mode, mask, value, b, c);
}

int32_t tessera_emu_shfl_sync(int32_t mode, uint64_t mask, int32_t value, int32_t b, int32_t c) {
  return static_cast<int32_t>(static_cast<uint32_t>(tessera_emu_shfl_sync_pred(mode, mask, value, b, c)));
}

int32_t tessera_emu_vote_sync(int32_t mode, uint64_t mask, int32_t pred) {
  Fiber* f = current(__func__);
  if (mode < TESSERA_EMU_VOTE_ALL || mode > TESSERA_EMU_VOTE_UNI)
    f->w->misuse(f, [&] { return "vote.sync with unknown mode " + std::to_string(mode); });
  return static_cast<int32_t>(f->w->collective(f, Coll::Vote, mode, mask, pred != 0, 0, 0));
}

uint64_t tessera_emu_ballot_sync(uint64_t mask, int32_t pred) {
  Fiber* f = current(__func__);
  return f->w->collective(f, Coll::Ballot, 0, mask, pred != 0, 0, 0);
}

int32_t tessera_emu_ds_bpermute(int32_t byteAddr, int32_t value) {
  Fiber* f = current(__func__);
  return static_cast<int32_t>(f->w->collective(f, Coll::Bpermute, 0, 0, value, byteAddr, 0));
}

int32_t tessera_emu_readlane(int32_t value, int32_t lane) {
  Fiber* f = current(__func__);
  return static_cast<int32_t>(f->w->collective(f, Coll::Readlane, 0, 0, value, lane, 0));
}

int32_t tessera_emu_readfirstlane(int32_t value) {
  Fiber* f = current(__func__);
  return static_cast<int32_t>(f->w->collective(f, Coll::Readfirstlane, 0, 0, value, 0, 0));
}

uint64_t tessera_emu_wave_ballot(int32_t pred) {
  Fiber* f = current(__func__);
  return f->w->collective(f, Coll::WaveBallot, 0, 0, pred != 0, 0, 0);
}

void tessera_emu_ldmatrix(int32_t mode, void* rowAddr, int32_t opId, uint32_t* out) {
  Fiber* f = current(__func__);
  auto* w = f->w;
  // Lanes past 8 * count give no address (ldmatrix ignores them); the
  // others read one 16-byte row, a checked shared access.
  void* row = rowAddr;
  if (f->lane < 8u * static_cast<uint32_t>(mode & 7)) {
    uintptr_t off = reinterpret_cast<uintptr_t>(rowAddr) - reinterpret_cast<uintptr_t>(w->shared);
    if (off % 16 != 0 && off < w->sharedBytes)
      w->misuse(f, [&] { return "ldmatrix row address at shared offset " + std::to_string(off) + " is not 16-byte aligned"; });
    row = w->sharedAccess(f, rowAddr, 16, TESSERA_EMU_LOAD, opId);
  }
  w->matrix(f, Coll::Ldmatrix, mode, row, nullptr, nullptr, out);
}

void tessera_emu_mma_sync(int32_t mode, const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  Fiber* f = current(__func__);
  f->w->matrix(f, Coll::Mma, mode, a, b, c, d);
}

void tessera_emu_mfma(int32_t mode, const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  Fiber* f = current(__func__);
  f->w->matrix(f, Coll::Mfma, mode, a, b, c, d);
}

void tessera_emu_wmma(int32_t mode, const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  Fiber* f = current(__func__);
  f->w->matrix(f, Coll::Wmma, mode, a, b, c, d);
}

void tessera_emu_cp_async(void* dst, const void* src, int32_t bytes, int32_t srcBytes, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->cpAsync(f, dst, src, bytes, srcBytes, opId);
}

void tessera_emu_cp_async_commit(void) { ++current(__func__)->commits; }

void tessera_emu_cp_async_wait(int32_t pending) {
  Fiber* f = current(__func__);
  f->w->cpAsyncWait(f, pending);
}

void* tessera_emu_shared_base(void) { return current(__func__)->w->shared; }

void* tessera_emu_shared_access(void* addr, uint64_t bytes, int32_t kind, int32_t opId) {
  Fiber* f = current(__func__);
  return f->w->sharedAccess(f, addr, bytes, kind, opId);
}

void* tessera_emu_global_access(void* addr, uint64_t bytes, int32_t kind, int32_t opId) {
  Fiber* f = current(__func__);
  return f->w->globalAccess(f, addr, bytes, kind, opId);
}

}  // extern "C"

namespace tessera::emu {

const std::vector<std::pair<const char*, void*>>& hookSymbols() {
#define TS_HOOK(n) {#n, reinterpret_cast<void*>(&n)}
  static const std::vector<std::pair<const char*, void*>> hooks = {
      TS_HOOK(tessera_emu_thread_id_x),   TS_HOOK(tessera_emu_thread_id_y),
      TS_HOOK(tessera_emu_thread_id_z),   TS_HOOK(tessera_emu_block_id_x),
      TS_HOOK(tessera_emu_block_id_y),    TS_HOOK(tessera_emu_block_id_z),
      TS_HOOK(tessera_emu_block_dim_x),   TS_HOOK(tessera_emu_block_dim_y),
      TS_HOOK(tessera_emu_block_dim_z),   TS_HOOK(tessera_emu_grid_dim_x),
      TS_HOOK(tessera_emu_grid_dim_y),    TS_HOOK(tessera_emu_grid_dim_z),
      TS_HOOK(tessera_emu_lane_id),       TS_HOOK(tessera_emu_warp_size),
      TS_HOOK(tessera_emu_barrier),       TS_HOOK(tessera_emu_syncwarp),
      TS_HOOK(tessera_emu_shfl_sync),     TS_HOOK(tessera_emu_shfl_sync_pred),
      TS_HOOK(tessera_emu_vote_sync),     TS_HOOK(tessera_emu_ballot_sync),
      TS_HOOK(tessera_emu_ds_bpermute),   TS_HOOK(tessera_emu_readlane),
      TS_HOOK(tessera_emu_readfirstlane), TS_HOOK(tessera_emu_wave_ballot),
      TS_HOOK(tessera_emu_shared_base),
      TS_HOOK(tessera_emu_ldmatrix),      TS_HOOK(tessera_emu_mma_sync),
      TS_HOOK(tessera_emu_mfma),          TS_HOOK(tessera_emu_wmma),
      TS_HOOK(tessera_emu_shared_access), TS_HOOK(tessera_emu_global_access),
      TS_HOOK(tessera_emu_cp_async),      TS_HOOK(tessera_emu_cp_async_commit),
      TS_HOOK(tessera_emu_cp_async_wait),
  };
#undef TS_HOOK
  return hooks;
}

}  // namespace tessera::emu

// Shared and global memory accesses: bounds checks, the shared-memory race
// checker, the bank-conflict model; the memory hooks.
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "EmulatorImpl.h"

namespace tessera::emu::detail {

void* Worker::scratchFor(uint64_t bytes) {
  if (bytes > scratch.size()) scratch.resize(bytes);
  return scratch.data();
}

void* Worker::sharedAccess(Fiber* f, void* addr, uint64_t bytes, int32_t kind, int32_t op) {
  const uint64_t off = reinterpret_cast<uintptr_t>(addr) - reinterpret_cast<uintptr_t>(shared);
  if (off > sharedBytes || bytes > sharedBytes - off) {
    if (cfg->checkBounds) {
      report(IssueKind::SharedOutOfBounds, f->linear, -1, op, -1, [&] {
        return where(f->linear) + ": " + accessName(kind) + " of " + std::to_string(bytes) +
               " bytes at shared offset " + std::to_string(static_cast<int64_t>(off)) + " outside the block's " +
               std::to_string(sharedBytes) + " bytes of shared memory [" + opLabel(*cfg, op) + "]";
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
    warpAccesses[f->warp].push_back(Access{op, k, f->lane, static_cast<uint32_t>(off), static_cast<uint32_t>(bytes)});
  }
  if (cfg->checkRaces) {
    checkRace(f, off, bytes, kind, op);
    if (!remoteShadow.empty()) checkRemote(f, off, bytes, kind, op);
  }
  return addr;
}

void Worker::checkRace(Fiber* f, uint64_t off, uint64_t bytes, int32_t kind, int32_t op) {
  const uint16_t t = static_cast<uint16_t>(f->linear);
  const uint8_t atomic = kind == TESSERA_EMU_ATOMIC;
  const bool writes = kind != TESSERA_EMU_LOAD && kind != kAsyncLoad;
  bool reported = false;
  auto race = [&](uint64_t at, uint16_t other, int32_t otherOp, const char* otherKind,
                  const char* why = "with no barrier in between") {
    if (reported) return;  // one report per access, not per byte
    reported = true;
    report(IssueKind::SharedRace, f->linear, other, op, otherOp, [&] {
      return where(f->linear) + ": " + accessName(kind) + " of " + std::to_string(bytes) + " bytes at shared offset " +
             std::to_string(at) + " [" + opLabel(*cfg, op) + "] conflicts with a " + otherKind + " by " +
             threadName(other) + " [" + opLabel(*cfg, otherOp) + "] " + why;
    });
  };
  for (uint64_t i = off; i < off + bytes; ++i) {
    Shadow& s = shadow[i];
    // A pending cp.async may write this byte at any time, even for the
    // thread that issued it (it has not waited for it).
    if (s.inFlight)
      race(i, s.aThread, s.aOp, s.aTma ? "TMA load" : "cp.async",
           s.aTma ? "that is still in flight (the phase of its mbarrier has not completed)"
                  : "that is still in flight (no cp.async.wait_group has retired its group)");
    // An MMA in flight reads this byte at some time until its wait.
    if (writes && s.mmaReads)
      race(i, s.mThread, s.mOp, "wgmma.mma_async / tcgen05.mma read",
           "that is still in flight (no wgmma.wait_group has retired its group, no tcgen05.commit its MMA)");
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
    } else if (kind == kAsyncLoad) {
      continue;
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

void* Worker::globalAccess(Fiber* f, void* addr, uint64_t bytes, int32_t kind, int32_t op) {
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
void Worker::accountBanks() {
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

}  // namespace tessera::emu::detail

// ---- hooks --------------------------------------------------------------------
using tessera::emu::detail::current;
using tessera::emu::detail::Fiber;

extern "C" {

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

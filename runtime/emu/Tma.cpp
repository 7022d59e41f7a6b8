// Hopper's shared-memory barriers (mbarrier) and TMA tile loads
// (cp.async.bulk.tensor): a copy reads its box from global memory at the
// issue and is performed, its shared bytes in flight meanwhile, when the
// phase of its mbarrier completes (every arrival has come); the phase then
// advances once the bytes announced by expect_tx have all been delivered,
// and wakes the threads parked in try_wait on it. See docs/emulator.md.
#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include "EmulatorImpl.h"

namespace tessera::emu::detail {

namespace {

/// Misuse of an mbarrier or a TMA copy: an AsyncCopyMisuse naming the op.
template <class What>
[[noreturn]] void tmaMisuse(Worker& w, Fiber* f, int32_t op, const What& what) {
  w.opMisuse(IssueKind::AsyncCopyMisuse, f, op, what);
}

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

/// The barrier at `bar`, checked: inside shared memory, 8-byte aligned and
/// (unless `init`) initialised. `inst` names the instruction in messages.
Mbarrier& Worker::mbarrier(Fiber* f, void* bar, const char* inst, int32_t op, bool init) {
  const uint64_t off = reinterpret_cast<uintptr_t>(bar) - reinterpret_cast<uintptr_t>(shared);
  if (off > sharedBytes || sharedBytes - off < 8)
    tmaMisuse(*this, f, op, [&] {
      return std::string(inst) + " on an mbarrier at shared offset " + std::to_string(static_cast<int64_t>(off)) +
             ", outside the block's " + str(sharedBytes) + " bytes of shared memory";
    });
  if (off % 8 != 0)
    tmaMisuse(*this, f, op, [&] {
      return std::string(inst) + " on an mbarrier at shared offset " + str(off) + ", which is not 8-byte aligned";
    });
  auto it = mbarriers.find(off);
  if (it != mbarriers.end()) return it->second;
  if (!init)
    tmaMisuse(*this, f, op, [&] {
      return std::string(inst) + " on the mbarrier at shared offset " + str(off) +
             ", which no mbarrier.init has initialised in this block";
    });
  Mbarrier& b = mbarriers[off];
  b.off = off;
  return b;
}

void Worker::mbarrierInit(Fiber* f, void* bar, int32_t count, int32_t op) {
  Mbarrier& b = mbarrier(f, bar, "mbarrier.init", op, true);
  if (count < 1)
    tmaMisuse(*this, f, op, [&] {
      return "mbarrier.init of the mbarrier at shared offset " + str(b.off) + " with arrival count " +
             std::to_string(count) + " (at least 1)";
    });
  // Re-initialising drops the phase: copies still owed to it would complete
  // on a barrier that no longer expects them.
  if (!b.copies.empty())
    tmaMisuse(*this, f, op, [&] {
      return "mbarrier.init of the mbarrier at shared offset " + str(b.off) + " while " + str(b.copies.size()) +
             " TMA copies on it are not yet performed (first " + opLabel(*cfg, b.copies.front().op) + ")";
    });
  b.expected = b.pending = count;
  b.tx = 0;
  b.phase = 0;
  b.initOp = op;
}

void Worker::mbarrierExpectTx(Fiber* f, void* bar, int32_t bytes, int32_t op) {
  Mbarrier& b = mbarrier(f, bar, "mbarrier.expect_tx", op);
  if (bytes < 0)
    tmaMisuse(*this, f, op, [&] {
      return "mbarrier.expect_tx of " + std::to_string(bytes) + " bytes on the mbarrier at shared offset " + str(b.off);
    });
  b.tx += bytes;
}

void Worker::mbarrierArrive(Fiber* f, void* bar, int32_t op) {
  Mbarrier& b = mbarrier(f, bar, "mbarrier.arrive", op);
  // A phase whose arrivals have all come waits only for bytes; one more
  // arrival would belong to no phase.
  if (b.pending == 0)
    tmaMisuse(*this, f, op, [&] {
      return "mbarrier.arrive on the mbarrier at shared offset " + str(b.off) + " whose phase " + str(b.phase) +
             " already has all its " + std::to_string(b.expected) + " arrivals (it waits for " + std::to_string(b.tx) +
             " bytes of transactions)";
    });
  if (--b.pending == 0) completePhase(f, b);
}

int32_t Worker::mbarrierTryWait(Fiber* f, void* bar, int32_t parity, int32_t op) {
  Mbarrier& b = mbarrier(f, bar, "mbarrier.try_wait.parity", op);
  if (parity != 0 && parity != 1)
    tmaMisuse(*this, f, op, [&] {
      return "mbarrier.try_wait.parity with parity " + std::to_string(parity) +
             " (0 or 1) on the mbarrier at shared offset " + str(b.off);
    });
  if ((b.phase & 1) != static_cast<uint64_t>(parity)) return 1;
  // Parked rather than returning 0: the compiled loop would spin forever
  // on a cooperative scheduler. completePhase wakes it.
  f->state = FState::AtMbarrier;
  f->mbarOff = b.off;
  f->mbarParity = parity;
  b.waiters.push_back(f->linear);
  yield(f);
  return 1;
}

/// Checks the copy's destination as a write by `f` against this barrier
/// interval, without recording it: the bytes are written by the async
/// proxy when the phase completes, and threads that waited on the barrier
/// read them without a block barrier in between.
namespace {
void checkAsyncWrite(Worker& w, Fiber* f, uint64_t off, uint64_t bytes, int32_t op) {
  auto first = w.shadow.begin() + static_cast<ptrdiff_t>(off);
  w.savedShadow.assign(first, first + static_cast<ptrdiff_t>(bytes));
  w.checkRace(f, off, bytes, TESSERA_EMU_STORE, op);
  std::copy(w.savedShadow.begin(), w.savedShadow.end(), first);
}
}  // namespace

/// The tensor map a tile load or store names, checked as the hardware
/// would (rank, element size, box, swizzle).
TensorMap Worker::checkedTensorMap(Fiber* f, const void* mapPtr, int32_t rank, int32_t op) {
  // `why` builds the message inside the report (see tmaMisuse).
  auto bad = [&](const auto& why) { tmaMisuse(*this, f, op, [&] { return "cp.async.bulk.tensor " + why(); }); };
  if (!mapPtr) bad([] { return std::string("with a null tensor map"); });
  TensorMap m;
  std::memcpy(&m, mapPtr, sizeof m);
  if (m.magic != TensorMap::kMagic)
    bad([&] { return "with a tensor map at " + hex(reinterpret_cast<uintptr_t>(mapPtr)) + " whose magic is wrong"; });
  if ((rank != 2 && rank != 3) || m.rank != static_cast<uint32_t>(rank))
    bad([&] {
      return "." + std::to_string(rank) + "d with a tensor map of rank " + str(m.rank) + " (2 or 3, the same)";
    });
  const uint64_t E = m.elemBytes, S = m.swizzleBytes;
  if (E != 1 && E != 2 && E != 4 && E != 8) bad([&] { return "with elements of " + str(E) + " bytes (1, 2, 4 or 8)"; });
  const uint64_t box[3] = {m.box[0], m.box[1], rank == 3 ? m.box[2] : 1};
  for (int d = 0; d < rank; ++d)
    if (box[d] < 1 || box[d] > 256)
      bad([&] { return "with box dimension " + std::to_string(d) + " of " + str(box[d]) + " (1 to 256)"; });
  const uint64_t rowBytes = box[0] * E;
  if (rowBytes % 16 != 0) bad([&] { return "with box rows of " + str(rowBytes) + " bytes (a multiple of 16)"; });
  if (S != 0 && S != 32 && S != 64 && S != 128)
    bad([&] { return "with a " + str(S) + "-byte swizzle (0, 32, 64 or 128)"; });
  if (S != 0 && rowBytes != S)
    bad([&] {
      return "with box rows of " + str(rowBytes) + " bytes under a " + str(S) + "-byte swizzle (they must be equal)";
    });
  return m;
}

void Worker::tmaLoad(Fiber* f, void* dst, const void* mapPtr, int32_t rank, const int32_t c[3], void* bar, int32_t op) {
  Mbarrier& b = mbarrier(f, bar, "cp.async.bulk.tensor", op);
  auto bad = [&](const auto& why) { tmaMisuse(*this, f, op, [&] { return "cp.async.bulk.tensor " + why(); }); };
  const TensorMap m = checkedTensorMap(f, mapPtr, rank, op);
  const uint64_t E = m.elemBytes, S = m.swizzleBytes;
  const uint64_t box[3] = {m.box[0], m.box[1], rank == 3 ? m.box[2] : 1};
  const uint64_t rowBytes = box[0] * E, bytes = rowBytes * box[1] * box[2];
  const uint64_t off = reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(shared);
  if (off > sharedBytes || bytes > sharedBytes - off)
    bad([&] {
      return "of " + str(bytes) + " bytes to shared offset " + std::to_string(static_cast<int64_t>(off)) +
             ", outside the block's " + str(sharedBytes) + " bytes of shared memory";
    });
  // The swizzle pattern repeats every 8 lines of S bytes and is taken from
  // the address bits: a destination off that period would shift it.
  const uint64_t align = S ? 8 * S : 128;
  if (off % align != 0)
    bad([&] {
      return "destination at shared offset " + str(off) + " is not " + str(align) + "-byte aligned" +
             (S ? " (8 x the " + str(S) + "-byte swizzle)" : std::string());
    });

  std::vector<unsigned char> image(bytes, 0);
  unsigned char* img = image.data();
  auto place = [&](uint64_t L) {  // the byte L of the box in the swizzled layout
    uint64_t A = off + L;
    if (S) A ^= ((A >> 7) & (S / 16 - 1)) << 4;
    return img + (A - off);
  };
  auto limit = [&](int d) {
    return static_cast<int64_t>(std::min<uint64_t>(m.dims[d], std::numeric_limits<int64_t>::max()));
  };
  const int64_t c2 = rank == 3 ? c[2] : 0;
  const auto* global = reinterpret_cast<unsigned char*>(static_cast<uintptr_t>(m.global));
  for (uint64_t z = 0; z < box[2]; ++z)
    for (uint64_t y = 0; y < box[1]; ++y) {
      const int64_t gy = int64_t{c[1]} + static_cast<int64_t>(y), gz = c2 + static_cast<int64_t>(z);
      if (gy < 0 || gy >= limit(1) || (rank == 3 && (gz < 0 || gz >= limit(2)))) continue;  // zero rows
      // Elements [xlo, xhi) of the row are inside the tensor; the rest stay 0.
      const int64_t xlo = std::max<int64_t>(0, -int64_t{c[0]});
      const int64_t xhi = std::min<int64_t>(static_cast<int64_t>(box[0]), limit(0) - c[0]);
      if (xlo >= xhi) continue;
      const unsigned char* row =
          global + static_cast<uint64_t>(gy) * m.strides[1] + static_cast<uint64_t>(gz) * m.strides[2];
      const uint64_t L0 = (z * box[1] + y) * box[0] * E;
      // A dense row is one checked access (one report if it leaves its buffer).
      const bool dense = m.strides[0] == E;
      const unsigned char* src = nullptr;
      if (dense) {
        void* at = const_cast<unsigned char*>(row + static_cast<uint64_t>(c[0] + xlo) * E);
        src = static_cast<const unsigned char*>(
            globalAccess(f, at, static_cast<uint64_t>(xhi - xlo) * E, TESSERA_EMU_LOAD, op));
      }
      for (int64_t x = xlo; x < xhi; ++x) {
        const unsigned char* e =
            dense ? src + static_cast<uint64_t>(x - xlo) * E
                  : static_cast<const unsigned char*>(globalAccess(
                        f, const_cast<unsigned char*>(row + static_cast<uint64_t>(c[0] + x) * m.strides[0]), E,
                        TESSERA_EMU_LOAD, op));
        std::memcpy(place(L0 + static_cast<uint64_t>(x) * E), e, E);  // an element never crosses a 16-byte chunk
      }
    }
  asyncWrite(f, b, off, std::move(image), op);
}

void Worker::asyncWrite(Fiber* f, Mbarrier& b, uint64_t off, std::vector<unsigned char> data, int32_t op) {
  const uint64_t bytes = data.size();
  if (cfg->checkRaces) checkAsyncWrite(*this, f, off, bytes, op);
  // From here on nothing aborts: the copy's bytes belong to the Worker.
  b.copies.push_back(TmaCopy{off, std::move(data), op, f->linear});
  markInFlight(AsyncCopy{off, nullptr, static_cast<uint32_t>(bytes), 0, op, 0}, +1);
  if (!shadow.empty())
    for (uint64_t i = off; i < off + bytes; ++i) {
      shadow[i].aThread = static_cast<uint16_t>(f->linear);
      shadow[i].aOp = op;
      shadow[i].aTma = 1;
    }
  ++f->tmaCopies;
  if (b.pending == 0) completePhase(f, b);  // arrivals came first: the copy completes now
}

/// Cluster launch control: the cancellation is decided at the issue, from
/// the counter the host threads take clusters from, so a cancelled cluster
/// is one no host thread has started and none ever will; its response
/// then travels like a TMA copy's bytes.
void Worker::clcTryCancel(Fiber* f, void* response, void* bar, int32_t op) {
  Mbarrier& b = mbarrier(f, bar, "clusterlaunchcontrol.try_cancel", op);
  const uint64_t off = reinterpret_cast<uintptr_t>(response) - reinterpret_cast<uintptr_t>(shared);
  if (off > sharedBytes || sharedBytes - off < 16 || off % 16 != 0)
    tmaMisuse(*this, f, op, [&] {
      return "clusterlaunchcontrol.try_cancel with its response at shared offset " +
             std::to_string(static_cast<int64_t>(off)) + " (16 bytes, 16-byte aligned, inside the block's " +
             str(sharedBytes) + " bytes of shared memory)";
    });
  if (clcFailed)
    tmaMisuse(*this, f, op, [&] {
      return std::string(
          "clusterlaunchcontrol.try_cancel after a request of this block failed (no cluster was left to cancel); "
          "a further request is undefined: stop asking once one fails");
    });
  const uint64_t c = L->nextCluster.fetch_add(1, std::memory_order_relaxed);
  const bool ok = c < L->nClusters;
  int32_t first[3] = {0, 0, 0};
  if (ok) {
    // The cluster's first block, as Cluster::run numbers them.
    const uint32_t* dim = cfg->cluster;
    const uint64_t n0 = cfg->grid[0] / dim[0], n1 = cfg->grid[1] / dim[1];
    const uint64_t id[3] = {c % n0, c / n0 % n1, c / (n0 * n1)};
    for (int d = 0; d < 3; ++d) first[d] = static_cast<int32_t>(id[d] * dim[d]);
    ++blocksCancelled;
  } else {
    clcFailed = true;
  }
  std::vector<unsigned char> r(16, 0);
  std::memcpy(r.data(), first, sizeof first);
  const int32_t flag = ok ? TESSERA_EMU_CLC_CANCELLED : 0;
  std::memcpy(r.data() + 12, &flag, sizeof flag);
  asyncWrite(f, b, off, std::move(r), op);
}

/// A tile store (cp.async.bulk.tensor ... global.shared::cta, committed and
/// waited for in the same instruction sequence): performed at once, a
/// legal execution of it. Its reads of shared memory are checked as the
/// issuing thread's (the writers' barrier must come before); elements
/// outside the tensor's dims are not written, as the hardware clips them.
void Worker::tmaStore(Fiber* f, const void* src, const void* mapPtr, const int32_t c[2], int32_t op) {
  auto bad = [&](const auto& why) { tmaMisuse(*this, f, op, [&] { return "cp.async.bulk.tensor store " + why(); }); };
  const TensorMap m = checkedTensorMap(f, mapPtr, 2, op);
  const uint64_t E = m.elemBytes;
  if (m.swizzleBytes != 0)
    bad([] { return std::string("with a swizzled tensor map (the model stores unswizzled boxes)"); });
  const uint64_t rowBytes = m.box[0] * E, bytes = rowBytes * m.box[1];
  const uint64_t off = reinterpret_cast<uintptr_t>(src) - reinterpret_cast<uintptr_t>(shared);
  if (off > sharedBytes || bytes > sharedBytes - off)
    bad([&] {
      return "of " + str(bytes) + " bytes from shared offset " + std::to_string(static_cast<int64_t>(off)) +
             ", outside the block's " + str(sharedBytes) + " bytes of shared memory";
    });
  if (off % 128 != 0) bad([&] { return "source at shared offset " + str(off) + " is not 128-byte aligned"; });
  if (cfg->checkRaces) checkRace(f, off, bytes, TESSERA_EMU_LOAD, op);
  auto limit = [&](int d) {
    return static_cast<int64_t>(std::min<uint64_t>(m.dims[d], std::numeric_limits<int64_t>::max()));
  };
  auto* global = reinterpret_cast<unsigned char*>(static_cast<uintptr_t>(m.global));
  for (uint64_t y = 0; y < m.box[1]; ++y) {
    const int64_t gy = int64_t{c[1]} + static_cast<int64_t>(y);
    if (gy < 0 || gy >= limit(1)) continue;
    const int64_t xlo = std::max<int64_t>(0, -int64_t{c[0]});
    const int64_t xhi = std::min<int64_t>(static_cast<int64_t>(m.box[0]), limit(0) - c[0]);
    if (xlo >= xhi) continue;
    unsigned char* row = global + static_cast<uint64_t>(gy) * m.strides[1];
    const unsigned char* from = shared + off + y * rowBytes;
    for (int64_t x = xlo; x < xhi; ++x) {
      void* at = row + static_cast<uint64_t>(c[0] + x) * m.strides[0];
      std::memcpy(globalAccess(f, at, E, TESSERA_EMU_STORE, op), from + static_cast<uint64_t>(x) * E, E);
    }
  }
}

/// The phase's arrivals have all come: its copies are performed, and the
/// phase completes once they delivered every byte expect_tx announced.
void Worker::completePhase(Fiber* f, Mbarrier& b) {
  // Checked before any copy is performed, so an abort leaves every copy
  // (and its in-flight mark) for resetMbarriers to drop exactly once.
  int64_t delivered = 0;
  for (const TmaCopy& c : b.copies) {
    delivered += static_cast<int64_t>(c.data.size());
    if (delivered > b.tx)
      tmaMisuse(*this, f, c.op, [&] {
        return "TMA copies deliver " + std::to_string(delivered) + " bytes to the mbarrier at shared offset " +
               str(b.off) + " (initialised by " + opLabel(*cfg, b.initOp) + ") whose phase " + str(b.phase) +
               " expects only " + std::to_string(b.tx) + " (expect_tx announced fewer bytes than the copies deliver)";
      });
  }
  for (const TmaCopy& c : b.copies) {
    const uint64_t n = c.data.size();
    markInFlight(AsyncCopy{c.dstOff, nullptr, static_cast<uint32_t>(n), 0, c.op, 0}, -1);
    // Written past the race shadow on purpose: the async proxy's write is
    // ordered before every read by a thread that waited on this phase.
    std::memcpy(shared + c.dstOff, c.data.data(), n);
    --fibers[c.thread].tmaCopies;
  }
  b.tx -= delivered;
  b.copies.clear();
  if (b.tx != 0 || b.pending != 0) return;  // bytes still announced: waiters stay parked
  // A phase completed by several threads' arrivals (a warp-specialised
  // pipeline's consumers releasing a slot) orders their accesses before
  // the arrivals ahead of whatever its waiters do next: as a block barrier
  // does for the race shadow. Conservative, as for counted barriers: the
  // accesses of threads that did not arrive are ordered too, which may hide
  // a race, never invent one.
  if (b.expected > 1) ++epoch;
  ++b.phase;
  b.pending = b.expected;
  for (uint32_t i : b.waiters) push(i);
  b.waiters.clear();
}

void Worker::resetMbarriers() {
  // An aborted block (or a thread that exited without waiting) may leave
  // copies behind: drop their in-flight marks with them.
  for (const auto& [off, b] : mbarriers)
    for (const TmaCopy& c : b.copies)
      markInFlight(AsyncCopy{c.dstOff, nullptr, static_cast<uint32_t>(c.data.size()), 0, c.op, 0}, -1);
  mbarriers.clear();
}

void Worker::tmaOnExit(Fiber* f) {
  for (const auto& [off, b] : mbarriers)
    for (const TmaCopy& c : b.copies) {
      if (c.thread != f->linear) continue;
      report(IssueKind::AsyncCopyMisuse, f->linear, -1, c.op, -1, [&] {
        return where(f->linear) + ": the thread exits with " + str(f->tmaCopies) +
               " TMA copies it issued not yet performed, first of " + str(c.data.size()) + " bytes to shared offset " +
               str(c.dstOff) + " [" + opLabel(*cfg, c.op) + "] on the mbarrier at shared offset " + str(off) +
               " whose phase " + str(b.phase) + " still lacks " + std::to_string(b.pending) +
               " arrivals; wait for the phase before the kernel returns";
      });
      return;  // never performed; the in-flight marks stay until the next block
    }
}

std::string Worker::mbarrierWaits() const {
  std::ostringstream os;
  for (const auto& [off, b] : mbarriers) {
    if (b.waiters.empty()) continue;
    int64_t inCopies = 0;  // bytes of copies issued and not yet performed
    for (const TmaCopy& c : b.copies) inCopies += static_cast<int64_t>(c.data.size());
    const int64_t missing = b.tx - inCopies;
    os << "; " << b.waiters.size() << " threads wait on the mbarrier at shared offset " << off << " (initialised by "
       << opLabel(*cfg, b.initOp) << ") for the phase of parity " << (b.phase & 1) << " (phase " << b.phase
       << "), which lacks";
    if (b.pending > 0) os << " " << b.pending << " of its " << b.expected << " arrivals" << (missing > 0 ? " and" : "");
    if (missing > 0)
      os << " " << missing << " bytes of transactions (expect_tx announced " << missing
         << " bytes more than the copies delivered)";
    if (missing < 0) os << " (its copies carry " << -missing << " bytes more than expect_tx announced)";
  }
  return os.str();
}

}  // namespace tessera::emu::detail

// ---- hooks --------------------------------------------------------------------
using tessera::emu::detail::current;
using tessera::emu::detail::Fiber;

extern "C" {

void tessera_emu_mbarrier_init(void* bar, int32_t count, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->mbarrierInit(f, bar, count, opId);
}

void tessera_emu_mbarrier_expect_tx(void* bar, int32_t bytes, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->mbarrierExpectTx(f, bar, bytes, opId);
}

void tessera_emu_tma_load(void* dst, const void* map, int32_t rank, int32_t c0, int32_t c1, int32_t c2, void* bar,
                          int32_t opId) {
  Fiber* f = current(__func__);
  const int32_t c[3] = {c0, c1, c2};
  f->w->tmaLoad(f, dst, map, rank, c, bar, opId);
}

void tessera_emu_tma_store(const void* src, const void* map, int32_t c0, int32_t c1, int32_t opId) {
  Fiber* f = current(__func__);
  const int32_t c[2] = {c0, c1};
  f->w->tmaStore(f, src, map, c, opId);
}

void tessera_emu_clc_try_cancel(void* response, void* bar, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->clcTryCancel(f, response, bar, opId);
}

void tessera_emu_mbarrier_arrive(void* bar, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->mbarrierArrive(f, bar, opId);
}

int32_t tessera_emu_mbarrier_try_wait(void* bar, int32_t parity, int32_t opId) {
  Fiber* f = current(__func__);
  return f->w->mbarrierTryWait(f, bar, parity, opId);
}

}  // extern "C"

// Asynchronous copies (cp.async): recorded at issue, performed when a
// wait_group retires their group, their shared bytes in flight meanwhile.
#include <cstring>
#include <string>

#include "EmulatorImpl.h"

namespace tessera::emu::detail {

/// Counts a copy's shared bytes in (+1) or out (-1) of flight.
void Worker::markInFlight(const AsyncCopy& c, int delta) {
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
void Worker::cpAsync(Fiber* f, void* dst, const void* src, int32_t bytes, int32_t srcBytes, int32_t op) {
  if (bytes != 4 && bytes != 8 && bytes != 16)
    misuse(f, [&] { return "cp.async of " + std::to_string(bytes) + " bytes (4, 8 or 16 only)"; });
  if (srcBytes < 0 || srcBytes > bytes)
    misuse(f, [&] {
      return "cp.async with src-size " + std::to_string(srcBytes) + " for a copy of " + std::to_string(bytes) +
             " bytes";
    });
  const uint64_t off = reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(shared);
  if (off < sharedBytes && off % static_cast<uint64_t>(bytes) != 0)
    misuse(f, [&] {
      return "cp.async destination at shared offset " + std::to_string(off) + " is not aligned to its " +
             std::to_string(bytes) + " bytes";
    });
  if (srcBytes > 0 && reinterpret_cast<uintptr_t>(src) % static_cast<uintptr_t>(bytes) != 0)
    misuse(f, [&] {
      return "cp.async source " + hex(reinterpret_cast<uintptr_t>(src)) + " is not aligned to its " +
             std::to_string(bytes) + " bytes";
    });
  // Bounds are checked now (the report then names the issuing op); an
  // out-of-bounds copy is dropped.
  bool ok = true;
  if (off > sharedBytes || static_cast<uint64_t>(bytes) > sharedBytes - off) {
    sharedAccess(f, dst, static_cast<uint64_t>(bytes), TESSERA_EMU_STORE, op);
    ok = false;
  } else if (cfg->checkRaces) {
    checkRace(f, off, static_cast<uint64_t>(bytes), TESSERA_EMU_STORE, op);
  }
  if (srcBytes > 0 &&
      globalAccess(f, const_cast<void*>(src), static_cast<uint64_t>(srcBytes), TESSERA_EMU_LOAD, op) != src)
    ok = false;
  if (!ok) return;
  AsyncCopy c{off, src, static_cast<uint32_t>(bytes), static_cast<uint32_t>(srcBytes), op, f->commits};
  markInFlight(c, +1);
  if (!shadow.empty())
    for (uint64_t i = off; i < off + c.bytes; ++i) {
      shadow[i].aThread = static_cast<uint16_t>(f->linear);
      shadow[i].aOp = op;
      shadow[i].aTma = 0;
    }
  f->asyncCopies.push_back(c);
}

/// cp.async.wait_group: performs the copies of every committed group but
/// the newest `pending`, in issue order. Each is a write of its shared
/// bytes by the thread now (racing with other threads' accesses in this
/// barrier interval), counted for the bank model as the copy's op.
void Worker::cpAsyncWait(Fiber* f, int32_t pending) {
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

}  // namespace tessera::emu::detail

// ---- hooks --------------------------------------------------------------------
using tessera::emu::detail::current;
using tessera::emu::detail::Fiber;

extern "C" {

void tessera_emu_cp_async(void* dst, const void* src, int32_t bytes, int32_t srcBytes, int32_t opId) {
  Fiber* f = current(__func__);
  f->w->cpAsync(f, dst, src, bytes, srcBytes, opId);
}

void tessera_emu_cp_async_commit(void) { ++current(__func__)->commits; }

void tessera_emu_cp_async_wait(int32_t pending) {
  Fiber* f = current(__func__);
  f->w->cpAsyncWait(f, pending);
}

}  // extern "C"

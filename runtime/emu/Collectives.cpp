// Warp collectives: the rendezvous of a warp's lanes (shuffles, votes,
// ballots, AMD cross-lane ops) and the matrix instructions, whose arithmetic
// is in Matrix.cpp; the collective hooks.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "EmulatorImpl.h"
#include "SmemDescriptor.h"
#include "Matrix.h"

namespace tessera::emu::detail {

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
    case Coll::Wgmma: return "wgmma.mma_async";
    case Coll::Mfma: return "mfma";
    case Coll::Wmma: return "wmma";
  }
  return "?";
}

uint64_t Worker::collective(Fiber* f, Coll kind, int32_t mode, uint64_t mask, int32_t value, int32_t b, int32_t c) {
  Warp& wp = warps[f->warp];
  const uint64_t bit = uint64_t{1} << f->lane;
  if (isWaveWide(kind)) {
    mask = 0;  // the group is decided at completion: the live lanes then
  } else {
    if (L->W < 64) mask &= (uint64_t{1} << L->W) - 1;
    if (!(mask & bit))
      misuse(f, [&] {
        return std::string(collName(kind)) + " with member mask " + hex(mask) +
               " that does not name the executing lane";
      });
    mask &= wp.live;  // lanes past the end of a partial warp never exist
    if (mask & wp.exited)
      misuse(f, [&] {
        return std::string(collName(kind)) + " with member mask " + hex(mask) + " names exited lanes " +
               hex(mask & wp.exited);
      });
  }
  // Lanes already waiting must be in the same collective, or in a disjoint one.
  for (uint64_t wl = wp.waiting; wl; wl &= wl - 1) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(wl));
    const Deposit& o = wp.dep[l];
    bool overlaps = isWaveWide(kind) || isWaveWide(o.kind) || (o.mask & bit) || (mask & (uint64_t{1} << l));
    if (!overlaps) continue;
    if (o.kind != kind || o.mask != mask || o.mode != mode)
      misuse(f, [&] {
        return std::string(collName(kind)) + " (mode " + std::to_string(mode) + ", mask " + hex(mask) +
               ") while lane " + std::to_string(l) + " waits in " + collName(o.kind) + " (mode " +
               std::to_string(o.mode) + ", mask " + hex(o.mask) +
               "): lanes of one collective must execute the same instruction with the same mask";
      });
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
void Worker::complete(Fiber* self, uint32_t warpIdx, uint64_t group) {
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
          case TESSERA_EMU_SHFL_UP:
            j = lane - bval;
            p = j >= maxLane;
            break;
          case TESSERA_EMU_SHFL_DOWN:
            j = lane + bval;
            p = j <= maxLane;
            break;
          case TESSERA_EMU_SHFL_BFLY:
            j = lane ^ bval;
            p = j <= maxLane;
            break;
          case TESSERA_EMU_SHFL_IDX:
            j = minLane | (bval & ~seg);
            p = j <= maxLane;
            break;
          default: break;  // rejected at the hook
        }
        if (!p) j = lane;
        if (!(group >> j & 1)) {
          misuse(&fibers[warpIdx * W + l], [&] {
            return "shfl.sync: lane " + std::to_string(l) + " reads lane " + std::to_string(j) +
                   ", which is not in the member mask " + hex(group) + " (its value is undefined)";
          });
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
      case Coll::Ldmatrix:
      case Coll::Mma:
      case Coll::Wgmma:
      case Coll::Mfma:
      case Coll::Wmma: break;  // completeMatrix
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

void Worker::wake(Fiber* self, uint32_t warpIdx, uint64_t group) {
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
void Worker::completeMatrix(Fiber* self, uint32_t warpIdx, uint64_t group, Coll kind) {
  Warp& wp = warps[warpIdx];
  const uint32_t W = L->W;
  const uint64_t full = W == 64 ? ~uint64_t{0} : (uint64_t{1} << W) - 1;
  const uint32_t first = static_cast<uint32_t>(std::countr_zero(group));
  Fiber* blame = &fibers[warpIdx * W + first];
  if (group != full)
    misuse(blame, [&] {
      return std::string(collName(kind)) + " executed by lanes " + hex(group) +
             " only: the whole warp must execute it (a partial or exited warp cannot)";
    });
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
  } else if (kind == Coll::Wgmma) {
    completeWgmma(blame, warpIdx, mode);
  } else {
    detail::LaneFrag lanes[64];
    for (uint32_t l = 0; l < W; ++l)
      lanes[l] = {static_cast<const uint32_t*>(wp.dep[l].pa), static_cast<const uint32_t*>(wp.dep[l].pb),
                  static_cast<const float*>(wp.dep[l].pc), static_cast<float*>(wp.dep[l].pd)};
    if (kind == Coll::Mma)
      detail::mmaSync(mode, lanes);
    else if (kind == Coll::Mfma)
      detail::mfma(mode, lanes);
    else
      detail::wmma(mode, lanes);
  }
  wake(self, warpIdx, group);
}

/// wgmma.mma_async of one warp (every lane deposited; see the hook): B read
/// from shared memory as the descriptor says (PTX ISA, "Matrix Descriptor
/// Format" and the canonical K-major layouts), each 16-byte piece a checked
/// shared access blamed on the warp's first lane.
void Worker::completeWgmma(Fiber* blame, uint32_t warpIdx, int32_t mode) {
  Warp& wp = warps[warpIdx];
  const auto* d0 = static_cast<const WgmmaOperand*>(wp.dep[0].pb);
  for (uint32_t l = 1; l < 32; ++l) {
    const auto* dl = static_cast<const WgmmaOperand*>(wp.dep[l].pb);
    if (dl->desc != d0->desc)
      misuse(blame, [&] {
        return "wgmma.mma_async: lane " + std::to_string(l) + " passes the B descriptor " + hex(dl->desc) +
               ", lane 0 " + hex(d0->desc) + " (the descriptor must be the same in every lane)";
      });
  }
  const int n = mode & 0x1ff;  // below the flags
  // The start address is bits 4-17 of the operand's shared-window address,
  // which the machine's ptrtoint gives as the offset into `shared`
  // (lowerSharedMemory).
  const SmemDescriptor bd = SmemDescriptor::wgmma(d0->desc);
  // fp8 (m64nNk32): K-major B only, A from registers; 32 one-byte k per row
  // of B^T, the same 32 bytes a 16-bit k-step reads.
  const bool fp8 = (mode & TESSERA_EMU_WGMMA_FP8) != 0;
  if (fp8 && (mode & (TESSERA_EMU_WGMMA_TRANS_B | TESSERA_EMU_WGMMA_A_SHARED | TESSERA_EMU_WGMMA_BF16)))
    misuse(blame,
           [] { return std::string("wgmma.mma_async: an fp8 form with imm-trans-b, A in shared memory or bf16"); });
  const int kInstr = fp8 ? 32 : 16, eb = fp8 ? 1 : 2, perPiece = 16 / eb;
  std::vector<uint16_t> B(static_cast<size_t>(16 * n));
  std::vector<uint8_t> B8(fp8 ? static_cast<size_t>(32 * n) : 0);
  std::vector<uint64_t> readsAt;  // the 16-byte pieces read, in flight until the wait
  // One 16-byte piece (16 / eb consecutive elements) at logical address
  // `a`: swizzled, checked, copied to B(k0 + step * e, n0 + (1 - step) * e)...
  auto piece = [&](const SmemDescriptor& sd, uint64_t a) {
    a = sd.swizzled(a);
    readsAt.push_back(a);
    return static_cast<const unsigned char*>(sharedAccess(blame, shared + a, 16, TESSERA_EMU_LOAD, d0->op));
  };
  auto toB = [&](const unsigned char* p, int k0, int n0, bool alongN) {
    for (int e = 0; e < perPiece; ++e) {
      const size_t at = static_cast<size_t>((k0 + (alongN ? 0 : e)) * n + n0 + (alongN ? e : 0));
      if (fp8)
        B8[at] = p[e];
      else
        std::memcpy(&B[at], p + 2 * e, 2);
    }
  };
  const auto u = [](int v) { return static_cast<uint64_t>(v); };
  if (!(mode & TESSERA_EMU_WGMMA_TRANS_B)) {
    for (int j = 0; j < n; ++j)
      for (int k0 = 0; k0 < kInstr; k0 += perPiece) toB(piece(bd, bd.kMajor(u(j), u(k0 * eb))), k0, j, false);
  } else {
    for (int k = 0; k < 16; ++k)
      for (int n0 = 0; n0 < n; n0 += 8) toB(piece(bd, bd.nMajor(u(k), u(n0 * 2))), k, n0, true);
  }
  // A from shared memory: this warp's 16 of the warpgroup's 64 K-major
  // rows (16 (warp % 4) on), read as B^T is in the K-major case.
  std::vector<uint16_t> A;
  if (mode & TESSERA_EMU_WGMMA_A_SHARED) {
    uint64_t aDesc;
    std::memcpy(&aDesc, wp.dep[0].pa, 8);
    for (uint32_t l = 1; l < 32; ++l) {
      uint64_t other;
      std::memcpy(&other, wp.dep[l].pa, 8);
      if (other != aDesc)
        misuse(blame, [&] {
          return "wgmma.mma_async: lane " + std::to_string(l) + " passes the A descriptor " + hex(other) + ", lane 0 " +
                 hex(aDesc) + " (the descriptor must be the same in every lane)";
        });
    }
    const SmemDescriptor ad = SmemDescriptor::wgmma(aDesc);
    A.resize(16 * 16);
    const int base = 16 * static_cast<int>(warpIdx % 4);
    for (int r = 0; r < 16; ++r)
      for (int k0 = 0; k0 < 16; k0 += 8)
        std::memcpy(&A[static_cast<size_t>(r * 16 + k0)], piece(ad, ad.kMajor(u(base + r), u(k0 * 2))), 16);
  }
  detail::LaneFrag lanes[32];
  for (uint32_t l = 0; l < 32; ++l)
    lanes[l] = {static_cast<const uint32_t*>(wp.dep[l].pa), nullptr, static_cast<const float*>(wp.dep[l].pc),
                static_cast<float*>(wp.dep[l].pd)};
  if (fp8)
    detail::wgmmaFp8((mode & TESSERA_EMU_WGMMA_A_E5M2) != 0, (mode & TESSERA_EMU_WGMMA_B_E5M2) != 0, n, lanes,
                     B8.data());
  else
    detail::wgmma((mode & TESSERA_EMU_WGMMA_BF16) != 0, n, lanes, B.data(), A.empty() ? nullptr : A.data());
  // The values are computed at the issue (the operands as they are now);
  // the bytes stay read by the MMA until a wait retires its group: a write
  // of them before then is reported (checkRace), as the hardware may read
  // them at any time in between.
  for (uint64_t a : readsAt)
    if (a + 16 <= sharedBytes) {
      wp.wgmmaReads.push_back({static_cast<uint32_t>(a), d0->op, blame->wgmmaCommits, 0});
      markMmaRead(static_cast<uint32_t>(a), d0->op, static_cast<uint16_t>(blame->linear), +1);
    }
}

void Worker::markMmaRead(uint32_t off, int32_t op, uint16_t thread, int delta) {
  if (shadow.empty()) return;
  for (uint32_t i = off; i < off + 16 && i < shadow.size(); ++i) {
    Shadow& s = shadow[i];
    if (delta < 0) {
      if (s.mmaReads) --s.mmaReads;
    } else {
      ++s.mmaReads;
      s.mThread = thread;
      s.mOp = op;
    }
  }
}

void Worker::wgmmaWait(Fiber* f, int32_t pending) {
  if (pending < 0 || pending > 7)
    misuse(f, [&] { return "wgmma.wait_group " + std::to_string(pending) + " (0 to 7 only)"; });
  const uint64_t n = static_cast<uint64_t>(pending);
  const uint64_t retireBelow = f->wgmmaCommits > n ? f->wgmmaCommits - n : 0;
  // The warp's lanes wait together on the GPU; here they run one by one, so
  // a read is retired when every live lane of the warp has waited for it:
  // until then a write of its bytes, by any thread (a lane that has not
  // reached its wait included), is a race.
  Warp& wp = warps[f->warp];
  const uint64_t bit = uint64_t{1} << f->lane, all = wp.live & ~wp.exited;
  size_t keep = 0;
  for (WgmmaRead r : wp.wgmmaReads) {
    if (r.group < retireBelow) r.waited |= bit;
    if ((r.waited & all) != all) {
      wp.wgmmaReads[keep++] = r;
      continue;
    }
    markMmaRead(r.off, r.op, 0, -1);
  }
  wp.wgmmaReads.resize(keep);
}

/// Entry of the matrix hooks: validates the mode and the warp size,
/// deposits the fragment pointers and joins the warp's rendezvous.
void Worker::matrix(Fiber* f, Coll kind, int32_t mode, const void* a, const void* b, const void* c, void* d) {
  const uint32_t W = L->W;
  bool ok = false;
  switch (kind) {
    case Coll::Ldmatrix: {
      int n = mode & 7;
      ok = cfg->vendor == Vendor::NVIDIA && (n == 1 || n == 2 || n == 4) && (mode & ~15) == 0;
      break;
    }
    case Coll::Mma:
      // The block-scaled form: two element formats, the selectors.
      ok = cfg->vendor == Vendor::NVIDIA && mode >= 0 &&
           ((mode & TESSERA_EMU_MMA_BLOCK_SCALE)
                ? (mode & 0xFF) == TESSERA_EMU_MMA_BLOCK_SCALE && (mode >> 10 & 3) <= 1 &&
                      (mode >> 16 & 7) <= TESSERA_EMU_MXF_E2M1 && (mode >> 19 & 7) <= TESSERA_EMU_MXF_E2M1 &&
                      // m16n8k64 (kind::mxf4 or mxf4nvf4): e2m1 x e2m1;
                      // scale_vec::4X: byte-ids 0.
                      (mode >> 22 == 0 ||
                       ((mode >> 22 == 1 || (mode >> 22 == 2 && (mode >> 8 & 3) == 0 && (mode >> 12 & 3) == 0)) &&
                        (mode >> 16 & 0x3F) == (TESSERA_EMU_MXF_E2M1 | TESSERA_EMU_MXF_E2M1 << 3)))
                : mode <= TESSERA_EMU_MMA_M16N8K32_E5M2_E5M2);
      break;
    case Coll::Wgmma: {
      const int n = mode & ~(TESSERA_EMU_WGMMA_BF16 | TESSERA_EMU_WGMMA_TRANS_B | TESSERA_EMU_WGMMA_A_SHARED |
                             TESSERA_EMU_WGMMA_FP8 | TESSERA_EMU_WGMMA_A_E5M2 | TESSERA_EMU_WGMMA_B_E5M2);
      ok = cfg->vendor == Vendor::NVIDIA && W == 32 && n >= 8 && n <= 256 && n % 8 == 0;
      break;
    }
    case Coll::Mfma:
      ok = cfg->vendor == Vendor::AMD && W == 64 &&
           ((mode >= 0 && mode <= TESSERA_EMU_MFMA_16X16X32_BF16) ||
            (mode & ~(TESSERA_EMU_MFMA_A_BF8 | TESSERA_EMU_MFMA_B_BF8)) == TESSERA_EMU_MFMA_16X16X32_OCP_F8 ||
            detail::mfmaF8F6F4Known(mode));
      break;
    case Coll::Wmma: ok = cfg->vendor == Vendor::AMD && W == 32 && detail::wmmaKnown(mode); break;
    default: break;
  }
  if (!ok)
    misuse(f, [&] {
      return std::string(collName(kind)) + " with mode " + std::to_string(mode) + " is not an instruction of " +
             (cfg->vendor == Vendor::NVIDIA ? "NVIDIA" : "AMD") + " warps of " + std::to_string(W) + " lanes";
    });
  Deposit& dep = warps[f->warp].dep[f->lane];
  dep.pa = a;
  dep.pb = b;
  dep.pc = c;
  dep.pd = d;
  const uint64_t all = W == 64 ? ~uint64_t{0} : (uint64_t{1} << W) - 1;
  collective(f, kind, mode, isWaveWide(kind) ? 0 : all, 0, 0, 0);
}

}  // namespace tessera::emu::detail

// ---- hooks --------------------------------------------------------------------
using tessera::emu::detail::Coll;
using tessera::emu::detail::current;
using tessera::emu::detail::Fiber;

extern "C" {

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
      w->misuse(f, [&] {
        return "ldmatrix row address at shared offset " + std::to_string(off) + " is not 16-byte aligned";
      });
    row = w->sharedAccess(f, rowAddr, 16, TESSERA_EMU_LOAD, opId);
  }
  w->matrix(f, Coll::Ldmatrix, mode, row, nullptr, nullptr, out);
}

void tessera_emu_mma_sync(int32_t mode, const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  Fiber* f = current(__func__);
  f->w->matrix(f, Coll::Mma, mode, a, b, c, d);
}

void tessera_emu_wgmma(int32_t mode, const uint32_t* a, uint64_t desc, const float* c, float* d, int32_t opId) {
  Fiber* f = current(__func__);
  // Lives on this lane's fiber stack until the warp completes.
  const tessera::emu::detail::WgmmaOperand b{desc, opId};
  f->w->matrix(f, Coll::Wgmma, mode, a, &b, c, d);
}

void tessera_emu_wgmma_commit(void) { ++current(__func__)->wgmmaCommits; }

void tessera_emu_wgmma_wait(int32_t pending) {
  Fiber* f = current(__func__);
  f->w->wgmmaWait(f, pending);
}

void tessera_emu_mfma(int32_t mode, const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  Fiber* f = current(__func__);
  f->w->matrix(f, Coll::Mfma, mode, a, b, c, d);
}

void tessera_emu_wmma(int32_t mode, const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  Fiber* f = current(__func__);
  f->w->matrix(f, Coll::Wmma, mode, a, b, c, d);
}

}  // extern "C"

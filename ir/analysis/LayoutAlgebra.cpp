// The layout algebra: blocked and MMA layouts, slices, the slots a thread
// holds of a shape, and the default and coalesced distributions of a tile
// over a block's threads. The analysis that assigns them to values is
// Layout.cpp.
#include "tessera/ir/analysis/Layout.h"

#include <algorithm>
#include <numeric>

#include "tessera/support/Error.h"

namespace tessera::ir {

namespace {
bool isPow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int64_t floorPow2(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
std::string list(const std::vector<int64_t>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}
bool divides(int64_t a, int64_t b) { return a > 0 && b % a == 0; }

}  // namespace

const char* mmaName(MmaKind k) {
  switch (k) {
    case MmaKind::None: return "none";
    case MmaKind::NvMmaM16N8K16: return "mma.m16n8k16";
    case MmaKind::AmdMfma16x16x16: return "mfma.16x16x16";
    case MmaKind::AmdWmma16x16x16: return "wmma.16x16x16";
    case MmaKind::NvMmaM16N8K32: return "mma.m16n8k32";
    case MmaKind::AmdMfma16x16x32: return "mfma.16x16x32";
    case MmaKind::AmdMfma32x32x8: return "mfma.32x32x8";
    case MmaKind::NvWgmmaM64K16: return "wgmma.m64nNk16";
    case MmaKind::NvWgmmaM64K32: return "wgmma.m64nNk32";
    case MmaKind::AmdMfma32x32x16: return "mfma.32x32x16";
    case MmaKind::AmdMfma16x16x128: return "mfma.16x16x128";
    case MmaKind::AmdMfma32x32x64: return "mfma.32x32x64";
    case MmaKind::AmdWmmaGfx12: return "wmma.gfx12.16x16x16";
    case MmaKind::NvTcgen05M64K16: return "tcgen05.m64nNk16";
    case MmaKind::NvTcgen05M64K32: return "tcgen05.m64nNk32";
  }
  return "?";
}

std::string BlockedLayout::str() const {
  if (mma != MmaKind::None)
    return std::string("#mma<") + mmaName(mma) + ", spt=" + list(spt) + ", tpw=" + list(tpw) + ", wpb=" + list(wpb) +
           ", order=" + list(order) + ">";
  return "#blocked<spt=" + list(spt) + ", tpw=" + list(tpw) + ", wpb=" + list(wpb) + ", order=" + list(order) + ">";
}

std::string Layout::str() const {
  if (!isSlice()) return parent.str();
  std::vector<int64_t> d(dims.begin(), dims.end());
  return "#slice<dims=" + list(d) + ", parent=" + parent.str() + ">";
}

Layout Layout::blocked(BlockedLayout b) {
  Layout l;
  l.dims.resize(static_cast<size_t>(b.rank()));
  std::iota(l.dims.begin(), l.dims.end(), 0);
  l.parent = std::move(b);
  return l;
}

Layout Layout::sliceDim(int i) const {
  Layout l = *this;
  l.dims.erase(l.dims.begin() + i);
  return l;
}

Layout Layout::withTrivialDim(int a) const {
  Layout l = *this;
  int q = a == 0 ? 0 : l.dims[a - 1] + 1;
  BlockedLayout& b = l.parent;
  b.spt.insert(b.spt.begin() + q, 1);
  b.tpw.insert(b.tpw.begin() + q, 1);
  b.wpb.insert(b.wpb.begin() + q, 1);
  for (auto& o : b.order)
    if (o >= q) ++o;
  b.order.push_back(q);
  for (auto& d : l.dims)
    if (d >= q) ++d;
  l.dims.insert(l.dims.begin() + a, q);
  return l;
}

bool compatible(const Layout& l, const std::vector<int64_t>& shape) {
  if (shape.size() != l.dims.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    int p = l.dims[i];
    int64_t s = shape[i], bt = l.parent.blockTile(p), spt = l.parent.spt[p];
    if (!(divides(bt, s) || divides(s, bt))) return false;
    if (!(divides(spt, s) || divides(s, spt))) return false;
  }
  return true;
}

SlotTable slotTable(const Layout& l, const std::vector<int64_t>& shape) {
  TS_ASSERT(compatible(l, shape), "layout " + l.str() + " does not apply to shape " + ir::shapeStr(shape));
  SlotTable t;
  t.shape = shape;
  size_t r = shape.size();
  t.perDim.resize(r);
  t.replicated.resize(r);
  t.distinctPos.resize(r);
  for (size_t i = 0; i < r; ++i) {
    int p = l.dims[i];
    int64_t s = shape[i], bt = l.parent.blockTile(p), spt = l.parent.spt[p];
    int64_t sptE = std::min(spt, s);
    int64_t reps = s > bt ? s / bt : 1;
    for (int64_t rep = 0; rep < reps; ++rep)
      for (int64_t k = 0; k < sptE; ++k) t.perDim[i].push_back(rep * bt + k);
    t.replicated[i] = bt > s;
    int64_t threads = l.parent.tpw[p] * l.parent.wpb[p];
    t.distinctPos[i] = s >= bt ? threads : std::max<int64_t>(1, s / spt);
  }
  // Row-major enumeration of the per-dim lists.
  std::vector<size_t> it(r, 0);
  while (true) {
    std::vector<int64_t> c(r);
    for (size_t i = 0; i < r; ++i) c[i] = t.perDim[i][it[i]];
    t.index[c] = t.consts.size();
    t.consts.push_back(std::move(c));
    int d = static_cast<int>(r) - 1;
    while (d >= 0 && ++it[d] == t.perDim[d].size()) it[d--] = 0;
    if (d < 0) break;
  }
  return t;
}

BlockedLayout defaultBlocked(const std::vector<int64_t>& shape, int64_t vec, int numWarps, int warpSize,
                             VectorCap cap) {
  return coalescedBlocked(shape, vec, static_cast<int>(shape.size()) - 1, numWarps, warpSize, cap);
}

BlockedLayout coalescedBlocked(const std::vector<int64_t>& shape, int64_t vec, int fastDim, int numWarps, int warpSize,
                               VectorCap cap) {
  int r = static_cast<int>(shape.size());
  BlockedLayout b;
  b.spt.assign(r, 1);
  b.order.push_back(fastDim);
  for (int k = 0; k < r; ++k)
    if (r - 1 - k != fastDim) b.order.push_back(r - 1 - k);
  // Dims that are not powers of two are held whole by every thread, so the
  // extents always nest with the parameters.
  for (int d = 0; d < r; ++d)
    if (!isPow2(shape[d])) b.spt[d] = shape[d];
  // Vector accesses run along the last dim only, narrowed as `cap` says (see
  // VectorCap in Layout.h). Threads go along the power-of-two dims, so those
  // hold `spread` elements to share out; with spt[r-1] <= spread / threads,
  // distributeBlocked places every lane and warp inside the tile (all
  // factors are powers of two) and no element has two threads.
  if (fastDim == r - 1 && isPow2(shape[r - 1])) {
    b.spt[r - 1] = std::min<int64_t>(floorPow2(std::max<int64_t>(1, vec)), shape[r - 1]);
    int64_t spread = 1;
    for (int64_t s : shape)
      if (isPow2(s)) spread *= s;
    const int64_t threads = int64_t{numWarps} * warpSize;
    const int64_t perThread = floorPow2(std::max<int64_t>(1, spread / threads));
    if (cap == VectorCap::FewestCopies || (cap == VectorCap::NoAvoidableCopies && spread >= threads))
      b.spt[r - 1] = std::min(b.spt[r - 1], perThread);
  }
  return distributeBlocked(shape, std::move(b.spt), std::move(b.order), numWarps, warpSize);
}

BlockedLayout distributeBlocked(const std::vector<int64_t>& shape, std::vector<int64_t> spt, std::vector<int64_t> order,
                                int numWarps, int warpSize) {
  int r = static_cast<int>(shape.size());
  BlockedLayout b;
  b.spt = std::move(spt);
  b.order = std::move(order);
  b.tpw.assign(r, 1);
  b.wpb.assign(r, 1);
  int64_t lanes = warpSize, warps = numWarps;
  for (int64_t d : b.order) {
    if (!isPow2(shape[d])) continue;
    int64_t avail = std::max<int64_t>(1, shape[d] / b.spt[d]);
    b.tpw[d] = std::min(lanes, avail);
    lanes /= b.tpw[d];
  }
  b.tpw[b.order.back()] *= lanes;  // leftover lanes replicate the slowest dim
  for (int64_t d : b.order) {
    if (!isPow2(shape[d])) continue;
    int64_t avail = std::max<int64_t>(1, shape[d] / (b.spt[d] * b.tpw[d]));
    b.wpb[d] = std::min(warps, avail);
    warps /= b.wpb[d];
  }
  b.wpb[b.order.back()] *= warps;
  return b;
}

std::optional<BlockedLayout> mmaLayout(MmaKind k, int64_t M, int64_t N, int64_t K, int numWarps, int warpSize,
                                       bool chained) {
  if (isNvWarpgroupPlaced(k)) {
    // One warpgroup instruction spans the whole N: all warps along M, in
    // whole warpgroups (the placement a chained dot gets); otherwise the
    // mma.sync layout as it would be.
    const bool fits = numWarps % 4 == 0 && M % (16 * int64_t{numWarps}) == 0 && N >= 16 && N <= 256;
    const MmaKind sync = mmaK(k) == 32 ? MmaKind::NvMmaM16N8K32 : MmaKind::NvMmaM16N8K16;
    auto l = mmaLayout(sync, M, N, K, numWarps, warpSize, fits || chained);
    if (l && fits) l->mma = k;
    return l;
  }
  if (k == MmaKind::AmdMfma32x32x8) {
    // The 32 x 32 instruction where every wave owns whole 32 x 32 tiles
    // (same operand bytes per flop as 16x16x16, half the instructions); the
    // 16x16x16 layout, whose K step it divides, elsewhere.
    auto l = mmaLayout(MmaKind::AmdMfma16x16x16, M, N, K, numWarps, warpSize, chained);
    if (!l || M % (32 * l->wpb[0]) != 0 || N % (32 * l->wpb[1]) != 0) return l;
    l->tpw = {32, 2};
    l->mma = MmaKind::AmdMfma32x32x8;
    return l;
  }
  if (k == MmaKind::AmdMfma32x32x16) {
    // gfx950: the 32 x 32 tiles as 32x32x8's; elsewhere 16x16x32 (half the
    // instructions of 16x16x16 for the same LDS bytes), or 16x16x16 where
    // K is not a multiple of 32. All three place the warps alike.
    auto l = mmaLayout(MmaKind::AmdMfma16x16x32, M, N, K, numWarps, warpSize, chained);
    if (!l) l = mmaLayout(MmaKind::AmdMfma16x16x16, M, N, K, numWarps, warpSize, chained);
    if (!l || M % (32 * l->wpb[0]) != 0 || N % (32 * l->wpb[1]) != 0) return l;
    l->tpw = {32, 2};
    l->mma = MmaKind::AmdMfma32x32x16;
    return l;
  }
  if (k == MmaKind::AmdMfma32x32x64) {
    // gfx950's fp8: the 32 x 32 tiles where K allows (a multiple of 64),
    // else 16x16x128 (a multiple of 128), else 16x16x32 (the instruction
    // of gfx942's placement, with a quarter of the K). All place the warps
    // alike.
    auto l = mmaLayout(MmaKind::AmdMfma16x16x128, M, N, K, numWarps, warpSize, chained);
    if (!l) l = mmaLayout(MmaKind::AmdMfma16x16x32, M, N, K, numWarps, warpSize, chained);
    if (!l || K % 64 != 0 || M % (32 * l->wpb[0]) != 0 || N % (32 * l->wpb[1]) != 0) return l;
    l->tpw = {32, 2};
    l->mma = MmaKind::AmdMfma32x32x64;
    return l;
  }
  if (k == MmaKind::None || !isPow2(M) || !isPow2(N) || !isPow2(K) || !isPow2(numWarps) || K % mmaK(k) != 0)
    return std::nullopt;
  const int64_t tileN = isNvMma(k) ? 8 : 16;
  const int wantWarp = isAmdMfma(k) ? 64 : 32;
  if (warpSize != wantWarp || M % 16 != 0 || N % tileN != 0) return std::nullopt;
  // Split the warps over M and N, giving each new factor of two to the dim
  // with more instruction tiles per warp (square warp tiles reuse the
  // fragments best); every warp must own whole instruction tiles.
  int64_t wm = 1, wn = 1;
  // A dot chained to another (flash attention's S = Q K^T feeding P V):
  // every warp owns whole rows of both products, so the row statistics
  // between them reduce within a warp (no shared memory), and the first
  // product's accumulator registers are already the second's A fragments
  // (NVIDIA; see mmaOperandALayout).
  if (chained && M % (16 * int64_t{numWarps}) == 0) wm = numWarps;
  while (wm * wn < numWarps) {
    bool canM = M % (16 * wm * 2) == 0, canN = N % (tileN * wn * 2) == 0;
    if (!canM && !canN) return std::nullopt;
    if (canM && (!canN || M / (16 * wm) >= N / (tileN * wn)))
      wm *= 2;
    else
      wn *= 2;
  }
  BlockedLayout b;
  b.wpb = {wm, wn};
  b.order = {1, 0};
  b.mma = k;
  switch (k) {
    case MmaKind::NvMmaM16N8K16:
    case MmaKind::NvMmaM16N8K32:
    case MmaKind::NvWgmmaM64K16:
    case MmaKind::NvWgmmaM64K32:
    case MmaKind::NvTcgen05M64K16:
    case MmaKind::NvTcgen05M64K32:
      b.spt = {1, 2};
      b.tpw = {8, 4};
      break;
    case MmaKind::AmdMfma16x16x16:
    case MmaKind::AmdMfma16x16x32:
    case MmaKind::AmdMfma32x32x8:
    case MmaKind::AmdMfma32x32x16:
    case MmaKind::AmdMfma16x16x128:
    case MmaKind::AmdMfma32x32x64:
      // The instruction is fed B^T as its A and A^T as its B, so it
      // computes C^T and each lane holds 4 consecutive columns of one row
      // (Triton's isTransposed MFMA layout): an f16 result is stored in 8-byte
      // runs, and a row reduction is 4 elements in-thread then 4 lanes. Lanes
      // (and warps) go along M first.
      b.spt = {1, 4};
      b.tpw = {16, 4};
      b.order = {0, 1};
      break;
    case MmaKind::AmdWmma16x16x16:
      b.spt = {1, 1};
      b.tpw = {2, 16};
      break;
    case MmaKind::AmdWmmaGfx12:
      // Swapped as the MFMAs are: the instruction's D register r of lane
      // (i, h) is C(row i, col r + 8h), eight consecutive columns.
      b.spt = {1, 8};
      b.tpw = {16, 2};
      b.order = {0, 1};
      break;
    case MmaKind::None: return std::nullopt;
  }
  return b;
}

std::optional<BlockedLayout> mmaOperandALayout(const BlockedLayout& acc) {
  if ((acc.mma != MmaKind::NvMmaM16N8K16 && acc.mma != MmaKind::NvWgmmaM64K16 && acc.mma != MmaKind::NvTcgen05M64K16) ||
      acc.rank() != 2 || acc.wpb[1] != 1)
    return std::nullopt;
  BlockedLayout b = acc;
  b.mma = MmaKind::None;
  return b;
}

}  // namespace tessera::ir

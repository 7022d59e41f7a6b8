// ts::for_tiles over a K-split schedule (Tiles::splitK, Tiles::streamK):
// the work units, and the fix-up that joins the partial tiles.
//
// The fix-up is a ticket per tile, never a wait: each unit of a split tile
// stores its f32 partial into its own workspace slot, releases it, and
// counts itself in on the tile's i32 flag with an acq_rel atomic add; the
// unit that draws the last ticket acquires every partial, adds them in the
// order of their K ranges (slot of the first range, + the next, ...), runs
// the epilogue and sets the flag back to 0 for the next launch. No unit
// waits for another, so the construct cannot deadlock on a grid whose
// programs run one after another (one CPU thread, more programs than an
// accelerator holds at once), and the sum's order is the same whichever
// unit arrives last: the result's bits depend on the split boundaries only.
// The atomics are on integers, so CompileOptions::deterministic accepts it.
#include <fmt/format.h>

#include "tessera/dsl/Tiles.h"

#include "DslImpl.h"
#include "TilesImpl.h"

namespace tessera {
namespace {

using namespace dsl::tiles;

/// The same tile as the epilogue sees it: the whole K range, split 0.
Tile whole(Tile t, const Ix& k) {
  t.kBegin = constant(0, k.loc).t;
  t.kEnd = k.t;
  t.split = constant(0, k.loc).t;
  return t;
}

/// Joins one unit's partial `acc` of tile `tile` with the tile's others:
/// `units` units contribute, unit i's partial lies in slot slotOf(i), this
/// unit's in `own`. Returns (whether this unit finished the tile, the sum
/// of the partials where it did).
std::pair<Tensor, Tensor> fixup(const Tiles& s, const Ix& tile, const Ix& own, const Ix& units,
                                const std::function<Ix(const Ix&)>& slotOf, const Tensor& acc, const SrcLoc& loc) {
  const int64_t bm = s.tileM(), bn = s.tileN();
  // A slot is one whole tile, row-major: the partial is stored unmasked
  // (the epilogue masks the output's edges). Every operand is an Operand
  // at `loc`, so each op records the user's for_tiles line.
  const Tensor at =
      Operand(Operand(expand_dims(arange(bm, loc), 1, loc), loc) * bn, loc) + expand_dims(arange(bn, loc), 0, loc);
  auto slot = [&](const Ix& i) { return Operand(Operand(s.partials(), loc) + (i * (bm * bn)).t, loc) + at; };
  const Tensor flag = Operand(s.flags(), loc) + tile.t;
  store(slot(own), acc, {}, loc);
  fence(MemOrder::Release, MemScope::Device, loc);
  const Ix ticket{atomic_add(flag, 1, {}, MemOrder::AcqRel, MemScope::Device, loc), loc};
  const Tensor last = ticket == units - 1;
  Tensor sum = if_else(
      last,
      [&] {
        // Every partial is visible: add them in their fixed order.
        Tensor first = load(slot(slotOf(constant(0, loc))), {}, {}, loc);
        Tensor total = for_range(
            1, units.t, 1, first,
            [&](Int i, Tensor part) { return Operand(part, loc) + load(slot(slotOf(Ix{i, loc})), {}, {}, loc); }, loc);
        store(flag, 0, {}, loc);  // ready for the next launch
        return total;
      },
      [&] { return acc; }, loc);
  return {last, sum};
}

void checkAccumulator(const Tiles& s, const Tensor& acc, const SrcLoc& loc) {
  if (acc.valid() && acc.isTile() && acc.dtype() == DType::F32 && acc.shape() == ir::Shape{s.tileM(), s.tileN()})
    return;
  dsl::fail(loc, fmt::format("for_tiles: the body must return the tile's f32 accumulator, tile<{}x{}xf32>; got {}",
                             s.tileM(), s.tileN(), acc.valid() ? dsl::typeStr(acc.type()) : std::string("no value")));
}

/// Split-K: unit u computes split u % S of tile u / S, iterations
/// [split x I / S, (split + 1) x I / S) of the tile's I = ceil(K / tileK).
void splitK(const Tiles& s, const Ix& k, const Ix& iters, const std::function<Tensor(const Tile&)>& body,
            const std::function<void(const Tile&, const Tensor&)>& epilogue, const SrcLoc& loc) {
  const int64_t S = s.splits(), tk = s.tileK();
  TileSpace(s, loc).eachUnit(S, [&](const Tile& base, const Ix& split) {
    Tile t = base;
    t.kBegin = min(split * iters / S * tk, k).t;
    t.kEnd = min((split + 1) * iters / S * tk, k).t;
    t.split = split.t;
    const Tensor acc = body(t);
    checkAccumulator(s, acc, loc);
    if (S == 1) return epilogue(whole(base, k), acc);
    const Ix tile{base.index, loc};
    auto [done, sum] =
        fixup(s, tile, tile * S + split, constant(S, loc), [&](const Ix& i) { return tile * S + i; }, acc, loc);
    if_else(done, [&] { epilogue(whole(base, k), sum); }, loc);
  });
}

/// Stream-K: the T x I iterations (tile after tile) cut into P shares,
/// program u owning [start(u), start(u + 1)) with start(u) = u q + min(u, r)
/// (q, r = T I / P, T I % P: the first r shares are one longer). A share
/// covers the end of one tile, whole tiles, and the start of another; a
/// tile it covers in part is joined with the shares that cover the rest.
/// Program u keeps two workspace slots: 2u for the tile its share starts in,
/// 2u + 1 for the one it ends in.
void streamK(const Tiles& s, const Ix& k, const Ix& iters, const std::function<Tensor(const Tile&)>& body,
             const std::function<void(const Tile&, const Tensor&)>& epilogue, const SrcLoc& loc) {
  const int64_t tk = s.tileK();
  const TileSpace space(s, loc);
  const Ix programs{num_programs(0, loc), loc}, u = space.program();
  const Ix total = space.count() * iters;
  const Ix q = total / programs, r = total % programs;
  auto startOf = [&](const Ix& v) { return v * q + min(v, r); };
  // The share holding iteration `it`: the first r shares hold q + 1.
  const Ix longEnd = r * (q + 1);
  auto shareOf = [&](const Ix& it) { return select(it < longEnd, it / (q + 1), r + (it - longEnd) / max(q, 1)); };
  const Ix start = startOf(u), end = startOf(u + 1);
  // The tiles the share touches; an empty share (more programs than
  // iterations) touches none.
  const Ix firstTile = start / iters;
  const Ix endTile = select(start < end, (end + (iters - 1)) / iters, firstTile);
  for_range(
      firstTile.t, endTile.t, 1,
      [&](Int tv) {
        const Ix tile{tv, loc};
        const Ix tb = tile * iters;
        space.at(tile, [&](const Tile& base) {
          Tile t = base;
          const Ix k0 = max(start, tb) - tb, k1 = min(end, tb + iters) - tb;
          const Ix first = shareOf(tb);
          t.kBegin = min(k0 * tk, k).t;
          t.kEnd = min(k1 * tk, k).t;
          t.split = (u - first).t;
          const Tensor acc = body(t);
          checkAccumulator(s, acc, loc);
          const Tensor wholeTile = (start <= tb) & (tb + iters <= end);
          auto [done, sum] = if_else(
              wholeTile, [&] { return std::tuple{wholeTile, acc}; },
              [&] {
                // Share v's part of this tile is the first of its share
                // (slot 2v) when v starts in the tile, else its last.
                auto slotOf = [&](const Ix& v) {
                  return v * 2 + select(startOf(v) < tb, constant(1, loc), constant(0, loc));
                };
                auto [last, joined] = fixup(
                    s, tile, slotOf(u), shareOf(tb + iters - 1) - first + 1,
                    [&](const Ix& i) { return slotOf(first + i); }, acc, loc);
                return std::tuple{last, joined};
              },
              loc);
          if_else(done, [&] { epilogue(whole(base, k), sum); }, loc);
        });
      },
      loc);
}

}  // namespace

namespace dsl {

void forTilesReducedImpl(const Tiles& s, const std::function<Tensor(const Tile&)>& body,
                         const std::function<void(const Tile&, const Tensor&)>& epilogue, const SrcLoc& loc) {
  if (s.split() == TileSplit::None)
    fail(loc,
         "for_tiles: an epilogue needs a K split: give the schedule splitK(S, K, tileK) (S = 1 for none) or "
         "streamK(K, tileK)");
  const bool joins = s.split() == TileSplit::StreamK || s.splits() > 1;
  if (joins && !s.hasWorkspace())
    fail(loc, fmt::format("for_tiles: {} joins partial tiles through a workspace: give the schedule "
                          ".workspace(partials, flags)",
                          s.split() == TileSplit::StreamK ? "streamK" : fmt::format("splitK({})", s.splits())));
  const Ix k = i32Of(s.k(), loc, "K");
  // An empty K still has one (empty) iteration per tile: its epilogue runs.
  const Ix iters = max(cdiv(k, s.tileK()), 1);
  if (s.split() == TileSplit::SplitK)
    splitK(s, k, iters, body, epilogue, loc);
  else
    streamK(s, k, iters, body, epilogue, loc);
}

}  // namespace dsl
}  // namespace tessera

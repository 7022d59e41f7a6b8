// ts::for_tiles (Tiles.h): a tile schedule traced as program_id, for_range
// and if_else. Every order maps the tile numbers 0 .. count-1 one to one
// onto the tiles (tests/dsl/tiles_test.cpp checks each by enumeration; the
// verify-tile-coverage pass checks the traced arithmetic itself over a
// family of sizes and grids, tests/dsl/tile_coverage_test.cpp), so
// the only way to miss or repeat a tile is a grid smaller than the count
// without persistent(), which the docs and Tiles::count address. The
// K-split schedules' work units and fix-up are in TilesSplit.cpp.
#include <fmt/format.h>

#include "tessera/dsl/Tiles.h"

#include "DslImpl.h"
#include "TilesImpl.h"

namespace tessera {

namespace dsl::tiles {

Ix i32Of(const Operand& o, const SrcLoc& loc, const char* what) {
  if (o.isLiteral()) {
    if (o.kind() != Operand::Kind::Int || o.intValue() < 0 || o.intValue() > INT32_MAX)
      dsl::fail(loc, fmt::format("for_tiles: {} must be a non-negative i32, got {}", what, o.str()));
    return constant(o.intValue(), loc);
  }
  const Tensor& t = o.tensor();
  if (!t.isScalar() || !isInteger(t.dtype()))
    dsl::fail(loc, fmt::format("for_tiles: {} must be an integer scalar, got {}", what, o.str()));
  return {t.to(DType::I32, loc), loc};
}

}  // namespace dsl::tiles

namespace {

using namespace dsl::tiles;

int64_t cdivHost(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The checks splitK and streamK share: K not split yet, a K step of at
/// least one element, K a non-negative i32 literal or an integer scalar.
void checkK(TileSplit split, const Operand& k, int64_t tileK, const char* fn, const SrcLoc& loc) {
  if (split != TileSplit::None) dsl::fail(loc, fmt::format("Tiles::{}: the schedule's K is already split", fn));
  if (tileK < 1 || tileK > INT32_MAX)
    dsl::fail(loc, fmt::format("Tiles::{}: a K step must be at least 1 element, got {}", fn, tileK));
  if (k.none()) dsl::fail(loc, fmt::format("Tiles::{}: K has no value", fn));
  if (k.isLiteral() && (k.kind() != Operand::Kind::Int || k.intValue() < 0 || k.intValue() > INT32_MAX))
    dsl::fail(loc, fmt::format("Tiles::{}: K must be a non-negative i32, got {}", fn, k.str()));
  if (k.isHandle() && (!k.tensor().isScalar() || !isInteger(k.tensor().dtype())))
    dsl::fail(loc, fmt::format("Tiles::{}: K must be an integer scalar, got {}", fn, k.str()));
}

// The numbering, written once for the traced i32 scalars (Ix) and for the
// host's integers (Tiles::coords and chipletProgram, which the performance
// model reads): the same expressions over either.
int64_t min(int64_t a, int64_t b) { return std::min(a, b); }
int64_t select(bool c, int64_t a, int64_t b) { return c ? a : b; }

template <class I>
struct Coords {
  I m, n;
};

/// Tile `t` (0 <= t < tm * tn) of a tm x tn space in the order.
template <class I>
Coords<I> coordsOf(TileOrder order, int64_t g, const I& t, const I& tm, const I& tn) {
  switch (order) {
    case TileOrder::Rows: return {t / tn, t % tn};
    case TileOrder::Columns: return {t % tm, t / tm};
    case TileOrder::Snake: {
      I m = t / tn, r = t % tn;
      return {m, select(m % 2 == 1, tn - 1 - r, r)};
    }
    case TileOrder::Grouped: {
      // Bands of g tile rows; the last band may be narrower.
      I perBand = tn * g;
      I first = (t / perBand) * g;
      I size = min(tm - first, g);
      I within = t % perBand;
      return {first + within % size, within / size};
    }
  }
  TS_ASSERT(false, "for_tiles: unknown tile order");
  return {t, t};
}

/// Program p of P as renumbered for X chiplets dealt programs round-robin
/// (p runs on chiplet p % X, as its (p / X)-th): chiplet c's programs take
/// the consecutive numbers from c * (P / X) + min(c, P % X) on, a bijection
/// of 0 .. P-1 (the first P % X chiplets have one program more).
template <class I>
I chipletOrder(const I& p, const I& P, const I& X) {
  I c = p % X, q = P / X, r = P % X;
  return c * q + select(c < r, c, r) + p / X;
}

/// The group of ragged tile `t`, found by a scan over the groups: its
/// number (-1 where t is past the last tile), its first tile number and its
/// rows [start, end); also the total tile count. Reversed (Tiles::reversed),
/// the scan runs from the last group down, so the groups' tiles are
/// numbered last group first; `first` is the schedule's number of the
/// group's first tile in that order (its last tile row, which at() maps
/// back).
struct GroupOf {
  Ix group, first, start, end, total;
};

GroupOf groupOf(const Tiles& s, const Ix& t, const Ix& tn) {
  const SrcLoc& loc = t.loc;
  const Ix groups = i32Of(s.groups(), loc, "the number of groups");
  const Operand off(s.offsets(), loc);
  const Ix zero = constant(0, loc), none = constant(-1, loc);
  auto [group, first, start, end, total] = for_range(
      0, groups.t, 1, std::tuple{none.t, zero.t, zero.t, zero.t, zero.t},
      [&](Tensor iv, Tensor found, Tensor f, Tensor st, Tensor en, Tensor acc) {
        const Ix g = s.isReversed() ? groups - 1 - Ix{iv, loc} : Ix{iv, loc}, sum{acc, loc};
        const Tensor gv = g.t;
        Ix lo{load(off + gv, {}, {}, loc), loc}, hi{load(off + (g + 1).t, {}, {}, loc), loc};
        // A checked launch rejects offsets a group could not be made of
        // (unchecked, a decreasing pair is a group of no rows).
        device_assert(Operand(lo >= 0, loc) & (hi >= lo),
                      "Tiles::ragged: the offsets must start at 0 or above and never decrease", loc);
        Ix tiles = cdiv(hi - lo, s.tileM()) * tn;
        Tensor hit = (t >= sum) & (t < sum + tiles);
        return std::tuple{where(hit, gv, found, loc), where(hit, acc, f, loc), where(hit, lo.t, st, loc),
                          where(hit, hi.t, en, loc), (sum + tiles).t};
      },
      loc);
  return {{group, loc}, {first, loc}, {start, loc}, {end, loc}, {total, loc}};
}

}  // namespace

Tiles::Tiles(const Operand& m, const Operand& n, int64_t tileM, int64_t tileN, SrcLoc loc)
    : m_(m), n_(n), tileM_(tileM), tileN_(tileN), loc_(loc) {
  if (tileM < 1 || tileN < 1 || tileM > INT32_MAX || tileN > INT32_MAX)
    dsl::fail(loc, fmt::format("Tiles: the tile must be at least 1 x 1 elements, got {} x {}", tileM, tileN));
}

Tiles& Tiles::grouped(int64_t groupM, SrcLoc loc) {
  if (groupM < 1 || groupM > INT32_MAX)
    dsl::fail(loc, fmt::format("Tiles::grouped: the band must be at least 1 tile row, got {}", groupM));
  return order(TileOrder::Grouped, groupM);
}

Tiles& Tiles::ragged(const Tensor& offsets, const Operand& groups, SrcLoc loc) {
  if (!offsets.valid() || offsets.isTile() || !offsets.isPointerLike() || offsets.dtype() != DType::I32)
    dsl::fail(loc, fmt::format("Tiles::ragged: the offsets must be a pointer to i32 (ts::Ptr<const int32_t>), got {}",
                               offsets.valid() ? dsl::typeStr(offsets.type()) : std::string("no value")));
  if (groups.isLiteral() && (groups.kind() != Operand::Kind::Int || groups.intValue() < 0))
    dsl::fail(loc,
              fmt::format("Tiles::ragged: the number of groups must be a non-negative integer, got {}", groups.str()));
  ragged_ = true;
  offsets_ = offsets;
  groups_ = groups;
  return *this;
}

Tiles& Tiles::chiplets(const Operand& count, SrcLoc loc) {
  if (count.isLiteral() && (count.kind() != Operand::Kind::Int || count.intValue() < 1 || count.intValue() > 1024))
    dsl::fail(loc,
              fmt::format("Tiles::chiplets: the chiplet count must be an integer from 1 to 1024, got {}", count.str()));
  chiplets_ = count;
  return *this;
}

Tiles& Tiles::splitK(int64_t splits, const Operand& k, int64_t tileK, SrcLoc loc) {
  checkK(split_, k, tileK, "splitK", loc);
  if (splits < 1 || splits > INT32_MAX)
    dsl::fail(loc, fmt::format("Tiles::splitK: a tile needs at least 1 split, got {}", splits));
  split_ = TileSplit::SplitK;
  splits_ = splits;
  k_ = k;
  tileK_ = tileK;
  return *this;
}

Tiles& Tiles::streamK(const Operand& k, int64_t tileK, SrcLoc loc) {
  checkK(split_, k, tileK, "streamK", loc);
  split_ = TileSplit::StreamK;
  k_ = k;
  tileK_ = tileK;
  // Every program owns a share of every launch: the grid is the machine's.
  persistent_ = true;
  return *this;
}

Tiles& Tiles::workspace(const Tensor& partials, const Tensor& flags, SrcLoc loc) {
  auto pointerTo = [](const Tensor& t, DType d) {
    return t.valid() && !t.isTile() && t.isPointerLike() && t.dtype() == d && !t.readonly();
  };
  auto str = [](const Tensor& t) { return t.valid() ? dsl::typeStr(t.type()) : std::string("no value"); };
  if (!pointerTo(partials, DType::F32))
    dsl::fail(loc,
              fmt::format("Tiles::workspace: the partials must be a writable pointer to f32 (ts::Ptr<float>), got {}{}",
                          str(partials), partials.valid() && partials.readonly() ? " (read-only)" : ""));
  if (!pointerTo(flags, DType::I32))
    dsl::fail(loc,
              fmt::format("Tiles::workspace: the flags must be a writable pointer to i32 (ts::Ptr<int32_t>), got {}{}",
                          str(flags), flags.valid() && flags.readonly() ? " (read-only)" : ""));
  partials_ = partials;
  flags_ = flags;
  return *this;
}

std::pair<int64_t, int64_t> Tiles::coords(int64_t t, int64_t tm, int64_t tn) const {
  if (tm < 1 || tn < 1 || t < 0 || t >= tm * tn)
    throw UsageError(fmt::format("Tiles::coords: tile {} is not in a {} x {} space of tiles", t, tm, tn));
  const Coords<int64_t> c = coordsOf<int64_t>(order_, groupM_, reversed_ ? tm * tn - 1 - t : t, tm, tn);
  return {c.m, c.n};
}

std::tuple<int64_t, int64_t, int64_t> Tiles::raggedCoords(int64_t t, const std::vector<int32_t>& offsets,
                                                          int64_t tn) const {
  // The device's scan (groupOf, at) over host integers.
  const int64_t groups = offsets.empty() ? 0 : static_cast<int64_t>(offsets.size()) - 1;
  auto tmOf = [&](int64_t g) {
    return cdivHost(std::max<int64_t>(offsets[size_t(g + 1)] - offsets[size_t(g)], 0), tileM_);
  };
  int64_t total = 0;
  for (int64_t g = 0; g < groups; ++g) total += tmOf(g) * std::max<int64_t>(tn, 0);
  if (t < 0 || t >= total || tn < 1)
    throw UsageError(
        fmt::format("Tiles::raggedCoords: tile {} is not one of the {} tiles of {} groups with {} tile "
                    "columns",
                    t, total, groups, tn));
  int64_t first = 0;
  for (int64_t i = 0;; ++i) {
    const int64_t g = reversed_ ? groups - 1 - i : i, tm = tmOf(g), tiles = tm * tn;
    if (t < first + tiles) {
      const int64_t local = reversed_ ? tiles - 1 - (t - first) : t - first;
      const Coords<int64_t> c = coordsOf<int64_t>(order_, groupM_, local, tm, tn);
      return {g, c.m, c.n};
    }
    first += tiles;
  }
}

int64_t Tiles::chipletProgram(int64_t p, int64_t programs, int64_t chiplets) {
  if (p < 0 || p >= programs)
    throw UsageError(fmt::format("Tiles::chipletProgram: program {} is not one of {} programs", p, programs));
  return chipletOrder<int64_t>(p, programs, std::max<int64_t>(chiplets, 1));
}

int64_t Tiles::count(int64_t m, int64_t n, int64_t tileM, int64_t tileN) {
  if (m <= 0 || n <= 0 || tileM <= 0 || tileN <= 0) return 0;
  return cdivHost(m, tileM) * cdivHost(n, tileN);
}

int64_t Tiles::raggedBound(int64_t rows, int64_t groups, int64_t n, int64_t tileM, int64_t tileN) {
  if (n <= 0 || tileM <= 0 || tileN <= 0 || groups <= 0) return 0;
  // Each group wastes less than one tile row: sum ceil(r_g / tileM) <=
  // floor(rows / tileM) + groups.
  return (std::max<int64_t>(rows, 0) / tileM + groups) * cdivHost(n, tileN);
}

int64_t Tiles::splitKWorkspace(int64_t tiles, int64_t splits, int64_t tileM, int64_t tileN) {
  if (tiles <= 0 || splits <= 0 || tileM <= 0 || tileN <= 0) return 0;
  return tiles * splits * tileM * tileN;
}

int64_t Tiles::streamKWorkspace(int64_t programs, int64_t tileM, int64_t tileN) {
  if (programs <= 0 || tileM <= 0 || tileN <= 0) return 0;
  return 2 * programs * tileM * tileN;
}

namespace dsl::tiles {

TileSpace::TileSpace(const Tiles& s, const SrcLoc& loc) : s_(s), loc_(loc) {
  n_ = i32Of(s.n(), loc, "N");
  tn_ = cdiv(n_, s.tileN());
}

Ix TileSpace::count() const {
  if (s_.isRagged()) return groupOf(s_, constant(-1, loc_), tn_).total;
  return cdiv(i32Of(s_.m(), loc_, "M"), s_.tileM()) * tn_;
}

void TileSpace::at(const Ix& t, const std::function<void(const Tile&)>& fn) const {
  // Tile t: its number `local` within a tm x tn space whose rows start at
  // rowBase (its group's) and end before rowEnd.
  auto run = [&](const Ix& local, const Ix& tm, const Ix& group, const Ix& rowBase, const Ix& rowEnd) {
    Coords<Ix> c = coordsOf(s_.tileOrder(), s_.groupM(), local, tm, tn_);
    fn(Tile{
        t.t, c.m.t, c.n.t, group.t, (rowBase + c.m * s_.tileM()).t, (c.n * s_.tileN()).t, rowEnd.t, n_.t, {}, {}, {}});
  };
  if (!s_.isRagged()) {
    const Ix m = i32Of(s_.m(), loc_, "M"), zero = constant(0, loc_), tm = cdiv(m, s_.tileM());
    run(s_.isReversed() ? tm * tn_ - 1 - t : t, tm, zero, zero, m);
    return;
  }
  // Ragged: the tile's group is a scan over the groups; past the last tile
  // the scan finds none.
  const GroupOf g = groupOf(s_, t, tn_);
  if_else(
      g.group >= 0,
      [&] {
        const Ix tm = cdiv(g.end - g.start, s_.tileM());
        // Reversed: the group's tiles last first, as in a dense schedule.
        run(s_.isReversed() ? tm * tn_ - 1 - (t - g.first) : t - g.first, tm, g.group, g.start, g.end);
      },
      loc_);
}

Ix TileSpace::program() const {
  const Ix p{program_id(0, loc_), loc_};
  if (s_.chipletCount().none()) return p;
  return chipletOrder(p, Ix{num_programs(0, loc_), loc_}, max(i32Of(s_.chipletCount(), loc_, "the chiplet count"), 1));
}

void TileSpace::eachUnit(int64_t units, const std::function<void(const Tile&, const Ix&)>& fn) const {
  const Ix p = program();
  auto unit = [&](const Ix& u) {
    // One unit per tile needs no division.
    const Ix t = units == 1 ? u : u / units, k = units == 1 ? constant(0, loc_) : u % units;
    at(t, [&](const Tile& tile) { fn(tile, k); });
  };
  auto total = [&] { return units == 1 ? count() : count() * units; };
  if (s_.isDynamic()) {
    const char* with = s_.isPersistent()           ? (s_.split() == TileSplit::StreamK ? "streamK()" : "persistent()")
                       : !s_.chipletCount().none() ? "chiplets()"
                                                   : nullptr;
    if (with)
      dsl::fail(loc_, fmt::format("for_tiles: a dynamic() schedule runs one program per unit of work and takes the "
                                  "units of the programs it cancels; {} numbers the units by the grid instead",
                                  with));
    // The first unit is the program's own; each next one that of a program
    // it cancelled, which therefore never runs. -1 (nothing cancelled, or
    // a target that cannot cancel) ends the loop, as does a program past
    // the last unit (whose own successors past it have nothing to do).
    auto loop = [&] {
      do_while(
          std::tuple{p.t},
          [&](Int u) {
            unit(Ix{u, loc_});
            barrier(loc_);  // as between a persistent program's tiles
            const Ix next{cancel_program(loc_), loc_};
            const Tensor more = s_.isRagged() ? next >= 0 : (next >= 0) & (next < total());
            return std::tuple{more, next.t};
          },
          loc_);
    };
    if (s_.isRagged())
      loop();  // at() finds no tile past the count
    else
      if_else(p < total(), loop, loc_);
    return;
  }
  // A persistent program's tiles are separated by a block barrier: the next
  // tile's copies then never refill a shared slot, or start a barrier
  // phase, that a warp of the previous tile may still be using (the
  // pipelines' proofs and the tensor-copy groups see one tile at a time).
  if (s_.isPersistent())
    for_range(
        p.t, total().t, num_programs(0, loc_),
        [&](Int u) {
          unit(Ix{u, loc_});
          barrier(loc_);
        },
        loc_);
  else if (s_.isRagged())
    unit(p);  // at() finds no tile past the count, so no count is needed
  else
    if_else(p < total(), [&] { unit(p); }, loc_);
}

}  // namespace dsl::tiles

namespace dsl {

void forTilesImpl(const Tiles& s, const std::function<void(const Tile&)>& body, const SrcLoc& loc) {
  if (s.split() != TileSplit::None)
    fail(loc,
         "for_tiles: a schedule with splitK or streamK meets its partial tiles in an epilogue: call "
         "for_tiles(schedule, body returning the accumulator, epilogue(tile, acc))");
  tiles::TileSpace(s, loc).eachUnit(1, [&](const Tile& t, const tiles::Ix&) { body(t); });
}

}  // namespace dsl
}  // namespace tessera

// ts::for_tiles (Tiles.h): a tile schedule traced as program_id, for_range
// and if_else. Every order maps the tile numbers 0 .. count-1 one to one
// onto the tiles (tests/dsl/tiles_test.cpp checks each by enumeration), so
// the only way to miss or repeat a tile is a grid smaller than the count
// without persistent(), which the docs and Tiles::count address.
#include <fmt/format.h>

#include "tessera/dsl/Tiles.h"

#include "DslImpl.h"

namespace tessera {

namespace {

int64_t cdivHost(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// An i32 scalar of the schedule's arithmetic, recorded at the user's
/// for_tiles call (the operators take their location from the left
/// operand), not at this file's lines.
struct Ix {
  Tensor t;
  SrcLoc loc;
  Operand op() const { return Operand(t, loc); }
};
Ix operator+(const Ix& a, const Ix& b) { return {a.op() + b.t, a.loc}; }
Ix operator-(const Ix& a, const Ix& b) { return {a.op() - b.t, a.loc}; }
Ix operator*(const Ix& a, const Ix& b) { return {a.op() * b.t, a.loc}; }
Ix operator/(const Ix& a, const Ix& b) { return {a.op() / b.t, a.loc}; }
Ix operator%(const Ix& a, const Ix& b) { return {a.op() % b.t, a.loc}; }
Ix operator+(const Ix& a, int64_t b) { return {a.op() + b, a.loc}; }
Ix operator-(const Ix& a, int64_t b) { return {a.op() - b, a.loc}; }
Ix operator*(const Ix& a, int64_t b) { return {a.op() * b, a.loc}; }
Ix operator/(const Ix& a, int64_t b) { return {a.op() / b, a.loc}; }
Ix operator%(const Ix& a, int64_t b) { return {a.op() % b, a.loc}; }
Tensor operator<(const Ix& a, const Ix& b) { return a.op() < b.t; }
Tensor operator>=(const Ix& a, const Ix& b) { return a.op() >= b.t; }
Tensor operator>=(const Ix& a, int64_t b) { return a.op() >= b; }
Tensor operator==(const Ix& a, int64_t b) { return a.op() == b; }
Ix min(const Ix& a, int64_t b) { return {minimum(a.t, b, a.loc), a.loc}; }
Ix max(const Ix& a, int64_t b) { return {maximum(a.t, b, a.loc), a.loc}; }
Ix select(const Tensor& c, const Ix& a, const Ix& b) { return {where(c, a.t, b.t, a.loc), a.loc}; }
Ix constant(int64_t v, const SrcLoc& loc) { return {full({}, static_cast<double>(v), DType::I32, loc), loc}; }

/// `o` as an i32 scalar: literals become constants, handles are checked to
/// be integer scalars.
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

/// ceil(a / b); a negative a (a decreasing pair of offsets) counts as 0.
Ix cdiv(const Ix& a, int64_t b) { return (max(a, 0) + (b - 1)) / b; }

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
/// rows [start, end); also the total tile count.
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
      [&](Tensor gv, Tensor found, Tensor f, Tensor st, Tensor en, Tensor acc) {
        const Ix g{gv, loc}, sum{acc, loc};
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

std::pair<int64_t, int64_t> Tiles::coords(int64_t t, int64_t tm, int64_t tn) const {
  if (tm < 1 || tn < 1 || t < 0 || t >= tm * tn)
    throw UsageError(fmt::format("Tiles::coords: tile {} is not in a {} x {} space of tiles", t, tm, tn));
  const Coords<int64_t> c = coordsOf<int64_t>(order_, groupM_, t, tm, tn);
  return {c.m, c.n};
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

namespace dsl {

void forTilesImpl(const Tiles& s, const std::function<void(const Tile&)>& body, const SrcLoc& loc) {
  const Ix n = i32Of(s.n(), loc, "N");
  const Ix tn = cdiv(n, s.tileN());
  const Ix zero = constant(0, loc);
  Ix p{program_id(0, loc), loc};
  if (!s.chipletCount().none())
    p = chipletOrder(p, Ix{num_programs(0, loc), loc}, max(i32Of(s.chipletCount(), loc, "the chiplet count"), 1));

  // Tile t: its number `local` within a tm x tn space whose rows start at
  // rowBase (its group's) and end before rowEnd.
  auto run = [&](const Ix& t, const Ix& local, const Ix& tm, const Ix& group, const Ix& rowBase, const Ix& rowEnd) {
    Coords<Ix> c = coordsOf(s.tileOrder(), s.groupM(), local, tm, tn);
    body(Tile{t.t, c.m.t, c.n.t, group.t, (rowBase + c.m * s.tileM()).t, (c.n * s.tileN()).t, rowEnd.t, n.t});
  };
  auto loop = [&](const Ix& count, const std::function<void(const Ix&)>& each) {
    if (s.isPersistent())
      for_range(p.t, count.t, num_programs(0, loc), [&](Int t) { each(Ix{t, loc}); }, loc);
    else
      if_else(p < count, [&] { each(p); }, loc);
  };

  if (!s.isRagged()) {
    const Ix m = i32Of(s.m(), loc, "M");
    const Ix tm = cdiv(m, s.tileM());
    loop(tm * tn, [&](const Ix& t) { run(t, t, tm, zero, zero, m); });
    return;
  }
  // Ragged: each tile's group is a scan over the groups. A program of a
  // persistent loop needs the count first (a scan finding no tile); one
  // computing a single tile is past the count where the scan finds none.
  auto ragged = [&](const Ix& t) {
    const GroupOf g = groupOf(s, t, tn);
    if_else(g.group >= 0, [&] { run(t, t - g.first, cdiv(g.end - g.start, s.tileM()), g.group, g.start, g.end); }, loc);
  };
  if (s.isPersistent())
    loop(groupOf(s, constant(-1, loc), tn).total, ragged);
  else
    ragged(p);
}

}  // namespace dsl
}  // namespace tessera

// The index arithmetic of ts::for_tiles shared by Tiles.cpp (the orders and
// the tile space) and TilesSplit.cpp (split-K, stream-K and their fix-up):
// i32 scalars recorded at the user's for_tiles call, and the space of a
// schedule's tiles. Not a public header.
#pragma once

#include <functional>

#include "tessera/dsl/Tiles.h"

namespace tessera::dsl::tiles {

/// An i32 scalar of the schedule's arithmetic, recorded at the user's
/// for_tiles call (the operators take their location from the left
/// operand), not at dsl/lib's lines.
struct Ix {
  Tensor t;
  SrcLoc loc;
  Operand op() const { return Operand(t, loc); }
};
inline Ix operator+(const Ix& a, const Ix& b) { return {a.op() + b.t, a.loc}; }
inline Ix operator-(const Ix& a, const Ix& b) { return {a.op() - b.t, a.loc}; }
inline Ix operator*(const Ix& a, const Ix& b) { return {a.op() * b.t, a.loc}; }
inline Ix operator/(const Ix& a, const Ix& b) { return {a.op() / b.t, a.loc}; }
inline Ix operator%(const Ix& a, const Ix& b) { return {a.op() % b.t, a.loc}; }
inline Ix operator+(const Ix& a, int64_t b) { return {a.op() + b, a.loc}; }
inline Ix operator-(const Ix& a, int64_t b) { return {a.op() - b, a.loc}; }
inline Ix operator*(const Ix& a, int64_t b) { return {a.op() * b, a.loc}; }
inline Ix operator/(const Ix& a, int64_t b) { return {a.op() / b, a.loc}; }
inline Ix operator%(const Ix& a, int64_t b) { return {a.op() % b, a.loc}; }
inline Tensor operator<(const Ix& a, const Ix& b) { return a.op() < b.t; }
inline Tensor operator<=(const Ix& a, const Ix& b) { return a.op() <= b.t; }
inline Tensor operator>=(const Ix& a, const Ix& b) { return a.op() >= b.t; }
inline Tensor operator==(const Ix& a, const Ix& b) { return a.op() == b.t; }
inline Tensor operator>=(const Ix& a, int64_t b) { return a.op() >= b; }
inline Tensor operator==(const Ix& a, int64_t b) { return a.op() == b; }
inline Ix min(const Ix& a, const Ix& b) { return {minimum(a.t, b.t, a.loc), a.loc}; }
inline Ix max(const Ix& a, const Ix& b) { return {maximum(a.t, b.t, a.loc), a.loc}; }
inline Ix min(const Ix& a, int64_t b) { return {minimum(a.t, b, a.loc), a.loc}; }
inline Ix max(const Ix& a, int64_t b) { return {maximum(a.t, b, a.loc), a.loc}; }
inline Ix select(const Tensor& c, const Ix& a, const Ix& b) { return {where(c, a.t, b.t, a.loc), a.loc}; }
inline Ix constant(int64_t v, const SrcLoc& loc) { return {full({}, static_cast<double>(v), DType::I32, loc), loc}; }

/// `o` as an i32 scalar: literals become constants, handles are checked to
/// be integer scalars; `what` names it in the error.
Ix i32Of(const Operand& o, const SrcLoc& loc, const char* what);

/// ceil(a / b); a negative a (a decreasing pair of offsets) counts as 0.
inline Ix cdiv(const Ix& a, int64_t b) { return (max(a, 0) + (b - 1)) / b; }

/// The tiles of a schedule: how many there are and where each one lies.
class TileSpace {
 public:
  TileSpace(const Tiles& s, const SrcLoc& loc);
  /// The number of tiles (ragged: a scan over the groups, traced here).
  Ix count() const;
  /// Runs fn with the fields of tile t (index .. colEnd; the K fields
  /// unset). A dense t must be below count(); a ragged t past the last
  /// tile runs nothing.
  void at(const Ix& t, const std::function<void(const Tile&)>& fn) const;
  /// The program's number in the schedule: program_id(0), renumbered for
  /// the chiplets where the schedule asks (Tiles::chiplets).
  Ix program() const;
  /// Runs fn(tile, u % units) for every work unit u in [0, count() x units)
  /// the program owns, tile u / units: unit p, or with persistent() units
  /// p, p + P, ...
  void eachUnit(int64_t units, const std::function<void(const Tile&, const Ix&)>& fn) const;

 private:
  const Tiles& s_;
  SrcLoc loc_;
  Ix n_, tn_;
};

}  // namespace tessera::dsl::tiles

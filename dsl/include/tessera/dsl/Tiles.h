// ts::for_tiles: which program computes which output tile, written once as a
// schedule instead of as index arithmetic in every kernel.
//
//   ts::for_tiles(ts::Tiles(M, N, BM, BN).grouped(8).persistent(), [&](const ts::Tile& t) {
//     auto rows = t.row0 + ts::arange(BM), cols = t.col0 + ts::arange(BN);
//     ...                                   // rows < t.rowEnd, cols < t.colEnd
//   });
//
// The tiles of an M x N output are numbered 0 .. count-1 in the schedule's
// order (rows, columns, grouped, snake); the kernel's grid axis 0 hands them
// out. Without persistent(), program p computes tile p (programs at or past
// the count compute nothing: launch at least Tiles::count programs); with
// persistent(), program p computes tiles p, p + P, p + 2P, ... where P is
// the number of programs launched, so a grid sized to the machine (SMs x
// blocks per SM, or the CPU's threads) covers any M and N. Each order is a
// bijection of 0 .. count-1 onto the tiles, so every tile is computed
// exactly once whatever the grid.
//
// dynamic() keeps one program per tile (launch at least Tiles::count) but
// lets a running program take the tiles of programs that have not started:
// program p computes tile p, then asks for a program to cancel
// (ts::cancel_program) and computes its tile, until none is left. Where
// the hardware cancels programs (NVIDIA sm_100a, sm_103a, sm_120a: cluster
// launch control) a program that started stays resident and takes tiles
// as a persistent one does, while the grid is still the hardware's to
// schedule; elsewhere nothing is cancelled and each program computes its
// own tile. Either way every tile is computed once: a cancelled program
// never runs.
//
// chiplets(X) renumbers the programs for a GPU made of X chiplets with
// private L2s that receive workgroups round-robin (MI300X, MI325X, MI355X:
// 8 XCDs), so that a chiplet's programs compute neighbouring tiles.
//
// ragged(offsets, groups) splits the rows into groups: group g owns rows
// offsets[g] .. offsets[g+1] - 1 (tokens sorted by expert, sequences of a
// batch), its tiles never straddle two groups, and a group with no rows has
// no tiles, so no program works on it. The tile-to-group mapping is
// computed on the device from the offsets (a scan over the groups per
// tile), so the host never reads them. reversed() numbers the ragged tiles
// last group first (longest first when the groups are ordered shortest to
// longest).
//
// splitK(S, K, tileK) and streamK(K, tileK) also cut each tile's K loop:
// split-K gives every tile S work units, each owning a contiguous range of
// K iterations; stream-K deals the tiles x K-iterations out in equal shares
// to the programs, a share crossing tile boundaries where it falls. Partial
// tiles meet in the construct, not in the kernel: the body returns its f32
// accumulator, partials go to a workspace, and the last unit of a tile to
// count itself in (an i32 ticket per tile) sums them in a fixed order and
// runs the epilogue once:
//
//   ts::for_tiles(ts::Tiles(M, N, BM, BN).splitK(4, K, BK).workspace(ws, flags),
//       [&](const ts::Tile& t) { ... return acc; },        // K range [t.kBegin, t.kEnd)
//       [&](const ts::Tile& t, const ts::Tensor& acc) { ... store ... });
//
// Implemented in the DSL over program_id, for_range, if_else and integer
// atomics (dsl/lib/Tiles.cpp, dsl/lib/TilesSplit.cpp); docs/dsl.md
// describes the orders and the workspace contract.
#pragma once

#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/dsl/DSL.h"

namespace tessera {

/// The order in which tiles are numbered.
enum class TileOrder {
  Rows,     // row of tiles after row of tiles (n fastest)
  Columns,  // column after column (m fastest)
  Grouped,  // bands of `group` tile rows, each band column-major: consecutive
            // tiles share A rows and B columns (L2 reuse of a GEMM's operands)
  Snake,    // rows, every other row reversed: the next tile shares its column
};

/// How a tile's K loop is divided among work units.
enum class TileSplit {
  None,     // one unit per tile, the whole K loop
  SplitK,   // S units per tile, contiguous K ranges, fixed K boundaries
  StreamK,  // the tiles' K iterations dealt out in equal shares to the programs
};

/// A schedule of output tiles: an M x N space cut into tileM x tileN tiles.
class Tiles {
 public:
  Tiles(const Operand& m, const Operand& n, int64_t tileM, int64_t tileN, SrcLoc loc = SrcLoc::current());

  Tiles& rows() { return order(TileOrder::Rows, 1); }
  Tiles& columns() { return order(TileOrder::Columns, 1); }
  /// Bands of `groupM` (>= 1) tile rows, column-major within a band.
  Tiles& grouped(int64_t groupM, SrcLoc loc = SrcLoc::current());
  Tiles& snake() { return order(TileOrder::Snake, 1); }
  /// The tiles numbered in the reverse of the order, the last first. With
  /// rows() or grouped(), the tile rows of largest m come first: longest
  /// first for causal attention, whose tile row m has m + 1 key blocks, so
  /// a persistent grid starts the heaviest tiles first and fills its end
  /// with the light ones. With ragged(), the whole ragged numbering is
  /// reversed: the last group's tiles first, each group's last tile row
  /// first. Groups ordered shortest to longest (sequences of a batch sorted
  /// by length, experts by token count) are then handed out longest first;
  /// the scan that finds a tile's group runs from the last group, at the
  /// forward numbering's cost (one pass over the offsets per tile).
  Tiles& reversed(bool on = true) {
    reversed_ = on;
    return *this;
  }
  /// Each program loops over the tiles p, p + P, ... (P = num_programs(0)).
  Tiles& persistent(bool on = true) {
    persistent_ = on;
    return *this;
  }
  /// One program per tile, each taking the tiles of the programs it
  /// cancels before they start (see the top of this file). Not with
  /// persistent(), streamK() or chiplets(), whose programs are numbered
  /// by the grid they run on.
  Tiles& dynamic(bool on = true) {
    dynamic_ = on;
    return *this;
  }
  /// Rows split into `groups` groups at `offsets` (a pointer to groups + 1
  /// non-decreasing i32 row indices; M is then unused).
  Tiles& ragged(const Tensor& offsets, const Operand& groups, SrcLoc loc = SrcLoc::current());
  /// The GPU is `count` chiplets (AMD CDNA3/4's XCDs, each with its own
  /// L2) to which the hardware deals workgroups round-robin: program p runs
  /// on chiplet p % count. The program ids are renumbered so that each
  /// chiplet's programs take consecutive tile numbers, and neighbouring
  /// tiles (which share operand panels in the grouped order) share an L2.
  /// A literal count must be at least 1; a runtime one below 1 counts as 1.
  Tiles& chiplets(const Operand& count, SrcLoc loc = SrcLoc::current());
  /// Each tile's K loop of ceil(k / tileK) iterations cut into `splits`
  /// (>= 1) contiguous ranges of near-equal length, one work unit each;
  /// unit u computes split u % splits of tile u / splits. Split boundaries
  /// depend on K and splits only, never on the grid.
  Tiles& splitK(int64_t splits, const Operand& k, int64_t tileK, SrcLoc loc = SrcLoc::current());
  /// The tiles' K iterations, numbered tile after tile, dealt out to the
  /// num_programs(0) programs in contiguous shares differing by at most
  /// one iteration (always persistent).
  Tiles& streamK(const Operand& k, int64_t tileK, SrcLoc loc = SrcLoc::current());
  /// Where partial tiles meet: `partials` a pointer to f32 (see
  /// splitKWorkspace, streamKWorkspace), `flags` a pointer to one i32 per
  /// tile, zero before the first launch; each complete launch leaves them
  /// zero again.
  Tiles& workspace(const Tensor& partials, const Tensor& flags, SrcLoc loc = SrcLoc::current());

  /// The f32 elements of a split-K workspace: one tileM x tileN slot per
  /// work unit (tiles x splits; `tiles` is count or raggedBound).
  static int64_t splitKWorkspace(int64_t tiles, int64_t splits, int64_t tileM, int64_t tileN);
  /// The f32 elements of a stream-K workspace for a grid of `programs`:
  /// two slots per program (the tile it finishes, the tile it starts).
  static int64_t streamKWorkspace(int64_t programs, int64_t tileM, int64_t tileN);

  /// The number of tiles of a dense schedule: ceil(m / tileM) x ceil(n / tileN).
  static int64_t count(int64_t m, int64_t n, int64_t tileM, int64_t tileN);
  /// A bound of a ragged schedule's tiles for `rows` rows in `groups` groups
  /// (each group may end in a partial tile row): the grid of a launch
  /// without persistent().
  static int64_t raggedBound(int64_t rows, int64_t groups, int64_t n, int64_t tileM, int64_t tileN);

  /// The host's view of the numbering the traced code computes: tile t's
  /// coordinates (m, n) in a tm x tn space in this schedule's order, and
  /// the number program p of `programs` takes under chiplets(X).
  std::pair<int64_t, int64_t> coords(int64_t t, int64_t tm, int64_t tn) const;
  /// The same for a ragged schedule with host copies of its row offsets
  /// (groups + 1 values) and tn tile columns: tile t's group and its
  /// coordinates within it, {group, m, n}. A UsageError when t is not one
  /// of the schedule's tiles.
  std::tuple<int64_t, int64_t, int64_t> raggedCoords(int64_t t, const std::vector<int32_t>& offsets, int64_t tn) const;
  static int64_t chipletProgram(int64_t p, int64_t programs, int64_t chiplets);

  // The schedule as traced (read by for_tiles).
  const Operand& m() const { return m_; }
  const Operand& n() const { return n_; }
  int64_t tileM() const { return tileM_; }
  int64_t tileN() const { return tileN_; }
  TileOrder tileOrder() const { return order_; }
  int64_t groupM() const { return groupM_; }
  bool isPersistent() const { return persistent_; }
  bool isDynamic() const { return dynamic_; }
  bool isRagged() const { return ragged_; }
  bool isReversed() const { return reversed_; }
  const Tensor& offsets() const { return offsets_; }
  const Operand& groups() const { return groups_; }
  /// The chiplet count of chiplets(); empty: none asked.
  const Operand& chipletCount() const { return chiplets_; }
  const SrcLoc& loc() const { return loc_; }
  TileSplit split() const { return split_; }
  int64_t splits() const { return splits_; }
  const Operand& k() const { return k_; }
  int64_t tileK() const { return tileK_; }
  bool hasWorkspace() const { return partials_.valid(); }
  const Tensor& partials() const { return partials_; }
  const Tensor& flags() const { return flags_; }

 private:
  Tiles& order(TileOrder o, int64_t g) {
    order_ = o;
    groupM_ = g;
    return *this;
  }
  Operand m_, n_;
  int64_t tileM_, tileN_;
  TileOrder order_ = TileOrder::Rows;
  int64_t groupM_ = 1;
  bool persistent_ = false, ragged_ = false, reversed_ = false, dynamic_ = false;
  Tensor offsets_;
  Operand groups_;
  Operand chiplets_;
  SrcLoc loc_;
  TileSplit split_ = TileSplit::None;
  int64_t splits_ = 1, tileK_ = 1;
  Operand k_;
  Tensor partials_, flags_;
};

/// One tile as the body of for_tiles sees it (every field an i32 scalar).
struct Tile {
  Tensor index;           // its number in the schedule's order
  Tensor m, n;            // its coordinates in tiles (ragged: m within its group)
  Tensor group;           // ragged: its group; otherwise 0
  Tensor row0, col0;      // its first row and column (ragged: offsets[group] + m * tileM)
  Tensor rowEnd, colEnd;  // rows below rowEnd, columns below colEnd are in range
  // With splitK / streamK: the unit's K elements [kBegin, kEnd) (kBegin a
  // multiple of tileK, kEnd one or K; empty when K has fewer iterations
  // than the tile has units) and its number among the tile's units (split
  // K: the split; stream-K: 0 for the unit that starts the tile). The
  // epilogue sees the whole range [0, K) and split 0. Unset otherwise.
  Tensor kBegin, kEnd;
  Tensor split;
};

namespace dsl {
void forTilesImpl(const Tiles& s, const std::function<void(const Tile&)>& body, const SrcLoc& loc);
void forTilesReducedImpl(const Tiles& s, const std::function<Tensor(const Tile&)>& body,
                         const std::function<void(const Tile&, const Tensor&)>& epilogue, const SrcLoc& loc);
}  // namespace dsl

/// Runs `body(const ts::Tile&)` for every tile of `s` this program owns.
template <class F>
void for_tiles(const Tiles& s, F&& body, SrcLoc loc = SrcLoc::current()) {
  dsl::forTilesImpl(s, [&](const Tile& t) { body(t); }, loc);
}

/// A K-split schedule (splitK or streamK): `body(const ts::Tile&)` runs for
/// every work unit this program owns and returns its f32 tileM x tileN
/// accumulator over [t.kBegin, t.kEnd); `epilogue(const ts::Tile&, const
/// ts::Tensor& acc)` runs once per tile with the sum of its units' partials,
/// added in the order of their K ranges whatever order they finish in.
template <class F, class E>
  requires std::is_invocable_v<E&, const Tile&, const Tensor&>
void for_tiles(const Tiles& s, F&& body, E&& epilogue, SrcLoc loc = SrcLoc::current()) {
  static_assert(std::is_convertible_v<std::invoke_result_t<F&, const Tile&>, Tensor>,
                "the body of a K-split for_tiles returns its accumulator, a ts::Tensor");
  dsl::forTilesReducedImpl(
      s, [&](const Tile& t) -> Tensor { return body(t); }, [&](const Tile& t, const Tensor& acc) { epilogue(t, acc); },
      loc);
}

}  // namespace tessera

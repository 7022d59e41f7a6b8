// Exactly-once output tiles: does a kernel's map (program, iteration) ->
// output tile hit every tile of the grid once, for the kernel's sizes?
//
// The question is about the index arithmetic that picks a tile from
// program_id (and, in a persistent loop, the loop's induction variable):
// the arithmetic ts::for_tiles emits, or the same written by hand (a
// grouped "L2 swizzle", a persistent stride). The sizes are symbolic in
// the IR, so the check is bounded: it runs that arithmetic for a family of
// sizes and grids and compares the tiles stored with the grid. What it
// establishes, exactly (docs/dsl.md, "What the tile coverage check
// establishes"):
//
//  * An output is a global pointer argument written by `store`s of tiles
//    (rank 1 or 2) whose addresses depend on program_id or num_programs. A
//    stored tile is named by its first element: its address, relative to
//    the argument, must be row0 * ld + col0 (rank 1: col0) with row0 and
//    col0 multiples of the tile's extents; the tile (row0 / tileM, col0 /
//    tileN). A tile counts as written when its first element's mask is on
//    (exact for the masks `rows < M & cols < N` the DSL emits; a mask that
//    switches off a tile's first element only is outside the model).
//  * The grid is ceil(M / tileM) x ceil(N / tileN), M and N the size
//    arguments the store's mask compares each dimension's index with.
//  * Sizes: each of M and N takes, for every tile count c in 1 ..
//    maxTiles, the values c * tile (a multiple) and (c - 1) * tile + 1 (one
//    past a multiple); the arguments that bound K loops (below) take 1, 13
//    and kOtherSize times maxTiles times the largest tile extent, every
//    other integer argument that last value.
//  * Grids: a kernel whose output stores sit in a loop stepping by
//    num_programs (persistent) runs on 1, 2, 3, 5, count - 1, count and
//    count + 1 programs; any other on need, need + 1 and need + 3, need
//    being count or, if more, one past the last program that does work
//    (stores a tile or takes a ticket) on a grid of 16 x count + 16 (count
//    x S for S splits of K). A kernel that reads grid axis 1 or 2 is not
//    analysable (a 2-D grid of tiles is outside the model).
//  * Programs run one after another. Scalar atomic adds of the constant 1
//    to one address are counters (a K-split fix-up's ticket per tile):
//    every order of the programs gives their adds the old values 0 .. n-1
//    once each, so which tiles are stored, and how often, is the same in
//    every order. Stores to a counter are taken to follow its last add.
//  * K: a loop under the loop or branch that picks tiles, holding no output
//    store, whose bounds depend on the program is a unit's K loop. The K
//    loops a unit runs before it takes a ticket belong to the tile of that
//    counter; before it stores a tile, to that tile. Each tile's units
//    must cover one range [0, H) of iterations once, H the same for every
//    tile (split-K and stream-K: every K iteration of a tile reduced once).
//    Whether H is K itself is not checked.
//  * For each size and grid, every program's scalar index arithmetic is
//    evaluated exactly (i8 .. i64 and u8 .. u64 with the IR's wrapping
//    semantics; program_id, num_programs, for, if, select, min, max, div,
//    rem, the bit operations, casts, counters): the result is the set of
//    tiles each store writes, compared with the grid. That is a check of
//    every size and grid listed, not a proof for all sizes.
//  * A violation is reported only when every sample fits the model; an
//    output that does not fit one sample is not analysable as a whole. A
//    missed tile of a kernel no program of which ever stores a tile past
//    tile row (column) 0 is reported with that fact: such a kernel may be
//    meant for one tile in that dimension, a size the IR does not state.
//
// An output whose store addresses or masks depend on values the check
// cannot compute (loads from memory, other atomics, loop-carried tiles), or
// whose stores sit under a condition computed from such values, is
// reported as not analysable, with the reason, and nothing is claimed for
// it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/ir/IR.h"

namespace tessera::ir {

struct TileCoverageOptions {
  /// The largest tile count per dimension of the size family (>= 1).
  int64_t maxTiles = 6;
};

/// Integer arguments other than M and N are held at this many times
/// maxTiles times the largest tile extent: larger than every N of the
/// family, so a leading dimension passed as its own argument never makes
/// rows overlap.
inline constexpr int64_t kOtherSize = 8;

/// The finding for one output argument.
struct TileCoverage {
  enum class Kind { Checked, NotAnalysable };
  Kind kind = Kind::NotAnalysable;
  std::string output;  // the argument, e.g. "%c"
  std::string text;    // one line: what was checked, or why nothing was
};

/// Checks every output of `f` (see above). A tile stored twice or never is
/// a VerifyError at the store's location naming the tile, the programs
/// (and iterations) involved, the sizes and the grid. Otherwise one finding
/// per output, in argument order; empty when `f` stores nothing through a
/// global pointer argument. An output whose stored tiles do not fit the
/// model for some sample (a first element off the grid, or outside the
/// M x N its mask bounds: the address is not the mask's rows and columns)
/// is not analysable, and no violation of it is reported either.
std::vector<TileCoverage> checkTileCoverage(const Function& f, const TileCoverageOptions& o = {});

}  // namespace tessera::ir

// Layout quality of a GPU-lowered kernel: how its global accesses map onto
// the threads of a warp, and how often the lowering moved tiles between
// layouts. Shown by `tessera compile K --target T --emit layout-stats` and
// tabulated by bench/gpu_static_bench.cpp.
//
// The GPU lowering reports what it emitted (LoweringRecord): for every tile
// access of global memory (load, store, atomic, the global side of a copy)
// the layout it ran in and its elements per instruction, and its layout
// conversions. Judged against the axis analysis of the pointer tile:
//
//   contiguous   the pointer tile has runs of consecutive elements along
//                some dim: contiguity[f] > 1 for its most contiguous dim f
//                (the last on ties, as LayoutAnalysis::accessLayout picks).
//                A gather or a strided walk is not contiguous and counts in
//                neither fraction below (nothing could coalesce it).
//   coalesced    a contiguous access whose warp-wide instructions each touch
//                one gap-free range of f: (1) lanes vary fastest along f
//                (the first parent dim in the layout's order with more than
//                one lane is f's), (2) each lane's instruction moves its whole
//                run along f (width = min(spt[f], extent[f])), so neighbouring
//                lanes are adjacent, and (3) the warp's span along f,
//                min(extent[f], tpw[f] * spt[f]), lies inside one contiguous
//                run. Lanes that wrap around a dim smaller than the warp read
//                the same addresses (a broadcast), which does not break it.
//   vectorisable the axis analysis proves more than one element per access
//                (contiguity, alignment, 16-byte limit: vectorWidth > 1),
//                and the tile has that many elements per thread to give: a
//                tile with at least as many elements as the block has threads
//                is not vectorisable beyond elements / threads without
//                holding elements on two threads (VectorCap::NoAvoidableCopies
//                in Layout.h: a 256-element row on 256 threads is moved one
//                element per thread). The width so allowed is printed after
//                the proven one where it is smaller ("width 1 of 4 (1
//                without copies)").
//   vectorised   a vectorisable access emitted with width > 1.
//   replication  threads holding each element of the access's layout:
//                threads * slots-per-thread / elements. `excess` is the part
//                that could be avoided: all of it for a tile with at least
//                one element per thread; for a smaller tile, which must
//                replicate, the part beyond threads x width / elements
//                (elements per instruction), so 1 means no avoidable
//                replication. Hardware async copies, whose threads holding
//                copies issue nothing and keep nothing, are judged like
//                smaller tiles (wide copies from fewer threads).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/ir/analysis/Layout.h"

namespace tessera::ir {

class AxisAnalysis;

/// What the GPU lowering emitted (its second, real run).
struct LoweringRecord {
  struct Access {
    const Op* op;
    Layout layout;
    int64_t width;  // elements per instruction
    /// Threads holding copies of an element issue nothing and keep nothing
    /// (hardware async copies).
    bool idleCopies = false;
  };
  std::vector<Access> accesses;
  struct Conversion {
    const Op* op;      // the op whose operand or result was converted
    std::string what;  // "32 f32: <from layout> -> <to layout>"
  };
  std::vector<Conversion> conversions;  // tiles converted through shared memory (convertVia)
  int64_t sharedConversionBytes = 0;    // their shared-memory round trips, bytes per block
  int64_t reemitted = 0;                // values re-emitted in another layout instead (no shared memory)
  int64_t dotOperandStagings = 0;       // tensor-core operands written from registers to shared memory
};

struct AccessStats {
  const Op* op;
  std::string layout;
  int64_t width = 1, allowedWidth = 1;  // emitted / proven by the axis analysis
  int64_t spreadWidth = 1;              // allowedWidth without avoidable copies (vectorisable above)
  bool contiguous = false, coalesced = false;
  double replication = 1, excessReplication = 1;
};

/// The totals a benchmark tabulates; one line of the dump, parseable.
struct LayoutSummary {
  int64_t accesses = 0, contiguous = 0, coalesced = 0, vectorisable = 0, vectorised = 0;
  double maxExcessReplication = 1;
  int64_t sharedConversions = 0, sharedConversionBytes = 0, reemitted = 0, dotOperandStagings = 0;
  std::string line() const;
  /// The summary line of a layout-stats dump (nullopt if there is none).
  static std::optional<LayoutSummary> parse(const std::string& dump);
};

struct LayoutStats {
  std::vector<AccessStats> accesses;
  std::vector<LoweringRecord::Conversion> conversions;
  LayoutSummary summary;
  std::string str() const;  // a line per access, one per conversion, then the summary line
};

LayoutStats layoutStats(const AxisAnalysis& axis, const LayoutAnalysis& la, const LoweringRecord& rec);

}  // namespace tessera::ir

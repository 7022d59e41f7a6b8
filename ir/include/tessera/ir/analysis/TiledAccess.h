// Tiled accesses: which copies read a box of a row-major 2-D tensor in
// global memory, the form a tensor-memory-accelerator copy (NVIDIA TMA)
// takes. A copy's pointer tile is written as index arithmetic
// (`base + rows[:, None] * ld + cols[None, :]`, in any order of operands);
// this analysis evaluates it symbolically, as a polynomial in the tile's
// indices i (rows) and j (columns) over uniform scalars, and recognises
//   pointer(i, j) = base + (r0 + i) * ld + (c0 + j)
//   mask(i, j)    = [r0 + i < rowBound] and [c0 + j < colBound]  (either or both)
// (or its transpose: the columns along the tile's first dimension), and a
// stack of such tensors, base + z0 * rowBound * ld + ..., as a third
// dimension
// where base is a pointer argument, ld and the bounds are integer
// arguments (times a constant) or constants, and r0, c0 any uniform
// scalars. A mask of any other shape (a causal one, a bound that is not an
// argument) does not match: the copy keeps its per-thread form.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/ir/IR.h"
#include "tessera/ir/analysis/AxisInfo.h"

namespace tessera::ir {

/// Σ coefficient × Π factors over uniform scalar values (kernel arguments,
/// program ids, loop induction variables; other scalars as opaque factors).
struct ScalarPoly {
  std::map<std::vector<const Value*>, int64_t> terms;  // sorted factors -> coefficient (never 0)
  bool operator==(const ScalarPoly&) const = default;
  std::string str() const;
};

/// A launch-time integer: kernel argument `arg` times `scale`, or the
/// constant `scale` when arg < 0.
struct ArgExtent {
  int arg = -1;
  int64_t scale = 1;
};

struct TiledAccess {
  unsigned source = 0;  // the pointer argument
  DType dtype = DType::F16;
  ArgExtent rowStride;  // elements between rows
  /// The tensor's rows / columns as the mask bounds them; nullopt: unmasked.
  std::optional<ArgExtent> rows, cols;
  ScalarPoly rowStart, colStart;  // coordinates of the tile's element (0, 0)
  /// The tile's extent along the tensor's rows and along its (contiguous)
  /// columns; `transposed`: the columns run along the tile's dimension 0
  /// (a K^T tile read from a K-contiguous tensor).
  int64_t tileRows = 0, tileCols = 0;
  bool transposed = false;
  /// A third dimension, where the rows bound by the mask are one plane of
  /// a stack (heads, batches): base + ((z0 * rows + r0 + i) * ld + c0 + j)
  /// with the mask bounding r0 + i by `rows`. rank 3: `planeStride` =
  /// rows * ld elements, zStart the plane.
  unsigned rank = 2;
  ArgExtent planeStride;
  ScalarPoly zStart;
  /// The base pointer and the row stride are 16-byte aligned (the analysis'
  /// divisibility facts): TMA's requirement, met by the aligned variant a
  /// GPU launch specialises to.
  bool aligned = false;
};

/// The tiled form of `access` (a copy, a load or a store of a rank-2
/// pointer tile), or nullopt.
std::optional<TiledAccess> matchTiledAccess(const Function& f, const Op& access, const AxisAnalysis& axis);

}  // namespace tessera::ir

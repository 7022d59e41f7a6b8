// Uniform split of a pointer tile: every element as one block-uniform base
// pointer plus a per-element offset of proven range.
//
//   element(P)[i] = base + (sum_k coef_k * term_k + constant + v[i]) elements
//   with lo <= v[i] <= hi for every i,
//
// where `base` is a scalar pointer and each term_k an integer scalar (both
// the same in every thread: scalars of the tile IR are). A target with a
// bounds-checked buffer resource built from a uniform base and 32-bit
// offsets (AMDGPU raw buffer loads and stores) can then run a masked access
// without a branch: the masked-off lanes get an offset past the resource's
// end, which reads zeros and drops writes. The uniform part goes into the
// base (any sign, any size); only v has to fit the 32-bit offset, and
// `lo >= 0` and `hi` are what prove it does.
//
// The integer arithmetic is read as mathematical: a split assumes the
// program's offsets do not wrap around their integer type (offsets that do
// address memory the program did not mean to either way).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tessera/ir/IR.h"

namespace tessera::ir {

struct UniformSplit {
  /// The scalar pointer every element starts from (nullptr while splitting
  /// an integer tile).
  const ir::Value* base = nullptr;
  /// Uniform integer scalars with their coefficients, and a constant.
  std::vector<std::pair<const ir::Value*, int64_t>> terms;
  int64_t constant = 0;
  /// The range of the varying part, in elements of the pointee.
  int64_t lo = 0, hi = 0;
};

/// The split of a pointer tile (or integer tile) value, or nullopt where
/// its elements are not provably of that form: loop-carried pointers,
/// offsets scaled by a runtime stride, gathers, ...
std::optional<UniformSplit> splitUniform(const ir::Value* v);

}  // namespace tessera::ir

// Which kernel arguments a global pointer value may point into: the one
// fact the work analysis (Work.cpp: the bytes a launch moves per argument)
// and the bounds-checked compiles of every target (the CPU lowering's
// checks, the GPU lowering's: codegen/gpu/LowerChecks.cpp) read.
#pragma once

#include <unordered_map>
#include <vector>

#include "tessera/ir/IR.h"

namespace tessera::ir {

class PointerOrigins {
 public:
  /// Follows pointers from the pointer arguments of `f` through offsets
  /// and shape changes (ptr_add, splat, broadcast, expand_dims, reshape,
  /// transpose), selects, loop-carried values and `if` results (pointers
  /// are never loaded from memory), to a fixpoint.
  explicit PointerOrigins(const Function& f);
  /// The sorted indices of the arguments `v` may point into; empty where
  /// none is known (not a pointer of an argument).
  const std::vector<unsigned>& of(const Value* v) const;

 private:
  std::unordered_map<const Value*, std::vector<unsigned>> prov_;
};

/// How a bounds check uses the origins: an access is tested against the
/// buffers of of(ptr) (against every pointer argument's where that is
/// empty) and fails only outside all of them. So an in-bounds access is
/// never reported; one that strays from one of its possible buffers into
/// another is not reported either. The record names the argument where
/// there is exactly one (-1 and the raw address otherwise).

}  // namespace tessera::ir

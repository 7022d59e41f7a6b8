// Which kernel argument a global pointer value derives from: the one fact
// the bounds-checked compiles of every target (the CPU lowering's checks,
// the GPU lowering's, LowerChecks.cpp) test an access against.
#pragma once

#include "tessera/ir/IR.h"

namespace tessera::ir {

/// The index of the pointer argument of `f` that `v` (a global pointer or
/// pointer tile) is derived from through offsets and shape changes
/// (ptr_add, splat, broadcast, expand_dims, reshape, transpose): pointers
/// are never loaded from memory, so these are the only ways to make one.
/// -1 where the origin is not static: a select between pointers, a
/// loop-carried or `if`-yielded pointer. A checked access whose origin is
/// -1 is tested against every pointer argument of the kernel: it is
/// reported only when its address lies inside none of their buffers (it may
/// then miss an access that strays from one buffer into another, but it
/// never reports an access that is in bounds).
int pointerArgument(const Function& f, const Value* v);

}  // namespace tessera::ir

// Helpers shared by the passes in this folder (not a public header).
#pragma once

#include <unordered_map>

#include "tessera/ir/IR.h"

namespace tessera::ir::passutil {

/// Rewrites every use of `from` in `f` (nested regions included) to `to`.
/// Linear in the size of the function; passes that replace many values
/// remap operands while walking instead.
void replaceAllUsesWith(Function& f, Value* from, Value* to);

/// Number of uses of every used value in `f`.
std::unordered_map<const Value*, unsigned> countUses(Function& f);

}  // namespace tessera::ir::passutil

// Helpers shared by the passes in this folder (not a public header).
#pragma once

#include <unordered_map>
#include <vector>

#include "tessera/ir/Builder.h"
#include "tessera/ir/IR.h"

namespace tessera::ir::passutil {

/// Rewrites every use of `from` in `f` (nested regions included) to `to`.
/// Linear in the size of the function; passes that replace many values
/// remap operands while walking instead.
void replaceAllUsesWith(Function& f, Value* from, Value* to);

/// Removes every op of `code` from `b` and the regions inside it. The ops
/// must have no results (nothing may use what is removed).
void eraseOps(Block& b, OpCode code);

/// Number of uses of every used value in `f`.
std::unordered_map<const Value*, unsigned> countUses(Function& f);

using ValueMap = std::unordered_map<const Value*, Value*>;

/// `v` through the map (itself where unmapped).
inline Value* mapped(const ValueMap& m, Value* v) {
  auto it = m.find(v);
  return it == m.end() ? v : it->second;
}

/// Deep copy of `op` (regions included) at the builder's insertion point,
/// its operands through `m`; records its results in `m`.
Op* cloneOp(Builder& b, const Op& op, ValueMap& m);

/// A staged copy of a loop as written (`for {stages}`): the copy into a
/// buffer_slot view made in the loop's body, and the buffer.
struct Staged {
  Op* copy;
  Op* view;  // buffer_slot in the loop body
  Value* buffer;
};
/// The staged copies of `body`, in order.
std::vector<Staged> stagedCopies(Block& body);

/// Removes the ops of `b` without effects or regions whose results nothing
/// uses (last to first, so chains go too).
void removeDeadPureOps(Function& f, Block& b);

}  // namespace tessera::ir::passutil

// Placement of a kernel's shared memory: every `alloc` buffer and every
// scratch area the GPU lowering needs (layout conversions, cross-warp
// reductions, dot operands, atomics' results) become offsets into the
// block's one shared array.
//
// Liveness is measured on the pre-order numbering of ops: a buffer lives
// from its alloc to the end of the outermost op (in the alloc's block) that
// contains one of its uses, so a buffer used inside a loop lives across the
// whole loop; a scratch area lives only during its op, a loop area during
// its loop. Areas whose live
// ranges are disjoint share bytes (first fit, 16-byte aligned or more where
// an area asks: wgmma's swizzled operands). The lowering
// separates every reuse with a barrier (see GpuLowering.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/ir/IR.h"

namespace tessera::ir {

struct SharedArea {
  std::string what;  // "alloc %3 buffer<shared, 64x64xf16> (kern.cpp:12:5)" / "scratch of reduce ..."
  uint64_t bytes = 0;
  uint64_t offset = 0;
  uint64_t align = 16;         // of offset (a power of two)
  int64_t start = 0, end = 0;  // live range in op numbers
  /// The result of a user's `alloc` in the shared space (not a local
  /// buffer, not the lowering's scratch): what ir::checkSharedMemory counts.
  bool userShared = false;
};

/// An area the lowering writes before a loop (at the `for`): read in its
/// body and dead after it (a loop-invariant dot operand staged once), or,
/// without `wholeLoop`, used at the `for` only (its fragments read into
/// registers there).
struct LoopArea {
  const ir::Op* loop = nullptr;
  uint64_t bytes = 0;
  std::string what;
  bool wholeLoop = true;
};

class SharedPlan {
 public:
  /// `scratch`: bytes each op needs for its own transient use;
  /// `bufferBytes`: buffers whose storage differs from their type's size
  /// (the lowering's padded tensor-core slot layouts, larger; the S-1
  /// physical slots of a register-staged pipeline's S, smaller); `loopAreas`: areas live
  /// during one loop, by a key of the lowering's choosing; `aligns`: the
  /// areas (an op's scratch, a buffer, a loop area's key) whose offset must
  /// be a multiple of more than 16 bytes.
  SharedPlan(const ir::Function& f, const std::map<const ir::Op*, uint64_t>& scratch,
             const std::unordered_map<const ir::Value*, uint64_t>& bufferBytes = {},
             const std::vector<std::pair<const void*, LoopArea>>& loopAreas = {},
             const std::unordered_map<const void*, uint64_t>& aligns = {});
  uint64_t bufferOffset(const ir::Value* allocResult) const;
  uint64_t scratchOffset(const ir::Op* op) const;
  uint64_t loopAreaOffset(const void* key) const;
  uint64_t totalBytes() const { return total_; }
  const std::vector<SharedArea>& areas() const { return areas_; }
  /// One line per area: what, bytes, offset.
  std::string describe() const;
  /// Sum of the bytes of the user's shared buffers (SharedArea::userShared).
  uint64_t userSharedBytes() const;

 private:
  std::vector<SharedArea> areas_;
  std::unordered_map<const void*, size_t> index_;
  uint64_t total_ = 0;
};

/// Bytes one element of `dt` takes in shared memory (i1 is a byte).
uint64_t sharedElemBytes(DType dt);

}  // namespace tessera::ir

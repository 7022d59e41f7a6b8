// The value types of the GPU lowering's class Lower (LowerImpl.h): a
// tile's slots, and the plans the planning phase makes and the emitters
// read (dot staging areas, slot storage, hoisted operands, staged and
// tensor copies).
#pragma once

#include <cstdint>
#include <vector>

#include <llvm/IR/Type.h>
#include <llvm/IR/Value.h>

#include "codegen/gpu/GpuDot.h"
#include "tessera/ir/IR.h"
#include "tessera/ir/analysis/Layout.h"
#include "tessera/ir/analysis/TiledAccess.h"

namespace tessera::codegen::gpu_lower {

using Slots = std::vector<llvm::Value*>;

struct TileV {
  ir::Layout layout;
  Slots slots;
};

/// The operand staging of tensor-core dot `op` under plan `p`: whether A
/// and B are staged here, whether A's fragments are read first
/// (SharedChoices::fragmentsFirst; a candidate where the target and the dot allow
/// it), and the scratch area (bytes, alignment, B's offset; a block-scaled
/// dot's scales at scaleOff, after the operands).
struct DotArea {
  bool stageA = false, stageB = false, fragmentsFirstCandidate = false, fragmentsFirst = false;
  uint64_t bytes = 0, align = 16, bOff = 0, scaleOff = 0;
};

/// A shared buffer (alloc result) stored in a tensor-core staging layout
/// (planDirectDots).
struct Storage {
  DotStaging st;            // of one slot: the last two dims
  bool transposed = false;  // the slot's (r, c) is staging element (c, r)
  uint64_t align = 16;      // of the buffer's start (wgmma's swizzled B slots)
  int64_t slotElems() const { return static_cast<int64_t>(st.bytes() / st.elemBytes); }
};

/// A loop-invariant dot operand staged once before its loop (planDotOperands).
struct Hoisted {
  const ir::Op* dot;
  unsigned operand;
  const ir::Op* loop;
  /// Its fragments are read into registers before the loop (targets with
  /// 512 registers per thread) instead of from the loop area each time.
  bool inRegisters;
  std::vector<llvm::Value*> fragments;  // (inRegisters) see loadTensorCoreFragments
};

/// AsyncCopyImpl::RegisterStaged: a copy whose global loads are issued and
/// whose shared stores are pending, with its group (flushStaged).
struct StagedCopy {
  const ir::Op* op;
  const ir::Value* buf;
  Slots vals;
  ir::Layout layout;
  int64_t group;
};

/// One box of a tensor copy (LowerTma.cpp).
struct TmaBox {
  unsigned map;      // index into tensorMaps_
  int64_t dstElem;   // where the box starts in the slot's storage
  int64_t row, col;  // its first element in the copy's tile
};

/// A tensor copy: its boxes, transaction bytes and destination alignment.
struct TmaCopy {
  ir::TiledAccess access;
  std::vector<TmaBox> boxes;
  uint64_t bytes = 0;    // of all boxes: the transaction count
  uint64_t align = 128;  // of the destination buffer
};

/// A tensor copy waiting to be issued with its group (commitFollows).
struct PendingTma {
  const ir::Op* op;  // the copy (or the dot operand's load)
  const TmaCopy* copy;
  llvm::Type* elemTy;
  llvm::Value* base;
};

/// Async groups as the program runs them (simulateGroups).
struct GroupState {
  int64_t outstanding = 0, unsynced = 0;
  bool operator==(const GroupState&) const = default;
};

}  // namespace tessera::codegen::gpu_lower

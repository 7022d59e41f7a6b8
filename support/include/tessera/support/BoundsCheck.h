// The record a bounds-checked CPU launch shares with its kernel: the CPU's
// counterpart of a GPU memory checker (LaunchOptions::checkBounds,
// TESSERA_CHECK_BOUNDS=1, `tessera run --check-bounds`).
//
// A kernel compiled with CompileOptions::checkBounds takes one extra entry
// after its arguments in the kernelParams array: the address of this record.
// Before every global memory access (load, store, atomic, copy) the code
// tests each active element's address against the extent of the buffer its
// pointer derives from; the first program to leave a buffer records the
// access here (compare-and-swap on `violated`) and returns without
// performing it or any later access, so nothing outside a buffer is ever
// read or written. The runtime turns the record into a LaunchError.
//
// GPU targets (nvptx, amdgpu and their emulators) share the record's
// layout: a kernel compiled with CompileOptions::checkBounds for them takes,
// after its arguments and tensor maps, one i64 per pointer argument (the
// extent, as `extents` below) and then the address of a record in device
// memory, zeroed before the launch; `extents` is not read there. Every
// active thread tests each of its accesses; the first to fail fills the
// record (compare-and-swap on `violated`) with the thread and the program
// too, and a failing access is skipped (a masked-off load yields 0 or its
// `other` value) while the kernel runs on (codegen/gpu/LowerChecks.cpp).
//
// Codegen emits code against this layout and the runtime fills and reads it;
// the static_asserts pin the offsets both rely on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

struct BoundsCheckRecord {
  /// Per kernel argument: the bytes addressable from its pointer value
  /// (a buffer's size minus the launch offset); 0 for scalars.
  const int64_t* extents = nullptr;
  int32_t violated = 0;  // 1 once an access left its buffer
  int32_t opId = -1;     // that access: an index into the binary's op names
  int32_t arg = -1;      // the argument whose buffer it left; -1 if it may point into several (or none known)
                         // (kSharedSlot: a shared buffer's slot index out of range, the index in `offset`;
                         // kAssert: a false assertion)
  int32_t slots = 0;     // arg == kSharedSlot: that buffer's slots
  int64_t offset = 0;    // its byte offset from that argument's pointer (arg < 0: the raw address)
  int32_t thread = -1;   // GPU: the thread in its block (-1 on the CPU)
  int32_t program[3] = {-1, -1, -1};  // GPU: its program id (block index) per axis

  static constexpr size_t kExtents = 0, kViolated = 8, kOpId = 12, kArg = 16, kSlots = 20, kOffset = 24, kThread = 32,
                          kProgram = 36, kBytes = 48;
  static constexpr int32_t kSharedSlot = -2;
  /// arg == kAssert: an `assert` op found a false element (IR.h,
  /// "Assertions"); the op's text holds its message.
  static constexpr int32_t kAssert = -3;
};

static_assert(offsetof(BoundsCheckRecord, extents) == BoundsCheckRecord::kExtents);
static_assert(offsetof(BoundsCheckRecord, violated) == BoundsCheckRecord::kViolated);
static_assert(offsetof(BoundsCheckRecord, opId) == BoundsCheckRecord::kOpId);
static_assert(offsetof(BoundsCheckRecord, arg) == BoundsCheckRecord::kArg);
static_assert(offsetof(BoundsCheckRecord, slots) == BoundsCheckRecord::kSlots);
static_assert(offsetof(BoundsCheckRecord, offset) == BoundsCheckRecord::kOffset);
static_assert(offsetof(BoundsCheckRecord, thread) == BoundsCheckRecord::kThread);
static_assert(offsetof(BoundsCheckRecord, program) == BoundsCheckRecord::kProgram);
static_assert(sizeof(BoundsCheckRecord) == BoundsCheckRecord::kBytes);

}  // namespace tessera

// The buffer a profiled launch shares with its kernel (CompileOptions::
// profile, LaunchOptions::profile, TESSERA_PROFILE, `tessera run --trace`).
//
// A kernel compiled with CompileOptions::profile takes the address of this
// buffer as its last parameter (after a checked kernel's record). The
// runtime allocates it in the device's memory, writes the header and zeroes
// the rest; the kernel appends records; the runtime reads it back after the
// launch and decodes it into events (tessera/runtime/Profile.h).
//
// Layout: the header; the slot headers, one per (program, warp) for the
// first `programs` programs in linear order (x fastest), then those of one
// spare program that every later program writes into (so a GPU probe needs
// no branch; no one reads them); then the slots' records, `capacity` per
// slot, in the same order (so reading back the slot headers is one copy).
// A probe (an IR `probe` op: a scope's begin or end) executed by a warp
// appends one record to its slot: a ring of `capacity` (a power of two)
// records, so a long kernel keeps its last ones; `count` is the number of
// probes the warp executed, so the runtime knows which records survive and how
// many were overwritten. The CPU runs a program as one thread: one slot
// per program ("warp" 0).
//
// Times are the target's clock: NVIDIA %globaltimer (nanoseconds), AMD
// s_memrealtime (a constant 100 MHz counter, KernelBinary::profileClockHz),
// the CPU's time-stamp counter (rdtscp: its auxiliary value, the core the
// program ran on, is the unit), the emulator's per-thread count of issued
// memory, matrix and synchronisation operations (a block's threads leave a
// barrier at the count of the last to arrive). `unit` is the SM or CU (the
// emulator: the host thread running the block; the CPU: the core).
//
// Codegen emits code against this layout and the runtime fills and reads
// it; the static_asserts pin the offsets both rely on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

struct ProfileHeader {
  uint32_t capacity = 0;  // records per slot: a power of two
  uint32_t warps = 0;     // slots per program
  uint32_t programs = 0;  // programs recorded (those with linear id < programs)
  uint32_t reserved = 0;
  static constexpr size_t kCapacity = 0, kWarps = 4, kPrograms = 8, kBytes = 16;
};

struct ProfileSlotHeader {
  uint32_t count = 0;  // probes the warp executed (records written, ring included)
  uint32_t unit = 0;   // the SM / CU / core it ran on
  uint64_t reserved = 0;
  static constexpr size_t kCount = 0, kUnit = 4, kBytes = 16;
};

struct ProfileRecord {
  uint64_t time = 0;
  /// scope index (KernelBinary::profileScopes) << 1 | 1 at the scope's end.
  uint32_t event = 0;
  uint32_t reserved = 0;
  static constexpr size_t kTime = 0, kEvent = 8, kBytes = 16;
};

/// Slots of a buffer (the spare program's included), and its bytes.
constexpr uint64_t profileSlots(uint32_t warps, uint64_t programs) { return uint64_t{warps} * (programs + 1); }
constexpr uint64_t profileRecordsAt(uint64_t slots) {
  return ProfileHeader::kBytes + slots * ProfileSlotHeader::kBytes;
}
constexpr uint64_t profileBufferBytes(uint32_t capacity, uint64_t slots) {
  return profileRecordsAt(slots) + slots * capacity * ProfileRecord::kBytes;
}

static_assert(offsetof(ProfileHeader, capacity) == ProfileHeader::kCapacity);
static_assert(offsetof(ProfileHeader, warps) == ProfileHeader::kWarps);
static_assert(offsetof(ProfileHeader, programs) == ProfileHeader::kPrograms);
static_assert(sizeof(ProfileHeader) == ProfileHeader::kBytes);
static_assert(offsetof(ProfileSlotHeader, count) == ProfileSlotHeader::kCount);
static_assert(offsetof(ProfileSlotHeader, unit) == ProfileSlotHeader::kUnit);
static_assert(sizeof(ProfileSlotHeader) == ProfileSlotHeader::kBytes);
static_assert(offsetof(ProfileRecord, time) == ProfileRecord::kTime);
static_assert(offsetof(ProfileRecord, event) == ProfileRecord::kEvent);
static_assert(sizeof(ProfileRecord) == ProfileRecord::kBytes);

}  // namespace tessera

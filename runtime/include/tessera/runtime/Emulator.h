// The SIMT machine: runs a GPU-lowered kernel on the host, one fiber per GPU
// thread, so NVPTX / AMDGPU lowering can be proven on a machine without GPU.
//
// The compiler rewrites the vendor intrinsics of the GPU-lowered module
// (thread/block ids, barriers, warp shuffles and votes, shared and global
// memory accesses) into calls to the C-ABI `tessera_emu_*` hooks declared
// below, JIT-compiles that module for the host and hands the machine a
// ThreadFn: the kernel body of ONE GPU thread. The machine calls it once per
// thread of every block, and checks the kernel while it runs:
//   * shared-memory data races (two threads touch one byte, at least one
//     writes, no barrier in between), out-of-bounds shared and global accesses;
//   * divergent barriers, deadlocks, misuse of warp collectives;
//   * shared-memory bank conflicts per access instruction.
// docs/emulator.md describes the model (scheduling, exited threads at
// barriers, the poison fill of shared memory, the bank model) in full.
//
// No LLVM and no IR here: the machine knows only hooks and function pointers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/support/Error.h"

namespace tessera::emu {

enum class Vendor { NVIDIA, AMD };

/// A launch whose kernel raced, accessed memory out of bounds, deadlocked or
/// misused a collective. The message lists the first few reports. A
/// LaunchError: the launch is what failed, as on a GPU under a sanitizer.
class EmulatorError : public LaunchError {
 public:
  using LaunchError::LaunchError;
};

struct LaunchConfig {
  Vendor vendor = Vendor::NVIDIA;
  /// 32 on NVIDIA; 64 (gfx90a, gfx942, gfx950) or 32 (gfx1100) on AMD.
  unsigned warpSize = 32;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};  // at most 1024 threads, as on both vendors
  /// NVIDIA thread-block clusters: blocks per cluster along x, y, z (each
  /// grid dimension a multiple; at most 8 blocks, NVIDIA's portable limit).
  /// The blocks of a cluster run at once on one host thread, and can reach
  /// each other's shared memory (mapa) and meet at cluster barriers.
  uint32_t cluster[3] = {1, 1, 1};
  /// Shared memory (LDS) of one block: static plus dynamic, one region.
  size_t sharedBytes = 0;
  /// Host threads that run blocks in parallel; 0 = one per hardware thread.
  unsigned hostThreads = 1;
  std::string kernelName;
  /// opId -> "op and source line", for reports. Ids outside the table are
  /// reported as "op#<id>".
  std::vector<std::string> opNames;
  /// Global-memory buffers (base, bytes) a kernel may touch.
  std::vector<std::pair<const void*, size_t>> globalBuffers;
  /// Throw EmulatorError at the end of a launch that found errors; when
  /// false, errors are only recorded in the LaunchReport.
  bool throwOnError = true;
  bool checkRaces = true;
  bool checkBounds = true;
  bool countBankConflicts = true;
  /// Stack of each fiber (one per GPU thread of a block), with a guard page.
  size_t stackBytes = 128 * 1024;
  /// Detailed reports kept (distinct by kind and op ids); counts are exact.
  unsigned maxReports = 32;
};

/// The emulator's encoding of a TMA tensor map: the 128 bytes a kernel's
/// hidden tensor-map parameter (tessera/support/Binary.h, TensorMapSpec)
/// holds on an emulator device, which builds it at launch; a CUDA device
/// holds the driver's opaque CUtensorMap there instead. The machine's
/// `cp.async.bulk.tensor` reads it (docs/emulator.md).
struct alignas(64) TensorMap {
  static constexpr uint64_t kMagic = 0x50414d524f534e54ull;  // "TNSORMAP"
  uint64_t magic = kMagic;
  uint64_t global = 0;  // address of element (0, 0, 0)
  uint32_t rank = 2, elemBytes = 2;
  uint64_t dims[3] = {1, 1, 1};     // elements, innermost first
  uint64_t strides[3] = {0, 0, 0};  // bytes between indices of dimension d (strides[0] = elemBytes)
  uint32_t box[3] = {1, 1, 1};
  uint32_t swizzleBytes = 0;  // 0, 32, 64 or 128
};
static_assert(sizeof(TensorMap) == 128, "a tensor map is 128 bytes");

enum class IssueKind : uint8_t {
  SharedRace,
  SharedOutOfBounds,
  GlobalOutOfBounds,
  DivergentBarrier,
  Deadlock,
  CollectiveMisuse,
  KernelException,
  AsyncCopyMisuse,  // cp.async copies still in flight when their thread exits
};
inline constexpr size_t kIssueKinds = 8;
const char* name(IssueKind k);

struct Issue {
  IssueKind kind = IssueKind::SharedRace;
  uint32_t block[3] = {0, 0, 0};
  uint32_t thread[3] = {0, 0, 0};
  /// Races: the thread of the earlier, conflicting access.
  bool hasOther = false;
  uint32_t otherThread[3] = {0, 0, 0};
  int32_t opId = -1;
  int32_t otherOpId = -1;
  std::string message;  // complete, human-readable
};

/// Bank conflicts of one shared-memory access instruction (opId), summed over
/// all of its warp-wide dynamic instances.
struct BankConflictStat {
  int32_t opId = -1;
  std::string opName;
  uint64_t warpAccesses = 0;  // dynamic warp-wide instances
  uint64_t wavefronts = 0;    // LDS/shared cycles needed in total
  uint64_t conflicts = 0;     // extra wavefronts caused by bank conflicts
};

struct LaunchReport {
  uint64_t blocks = 0;           // of the grid, cancelled ones included
  uint64_t blocksCancelled = 0;  // never run: cancelled by cluster launch control
  uint64_t threads = 0;
  uint64_t fiberSwitches = 0;  // resumptions of fibers by the scheduler
  double seconds = 0;
  std::array<uint64_t, kIssueKinds> counts{};
  std::vector<Issue> issues;                    // first maxReports distinct reports
  std::vector<BankConflictStat> bankConflicts;  // by opId ascending
  uint64_t totalBankConflicts = 0;

  uint64_t count(IssueKind k) const { return counts[static_cast<size_t>(k)]; }
  /// Any race, out-of-bounds access, barrier/collective error or exception.
  bool hasErrors() const;
  const BankConflictStat* conflictsOf(int32_t opId) const;
  std::string summary() const;
};

/// The JIT-compiled kernel body of one GPU thread; `args` as CUDA kernelParams.
using ThreadFn = void (*)(void* const* args);

/// Runs the grid. Throws LaunchError for a malformed config, EmulatorError
/// when the kernel misbehaved and cfg.throwOnError.
LaunchReport launch(ThreadFn fn, void* const* args, const LaunchConfig& cfg);

/// Addresses of the C-ABI hooks by symbol name, so the JIT binds them
/// explicitly instead of relying on symbols exported by the executable.
const std::vector<std::pair<const char*, void*>>& hookSymbols();

}  // namespace tessera::emu

// ---- the hooks the rewritten kernel calls -----------------------------------
// Declared from the hook table (tessera/support/EmuHooks.def, which documents
// each hook), with the mode and kind constants they take.
#include "tessera/support/EmuAbi.h"

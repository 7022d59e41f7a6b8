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
  /// 32 on NVIDIA; 64 (gfx90a, gfx942) or 32 (gfx1100) on AMD.
  unsigned warpSize = 32;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};  // at most 1024 threads, as on both vendors
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
  uint64_t blocks = 0;
  uint64_t threads = 0;
  uint64_t fiberSwitches = 0;  // resumptions of fibers by the scheduler
  double seconds = 0;
  std::array<uint64_t, kIssueKinds> counts{};
  std::vector<Issue> issues;  // first maxReports distinct reports
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
// Valid only inside a kernel run by tessera::emu::launch (they throw
// EmulatorError when called elsewhere). Ids and dims are i32 like PTX's
// special registers.
extern "C" {
enum : int32_t {  // shfl modes, as PTX's shfl.sync.{idx,up,down,bfly}
  TESSERA_EMU_SHFL_IDX = 0,
  TESSERA_EMU_SHFL_UP = 1,
  TESSERA_EMU_SHFL_DOWN = 2,
  TESSERA_EMU_SHFL_BFLY = 3,
};
enum : int32_t {  // vote modes, as PTX's vote.sync.{all,any,uni}
  TESSERA_EMU_VOTE_ALL = 0,
  TESSERA_EMU_VOTE_ANY = 1,
  TESSERA_EMU_VOTE_UNI = 2,
};
enum : int32_t {  // memory access kinds
  TESSERA_EMU_LOAD = 0,
  TESSERA_EMU_STORE = 1,
  TESSERA_EMU_ATOMIC = 2,  // read-modify-write; atomics never race each other
};

enum : int32_t {  // matrix instructions (mode argument of the hooks below)
  TESSERA_EMU_MMA_M16N8K16_F16 = 0,   // mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
  TESSERA_EMU_MMA_M16N8K16_BF16 = 1,  // ... .f32.bf16.bf16.f32
  TESSERA_EMU_MFMA_32X32X8_F16 = 0,   // v_mfma_f32_32x32x8f16
  TESSERA_EMU_MFMA_32X32X8_BF16 = 1,  // v_mfma_f32_32x32x8bf16_1k
  TESSERA_EMU_MFMA_16X16X16_F16 = 2,  // v_mfma_f32_16x16x16f16
  TESSERA_EMU_MFMA_16X16X16_BF16 = 3, // v_mfma_f32_16x16x16bf16_1k
  TESSERA_EMU_WMMA_16X16X16_F16 = 0,  // v_wmma_f32_16x16x16_f16 (wave32)
  TESSERA_EMU_WMMA_16X16X16_BF16 = 1, // v_wmma_f32_16x16x16_bf16 (wave32)
};
/// ldmatrix mode: number of 8x8 matrices (1, 2, 4), plus this flag for .trans.
#define TESSERA_EMU_LDMATRIX_TRANS 8

int32_t tessera_emu_thread_id_x(void);
int32_t tessera_emu_thread_id_y(void);
int32_t tessera_emu_thread_id_z(void);
int32_t tessera_emu_block_id_x(void);
int32_t tessera_emu_block_id_y(void);
int32_t tessera_emu_block_id_z(void);
int32_t tessera_emu_block_dim_x(void);
int32_t tessera_emu_block_dim_y(void);
int32_t tessera_emu_block_dim_z(void);
int32_t tessera_emu_grid_dim_x(void);
int32_t tessera_emu_grid_dim_y(void);
int32_t tessera_emu_grid_dim_z(void);
int32_t tessera_emu_lane_id(void);
int32_t tessera_emu_warp_size(void);

/// bar.sync 0 / s_barrier. `siteId` names the barrier instruction (an opId,
/// or -1 if unknown): threads meeting at different sites are a divergent
/// barrier.
void tessera_emu_barrier(int32_t siteId);
/// bar.warp.sync: rendezvous of the lanes in `mask` (no memory ordering is
/// modelled for the race checker).
void tessera_emu_syncwarp(uint64_t mask);
/// shfl.sync.mode.b32 d, value, b, c, mask. For wave64 the lane fields of b
/// and c are 6 bits wide (segment mask in c[13:8]); for 32 lanes exactly PTX.
int32_t tessera_emu_shfl_sync(int32_t mode, uint64_t mask, int32_t value, int32_t b, int32_t c);
/// As tessera_emu_shfl_sync; returns (uint32 d) | (uint64 p << 32).
uint64_t tessera_emu_shfl_sync_pred(int32_t mode, uint64_t mask, int32_t value, int32_t b,
                                    int32_t c);
/// vote.sync.{all,any,uni}.pred over the lanes in `mask`: returns 0 or 1.
int32_t tessera_emu_vote_sync(int32_t mode, uint64_t mask, int32_t pred);
/// vote.sync.ballot.b32 (64-bit for wave64): bit i set iff lane i is in
/// `mask` and its pred is non-zero.
uint64_t tessera_emu_ballot_sync(uint64_t mask, int32_t pred);
/// AMD ds_bpermute_b32 over all live lanes of the wave: the value of lane
/// (byteAddr / 4) mod waveSize; 0 when that lane is not live.
int32_t tessera_emu_ds_bpermute(int32_t byteAddr, int32_t value);
/// AMD v_readlane_b32 (lane taken mod waveSize; 0 from a lane not live) and
/// v_readfirstlane_b32, over all live lanes of the wave.
int32_t tessera_emu_readlane(int32_t value, int32_t lane);
int32_t tessera_emu_readfirstlane(int32_t value);
/// AMD llvm.amdgcn.ballot over all live lanes of the wave: bit i set iff lane
/// i is live and its pred is non-zero (any/all votes derive from it).
uint64_t tessera_emu_wave_ballot(int32_t pred);

/// Warp-collective matrix instructions. Each lane passes pointers to its own
/// fragment registers (32-bit words; 16-bit elements packed low half first)
/// and receives its output fragment in `d` / `out` once every lane of the
/// warp has arrived; the whole warp must execute them (a partial or exited
/// warp is a CollectiveMisuse). Products of f16/bf16 inputs are exact in f32
/// and are accumulated in f32 in k order, starting from C.
///
/// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16: lane i gives
/// the address of row i % 8 of matrix i / 8 (lanes >= 8 * count give none);
/// each such row read (16 bytes) is a checked shared access of op `opId`.
/// Lane i receives in out[j] the elements (i / 4, 2 (i % 4) + {0,1}) of
/// matrix j, or (2 (i % 4) + {0,1}, i / 4) with .trans.
void tessera_emu_ldmatrix(int32_t mode, void* rowAddr, int32_t opId, uint32_t* out);
/// mma.sync m16n8k16 row.col, f32 accumulator: a[4], b[2], c[4] -> d[4]
/// (NVIDIA fragment layouts of the PTX ISA).
void tessera_emu_mma_sync(int32_t mode, const uint32_t* a, const uint32_t* b, const float* c, float* d);
/// AMD MFMA (wave64), cbsz = abid = blgp = 0: a[2], b[2] (4 elements each),
/// c/d[16] (32x32x8) or c/d[4] (16x16x16).
void tessera_emu_mfma(int32_t mode, const uint32_t* a, const uint32_t* b, const float* c, float* d);
/// AMD WMMA 16x16x16 (wave32): a[8], b[8] (16 elements), c/d[8] f32. Lanes
/// 16-31 must hold the same A and B as lanes 0-15 (as the ISA requires);
/// the machine reads lanes 0-15.
void tessera_emu_wmma(int32_t mode, const uint32_t* a, const uint32_t* b, const float* c, float* d);

/// cp.async.{ca,cg}.shared.global: records a copy of `bytes` (4, 8, 16)
/// from global `src` to shared `dst`, of which only the first `srcBytes`
/// are read (the rest zero-filled; 0 = no global access), in the thread's
/// open group. Nothing is copied yet: the copy is performed when a
/// cp_async_wait retires its group. Until then, any access of its shared
/// bytes by any thread (or a second copy into them) is a SharedRace.
void tessera_emu_cp_async(void* dst, const void* src, int32_t bytes, int32_t srcBytes, int32_t opId);
/// cp.async.commit_group: closes the thread's open group (possibly empty).
void tessera_emu_cp_async_commit(void);
/// cp.async.wait_group N: performs, in issue order, every copy of all but
/// the newest `pending` committed groups of the thread. Copies still
/// recorded when the thread exits are an AsyncCopyMisuse.
void tessera_emu_cp_async_wait(int32_t pending);

/// The block's shared memory (static + dynamic), filled with 0xCD at block start.
void* tessera_emu_shared_base(void);
/// Instrumented shared / global access of `bytes` at `addr` (kind: LOAD,
/// STORE, ATOMIC). Returns the address the access must use: `addr` itself,
/// or a harmless scratch area when the access is out of bounds, so a bad
/// access is reported instead of corrupting the host.
void* tessera_emu_shared_access(void* addr, uint64_t bytes, int32_t kind, int32_t opId);
void* tessera_emu_global_access(void* addr, uint64_t bytes, int32_t kind, int32_t opId);
}

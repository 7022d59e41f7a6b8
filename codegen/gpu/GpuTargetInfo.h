// The target hooks of the shared GPU lowering. The lowering (GpuLowering.cpp
// and the Lower*.cpp files) is written once against this interface;
// codegen/nvptx and codegen/amdgpu implement it per vendor
// (NVPTXTargetInfo.cpp, AMDGPUTargetInfo.cpp, and the dot emitters per MMA
// family beside them). Every instruction choice lives in those folders, in
// tables where there is a choice to make, and every architecture fact in
// Targets.def (row()): codegen/gpu names no vendor and includes nothing of
// theirs (docs/architecture.md). Private to codegen: includes LLVM headers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/gpu/GpuCompile.h"
#include "tessera/ir/analysis/Layout.h"
#include "tessera/codegen/Compiler.h"
#include "tessera/ir/Atomics.h"
#include "tessera/ir/IR.h"
#include "tessera/support/Error.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

struct DotEmitter;
struct DotOperandSources;
struct DotStaging;
struct TensorCoreDotPlan;

/// How one math op on one dtype is implemented on a target.
enum class MathImpl {
  Polynomial,     // VectorMath.h emitters: same code and accuracy on every target
  DeviceLibrary,  // a call into the vendor's device math library, linked into the module
  LlvmIntrinsic,  // a generic LLVM intrinsic the backend lowers natively (sqrt, floor, fma)
};
struct MathChoice {
  MathImpl impl;
  const char* why;  // one line for docs and error messages
  /// DeviceLibrary: the library function computing the op ("__nv_sin").
  std::string function;
};

/// What a vendor's native math instructions and device library are, for the
/// math table both GPU targets share (gpuMath): the choices are the same,
/// only the instructions and the library differ.
struct GpuMathNotes {
  /// The prefix of the device library's f64 functions ("__nv_": libdevice)
  /// when that library is found and will be linked; nullptr when there is
  /// none (AMD: the ROCm device libraries are not used; NVIDIA without the
  /// CUDA toolkit), and f64 takes the polynomials.
  const char* libraryPrefix;
  const char *sqrt, *rsqrt, *floor;
};
/// The GPU math table: f32 transcendentals from the shared polynomials
/// (VectorMath.h); f64 ones from the device library where one is linked
/// (sigmoid, which it lacks, excepted), else the f64 polynomials; sqrt/rsqrt/floor and the rest as native
/// instructions.
MathChoice gpuMath(ir::OpCode op, DType dt, const GpuMathNotes& notes);

/// The matrix ("tensor core") instructions of a target for one dot flavour.
/// GpuDot.cpp emits them; the tables live in the vendor files.
struct TensorCoreOp {
  ir::MmaKind kind = ir::MmaKind::None;
  llvm::Intrinsic::ID mma = llvm::Intrinsic::not_intrinsic;
  /// The instruction whose placement the layouts give the dots `kind` does
  /// not fit (ir::mmaLayout): NVIDIA wgmma's mma.sync (the same `mma`), AMD
  /// MFMA 32x32x8's 16x16x16 and 32x32x16's 16x16x32 (`mmaSmall`); None
  /// where there is none.
  ir::MmaKind small = ir::MmaKind::None;
  llvm::Intrinsic::ID mmaSmall = llvm::Intrinsic::not_intrinsic;
  /// The one after that, where `small` does not fit either (MFMA
  /// 32x32x16's 16x16x16, for a K that is not a multiple of 32); None where
  /// there is none.
  ir::MmaKind smaller = ir::MmaKind::None;
  llvm::Intrinsic::ID mmaSmaller = llvm::Intrinsic::not_intrinsic;
  /// NVPTX: ldmatrix .x4 (A fragments, and B fragments from an N x K
  /// buffer), .x2 (the last n-tile of an N x K B), .x4.trans and .x2.trans
  /// (B fragments from a row-major K x N buffer, 16-bit elements only);
  /// unused on AMDGPU.
  llvm::Intrinsic::ID ldA = llvm::Intrinsic::not_intrinsic;
  llvm::Intrinsic::ID ldAx2 = llvm::Intrinsic::not_intrinsic;
  llvm::Intrinsic::ID ldBx4 = llvm::Intrinsic::not_intrinsic;
  llvm::Intrinsic::ID ldBx2 = llvm::Intrinsic::not_intrinsic;
  /// The block-scaled form of `mma` (the same operands and placement, plus
  /// e8m0 scales of blocks of 32 along K per row of A and column of B: a
  /// dot's operands 3 and 4, IR.h), and of `mmaSmall`; not_intrinsic where
  /// the target has none (NVIDIA sm_120a's mma.sync
  /// .kind::mxf8f6f4.block_scale; AMD gfx950's v_mfma_scale_f32_32x32x64 and
  /// 16x16x128 f8f6f4).
  llvm::Intrinsic::ID mmaBlockScale = llvm::Intrinsic::not_intrinsic;
  llvm::Intrinsic::ID mmaSmallBlockScale = llvm::Intrinsic::not_intrinsic;
  /// fp4 x fp4 taken packed, two codes a byte along K as the format packs
  /// them (ir::ScaledDotForm::PackedFp4): the packed instruction's K as a
  /// multiple of `kind`'s (AMD's f8f6f4 forms: 1, their K counts elements
  /// either way; NVIDIA's kind::mxf4 m16n8k64 on m16n8k32's placement: 2),
  /// 0 where fp4 is not taken packed (it sits a byte an element in the
  /// containers, as in every mixed pair); and that instruction, where it
  /// is not mmaBlockScale (NVIDIA's).
  int64_t fp4PackedK = 0;
  llvm::Intrinsic::ID mmaFp4Packed = llvm::Intrinsic::not_intrinsic;
  /// NVFP4 x NVFP4 (UE4M3 scales of blocks of 16, `scale_elem`), packed as
  /// mmaFp4Packed (NVIDIA sm_120a's kind::mxf4nvf4 scale_vec::4X);
  /// not_intrinsic where the target has no such instruction.
  llvm::Intrinsic::ID mmaNvfp4 = llvm::Intrinsic::not_intrinsic;
  /// The block-scaled instruction takes fp6 and fp4 elements one a byte
  /// (ir::ScaledDotForm::Containers): sm_120a's mma.sync and gfx950's MFMA
  /// do; tcgen05 reads them from shared memory in padded formats of its
  /// own, which nothing here writes, so it takes fp8 (containers are the
  /// codes) and packed fp4 only.
  bool subByteContainers = true;
};

/// How a target lowers `copy {async = 1}` and the group ops (IR.h,
/// docs/pipelining.md). Every choice is legal under the memory model: the
/// copy may complete at any time between its issue and its retiring wait.
enum class AsyncCopyImpl {
  /// Program-order copy (global loads, shared stores) where it is issued;
  /// async_commit / async_wait emit nothing.
  Synchronous,
  /// A hardware global->shared copy per aligned chunk (asyncCopy below,
  /// NVIDIA cp.async) with commit / wait groups (asyncCommit, asyncWait).
  Hardware,
  /// The global loads at the copy, the shared stores deferred (in
  /// registers) up to the wait that retires the group, the end of the loop
  /// body, or the next `for` / `return` (LowerAsyncCopy.cpp explains why that
  /// is safe). For targets without an async copy we use (AMDGPU).
  RegisterStaged,
};

/// What a backend produced from the optimised module.
struct GpuOutput {
  std::string assembly;          // PTX text or AMDGCN assembly
  std::vector<char> codeObject;  // AMDGPU: the linked .hsaco (empty on NVPTX)
  /// NVPTX: the shared memory the launch passes (the allocator's array is
  /// dynamic), for the occupancy estimate; AMDGPU's is in the code object.
  uint64_t dynamicSharedBytes = 0;
};

class GpuTargetInfo {
 public:
  /// The hooks of `c`'s device; `c` must outlive them.
  explicit GpuTargetInfo(const GpuConfig& c) : config_(c) {}
  virtual ~GpuTargetInfo() = default;

  // ---- identity and limits: the configuration, the device's row of Targets.def
  const GpuConfig& config() const { return config_; }
  const GpuOptions& options() const { return config_.options; }
  const GpuArch& row() const { return *config_.row; }
  std::string arch() const { return row().arch; }  // sm_80, gfx942, ...
  virtual std::string triple() const = 0;
  unsigned warpSize() const { return config_.warpSize(); }
  virtual unsigned maxThreadsPerBlock() const { return 1024; }
  uint64_t maxSharedBytes() const { return static_cast<uint64_t>(row().maxSharedBytes); }
  /// 32-bit registers one thread can address (NVIDIA: 255 on sm_80+).
  int maxRegistersPerThread() const { return row().maxRegistersPerThread; }

  // ---- address spaces (the same numbers on both vendors) -----------------
  unsigned globalAS() const { return 1; }
  unsigned sharedAS() const { return 3; }
  unsigned localAS() const { return 5; }

  // ---- IR emission hooks ---------------------------------------------------
  /// Thread index within the block, block index, block size, grid size in
  /// blocks, along axis 0..2; all i32.
  virtual llvm::Value* threadId(llvm::IRBuilderBase& b, int axis) = 0;
  virtual llvm::Value* blockId(llvm::IRBuilderBase& b, int axis) = 0;
  virtual llvm::Value* blockDim(llvm::IRBuilderBase& b, int axis) = 0;
  virtual llvm::Value* gridDim(llvm::IRBuilderBase& b, int axis) = 0;
  /// Profiled compiles (codegen/gpu/LowerProfile.cpp, tessera/support/
  /// Profile.h): the i64 time a probe records and what it counts, and the
  /// i32 number of the SM / CU the thread runs on.
  virtual llvm::Value* profileClock(llvm::IRBuilderBase& b) = 0;
  virtual KernelBinary::ProfileClock profileClockKind() const = 0;
  virtual llvm::Value* profileUnit(llvm::IRBuilderBase& b) = 0;
  /// For rematerialisation after loops (RematerializeAfterLoops.h): when
  /// `v` reads a special register (thread or block index), a value equal to
  /// it at `b` that the code generator will not merge with `v` (a new
  /// read), or `v` itself where reading it after a loop costs nothing;
  /// nullptr for any other instruction, and on targets that cannot read
  /// it again.
  virtual llvm::Value* rereadSpecialRegister(llvm::IRBuilderBase& b, llvm::Instruction& v) { return nullptr; }
  /// Block-wide barrier that also orders shared and global memory effects of
  /// the block's threads (CUDA __syncthreads semantics). With `sharedOnly`
  /// the caller guarantees that only shared-memory effects need ordering
  /// (no global access before the barrier conflicts with one after it), and
  /// a target may leave global loads in flight across it.
  virtual void barrier(llvm::IRBuilderBase& b, bool sharedOnly) = 0;
  // Thread-block clusters (a row with maxClusterBlocks > 0). The lowering
  // asks for them only in a cluster of more than one block
  // (GpuOptions::cluster); a cluster of one is the block itself.
  /// The block's rank in its cluster (i32, x fastest).
  virtual llvm::Value* clusterRank(llvm::IRBuilderBase& b) { TS_UNREACHABLE("clusters on a target without them"); }
  /// Every thread of the cluster's blocks arrives, releasing its memory
  /// effects, before any goes on, acquiring the others'.
  virtual void clusterBarrier(llvm::IRBuilderBase& b) { TS_UNREACHABLE("clusters on a target without them"); }
  /// Shared pointer `p` as block `rank` (i32) of the cluster holds it: a
  /// pointer into that block's shared memory, which loads and stores take
  /// (NVIDIA: the shared::cluster window, address space 7).
  virtual llvm::Value* mapShared(llvm::IRBuilderBase& b, llvm::Value* p, llvm::Value* rank) {
    TS_UNREACHABLE("clusters on a target without them");
  }
  // Cancelling blocks that have not started (cancel_program; a row with
  // clc). The lowering asks one thread to request, every thread to wait on
  // the mbarrier and read the response.
  /// Asks the hardware to cancel a block of the launch that has not
  /// started: its 16-byte response goes to shared `response` (16-byte
  /// aligned), its bytes completing on the mbarrier `bar`.
  virtual void tryCancel(llvm::IRBuilderBase& b, llvm::Value* response, llvm::Value* bar) {
    TS_UNREACHABLE("cancel_program on a target that cannot cancel blocks");
  }
  /// The cancelled block's index on axis 0 (i32) from a response (i128),
  /// or -1 where nothing was cancelled.
  virtual llvm::Value* cancelledBlock(llvm::IRBuilderBase& b, llvm::Value* response) {
    TS_UNREACHABLE("cancel_program on a target that cannot cancel blocks");
  }
  /// Orders this thread's earlier shared-memory stores before later reads
  /// of the same bytes by the asynchronous proxy (NVIDIA: wgmma's operand
  /// reads; `fence.proxy.async.shared::cta`). A barrier after it publishes
  /// them to the other threads' asynchronous operations. Default: nothing
  /// (targets whose matrix instructions read registers only).
  virtual void sharedToAsyncProxyFence(llvm::IRBuilderBase& b) {}
  /// Keeps the machine scheduler from moving instructions across this point
  /// (used before deferred shared-memory stores, so they stay after the
  /// compute they are meant to overlap). Default: nothing.
  virtual void schedulingBarrier(llvm::IRBuilderBase& b) {}
  /// The LLVM synchronisation scope of an atomic or fence of IR scope `s`
  /// (program: the block; device: all blocks of the grid; system: "", LLVM's
  /// default): each backend spells them its own way and rejects the others'.
  virtual const char* syncScope(ir::MemScope s) const = 0;
  /// One element of an atomic_rmw, where the backend needs it written its
  /// own way; nullptr: LLVM's atomicrmw with the order and scope as they are.
  virtual llvm::Value* atomicRmw(llvm::IRBuilderBase& b, ir::AtomicKind kind, DType dt, llvm::Value* p, llvm::Value* v,
                                 ir::MemOrder order, ir::MemScope scope) {
    return nullptr;
  }
  /// Lane `lane ^ mask` / lane `src` of the same warp; i32 values, all lanes
  /// of the warp active. Wider or narrower values are split by the caller.
  virtual llvm::Value* shuffleXor(llvm::IRBuilderBase& b, llvm::Value* v, unsigned mask) = 0;
  /// Lane `lane ^ mask`'s value where every lane holds the same value as
  /// the lanes that differ from it only in the bits below `mask` (a
  /// butterfly reduction's step after those below it): the target may read
  /// any lane of the partner group instead. The default is shuffleXor.
  virtual llvm::Value* shuffleXorOfUniformGroups(llvm::IRBuilderBase& b, llvm::Value* v, unsigned mask) {
    return shuffleXor(b, v, mask);
  }
  virtual llvm::Value* shuffleIdx(llvm::IRBuilderBase& b, llvm::Value* v, llvm::Value* srcLane) = 0;
  /// `v`, an i32 the caller knows to be equal in all lanes of the warp (the
  /// warp index), in a form the backend's uniformity analysis sees as such,
  /// where that changes the code: the default is `v` itself.
  virtual llvm::Value* warpUniform(llvm::IRBuilderBase& b, llvm::Value* v) { return v; }
  /// Creates the kernel function with the vendor's calling convention and
  /// attributes (max threads per block = `threads`).
  virtual llvm::Function* createKernel(llvm::Module& m, const std::string& name, llvm::FunctionType* ty,
                                       unsigned threads) = 0;
  /// Declares the block's shared-memory array of `bytes` bytes (i8 array
  /// in address space 3, aligned to 16 bytes, 1024 where wgmma may read it:
  /// the lowering aligns offsets into it up to that); nullptr-free even for
  /// 0 bytes.
  virtual llvm::GlobalVariable* declareShared(llvm::Module& m, uint64_t bytes) = 0;
  /// The math table of this target.
  virtual MathChoice math(ir::OpCode op, DType dt) const = 0;
  /// Precision::Approximate: the hardware approximation of f32 `op` on
  /// operands `v` (exp, exp2, log, log2, sqrt, rsqrt, div), or nullptr where
  /// the target has none and the accurate lowering stands.
  virtual llvm::Value* approxMath(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v) const {
    return nullptr;
  }
  /// The target's own instruction for integer `op` on scalar operands `v`
  /// of dtype `dt`, with exactly the semantics of IR.h, or nullptr for the
  /// shared lowering (Elementwise.cpp).
  virtual llvm::Value* integerOp(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v,
                                 DType dt) const {
    return nullptr;
  }
  /// The matrix instruction for a dot of an `a` by a `b` operand into an
  /// `acc` accumulator (kind None: the FMA lowering). The one table of what
  /// a target's matrix instructions take: the layouts, the lowering and the
  /// widening of fp8 dots the target has no instruction for
  /// (gpuTensorCoreTakes, ir/passes/WidenFp8Dots.cpp) all ask it.
  virtual TensorCoreOp tensorCore(DType a, DType b, DType acc) const { return {}; }

  // ---- tensor-core dots (GpuDot.h): each vendor's MMA families ------------------
  /// The staging buffers of dot plan `p` (planTensorCoreDot, the common
  /// fields set): layouts, paddings, which operand is stored transposed.
  virtual void planDotStaging(TensorCoreDotPlan& p) const {
    TS_UNREACHABLE("tensor-core dot on a target without matrix instructions");
  }
  /// `p`'s operands XOR-swizzled instead of padded, where the family can
  /// (the lowering keeps it where that raises the occupancy); false, `p`
  /// unchanged, elsewhere.
  virtual bool swizzleDotStaging(TensorCoreDotPlan& p) const { return false; }
  /// A dot's operand `operand` read in place from a shared slot
  /// (planDirectDots): the slot's layout `st` (the plan's, `transposed`
  /// where it is B^T) and alignment `align` the instruction reads it in;
  /// false where it cannot read such a slot. A target may store B other
  /// than the plan (`transposed` flipped, `st` its shape): only the dot's
  /// first-choice instruction reads that slot, so the lowering keeps it
  /// only where that instruction is taken (Lower::planDirectDots).
  virtual bool directDotStaging(const TensorCoreDotPlan& p, unsigned operand, bool& transposed, DotStaging& st,
                                uint64_t& align) const {
    return true;
  }
  /// The plan's instruction form and staging once the lowering knows where
  /// its operands come from (Lower::dotPlan).
  virtual void planDotForm(TensorCoreDotPlan& p, const DotOperandSources& s) const {}
  /// Bytes per chunk of an operand of a `k` dot copied global -> shared
  /// straight into its staging (Lower::globalCopyDim).
  virtual int64_t dotCopyChunkBytes(ir::MmaKind k) const { return 16; }
  /// Along which dim operand `operand` (0: A, 1: B) may be copied so, given
  /// the dim `fast` its pointers are contiguous along, its element size, B's
  /// columns and the accumulator layout; -1: not at all.
  virtual int dotCopyDim(unsigned operand, int fast, int64_t elemBytes, int64_t cols,
                         const ir::BlockedLayout& acc) const {
    return -1;
  }
  /// Whether those copies are the hardware async copy (asyncCopyImpl
  /// Hardware, and only where the program has no async groups of its own),
  /// else synchronous chunks.
  virtual bool dotCopiesAsync() const { return false; }
  /// Whether a chained dot whose A and B are both staged may read A's
  /// fragments before B is staged over it (Lower::dotArea): where
  /// A's accumulator layout is not already the A fragments'.
  virtual bool dotFragmentsFirst() const { return false; }
  /// Emits the fragment loads and matrix instructions of one dot
  /// (emitTensorCoreDot, loadTensorCoreFragments).
  virtual std::vector<llvm::Value*> emitDot(DotEmitter& e, std::vector<llvm::Value*> acc) const {
    TS_UNREACHABLE("tensor-core dot on a target without matrix instructions");
  }
  // ---- block-scaled dots (IR.h: `dot` with operands 3 and 4) -------------
  /// Whether a block-scaled dot on `op`, placed `acc` (ir::mmaLayout), M x
  /// N after padding with `scaleBlocks` scales a row, can run on the
  /// instruction; false: it is decomposed (gpuScaledDotNative). NVIDIA
  /// tcgen05: only its M = 128 shape, within the tensor memory.
  virtual bool takesScaledDot(const TensorCoreOp& op, const ir::BlockedLayout& acc, int64_t M, int64_t N,
                              int64_t scaleBlocks) const {
    return true;
  }
  /// The byte of the scale of (`row`, `block`) of operand `operand` (0: A's
  /// [M, scaleBlocks]; 1: B's [N, scaleBlocks]) in one staged set
  /// (TensorCoreDotPlan::scaleSetBytes): row-major, A's then B's, unless
  /// the plan says scaleAtoms (the target's layout). i32 values.
  virtual llvm::Value* scaleStagingOffset(llvm::IRBuilderBase& b, const TensorCoreDotPlan& p, unsigned operand,
                                          llvm::Value* row, llvm::Value* block) const;
  /// The wait of a dot_wait where dots were left in flight
  /// (TensorCoreDotPlan::inFlight): the float registers `regs`
  /// (accumulators) pass through it, so every later use depends on it.
  virtual std::vector<llvm::Value*> dotWait(llvm::IRBuilderBase& b, int pending,
                                            const std::vector<llvm::Value*>& regs) const {
    TS_UNREACHABLE("dots in flight on a target without asynchronous matrix instructions");
  }
  // ---- accumulator memory (NVIDIA tcgen05's tensor memory) --------------
  // A dot whose matrix instruction accumulates outside the registers keeps
  // its accumulator there while it is in flight across a loop (`dot
  // {async}`, retired by the loop's dot_wait): the lowering allocates the
  // columns of every such dot once at the kernel's start and frees them at
  // each return; the dot's emitter stores the accumulator there at its
  // first issue and commits each issue to an mbarrier the dot_waits wait on.
  /// Columns of accumulator memory `p` needs (0: it accumulates in registers).
  virtual uint32_t accumulatorColumns(const TensorCoreDotPlan& p) const { return 0; }
  /// The columns a target has (0: none).
  virtual uint32_t accumulatorMemoryColumns() const { return 0; }
  /// Every thread: `columns` (a power of two) allocated by the warp the
  /// target picks, their address written to the shared i32 at `word`; the
  /// caller's barrier then publishes it.
  virtual void allocAccumulators(llvm::IRBuilderBase& b, llvm::Value* word, llvm::Value* warp, uint32_t columns) const {
    TS_UNREACHABLE("accumulator memory on a target without it");
  }
  /// Every thread, at a return: `barrier` emits the block's barrier, after
  /// which the columns at `base` are freed.
  virtual void freeAccumulators(llvm::IRBuilderBase& b, llvm::Value* base, llvm::Value* warp, uint32_t columns,
                                const std::function<void()>& barrier) const {
    TS_UNREACHABLE("accumulator memory on a target without it");
  }
  /// The registers of an in-flight dot's accumulator (e.accMemory), read
  /// after the wait that retired its last issue.
  virtual std::vector<llvm::Value*> loadAccumulators(DotEmitter& e) const {
    TS_UNREACHABLE("accumulator memory on a target without it");
  }
  /// Whether the lowering trades shared memory for occupancy (staging
  /// swizzles, fewer slots, chunked conversions, operands in registers:
  /// lowerToGpuLLVM), weighing waves with row()'s occupancy model.
  virtual bool tradesSharedForOccupancy() const { return false; }

  /// Whether the target adds, subtracts, multiplies and fuses f32 values two
  /// at a time (CDNA's v_pk_add/mul/fma_f32): the lowering then pairs
  /// adjacent elements of those ops into <2 x float> (planPackedMath).
  virtual bool packedF32Math() const { return false; }
  /// Masked global accesses without a branch. predicatedLoad: a load of
  /// `ty` (a scalar or vector of 1 to 16 bytes, a power of two) from global
  /// `ptr`, aligned to its whole size, that reads memory only where the i1
  /// `pred` holds and yields `other` (of type `ty`) elsewhere; nullptr where
  /// the target has no such form (the caller then branches around a plain
  /// load). predicatedStore: likewise a store of `val`; false where the
  /// target has none. NVPTX: `@p ld.global` / `@p st.global`
  /// (codegen/nvptx/NVPTXPredicated.h), which the emulator runs.
  virtual llvm::Value* predicatedLoad(llvm::IRBuilderBase& b, llvm::Type* ty, llvm::Value* ptr, llvm::Value* pred,
                                      llvm::Value* other) {
    return nullptr;
  }
  virtual bool predicatedStore(llvm::IRBuilderBase& b, llvm::Value* val, llvm::Value* ptr, llvm::Value* pred) {
    return false;
  }
  /// Masked global accesses without a branch through a bounds-checked
  /// buffer resource, for pointer tiles with a uniform split
  /// (ir/analysis/UniformSplit.h). `base`: a global pointer that is the same
  /// in every lane; `offset`: the i32 byte offset from it, which the caller
  /// has proven to lie in [0, kBufferBytes - bytes of `ty`] where `pred`
  /// holds. bufferLoad yields `other` where `pred` does not hold and never
  /// reads memory there; bufferStore writes only where it holds. nullptr /
  /// false where the target has no such form (hasBufferAccesses tells
  /// before anything is emitted). AMDGPU: raw buffer loads and stores, the
  /// masked-off lanes' offset past the resource's end.
  static constexpr int64_t kBufferBytes = 0x7fffffff;
  virtual bool hasBufferAccesses() const { return false; }
  virtual llvm::Value* bufferLoad(llvm::IRBuilderBase& b, llvm::Type* ty, llvm::Value* base, llvm::Value* offset,
                                  llvm::Value* pred, llvm::Value* other) {
    return nullptr;
  }
  virtual bool bufferStore(llvm::IRBuilderBase& b, llvm::Value* val, llvm::Value* base, llvm::Value* offset,
                           llvm::Value* pred) {
    return false;
  }
  /// The lowering of `copy {async = 1}` on this target.
  virtual AsyncCopyImpl asyncCopyImpl() const { return AsyncCopyImpl::Synchronous; }
  /// AsyncCopyImpl::Hardware only. Starts a copy of `bytes` (4, 8 or 16)
  /// from `src` (global, aligned to `bytes`) to `dst` (shared, aligned to
  /// `bytes`); where `mask` (an i1; null: always on) is off it reads no
  /// global memory and zero-fills the chunk. It joins the thread's open
  /// group.
  virtual void asyncCopy(llvm::IRBuilderBase& b, llvm::Value* dst, llvm::Value* src, unsigned bytes,
                         llvm::Value* mask) {
    TS_UNREACHABLE("asyncCopy on a target without a hardware async copy");
  }
  /// Closes the thread's open group of async copies.
  virtual void asyncCommit(llvm::IRBuilderBase& b) {}
  /// Waits until at most `pending` of the thread's committed groups are in
  /// flight (the older ones have written shared memory).
  virtual void asyncWait(llvm::IRBuilderBase& b, unsigned pending) {}

  // ---- tensor copies and transaction barriers (LowerTma.cpp) ---------------
  /// Whether async copies of a tiled global box may be one tensor copy by
  /// one thread (NVIDIA TMA, sm_90a) completing on a transaction barrier.
  virtual bool hasTensorCopies() const { return false; }
  /// Marks parameter `argNo` of kernel `fn` as a tensor map: 128 bytes
  /// passed by value, read in place (its address is what a copy names).
  virtual void declareTensorMapParam(llvm::Function& fn, unsigned argNo) {
    TS_UNREACHABLE("tensor maps on a target without tensor copies");
  }
  /// `bar`: an 8-byte transaction barrier in shared memory. Init: `count`
  /// arrivals per phase (one thread), then initFence and a block barrier.
  virtual void mbarrierInit(llvm::IRBuilderBase& b, llvm::Value* bar, unsigned count) {
    TS_UNREACHABLE("mbarrier on a target without tensor copies");
  }
  virtual void mbarrierInitFence(llvm::IRBuilderBase& b) {}
  /// `bytes` (i32) more transaction bytes in the barrier's current phase.
  virtual void mbarrierExpectTx(llvm::IRBuilderBase& b, llvm::Value* bar, llvm::Value* bytes) {
    TS_UNREACHABLE("mbarrier on a target without tensor copies");
  }
  /// The box of tensor map `map` at `coords` (i32, innermost first) into
  /// shared `dst`, completing its bytes on `bar`.
  virtual void tensorLoad(llvm::IRBuilderBase& b, llvm::Value* dst, llvm::Value* map, llvm::Value* const* coords,
                          unsigned rank, llvm::Value* bar) {
    TS_UNREACHABLE("tensor copies on a target without them");
  }
  /// The 2-D box of tensor map `map` at `coords` (i32, innermost first)
  /// from shared `src` to global memory, issued by one lane of the
  /// (converged) warp and complete when it returns.
  virtual void tensorStore(llvm::IRBuilderBase& b, llvm::Value* map, llvm::Value* const* coords, llvm::Value* src) {
    TS_UNREACHABLE("tensor copies on a target without them");
  }
  virtual void mbarrierArrive(llvm::IRBuilderBase& b, llvm::Value* bar) {
    TS_UNREACHABLE("mbarrier on a target without tensor copies");
  }
  /// Returns once the phase of parity `parity` (i32) of `bar` has
  /// completed; the builder continues in a new block.
  virtual void mbarrierWait(llvm::IRBuilderBase& b, llvm::Value* bar, llvm::Value* parity) {
    TS_UNREACHABLE("mbarrier on a target without tensor copies");
  }

  // ---- warp specialisation (LowerSpecialize.cpp) -----------------------------
  /// Barrier `id` (1..15; 0 is the block's) of `threads` threads, a multiple
  /// of the warp size: the consumer warps' own barrier while the producer
  /// runs apart.
  virtual void barrierCount(llvm::IRBuilderBase& b, unsigned id, unsigned threads) {
    TS_UNREACHABLE("counted barriers on a target without warp specialisation");
  }
  /// One arrival per warp on `bar`, after every lane's earlier accesses
  /// (a warp sync, then one elected lane).
  virtual void mbarrierArriveWarp(llvm::IRBuilderBase& b, llvm::Value* bar) {
    TS_UNREACHABLE("mbarrier on a target without tensor copies");
  }
  /// Register rebalancing between warpgroups: the kernel starts with
  /// `launch` registers per thread (setLaunchRegisters); a warpgroup then
  /// gives registers back (`increase` false) or takes them (true) up to
  /// `regs` (a multiple of 8 in [24, 256]; setmaxnreg).
  virtual void setLaunchRegisters(llvm::Function& fn, unsigned launch) {
    TS_UNREACHABLE("register rebalancing on a target without it");
  }
  virtual void setMaxRegisters(llvm::IRBuilderBase& b, unsigned regs, bool increase) {
    TS_UNREACHABLE("register rebalancing on a target without it");
  }

  // ---- backend ---------------------------------------------------------------
  /// The LLVM pass pipeline that optimises the lowered kernel (GpuCompile.cpp
  /// explains the choice of passes).
  virtual const char* kernelPipeline() const = 0;
  /// Runs after that pipeline, on each function.
  virtual void afterKernelPipeline(llvm::Function& f) const {}
  /// Whether the code generator skips CodeGenPrepare (GpuCompile.cpp).
  virtual bool skipsCodeGenPrepare() const { return false; }
  /// The compile-times stage name of emit().
  virtual const char* emitStage() const = 0;
  /// Stores the backend's output in the artifact's binary and dumps.
  virtual void storeOutput(GpuOutput& out, KernelBinary& bin, StageDumps& dumps) const = 0;
  /// The calling thread's TargetMachine for this architecture and optLevel
  /// (cachedGpuTargetMachine): reused by every compile on the thread.
  virtual llvm::TargetMachine& targetMachine(int optLevel) = 0;
  /// Module-level settings the backend needs (module flags, ...) and the
  /// device library the lowering called into, linked and inlined.
  virtual void prepareModule(llvm::Module& m, llvm::TargetMachine& tm) {}
  /// The PTX or the linked code object. Consumes `m` (code generation
  /// mutates it; compileGpu keeps a copy made before).
  virtual GpuOutput emit(llvm::Module& m, llvm::TargetMachine& tm) = 0;
  /// Registers, spills, shared memory of the compiled kernel, and its
  /// occupancy at `threadsPerBlock` threads; throws DeviceError if the tool
  /// it needs is missing.
  virtual GpuResources resources(const GpuOutput& out, const std::string& kernel, unsigned threadsPerBlock) = 0;

 private:
  const GpuConfig& config_;
};

/// The TargetMachine both vendors build the same way: `initTarget` registers
/// the vendor's LLVM target once, the rest is the triple, processor and
/// feature string of the architecture. `vendor` names it in errors. One per
/// thread and configuration, kept for the thread's lifetime: what a backend
/// builds lazily on first use (subtarget, lowering tables, register alias
/// caches) is then built once, not per compile.
llvm::TargetMachine& cachedGpuTargetMachine(void (*initTarget)(), const std::string& vendor, const std::string& triple,
                                            const std::string& cpu, const std::string& features,
                                            std::optional<llvm::Reloc::Model> reloc, int optLevel);

}  // namespace tessera::codegen

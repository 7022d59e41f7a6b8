// Hopper's tensor memory accelerator (TMA) and shared-memory barriers
// (mbarrier) on NVPTX, as inline assembly: the lowering writes exactly these
// texts and the emulator (codegen/emu/EmuInlineAsm.cpp) recognises exactly
// these texts, so the two sides are defined by this one file (as
// NVPTXWgmma.h does for wgmma).
//
// The protocol the lowering builds from them (codegen/gpu/LowerTma.cpp):
//   * one mbarrier per in-flight group of async copies, initialised with an
//     arrival count of 1 by thread 0 at the kernel's start, then a fence and
//     a block barrier;
//   * a copy: one elected lane of warp 0 announces the box's bytes on the
//     group's barrier (expect_tx) and issues `cp.async.bulk.tensor` naming it;
//   * async_commit: that lane arrives once on the group's barrier (the phase
//     completes when that arrival and every announced byte have come);
//   * async_wait: every thread waits for the phase of each group it retires
//     (try_wait.parity in a loop).
// Private to codegen; free of LLVM headers (tests include it).
#pragma once

#include <string_view>

#include "../llvm/LLVMForward.h"  // relative: tests include these headers by path

namespace tessera::codegen::nvptx {

/// The texts and constraints. Shared-memory operands are 32-bit ("r")
/// addresses in the shared window, the tensor map a 64-bit generic address
/// of the kernel's grid-constant parameter ("l").
///   init:   $0 barrier, $1 arrival count (i32)
///   expect: $0 barrier, $1 bytes (i32); this and the next three by the
///           lane elect.sync picks among all 32 (the warp must be converged)
///   copy2d: $0 shared destination, $1 tensor map, $2 $3 coordinates
///           (innermost first, i32), $4 barrier
///   copy3d: likewise with $2 $3 $4 coordinates, $5 barrier
///   arrive: $0 barrier
///   wait:   $0 (output i32: 1 once the phase of parity $2 has completed,
///           else 0), $1 barrier, $2 parity (i32)
struct TmaAsm {
  std::string_view text, constraints;
};
inline constexpr TmaAsm kMbarrierInit{"mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}"};
inline constexpr TmaAsm kMbarrierInitFence{"fence.mbarrier_init.release.cluster;", "~{memory}"};
// Issued by one lane of a converged warp: `elect.sync` picks it inside the
// assembly, so the branch around them is warp-uniform (warp 0) and ptxas
// feeds UTMALDG uniform registers directly; behind a per-thread branch
// (tid == 0) it wraps every copy in a loop that makes its operands uniform
// (8 more instructions per box).
inline constexpr TmaAsm kMbarrierExpectTx{
    "{\n\t.reg .pred p;\n\telect.sync _|p, -1;\n\t@p mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;\n\t}",
    "r,r,~{memory}"};
inline constexpr TmaAsm kTmaLoad2d{
    "{\n\t.reg .pred p;\n\telect.sync _|p, -1;\n\t@p "
    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], "
    "[$4];\n\t}",
    "r,l,r,r,r,~{memory}"};
inline constexpr TmaAsm kTmaLoad3d{
    "{\n\t.reg .pred p;\n\telect.sync _|p, -1;\n\t@p "
    "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $4}], "
    "[$5];\n\t}",
    "r,l,r,r,r,r,~{memory}"};
// A tile store from shared memory (`bulk_group` completion): the elected
// lane issues it, commits its bulk group and waits for the group to
// complete (the source's bytes then reusable, the global writes performed).
//   store2d: $0 tensor map, $1 $2 coordinates (innermost first), $3 shared source
inline constexpr TmaAsm kTmaStore2d{
    "{\n\t.reg .pred p;\n\telect.sync _|p, -1;\n\t@p cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, "
    "{$1, $2}], [$3];\n\t@p cp.async.bulk.commit_group;\n\t@p cp.async.bulk.wait_group 0;\n\t}",
    "l,r,r,r,~{memory}"};
inline constexpr TmaAsm kMbarrierArrive{
    "{\n\t.reg .pred p;\n\telect.sync _|p, -1;\n\t@p mbarrier.arrive.shared::cta.b64 _, [$0];\n\t}", "r,~{memory}"};
inline constexpr TmaAsm kMbarrierTryWait{
    "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\n\tselp.u32 $0, 1, 0, p;\n\t}",
    "=r,r,r,~{memory}"};

/// Emitters (NVPTXTma.cpp). `bar` and `dst` are addrspace(3) pointers,
/// `map` a generic pointer to the tensor-map parameter.
void emitMbarrierInit(llvm::IRBuilderBase& b, llvm::Value* bar, unsigned count);
void emitMbarrierInitFence(llvm::IRBuilderBase& b);
void emitMbarrierExpectTx(llvm::IRBuilderBase& b, llvm::Value* bar, llvm::Value* bytes);
/// coords: 2 or 3 i32 values, innermost first.
void emitTmaLoad(llvm::IRBuilderBase& b, llvm::Value* dst, llvm::Value* map, llvm::Value* const* coords, unsigned rank,
                 llvm::Value* bar);
void emitMbarrierArrive(llvm::IRBuilderBase& b, llvm::Value* bar);
/// The 2-D box of tensor map `map` at `coords` (2 i32, innermost first)
/// from shared `src`, completed before it returns.
void emitTmaStore(llvm::IRBuilderBase& b, llvm::Value* map, llvm::Value* const* coords, llvm::Value* src);
/// The wait loop: returns once the phase of `parity` (an i32 0 or 1) of
/// `bar` has completed; the builder is left in the loop's exit block.
void emitMbarrierWait(llvm::IRBuilderBase& b, llvm::Value* bar, llvm::Value* parity);

}  // namespace tessera::codegen::nvptx

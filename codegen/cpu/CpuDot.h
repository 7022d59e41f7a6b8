// The CPU `dot` kernel: C += A @ B on tiles held in stack arrays, as a
// register-blocked microkernel (private to codegen; LLVM types allowed).
//
// The lowering packs the operand tiles as it loads them (emitLoad in
// CpuLowerMemory.cpp, emitDot in CpuLowerDot.cpp): A (M x K) row-major with a
// padded row stride, B (K x N) in panels of NR columns, both in the compute
// type (f32 for float dots, i32 for i8 dots). emitDotKernel() then emits, for
// every MR x NR block of C, a loop over the whole K of this dot with the
// MR x NR accumulators in vector registers: per k, NR/L vector loads of a row
// of B's panel, MR broadcasts of A and MR x NR/L fused multiply-adds. The C
// block is loaded before that loop and stored after it, so between K
// iterations of the kernel's own `for` the accumulator tile lives in its
// stack array and within one dot in registers.
#pragma once

#include <cstdint>
#include <functional>

#include <llvm/IR/IRBuilder.h>

#include "codegen/llvm/HostIsa.h"

namespace tessera::codegen::cpu {

/// The register blocking for one ISA and compute type: MR rows of C by NV
/// vectors of `lanes` elements (NR = NV * lanes columns).
struct DotBlocking {
  int mr = 6;
  int nv = 2;
  int lanes = 8;
  int nr() const { return nv * lanes; }
};

/// AVX2 (16 ymm): 6 x 16 f32 = 12 accumulators + 2 B vectors + 1 broadcast.
/// AVX-512 (32 zmm): 14 x 32 f32 = 28 accumulators + 2 B vectors + 1.
/// SSE2 (16 xmm): 6 x 8. Integer (i32) dots use the same shapes.
DotBlocking dotBlocking(const CpuTargetInfo& t, llvm::Type* elemTy);

struct DotArrays {
  llvm::Value* a = nullptr;  // M x K, row-major with row stride lda, elemTy
  llvm::Value* b = nullptr;  // K x N in panels: element (k, n) at (n / NR) * K * NR + k * NR + n % NR
  int64_t lda = 0;           // >= K
  /// Prefetches to spread over the kernel (the operands of the next
  /// iteration of an enclosing loop): `prefetch(u)` emits unit u, for
  /// 0 <= u < prefetchUnits (a run-time i64 value).
  int64_t prefetchUnits = 0;
  std::function<void(llvm::Value*)> prefetch;
  llvm::Value* c = nullptr;  // M x N, row-major, elemTy: updated in place, C += A B
  int64_t M = 0, N = 0, K = 0;
  llvm::Type* elemTy = nullptr;  // float or i32
};

/// Emits C += A B at the builder's insertion point (which it leaves after
/// the emitted code). Any M, N, K >= 1: remainders of M take a block with
/// fewer rows, remainders of N a block whose last vector is masked.
void emitDotKernel(llvm::IRBuilder<>& b, const CpuTargetInfo& t, const DotArrays& ops);

/// Rewrites masked loads, stores, gathers and scatters of bf16 vectors into
/// the same operations on i16 vectors (bitcasts around them). Without
/// AVX512-BF16, x86 has no bf16 masked moves: LLVM scalarises them through
/// f32 and calls __truncsfbf2, which the JIT does not provide. A masked move
/// copies bits, so i16 is exact. Run on every lowered module (the dot tiles
/// of bf16 GEMMs are masked loads).
void legalizeBf16MaskedMemory(llvm::Module& m);

}  // namespace tessera::codegen::cpu

// Target-independent LLVM emission of the elementwise semantics of IR.h:
// integer and float arithmetic, comparisons and casts. Both the CPU and the
// GPU lowerings call these, so the meaning of each op is written once; what
// truly differs per target (transcendental math, how a float is narrowed)
// stays with the caller and is passed in or handled around these calls.
// Every function works on scalars and fixed vectors alike.
// Private to codegen: includes LLVM headers.
#pragma once

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/IRBuilder.h>

#include "tessera/ir/IR.h"
#include "tessera/support/DType.h"

namespace tessera::codegen {

/// The in-register LLVM type of one element of dtype `d` (I1 is i1).
llvm::Type* scalarType(llvm::IRBuilderBase& b, DType d);

/// `scalar` as a vector of as many lanes as `like` has, or `scalar` itself
/// when `like` is not a vector.
llvm::Type* shapedLike(llvm::Type* scalar, llvm::Type* like);

/// The value of a `constant` op as an LLVM constant of type `t` (a scalar,
/// or a vector splat): fp8 constants are their codes (Fp8.h).
llvm::Constant* constantOf(const ir::Op& op, llvm::Type* t);

/// Narrows a float value to float type `to`, rounding once. Targets whose
/// backend cannot be trusted with every fptrunc pass their own.
using FpTruncFn = llvm::function_ref<llvm::Value*(llvm::Value* x, llvm::Type* to)>;

/// `cmp` with the op's "pred" attribute on two values of dtype `dt`:
/// ordered float compares (except "ne", which is unordered so NaN != NaN),
/// signed integer compares, unsigned on u8..u64 and I1 (true > false).
llvm::Value* emitCompare(llvm::IRBuilderBase& b, const ir::Op& op, llvm::Value* lhs, llvm::Value* rhs, DType dt);

/// An integer op on operands of integer dtype `dt`, never producing poison
/// or trapping where the IR only says "unspecified".
llvm::Value* emitIntegerOp(llvm::IRBuilderBase& b, const ir::Op& op, llvm::ArrayRef<llvm::Value*> v, DType dt);

/// A float op on f32/f64 operands. Returns nullptr for the transcendentals
/// (ir::isTranscendental: pow, exp, ..., sin, cos, sigmoid, log1p, expm1):
/// how those are computed is target-specific, so the caller emits them.
llvm::Value* emitFloatOp(llvm::IRBuilderBase& b, const ir::Op& op, llvm::ArrayRef<llvm::Value*> v);

/// f16/bf16 arithmetic is done in f32 and rounded once: f32 carries more
/// than twice their precision, so the result is the correctly rounded one
/// for + - * / sqrt. Widens `v` when `dt` is narrow, calls `floatOp`, and
/// narrows the result back with `fpTrunc` (comparisons stay i1).
llvm::Value* emitFloatElementwise(llvm::IRBuilderBase& b, const ir::Op& op, std::vector<llvm::Value*>& v, DType dt,
                                  llvm::function_ref<llvm::Value*(std::vector<llvm::Value*>&)> floatOp,
                                  FpTruncFn fpTrunc);

/// `cast` from dtype `from` to `to`: to I1 is "!= 0"; from I1 is 0/1;
/// integers sign-extend (zero-extend from unsigned) or truncate; float ->
/// int saturates to the target's range (NaN -> 0);
/// int -> float and float -> float round once, narrowing through `fpTrunc`.
llvm::Value* emitCast(llvm::IRBuilderBase& b, llvm::Value* x, DType from, DType to, FpTruncFn fpTrunc);

/// Evaluates the combine region of a `scan` on (a, b): the region's ops
/// (constants and elementwise ops, checked by the verifier) are emitted in
/// order with `emit(op, operands)`, operands being a and b for the region's
/// arguments, earlier results of the region, or `outer(v)` for a value
/// defined outside the region (a scalar). Returns the yielded value. Both
/// lowerings call it for every combination they need (on scalars on GPUs,
/// on vectors of lanes on the CPU, where `emit` and `outer` splat).
llvm::Value* emitCombineRegion(const ir::Block& region, llvm::Value* a, llvm::Value* b,
                               llvm::function_ref<llvm::Value*(const ir::Value*)> outer,
                               llvm::function_ref<llvm::Value*(const ir::Op&, std::vector<llvm::Value*>)> emit);

}  // namespace tessera::codegen

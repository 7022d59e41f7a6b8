// Transcendental functions emitted as plain LLVM IR, f32 (VectorMath.cpp)
// and f64 (VectorMath64.cpp).
//
// Every backend lowers the tile IR's f32 exp/log/tanh/erf/sin/cos/... through
// these emitters (the GPUs also their f64 math where no device library is
// linked), so the generated code must compile for every LLVM target and
// give the same answers everywhere: the emitted IR is pure arithmetic —
// fadd/fmul/fdiv, integer operations on the float encoding (i32/i64, and
// i128 products in the rare Payne-Hanek path of f64 sin/cos), selects, and
// only the llvm.fma / llvm.fabs / llvm.copysign / llvm.trunc / llvm.fshl
// intrinsics, which every target lowers natively. No libm call, no memory
// access and no target-specific intrinsic appears. sin and cos branch
// around their slow path (huge arguments): the emitter may split the
// builder's block and leaves the builder after the join.
//
// Each emitter accepts a `float` (`double`) or a fixed vector of them and
// returns a value of the same type. The emitters ignore (and temporarily
// clear) the builder's fast-math flags: the range reductions rely on exact
// IEEE rounding (x + 1.5*2^23 - 1.5*2^23 rounds to an integer) and the
// special-value handling relies on NaN and infinity being honoured, both
// of which reassoc/nnan/ninf would let LLVM break.
//
// Accuracy and special values are documented in docs/math.md, measured by
// tests/codegen/math_test.cpp (max error relative to the exact result, in
// units of the ulp of the result). Denormal results are produced exactly
// (not flushed), denormal inputs are handled. Special values follow C's
// <math.h> (IR.h).
#pragma once

#include <llvm/ADT/ArrayRef.h>

#include "tessera/ir/IR.h"

#include "LLVMForward.h"  // relative: tests include these headers by path

namespace tessera::codegen {

/// e^x. +inf -> +inf, -inf -> +0, NaN -> NaN, x > 88.7228 -> +inf,
/// denormal results exact (gradual underflow), x < -103.98 -> +0.
llvm::Value* emitExpF32(llvm::IRBuilderBase& b, llvm::Value* x);

/// 2^x. Same special values as emitExpF32 (thresholds 128 and -150).
llvm::Value* emitExp2F32(llvm::IRBuilderBase& b, llvm::Value* x);

/// ln(x). +-0 -> -inf, x < 0 -> NaN, +inf -> +inf, NaN -> NaN,
/// denormal inputs exact (rescaled by 2^23 before the reduction).
llvm::Value* emitLogF32(llvm::IRBuilderBase& b, llvm::Value* x);

/// log2(x). Same special values as emitLogF32; exact for powers of two.
llvm::Value* emitLog2F32(llvm::IRBuilderBase& b, llvm::Value* x);

/// tanh(x). Odd (tanh(-0) = -0), saturates to +-1, NaN -> NaN, relative
/// accuracy kept for tiny and denormal |x| (tanh(x) = x there).
llvm::Value* emitTanhF32(llvm::IRBuilderBase& b, llvm::Value* x);

/// erf(x). Odd (erf(-0) = -0), saturates to +-1, NaN -> NaN, relative
/// accuracy kept for tiny and denormal |x|.
llvm::Value* emitErfF32(llvm::IRBuilderBase& b, llvm::Value* x);

/// sin(x), cos(x) for every finite x: Cody-Waite reduction by pi/2 up to
/// 2^17, Payne-Hanek (integer product with 2/pi) above. sin(-0) = -0,
/// inf and NaN give NaN.
llvm::Value* emitSinF32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitCosF32(llvm::IRBuilderBase& b, llvm::Value* x);
/// e^x - 1 and ln(1 + x), accurate near 0 (f(-0) = -0); expm1(-inf) = -1,
/// log1p(-1) = -inf, log1p(x < -1) = NaN.
llvm::Value* emitExpm1F32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitLog1pF32(llvm::IRBuilderBase& b, llvm::Value* x);
/// 1 / (1 + e^-x), computed without cancellation for either sign.
llvm::Value* emitSigmoidF32(llvm::IRBuilderBase& b, llvm::Value* x);
/// C's pow(x, y) (special values of IR.h), with log2|x| carried as a
/// float pair so that the error stays that of exp2.
llvm::Value* emitPowF32(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);

// ---- f64 (VectorMath64.cpp): the same functions and special values. -------
llvm::Value* emitExpF64(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitExp2F64(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitLogF64(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitLog2F64(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitTanhF64(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitErfF64(llvm::IRBuilderBase& b, llvm::Value* x);
/// Cody-Waite with pi/2 as three doubles up to 2^30, Payne-Hanek above.
llvm::Value* emitSinF64(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitCosF64(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitExpm1F64(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitLog1pF64(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitSigmoidF64(llvm::IRBuilderBase& b, llvm::Value* x);
/// ln|x| as a double pair good to about 2^-66, so y ln|x| keeps 2^-54.
llvm::Value* emitPowF64(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);

/// The emitter of a transcendental op (ir::isTranscendental: pow takes two
/// operands, the others one) for the operands' type, f32 or f64.
llvm::Value* emitVectorMath(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v);

}  // namespace tessera::codegen

// Single-precision transcendental functions emitted as plain LLVM IR.
//
// Every backend (host CPU now, NVPTX and AMDGPU later) lowers the tile IR's
// exp/log/tanh/erf through these emitters, so the generated code must
// compile for every LLVM target and give the same answers everywhere: the
// emitted IR is pure arithmetic — fadd/fmul/fdiv, integer bit operations on
// the float encoding, selects, and only the llvm.fma / llvm.fabs /
// llvm.copysign intrinsics, which every target lowers natively. No libm call
// and no target-specific intrinsic appears.
//
// Each emitter accepts a `float` or a `<N x float>` value (fixed or scalable
// width) and returns a value of the same type. The emitters ignore (and
// temporarily clear) the builder's fast-math flags: the range reductions rely
// on exact IEEE rounding (x + 1.5*2^23 - 1.5*2^23 rounds to an integer) and
// the special-value handling relies on NaN and infinity being honoured, both
// of which reassoc/nnan/ninf would let LLVM break.
//
// Accuracy and special values are documented in docs/math.md, measured by
// tests/codegen/math_test.cpp:
//   exp, exp2, log, log2  <= 2 ulp;  tanh, erf  <= 4 ulp
// (max error relative to the correctly rounded result, in units of the
// float ulp of the result). Denormal results of exp/exp2 are produced
// exactly (not flushed), denormal inputs of log/log2 are handled.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

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

}  // namespace tessera::codegen

// LLVM emission of the 8-bit float conversions of support/Fp8.h, bit for
// bit: integer arithmetic on the bits, so every backend (and the emulator)
// computes the same codes. Scalars and fixed vectors alike.
// Private to codegen: includes LLVM headers.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "tessera/support/DType.h"

namespace tessera::codegen {

/// fp8 codes (i8, or a vector of i8) of dtype `from` -> their f32 values
/// (exact).
llvm::Value* emitFp8ToF32(llvm::IRBuilderBase& b, llvm::Value* codes, DType from);

/// fp8 codes -> their f16 values (exact), for the formats whose values f16
/// holds with its own exponent field: e4m3 and e4m3fnuz by placing the bits
/// and scaling by a power of two, e5m2 by its bits alone (it is f16's top
/// byte). Returns nullptr for e5m2fnuz, whose largest exponent is finite.
llvm::Value* emitFp8ToF16(llvm::IRBuilderBase& b, llvm::Value* codes, DType from);

/// f32 or f64 values -> fp8 codes of dtype `to`: nearest, ties to even,
/// saturating, NaN to the canonical NaN. f16 and bf16 are widened to f32
/// first by the caller (exactly).
llvm::Value* emitToFp8(llvm::IRBuilderBase& b, llvm::Value* x, DType to);

}  // namespace tessera::codegen

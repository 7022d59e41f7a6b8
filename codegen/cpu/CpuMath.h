// Transcendental math for the CPU lowering: one place decides how exp, log,
// tanh, erf, ... are computed, so the implementation can change in one line.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "tessera/ir/IR.h"

namespace tessera::codegen::cpu {

/// Emits `op` (Exp, Exp2, Log, Log2, Tanh, Erf) on `x`, a float or double
/// scalar or fixed vector. f32 goes through the vectorised routines of
/// VectorMath when they are part of the build, f64 through libm.
llvm::Value* emitTranscendental(llvm::IRBuilderBase& b, ir::OpCode op, llvm::Value* x);

}  // namespace tessera::codegen::cpu

// Transcendental math for the CPU lowering: one place decides how exp, log,
// tanh, erf, sin, cos, pow, ... are computed, so the implementation can
// change in one line.
#pragma once

#include <llvm/ADT/ArrayRef.h>
#include <llvm/IR/IRBuilder.h>

#include "tessera/ir/IR.h"

namespace tessera::codegen::cpu {

/// Emits the transcendental `op` (ir::isTranscendental; pow takes two
/// operands) on float or double scalars or fixed vectors. f32 goes through
/// the vectorised routines of VectorMath, f64 through the host's libm, one
/// call per lane (sigmoid, which libm lacks, from VectorMath in f64 too).
llvm::Value* emitTranscendental(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v);

}  // namespace tessera::codegen::cpu

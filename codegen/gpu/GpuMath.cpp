// The math table both GPU targets share; the vendor files supply the notes.
#include "codegen/gpu/GpuTargetInfo.h"

namespace tessera::codegen {

MathChoice gpuMath(ir::OpCode op, DType dt, const GpuMathNotes& notes) {
  using ir::OpCode;
  if (ir::isTranscendental(op)) {
    if (dt == DType::F32) return {MathImpl::Polynomial, "VectorMath polynomial (exp/log <= 2 ulp, tanh/erf <= 4 ulp)"};
    return {MathImpl::Unsupported, notes.f64Transcendentals};
  }
  switch (op) {
    case OpCode::Sqrt: return {MathImpl::LlvmIntrinsic, notes.sqrt};
    case OpCode::Rsqrt: return {MathImpl::LlvmIntrinsic, notes.rsqrt};
    case OpCode::Floor: return {MathImpl::LlvmIntrinsic, notes.floor};
    case OpCode::Pow: return {MathImpl::Unsupported, "pow is not implemented for GPU targets yet"};
    default: return {MathImpl::LlvmIntrinsic, "native instruction"};
  }
}

}  // namespace tessera::codegen

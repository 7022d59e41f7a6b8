// The math table both GPU targets share; the vendor files supply the notes.
#include "codegen/gpu/GpuTargetInfo.h"

namespace tessera::codegen {

MathChoice gpuMath(ir::OpCode op, DType dt, const GpuMathNotes& notes) {
  using ir::OpCode;
  if (ir::isTranscendental(op)) {
    if (dt == DType::F32)
      return {MathImpl::Polynomial, "VectorMath f32 polynomial (docs/math.md states the error per op)", {}};
    // sigmoid has no library function: the polynomial (exp and 1 + exp kept
    // as pairs) is more accurate than one built from the library's exp.
    if (notes.libraryPrefix && op != OpCode::Sigmoid)
      return {MathImpl::DeviceLibrary, "the vendor's device math library",
              std::string(notes.libraryPrefix) + ir::opName(op)};
    return {MathImpl::Polynomial, "VectorMath f64 polynomial (no device math library linked)", {}};
  }
  switch (op) {
    case OpCode::Sqrt: return {MathImpl::LlvmIntrinsic, notes.sqrt, {}};
    case OpCode::Rsqrt: return {MathImpl::LlvmIntrinsic, notes.rsqrt, {}};
    case OpCode::Floor: return {MathImpl::LlvmIntrinsic, notes.floor, {}};
    default: return {MathImpl::LlvmIntrinsic, "native instruction", {}};
  }
}

}  // namespace tessera::codegen

#include "codegen/cpu/CpuMath.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "tessera/support/Error.h"

#include "codegen/llvm/VectorMath.h"

namespace tessera::codegen::cpu {

namespace {
// Calls the scalar libm function `name` once per lane (libm has no vector
// entry points we can rely on); the JIT resolves it in the host process.
llvm::Value* perLaneLibm(llvm::IRBuilderBase& b, const char* name, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Type* s = t->getScalarType();
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::FunctionCallee fn = m->getOrInsertFunction(name, llvm::FunctionType::get(s, {s}, false));
  if (auto* fn2 = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    fn2->setDoesNotThrow();
    fn2->setDoesNotAccessMemory();
  }
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t);
  if (!vt) return b.CreateCall(fn, {x});
  llvm::Value* r = llvm::PoisonValue::get(t);
  for (unsigned i = 0; i < vt->getNumElements(); ++i)
    r = b.CreateInsertElement(r, b.CreateCall(fn, {b.CreateExtractElement(x, i)}), i);
  return r;
}

llvm::Value* intrinsic(llvm::IRBuilderBase& b, llvm::Intrinsic::ID id, llvm::Value* x) {
  return b.CreateUnaryIntrinsic(id, x);
}

// f64: libm through LLVM's intrinsics (the x86 backend calls exp, sin, pow,
// ...; sin and cos of one value may become sincos) or by name per lane.
llvm::Value* viaLibm(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v) {
  llvm::Value* x = v[0];
  switch (op) {
    case ir::OpCode::Exp: return intrinsic(b, llvm::Intrinsic::exp, x);
    case ir::OpCode::Exp2: return intrinsic(b, llvm::Intrinsic::exp2, x);
    case ir::OpCode::Log: return intrinsic(b, llvm::Intrinsic::log, x);
    case ir::OpCode::Log2: return intrinsic(b, llvm::Intrinsic::log2, x);
    case ir::OpCode::Tanh: return intrinsic(b, llvm::Intrinsic::tanh, x);
    case ir::OpCode::Sin: return intrinsic(b, llvm::Intrinsic::sin, x);
    case ir::OpCode::Cos: return intrinsic(b, llvm::Intrinsic::cos, x);
    case ir::OpCode::Erf: return perLaneLibm(b, "erf", x);
    case ir::OpCode::Log1p: return perLaneLibm(b, "log1p", x);
    case ir::OpCode::Expm1: return perLaneLibm(b, "expm1", x);
    case ir::OpCode::Pow: return b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, v[0], v[1]);
    default: TS_UNREACHABLE(std::string("not a transcendental op: ") + ir::opName(op));
  }
}
}  // namespace

llvm::Value* emitTranscendental(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v) {
  // sigmoid has no libm function: VectorMath's f64 one (e^-|x| and 1 + e^-|x|
  // carried as pairs) is more accurate than one composed from libm's exp.
  if (v[0]->getType()->getScalarType()->isFloatTy() || op == ir::OpCode::Sigmoid) return emitVectorMath(b, op, v);
  llvm::IRBuilderBase::FastMathFlagGuard guard(b);
  b.clearFastMathFlags();
  return viaLibm(b, op, v);
}

}  // namespace tessera::codegen::cpu

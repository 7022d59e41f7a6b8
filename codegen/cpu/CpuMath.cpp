#include "codegen/cpu/CpuMath.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "tessera/support/Error.h"

#if __has_include("codegen/llvm/VectorMath.h")
#include "codegen/llvm/VectorMath.h"
#define TESSERA_HAVE_VECTOR_MATH 1
#endif

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

llvm::Value* viaIntrinsics(llvm::IRBuilderBase& b, ir::OpCode op, llvm::Value* x) {
  bool f32 = x->getType()->getScalarType()->isFloatTy();
  switch (op) {
    case ir::OpCode::Exp: return intrinsic(b, llvm::Intrinsic::exp, x);
    case ir::OpCode::Exp2: return intrinsic(b, llvm::Intrinsic::exp2, x);
    case ir::OpCode::Log: return intrinsic(b, llvm::Intrinsic::log, x);
    case ir::OpCode::Log2: return intrinsic(b, llvm::Intrinsic::log2, x);
    case ir::OpCode::Tanh: return intrinsic(b, llvm::Intrinsic::tanh, x);
    case ir::OpCode::Erf: return perLaneLibm(b, f32 ? "erff" : "erf", x);
    default: TS_UNREACHABLE(std::string("not a transcendental op: ") + ir::opName(op));
  }
}
}  // namespace

llvm::Value* emitTranscendental(llvm::IRBuilderBase& b, ir::OpCode op, llvm::Value* x) {
#ifdef TESSERA_HAVE_VECTOR_MATH
  if (x->getType()->getScalarType()->isFloatTy()) {
    switch (op) {
      case ir::OpCode::Exp: return emitExpF32(b, x);
      case ir::OpCode::Exp2: return emitExp2F32(b, x);
      case ir::OpCode::Log: return emitLogF32(b, x);
      case ir::OpCode::Log2: return emitLog2F32(b, x);
      case ir::OpCode::Tanh: return emitTanhF32(b, x);
      case ir::OpCode::Erf: return emitErfF32(b, x);
      default: break;
    }
  }
#endif
  return viaIntrinsics(b, op, x);
}

}  // namespace tessera::codegen::cpu

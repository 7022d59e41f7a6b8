// Elementwise ops, casts (with correctly rounded narrowing float
// conversions) and math, on scalars and chunks.
#include "codegen/cpu/CpuLowerImpl.h"

#include <llvm/IR/Intrinsics.h>

#include "codegen/cpu/CpuMath.h"

namespace tessera::codegen::cpu::detail {

// ================================================================ elementwise

// Narrowing float conversions with one round-to-nearest-even, done here
// rather than by LLVM because the x86 backend lowers f32 -> bf16 and
// f64 -> f16 to compiler-rt calls (__truncsfbf2, __truncdfhf2) that the
// host process may not provide.
llvm::Value* Lowering::fpTrunc(llvm::Value* x, llvm::Type* to) {
  llvm::Type* xt = x->getType();
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(xt);
  auto shaped = [&](llvm::Type* s) -> llvm::Type* {
    return vt ? static_cast<llvm::Type*>(vec(s, vt->getNumElements())) : s;
  };
  llvm::Type* dst = to->getScalarType();
  if (xt->getScalarType()->isDoubleTy() && !dst->isFloatTy()) {
    // f64 -> f32 rounding to odd, so the second rounding (to 8 or 11
    // significant bits) is the correctly rounded one.
    llvm::Value* f = b_.CreateFPTrunc(x, shaped(b_.getFloatTy()));
    llvm::Value* back = b_.CreateFPExt(f, xt);
    llvm::Type* i32t = shaped(b_.getInt32Ty());
    llvm::Value* u = b_.CreateBitCast(f, i32t);
    llvm::Value* inexact = b_.CreateFCmpUNE(back, x);
    llvm::Value* away = b_.CreateFCmpOGT(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                                         b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x));
    u = b_.CreateSelect(away, b_.CreateSub(u, llvm::ConstantInt::get(i32t, 1)), u);
    u = b_.CreateSelect(inexact, b_.CreateOr(u, llvm::ConstantInt::get(i32t, 1)), u);
    x = b_.CreateBitCast(u, shaped(b_.getFloatTy()));
    xt = x->getType();
  }
  if (!dst->isBFloatTy()) return b_.CreateFPTrunc(x, to);
  // f32 -> bf16: add half an ulp (ties to even) and keep the top 16 bits;
  // NaNs stay quiet NaNs.
  llvm::Type* i32t = shaped(b_.getInt32Ty());
  llvm::Value* u = b_.CreateBitCast(x, i32t);
  llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(u, llvm::ConstantInt::get(i32t, 16)), llvm::ConstantInt::get(i32t, 1));
  llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(u, b_.CreateAdd(lsb, llvm::ConstantInt::get(i32t, 0x7fff))),
                                       llvm::ConstantInt::get(i32t, 16));
  llvm::Value* nan =
      b_.CreateOr(b_.CreateLShr(u, llvm::ConstantInt::get(i32t, 16)), llvm::ConstantInt::get(i32t, 0x40));
  llvm::Value* r = b_.CreateSelect(b_.CreateFCmpUNO(x, x), nan, rounded);
  return b_.CreateBitCast(b_.CreateTrunc(r, shaped(b_.getInt16Ty())), to);
}

llvm::Value* Lowering::castValue(llvm::Value* x, DType from, DType to) {
  return emitCast(b_, x, from, to, [&](llvm::Value* y, llvm::Type* t) { return fpTrunc(y, t); });
}

llvm::Value* Lowering::floatOp(const ir::Op& op, std::vector<llvm::Value*>& v) {
  if (llvm::Value* r = emitFloatOp(b_, op, v)) return r;
  // pow and the transcendentals are this target's own (CpuMath): the
  // vectorised polynomials for f32, libm for f64.
  return emitTranscendental(b_, op.code(), v);
}

llvm::Value* Lowering::elementwise(const ir::Op& op, std::vector<llvm::Value*> v) {
  switch (op.code()) {
    case OpCode::Cast: return castValue(v[0], op.operand(0)->type().dtype(), op.result()->type().dtype());
    case OpCode::Bitcast:
      return b_.CreateBitCast(v[0], shapedLike(scalarType(b_, op.result()->type().dtype()), v[0]->getType()));
    case OpCode::Select: return b_.CreateSelect(v[0], v[1], v[2]);
    case OpCode::PtrAdd: {
      llvm::Value* off = v[1];
      llvm::Type* i64t =
          off->getType()->isVectorTy()
              ? static_cast<llvm::Type*>(
                    vec(b_.getInt64Ty(), llvm::cast<llvm::FixedVectorType>(off->getType())->getNumElements()))
              : b_.getInt64Ty();
      off =
          isUnsigned(op.operand(1)->type().dtype()) ? b_.CreateZExtOrTrunc(off, i64t) : b_.CreateSExtOrTrunc(off, i64t);
      return b_.CreateGEP(memTy(op.operand(0)->type().dtype()), v[0], off);
    }
    default: break;
  }
  const ir::Type& t0 = op.operand(0)->type();
  if (t0.isPointerLike()) {
    if (op.code() == OpCode::Cmp) {
      std::vector<llvm::Value*> w = v;
      auto* it = llvm::isa<llvm::VectorType>(v[0]->getType())
                     ? static_cast<llvm::Type*>(
                           vec(b_.getInt64Ty(), llvm::cast<llvm::FixedVectorType>(v[0]->getType())->getNumElements()))
                     : b_.getInt64Ty();
      for (auto& x : w) x = b_.CreatePtrToInt(x, it);
      return emitIntegerOp(b_, op, w, DType::I64);
    }
    throw CompileError(std::string(op.name()) + " is not defined on pointers (at " + op.loc().str() + ")");
  }
  DType dt = t0.dtype();
  if (!isFloat(dt)) return emitIntegerOp(b_, op, v, dt);
  // bf16 is widened by its bits, not fpext: instcombine moves fabs, floor,
  // ... of fpext(x) onto the bf16 value, which the x86 backend lowers
  // through __truncsfbf2 (absent from GCC 12's libgcc); it does not see
  // through the shift.
  if (dt == DType::BF16) {
    for (llvm::Value*& x : v) {
      llvm::Type* i32 = shapedLike(b_.getInt32Ty(), x->getType());
      x = b_.CreateBitCast(
          b_.CreateShl(b_.CreateZExt(b_.CreateBitCast(x, shapedLike(b_.getInt16Ty(), x->getType())), i32),
                       llvm::ConstantInt::get(i32, 16)),
          shapedLike(b_.getFloatTy(), x->getType()));
    }
    llvm::Value* r = floatOp(op, v);
    if (op.code() == OpCode::Cmp) return r;
    return fpTrunc(r, shapedLike(b_.getBFloatTy(), r->getType()));
  }
  return emitFloatElementwise(
      b_, op, v, dt, [&](std::vector<llvm::Value*>& w) { return floatOp(op, w); },
      [&](llvm::Value* y, llvm::Type* t) { return fpTrunc(y, t); });
}

}  // namespace tessera::codegen::cpu::detail

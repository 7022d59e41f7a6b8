#include "codegen/llvm/Elementwise.h"

#include <string>
#include <unordered_map>
#include <vector>

#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/llvm/Fp8.h"
#include "tessera/support/Error.h"
#include "tessera/support/Fp8.h"

namespace tessera::codegen {

using ir::OpCode;

llvm::Type* scalarType(llvm::IRBuilderBase& b, DType d) {
  switch (d) {
    case DType::I1: return b.getInt1Ty();
    case DType::I8:
    case DType::U8: return b.getInt8Ty();
    case DType::I16:
    case DType::U16: return b.getInt16Ty();
    case DType::I32:
    case DType::U32: return b.getInt32Ty();
    case DType::I64:
    case DType::U64: return b.getInt64Ty();
    case DType::F16: return b.getHalfTy();
    case DType::BF16: return b.getBFloatTy();
    case DType::F32: return b.getFloatTy();
    case DType::F64: return b.getDoubleTy();
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2FNUZ:
      return b.getInt8Ty();  // the code's bits (Fp8.h)
    // The MX codes are refused by the verifier (kernels hold them as u8).
    case DType::F4E2M1:
    case DType::F6E2M3:
    case DType::F6E3M2:
    case DType::E8M0: break;
  }
  TS_UNREACHABLE("dtype");
}

llvm::Type* shapedLike(llvm::Type* scalar, llvm::Type* like) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like))
    return llvm::FixedVectorType::get(scalar, vt->getNumElements());
  return scalar;
}

llvm::Constant* constantOf(const ir::Op& op, llvm::Type* t) {
  const ir::Attr& a = op.attrs().at("value");
  const DType d = op.result()->type().dtype();
  const bool isD = std::holds_alternative<double>(a);
  const double f = isD ? std::get<double>(a) : static_cast<double>(std::get<int64_t>(a));
  if (isFp8(d)) return llvm::ConstantInt::get(t, fp8Encode(d, f));
  if (t->getScalarType()->isFloatingPointTy()) return llvm::ConstantFP::get(t, f);
  int64_t i = isD ? static_cast<int64_t>(f) : std::get<int64_t>(a);
  return llvm::ConstantInt::get(t, static_cast<uint64_t>(i), /*isSigned=*/true);
}

llvm::Value* emitCompare(llvm::IRBuilderBase& b, const ir::Op& op, llvm::Value* x, llvm::Value* y, DType dt) {
  const std::string& p = op.strAttr("pred");
  if (isFloat(dt)) {
    if (p == "eq") return b.CreateFCmpOEQ(x, y);
    if (p == "ne") return b.CreateFCmpUNE(x, y);
    if (p == "lt") return b.CreateFCmpOLT(x, y);
    if (p == "le") return b.CreateFCmpOLE(x, y);
    if (p == "gt") return b.CreateFCmpOGT(x, y);
    if (p == "ge") return b.CreateFCmpOGE(x, y);
  } else {
    bool u = comparesUnsigned(dt);
    if (p == "eq") return b.CreateICmpEQ(x, y);
    if (p == "ne") return b.CreateICmpNE(x, y);
    if (p == "lt") return u ? b.CreateICmpULT(x, y) : b.CreateICmpSLT(x, y);
    if (p == "le") return u ? b.CreateICmpULE(x, y) : b.CreateICmpSLE(x, y);
    if (p == "gt") return u ? b.CreateICmpUGT(x, y) : b.CreateICmpSGT(x, y);
    if (p == "ge") return u ? b.CreateICmpUGE(x, y) : b.CreateICmpSGE(x, y);
  }
  throw CompileError("cmp: unknown predicate '" + p + "' at " + op.loc().str());
}

llvm::Value* emitIntegerOp(llvm::IRBuilderBase& b, const ir::Op& op, llvm::ArrayRef<llvm::Value*> v, DType dt) {
  llvm::Type* t = v[0]->getType();
  unsigned bw = t->getScalarSizeInBits();
  bool isBool = dt == DType::I1;
  bool isU = isUnsigned(dt);
  bool cmpU = comparesUnsigned(dt);
  auto C = [&](int64_t x) { return llvm::ConstantInt::get(t, static_cast<uint64_t>(x), true); };
  switch (op.code()) {
    case OpCode::Add: return b.CreateAdd(v[0], v[1]);
    case OpCode::Sub: return b.CreateSub(v[0], v[1]);
    case OpCode::Mul: return b.CreateMul(v[0], v[1]);
    case OpCode::Div:
    case OpCode::Rem:
      if (isU) {
        // Unsigned: only division by 0 is unspecified (udiv by 0 is UB in
        // LLVM): divide by 1 there.
        llvm::Value* safe = b.CreateSelect(b.CreateICmpEQ(v[1], C(0)), C(1), v[1]);
        return op.code() == OpCode::Div ? b.CreateUDiv(v[0], safe) : b.CreateURem(v[0], safe);
      }
      {
        // Division by 0 and INT_MIN / -1 are unspecified in the IR but
        // undefined in LLVM (and trap on x86): divide by a safe divisor and
        // patch -1 exactly.
        llvm::Value* isZero = b.CreateICmpEQ(v[1], C(0));
        llvm::Value* isM1 = b.CreateICmpEQ(v[1], llvm::Constant::getAllOnesValue(t));
        llvm::Value* safe = b.CreateSelect(b.CreateOr(isZero, isM1), C(1), v[1]);
        if (op.code() == OpCode::Div) {
          llvm::Value* q = isBool ? v[0] : b.CreateSDiv(v[0], safe);
          return b.CreateSelect(isM1, b.CreateNeg(v[0]), q);
        }
        llvm::Value* r = isBool ? C(0) : b.CreateSRem(v[0], safe);
        return b.CreateSelect(isM1, C(0), r);
      }
    case OpCode::Min: return b.CreateBinaryIntrinsic(cmpU ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, v[0], v[1]);
    case OpCode::Max: return b.CreateBinaryIntrinsic(cmpU ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, v[0], v[1]);
    case OpCode::And: return b.CreateAnd(v[0], v[1]);
    case OpCode::Or: return b.CreateOr(v[0], v[1]);
    case OpCode::Xor: return b.CreateXor(v[0], v[1]);
    // Oversized shift amounts are unspecified by the IR but poison in LLVM:
    // mask them to keep the result a plain (unspecified) value.
    case OpCode::Shl: return b.CreateShl(v[0], b.CreateAnd(v[1], C(bw - 1)));
    // Right shifts are arithmetic on signed integers, logical on unsigned.
    case OpCode::Shr:
      return isU ? b.CreateLShr(v[0], b.CreateAnd(v[1], C(bw - 1))) : b.CreateAShr(v[0], b.CreateAnd(v[1], C(bw - 1)));
    // The high half of the exact product: both operands extended to twice
    // the width by their signedness, multiplied, shifted down and truncated.
    // Instruction selection matches this to v_mul_hi on AMDGPU and to
    // vpmuludq / vpmuldq on x86 vectors; NVPTX emits its own mul.hi
    // (GpuTargetInfo::integerOp).
    case OpCode::MulHi: {
      llvm::Type* wide = shapedLike(b.getIntNTy(2 * bw), t);
      llvm::Value* x = isU ? b.CreateZExt(v[0], wide) : b.CreateSExt(v[0], wide);
      llvm::Value* y = isU ? b.CreateZExt(v[1], wide) : b.CreateSExt(v[1], wide);
      return b.CreateTrunc(b.CreateLShr(b.CreateMul(x, y), llvm::ConstantInt::get(wide, bw)), t);
    }
    case OpCode::Neg: return b.CreateNeg(v[0]);
    case OpCode::Not: return b.CreateNot(v[0]);
    case OpCode::Abs: return isU ? v[0] : b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, v[0], b.getFalse());
    case OpCode::Cmp: return emitCompare(b, op, v[0], v[1], dt);
    default: break;
  }
  throw CompileError(std::string(op.name()) + " is not defined on integers (at " + op.loc().str() + ")");
}

llvm::Value* emitFloatOp(llvm::IRBuilderBase& b, const ir::Op& op, llvm::ArrayRef<llvm::Value*> v) {
  auto bin = [&](llvm::Intrinsic::ID id) { return b.CreateBinaryIntrinsic(id, v[0], v[1]); };
  auto un = [&](llvm::Intrinsic::ID id) { return b.CreateUnaryIntrinsic(id, v[0]); };
  switch (op.code()) {
    case OpCode::Add: return b.CreateFAdd(v[0], v[1]);
    case OpCode::Sub: return b.CreateFSub(v[0], v[1]);
    case OpCode::Mul: return b.CreateFMul(v[0], v[1]);
    case OpCode::Div: return b.CreateFDiv(v[0], v[1]);
    case OpCode::Rem: return b.CreateFRem(v[0], v[1]);
    case OpCode::Min: return bin(llvm::Intrinsic::minimum);
    case OpCode::Max: return bin(llvm::Intrinsic::maximum);
    case OpCode::Neg: return b.CreateFNeg(v[0]);
    case OpCode::Abs: return un(llvm::Intrinsic::fabs);
    case OpCode::Floor: return un(llvm::Intrinsic::floor);
    case OpCode::Ceil: return un(llvm::Intrinsic::ceil);
    case OpCode::Trunc: return un(llvm::Intrinsic::trunc);
    case OpCode::Round: return un(llvm::Intrinsic::roundeven);
    case OpCode::Sqrt: return un(llvm::Intrinsic::sqrt);
    case OpCode::Rsqrt:
      // Correctly rounded sqrt then division: never the approximate rsqrt.
      return b.CreateFDiv(llvm::ConstantFP::get(v[0]->getType(), 1.0), un(llvm::Intrinsic::sqrt));
    case OpCode::Fma: return b.CreateIntrinsic(llvm::Intrinsic::fma, {v[0]->getType()}, {v[0], v[1], v[2]});
    case OpCode::Cmp:
      return emitCompare(b, op, v[0], v[1], v[0]->getType()->getScalarType()->isDoubleTy() ? DType::F64 : DType::F32);
    default:
      if (ir::isTranscendental(op.code())) return nullptr;  // the target's choice
      break;
  }
  throw CompileError(std::string(op.name()) + " is not defined on floats (at " + op.loc().str() + ")");
}

llvm::Value* emitFloatElementwise(llvm::IRBuilderBase& b, const ir::Op& op, std::vector<llvm::Value*>& v, DType dt,
                                  llvm::function_ref<llvm::Value*(std::vector<llvm::Value*>&)> floatOp,
                                  FpTruncFn fpTrunc) {
  bool narrow = dt == DType::F16 || dt == DType::BF16;
  llvm::Type* narrowTy = v[0]->getType();
  if (narrow) {
    llvm::Type* f32 = shapedLike(b.getFloatTy(), narrowTy);
    for (auto& x : v) x = b.CreateFPExt(x, f32);
  }
  llvm::Value* r = floatOp(v);
  if (narrow && op.code() != OpCode::Cmp) r = fpTrunc(r, narrowTy);
  return r;
}

llvm::Value* emitCast(llvm::IRBuilderBase& b, llvm::Value* x, DType from, DType to, FpTruncFn fpTrunc) {
  if (from == to) return x;
  llvm::Type* xt = x->getType();
  auto shaped = [&](llvm::Type* s) { return shapedLike(s, xt); };
  // fp8: decoded exactly to f32 and converted on from there; encoded from
  // f32 (f16, bf16, f32 and every integer up to 16 bits are exact there) or
  // from f64 (f64 and wider integers: an i64 or u64 that f64 cannot hold
  // exactly lies far beyond every fp8 range, where both saturate), so the
  // value is rounded once.
  if (isFp8(from)) {
    if (llvm::Value* h = emitFp8ToF16(b, x, from)) return emitCast(b, h, DType::F16, to, fpTrunc);
    return emitCast(b, emitFp8ToF32(b, x, from), DType::F32, to, fpTrunc);
  }
  if (isFp8(to)) {
    if (from == DType::I1) x = emitCast(b, x, from, DType::F32, fpTrunc), from = DType::F32;
    DType wide = from == DType::F64 || (isInteger(from) && bitWidth(from) > 16) ? DType::F64 : DType::F32;
    return emitToFp8(b, emitCast(b, x, from, wide, fpTrunc), to);
  }
  llvm::Type* dt = shaped(scalarType(b, to));
  if (to == DType::I1) {
    if (isFloat(from)) return b.CreateFCmpUNE(x, llvm::Constant::getNullValue(xt));
    return b.CreateICmpNE(x, llvm::Constant::getNullValue(xt));
  }
  if (from == DType::I1) {
    if (isFloat(to)) return b.CreateUIToFP(x, dt);
    return b.CreateZExt(x, dt);
  }
  // Integers widen by their own signedness (an unsigned source
  // zero-extends, a signed one sign-extends, whatever the target) and
  // narrow by truncation.
  if (isInteger(from) && isInteger(to))
    return isUnsigned(from) ? b.CreateZExtOrTrunc(x, dt) : b.CreateSExtOrTrunc(x, dt);
  if (isFloat(from) && isFloat(to)) {
    // f16 <-> bf16 go through f32, which holds both exactly.
    if (bitWidth(from) == bitWidth(to)) x = b.CreateFPExt(x, shaped(b.getFloatTy()));
    if (bitWidth(to) > x->getType()->getScalarSizeInBits()) return b.CreateFPExt(x, dt);
    return fpTrunc(x, dt);
  }
  if (isFloat(from)) {  // float -> int, saturating (unsigned: to [0, max]), NaN -> 0
    if (from == DType::F16 || from == DType::BF16) x = b.CreateFPExt(x, shaped(b.getFloatTy()));
    return b.CreateIntrinsic(isUnsigned(to) ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat,
                             {dt, x->getType()}, {x});
  }
  // int -> float. Small floats: convert exactly to f32 or f64 first (every
  // i8..i32 is exact in f64), so only one rounding happens, to the target.
  auto toFP = [&](llvm::Value* y, llvm::Type* t) {
    return isUnsigned(from) ? b.CreateUIToFP(y, t) : b.CreateSIToFP(y, t);
  };
  if (to == DType::F16 || to == DType::BF16) {
    llvm::Value* d = toFP(x, shaped(bitWidth(from) <= 16 ? b.getFloatTy() : b.getDoubleTy()));
    return fpTrunc(d, dt);
  }
  return toFP(x, dt);
}

llvm::Value* emitCombineRegion(const ir::Block& region, llvm::Value* a, llvm::Value* b,
                               llvm::function_ref<llvm::Value*(const ir::Value*)> outer,
                               llvm::function_ref<llvm::Value*(const ir::Op&, std::vector<llvm::Value*>)> emit) {
  TS_ASSERT(region.numArgs() == 2, "scan combine region without two arguments");
  std::unordered_map<const ir::Value*, llvm::Value*> env{{region.arg(0), a}, {region.arg(1), b}};
  auto get = [&](const ir::Value* v) {
    auto it = env.find(v);
    return it != env.end() ? it->second : outer(v);
  };
  for (auto& op : region.ops()) {
    if (op->code() == ir::OpCode::Yield) return get(op->operand(0));
    std::vector<llvm::Value*> v;
    for (const ir::Value* o : op->operands()) v.push_back(get(o));
    env[op->result()] = emit(*op, std::move(v));
  }
  TS_UNREACHABLE("scan combine region without a yield");
}

}  // namespace tessera::codegen

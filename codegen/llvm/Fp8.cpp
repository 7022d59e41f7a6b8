#include "codegen/llvm/Fp8.h"

#include <cmath>

#include <llvm/IR/Constants.h>

#include "tessera/support/Error.h"
#include "tessera/support/Fp8.h"

namespace tessera::codegen {

namespace {

llvm::Type* shaped(llvm::Type* scalar, llvm::Type* like) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like))
    return llvm::FixedVectorType::get(scalar, vt->getNumElements());
  return scalar;
}

}  // namespace

llvm::Value* emitFp8ToF16(llvm::IRBuilderBase& b, llvm::Value* codes, DType from) {
  TS_ASSERT(isFp8(from), "emitFp8ToF16 on a dtype that is not fp8");
  if (from == DType::F8E5M2FNUZ) return nullptr;
  llvm::Type* i16 = shaped(b.getInt16Ty(), codes->getType());
  llvm::Type* f16 = shaped(b.getHalfTy(), codes->getType());
  auto C = [&](int64_t v) { return llvm::ConstantInt::get(i16, static_cast<uint64_t>(v), true); };
  llvm::Value* c = b.CreateZExt(codes, i16);
  // e5m2 is f16 with the low 8 mantissa bits dropped: infinities and NaNs
  // included, its code is f16's high byte.
  if (from == DType::F8E5M2) return b.CreateBitCast(b.CreateShl(c, C(8)), f16);
  // e4m3 (bias 7) and e4m3fnuz (bias 8): sign to bit 15, exponent and
  // mantissa under f16's 5-bit exponent field, read as f16 (bias 15) and
  // scaled by 2^(15 - bias), exactly: subnormals land on f16 subnormals
  // with the same scaling, and 448 * 2^8 stays far below f16's maximum.
  const Fp8Format f = fp8Format(from);
  llvm::Value* bits =
      b.CreateOr(b.CreateShl(b.CreateAnd(c, C(0x80)), C(8)), b.CreateShl(b.CreateAnd(c, C(0x7F)), C(7)));
  llvm::Value* v = b.CreateFMul(b.CreateBitCast(bits, f16), llvm::ConstantFP::get(f16, std::ldexp(1.0, 15 - f.bias)));
  llvm::Value* nan = llvm::ConstantFP::getNaN(f16);
  llvm::Value* isNan = f.fnuz ? b.CreateICmpEQ(c, C(0x80)) : b.CreateICmpEQ(b.CreateAnd(c, C(0x7F)), C(0x7F));
  return b.CreateSelect(isNan, nan, v);
}

llvm::Value* emitFp8ToF32(llvm::IRBuilderBase& b, llvm::Value* codes, DType from) {
  TS_ASSERT(isFp8(from), "emitFp8ToF32 on a dtype that is not fp8");
  if (llvm::Value* h = emitFp8ToF16(b, codes, from)) return b.CreateFPExt(h, shaped(b.getFloatTy(), codes->getType()));
  const Fp8Format f = fp8Format(from);
  llvm::Type* i32 = shaped(b.getInt32Ty(), codes->getType());
  llvm::Type* f32 = shaped(b.getFloatTy(), codes->getType());
  auto C = [&](int64_t v) { return llvm::ConstantInt::get(i32, static_cast<uint64_t>(v), true); };
  auto F = [&](uint32_t bits) { return b.CreateBitCast(C(bits), f32); };
  llvm::Value* c = b.CreateZExt(codes, i32);
  llvm::Value* sign = b.CreateShl(b.CreateAnd(c, C(0x80)), C(24));
  llvm::Value* mag = b.CreateAnd(c, C(0x7F));
  llvm::Value* e = b.CreateLShr(mag, C(f.manBits));
  llvm::Value* m = b.CreateAnd(mag, C((1 << f.manBits) - 1));
  // Normal: rebias the exponent, left-align the mantissa in f32's 23 bits.
  llvm::Value* normal =
      b.CreateOr(b.CreateShl(b.CreateAdd(e, C(127 - f.bias)), C(23)), b.CreateShl(m, C(23 - f.manBits)));
  // Subnormal: m * 2^(1 - bias - M), exact in f32.
  llvm::Value* sub =
      b.CreateFMul(b.CreateUIToFP(m, f32), F(static_cast<uint32_t>(127 + 1 - f.bias - int(f.manBits)) << 23));
  llvm::Value* v = b.CreateSelect(b.CreateICmpEQ(e, C(0)), sub, b.CreateBitCast(normal, f32));
  v = b.CreateBitCast(b.CreateOr(b.CreateBitCast(v, i32), sign), f32);
  llvm::Value* nan = F(0x7FC00000);
  if (f.fnuz) return b.CreateSelect(b.CreateICmpEQ(c, C(0x80)), nan, v);
  if (!f.hasInf) return b.CreateSelect(b.CreateICmpEQ(mag, C(0x7F)), nan, v);
  const int64_t allOnes = (1 << f.expBits) - 1;
  llvm::Value* special =
      b.CreateSelect(b.CreateICmpEQ(m, C(0)), b.CreateBitCast(b.CreateOr(C(0x7F800000), sign), f32), nan);
  return b.CreateSelect(b.CreateICmpEQ(e, C(allOnes)), special, v);
}

llvm::Value* emitToFp8(llvm::IRBuilderBase& b, llvm::Value* x, DType to) {
  TS_ASSERT(isFp8(to), "emitToFp8 to a dtype that is not fp8");
  llvm::Type* st = x->getType()->getScalarType();
  TS_ASSERT(st->isFloatTy() || st->isDoubleTy(), "emitToFp8 from a type other than f32/f64");
  const Fp8Format f = fp8Format(to);
  const bool dbl = st->isDoubleTy();
  const unsigned N = dbl ? 64 : 32, srcM = dbl ? 52 : 23;
  const int srcBias = dbl ? 1023 : 127;
  llvm::Type* iN = shaped(b.getIntNTy(N), x->getType());
  auto C = [&](int64_t v) { return llvm::ConstantInt::get(iN, static_cast<uint64_t>(v), true); };
  llvm::Value* bits = b.CreateBitCast(x, iN);
  llvm::Value* neg = b.CreateICmpSLT(bits, C(0));
  llvm::Value* a = b.CreateAnd(bits, C(static_cast<int64_t>((~0ull) >> (65 - N))));
  const int64_t expMask = ((int64_t(1) << (N - 1 - srcM)) - 1) << srcM;
  llvm::Value* isNan = b.CreateICmpUGT(a, C(expMask));
  llvm::Value* ef = b.CreateLShr(a, C(srcM));
  // Subnormal sources (below 2^-126) are far below half the smallest fp8
  // subnormal (2^-17 at least) and round to 0 with zero.
  llvm::Value* zero = b.CreateICmpEQ(ef, C(0));
  // The quantum's exponent te - M, te = max(e, 1 - bias): the significand
  // (with its hidden bit) is shifted right by srcM - M + (te - e) and
  // rounded to nearest even. Shifts are capped at srcM + 2, where every
  // significand rounds to 0.
  llvm::Value* e = b.CreateSub(ef, C(srcBias));
  llvm::Value* te = b.CreateSelect(b.CreateICmpSLT(e, C(1 - f.bias)), C(1 - f.bias), e);
  llvm::Value* shift = b.CreateAdd(C(srcM - f.manBits), b.CreateSub(te, e));
  shift = b.CreateSelect(b.CreateICmpUGT(shift, C(srcM + 2)), C(srcM + 2), shift);
  llvm::Value* sig = b.CreateOr(b.CreateAnd(a, C((int64_t(1) << srcM) - 1)), C(int64_t(1) << srcM));
  llvm::Value* q = b.CreateLShr(sig, shift);
  llvm::Value* rem = b.CreateAnd(sig, b.CreateSub(b.CreateShl(C(1), shift), C(1)));
  llvm::Value* half = b.CreateShl(C(1), b.CreateSub(shift, C(1)));
  llvm::Value* up = b.CreateOr(b.CreateICmpUGT(rem, half),
                               b.CreateAnd(b.CreateICmpEQ(rem, half), b.CreateICmpNE(b.CreateAnd(q, C(1)), C(0))));
  q = b.CreateAdd(q, b.CreateZExt(up, iN));
  // code = (te + bias - 1) << M + q: q's carry into 2^M moves it to the next
  // binade (and a subnormal to the smallest normal) by itself.
  llvm::Value* code = b.CreateAdd(b.CreateShl(b.CreateAdd(te, C(f.bias - 1)), C(f.manBits)), q);
  // Saturate: large exponents (infinities included) give codes above max.
  // te is at most 1024 + bias here, so code stays far from overflowing.
  code = b.CreateSelect(b.CreateICmpSGT(code, C(f.maxCode)), C(f.maxCode), code);
  code = b.CreateSelect(zero, C(0), code);
  llvm::Value* signBit = b.CreateSelect(neg, C(0x80), C(0));
  if (f.fnuz) signBit = b.CreateSelect(b.CreateICmpEQ(code, C(0)), C(0), signBit);
  code = b.CreateOr(code, signBit);
  code = b.CreateSelect(isNan, C(f.nanCode), code);
  return b.CreateTrunc(code, shaped(b.getInt8Ty(), x->getType()));
}

}  // namespace tessera::codegen

// The emission helper behind VectorMath.cpp (f32) and VectorMath64.cpp
// (f64): constants splatted to the operand's shape, FMA Horner chains, the
// float encoding as an integer of the same width, exact scaling by powers
// of two, error-free transformations for double-word arithmetic, and a
// branch around a rarely needed slow path. Private to codegen/llvm.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include "tessera/support/Error.h"

namespace tessera::codegen::vmath {

/// A value and its rounding error: hi + lo exactly (|lo| <= ulp(hi) / 2).
struct Pair {
  llvm::Value* hi;
  llvm::Value* lo;
};

/// Emission helper bound to one value type (float, double or a vector of
/// them) and its same-shaped integer type of the same width. Constants are
/// splats of that type. The constructor clears the builder's fast-math flags
/// for the helper's lifetime: the algorithms rely on IEEE rounding, NaN and
/// infinity (see VectorMath.h).
class Emit {
 public:
  Emit(llvm::IRBuilderBase& b, llvm::Value* x, const char* fn, bool wantDouble) : b_(b), guard_(b) {
    TS_ASSERT(x != nullptr, std::string(fn) + ": null operand");
    fty_ = x->getType();
    llvm::Type* s = fty_->getScalarType();
    TS_ASSERT(wantDouble ? s->isDoubleTy() : s->isFloatTy(),
              std::string(fn) + (wantDouble ? " expects double or <N x double>" : " expects float or <N x float>"));
    f64_ = wantDouble;
    ity_ = fty_->getWithNewType(wantDouble ? b.getInt64Ty() : b.getInt32Ty());
    b_.clearFastMathFlags();
  }

  llvm::IRBuilderBase& b() { return b_; }
  llvm::Type* fty() const { return fty_; }
  llvm::Type* ity() const { return ity_; }
  bool isF64() const { return f64_; }
  /// The type of `scalar` with this value's shape.
  llvm::Type* shaped(llvm::Type* scalar) const { return fty_->getWithNewType(scalar); }
  unsigned mantissaBits() const { return f64_ ? 52 : 23; }
  int bias() const { return f64_ ? 1023 : 127; }

  // ---- constants --------------------------------------------------------
  llvm::Value* f(double v) { return llvm::ConstantFP::get(fty_, v); }
  llvm::Value* i(int64_t v) { return llvm::ConstantInt::get(ity_, static_cast<uint64_t>(v), true); }
  llvm::Value* iOf(llvm::Type* scalar, int64_t v) {
    return llvm::ConstantInt::get(shaped(scalar), static_cast<uint64_t>(v), true);
  }
  llvm::Value* signMask() { return i(f64_ ? INT64_MIN : INT32_MIN); }

  // ---- arithmetic ---------------------------------------------------------
  llvm::Value* add(llvm::Value* a, llvm::Value* c) { return b_.CreateFAdd(a, c); }
  llvm::Value* sub(llvm::Value* a, llvm::Value* c) { return b_.CreateFSub(a, c); }
  llvm::Value* mul(llvm::Value* a, llvm::Value* c) { return b_.CreateFMul(a, c); }
  llvm::Value* div(llvm::Value* a, llvm::Value* c) { return b_.CreateFDiv(a, c); }
  llvm::Value* neg(llvm::Value* a) { return b_.CreateFNeg(a); }
  llvm::Value* fma(llvm::Value* a, llvm::Value* m, llvm::Value* c) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, m, c});
  }
  llvm::Value* fabs(llvm::Value* a) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a); }
  llvm::Value* copysign(llvm::Value* mag, llvm::Value* sign) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, sign);
  }
  llvm::Value* select(llvm::Value* c, llvm::Value* a, llvm::Value* d) { return b_.CreateSelect(c, a, d); }
  llvm::Value* lt(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOLT(a, c); }
  llvm::Value* gt(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOGT(a, c); }
  llvm::Value* le(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOLE(a, c); }
  llvm::Value* ge(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOGE(a, c); }
  llvm::Value* eq(llvm::Value* a, llvm::Value* c) { return b_.CreateFCmpOEQ(a, c); }
  llvm::Value* isNaN(llvm::Value* a) { return b_.CreateFCmpUNO(a, a); }

  /// c[0]*x^(n-1) + ... + c[n-1], as a chain of FMAs. The coefficients are
  /// written as doubles; for f32 they are float literals (exactly
  /// representable), so nothing is rounded here.
  llvm::Value* horner(llvm::Value* x, std::initializer_list<double> c) {
    auto it = c.begin();
    llvm::Value* acc = f(*it++);
    for (; it != c.end(); ++it) acc = fma(acc, x, f(*it));
    return acc;
  }
  /// horner() whose coefficient k is cs[sel] (a select among the sets);
  /// all sets have the same length. `pick(k)` yields the selected constant.
  llvm::Value* hornerSel(llvm::Value* x, size_t n, const std::function<llvm::Value*(size_t)>& pick) {
    llvm::Value* acc = pick(0);
    for (size_t k = 1; k < n; ++k) acc = fma(acc, x, pick(k));
    return acc;
  }

  // ---- the encoding ---------------------------------------------------------
  llvm::Value* asInt(llvm::Value* v) { return b_.CreateBitCast(v, ity_); }
  llvm::Value* asFloat(llvm::Value* v) { return b_.CreateBitCast(v, fty_); }
  /// 2^n for an integer n (of ity) in the normal exponent range, built
  /// directly as an encoding.
  llvm::Value* pow2i(llvm::Value* n) { return asFloat(b_.CreateShl(b_.CreateAdd(n, i(bias())), i(mantissaBits()))); }
  /// y * 2^n for y in [0.5, 2) and an integer n whose halves are normal
  /// exponents (f32: [-252, 254]; f64: [-2044, 2046]) with a single
  /// rounding, even when the result is denormal or overflows: n is split in
  /// two, the first product is exact, the second rounds once (gradual
  /// underflow is exact, overflow gives inf). NaN in y stays NaN.
  llvm::Value* scaleByPow2(llvm::Value* y, llvm::Value* n) {
    llvm::Value* n1 = b_.CreateAShr(n, i(1));
    llvm::Value* n2 = b_.CreateSub(n, n1);
    return mul(mul(y, pow2i(n2)), pow2i(n1));
  }
  /// Clamps x into [lo, hi] but lets NaN through (an ordered compare is
  /// false for NaN; llvm.minnum/maxnum would turn NaN into the bound).
  llvm::Value* clampKeepNaN(llvm::Value* x, double lo, double hi) {
    x = select(lt(x, f(lo)), f(lo), x);
    return select(gt(x, f(hi)), f(hi), x);
  }
  /// x with the sign bit of `s` xor-ed in (sign(x) * sign(s) for the sign;
  /// exact for zeros, infinities and NaN payloads).
  llvm::Value* xorSign(llvm::Value* x, llvm::Value* s) {
    return asFloat(b_.CreateXor(asInt(x), b_.CreateAnd(asInt(s), signMask())));
  }
  /// The magic constant 1.5 * 2^p (p = mantissa bits): adding it to |v| <
  /// 2^(p-1) rounds v to an integer (ties to even) and leaves that integer
  /// plus 2^(p-1) in the low mantissa bits.
  double roundMagic() const { return f64_ ? 6755399441055744.0 : 12582912.0; }
  int64_t roundMagicBits() const { return f64_ ? 0x4338000000000000LL : 0x4b400000LL; }
  /// round(v) as a float and as an integer of ity, for |v| < 2^(p-1), by
  /// the magic constant (no fptosi: defined for NaN, whose integer is junk).
  /// With `mulBy` the rounded value is of x * mulBy, computed with one FMA.
  std::pair<llvm::Value*, llvm::Value*> roundToInt(llvm::Value* x, llvm::Value* mulBy = nullptr) {
    llvm::Value* t = mulBy ? fma(x, mulBy, f(roundMagic())) : add(x, f(roundMagic()));
    return {sub(t, f(roundMagic())), b_.CreateSub(asInt(t), i(roundMagicBits()))};
  }

  // ---- error-free transformations (double-word arithmetic) -----------------
  /// a + b = hi + lo exactly (Knuth's TwoSum, any magnitudes).
  Pair twoSum(llvm::Value* a, llvm::Value* c) {
    llvm::Value* s = add(a, c);
    llvm::Value* bb = sub(s, a);
    llvm::Value* err = add(sub(a, sub(s, bb)), sub(c, bb));
    return {s, err};
  }
  /// a + b = hi + lo exactly, for |a| >= |b| or a = 0 (Fast2Sum).
  Pair fastTwoSum(llvm::Value* a, llvm::Value* c) {
    llvm::Value* s = add(a, c);
    return {s, sub(c, sub(s, a))};
  }
  /// a * b = hi + lo exactly (barring underflow), by one FMA.
  Pair twoProd(llvm::Value* a, llvm::Value* c) {
    llvm::Value* p = mul(a, c);
    return {p, fma(a, c, neg(p))};
  }

  // ---- control flow ------------------------------------------------------------
  /// `fast` (values computed for every lane) where `cond` is false; where it
  /// is true (in any lane), also runs `slow`, which returns values of the
  /// same types to be used in the lanes where `cond` holds. The slow path
  /// is emitted in a block entered only when some lane needs it (a vector
  /// condition is or-reduced), so a rare path costs one branch. The
  /// builder continues after the join.
  std::vector<llvm::Value*> ifAny(llvm::Value* cond, const std::vector<llvm::Value*>& fast,
                                  const std::function<std::vector<llvm::Value*>()>& slow);

 private:
  llvm::IRBuilderBase& b_;
  llvm::IRBuilderBase::FastMathFlagGuard guard_;
  llvm::Type* fty_ = nullptr;
  llvm::Type* ity_ = nullptr;
  bool f64_ = false;
};

/// sigmoid(x) from t = e^-|x| in (0, 1] given as a pair (th + tl): 1/(1+t)
/// for x >= 0, t/(1+t) below. Neither form cancels; with 1 + t and t as
/// pairs only the division's rounding and t's own (small) error remain.
/// Tiny results (x far below 0) are t itself, down to the denormals.
inline llvm::Value* sigmoidFrom(Emit& e, llvm::Value* x, Pair t) {
  Pair d = e.fastTwoSum(e.f(1.0), t.hi);
  llvm::Value* dl = e.add(d.lo, t.lo);
  // 1/(dh + dl) = r (1 - dl/dh); (th + tl)/(dh + dl) = q + (tl - q dl)/dh.
  llvm::Value* r = e.div(e.f(1.0), d.hi);
  llvm::Value* pos = e.fma(e.neg(r), e.mul(dl, r), r);
  llvm::Value* q = e.div(t.hi, d.hi);
  llvm::Value* neg = e.add(q, e.div(e.fma(e.neg(q), dl, t.lo), d.hi));
  return e.select(e.lt(x, e.f(0.0)), neg, pos);
}

/// e^x - 1 = 2^n (1 + p) - 1 from the reduction x = n ln2 + r and
/// p = ph + pl = e^r - 1 (a pair), with one final rounding where the parts
/// allow: -1 <= n <= nMax, 2^n p + (2^n - 1) (the constant exact, the
/// sum as a pair); n < -1, 2^n (1 + p) - 1 likewise; n > nMax, 2^n (1 + p),
/// the -1 below half an ulp. n >= -(nMax + 4) (the caller clamps x).
inline llvm::Value* expm1Combine(Emit& e, Pair p, llvm::Value* n, int nMax) {
  auto& b = e.b();
  llvm::Value* nSmall = b.CreateSelect(b.CreateICmpSGT(n, e.i(nMax)), e.i(nMax), n);
  llvm::Value* s = e.pow2i(nSmall);
  Pair mid = e.twoSum(e.mul(s, p.hi), e.sub(s, e.f(1.0)));
  llvm::Value* midV = e.add(mid.hi, e.fma(s, p.lo, mid.lo));
  Pair one = e.fastTwoSum(e.f(1.0), p.hi);  // |p| < 1
  llvm::Value* oneLo = e.add(one.lo, p.lo);
  Pair low = e.twoSum(e.mul(s, one.hi), e.f(-1.0));
  llvm::Value* lowV = e.add(low.hi, e.fma(s, oneLo, low.lo));
  llvm::Value* highV = e.scaleByPow2(e.add(one.hi, oneLo), n);
  return e.select(b.CreateICmpSLT(n, e.i(-1)), lowV, e.select(b.CreateICmpSGT(n, e.i(nMax)), highV, midV));
}

/// The bits of 2/pi after the binary point, most significant first, in
/// 32-bit words (f32 Payne-Hanek) and 64-bit words (f64): word k holds
/// bits 32k+1 .. 32k+32 (64k+1 .. 64k+64) of the fraction.
extern const uint32_t kTwoOverPi32[8];
extern const uint64_t kTwoOverPi64[20];

}  // namespace tessera::codegen::vmath

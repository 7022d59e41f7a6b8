// Vector single-precision math as LLVM IR: range reduction by exact
// floating-point tricks, minimax polynomials in FMA (Horner) form, and
// exponent construction / extraction by integer operations on the float
// encoding. See VectorMath.h for the contract and docs/math.md for the
// measured accuracy.
//
// Coefficient provenance: exp, exp2, log and log2 use the Cephes single
// precision minimax polynomials (expf, exp2f, logf, log2f); the tanh
// polynomial for |x| < 0.625 and both erf pieces were fitted for this file
// (minimax, weighted so that the error is measured in ulps of the final
// result, coefficients rounded to float and re-checked after rounding).
#include "codegen/llvm/VectorMath.h"

#include <initializer_list>
#include <limits>
#include <string>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include "tessera/support/Error.h"

namespace tessera::codegen {
namespace {

/// Emission helper bound to one value type (float or <N x float>) and its
/// same-shaped i32 type. Constants are splats of that type.
class Emit {
 public:
  Emit(llvm::IRBuilderBase& b, llvm::Value* x, const char* fn) : b_(b), guard_(b) {
    TS_ASSERT(x != nullptr, std::string(fn) + ": null operand");
    fty_ = x->getType();
    TS_ASSERT(fty_->getScalarType()->isFloatTy(), std::string(fn) + " expects float or <N x float>");
    ity_ = fty_->getWithNewType(b.getInt32Ty());
    // The tricks below need strict IEEE semantics (see VectorMath.h).
    b_.clearFastMathFlags();
  }

  llvm::Value* f(double v) { return llvm::ConstantFP::get(fty_, v); }
  llvm::Value* i(int32_t v) {
    return llvm::ConstantInt::get(ity_, static_cast<uint64_t>(static_cast<int64_t>(v)), true);
  }
  llvm::Value* fma(llvm::Value* a, llvm::Value* m, llvm::Value* c) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fma, {fty_}, {a, m, c});
  }
  llvm::Value* fabs(llvm::Value* a) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a); }
  llvm::Value* copysign(llvm::Value* mag, llvm::Value* sign) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, sign);
  }
  /// c[0]*x^(n-1) + ... + c[n-1], as a chain of FMAs.
  llvm::Value* horner(llvm::Value* x, std::initializer_list<float> c) {
    auto it = c.begin();
    llvm::Value* acc = f(*it++);
    for (; it != c.end(); ++it) acc = fma(acc, x, f(*it));
    return acc;
  }
  llvm::Value* asInt(llvm::Value* v) { return b_.CreateBitCast(v, ity_); }
  llvm::Value* asFloat(llvm::Value* v) { return b_.CreateBitCast(v, fty_); }
  /// 2^n for an integer n in [-126, 127], built directly as a float encoding.
  llvm::Value* pow2i(llvm::Value* n) { return asFloat(b_.CreateShl(b_.CreateAdd(n, i(127)), i(23))); }
  /// Clamps x into [lo, hi] but lets NaN through: an ordered compare is
  /// false for NaN, so the select keeps x. (llvm.minnum/maxnum would turn
  /// NaN into the bound.)
  llvm::Value* clampKeepNaN(llvm::Value* x, double lo, double hi) {
    x = b_.CreateSelect(b_.CreateFCmpOLT(x, f(lo)), f(lo), x);
    return b_.CreateSelect(b_.CreateFCmpOGT(x, f(hi)), f(hi), x);
  }

  /// y * 2^n for y in [0.5, 2) and integer n in [-152, 130], with a single
  /// rounding even when the result is denormal or overflows. n is split in
  /// two halves so that each power of two is a normal float; the first
  /// product is exact, the second rounds once (gradual underflow is exact,
  /// overflow gives +inf). NaN in y stays NaN because only multiplies
  /// touch y.
  llvm::Value* scaleByPow2(llvm::Value* y, llvm::Value* n) {
    llvm::Value* n1 = b_.CreateAShr(n, i(1));
    llvm::Value* n2 = b_.CreateSub(n, n1);
    return b_.CreateFMul(b_.CreateFMul(y, pow2i(n2)), pow2i(n1));
  }

  llvm::IRBuilderBase& b() { return b_; }
  llvm::Type* fty() { return fty_; }

 private:
  llvm::IRBuilderBase& b_;
  llvm::IRBuilderBase::FastMathFlagGuard guard_;
  llvm::Type* fty_ = nullptr;
  llvm::Type* ity_ = nullptr;
};

// 1.5 * 2^23: adding it to |v| < 2^22 rounds v to the nearest integer
// (ties to even) and leaves that integer, plus 2^22, in the low mantissa bits.
constexpr float kRoundMagic = 12582912.0f;
constexpr int32_t kRoundMagicBits = 0x4b400000;

llvm::Value* expCore(Emit& e, llvm::Value* x) {
  auto& b = e.b();
  // Beyond these bounds the result is +inf / +0 anyway; clamping keeps the
  // integer exponent arithmetic in range. 89 > ln(FLT_MAX) = 88.72;
  // -104 < ln(2^-150) = -103.97, below which everything rounds to 0.
  x = e.clampKeepNaN(x, -104.0, 89.0);
  // n = round(x / ln2); t carries n in its low bits (no fptosi, which
  // would be poison for NaN).
  llvm::Value* t = e.fma(x, e.f(1.44269502162933349609375f), e.f(kRoundMagic));
  llvm::Value* n = b.CreateFSub(t, e.f(kRoundMagic));
  // r = x - n*ln2 with ln2 split hi+lo (Cody-Waite); each FMA is exact
  // enough that r carries no cancellation error. |r| <= ln2/2.
  llvm::Value* r = e.fma(n, e.f(-0.693147182464599609375f), x);
  r = e.fma(n, e.f(1.904654323148236e-09f), r);
  // e^r = 1 + r + r^2 * P(r)  (Cephes expf), evaluated as one Horner chain
  // (one FMA per coefficient, nothing else).
  llvm::Value* y = e.horner(r, {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                                1.6666665459e-1f, 5.0000001201e-1f, 1.0f, 1.0f});
  llvm::Value* ni = b.CreateSub(e.asInt(t), e.i(kRoundMagicBits));
  return e.scaleByPow2(y, ni);
}

/// The reduction shared by log and log2: splits x > 0 (including
/// denormals) into x = 2^k * z with z in [sqrt(1/2), sqrt(2)), and returns
/// f = z - 1, k as float, f^2, and the polynomial tail y = f^3 * P(f) so that
/// ln(z) = f - f^2/2 + y.
struct LogParts {
  llvm::Value* f;
  llvm::Value* k;
  llvm::Value* f2;
  llvm::Value* tail;
};

LogParts logCore(Emit& e, llvm::Value* x) {
  auto& b = e.b();
  // Denormals have no implicit leading bit; scaling by 2^23 makes them
  // normal, and the exponent is corrected by -23.
  llvm::Value* den = b.CreateFCmpOLT(x, e.f(0x1p-126));
  llvm::Value* xs = b.CreateSelect(den, b.CreateFMul(x, e.f(0x1p23)), x);
  llvm::Value* ix = e.asInt(xs);
  // Subtracting the encoding of sqrt(1/2) makes the exponent field count
  // from sqrt(1/2) instead of 1, so one shift yields k and one mask-subtract
  // maps the mantissa into [sqrt(1/2), sqrt(2)) — no compare and select.
  constexpr int32_t kSqrtHalfBits = 0x3f3504f3;
  llvm::Value* tmp = b.CreateSub(ix, e.i(kSqrtHalfBits));
  llvm::Value* ki = b.CreateAShr(tmp, e.i(23));
  ki = b.CreateAdd(ki, b.CreateSelect(den, e.i(-23), e.i(0)));
  llvm::Value* iz = b.CreateSub(ix, b.CreateAnd(tmp, e.i(static_cast<int32_t>(0xff800000u))));
  llvm::Value* f = b.CreateFSub(e.asFloat(iz), e.f(1.0));
  llvm::Value* k = b.CreateSIToFP(ki, e.fty());
  llvm::Value* f2 = b.CreateFMul(f, f);
  // Cephes logf polynomial: ln(1+f) = f - f^2/2 + f^3 P(f).
  llvm::Value* p =
      e.horner(f, {7.0376836292e-2f, -1.1514610310e-1f, 1.1676998740e-1f, -1.2420140846e-1f, 1.4249322787e-1f,
                   -1.6668057665e-1f, 2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f});
  llvm::Value* tail = b.CreateFMul(b.CreateFMul(p, f), f2);
  return {f, k, f2, tail};
}

/// IEEE special values of log/log2, patched over the finite-path result:
/// NaN and +inf return themselves, x < 0 is NaN, +-0 is -inf.
llvm::Value* logSpecials(Emit& e, llvm::Value* x, llvm::Value* r) {
  auto& b = e.b();
  const double inf = std::numeric_limits<double>::infinity();
  r = b.CreateSelect(b.CreateFCmpUEQ(x, e.f(inf)), x, r);
  r = b.CreateSelect(b.CreateFCmpOLT(x, e.f(0.0)), e.f(std::numeric_limits<double>::quiet_NaN()), r);
  return b.CreateSelect(b.CreateFCmpOEQ(x, e.f(0.0)), e.f(-inf), r);
}

}  // namespace

llvm::Value* emitExpF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "exp");
  return expCore(e, x);
}

llvm::Value* emitExp2F32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "exp2");
  // 2^-151 and below round to 0, 2^129 overflows.
  x = e.clampKeepNaN(x, -151.0, 129.0);
  llvm::Value* t = b.CreateFAdd(x, e.f(kRoundMagic));
  llvm::Value* n = b.CreateFSub(t, e.f(kRoundMagic));
  llvm::Value* r = b.CreateFSub(x, n);  // exact, |r| <= 1/2
  // 2^r = 1 + r * P(r)  (Cephes exp2f).
  llvm::Value* p = e.horner(r, {1.535336188319500e-4f, 1.339887440266574e-3f, 9.618437357674640e-3f,
                                5.550332471162809e-2f, 2.402264791363012e-1f, 6.931472028550421e-1f});
  llvm::Value* y = e.fma(p, r, e.f(1.0));
  llvm::Value* ni = b.CreateSub(e.asInt(t), e.i(kRoundMagicBits));
  return e.scaleByPow2(y, ni);
}

llvm::Value* emitLogF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "log");
  LogParts L = logCore(e, x);
  // ln x = k*ln2 + f - f^2/2 + tail, with ln2 = 0.693359375 (exact in 9
  // bits, so k*hi is exact) - 2.12194440e-4, smallest terms summed first.
  llvm::Value* y = e.fma(L.k, e.f(-2.12194440e-4f), L.tail);
  y = e.fma(L.f2, e.f(-0.5), y);
  llvm::Value* r = b.CreateFAdd(L.f, y);
  r = e.fma(L.k, e.f(0.693359375), r);
  return logSpecials(e, x, r);
}

llvm::Value* emitLog2F32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "log2");
  LogParts L = logCore(e, x);
  // log2 x = k + (f + y) * log2(e) with y = tail - f^2/2. log2(e) is
  // written as 1 + 0.4427 so that the dominant f + y is added unscaled
  // (Cephes log2f): no rounding of f*log2(e) enters the result.
  constexpr float kLog2eMinus1 = 0.44269504088896340736f;
  llvm::Value* y = e.fma(L.f2, e.f(-0.5), L.tail);
  llvm::Value* z = b.CreateFMul(y, e.f(kLog2eMinus1));
  z = e.fma(L.f, e.f(kLog2eMinus1), z);
  z = b.CreateFAdd(z, y);
  z = b.CreateFAdd(z, L.f);
  z = b.CreateFAdd(z, L.k);
  return logSpecials(e, x, z);
}

llvm::Value* emitTanhF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "tanh");
  // Computed on |x| and given x's sign at the end: odd by construction,
  // and tanh(-0) = -0.
  llvm::Value* ax = e.fabs(x);
  // |x| < 0.625: tanh x = x + x^3 P(x^2). Relative accuracy holds down to
  // denormals (the correction underflows, x is returned exactly).
  llvm::Value* s = b.CreateFMul(ax, ax);
  llvm::Value* p = e.horner(s, {-0.005704998504370451f, 0.020639097318053246f, -0.05373971909284592f,
                                0.13331441581249237f, -0.3333328068256378f});
  llvm::Value* small = e.fma(b.CreateFMul(p, s), ax, ax);
  // |x| >= 0.625: tanh x = 1 - 2/(e^2x + 1). Here 2/(e^2x+1) < 0.45, so its
  // rounding errors shrink in the subtraction; e^2x = +inf for large |x|
  // gives exactly 1 (saturation), NaN stays NaN.
  llvm::Value* ex = expCore(e, b.CreateFAdd(ax, ax));
  llvm::Value* q = b.CreateFDiv(e.f(2.0), b.CreateFAdd(ex, e.f(1.0)));
  llvm::Value* big = b.CreateFSub(e.f(1.0), q);
  llvm::Value* r = b.CreateSelect(b.CreateFCmpOLT(ax, e.f(0.625)), small, big);
  return e.copysign(r, x);
}

llvm::Value* emitErfF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "erf");
  llvm::Value* ax = e.fabs(x);
  // |x| < 1: erf x = x + x * P(x^2); the FMA adds the small correction to x
  // in one rounding, keeping relative accuracy down to denormals.
  llvm::Value* s = b.CreateFMul(ax, ax);
  llvm::Value* pa =
      e.horner(s, {7.853857823647559e-05f, -0.0008010192541405559f, 0.005188327748328447f, -0.026853810995817184f,
                   0.1128358542919159f, -0.3761262595653534f, 0.12837916612625122f});
  llvm::Value* small = e.fma(pa, ax, ax);
  // |x| >= 1: erf x = 1 - exp(G(|x|)) with G ~ ln(erfc |x|) fitted on [1, 4].
  // erfc <= 0.16 there, so the exp's relative error is scaled down in the
  // subtraction. Beyond 4, erfc < 1.6e-8 < ulp(1)/2 and the result rounds
  // to 1 (the clamp keeps G in its fitted range; NaN passes through).
  llvm::Value* t = e.clampKeepNaN(ax, 1.0, 4.0);
  llvm::Value* g = e.horner(t, {2.512205696802994e-07f, -2.531328209443018e-05f, 0.0004637785896193236f,
                                -0.0042823501862585545f, 0.025373486801981926f, -0.10863890498876572f,
                                -0.6330397129058838f, -1.1296610832214355f, 0.00020435308397281915f});
  llvm::Value* big = b.CreateFSub(e.f(1.0), expCore(e, g));
  llvm::Value* r = b.CreateSelect(b.CreateFCmpOLT(ax, e.f(1.0)), small, big);
  return e.copysign(r, x);
}

}  // namespace tessera::codegen

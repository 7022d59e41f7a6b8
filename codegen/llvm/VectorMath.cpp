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

#include "codegen/llvm/VectorMathEmit.h"
#include "tessera/support/Error.h"

namespace tessera::codegen {

using vmath::Emit;
using vmath::Pair;

namespace {

// 1.5 * 2^23: adding it to |v| < 2^22 rounds v to the nearest integer
// (ties to even) and leaves that integer, plus 2^22, in the low mantissa bits.
constexpr float kRoundMagic = 12582912.0f;
constexpr int32_t kRoundMagicBits = 0x4b400000;

llvm::Value* expCore(Emit& e, llvm::Value* x, llvm::Value** lo = nullptr) {
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
  llvm::Value* acc = e.horner(r, {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                                  1.6666665459e-1f, 5.0000001201e-1f, 1.0f});
  llvm::Value* y = e.fma(acc, r, e.f(1.0));
  llvm::Value* ni = b.CreateSub(e.asInt(t), e.i(kRoundMagicBits));
  // On request, the last step's rounding error as well, scaled alike (acc r
  // - (y - 1), y - 1 exact): y + lo carries e^x to well below an ulp.
  if (lo) *lo = e.scaleByPow2(e.fma(acc, r, e.sub(e.f(1.0), y)), ni);
  return e.scaleByPow2(y, ni);
}

/// 2^r = 1 + r * P(r) for |r| <= 1/2 (Cephes exp2f).
llvm::Value* exp2Poly(Emit& e, llvm::Value* r) {
  llvm::Value* p = e.horner(r, {1.535336188319500e-4f, 1.339887440266574e-3f, 9.618437357674640e-3f,
                                5.550332471162809e-2f, 2.402264791363012e-1f, 6.931472028550421e-1f});
  return e.fma(p, r, e.f(1.0));
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
  Emit e(b, x, "exp", false);
  return expCore(e, x);
}

llvm::Value* emitExp2F32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "exp2", false);
  // 2^-151 and below round to 0, 2^129 overflows.
  x = e.clampKeepNaN(x, -151.0, 129.0);
  llvm::Value* t = b.CreateFAdd(x, e.f(kRoundMagic));
  llvm::Value* n = b.CreateFSub(t, e.f(kRoundMagic));
  llvm::Value* r = b.CreateFSub(x, n);  // exact, |r| <= 1/2
  llvm::Value* y = exp2Poly(e, r);
  llvm::Value* ni = b.CreateSub(e.asInt(t), e.i(kRoundMagicBits));
  return e.scaleByPow2(y, ni);
}

llvm::Value* emitLogF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "log", false);
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
  Emit e(b, x, "log2", false);
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
  Emit e(b, x, "tanh", false);
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
  Emit e(b, x, "erf", false);
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

// ---- sin, cos ------------------------------------------------------------------

namespace {

/// |x| (>= 0, finite) as q * pi/2 + (r + rl), |r| <= pi/4 (a little more
/// where q was rounded from an inexact x * 2/pi), r + rl a float pair, and
/// the quadrant q (i32; only q mod 4 is used).
struct Quadrant {
  llvm::Value* r;
  llvm::Value* rl;
  llvm::Value* q;
};

/// Payne-Hanek reduction of a = |x| for every finite a >= 2^-6 (an
/// integer-arithmetic product of a's 24-bit mantissa with a 128-bit window
/// of 2/pi chosen by a's exponent): exact to 2^-62 in q + r/(pi/2) before
/// the final rounding of r. Well defined (junk, no poison) for every other
/// input, whose lanes the caller does not use.
Quadrant reducePayneHanekF32(Emit& e, llvm::Value* a) {
  auto& b = e.b();
  llvm::Type* i32 = e.ity();
  llvm::Type* i64 = e.shaped(b.getInt64Ty());
  auto c32 = [&](uint32_t v) { return e.iOf(b.getInt32Ty(), static_cast<int32_t>(v)); };
  auto c64 = [&](int64_t v) { return e.iOf(b.getInt64Ty(), v); };
  llvm::Value* bits = e.asInt(a);
  // a = m * 2^E, m the 24-bit integer mantissa, E = exponent - 150. Bit k
  // of 2/pi (weight 2^-k) adds m * 2^(E-k) to a * 2/pi: a multiple of 4 (a
  // whole turn) for k <= E - 2, so the window starts at bit E - 1. In the
  // bit string W = 0 . w1 w2 ... (a zero word first, for windows starting
  // before bit 1) bit k is at position k + 31, so the window starts at
  // p0 = E + 30 = biased exponent - 120.
  llvm::Value* m = b.CreateOr(b.CreateAnd(bits, c32(0x7fffff)), c32(0x800000));
  llvm::Value* p0 = b.CreateSub(b.CreateLShr(bits, c32(23)), c32(120));
  llvm::Value* word = b.CreateAShr(p0, c32(5));
  llvm::Value* shift = b.CreateAnd(p0, c32(31));
  // S_j = W[word + j], j = 0..4, for word in [0, 4] (a in [2^-6, 2^128)).
  auto W = [&](int k) { return c32(k == 0 ? 0u : vmath::kTwoOverPi32[k - 1]); };
  llvm::Value* S[5];
  for (int j = 0; j < 5; ++j) {
    llvm::Value* v = W(j + 4);
    for (int w = 3; w >= 0; --w) v = b.CreateSelect(b.CreateICmpEQ(word, c32(w)), W(j + w), v);
    S[j] = v;
  }
  // The window V = V0 V1 V2 V3 (128 bits) and the product m * V, whose bit
  // 126 has weight 1 in a * 2/pi: bits 127..126 are q mod 4, the next 62
  // bits the fraction.
  llvm::Value* P[4];
  llvm::Value* m64 = b.CreateZExt(m, i64);
  for (int k = 0; k < 4; ++k) {
    llvm::Value* v = b.CreateIntrinsic(llvm::Intrinsic::fshl, {i32}, {S[k], S[k + 1], shift});
    P[k] = b.CreateMul(m64, b.CreateZExt(v, i64));
  }
  llvm::Value* t = b.CreateAdd(P[2], b.CreateLShr(P[3], c64(32)));
  llvm::Value* u = b.CreateAdd(P[1], b.CreateLShr(t, c64(32)));
  llvm::Value* top = b.CreateAdd(P[0], b.CreateLShr(u, c64(32)));
  llvm::Value* q = b.CreateTrunc(b.CreateAnd(b.CreateLShr(top, c64(30)), c64(3)), i32);
  llvm::Value* frac =
      b.CreateOr(b.CreateShl(b.CreateAnd(top, c64(0x3fffffff)), c64(32)), b.CreateAnd(u, c64(0xffffffff)));
  // Round to the nearest quadrant: a fraction >= 1/2 counts as -(1 - f).
  llvm::Value* half = b.CreateLShr(frac, c64(61));
  q = b.CreateAdd(q, b.CreateTrunc(half, i32));
  frac = b.CreateSub(frac, b.CreateShl(half, c64(62)));  // signed, |frac| <= 2^61
  // r = frac * 2^-62 * pi/2, with frac split into two floats first.
  llvm::Value* fh = b.CreateSIToFP(frac, e.fty());
  llvm::Value* fl = b.CreateSIToFP(b.CreateSub(frac, b.CreateFPToSI(fh, i64)), e.fty());
  fh = e.mul(fh, e.f(0x1p-62));
  fl = e.mul(fl, e.f(0x1p-62));
  constexpr float kPio2Hi = 0x1.921fb6p+0f, kPio2Lo = -0x1.777a5cp-25f;
  Pair r = e.twoProd(fh, e.f(kPio2Hi));
  llvm::Value* rl = e.add(r.lo, e.fma(fh, e.f(kPio2Lo), e.mul(fl, e.f(kPio2Hi))));
  Pair rr = e.fastTwoSum(r.hi, rl);
  return {rr.hi, rr.lo, q};
}

// Below this, the Cody-Waite reduction by pi/2 as three floats is exact to
// far below an ulp of the result (q * 2^-75); above it, Payne-Hanek. 2^20
// keeps RoPE-like arguments (positions times frequencies) on the fast path
// (tests/codegen/math_test.cpp sweeps both sides of it).
constexpr float kSinCodyWaiteLimitF32 = 1048576.0f;  // 2^20

Quadrant reduceF32(Emit& e, llvm::Value* a) {
  // q = round(a * 2/pi); r = a - q * pi/2 with pi/2 = P1 + P2 + P3 (floats):
  // a - q P1 is exact (q P1 is a multiple of 2^-23 within 1 of a), q P2 is
  // taken exactly as a pair, q P3 rounded; the sum as a pair.
  auto [qf, q] = e.roundToInt(a, e.f(0x1.45f306p-1f));
  llvm::Value* y = e.fma(qf, e.f(-0x1.921fb6p+0f), a);
  Pair b2 = e.twoProd(qf, e.f(-0x1.777a5cp-25f));
  llvm::Value* c = e.mul(qf, e.f(-0x1.ee59dap-50f));
  Pair s = e.twoSum(y, e.neg(b2.hi));
  Pair r = e.fastTwoSum(s.hi, e.sub(e.sub(s.lo, b2.lo), c));
  // Finite arguments above the limit: Payne-Hanek (inf and NaN stay on the
  // fast path, which makes them NaN).
  llvm::Value* big =
      e.b().CreateAnd(e.gt(a, e.f(kSinCodyWaiteLimitF32)), e.lt(a, e.f(std::numeric_limits<double>::infinity())));
  std::vector<llvm::Value*> out = e.ifAny(big, {r.hi, r.lo, q}, [&] {
    Quadrant ph = reducePayneHanekF32(e, a);
    return std::vector<llvm::Value*>{ph.r, ph.rl, ph.q};
  });
  return {out[0], out[1], out[2]};
}

/// sin and cos of r + rl for |r| <= pi/4 (+ a little), minimax polynomials
/// in r^2 fitted by scripts/math-coefficients.py (sin32, cos32); rl enters
/// to first order (sin: + rl, cos: - r rl).
llvm::Value* sinPolyF32(Emit& e, llvm::Value* r, llvm::Value* rl, llvm::Value* z) {
  llvm::Value* s = e.horner(z, {2.71734939e-06f, -0.000198392619f, 0.00833332911f, -0.166666672f});
  return e.add(r, e.fma(e.mul(r, z), s, rl));
}
llvm::Value* cosPolyF32(Emit& e, llvm::Value* r, llvm::Value* rl, llvm::Value* z) {
  llvm::Value* c = e.horner(z, {2.44638377e-05f, -0.00138876541f, 0.041666653f});
  // 1 - z/2 rounded to w; (1 - w) - z/2 is that rounding's error exactly,
  // added back with the small terms.
  llvm::Value* hz = e.mul(z, e.f(0.5));
  llvm::Value* w = e.sub(e.f(1.0), hz);
  llvm::Value* small = e.fma(e.mul(z, z), c, e.neg(e.mul(r, rl)));
  return e.add(w, e.add(e.sub(e.sub(e.f(1.0), w), hz), small));
}

/// sin (cos = false) or cos of x: reduction of |x|, both polynomials, the
/// quadrant's choice and sign; sin gets x's sign back at the end.
llvm::Value* sinCosF32(Emit& e, llvm::Value* x, bool cos) {
  auto& b = e.b();
  llvm::Value* a = e.fabs(x);
  Quadrant red = reduceF32(e, a);
  llvm::Value* q = cos ? b.CreateAdd(red.q, e.i(1)) : red.q;  // cos x = sin(x + pi/2)
  llvm::Value* z = e.mul(red.r, red.r);
  llvm::Value* sv = sinPolyF32(e, red.r, red.rl, z);
  llvm::Value* cv = cosPolyF32(e, red.r, red.rl, z);
  llvm::Value* odd = b.CreateICmpNE(b.CreateAnd(q, e.i(1)), e.i(0));
  llvm::Value* v = e.select(odd, cv, sv);
  llvm::Value* negate = b.CreateICmpNE(b.CreateAnd(q, e.i(2)), e.i(0));
  v = e.select(negate, e.neg(v), v);
  return cos ? v : e.xorSign(v, x);
}

}  // namespace

llvm::Value* emitSinF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "sin", false);
  return sinCosF32(e, x, false);
}

llvm::Value* emitCosF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "cos", false);
  return sinCosF32(e, x, true);
}

// ---- expm1, log1p, sigmoid -------------------------------------------------------

llvm::Value* emitExpm1F32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "expm1", false);
  // Below -18, e^x < 2^-25.9 and e^x - 1 rounds to -1; above 89 it
  // overflows. The reduction is exp's: x = n ln2 + r, |r| <= ln2/2.
  llvm::Value* xc = e.clampKeepNaN(x, -18.0, 89.0);
  auto [nf, n] = e.roundToInt(xc, e.f(1.44269502162933349609375f));
  // r + rlo = x - n ln2: the first step is exact, the second's rounding
  // error is carried.
  llvm::Value* r1 = e.fma(nf, e.f(-0.693147182464599609375f), xc);
  Pair rr = e.twoSum(r1, e.mul(nf, e.f(1.904654323148236e-09f)));
  llvm::Value* r = rr.hi;
  // e^r - 1 = r + r^2 E(r) (minimax, scripts/math-coefficients.py
  // expm1_32); e^(r + rlo) - 1 adds rlo (1 + r) to far below an ulp. p =
  // r + q as a pair, q = r^2 E(r) + rlo (1 + r).
  llvm::Value* E = e.horner(r, {0.000199075715f, 0.00139485812f, 0.00833328627f, 0.0416662395f, 0.166666672f, 0.5f});
  llvm::Value* q = e.fma(e.mul(r, r), E, e.fma(rr.lo, r, rr.lo));
  llvm::Value* res = vmath::expm1Combine(e, e.twoSum(r, q), n, 24);
  // |x| < 2^-25: e^x - 1 rounds to x (also keeps -0 and denormals exact).
  return e.select(e.lt(e.fabs(x), e.f(0x1p-25)), x, res);
}

llvm::Value* emitLog1pF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "log1p", false);
  // u = 1 + x rounded, c = the rounding error (exact, TwoSum): ln(1 + x) =
  // ln(u) + ln(1 + c/u) = ln(u) + c/u to far below an ulp. ln(u) is log's
  // computation with c/u added to its smallest terms.
  Pair u = e.twoSum(e.f(1.0), x);
  LogParts L = logCore(e, u.hi);
  llvm::Value* c = e.div(u.lo, u.hi);
  llvm::Value* y = e.fma(L.k, e.f(-2.12194440e-4f), e.add(L.tail, c));
  y = e.fma(L.f2, e.f(-0.5), y);
  llvm::Value* r = e.add(L.f, y);
  r = e.fma(L.k, e.f(0.693359375), r);
  r = logSpecials(e, u.hi, r);  // u = 0: -inf; u < 0: NaN; inf, NaN
  // x = -0 (and tiny x) comes out as x.
  return e.select(e.eq(x, e.f(0.0)), x, r);
}

llvm::Value* emitSigmoidF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "sigmoid", false);
  // t = e^-|x| in (0, 1]: sigmoid = 1/(1+t) for x >= 0, t/(1+t) below 0;
  // neither form cancels, and tiny results (x < -87) are t itself, down to
  // the denormals.
  llvm::Value* lo;
  llvm::Value* hi = expCore(e, e.neg(e.fabs(x)), &lo);
  return vmath::sigmoidFrom(e, x, {hi, lo});
}

// ---- pow ----------------------------------------------------------------------------

llvm::Value* emitPowF32(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y) {
  Emit e(b, x, "pow", false);
  TS_ASSERT(y->getType() == x->getType(), "pow: operand types differ");
  const double inf = std::numeric_limits<double>::infinity();
  // |x|^y = 2^(y log2|x|). y log2|x| reaches +-150 with an error that grows
  // with it, so log2|x| is computed as a float pair H + Lo good to about
  // 2^-36 relative, the product y (H + Lo) as a pair, and 2^(th + tl) from
  // it: the result then has the error of exp2 alone, plus about 0.1 ulp.
  llvm::Value* a = e.fabs(x);
  llvm::Value* den = e.lt(a, e.f(0x1p-126));
  llvm::Value* as = e.select(den, e.mul(a, e.f(0x1p23)), a);
  llvm::Value* ix = e.asInt(as);
  llvm::Value* tmp = b.CreateSub(ix, e.i(0x3f3504f3));
  llvm::Value* k = b.CreateAdd(b.CreateAShr(tmp, e.i(23)), e.select(den, e.i(-23), e.i(0)));
  llvm::Value* mant = e.asFloat(b.CreateSub(ix, b.CreateAnd(tmp, e.i(static_cast<int32_t>(0xff800000u)))));
  llvm::Value* f = e.sub(mant, e.f(1.0));  // exact, in [sqrt(1/2) - 1, sqrt(2) - 1)
  // s = f / (2 + f) as a pair: d = 2 + f rounded with its exact error dl,
  // sh = f / d, then sl from the exact residual f - sh d.
  llvm::Value* d = e.add(e.f(2.0), f);
  llvm::Value* dl = e.sub(f, e.sub(d, e.f(2.0)));
  llvm::Value* sh = e.div(f, d);
  llvm::Value* res1 = e.fma(e.neg(sh), d, f);
  llvm::Value* sl = e.div(e.fma(e.neg(sh), dl, res1), d);
  // ln(1+f) = 2 atanh(s) = 2s + (2/3) s^3 + s^5 Q(s^2); |s| <= 0.1716. The
  // first two terms as pairs, the rest (below 2^-12 of the sum) in float.
  Pair z = e.twoProd(sh, sh);
  Pair s3 = e.twoProd(z.hi, sh);
  llvm::Value* s3l = e.add(s3.lo, e.fma(z.lo, sh, e.mul(e.mul(e.f(3.0), z.hi), sl)));
  constexpr float kTwoThirdsHi = 0x1.555556p-1f, kTwoThirdsLo = -0x1.555556p-26f;
  Pair p3 = e.twoProd(e.f(kTwoThirdsHi), s3.hi);
  llvm::Value* p3l = e.add(p3.lo, e.fma(e.f(kTwoThirdsHi), s3l, e.mul(e.f(kTwoThirdsLo), s3.hi)));
  // Q(z) = 2/5 + 2/7 z + ... (the atanh series; the next term is 2^-27 of Q).
  llvm::Value* Q = e.horner(z.hi, {2.0f / 13, 2.0f / 11, 2.0f / 9, 2.0f / 7, 2.0f / 5});
  llvm::Value* tail = e.mul(e.mul(s3.hi, z.hi), Q);
  Pair A = e.fastTwoSum(e.add(sh, sh), p3.hi);
  llvm::Value* lo = e.add(e.add(A.lo, e.add(sl, sl)), e.add(p3l, tail));
  Pair ln = e.fastTwoSum(A.hi, lo);
  // log2|x| = k + ln(1+f) * log2(e), log2(e) as a pair.
  constexpr float kLog2eHi = 0x1.715476p+0f, kLog2eLo = 0x1.4ae0cp-26f;
  Pair l2 = e.twoProd(ln.hi, e.f(kLog2eHi));
  llvm::Value* l2l = e.add(l2.lo, e.fma(ln.hi, e.f(kLog2eLo), e.mul(ln.lo, e.f(kLog2eHi))));
  Pair H = e.fastTwoSum(b.CreateSIToFP(k, e.fty()), l2.hi);  // |k| >= 1 > |l2.hi|, or k = 0
  llvm::Value* Hl = e.add(H.lo, l2l);
  // log2 of 0 and inf (the integer reduction does not see them).
  llvm::Value* Hh = e.select(e.eq(a, e.f(0.0)), e.f(-inf), e.select(e.eq(a, e.f(inf)), e.f(inf), H.hi));
  Hh = e.select(e.isNaN(a), a, Hh);
  // t = y * log2|x| as a pair; beyond +-160 the result is 0 or inf anyway.
  Pair t = e.twoProd(y, Hh);
  llvm::Value* tl = e.fma(y, Hl, t.lo);
  llvm::Value* inRange = e.le(e.fabs(t.hi), e.f(160.0));
  tl = e.select(inRange, tl, e.f(0.0));
  llvm::Value* th = e.clampKeepNaN(t.hi, -160.0, 160.0);
  auto [nf, n] = e.roundToInt(th);
  llvm::Value* r = e.add(e.sub(th, nf), tl);  // th - nf exact, |r| <= 1/2 + tiny
  llvm::Value* mag = e.scaleByPow2(exp2Poly(e, r), n);
  // Signs and the special values of C's pow.
  llvm::Value* yInt = e.eq(b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, y), y);  // +-inf count as even
  llvm::Value* halfY = e.mul(y, e.f(0.5));
  llvm::Value* yOdd = b.CreateAnd(yInt, b.CreateFCmpUNE(b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, halfY), halfY));
  llvm::Value* xNeg = b.CreateICmpSLT(e.asInt(x), e.i(0));  // the sign bit, -0 included
  llvm::Value* res = e.select(b.CreateAnd(xNeg, yOdd), e.neg(mag), mag);
  // A finite negative base with a non-integer exponent: NaN.
  llvm::Value* badBase = b.CreateAnd(b.CreateAnd(e.lt(x, e.f(0.0)), e.gt(x, e.f(-inf))), b.CreateNot(yInt));
  res = e.select(badBase, e.f(std::numeric_limits<double>::quiet_NaN()), res);
  // pow(x, +-0) = 1, pow(1, y) = 1, pow(-1, +-inf) = 1, NaN arguments or not.
  llvm::Value* one = b.CreateOr(e.eq(y, e.f(0.0)), e.eq(x, e.f(1.0)));
  one = b.CreateOr(one, b.CreateAnd(e.eq(x, e.f(-1.0)), e.eq(e.fabs(y), e.f(inf))));
  return e.select(one, e.f(1.0), res);
}

// ---- dispatch ---------------------------------------------------------------------

llvm::Value* emitVectorMath(llvm::IRBuilderBase& b, ir::OpCode op, llvm::ArrayRef<llvm::Value*> v) {
  using ir::OpCode;
  TS_ASSERT(!v.empty() && v[0] != nullptr, std::string("vector math: ") + ir::opName(op) + " without an operand");
  const bool f64 = v[0]->getType()->getScalarType()->isDoubleTy();
  using Unary = llvm::Value* (*)(llvm::IRBuilderBase&, llvm::Value*);
  auto pick = [&](Unary f32fn, Unary f64fn) { return (f64 ? f64fn : f32fn)(b, v[0]); };
  switch (op) {
    case OpCode::Exp: return pick(emitExpF32, emitExpF64);
    case OpCode::Exp2: return pick(emitExp2F32, emitExp2F64);
    case OpCode::Log: return pick(emitLogF32, emitLogF64);
    case OpCode::Log2: return pick(emitLog2F32, emitLog2F64);
    case OpCode::Tanh: return pick(emitTanhF32, emitTanhF64);
    case OpCode::Erf: return pick(emitErfF32, emitErfF64);
    case OpCode::Sin: return pick(emitSinF32, emitSinF64);
    case OpCode::Cos: return pick(emitCosF32, emitCosF64);
    case OpCode::Sigmoid: return pick(emitSigmoidF32, emitSigmoidF64);
    case OpCode::Log1p: return pick(emitLog1pF32, emitLog1pF64);
    case OpCode::Expm1: return pick(emitExpm1F32, emitExpm1F64);
    case OpCode::Pow:
      TS_ASSERT(v.size() == 2, "vector math: pow takes two operands");
      return f64 ? emitPowF64(b, v[0], v[1]) : emitPowF32(b, v[0], v[1]);
    default: break;
  }
  TS_UNREACHABLE(std::string("vector math: no emitter for ") + ir::opName(op));
}

}  // namespace tessera::codegen

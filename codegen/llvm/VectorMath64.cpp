// Vector double-precision math as LLVM IR: the f64 half of VectorMath.h,
// written like the f32 half (range reduction by exact floating-point
// tricks, polynomials in FMA Horner form, the encoding handled as an i64)
// with double-word arithmetic where a result needs more than 53 bits on
// the way (sin/cos reduction, pow's logarithm).
//
// Coefficient provenance: the minimax polynomials were fitted for this
// library by scripts/math-coefficients.py (names in the comments); pow's
// logarithm uses the exact atanh series 2/(2k+1). docs/math.md has the
// measured errors.
#include <limits>

#include "codegen/llvm/VectorMath.h"
#include "codegen/llvm/VectorMathEmit.h"

namespace tessera::codegen {

using vmath::Emit;
using vmath::Pair;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with 42 significant bits so that k * kLn2Hi
// is exact for |k| < 2^11 (every exponent of a double).
constexpr double kLn2Hi = 0x1.62e42fefa38p-1, kLn2Lo = 0x1.ef35793c76730p-45;
constexpr double kLog2e = 0x1.71547652b82fep+0;
// pi/2 = kPio2[0] + kPio2[1] + kPio2[2] (each the rounding of the rest).
constexpr double kPio2[3] = {0x1.921fb54442d18p+0, 0x1.1a62633145c07p-54, -0x1.f1976b7ed8fbcp-110};
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;

// ---- exp and friends ------------------------------------------------------

/// e^r - 1 for |r| <= ln2/2 (a little more): r + r^2 E(r), minimax
/// (expm1_64), relative error 2^-59.7.
llvm::Value* expm1Tail(Emit& e, llvm::Value* r) {
  return e.horner(r, {1.6091222676121259e-10, 2.0925031338303149e-09, 2.5052055914247923e-08, 2.7557240504023286e-07,
                      2.7557319265455732e-06, 2.4801587363803694e-05, 0.00019841269841253714, 0.0013888888888864692,
                      0.0083333333333333367, 0.041666666666666706, 0.16666666666666666, 0.5});
}
llvm::Value* expm1Poly(Emit& e, llvm::Value* r) { return e.fma(e.mul(r, r), expm1Tail(e, r), r); }

/// x = n ln2 + r, |r| <= ln2/2: n as a double and an i64, r rounded once
/// (x - n * kLn2Hi is exact). x must be clamped to [-1100, 1100] (or NaN).
/// (the reduction) with r's rounding error carried as rlo.
struct ExpReduced {
  llvm::Value* nf;
  llvm::Value* n;
  llvm::Value* r;
  llvm::Value* rlo;
};
ExpReduced expReduce(Emit& e, llvm::Value* x) {
  auto [nf, n] = e.roundToInt(x, e.f(kLog2e));
  llvm::Value* r1 = e.fma(nf, e.f(-kLn2Hi), x);  // exact
  Pair r = e.twoSum(r1, e.neg(e.mul(nf, e.f(kLn2Lo))));
  return {nf, n, r.hi, r.lo};
}

/// e^(r + rlo) - 1 = p + rlo (1 + p), p = e^r - 1.
llvm::Value* expm1Reduced(Emit& e, const ExpReduced& red) {
  llvm::Value* p = expm1Poly(e, red.r);
  return e.add(p, e.fma(red.rlo, p, red.rlo));
}

/// e^x with gradual underflow exact: x > ln(DBL_MAX) gives inf, below
/// ln(2^-1075) +0, NaN stays NaN.
/// With `lo`, also the rounding error of 1 + (e^r - 1), scaled alike.
llvm::Value* expCore(Emit& e, llvm::Value* x, llvm::Value** lo = nullptr) {
  ExpReduced red = expReduce(e, e.clampKeepNaN(x, -746.0, 710.0));
  Pair y = e.fastTwoSum(e.f(1.0), expm1Reduced(e, red));
  if (lo) *lo = e.scaleByPow2(y.lo, red.n);
  return e.scaleByPow2(y.hi, red.n);
}

// ---- log ----------------------------------------------------------------------

/// x > 0 (denormals included) as 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)),
/// with s = f / (2 + f), z = s^2, hfsq = f^2 / 2 and R(z) such that
/// ln(1 + f) = f - hfsq + s (hfsq + z R(z)) (minimax log64, 2^-63.7).
struct LogParts {
  llvm::Value* f;
  llvm::Value* k;
  llvm::Value* s;
  llvm::Value* hfsq;
  llvm::Value* zr;  // z R(z)
};
LogParts logCore(Emit& e, llvm::Value* x) {
  auto& b = e.b();
  llvm::Value* den = e.lt(x, e.f(0x1p-1022));
  llvm::Value* xs = e.select(den, e.mul(x, e.f(0x1p54)), x);
  llvm::Value* ix = e.asInt(xs);
  constexpr int64_t kSqrtHalfBits = 0x3fe6a09e667f3bcd;
  llvm::Value* tmp = b.CreateSub(ix, e.i(kSqrtHalfBits));
  llvm::Value* ki = b.CreateAdd(b.CreateAShr(tmp, e.i(52)), e.select(den, e.i(-54), e.i(0)));
  llvm::Value* iz = b.CreateSub(ix, b.CreateAnd(tmp, e.i(static_cast<int64_t>(0xfff0000000000000ull))));
  llvm::Value* f = e.sub(e.asFloat(iz), e.f(1.0));  // exact
  llvm::Value* s = e.div(f, e.add(e.f(2.0), f));
  llvm::Value* z = e.mul(s, s);
  llvm::Value* R = e.horner(z, {0.13262702644004837, 0.13249344864565712, 0.15387097124658153, 0.18181776371430503,
                                0.22222222623584881, 0.28571428569371526, 0.40000000000004776, 0.66666666666666663});
  return {f, b.CreateSIToFP(ki, e.fty()), s, e.mul(e.mul(f, f), e.f(0.5)), e.mul(z, R)};
}

/// ln(2^k (1 + f)) + c for a small correction c (log1p), most significant
/// parts last: k ln2_hi + (f - (hfsq - (s (hfsq + zR) + (k ln2_lo + c)))).
llvm::Value* logFinish(Emit& e, const LogParts& L, llvm::Value* c) {
  llvm::Value* t = e.fma(L.k, e.f(kLn2Lo), c);
  t = e.fma(L.s, e.add(L.hfsq, L.zr), t);
  return e.fma(L.k, e.f(kLn2Hi), e.sub(L.f, e.sub(L.hfsq, t)));
}

/// IEEE special values of log/log2/log1p on their argument x (u for log1p).
llvm::Value* logSpecials(Emit& e, llvm::Value* x, llvm::Value* r) {
  auto& b = e.b();
  r = e.select(b.CreateFCmpUEQ(x, e.f(kInf)), x, r);
  r = e.select(e.lt(x, e.f(0.0)), e.f(kNaN), r);
  return e.select(e.eq(x, e.f(0.0)), e.f(-kInf), r);
}

// ---- sin, cos ------------------------------------------------------------------

/// |x| = q pi/2 + (rh + rl), |rh + rl| <= pi/4 (+ a little); q an i64.
struct Quadrant {
  llvm::Value* rh;
  llvm::Value* rl;
  llvm::Value* q;
};

/// Payne-Hanek reduction of a finite a >= 2^-10: a's 53-bit mantissa times a
/// 192-bit window of 2/pi chosen by a's exponent (64-bit words, i128
/// products); q + r/(pi/2) exact to 2^-126 before the final roundings.
/// Well defined (junk, no poison) for the lanes that do not need it.
Quadrant reducePayneHanekF64(Emit& e, llvm::Value* a) {
  auto& b = e.b();
  llvm::Type* i64 = e.ity();
  llvm::Type* i128 = e.shaped(b.getInt128Ty());
  auto c64 = [&](uint64_t v) { return e.iOf(b.getInt64Ty(), static_cast<int64_t>(v)); };
  auto c128 = [&](uint64_t v) { return llvm::ConstantInt::get(i128, v); };
  llvm::Value* bits = e.asInt(a);
  // a = m 2^E, E = exponent - 1075; the window starts at bit E - 1 of 2/pi
  // (see the f32 reduction), at position E + 62 of 0 . w1 w2 ... (a zero
  // word first), i.e. p0 = biased exponent - 1013.
  llvm::Value* m = b.CreateOr(b.CreateAnd(bits, c64((1ull << 52) - 1)), c64(1ull << 52));
  llvm::Value* p0 = b.CreateSub(b.CreateLShr(bits, c64(52)), c64(1013));
  llvm::Value* word = b.CreateAShr(p0, c64(6));
  llvm::Value* shift = b.CreateAnd(p0, c64(63));
  // S_j = W[word + j], j = 0..3, word in [0, 16] (a in [2^30, 2^1024)).
  auto W = [&](int k) { return c64(k == 0 ? 0u : vmath::kTwoOverPi64[k - 1]); };
  llvm::Value* S[4];
  for (int j = 0; j < 4; ++j) {
    llvm::Value* v = W(j + 16);
    for (int w = 15; w >= 0; --w) v = b.CreateSelect(b.CreateICmpEQ(word, c64(w)), W(j + w), v);
    S[j] = v;
  }
  llvm::Value* m128 = b.CreateZExt(m, i128);
  llvm::Value* P[3];
  for (int k = 0; k < 3; ++k) {
    llvm::Value* v = b.CreateIntrinsic(llvm::Intrinsic::fshl, {i64}, {S[k], S[k + 1], shift});
    P[k] = b.CreateMul(m128, b.CreateZExt(v, i128));
  }
  // m V: bit 190 has weight 1 in a * 2/pi; bits 191..190 are q mod 4, the
  // next 126 bits the fraction (62 in `top`, 64 in `t`).
  llvm::Value* t = b.CreateAdd(P[1], b.CreateLShr(P[2], c128(64)));
  llvm::Value* top = b.CreateTrunc(b.CreateAdd(P[0], b.CreateLShr(t, c128(64))), i64);
  llvm::Value* lo = b.CreateTrunc(t, i64);
  llvm::Value* q = b.CreateAnd(b.CreateLShr(top, c64(62)), c64(3));
  llvm::Value* hi = b.CreateAnd(top, c64((1ull << 62) - 1));
  llvm::Value* half = b.CreateLShr(hi, c64(61));
  q = b.CreateAdd(q, half);
  hi = b.CreateSub(hi, b.CreateShl(half, c64(62)));  // signed: the fraction is hi 2^-62 + lo 2^-126
  llvm::Value* dh = b.CreateSIToFP(hi, e.fty());
  llvm::Value* rem = b.CreateSub(hi, b.CreateFPToSI(dh, i64));
  llvm::Value* fl = e.fma(b.CreateSIToFP(rem, e.fty()), e.f(0x1p64), b.CreateUIToFP(lo, e.fty()));
  Pair fr = e.fastTwoSum(e.mul(dh, e.f(0x1p-62)), e.mul(fl, e.f(0x1p-126)));
  // r = fraction * pi/2 as a pair.
  Pair r = e.twoProd(fr.hi, e.f(kPio2[0]));
  llvm::Value* rl = e.add(r.lo, e.fma(fr.hi, e.f(kPio2[1]), e.mul(fr.lo, e.f(kPio2[0]))));
  Pair rr = e.fastTwoSum(r.hi, rl);
  return {rr.hi, rr.lo, q};
}

// Below this, the reduction by pi/2 as three doubles is exact to far below
// an ulp of the result (the error is about q 2^-160); above, Payne-Hanek.
constexpr double kSinCodyWaiteLimitF64 = 0x1p30;

Quadrant reduceF64(Emit& e, llvm::Value* a) {
  auto [qf, q] = e.roundToInt(a, e.f(kTwoOverPi));
  // a - q P1 is exact (q P1 is a multiple of 2^-52 within 1 of a); q P2 is
  // taken exactly as a pair, q P3 rounded; the sum as a pair.
  llvm::Value* y = e.fma(qf, e.f(-kPio2[0]), a);
  Pair b2 = e.twoProd(qf, e.f(kPio2[1]));
  llvm::Value* c = e.mul(qf, e.f(kPio2[2]));
  Pair s = e.twoSum(y, e.neg(b2.hi));
  llvm::Value* sl = e.sub(e.sub(s.lo, b2.lo), c);
  Pair r = e.fastTwoSum(s.hi, sl);
  llvm::Value* big = e.b().CreateAnd(e.gt(a, e.f(kSinCodyWaiteLimitF64)), e.lt(a, e.f(kInf)));
  std::vector<llvm::Value*> out = e.ifAny(big, {r.hi, r.lo, q}, [&] {
    Quadrant ph = reducePayneHanekF64(e, a);
    return std::vector<llvm::Value*>{ph.rh, ph.rl, ph.q};
  });
  return {out[0], out[1], out[2]};
}

/// sin and cos of rh + rl (|rh| <= pi/4 + a little), minimax (sin64, cos64).
llvm::Value* sinPolyF64(Emit& e, llvm::Value* rh, llvm::Value* rl, llvm::Value* z) {
  llvm::Value* S =
      e.horner(z, {-7.5780921016087422e-13, 1.6058359102785602e-10, -2.505210490218385e-08, 2.7557319214415475e-06,
                   -0.00019841269841256205, 0.0083333333333333245, -0.16666666666666666});
  // sin(rh + rl) = sin rh + rl cos rh: rh + (rh z S + rl (1 - z/2)).
  llvm::Value* tail = e.fma(e.mul(rh, z), S, e.fma(e.mul(z, e.f(-0.5)), rl, rl));
  return e.add(rh, tail);
}
llvm::Value* cosPolyF64(Emit& e, llvm::Value* rh, llvm::Value* rl, llvm::Value* z) {
  llvm::Value* C =
      e.horner(z, {4.7410876694987571e-14, -1.1470364972071443e-11, 2.0876755051483624e-09, -2.7557319218665378e-07,
                   2.4801587301579722e-05, -0.0013888888888888885, 0.041666666666666664});
  // cos(rh + rl) = cos rh - rl sin rh; w = 1 - z/2 rounded, its error
  // (1 - w) - z/2 exact, added back with the small terms.
  llvm::Value* hz = e.mul(z, e.f(0.5));
  llvm::Value* w = e.sub(e.f(1.0), hz);
  llvm::Value* small = e.fma(e.mul(z, z), C, e.neg(e.mul(rh, rl)));
  return e.add(w, e.add(e.sub(e.sub(e.f(1.0), w), hz), small));
}

llvm::Value* sinCosF64(Emit& e, llvm::Value* x, bool cos) {
  auto& b = e.b();
  llvm::Value* a = e.fabs(x);
  Quadrant red = reduceF64(e, a);
  llvm::Value* q = cos ? b.CreateAdd(red.q, e.i(1)) : red.q;
  llvm::Value* z = e.mul(red.rh, red.rh);
  llvm::Value* sv = sinPolyF64(e, red.rh, red.rl, z);
  llvm::Value* cv = cosPolyF64(e, red.rh, red.rl, z);
  llvm::Value* odd = b.CreateICmpNE(b.CreateAnd(q, e.i(1)), e.i(0));
  llvm::Value* v = e.select(odd, cv, sv);
  llvm::Value* negate = b.CreateICmpNE(b.CreateAnd(q, e.i(2)), e.i(0));
  v = e.select(negate, e.neg(v), v);
  return cos ? v : e.xorSign(v, x);
}

}  // namespace

// ---- the entry points -----------------------------------------------------------

llvm::Value* emitExpF64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "exp", true);
  return expCore(e, x);
}

llvm::Value* emitExp2F64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "exp2", true);
  llvm::Value* xc = e.clampKeepNaN(x, -1076.0, 1025.0);
  auto [nf, n] = e.roundToInt(xc);
  llvm::Value* r = e.sub(xc, nf);  // exact, |r| <= 1/2
  // 2^r = 1 + r Q(r), minimax (exp2_64).
  llvm::Value* Q = e.horner(r, {1.3663109435116092e-12, 2.5736849972107028e-11, 4.4455736546384692e-10,
                                7.0548919653373145e-09, 1.0178085887487025e-07, 1.3215486822646687e-06,
                                1.5252733804247854e-05, 0.00015403530393354466, 0.0013333558146428307,
                                0.0096181291076284873, 0.055504108664821583, 0.24022650695910072, 0.69314718055994529});
  return e.scaleByPow2(e.fma(r, Q, e.f(1.0)), n);
}

llvm::Value* emitExpm1F64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "expm1", true);
  // Below -40, e^x < 2^-57 and e^x - 1 rounds to -1; above 710 it
  // overflows. The combination follows the f32 version (VectorMath.cpp).
  ExpReduced red = expReduce(e, e.clampKeepNaN(x, -40.0, 710.0));
  // e^r - 1 = r + q as a pair, q = r^2 E(r) + rlo (1 + r).
  llvm::Value* r = red.r;
  Pair p = e.twoSum(r, e.fma(e.mul(r, r), expm1Tail(e, r), e.fma(red.rlo, r, red.rlo)));
  llvm::Value* res = vmath::expm1Combine(e, p, red.n, 53);
  return e.select(e.lt(e.fabs(x), e.f(0x1p-54)), x, res);
}

llvm::Value* emitLogF64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "log", true);
  LogParts L = logCore(e, x);
  return logSpecials(e, x, logFinish(e, L, e.f(0.0)));
}

llvm::Value* emitLog2F64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "log2", true);
  LogParts L = logCore(e, x);
  // ln(1 + f) = hi + lo with hi = f - hfsq cut to its top 21 bits, so that
  // hi * kIvln2Hi (32 bits) is exact; then k + (hi + lo) log2(e), the
  // integer added last with its rounding error carried.
  constexpr double kIvln2Hi = 0x1.71547652p+0;  // 1/ln2 to 32 bits
  constexpr double kIvln2Lo = 0x1.705fc2eefa200p-33;
  llvm::Value* hi = e.sub(L.f, L.hfsq);
  hi = e.asFloat(b.CreateAnd(e.asInt(hi), e.i(static_cast<int64_t>(0xffffffff00000000ull))));
  llvm::Value* lo = e.add(e.sub(e.sub(L.f, hi), L.hfsq), e.mul(L.s, e.add(L.hfsq, L.zr)));
  llvm::Value* vhi = e.mul(hi, e.f(kIvln2Hi));
  llvm::Value* vlo = e.fma(e.add(lo, hi), e.f(kIvln2Lo), e.mul(lo, e.f(kIvln2Hi)));
  Pair w = e.fastTwoSum(L.k, vhi);  // |k| >= 1 > |vhi|, or k = 0
  return logSpecials(e, x, e.add(e.add(vlo, w.lo), w.hi));
}

llvm::Value* emitLog1pF64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "log1p", true);
  Pair u = e.twoSum(e.f(1.0), x);
  LogParts L = logCore(e, u.hi);
  llvm::Value* r = logSpecials(e, u.hi, logFinish(e, L, e.div(u.lo, u.hi)));
  return e.select(e.eq(x, e.f(0.0)), x, r);
}

llvm::Value* emitTanhF64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "tanh", true);
  llvm::Value* a = e.fabs(x);
  // |x| < 0.625: x + x^3 S(x^2), minimax (tanh64); beyond, 1 - 2/(e^2|x| + 1).
  llvm::Value* z = e.mul(a, a);
  llvm::Value* S =
      e.horner(z, {-1.6023110205808691e-05, 7.7089604298622935e-05, -0.00022856585449329672, 0.00058634766858990401,
                   -0.0014549798765500078, 0.0035919960705730301, -0.0088632222984358893, 0.021869487718114897,
                   -0.053968253939909443, 0.133333333332876, -0.33333333333333115});
  llvm::Value* small = e.fma(e.mul(a, z), S, a);
  llvm::Value* ex = expCore(e, e.add(a, a));
  llvm::Value* big = e.sub(e.f(1.0), e.div(e.f(2.0), e.add(ex, e.f(1.0))));
  return e.copysign(e.select(e.lt(a, e.f(0.625)), small, big), x);
}

llvm::Value* emitErfF64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "erf", true);
  llvm::Value* a = e.fabs(x);
  // |x| < 1: x + x P(x^2), minimax (erf64_near).
  llvm::Value* z = e.mul(a, a);
  llvm::Value* P = e.horner(z, {5.9606859770246848e-11, -1.1374955378921817e-09, 1.46603284160481e-08,
                                -1.6350396141268877e-07, 1.6461008466260375e-06, -1.4925595771189129e-05,
                                0.00012055331132901641, -0.00085483269814236524, 0.0052239776248283899,
                                -0.026866170645077871, 0.11283791670954885, -0.37612638903183748, 0.12837916709551259});
  llvm::Value* near = e.fma(a, P, a);
  // 1 <= |x|: 1 - erfc, erfc(t) = erfc(t0) exp(v Q(v)), v = t - t0, with
  // t0 = 1 on [1, 2.5) and 2.5 on [2.5, 6] (erf64_far_a/b; beyond 6 erfc
  // is below 2^-54 and the result rounds to 1). Q is evaluated in the
  // centred variable v - 0.75 (v - 1.75) with per-piece coefficients.
  llvm::Value* t = e.clampKeepNaN(a, 1.0, 6.0);
  llvm::Value* pa = e.lt(t, e.f(2.5));
  llvm::Value* v = e.sub(t, e.select(pa, e.f(1.0), e.f(2.5)));  // exact
  llvm::Value* u = e.sub(v, e.select(pa, e.f(0.75), e.f(1.75)));
  static constexpr double kA[] = {3.6583183091931685e-12,  -2.9744667298388486e-11, 1.2745549061107181e-10,
                                  -3.7429702844152131e-10, 5.2452309077228299e-10,  2.4054603497637616e-09,
                                  -2.4883064849131917e-08, 1.3180062703495904e-07,  -5.0077840162582599e-07,
                                  1.2664356554384184e-06,  -1.2230753458803644e-07, -2.3649731258550244e-05,
                                  0.00019226036301106319,  -0.0011082939213489719,  0.0054561509398883528,
                                  -0.024630953586553306,   -0.89146695130682163,    -3.2910106873332992};
  static constexpr double kB[] = {-1.7621491449869524e-15, 1.4272124274506806e-14,  -6.1519445329374146e-14,
                                  2.4916522346905353e-13,  -8.2866992897876581e-13, -7.1194245177857018e-13,
                                  4.5951080122951367e-11,  -5.5005657139342708e-10, 5.0135510516491966e-09,
                                  -4.0318390803915909e-08, 3.0075443924312397e-07,  -2.1330521807669554e-06,
                                  1.4612092882976567e-05,  -9.7950997530558937e-05, 0.00065194300216247548,
                                  -0.0044046445330898822,  -0.9683764484639793,     -7.029116930709967};
  static_assert(std::size(kA) == std::size(kB));
  llvm::Value* Q = e.hornerSel(u, std::size(kA), [&](size_t k) { return e.select(pa, e.f(kA[k]), e.f(kB[k])); });
  llvm::Value* erfc0 = e.select(pa, e.f(0.15729920705028513), e.f(0.0004069520174449589));
  llvm::Value* far = e.fma(e.neg(erfc0), expCore(e, e.mul(v, Q)), e.f(1.0));
  return e.copysign(e.select(e.lt(a, e.f(1.0)), near, far), x);
}

llvm::Value* emitSinF64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "sin", true);
  return sinCosF64(e, x, false);
}

llvm::Value* emitCosF64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "cos", true);
  return sinCosF64(e, x, true);
}

llvm::Value* emitSigmoidF64(llvm::IRBuilderBase& b, llvm::Value* x) {
  Emit e(b, x, "sigmoid", true);
  llvm::Value* lo;
  llvm::Value* hi = expCore(e, e.neg(e.fabs(x)), &lo);
  return vmath::sigmoidFrom(e, x, {hi, lo});
}

llvm::Value* emitPowF64(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y) {
  Emit e(b, x, "pow", true);
  TS_ASSERT(y->getType() == x->getType(), "pow: operand types differ");
  // |x|^y = e^(y ln|x|); y ln|x| reaches +-745 and must be good to 2^-54
  // absolute, so ln|x| is a pair good to about 2^-66 relative: 2^k (1 + f)
  // with s = f / (2 + f) as a pair and ln(1+f) = 2s + (2/3) s^3 + s^5 Q(s^2)
  // (the atanh series, exact coefficients), the first two terms as pairs.
  llvm::Value* a = e.fabs(x);
  llvm::Value* den = e.lt(a, e.f(0x1p-1022));
  llvm::Value* as = e.select(den, e.mul(a, e.f(0x1p54)), a);
  llvm::Value* ix = e.asInt(as);
  llvm::Value* tmp = b.CreateSub(ix, e.i(0x3fe6a09e667f3bcd));
  llvm::Value* k = b.CreateAdd(b.CreateAShr(tmp, e.i(52)), e.select(den, e.i(-54), e.i(0)));
  llvm::Value* mant = e.asFloat(b.CreateSub(ix, b.CreateAnd(tmp, e.i(static_cast<int64_t>(0xfff0000000000000ull)))));
  llvm::Value* f = e.sub(mant, e.f(1.0));
  llvm::Value* d = e.add(e.f(2.0), f);
  llvm::Value* dl = e.sub(f, e.sub(d, e.f(2.0)));
  llvm::Value* sh = e.div(f, d);
  llvm::Value* sl = e.div(e.fma(e.neg(sh), dl, e.fma(e.neg(sh), d, f)), d);
  Pair z = e.twoProd(sh, sh);
  Pair s3 = e.twoProd(z.hi, sh);
  llvm::Value* s3l = e.add(s3.lo, e.fma(z.lo, sh, e.mul(e.mul(e.f(3.0), z.hi), sl)));
  constexpr double kTwoThirdsHi = 0x1.5555555555555p-1, kTwoThirdsLo = 0x1.5555555555555p-55;
  Pair p3 = e.twoProd(e.f(kTwoThirdsHi), s3.hi);
  llvm::Value* p3l = e.add(p3.lo, e.fma(e.f(kTwoThirdsHi), s3l, e.mul(e.f(kTwoThirdsLo), s3.hi)));
  llvm::Value* Q = e.horner(z.hi, {2.0 / 25, 2.0 / 23, 2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11,
                                   2.0 / 9, 2.0 / 7, 2.0 / 5});
  llvm::Value* tail = e.mul(e.mul(s3.hi, z.hi), Q);
  Pair A = e.fastTwoSum(e.add(sh, sh), p3.hi);
  Pair ln = e.fastTwoSum(A.hi, e.add(e.add(A.lo, e.add(sl, sl)), e.add(p3l, tail)));
  // + k ln2 (k kLn2Hi exact).
  llvm::Value* kf = b.CreateSIToFP(k, e.fty());
  Pair L = e.twoSum(e.mul(kf, e.f(kLn2Hi)), ln.hi);
  L = e.fastTwoSum(L.hi, e.add(L.lo, e.fma(kf, e.f(kLn2Lo), ln.lo)));
  llvm::Value* Lh = e.select(e.eq(a, e.f(0.0)), e.f(-kInf), e.select(e.eq(a, e.f(kInf)), e.f(kInf), L.hi));
  Lh = e.select(e.isNaN(a), a, Lh);
  // t = y ln|x| as a pair, then e^t: the reduction keeps t's low part and
  // the rounding of r as rlo, e^(r + rlo) = e^r (1 + rlo).
  Pair t = e.twoProd(y, Lh);
  llvm::Value* tl = e.fma(y, L.lo, t.lo);
  llvm::Value* inRange = e.le(e.fabs(t.hi), e.f(746.0));
  tl = e.select(inRange, tl, e.f(0.0));
  llvm::Value* th = e.clampKeepNaN(t.hi, -746.0, 710.0);
  auto [nf, n] = e.roundToInt(th, e.f(kLog2e));
  llvm::Value* r1 = e.fma(nf, e.f(-kLn2Hi), th);  // exact
  Pair r2 = e.twoSum(r1, e.neg(e.mul(nf, e.f(kLn2Lo))));
  Pair r = e.twoSum(r2.hi, tl);
  llvm::Value* rlo = e.add(r2.lo, r.lo);
  llvm::Value* p = expm1Poly(e, r.hi);
  llvm::Value* yv = e.add(e.f(1.0), e.fma(rlo, p, e.add(p, rlo)));
  llvm::Value* mag = e.scaleByPow2(yv, n);
  llvm::Value* yInt = e.eq(b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, y), y);
  llvm::Value* halfY = e.mul(y, e.f(0.5));
  llvm::Value* yOdd = b.CreateAnd(yInt, b.CreateFCmpUNE(b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, halfY), halfY));
  llvm::Value* xNeg = b.CreateICmpSLT(e.asInt(x), e.i(0));
  llvm::Value* res = e.select(b.CreateAnd(xNeg, yOdd), e.neg(mag), mag);
  llvm::Value* badBase = b.CreateAnd(b.CreateAnd(e.lt(x, e.f(0.0)), e.gt(x, e.f(-kInf))), b.CreateNot(yInt));
  res = e.select(badBase, e.f(kNaN), res);
  llvm::Value* one = b.CreateOr(e.eq(y, e.f(0.0)), e.eq(x, e.f(1.0)));
  one = b.CreateOr(one, b.CreateAnd(e.eq(x, e.f(-1.0)), e.eq(e.fabs(y), e.f(kInf))));
  return e.select(one, e.f(1.0), res);
}

}  // namespace tessera::codegen

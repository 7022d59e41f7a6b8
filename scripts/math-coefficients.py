#!/usr/bin/env python3
"""Fits the polynomial coefficients of codegen/llvm/VectorMath*.cpp that are
not Taylor coefficients or inherited from Cephes (docs/math.md says which is
which), and prints them as C++ initializer lists, highest degree first (the
order Emit::horner takes).

Every fit is a weighted minimax (Remez exchange) in 256-bit arithmetic with
mpmath; the weight makes the error the one that matters for the final result
(relative error of the function, or absolute error of erf for the erfc
pieces). The printed bound is the weighted error with the coefficients
rounded to the target type, checked on a 20000-point grid.

    python3 scripts/math-coefficients.py            # all fits (about a minute)
    python3 scripts/math-coefficients.py sin64 erf64_far
"""
import struct
import sys

import mpmath as mp

mp.mp.prec = 256
TINY = mp.mpf(2) ** -80


def remez(f, a, b, n, w, iters=40, grid=6000):
    """Coefficients c[0..n] (ascending) of the degree-n polynomial minimising
    max |w(x) (f(x) - p(x))| over [a, b], and that maximum."""
    a, b = mp.mpf(a), mp.mpf(b)
    m = n + 2
    xs = [(a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * i / (m - 1)) for i in range(m)]
    pts = [a + (b - a) * i / grid for i in range(grid + 1)]
    cache = {}

    def fw(x):
        if x not in cache:
            cache[x] = (f(x), w(x))
        return cache[x]

    best = None
    for _ in range(iters):
        A = mp.matrix(m, m)
        y = mp.matrix(m, 1)
        for i, x in enumerate(xs):
            fx, wx = fw(x)
            for j in range(n + 1):
                A[i, j] = x**j
            A[i, n + 1] = (-1) ** i / wx
            y[i] = fx
        sol = mp.lu_solve(A, y)
        c = [sol[j] for j in range(n + 1)]
        ev = [fw(x)[1] * (fw(x)[0] - mp.polyval(c[::-1], x)) for x in pts]
        ext = []
        for i, e in enumerate(ev):
            l = ev[i - 1] if i > 0 else None
            r = ev[i + 1] if i + 1 < len(ev) else None
            if (l is None or abs(e) >= abs(l)) and (r is None or abs(e) >= abs(r)):
                if ext and mp.sign(ext[-1][1]) == mp.sign(e):
                    if abs(e) > abs(ext[-1][1]):
                        ext[-1] = (pts[i], e)
                else:
                    ext.append((pts[i], e))
        while len(ext) > m:
            ext.pop(0 if abs(ext[0][1]) < abs(ext[-1][1]) else -1)
        maxe = max(abs(e) for e in ev)
        best = (c, maxe)
        if len(ext) < m:
            break
        mine = min(abs(e) for _, e in ext)
        xs = [x for x, _ in ext]
        if maxe / mine - 1 < mp.mpf(2) ** -24:
            break
    return best


def to_f32(x):
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def to_f64(x):
    return float(x)


def rounded_error(c, f, a, b, w, rnd, grid=20000):
    cr = [mp.mpf(rnd(v)) for v in c]
    a, b = mp.mpf(a), mp.mpf(b)
    m = 0
    for i in range(grid + 1):
        x = a + (b - a) * i / grid
        m = max(m, abs(w(x) * (f(x) - mp.polyval(cr[::-1], x))))
    return [rnd(v) for v in c], m


def series_or(f, small):
    return lambda x: small(x) if abs(x) < TINY else f(x)


PIO4 = mp.pi / 4
LN2H = mp.log(2) / 2
SMAX = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)  # |s| = |f / (2 + f)| for 1 + f in [sqrt(1/2), sqrt(2))


def sin_S(z):  # sin r = r + r^3 S(r^2)
    r = mp.sqrt(z)
    return (mp.sin(r) - r) / r**3


def cos_C(z):  # cos r = 1 - r^2/2 + r^4 C(r^2)
    return (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z**2


def expm1_E(r):  # e^r = 1 + r + r^2 E(r)
    return (mp.exp(r) - 1 - r) / r**2


def exp2_Q(r):  # 2^r = 1 + r Q(r)
    return (mp.power(2, r) - 1) / r


def log_R(z):  # ln((1+s)/(1-s)) = 2s + s z R(z), z = s^2
    s = mp.sqrt(z)
    return (mp.log((1 + s) / (1 - s)) - 2 * s) / (s * z)


def erf_P(z):  # erf x = x + x P(x^2)
    x = mp.sqrt(z)
    return mp.erf(x) / x - 1


FITS = {
    # name: (function, interval, degree, weight, rounding, what)
    "sin32": (series_or(sin_S, lambda z: -mp.mpf(1) / 6 + z / 120), (0, PIO4**2), 3,
              lambda z: (z + TINY) ** 1.5 / mp.sin(mp.sqrt(z) + TINY), to_f32, "sin r = r + r^3 S(r^2), |r| <= pi/4"),
    "cos32": (series_or(cos_C, lambda z: mp.mpf(1) / 24 - z / 720), (0, PIO4**2), 2,
              lambda z: (z + TINY)**2 / mp.cos(mp.sqrt(z)), to_f32, "cos r = 1 - r^2/2 + r^4 C(r^2), |r| <= pi/4"),
    "expm1_32": (series_or(expm1_E, lambda r: mp.mpf(1) / 2 + r / 6), (-LN2H, LN2H), 5,
                 lambda r: abs(r) + TINY, to_f32, "e^r - 1 = r + r^2 E(r), |r| <= ln2/2, relative to r"),
    "sin64": (series_or(sin_S, lambda z: -mp.mpf(1) / 6 + z / 120), (0, PIO4**2), 6,
              lambda z: (z + TINY) ** 1.5 / mp.sin(mp.sqrt(z) + TINY), to_f64, "sin r = r + r^3 S(r^2), |r| <= pi/4"),
    "cos64": (series_or(cos_C, lambda z: mp.mpf(1) / 24 - z / 720), (0, PIO4**2), 6,
              lambda z: (z + TINY)**2 / mp.cos(mp.sqrt(z)), to_f64, "cos r = 1 - r^2/2 + r^4 C(r^2), |r| <= pi/4"),
    "expm1_64": (series_or(expm1_E, lambda r: mp.mpf(1) / 2 + r / 6), (-LN2H, LN2H), 11,
                 lambda r: abs(r) + TINY, to_f64, "e^r - 1 = r + r^2 E(r), |r| <= ln2/2, relative to r (also exp)"),
    "exp2_64": (series_or(exp2_Q, lambda r: mp.log(2) + r * mp.log(2) ** 2 / 2), (-0.5, 0.5), 12,
                lambda r: (abs(r) + TINY) / mp.power(2, r), to_f64, "2^r = 1 + r Q(r), |r| <= 1/2"),
    "log64": (series_or(log_R, lambda z: mp.mpf(2) / 3 + 2 * z / 5), (0, SMAX**2), 7,
              lambda z: (z + TINY) / 2, to_f64, "ln(1+f) = f - f^2/2 + s (f^2/2 + z R(z)), z = s^2, relative"),
    "erf64_near": (series_or(erf_P, lambda z: 2 / mp.sqrt(mp.pi) - 1 - 2 * z / (3 * mp.sqrt(mp.pi))), (0, 1), 12,
                   lambda z: 1, to_f64, "erf x = x + x P(x^2), |x| <= 1, relative"),
}


def erfc_piece(lo, hi, deg):
    # erfc(t) = erfc(lo) * exp(v Q(v)), v = t - lo: Q is fitted in the
    # centred variable u = v - (hi - lo)/2. Only v Q(v) is rounded (no large
    # constant term), and the weight erfc(t) v makes the error the absolute
    # error of erf = 1 - erfc.
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    half = (hi - lo) / 2
    g0 = mp.log(mp.erfc(lo))

    def q(u):
        v = half + u
        if v < TINY:
            return mp.diff(lambda t: mp.log(mp.erfc(t)), lo)
        return (mp.log(mp.erfc(lo + v)) - g0) / v

    return (q, (-half, half), deg, lambda u: mp.erfc(lo + half + u) * (half + u + TINY), to_f64,
            f"erfc t = erfc({float(lo)}) exp(v Q(v)), v = t - {float(lo)} = {float(half)} + u, t in [{float(lo)}, {float(hi)}]; "
            f"erfc({float(lo)}) = {float(mp.erfc(lo))!r}")


def tanh_S(z):  # tanh x = x + x^3 S(x^2)
    x = mp.sqrt(z)
    return (mp.tanh(x) - x) / x**3


FITS["erf64_far_a"] = erfc_piece(1, 2.5, 17)
FITS["erf64_far_b"] = erfc_piece(2.5, 6, 17)
FITS["tanh64"] = (series_or(tanh_S, lambda z: -mp.mpf(1) / 3 + 2 * z / 15), (0, mp.mpf(0.625) ** 2), 10,
                  lambda z: (z + TINY) ** 1.5 / mp.tanh(mp.sqrt(z) + TINY), to_f64,
                  "tanh x = x + x^3 S(x^2), |x| <= 0.625, relative")


def main(names):
    for name in names or FITS:
        f, (a, b), deg, w, rnd, what = FITS[name]
        c, e = remez(f, a, b, deg, w)
        cr, er = rounded_error(c, f, a, b, w, rnd)
        kind = "float" if rnd is to_f32 else "double"
        print(f"// {name}: {what}; degree {deg}, max weighted error 2^{float(mp.log(er, 2)):.1f} "
              f"({kind} coefficients; exact fit 2^{float(mp.log(e, 2)):.1f})")
        fmt = "{:.9g}f" if rnd is to_f32 else "{:.17g}"
        print("{" + ", ".join(fmt.format(v) for v in cr[::-1]) + "}")


if __name__ == "__main__":
    main(sys.argv[1:])

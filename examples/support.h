// What every example shares: deterministic inputs, the comparison against a
// reference, and the example program's main. Header-only because each
// example program links only its own source file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "registry.h"

namespace tessera::examples {

/// Deterministic values in [lo, hi).
/// f16 bits of a float (round to nearest even, the compiler's _Float16) and
/// back: how the examples make f16 inputs and read f16 results.
inline uint16_t toHalf(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
inline float fromHalf(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

inline std::vector<float> randomVector(size_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// Accumulates element checks |got - want| <= bound (NaN fails), keeping the
/// largest errors, the element that came closest to (or furthest past) its
/// own bound, and a description of the first mismatch. `form` states the
/// bound as a formula with its constants, for the report.
class ElementCheck {
 public:
  ElementCheck(double tolerance, std::string what, std::string form) : what_(std::move(what)) {
    r_.ok = true;
    r_.tolerance = tolerance;
    r_.bound = what_ + ": " + std::move(form);
  }
  /// `where` describes the element ("at 7", "at (2, 3)"); called only for
  /// the first mismatch and for a new worst element.
  template <typename Where>
  void operator()(double got, double want, double bound, Where&& where) {
    double err = std::fabs(got - want);
    auto describe = [&] {
      return what_ + " " + where() + ": got " + fmt(got) + ", want " + fmt(want) + ", bound " + fmt(bound);
    };
    if (!(err <= bound)) {  // NaN-safe
      if (r_.ok)
        r_.detail = what_ + ": first mismatch " + where() + ": got " + fmt(got) + ", want " + fmt(want) + " (bound " +
                    fmt(bound) + ")";
      r_.ok = false;
    }
    // A NaN error, or any error against a zero bound, is infinitely far.
    const double fraction = std::isnan(err) ? INFINITY : err == 0 ? 0 : bound > 0 ? err / bound : INFINITY;
    if (fraction > r_.worstFraction || r_.worst.empty()) {
      r_.worstFraction = std::max(r_.worstFraction, fraction);
      r_.worst = describe();
    }
    r_.maxAbsError = std::max(r_.maxAbsError, std::isnan(err) ? INFINITY : err);
    if (std::fabs(want) > 1e-30) r_.maxRelError = std::max(r_.maxRelError, err / std::fabs(want));
  }
  void fail(const std::string& why) {
    if (r_.ok) r_.detail = what_ + ": " + why;
    r_.ok = false;
  }
  const CheckResult& result() const { return r_; }

  /// A number for the report: 6 significant digits.
  static std::string fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
  }

 private:
  std::string what_;
  CheckResult r_;
};

/// |got[i] - want[i]| <= bound(i) for every element.
template <typename Bound>
CheckResult compareWith(const std::vector<float>& got, const std::vector<double>& want, double tolerance,
                        const char* what, const std::string& form, Bound&& bound) {
  ElementCheck check(tolerance, what, form);
  if (got.size() != want.size())
    check.fail(std::to_string(got.size()) + " values, want " + std::to_string(want.size()));
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    check(got[i], want[i], bound(i), [&] { return "at " + std::to_string(i); });
  return check.result();
}

/// |got - want| <= atol + rtol * |want| everywhere.
inline CheckResult compare(const std::vector<float>& got, const std::vector<double>& want, double atol, double rtol,
                           const char* what = "out") {
  return compareWith(got, want, rtol, what,
                     "|got - want| <= " + ElementCheck::fmt(atol) + " + " + ElementCheck::fmt(rtol) + " |want|",
                     [&](size_t i) { return atol + rtol * std::fabs(want[i]); });
}

/// Every element (i, j) of an M x N row-major result: |got(i, j) -
/// want(i, j)| <= bound(i, j, want), mismatches named "at (i, j)".
template <typename Got, typename Want, typename Bound>
void checkMatrix(ElementCheck& check, int64_t M, int64_t N, Got got, Want want, Bound bound) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const double w = want(i, j);
      check(got(i, j), w, bound(i, j, w), [&] { return "at (" + std::to_string(i) + ", " + std::to_string(j) + ")"; });
    }
}

/// The value of bf16 bits (the top half of an f32: exact).
inline float bf16Value(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// The bf16 bits of `f`, rounded to nearest even (f finite): bf16 is the top
/// half of an f32.
inline uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

/// Merges the checks of several outputs.
inline CheckResult merge(CheckResult a, const CheckResult& b) {
  if (a.ok && !b.ok) a.detail = b.detail;
  a.ok = a.ok && b.ok;
  if (b.worstFraction > a.worstFraction || a.worst.empty()) {
    a.worstFraction = std::max(a.worstFraction, b.worstFraction);
    a.worst = b.worst;
  }
  if (!b.bound.empty()) a.bound += (a.bound.empty() ? "" : "; ") + b.bound;
  a.maxAbsError = std::max(a.maxAbsError, b.maxAbsError);
  a.maxRelError = std::max(a.maxRelError, b.maxRelError);
  return a;
}

/// The smallest power of two >= n: the tile width that holds a whole row.
inline int nextPow2(int64_t n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

/// The GEMM epilogue's activation on an f32 tile: ReLU, or GELU in the exact
/// erf form 0.5 y (1 + erf(y / sqrt 2)) (as gemm_f32 and bias_gelu).
inline Tensor applyActivation(const Tensor& y, Activation act) {
  if (act == Activation::ReLU) return tessera::maximum(y, 0.0f);
  if (act == Activation::GELU) return 0.5f * y * (1.0f + tessera::erf(y * 0.70710678118654752440f));
  return y;
}

/// The output-tile loop of the GEMM examples: ts::for_tiles over the M x N
/// output in B's schedule (GemmBlocks::group, ::persistent), body(row,
/// col) with row the tile's BLOCK_M x 1 row indices and col its 1 x BLOCK_N
/// column indices (past M and N where the tile is ragged: mask with them).
/// Launch it on gemmGrid(B, M, N), with Launch::persistent =
/// gemmPersistent(B).
///
/// A warp-specialised K loop (GemmBlocks::warpSpecialized) must be in the
/// kernel's body, not in for_tiles' region (the warp-specialize pass): there
/// program p computes tile p of the row-major numbering, from program_id
/// alone. A program past the last tile has p / tiles-per-row >= the tile
/// rows, so its rows are past M and its masked stores write nothing.
inline Tiles gemmSchedule(const GemmBlocks& B, Int M, Int N, SrcLoc loc = SrcLoc::current()) {
  return Tiles(M, N, B.m, B.n, loc).grouped(B.group, loc).persistent(gemmPersistent(B)).dynamic(gemmDynamic(B));
}
template <typename Body>
void gemmTiles(const GemmBlocks& B, Int M, Int N, Body&& body, SrcLoc loc = SrcLoc::current()) {
  if (B.warpSpecialized) {
    Tensor p = program_id(0, loc);
    Tensor perRow = maximum((N + (B.n - 1)) / B.n, 1);
    body(tessera::expand_dims((p / perRow) * B.m + tessera::arange(B.m), 1),
         tessera::expand_dims((p % perRow) * B.n + tessera::arange(B.n), 0));
    return;
  }
  tessera::for_tiles(
      gemmSchedule(B, M, N, loc),
      [&](const Tile& t) {
        body(tessera::expand_dims(t.row0 + tessera::arange(B.m), 1),
             tessera::expand_dims(t.col0 + tessera::arange(B.n), 0));
      },
      loc);
}

/// The K loop of the low-precision GEMMs (gemm_f16, gemm_bf16, gemm_fp8,
/// gemm_int8): the accumulator (f32; i32 for i8 operands) of the BLOCK_M x
/// BLOCK_N tile at rows `row` (BLOCK_M x 1) and
/// columns `col` (1 x BLOCK_N) of C = A (M x K) @ B (K x N), row-major, `in`
/// the operands' dtype. Masked lanes outside the matrices read 0, which adds
/// nothing to the dot. With B.stages >= 1 (the GPU kernels) the A and B
/// tiles are staged through shared memory by a `stages`-deep software
/// pipeline; with 0 (the CPU kernels) they are plain loads: the CPU runs a
/// staged copy synchronously into a stack buffer, one more copy of every
/// tile with no overlap to gain, while a plain load feeding a dot is packed
/// straight into the microkernel's layout (docs/gemm.md).
template <typename PtrA, typename PtrB>
Tensor gemmMainLoop(const GemmBlocks& B, DType in, PtrA a, PtrB b, const Tensor& row, const Tensor& col, Int M, Int N,
                    Int K) {
  Tensor rk = tessera::arange(B.k);
  auto ptrA = [&](Int k0) { return a + row * K + tessera::expand_dims(k0 + rk, 0); };
  auto maskA = [&](Int k0) { return (row < M) & (tessera::expand_dims(k0 + rk, 0) < K); };
  auto ptrB = [&](Int k0) { return b + tessera::expand_dims(k0 + rk, 1) * N + col; };
  auto maskB = [&](Int k0) { return (tessera::expand_dims(k0 + rk, 1) < K) & (col < N); };
  Tensor zero = tessera::zeros({B.m, B.n}, in == DType::I8 ? tessera::i32 : tessera::f32);
  if (B.stages >= 1) {
    auto sa = tessera::alloc_shared(in, {B.m, B.k});  // one stage; stage_copy makes `stages` slots
    auto sb = tessera::alloc_shared(in, {B.k, B.n});
    const auto schedule = tessera::Pipeline(B.stages).warpSpecialized(B.warpSpecialized);
    return tessera::for_pipelined(0, K, B.k, schedule, zero, [&](Int k0, Tensor acc) {
      auto ta = tessera::stage_copy(sa, ptrA(k0), maskA(k0));
      auto tb = tessera::stage_copy(sb, ptrB(k0), maskB(k0));
      return tessera::dot(ta.load(), tb.load(), acc);  // on the tensor cores
    });
  }
  return tessera::for_range(0, K, B.k, zero, [&](Int k0, Tensor acc) {
    return tessera::dot(tessera::load(ptrA(k0), maskA(k0)), tessera::load(ptrB(k0), maskB(k0)), acc);
  });
}

/// The same in double, for the plain C++ references (act 0 none, 1 ReLU,
/// 2 GELU).
inline double activationRef(double s, int act) {
  if (act == 1) return std::max(s, 0.0);
  if (act == 2) return 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)));
  return s;
}

/// The plain C++ reference of the GEMM examples, in double: want =
/// act(A @ B + bias) for A (M x K) and B (K x N) read through `a(i, k)` and
/// `b(k, j)` (the exact values the kernel was given), and per element mag =
/// sum of |a_ik b_kj| + |bias_j|, which bounds the f32 accumulation error.
struct GemmReference {
  std::vector<double> want, mag;  // row-major M x N
};
template <typename GetA, typename GetB>
GemmReference gemmReference(int64_t M, int64_t N, int64_t K, GetA a, GetB b, const std::vector<float>& bias, int act) {
  GemmReference r;
  r.want.assign(size_t(M * N), 0.0);
  r.mag.assign(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = bias.empty() ? 0.0 : double(bias[size_t(j)]), m = std::fabs(s);
      for (int64_t k = 0; k < K; ++k) {
        double p = double(a(i, k)) * double(b(k, j));
        s += p;
        m += std::fabs(p);
      }
      r.want[size_t(i * N + j)] = activationRef(s, act);
      r.mag[size_t(i * N + j)] = m;
    }
  return r;
}

/// The problem shape of gemm_f32 / gemm_f16 / gemm_bf16: {M, N, K} or
/// {M, N, K, act}; the default is {300, 200, 150} with GELU.
struct GemmProblem {
  int64_t M, N, K;
  int act;
};
inline GemmProblem gemmProblem(const RunContext& ctx, const char* name) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{300, 200, 150, 2} : ctx.shape;
  if (s.size() < 3 || s.size() > 4 || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[0] * s[2] > (1 << 28) ||
      s[2] * s[1] > (1 << 28) || s[0] * s[1] > (1 << 28) || (s.size() == 4 && (s[3] < 0 || s[3] > 2)))
    throw Error(std::string(name) +
                ": the shape is {M, N, K} or {M, N, K, act} (act 0 none, 1 relu, 2 gelu), each >= 1, "
                "every matrix at most 2^28 elements");
  return {s[0], s[1], s[2], s.size() == 4 ? int(s[3]) : 2};
}

/// {rows, cols} from the context, or the default {37, 1000}.
inline std::pair<int64_t, int64_t> rowsCols(const RunContext& ctx, const char* name) {
  std::vector<int64_t> s = ctx.shape.empty() ? std::vector<int64_t>{37, 1000} : ctx.shape;
  if (s.size() != 2 || s[0] < 1 || s[1] < 1 || s[0] > 65535 || s[1] > (1 << 20))
    throw Error(std::string(name) + ": the shape is {rows, cols} with 1 <= rows <= 65535, 1 <= cols <= 2^20");
  return {s[0], s[1]};
}

/// The main of an example program: `NAME [--dump] [shape...]` runs the
/// example on the CPU against its reference, prints the check, and with
/// --dump prints the default kernel's tile IR, optimised LLVM IR and host
/// assembly. Exit status: 0 match, 1 mismatch, 2 error.
inline int exampleMain(int argc, char** argv, const Example& example) {
  try {
    RunContext ctx;  // CPU device, default options
    bool dump = false;
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--dump")
        dump = true;
      else
        ctx.shape.push_back(std::stoll(argv[i]));
    }
    CheckResult r = example.run(ctx);
    std::printf("%s: max abs error %.3g, max rel error %.3g (tolerance %.3g): %s\n", example.name.c_str(),
                r.maxAbsError, r.maxRelError, r.tolerance, r.ok ? "PASS" : "FAIL");
    if (!r.ok) std::printf("  %s\n", r.detail.c_str());
    if (dump) {
      auto k = compile(example.kernel(), ctx.device, ctx.options);
      for (auto s : {Stage::TileIR, Stage::LLVMOptimized, Stage::Assembly})
        std::printf("==== %s ====\n%s\n", name(s), k.dump(s).c_str());
    }
    return r.ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}

}  // namespace tessera::examples

/// The program of an example file: built with TESSERA_EXAMPLE_MAIN (its own
/// executable, `build/examples/NAME`), the file ends in
/// `TESSERA_EXAMPLE_PROGRAM(nameExample)`, which becomes the main that runs
/// exampleMain on that example; in the registry library it is nothing.
#ifdef TESSERA_EXAMPLE_MAIN
#define TESSERA_EXAMPLE_PROGRAM(exampleFn) \
  int main(int argc, char** argv) { return tessera::examples::exampleMain(argc, argv, tessera::examples::exampleFn()); }
#else
#define TESSERA_EXAMPLE_PROGRAM(exampleFn)
#endif

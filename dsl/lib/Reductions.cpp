// Reductions and contractions: sum, max, min, argmax and argmin along an axis, and
// dot.
#include "DslImpl.h"

#include <fmt/format.h>

namespace tessera {
namespace dsl {

namespace {

int normAxis(int axis, int rank, const SrcLoc& loc, const char* what) {
  if (axis < -rank || axis >= rank)
    fail(loc, fmt::format("{}: axis {} is out of range for a tile of rank {}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
}

Tensor reduce(const char* kind, const Tensor& x, int axis, const SrcLoc& loc) {
  TraceState& s = at(loc);
  std::string what = kind;
  ir::Value* v = use(x, loc);
  if (!v->type().isTile() || !v->type().isNumeric())
    fail(loc, fmt::format("{}: needs a tile of numbers, got {}", what, typeStr(v->type())));
  if (v->type().dtype() == DType::I1)
    fail(loc, fmt::format("{}: reduction of i1 values; convert with .to(ts::i32)", what));
  int a = normAxis(axis, v->type().rank(), loc, kind);
  return wrap(s.builder->reduce(kind, v, a));
}

}  // namespace

}  // namespace dsl

// ---- reductions and contractions -------------------------------------------

Tensor sum(const Tensor& x, int axis, SrcLoc loc) { return dsl::reduce("sum", x, axis, loc); }
Tensor max(const Tensor& x, int axis, SrcLoc loc) { return dsl::reduce("max", x, axis, loc); }
Tensor min(const Tensor& x, int axis, SrcLoc loc) { return dsl::reduce("min", x, axis, loc); }
Tensor argmax(const Tensor& x, int axis, SrcLoc loc) { return dsl::reduce("argmax", x, axis, loc); }
Tensor argmin(const Tensor& x, int axis, SrcLoc loc) { return dsl::reduce("argmin", x, axis, loc); }

namespace {
// f16/bf16 running sums and products accumulate in f32 (as reductions do)
// and are rounded once per element.
Tensor arithmeticScan(const Tensor& x, int axis, bool product, const SrcLoc& loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(x, loc, "scanned tile");
  DType d = v->type().dtype();
  const char* what = product ? "cumprod" : "cumsum";
  // Checked here, with the user's line: the combine below is Tessera's own
  // code, so a mistake found inside it would name this file instead.
  if (isFp8(d))
    dsl::fail(loc, fmt::format("{}: {} is an 8-bit storage float; convert it first, e.g. x.to(ts::f32)", what,
                               dsl::typeStr(v->type())));
  bool narrow = v->type().isTile() && (d == DType::F16 || d == DType::BF16);
  Tensor in = narrow ? dsl::wrap(s.builder->cast(v, DType::F32)) : x;
  Tensor r = dsl::scanImpl(
      in, axis,
      [&](const Tensor& a, const Tensor& b) {
        // The combine's ops carry the user's line.
        return product ? Operand(a, loc) * Operand(b, loc) : Operand(a, loc) + Operand(b, loc);
      },
      loc);
  if (!narrow) return r;
  dsl::at(loc);
  return dsl::wrap(s.builder->cast(dsl::use(r, loc), d));
}
}  // namespace

Tensor cumsum(const Tensor& x, int axis, SrcLoc loc) { return arithmeticScan(x, axis, false, loc); }
Tensor cumprod(const Tensor& x, int axis, SrcLoc loc) { return arithmeticScan(x, axis, true, loc); }

Tensor dot(const Tensor& a, const Tensor& b, const Tensor& acc, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* va = dsl::use(a, loc, "left operand");
  ir::Value* vb = dsl::use(b, loc, "right operand");
  const ir::Type &ta = va->type(), &tb = vb->type();
  if (!ta.isNumeric() || !tb.isNumeric() || ta.rank() != 2 || tb.rank() != 2)
    dsl::fail(loc, fmt::format("dot: needs two 2-D tiles, got {} and {}", ta.str(), tb.str()));
  if (ta.shape()[1] != tb.shape()[0])
    dsl::fail(loc, fmt::format("dot: inner dimensions differ: {} @ {}", dsl::shapeName(ta.shape()),
                               dsl::shapeName(tb.shape())));
  const bool fp8s = isFp8(ta.dtype()) && isFp8(tb.dtype());  // e4m3 x e5m2 is fine
  if ((ta.dtype() != tb.dtype() && !fp8s) || ta.dtype() == DType::I1)
    dsl::fail(loc, fmt::format("dot: operands must share a numeric dtype (or both be fp8), got {} and {}",
                               name(ta.dtype()), name(tb.dtype())));
  ir::Shape out{ta.shape()[0], tb.shape()[1]};
  bool fl = isFloat(ta.dtype());
  ir::Value* vc;
  if (acc.valid()) {
    vc = dsl::use(acc, loc, "accumulator");
    const ir::Type& tc = vc->type();
    bool okType = tc.isNumeric() && (fl ? (tc.dtype() == DType::F32 || tc.dtype() == DType::F64)
                                        : (tc.dtype() == DType::I32 || tc.dtype() == DType::I64));
    if (!okType || tc.shape() != out)
      dsl::fail(loc, fmt::format("dot: the accumulator must be tile<{}x{}>, got {}", ir::shapeStr(out),
                                 fl ? "f32 or f64" : "i32 or i64", tc.str()));
  } else {
    DType d = fl ? DType::F32 : DType::I32;
    vc = fl ? s.builder->constant(ir::Type::tile(ir::Type::scalar(d), out), 0.0)
            : s.builder->constant(ir::Type::tile(ir::Type::scalar(d), out), int64_t{0});
  }
  return dsl::wrap(s.builder->dot(va, vb, vc));
}

}  // namespace tessera

// Block-scaled dots: ts::dot_scaled and the MX code helpers it is made of
// (mx_decode, pack_fp4, unpack_fp4), docs/dot_scaled.md.
//
// ts::dot_scaled checks the user's tiles (a DslError naming the line) and
// emits one `dot_scaled` op carrying the codes, the scales, both formats,
// the accumulator and the optional per-tensor scale. The compile decides
// per target: a block-scaled matrix instruction where the target has one
// for the pair (codegen's nativeScaledDot), elsewhere the exact
// decomposition of the decompose-scaled-dots pass
// (ir/passes/DecomposeScaledDots.cpp), with a warning naming the line.
// The decoding of codes to f32 is one definition in the IR
// (ir/lib/ScaledDot.cpp), which ts::mx_decode and that pass share.
#include <fmt/format.h>

#include "DslImpl.h"
#include "tessera/ir/ScaledDot.h"

namespace tessera {

const char* name(ScaledFormat f) {
  switch (f) {
    case ScaledFormat::mxfp8_e4m3: return "mxfp8_e4m3";
    case ScaledFormat::mxfp8_e5m2: return "mxfp8_e5m2";
    case ScaledFormat::mxfp6_e2m3: return "mxfp6_e2m3";
    case ScaledFormat::mxfp6_e3m2: return "mxfp6_e3m2";
    case ScaledFormat::mxfp4: return "mxfp4";
    case ScaledFormat::nvfp4: return "nvfp4";
  }
  return "unknown";
}

int scaleBlock(ScaledFormat f) {
  const ir::ScaledFormatInfo* i = ir::findScaledFormat(name(f));
  return i ? int(i->block) : 0;
}

namespace dsl {
namespace {

/// The IR's table entry of `f` (ScaledFormats.def).
const ir::ScaledFormatInfo& formatInfo(ScaledFormat f, const SrcLoc& loc) {
  const ir::ScaledFormatInfo* i = ir::findScaledFormat(name(f));
  if (!i) fail(loc, fmt::format("dot_scaled: unknown format {}; the formats are {}", int(f), ir::scaledFormatNames()));
  return *i;
}

/// A u8 tile, or an error naming what `what` must be.
ir::Value* u8Tile(const Tensor& t, const SrcLoc& loc, const char* what, const std::string& want, bool fp8Too = false) {
  ir::Value* v = use(t, loc, what);
  const ir::Type& ty = v->type();
  const bool ok = ty.isTile() && ty.isNumeric() && ty.rank() == 2 &&
                  (ty.dtype() == DType::U8 || (fp8Too && ty.dtype() == DType::F8E4M3));
  if (!ok) fail(loc, fmt::format("dot_scaled: {} must be {}, got {}", what, want, ty.str()));
  return v;
}

struct Operand_ {
  ir::Value* codes;
  ir::Value* scale;
  const ir::ScaledFormatInfo* f;
  int64_t rows, k;
};

Operand_ scaledOperand(const Tensor& x, const Tensor& xs, ScaledFormat fmt, const char* which, const char* rowName,
                       const SrcLoc& loc) {
  Operand_ o{};
  o.f = &formatInfo(fmt, loc);
  const std::string codeWant =
      o.f->packed
          ? fmt::format("a u8 tile [{0}, K/2] of {1} codes, two a byte along K (ts::pack_fp4)", rowName, name(fmt))
          : fmt::format("a u8 tile [{0}, K] of {1} codes, one a byte", rowName, name(fmt));
  o.codes = u8Tile(x, loc, which, codeWant);
  o.rows = o.codes->type().shape()[0];
  o.k = o.codes->type().shape()[1] * (o.f->packed ? 2 : 1);
  if (o.k % o.f->block != 0)
    fail(loc, fmt::format("dot_scaled: {} holds K = {} {} elements, not a multiple of its block of {}: pad K with "
                          "zero codes to a multiple of {} (masked loads give 0, +0 in every format)",
                          which, o.k, name(fmt), o.f->block, o.f->block));
  const std::string scaleName = std::string(which) + "_scale";
  const ir::Shape want{o.rows, o.k / o.f->block};
  const std::string scaleWant =
      fmt::format("a {} tile {} of {} codes, one per block of {} along K",
                  o.f->scale == DType::E8M0 ? "u8" : "u8 (or f8e4m3)", shapeName(want), name(o.f->scale), o.f->block);
  o.scale = u8Tile(xs, loc, scaleName.c_str(), scaleWant, o.f->scale == DType::F8E4M3);
  if (o.scale->type().shape() != want)
    fail(loc, fmt::format("dot_scaled: {} must be {}, got {}", scaleName, scaleWant, o.scale->type().str()));
  return o;
}

}  // namespace
}  // namespace dsl

Tensor dot_scaled(const Tensor& a, const Tensor& a_scale, ScaledFormat a_fmt, const Tensor& b, const Tensor& b_scale,
                  ScaledFormat b_fmt, const Tensor& acc, const Operand& tensor_scale, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  const dsl::Operand_ oa = dsl::scaledOperand(a, a_scale, a_fmt, "a", "M", loc);
  const dsl::Operand_ ob = dsl::scaledOperand(b, b_scale, b_fmt, "b", "N", loc);
  if (oa.k != ob.k)
    dsl::fail(loc, fmt::format("dot_scaled: a holds K = {} {} elements ({}) but b holds K = {} {} elements ({}); "
                               "b is given K-major, [N, K] ([N, K/2] for fp4)",
                               oa.k, name(a_fmt), oa.codes->type().str(), ob.k, name(b_fmt), ob.codes->type().str()));
  const ir::Shape out{oa.rows, ob.rows};
  ir::Value* vc = nullptr;
  if (acc.valid()) {
    vc = dsl::use(acc, loc, "accumulator");
    if (!vc->type().isTile() || vc->type().dtype() != DType::F32 || vc->type().shape() != out)
      dsl::fail(loc, fmt::format("dot_scaled: the accumulator must be tile<{}xf32>, got {}", ir::shapeStr(out),
                                 vc->type().str()));
  }
  ir::Value* ts = nullptr;
  if (!tensor_scale.none()) {
    if (a_fmt != ScaledFormat::nvfp4 && b_fmt != ScaledFormat::nvfp4)
      dsl::fail(loc, fmt::format("dot_scaled: a per-tensor scale applies to nvfp4 operands only, and a is {}, b is "
                                 "{}; leave tensor_scale out (MX formats have their block scales only)",
                                 name(a_fmt), name(b_fmt)));
    if (tensor_scale.kind() == Operand::Kind::Float)
      ts = s.builder->constant(ir::Type::scalar(DType::F32), tensor_scale.floatValue());
    else if (tensor_scale.isHandle())
      ts = dsl::use(tensor_scale.tensor(), loc, "tensor_scale");
    if (!ts || ts->type() != ir::Type::scalar(DType::F32))
      dsl::fail(loc, fmt::format("dot_scaled: tensor_scale must be an f32 scalar (the product of both operands' "
                                 "per-tensor scales), got {}",
                                 tensor_scale.str()));
  }
  ir::Builder& bld = *s.builder;
  if (!vc) vc = bld.constant(ir::Type::tile(ir::Type::scalar(DType::F32), out), 0.0);
  ir::Value* r = bld.dotScaled(oa.codes, oa.scale, name(a_fmt), ob.codes, ob.scale, name(b_fmt), vc, ts);
  return dsl::wrap(r);
}

Tensor mx_decode(const Tensor& x, DType format, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(x, loc, "codes");
  if (!isMx(format) && format != DType::F8E4M3 && format != DType::F8E5M2)
    dsl::fail(loc, fmt::format("mx_decode: {} is not an MX element or scale format; the formats are f4e2m1, "
                               "f6e2m3, f6e3m2, e8m0, f8e4m3, f8e5m2 (FNUZ codes: .bitcast(ts::{}).to(ts::f32))",
                               name(format), name(format)));
  if (!v->type().isTile() || !v->type().isNumeric() || v->type().dtype() != DType::U8)
    dsl::fail(loc, fmt::format("mx_decode: the codes must be a u8 tile (one code a byte; ts::unpack_fp4 for packed "
                               "f4e2m1), got {}",
                               v->type().str()));
  return dsl::wrap(ir::buildMxDecode(*s.builder, v, format));
}

Tensor pack_fp4(const Tensor& codes, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(codes, loc, "codes");
  const ir::Type& t = v->type();
  if (!t.isTile() || t.dtype() != DType::U8 || t.rank() > ir::kMaxTileRank - 1)
    dsl::fail(loc, fmt::format("pack_fp4: needs a u8 tile of f4e2m1 codes of rank 1..{}, got {}", ir::kMaxTileRank - 1,
                               t.str()));
  if (t.shape().back() % 2 != 0)
    dsl::fail(loc, fmt::format("pack_fp4: the last (contiguous) extent of {} is odd; f4e2m1 codes pack two a byte "
                               "along it: make it even (pad with code 0, +0)",
                               t.str()));
  ir::Builder& b = *s.builder;
  ir::Shape pairs = t.shape();
  pairs.back() /= 2;
  pairs.push_back(2);
  auto [even, odd] = b.split(b.reshape(v, pairs));
  ir::Value* f = b.constant(even->type(), int64_t{15});
  return dsl::wrap(
      b.binary(ir::OpCode::Or, b.binary(ir::OpCode::And, even, f),
               b.binary(ir::OpCode::Shl, b.binary(ir::OpCode::And, odd, f), b.constant(even->type(), int64_t{4}))));
}

Tensor unpack_fp4(const Tensor& packed, SrcLoc loc) {
  dsl::TraceState& s = dsl::at(loc);
  ir::Value* v = dsl::use(packed, loc, "packed codes");
  if (!v->type().isTile() || v->type().dtype() != DType::U8 || v->type().rank() > ir::kMaxTileRank - 1)
    dsl::fail(loc, fmt::format("unpack_fp4: needs a u8 tile of packed f4e2m1 codes of rank 1..{}, got {}",
                               ir::kMaxTileRank - 1, v->type().str()));
  return dsl::wrap(ir::buildUnpackFp4(*s.builder, v));
}

}  // namespace tessera

// Block-scaled dots: ts::dot_scaled and the MX code helpers it is made of
// (mx_decode, pack_fp4, unpack_fp4), docs/dot_scaled.md.
//
// No target has a lowering of a block-scaled matrix instruction yet, so
// dot_scaled is traced as its exact decomposition, the same on every
// target: each operand's codes are decoded to f32 with integer and bit
// operations (MxFormats.h and Fp8.h are the definitions they match), times
// its block's scale (a power of two for e8m0; an f8e4m3 value for nvfp4,
// whose products with f4e2m1 values have at most 5 significant bits), cast
// to bf16, and one bf16 dot accumulates in f32. The cast is exact: every
// decoded element times its scale has at most 5 significant bits for fp4
// and fp6 (bf16 has 8), at most 4 for fp8, so it is exact whenever the
// product lies in bf16's normal range or above its smallest subnormal's
// quantum (2^-133): for e8m0 scales, always for fp4 and fp6 elements, and
// for fp8 elements for scales of at least 2^-124 (e4m3) and 2^-117 (e5m2);
// finite products need scale x max element below 2^128. Within those, the
// result is the reference's (sum of a x sa x b x sb accumulated in f32)
// up to the order of the f32 additions, as for any dot. The dot carries its
// formats as the attributes scaled_a and scaled_b, by which the compile
// names it in its warning (codegen/Compiler.cpp).
#include <fmt/format.h>

#include "DslImpl.h"

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

int scaleBlock(ScaledFormat f) { return f == ScaledFormat::nvfp4 ? 16 : 32; }

namespace dsl {
namespace {

constexpr const char* kFormats = "mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, nvfp4";

struct FormatInfo {
  DType elem;   // what the codes are
  bool packed;  // two codes a byte
  DType scale;  // e8m0, or f8e4m3 for nvfp4
  int64_t block;
};

FormatInfo formatInfo(ScaledFormat f, const SrcLoc& loc) {
  switch (f) {
    case ScaledFormat::mxfp8_e4m3: return {DType::F8E4M3, false, DType::E8M0, 32};
    case ScaledFormat::mxfp8_e5m2: return {DType::F8E5M2, false, DType::E8M0, 32};
    case ScaledFormat::mxfp6_e2m3: return {DType::F6E2M3, false, DType::E8M0, 32};
    case ScaledFormat::mxfp6_e3m2: return {DType::F6E3M2, false, DType::E8M0, 32};
    case ScaledFormat::mxfp4: return {DType::F4E2M1, true, DType::E8M0, 32};
    case ScaledFormat::nvfp4: return {DType::F4E2M1, true, DType::F8E4M3, 16};
  }
  fail(loc, fmt::format("dot_scaled: unknown format {}; the formats are {}", int(f), kFormats));
}

ir::Type tileOf(DType d, const ir::Shape& shape) { return ir::Type::tile(ir::Type::scalar(d), shape); }

ir::Value* iconst(ir::Builder& b, const ir::Shape& shape, int64_t v) {
  return b.constant(tileOf(DType::I32, shape), v);
}

ir::Value* bin(ir::Builder& b, ir::OpCode c, ir::Value* x, int64_t v) {
  return b.binary(c, x, iconst(b, x->type().shape(), v));
}

/// f32 values of a u8 tile of codes of `fmt` (an MX dtype or fp8), exact.
ir::Value* decode(ir::Builder& b, ir::Value* v, DType fmt) {
  using ir::OpCode;
  const ir::Shape shape = v->type().shape();
  // The FNUZ formats by the fp8 cast (exact); the OCP ones below, with
  // integer operations, as the MX elements: on the CPU the cast is a
  // conversion routine, several times the cost of these few vector ops.
  if (fmt == DType::F8E4M3FNUZ || fmt == DType::F8E5M2FNUZ) return b.cast(b.bitcast(v, fmt), DType::F32);
  ir::Value* c = b.cast(v, DType::I32);  // u8 zero-extends
  if (fmt == DType::E8M0) {
    // 2^(c - 127) is c in f32's exponent field, but for c = 0 (2^-127, a
    // subnormal: its mantissa's top bit) and 255 (NaN, not infinity).
    ir::Value* bits = bin(b, OpCode::Shl, c, 23);
    bits = b.select(b.cmp("eq", c, iconst(b, shape, 0)), iconst(b, shape, 0x00400000), bits);
    bits = b.select(b.cmp("eq", c, iconst(b, shape, 255)), iconst(b, shape, 0x7FC00000), bits);
    return b.bitcast(bits, DType::F32);
  }
  // An element (e exponent bits, m mantissa bits, bias B) is n x 2^(max(e,
  // 1) - B - M) with n = m plus the implicit bit of a normal: a small
  // integer times a normal power of two, so no subnormal is ever formed.
  unsigned expBits, manBits;
  int bias;
  if (isFp8(fmt)) {
    const Fp8Format f = fp8Format(fmt);
    expBits = f.expBits, manBits = f.manBits, bias = f.bias;
  } else {
    const MxElementFormat f = mxElementFormat(fmt);
    expBits = f.expBits, manBits = f.manBits, bias = f.bias;
  }
  const unsigned magBits = expBits + manBits;
  c = bin(b, OpCode::And, c, (1 << (magBits + 1)) - 1);
  ir::Value* e = bin(b, OpCode::And, bin(b, OpCode::Shr, c, manBits), (1 << expBits) - 1);
  ir::Value* m = bin(b, OpCode::And, c, (1 << manBits) - 1);
  ir::Value* n = b.binary(OpCode::Add, m, bin(b, OpCode::Shl, bin(b, OpCode::Min, e, 1), manBits));
  ir::Value* pe = bin(b, OpCode::Add, bin(b, OpCode::Max, e, 1), 127 - bias - int(manBits));
  ir::Value* p = b.bitcast(bin(b, OpCode::Shl, pe, 23), DType::F32);
  ir::Value* bits = b.bitcast(b.binary(OpCode::Mul, b.cast(n, DType::F32), p), DType::I32);
  // fp8's special codes (Fp8.h): e4m3's NaN is the all-ones magnitude;
  // e5m2's top exponent is infinity (m = 0) or NaN.
  if (fmt == DType::F8E4M3) {
    ir::Value* mag = bin(b, OpCode::And, c, 0x7F);
    bits = b.select(b.cmp("eq", mag, iconst(b, shape, 0x7F)), iconst(b, shape, 0x7FC00000), bits);
  } else if (fmt == DType::F8E5M2) {
    ir::Value* special =
        b.select(b.cmp("eq", m, iconst(b, shape, 0)), iconst(b, shape, 0x7F800000), iconst(b, shape, 0x7FC00000));
    bits = b.select(b.cmp("eq", e, iconst(b, shape, 31)), special, bits);
  }
  // The sign bit on top of the magnitude's bits (-0 for the code of -0).
  ir::Value* sign = bin(b, OpCode::Shl, bin(b, OpCode::Shr, c, magBits), 31);
  return b.bitcast(b.binary(OpCode::Or, bits, sign), DType::F32);
}

ir::Value* unpack(ir::Builder& b, ir::Value* v) {
  ir::Shape shape = v->type().shape();
  ir::Value* lo = b.binary(ir::OpCode::And, v, b.constant(v->type(), int64_t{15}));
  ir::Value* hi = b.binary(ir::OpCode::Shr, v, b.constant(v->type(), int64_t{4}));
  shape.back() *= 2;
  return b.reshape(b.join(lo, hi), shape);
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
  FormatInfo f;
  int64_t rows, k;
};

Operand_ scaledOperand(const Tensor& x, const Tensor& xs, ScaledFormat fmt, const char* which, const char* rowName,
                       const SrcLoc& loc) {
  Operand_ o{};
  o.f = formatInfo(fmt, loc);
  const std::string codeWant =
      o.f.packed
          ? fmt::format("a u8 tile [{0}, K/2] of {1} codes, two a byte along K (ts::pack_fp4)", rowName, name(fmt))
          : fmt::format("a u8 tile [{0}, K] of {1} codes, one a byte", rowName, name(fmt));
  o.codes = u8Tile(x, loc, which, codeWant);
  o.rows = o.codes->type().shape()[0];
  o.k = o.codes->type().shape()[1] * (o.f.packed ? 2 : 1);
  if (o.k % o.f.block != 0)
    fail(loc, fmt::format("dot_scaled: {} holds K = {} {} elements, not a multiple of its block of {}: pad K with "
                          "zero codes to a multiple of {} (masked loads give 0, +0 in every format)",
                          which, o.k, name(fmt), o.f.block, o.f.block));
  const std::string scaleName = std::string(which) + "_scale";
  const ir::Shape want{o.rows, o.k / o.f.block};
  const std::string scaleWant =
      fmt::format("a {} tile {} of {} codes, one per block of {} along K",
                  o.f.scale == DType::E8M0 ? "u8" : "u8 (or f8e4m3)", shapeName(want), name(o.f.scale), o.f.block);
  o.scale = u8Tile(xs, loc, scaleName.c_str(), scaleWant, o.f.scale == DType::F8E4M3);
  if (o.scale->type().shape() != want)
    fail(loc, fmt::format("dot_scaled: {} must be {}, got {}", scaleName, scaleWant, o.scale->type().str()));
  return o;
}

/// The operand decoded, scaled and cast to bf16: [rows, K].
ir::Value* dequantise(ir::Builder& b, const Operand_& o) {
  ir::Value* codes = o.f.packed ? unpack(b, o.codes) : o.codes;
  ir::Value* x = decode(b, codes, o.f.elem);
  ir::Value* s = o.scale->type().dtype() == DType::F8E4M3 ? b.cast(o.scale, DType::F32) : decode(b, o.scale, o.f.scale);
  // Each scale stretched over its block: [rows, K/bs] -> [rows, K/bs, bs] -> [rows, K].
  const int64_t nb = o.k / o.f.block;
  s = b.reshape(b.broadcast(b.expandDims(s, 2), {o.rows, nb, o.f.block}), {o.rows, o.k});
  return b.cast(b.binary(ir::OpCode::Mul, x, s), DType::BF16);
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
  ir::Value* xa = dsl::dequantise(bld, oa);
  ir::Value* xb = bld.transpose(dsl::dequantise(bld, ob), {1, 0});
  ir::Value* zero = bld.constant(ir::Type::tile(ir::Type::scalar(DType::F32), out), 0.0);
  ir::Value* r = bld.dot(xa, xb, ts ? zero : (vc ? vc : zero));
  r->definingOp()->attrs()["scaled_a"] = std::string(name(a_fmt));
  r->definingOp()->attrs()["scaled_b"] = std::string(name(b_fmt));
  if (ts) {
    r = bld.binary(ir::OpCode::Mul, r, bld.splat(ts, out));
    if (vc) r = bld.binary(ir::OpCode::Add, r, vc);
  }
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
  return dsl::wrap(dsl::decode(*s.builder, v, format));
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
  return dsl::wrap(dsl::unpack(*s.builder, v));
}

}  // namespace tessera

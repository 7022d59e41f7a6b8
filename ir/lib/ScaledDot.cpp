// The formats of `dot_scaled` and the exact decoding of their codes as
// tile-IR ops (ScaledDot.h). MxFormats.h and Fp8.h are the definitions
// these ops match bit for bit (tests/codegen/dot_scaled_test.cpp).
#include "tessera/ir/ScaledDot.h"

#include <optional>

#include "tessera/support/Error.h"
#include "tessera/support/Fp8.h"
#include "tessera/support/MxFormats.h"

namespace tessera::ir {
namespace {

constexpr ScaledFormatInfo kFormats[] = {
#define TS_SCALED_FORMAT(n, elem, packed, scale, block) {#n, DType::elem, packed, DType::scale, block},
#include "tessera/ir/ScaledFormats.def"
};

Type tileOf(DType d, const Shape& shape) { return Type::tile(Type::scalar(d), shape); }

Value* iconst(Builder& b, const Shape& shape, int64_t v) { return b.constant(tileOf(DType::I32, shape), v); }

Value* bin(Builder& b, OpCode c, Value* x, int64_t v) { return b.binary(c, x, iconst(b, x->type().shape(), v)); }

}  // namespace

const ScaledFormatInfo* findScaledFormat(const std::string& name) {
  for (const ScaledFormatInfo& f : kFormats)
    if (name == f.name) return &f;
  return nullptr;
}

const std::string& scaledFormatNames() {
  static const std::string names = [] {
    std::string s;
    for (const ScaledFormatInfo& f : kFormats) s += (s.empty() ? "" : ", ") + std::string(f.name);
    return s;
  }();
  return names;
}

Value* buildMxDecode(Builder& b, Value* v, DType fmt) {
  const Shape shape = v->type().shape();
  // The FNUZ formats by the fp8 cast (exact); the OCP ones below, with
  // integer operations, as the MX elements: on the CPU the cast is a
  // conversion routine, several times the cost of these few vector ops.
  if (fmt == DType::F8E4M3FNUZ || fmt == DType::F8E5M2FNUZ) return b.cast(b.bitcast(v, fmt), DType::F32);
  Value* c = b.cast(v, DType::I32);  // u8 zero-extends
  if (fmt == DType::E8M0) {
    // 2^(c - 127) is c in f32's exponent field, but for c = 0 (2^-127, a
    // subnormal: its mantissa's top bit) and 255 (NaN, not infinity).
    Value* bits = bin(b, OpCode::Shl, c, 23);
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
    TS_ASSERT(isMx(fmt), std::string("buildMxDecode of ") + name(fmt));
    const MxElementFormat f = mxElementFormat(fmt);
    expBits = f.expBits, manBits = f.manBits, bias = f.bias;
  }
  const unsigned magBits = expBits + manBits;
  c = bin(b, OpCode::And, c, (1 << (magBits + 1)) - 1);
  Value* e = bin(b, OpCode::And, bin(b, OpCode::Shr, c, manBits), (1 << expBits) - 1);
  Value* m = bin(b, OpCode::And, c, (1 << manBits) - 1);
  Value* n = b.binary(OpCode::Add, m, bin(b, OpCode::Shl, bin(b, OpCode::Min, e, 1), manBits));
  Value* pe = bin(b, OpCode::Add, bin(b, OpCode::Max, e, 1), 127 - bias - int(manBits));
  Value* p = b.bitcast(bin(b, OpCode::Shl, pe, 23), DType::F32);
  Value* bits = b.bitcast(b.binary(OpCode::Mul, b.cast(n, DType::F32), p), DType::I32);
  // fp8's special codes (Fp8.h): e4m3's NaN is the all-ones magnitude;
  // e5m2's top exponent is infinity (m = 0) or NaN.
  if (fmt == DType::F8E4M3) {
    Value* mag = bin(b, OpCode::And, c, 0x7F);
    bits = b.select(b.cmp("eq", mag, iconst(b, shape, 0x7F)), iconst(b, shape, 0x7FC00000), bits);
  } else if (fmt == DType::F8E5M2) {
    Value* special =
        b.select(b.cmp("eq", m, iconst(b, shape, 0)), iconst(b, shape, 0x7F800000), iconst(b, shape, 0x7FC00000));
    bits = b.select(b.cmp("eq", e, iconst(b, shape, 31)), special, bits);
  }
  // The sign bit on top of the magnitude's bits (-0 for the code of -0).
  Value* sign = bin(b, OpCode::Shl, bin(b, OpCode::Shr, c, magBits), 31);
  return b.bitcast(b.binary(OpCode::Or, bits, sign), DType::F32);
}

Value* buildUnpackFp4(Builder& b, Value* v) {
  Shape shape = v->type().shape();
  Value* lo = b.binary(OpCode::And, v, b.constant(v->type(), int64_t{15}));
  Value* hi = b.binary(OpCode::Shr, v, b.constant(v->type(), int64_t{4}));
  shape.back() *= 2;
  return b.reshape(b.join(lo, hi), shape);
}

DType dotOperandElem(const Op& dot, unsigned operand) {
  TS_ASSERT(dot.code() == OpCode::Dot && operand < 2, "dotOperandElem of an operand of no dot");
  if (dot.numOperands() != 5) return dot.operand(operand)->type().dtype();
  std::optional<DType> d = parseDType(dot.strAttr(operand == 0 ? "a_elem" : "b_elem"));
  TS_ASSERT(d.has_value(), "a block-scaled dot whose element attribute the verifier let through");
  return *d;
}

int64_t dotElemsPerByte(const Op& dot) {
  return dot.numOperands() == 5 && dot.hasAttr("packed") && dot.intAttr("packed") != 0 ? 2 : 1;
}

int64_t dotK(const Op& dot) { return dot.operand(0)->type().shape()[1] * dotElemsPerByte(dot); }

int64_t dotScaleBlock(const Op& dot) {
  TS_ASSERT(dot.code() == OpCode::Dot && dot.numOperands() == 5, "dotScaleBlock of no block-scaled dot");
  return dot.hasAttr("scale_elem") && dot.strAttr("scale_elem") == "ue4m3" ? 16 : 32;
}

Value* buildMmaContainers(Builder& b, Value* codes, const ScaledFormatInfo& f) {
  if (isFp8(f.elem)) return codes;
  if (f.packed) {
    Value* c = buildUnpackFp4(b, codes);
    return b.binary(OpCode::Shl, c, b.constant(c->type(), int64_t{2}));
  }
  return b.binary(OpCode::And, codes, b.constant(codes->type(), int64_t{0x3F}));
}

}  // namespace tessera::ir

// "decompose-scaled-dots": each `dot_scaled` a target has no block-scaled
// matrix instruction for becomes its exact decomposition (the one place it
// is written; docs/dot_scaled.md):
//
//   1. fp4 codes are unpacked (and, shr, join, reshape along K);
//   2. codes are decoded to f32 exactly with integer and bit operations
//      (ScaledDot.h: buildMxDecode), e8m0 scales by shifting the code into
//      f32's exponent field, nvfp4's as f8e4m3 without the sign bit
//      (UE4M3: scaleCodes);
//   3. each element is multiplied by its block's scale, broadcast along K;
//   4. the product is cast to bf16, and one bf16 `dot` accumulates in f32
//      (B transposed from its K-major [N, K] to [K, N]); a per-tensor scale
//      multiplies that dot's result before the accumulator is added.
//
// The cast to bf16 is exact: an element times its scale has at most 5
// significant bits for fp4 and fp6 (bf16 has 8), at most 4 for fp8 with an
// e8m0 scale, so it is exact while the product lies above bf16's smallest
// subnormal quantum (2^-133): always for fp4 and fp6, and for fp8 elements
// with scales of at least 2^-124 (e4m3) and 2^-117 (e5m2); finite products
// need scale x max element below 2^128. Within those, the result is the
// reference's (sum of a x sa x b x sb in f32) up to the order of the
// additions, as for any dot.
//
// The dots `native` accepts (the target lowers them to a block-scaled
// matrix instruction: codegen's nativeScaledDot) become the block-scaled
// form of `dot` instead: the codes one a byte in the instruction's
// containers (buildMmaContainers: fp4 unpacked), their element dtypes as
// `a_elem` / `b_elem`, B transposed to [K, N], the e8m0 scale tiles as
// operands 3 and 4 (IR.h), so the tensor-core lowering stages and reads
// them as any dot's 1-byte operands. Where the instruction takes fp4 two a
// byte (ScaledDotForm::PackedFp4: AMD's f8f6f4 MFMAs, NVIDIA's kind::mxf4
// and kind::mxf4nvf4), an fp4 x fp4 dot keeps its codes packed ([M, K/2]
// and, transposed, [K/2, N], `packed`): nothing is unpacked, and half the
// bytes are staged. NVFP4's scales go as UE4M3 codes (`scale_elem`), the
// sign bit cleared here so the instruction never sees it; a per-tensor
// scale multiplies a dot from zero, before the accumulator is added, as in
// the decomposition. Without `native` (the pass by name) every dot_scaled
// is decomposed.
#include <functional>
#include <variant>
#include <vector>

#include "PassUtils.h"
#include "tessera/ir/Pass.h"
#include "tessera/ir/ScaledDot.h"
#include "tessera/support/Error.h"

namespace tessera::ir {
namespace {

/// The scale codes of format `f` as u8: e8m0 as they are; nvfp4's f8e4m3
/// (codes or an f8e4m3 tile) as UE4M3, the sign bit cleared (IR.h).
Value* scaleCodes(Builder& b, Value* scale, const ScaledFormatInfo& f) {
  if (f.scale != DType::F8E4M3) return scale;
  Value* codes = scale->type().dtype() == DType::F8E4M3 ? b.bitcast(scale, DType::U8) : scale;
  return b.binary(OpCode::And, codes, b.constant(codes->type(), int64_t{0x7F}));
}

/// The operand decoded, scaled and cast to bf16: [rows, K].
Value* dequantise(Builder& b, Value* codes, Value* scale, const ScaledFormatInfo& f) {
  Value* x = buildMxDecode(b, f.packed ? buildUnpackFp4(b, codes) : codes, f.elem);
  Value* s = buildMxDecode(b, scaleCodes(b, scale, f), f.scale);
  // Each scale stretched over its block: [rows, K/bs] -> [rows, K/bs, bs] -> [rows, K].
  const int64_t rows = x->type().shape()[0], k = x->type().shape()[1], nb = k / f.block;
  s = b.reshape(b.broadcast(b.expandDims(s, 2), {rows, nb, f.block}), {rows, k});
  return b.cast(b.binary(OpCode::Mul, x, s), DType::BF16);
}

bool isZeroConstant(const Value* v) {
  const Op* d = v->definingOp();
  if (!d || d->code() != OpCode::Constant || !d->hasAttr("value")) return false;
  const Attr& a = d->attrs().at("value");
  if (const double* x = std::get_if<double>(&a)) return *x == 0.0;
  return false;
}

class DecomposeScaledDots : public Pass {
 public:
  explicit DecomposeScaledDots(std::function<ScaledDotForm(const Op&)> native) : native_(std::move(native)) {}
  const char* name() const override { return "decompose-scaled-dots"; }

  void run(Function& f) override {
    f_ = &f;
    visit(f.body());
  }

 private:
  void visit(Block& blk) {
    for (size_t i = 0; i < blk.ops().size(); ++i) {
      Op& op = *blk.ops()[i];
      for (auto& r : op.regions()) visit(r->block());
      if (op.code() != OpCode::DotScaled) continue;
      const ScaledFormatInfo* fa = findScaledFormat(op.strAttr("a_format"));
      const ScaledFormatInfo* fb = findScaledFormat(op.strAttr("b_format"));
      TS_ASSERT(fa && fb, "dot_scaled with an unknown format passed the verifier");
      Builder b;
      b.setInsertionPoint(&blk, i);
      b.setLoc(op.loc());
      Value* acc = op.operand(4);
      Value* ts = op.numOperands() > 5 ? op.operand(5) : nullptr;
      const ScaledDotForm form = native_ ? native_(op) : ScaledDotForm::Decomposed;
      TS_ASSERT(form == ScaledDotForm::Decomposed || (fa->scale == fb->scale && fa->block == fb->block),
                "a native block-scaled dot of operands with different scales");
      TS_ASSERT(form != ScaledDotForm::PackedFp4 || (fa->packed && fb->packed),
                "packed block-scaled operands of other than fp4 x fp4");
      Value* r;
      if (form != ScaledDotForm::Decomposed) {
        const bool packed = form == ScaledDotForm::PackedFp4;
        Value* ca = packed ? op.operand(0) : buildMmaContainers(b, op.operand(0), *fa);
        Value* cb = b.transpose(packed ? op.operand(2) : buildMmaContainers(b, op.operand(2), *fb), {1, 0});
        std::map<std::string, Attr> attrs = {{"a_elem", std::string(tessera::name(fa->elem))},
                                             {"b_elem", std::string(tessera::name(fb->elem))}};
        if (packed) attrs["packed"] = int64_t{1};
        if (fa->scale == DType::F8E4M3) attrs["scale_elem"] = std::string("ue4m3");
        Value* sa = scaleCodes(b, op.operand(1), *fa);
        Value* sb = scaleCodes(b, op.operand(3), *fb);
        Value* from = ts ? b.constant(acc->type(), 0.0) : acc;
        r = b.create(OpCode::Dot, {ca, cb, from, sa, sb}, {acc->type()}, attrs)->result();
        if (ts) {
          r = b.binary(OpCode::Mul, r, b.splat(ts, acc->type().shape()));
          if (!isZeroConstant(acc)) r = b.binary(OpCode::Add, r, acc);
        }
      } else if (ts) {
        Value* xa = dequantise(b, op.operand(0), op.operand(1), *fa);
        Value* xb = b.transpose(dequantise(b, op.operand(2), op.operand(3), *fb), {1, 0});
        r = b.dot(xa, xb, b.constant(acc->type(), 0.0));
        r = b.binary(OpCode::Mul, r, b.splat(ts, acc->type().shape()));
        // The DSL's absent accumulator is a zero constant: nothing to add.
        if (!isZeroConstant(acc)) r = b.binary(OpCode::Add, r, acc);
      } else {
        Value* xa = dequantise(b, op.operand(0), op.operand(1), *fa);
        Value* xb = b.transpose(dequantise(b, op.operand(2), op.operand(3), *fb), {1, 0});
        r = b.dot(xa, xb, acc);
      }
      passutil::replaceAllUsesWith(*f_, op.result(), r);
      // The builder inserted before the dot_scaled: it now sits after them.
      size_t pos = i;
      while (blk.ops()[pos].get() != &op) ++pos;
      blk.ops().erase(blk.ops().begin() + pos);
      i = pos - 1;  // the next op after the decomposition
    }
  }
  std::function<ScaledDotForm(const Op&)> native_;
  Function* f_ = nullptr;
};

}  // namespace

std::unique_ptr<Pass> createDecomposeScaledDotsPass(std::function<ScaledDotForm(const Op& dot)> native) {
  return std::make_unique<DecomposeScaledDots>(std::move(native));
}

}  // namespace tessera::ir

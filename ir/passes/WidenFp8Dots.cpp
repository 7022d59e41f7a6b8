// "widen-fp8-dots": a dot on fp8 operands becomes the same dot on f16
// operands, each fp8 operand cast first. Every value of the four fp8 formats
// is an f16 value (at most 3 mantissa bits, exponents within f16's normal
// and subnormal range), so the products and their f32 accumulation are the
// ones an fp8 tensor core computes: the result is the same, only the speed
// differs. A dot the target has an fp8 matrix instruction for is left as
// it is: the caller's `native` predicate asks the target's tensor-core table
// (codegen/Compiler.cpp: GpuTargetInfo::tensorCore through
// gpuTensorCoreTakes), which holds mma.sync m16n8k32 .e4m3/.e5m2 on sm_89
// and sm_90a (OCP formats) and MFMA 16x16x32 fp8/bf8 on gfx942 (FNUZ
// formats). Everything else is widened: the CPU, sm_80/86, gfx90a,
// gfx1100, FNUZ operands on NVIDIA, OCP operands on gfx942, an f64
// accumulator.
#include <functional>
#include <vector>

#include "tessera/ir/Builder.h"
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

class WidenFp8Dots : public Pass {
 public:
  explicit WidenFp8Dots(std::function<bool(DType, DType, DType)> native) : native_(std::move(native)) {}
  const char* name() const override { return "widen-fp8-dots"; }

  void run(Function& f) override { visit(f.body()); }

 private:
  void visit(Block& b) {
    for (size_t i = 0; i < b.ops().size(); ++i) {
      Op& op = *b.ops()[i];
      for (auto& r : op.regions()) visit(r->block());
      if (op.code() != OpCode::Dot) continue;
      const DType a = op.operand(0)->type().dtype(), b2 = op.operand(1)->type().dtype();
      if (!isFp8(a) && !isFp8(b2)) continue;
      if (native_ && native_(a, b2, op.operand(2)->type().dtype())) continue;
      Builder bld;
      bld.setInsertionPoint(&b, i);
      bld.setLoc(op.loc());
      for (unsigned k = 0; k < 2; ++k)
        if (isFp8(op.operand(k)->type().dtype())) {
          op.setOperand(k, bld.cast(op.operand(k), DType::F16));
          ++i;  // the cast went in before the dot
        }
    }
  }
  std::function<bool(DType, DType, DType)> native_;
};

}  // namespace

std::unique_ptr<Pass> createWidenFp8DotsPass(std::function<bool(DType, DType, DType)> native) {
  return std::make_unique<WidenFp8Dots>(std::move(native));
}

}  // namespace tessera::ir

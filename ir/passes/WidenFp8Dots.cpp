// "widen-fp8-dots": a dot on fp8 operands becomes the same dot on f16
// operands, each fp8 operand cast first. Every value of the four fp8 formats
// is an f16 value (at most 3 mantissa bits, exponents within f16's normal
// and subnormal range), so the products and their f32 accumulation are the
// ones an fp8 tensor core computes: the result is the same, only the speed
// differs. Run for targets without an fp8 matrix instruction in Tessera's
// lowering (today all of them; sm_89+ mma.sync e4m3/e5m2 and gfx942 MFMA
// fp8 are where a native path takes over from this pass).
#include <vector>

#include "tessera/ir/Builder.h"
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

class WidenFp8Dots : public Pass {
 public:
  const char* name() const override { return "widen-fp8-dots"; }

  void run(Function& f) override { visit(f.body()); }

 private:
  void visit(Block& b) {
    for (size_t i = 0; i < b.ops().size(); ++i) {
      Op& op = *b.ops()[i];
      for (auto& r : op.regions()) visit(r->block());
      if (op.code() != OpCode::Dot) continue;
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
};

}  // namespace

std::unique_ptr<Pass> createWidenFp8DotsPass() { return std::make_unique<WidenFp8Dots>(); }

}  // namespace tessera::ir

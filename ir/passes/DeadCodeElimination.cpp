// Dead code elimination: removes ops whose results are unused and whose
// execution cannot be observed. `for`/`if` are removed too when nothing
// inside them has an effect (loops always terminate: bounds are fixed on
// entry), so a dead chain that ends in a pure loop disappears entirely.
#include "PassUtils.h"
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

bool isPureRegionOp(const Op& op);

bool removableIfUnused(const Op& op) {
  if (op.code() == OpCode::For || op.code() == OpCode::If) return isPureRegionOp(op);
  return !hasSideEffects(op.code());
}

bool isPureRegionOp(const Op& op) {
  for (auto& r : op.regions())
    for (auto& inner : r->block().ops())
      if (inner->code() != OpCode::Yield && !removableIfUnused(*inner)) return false;
  return true;
}

class DCE : public Pass {
 public:
  const char* name() const override { return "dce"; }

  void run(Function& f) override {
    uses_ = passutil::countUses(f);
    sweep(f.body());
  }

 private:
  // Backwards over the block, so a dead chain dies in one sweep: removing a
  // use can only make earlier ops dead. Regions are swept before their op is
  // considered, then the op itself.
  void sweep(Block& b) {
    auto& ops = b.ops();
    for (size_t i = ops.size(); i-- > 0;) {
      Op& op = *ops[i];
      for (auto& r : op.regions()) sweep(r->block());
      bool unused = true;
      for (auto& r : op.results())
        if (uses_[r.get()] != 0) unused = false;
      if (!unused || !removableIfUnused(op)) continue;
      dropUses(op);
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  void dropUses(Op& op) {
    for (Value* v : op.operands()) --uses_[v];
    for (auto& r : op.regions())
      for (auto& inner : r->block().ops()) dropUses(*inner);
  }

  std::unordered_map<const Value*, unsigned> uses_;
};

}  // namespace

std::unique_ptr<Pass> createDeadCodeEliminationPass() { return std::make_unique<DCE>(); }

}  // namespace tessera::ir

// The `strip-asserts` pass: removes every `assert` op (IR.h, "Assertions").
// Any compile that is not checked runs it first; the dead-code pass then
// removes what only the conditions used, so an assertion costs nothing
// outside a checked launch.
#include "PassUtils.h"
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

class StripAsserts : public Pass {
 public:
  const char* name() const override { return "strip-asserts"; }
  void run(Function& f) override { passutil::eraseOps(f.body(), OpCode::Assert); }
};

}  // namespace

std::unique_ptr<Pass> createStripAssertsPass() { return std::make_unique<StripAsserts>(); }

}  // namespace tessera::ir

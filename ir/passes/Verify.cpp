#include "tessera/ir/Pass.h"
#include "tessera/ir/Verifier.h"

namespace tessera::ir {
namespace {
class VerifyPass : public Pass {
 public:
  const char* name() const override { return "verify"; }
  void run(Function& f) override { verify(f); }
};
}  // namespace

std::unique_ptr<Pass> createVerifyPass() { return std::make_unique<VerifyPass>(); }

}  // namespace tessera::ir

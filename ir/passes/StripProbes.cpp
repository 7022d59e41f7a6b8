// The `strip-probes` pass: removes every `probe` op (IR.h, "Profiling").
// Any compile that is not profiled runs it first, so a kernel with scopes
// written into it compiles, pass for pass and byte for byte, as the same
// kernel without them.
#include "PassUtils.h"
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

class StripProbes : public Pass {
 public:
  const char* name() const override { return "strip-probes"; }
  void run(Function& f) override { passutil::eraseOps(f.body(), OpCode::Probe); }
};

}  // namespace

std::unique_ptr<Pass> createStripProbesPass() { return std::make_unique<StripProbes>(); }

}  // namespace tessera::ir

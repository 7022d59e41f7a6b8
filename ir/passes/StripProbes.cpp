// The `strip-probes` pass: removes every `probe` op (IR.h, "Profiling").
// Any compile that is not profiled runs it first, so a kernel with scopes
// written into it compiles, pass for pass and byte for byte, as the same
// kernel without them.
#include "tessera/ir/Pass.h"

namespace tessera::ir {
namespace {

class StripProbes : public Pass {
 public:
  const char* name() const override { return "strip-probes"; }
  void run(Function& f) override { strip(f.body()); }

 private:
  static void strip(Block& b) {
    auto& ops = b.ops();
    std::erase_if(ops, [](const std::unique_ptr<Op>& op) { return op->code() == OpCode::Probe; });
    for (auto& op : ops)
      for (auto& r : op->regions()) strip(r->block());
  }
};

}  // namespace

std::unique_ptr<Pass> createStripProbesPass() { return std::make_unique<StripProbes>(); }

}  // namespace tessera::ir

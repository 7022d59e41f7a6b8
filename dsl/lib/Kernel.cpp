// tessera::Kernel: an immutable, verified kernel function, from a trace or
// from text.
#include "tessera/Kernel.h"

#include "tessera/ir/Parser.h"
#include "tessera/ir/Printer.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

namespace tessera {

Kernel::Kernel(std::shared_ptr<const ir::Function> f) : fn_(std::move(f)) {
  if (fn_) ir::verify(*fn_);
}

const ir::Function& Kernel::ir() const {
  if (!fn_) throw UsageError("tessera::Kernel: the kernel is empty (default-constructed)");
  return *fn_;
}

std::string Kernel::text() const { return ir::print(ir()); }

Kernel Kernel::withCluster(std::array<int, 3> shape) const {
  for (int d : shape)
    if (d < 1)
      throw UsageError("tessera::Kernel::withCluster: @" + name() +
                       ": every dimension of a cluster is a count of programs, at least 1");
  Kernel k = *this;
  k.cluster_ = shape;
  return k;
}

Kernel parseKernel(std::string_view text, const std::string& bufferName, const std::string& name) {
  std::unique_ptr<ir::Module> m = ir::parseModule(text, bufferName);
  auto& fns = m->functions;
  size_t pick = 0;
  if (name.empty()) {
    if (fns.size() != 1)
      throw ParseError(bufferName + ": expected exactly one kernel, found " + std::to_string(fns.size()) +
                       "; name the one to use");
  } else {
    pick = fns.size();
    for (size_t i = 0; i < fns.size(); ++i)
      if (fns[i]->name() == name) pick = i;
    if (pick == fns.size()) {
      std::string have;
      for (auto& f : fns) {
        if (!have.empty()) have += ", ";
        have += "@";
        have += f->name();
      }
      throw ParseError(bufferName + ": no kernel named @" + name + " (found " + (have.empty() ? "none" : have) + ")");
    }
  }
  ir::verify(*fns[pick]);
  return Kernel(std::shared_ptr<const ir::Function>(std::move(fns[pick])));
}

}  // namespace tessera

#include "tessera/ir/Pass.h"

#include "PassUtils.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

namespace tessera::ir {

namespace passutil {
void replaceAllUsesWith(Function& f, Value* from, Value* to) {
  walk(f.body(), [&](Op& op) {
    for (unsigned i = 0; i < op.numOperands(); ++i)
      if (op.operand(i) == from) op.setOperand(i, to);
  });
}

std::unordered_map<const Value*, unsigned> countUses(Function& f) {
  std::unordered_map<const Value*, unsigned> uses;
  walk(f.body(), [&](Op& op) {
    for (Value* v : op.operands()) ++uses[v];
  });
  return uses;
}
}  // namespace passutil

void PassManager::run(Function& f) {
  // Malformed input is the caller's error, not a pass bug: check it first so
  // the blame below is accurate and no pass ever sees invalid IR.
  verify(f);
  for (auto& p : passes_) {
    p->run(f);
    if (after_) after_(p->name(), f);  // before verifying, so a dump shows the broken IR
    try {
      verify(f);
    } catch (const VerifyError& e) {
      throw InternalError(std::string("internal compiler error: the IR is invalid after pass '") + p->name() +
                          "'; please report this as a Tessera bug:\n" + e.what());
    }
  }
}

std::vector<std::string> passNames() {
  return {
#define TS_PASS(name, factory) name,
#include "tessera/ir/Passes.def"
  };
}

std::unique_ptr<Pass> createPassByName(const std::string& name) {
#define TS_PASS(pname, factory) \
  if (name == pname) return factory();
#include "tessera/ir/Passes.def"
  std::string known;
  for (const std::string& n : passNames()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError("unknown pass '" + name + "'; the passes are " + known);
}

void addDefaultPasses(PassManager& pm) {
  pm.add(createCanonicalizePass());
  pm.add(createCSEPass());
  pm.add(createDeadCodeEliminationPass());
}

}  // namespace tessera::ir

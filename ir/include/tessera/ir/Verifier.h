// Verifier: the single authority on well-formed IR. Throws VerifyError whose
// message names the op (textual form), the rule broken, and the op's source
// location (the user's file:line when the IR was traced from the DSL).
#pragma once

#include "tessera/ir/IR.h"

namespace tessera::ir {

void verify(const Function& f);
void verify(const Module& m);

}  // namespace tessera::ir

// Verifier: the single authority on well-formed IR. Throws VerifyError whose
// message names the op (textual form), the rule broken, and the op's source
// location (the user's file:line when the IR was traced from the DSL).
#pragma once

#include "tessera/ir/IR.h"

namespace tessera::ir {

void verify(const Function& f);
void verify(const Module& m);

/// The pipeline checks alone (ir/lib/PipelineVerifier.cpp), on a function
/// whose ops are otherwise well formed; verify() runs them. Checks the form
/// of `for {stages = S}` loops as written, and proves by symbolic simulation
/// that every async copy / async_wait / barrier schedule obeys the memory
/// model of IR.h. Throws VerifyError naming the buffer and both ops.
void verifyPipelines(const Function& f);

}  // namespace tessera::ir

// Compile-time resource checks of a GPU kernel against its target, run by
// compileGpu before any code is generated (private to codegen).
#pragma once

#include <string>

namespace tessera::ir {
class Function;

class LayoutAnalysis;

/// Throws ResourceError when the values a loop carries from one iteration to
/// the next (the GEMM accumulator, above all) need more 32-bit registers per
/// thread, in the layouts chosen for them, than one thread of `arch` can
/// have (`maxRegisters`). That is a lower bound on what the loop needs: such
/// a configuration can only run by spilling its loop state every iteration.
/// The message names the loop (the user's file:line), each carried tile
/// with its registers per thread, and suggests a number of warps or tile
/// sizes that fit.
void checkRegisterBudget(const ir::Function& f, const LayoutAnalysis& la, int maxRegisters, const std::string& arch);

/// How many times a thread's register file one tile value may take before
/// the compile is refused (checkValueBudget).
constexpr int kValueBudgetFactor = 4;

/// Throws ResourceError when one tile value would hold more than
/// kValueBudgetFactor x `maxRegisters` 32-bit registers per thread in its
/// layout (e.g. arange(1 << 20) in one program): such a tile can only live in
/// spilled memory, and lowering it element by element would take seconds to
/// minutes and gigabytes. Names the op (the user's file:line), the tile, its
/// values per thread and the tile size that fits.
void checkValueBudget(const ir::Function& f, const LayoutAnalysis& la, int maxRegisters, const std::string& arch);

}  // namespace tessera::ir

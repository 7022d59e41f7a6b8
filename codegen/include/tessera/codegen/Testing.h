// Test hooks into code generation that need no LLVM header: they let tests
// (and tools) run individual pieces of generated code on the host.
#pragma once

#include <string>
#include <vector>

namespace tessera::codegen::testing {

/// Evaluates one of the vector math emitters ("exp", "exp2", "log", "log2",
/// "tanh", "erf") on every element of `in`: builds a small LLVM module whose
/// loop applies the emitter to <vectorWidth x float> chunks (vectorWidth 1
/// uses the scalar `float` path), optimises it at -O3 for the host, JIT-
/// compiles it and runs it. The input is padded internally to a multiple of
/// vectorWidth; the result has in.size() elements. `cpu` pins the LLVM cpu
/// ("x86-64-v3", "x86-64-v4"; "" = the host); one the host cannot run is a
/// CompileError.
/// Throws CompileError for an unknown function name, a vectorWidth of 0 or
/// above 1024, or a failure of LLVM to build or run the code.
std::vector<float> evalUnaryF32(const std::string& fn, const std::vector<float>& in, unsigned vectorWidth = 16,
                                const std::string& cpu = "");

}  // namespace tessera::codegen::testing

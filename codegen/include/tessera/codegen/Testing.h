// Test hooks into code generation that need no LLVM header: they let tests
// (and tools) run individual pieces of generated code on the host.
#pragma once

#include <string>
#include <vector>

namespace tessera::codegen::testing {

/// Evaluates one of the vector math emitters (codegen/llvm/VectorMath.h) on
/// every element of `in`: `fn` is the name of a transcendental op of the
/// tile IR ("exp", "exp2", "log", "log2", "tanh", "erf", "sin", "cos",
/// "sigmoid", "log1p", "expm1"; "pow" for the binary ones). Builds a small
/// LLVM module whose loop applies the emitter to <vectorWidth x T> chunks
/// (vectorWidth 1 uses the scalar path), optimises it at -O3 for the host,
/// JIT-compiles it and runs it. The input is padded internally to a
/// multiple of vectorWidth; the result has in.size() elements. `cpu` pins
/// the LLVM cpu ("x86-64-v3", "x86-64-v4"; "" = the host); one the host
/// cannot run is a CompileError.
/// Throws CompileError for an unknown function name (or the wrong arity), a
/// vectorWidth of 0 or above 1024, operands of different lengths, or a
/// failure of LLVM to build or run the code.
std::vector<float> evalUnaryF32(const std::string& fn, const std::vector<float>& in, unsigned vectorWidth = 16,
                                const std::string& cpu = "");
std::vector<double> evalUnaryF64(const std::string& fn, const std::vector<double>& in, unsigned vectorWidth = 8,
                                 const std::string& cpu = "");
std::vector<float> evalBinaryF32(const std::string& fn, const std::vector<float>& x, const std::vector<float>& y,
                                 unsigned vectorWidth = 16, const std::string& cpu = "");
std::vector<double> evalBinaryF64(const std::string& fn, const std::vector<double>& x, const std::vector<double>& y,
                                  unsigned vectorWidth = 8, const std::string& cpu = "");

}  // namespace tessera::codegen::testing

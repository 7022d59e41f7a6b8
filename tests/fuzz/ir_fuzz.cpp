// libFuzzer harness: bytes -> textual tile IR -> parse -> verify -> compile
// for the CPU (through the JIT), NVPTX sm_80 and sm_90a (wgmma, TMA copies
// where the seeds' alignment facts allow them), and AMDGPU gfx942 (MFMA,
// wave64) and gfx1100 (WMMA, wave32) to linked code objects. Run by
// scripts/sanitize.sh over tests/fuzz/corpus with tests/fuzz/tir.dict.
//
// Malformed input is the normal case: every tessera::Error a stage throws
// (ParseError, VerifyError, CompileError, ResourceError, ...) is the expected
// answer to bad IR and is swallowed. Two outcomes are bugs and crash the run
// so libFuzzer keeps the input: an InternalError (a compiler invariant that
// did not hold), and any other exception escaping Tessera (a std:: exception
// where the user should have got a message with a location).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tessera/codegen/Compiler.h"
#include "tessera/codegen/Target.h"
#include "tessera/ir/Parser.h"
#include "tessera/ir/Verifier.h"
#include "tessera/support/Error.h"

namespace {

// Kernels beyond a few KiB add compile time, not new code paths.
constexpr size_t kMaxInputBytes = 4096;

void compileFor(const tessera::ir::Function& f, const tessera::codegen::Target& target) {
  try {
    (void)tessera::codegen::compile(f, target);
  } catch (const tessera::InternalError&) {
    throw;
  } catch (const tessera::Error&) {
    // Rejected with a user error (e.g. over a target's limits): expected.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInputBytes) return -1;  // -1: never added to the corpus
  static const tessera::codegen::Target cpu = tessera::codegen::Target::cpu();
  static const tessera::codegen::Target ptx = tessera::codegen::Target::parse("nvptx:sm_80");
  static const tessera::codegen::Target hopper = tessera::codegen::Target::parse("nvptx:sm_90a");
  static const tessera::codegen::Target cdna = tessera::codegen::Target::parse("amdgpu:gfx942");
  static const tessera::codegen::Target rdna = tessera::codegen::Target::parse("amdgpu:gfx1100");
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto module = tessera::ir::parseModule(text, "<fuzz>");
    tessera::ir::verify(*module);
    for (const auto& f : module->functions) {
      compileFor(*f, cpu);
      compileFor(*f, ptx);
      compileFor(*f, hopper);
      compileFor(*f, cdna);
      compileFor(*f, rdna);
    }
  } catch (const tessera::InternalError& e) {
    std::fprintf(stderr, "tessera::InternalError (a compiler bug): %s\n", e.what());
    std::abort();
  } catch (const tessera::Error&) {
    // Parse or verify error: the expected answer to malformed IR.
  }
  return 0;
}

// Host CPU selection for the CPU backend: which ISA the kernel is compiled
// for, the LLVM cpu name / feature string that realise it, and the vector
// width the lowering uses. Private to codegen (the public entry point is
// tessera::codegen::hostIsa()).
#pragma once

#include <string>

namespace tessera::codegen {

struct CpuTargetInfo {
  std::string triple;    // host triple
  std::string cpu;       // LLVM cpu name ("znver3", "x86-64-v4", ...)
  std::string features;  // comma-separated "+f,-g" LLVM feature string
  std::string isa;       // "avx512", "avx2" or "sse2"
  int lanes = 8;         // vector lanes per chunk (16 for AVX-512, 8 for AVX2, 4 for SSE2)
  int vectorBits = 256;  // preferred vector width in bits
  bool runnable = true;  // false if the host cannot execute this ISA
};

/// Resolves an ISA override ("" = detect) to a concrete target. Throws
/// CompileError for an unknown override spelling.
CpuTargetInfo selectCpuTarget(const std::string& isaOverride);

}  // namespace tessera::codegen

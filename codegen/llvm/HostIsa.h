// CPU target selection for the CPU backend: which LLVM cpu the kernel is
// compiled for (the host, or a pinned name such as "x86-64-v3"), the feature
// string that realises it, the vector width the lowering uses, and whether
// this host can execute the result. Private to codegen (the public entry
// points are tessera::codegen::hostIsa() and cannotRunOnHost()).
#pragma once

#include <string>

namespace tessera::codegen {

struct CpuTargetInfo {
  std::string triple;    // host triple
  std::string cpu;       // LLVM cpu name ("znver3", "x86-64-v4", ...)
  std::string features;  // comma-separated "+f,-g" LLVM feature string
  std::string isa;       // "avx512", "avx2" or "sse2": the lowering's vector width class
  int lanes = 8;         // vector lanes per chunk (16 for AVX-512, 8 for AVX2, 4 for SSE2)
  int vectorBits = 256;  // preferred vector width in bits
  /// x86 AMX matrix tiles for bf16 (tdpbf16ps) and i8 (tdpbssd) dots: the
  /// cpu has them and, for the host, the OS granted the tile state
  /// (tessera/support/HostTiles.h). CompileOptions::cpuTiles may still
  /// turn their use off.
  bool amxBf16 = false;
  bool amxInt8 = false;
  /// Why this host cannot execute the code ("" when it can): the ISA
  /// features the cpu has and the host lacks.
  std::string notRunnable;
};

/// Resolves a CPU target: "" is the host (as detected, or as narrowed by
/// TESSERA_HOST_CPU), anything else an LLVM cpu name for the host's
/// architecture. Throws CompileError for an unknown name, listing examples.
CpuTargetInfo selectCpuTarget(const std::string& cpuName);

/// True when `cpuName` is a cpu LLVM knows for the host's architecture.
bool isKnownCpu(const std::string& cpuName);

/// The host's vector ISA as detected, narrowed by TESSERA_HOST_CPU
/// ("avx512", "avx2", "sse2"): codegen::hostIsa().
std::string detectedHostIsa();

}  // namespace tessera::codegen

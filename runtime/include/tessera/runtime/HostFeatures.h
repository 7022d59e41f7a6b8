// Whether this host can execute CPU code compiled ahead of time for a given
// cpu: exported kernels (docs/aot.md) carry the ISA features their code may
// use, and their launcher asks here before loading, so a kernel built for
// AVX-512 fails with a DeviceError on an AVX2-only host instead of dying
// of SIGILL at its first launch. No LLVM: the runtime reads cpuid itself.
#pragma once

#include <string>
#include <vector>

namespace tessera::rt {

/// The features of `features` (LLVM names: "avx2", "avx512f", "fma", ...)
/// this host lacks, comma-separated; "" when it has them all. Features the
/// runtime has no test for count as present. TESSERA_HOST_CPU=x86-64-v2,
/// -v3 or -v4 narrows the host to that level, as it does for the compiler;
/// any other non-empty value is a DeviceError (the runtime cannot know the
/// features of another cpu name without LLVM).
std::string missingHostFeatures(const std::vector<std::string>& features);

/// Throws DeviceError naming `kernel`, `cpu` and the missing features when
/// this host cannot execute code compiled for `cpu` with `features`.
void requireHostFeatures(const std::string& kernel, const std::string& cpu, const std::vector<std::string>& features);

}  // namespace tessera::rt

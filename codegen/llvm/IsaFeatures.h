// The ISA features code compiled for a cpu may use, as the runtime tests
// them before loading exported CPU code (tessera/runtime/HostFeatures.h).
// Private to codegen; defined in HostIsa.cpp beside the host detection whose
// feature names it shares.
#pragma once

#include <string>
#include <vector>

namespace tessera::codegen {

/// The ISA features (LLVM names, sorted) that cpu `cpuName` enables and the
/// host detector knows of: for "" the host's own (as narrowed by
/// TESSERA_HOST_CPU). Tuning flags are left out. CompileError for an unknown cpu.
std::vector<std::string> isaFeatures(const std::string& cpuName);

}  // namespace tessera::codegen

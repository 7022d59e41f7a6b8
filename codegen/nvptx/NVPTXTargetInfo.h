// NVIDIA's side of the GPU compile as the driver reaches it: the hooks of
// an NVIDIA row of Targets.def, and the CUDA toolkit's tools (ptxas,
// nvdisasm) for what the driver reports. Private to codegen.
#pragma once

#include <memory>
#include <string>

#include "codegen/gpu/GpuCompile.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

/// The GPU lowering's hooks for configuration `c` (of an NVIDIA row).
std::unique_ptr<GpuTargetInfo> createNVPTXTargetInfo(const GpuConfig& c);

namespace nvptx {
/// SASS of kernel `kernel`'s PTX for `arch`: ptxas, then nvdisasm or
/// cuobjdump (DeviceError naming what is missing).
std::string sass(const std::string& ptx, const std::string& arch, const std::string& kernel);
/// The CUDA toolkit's line of toolchainVersions (ptxas's version or that
/// none was found) and libdevice's.
std::string toolchainLines();
}  // namespace nvptx

}  // namespace tessera::codegen

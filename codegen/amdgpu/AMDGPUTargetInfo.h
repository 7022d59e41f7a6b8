// AMD's side of the GPU compile as the driver reaches it: the hooks of an
// AMD row of Targets.def. Private to codegen.
#pragma once

#include <memory>

#include "codegen/gpu/GpuCompile.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

/// The GPU lowering's hooks for configuration `c` (of an AMD row).
std::unique_ptr<GpuTargetInfo> createAMDGPUTargetInfo(const GpuConfig& c);

}  // namespace tessera::codegen

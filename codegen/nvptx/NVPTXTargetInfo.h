// NVIDIA's side of the GPU compile as the driver reaches it: the hooks of
// an NVIDIA row of Targets.def, and the CUDA toolkit's tools (ptxas,
// nvdisasm) for what the driver reports. Private to codegen.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/gpu/GpuCompile.h"
#include "codegen/llvm/GpuToolchain.h"
#include "tessera/support/Targets.h"

namespace tessera::codegen {

/// The GPU lowering's hooks for configuration `c` (of an NVIDIA row).
std::unique_ptr<GpuTargetInfo> createNVPTXTargetInfo(const GpuConfig& c);

namespace nvptx {
/// The ptxas Tessera runs (/usr/local/cuda/bin/ptxas, then PATH;
/// TESSERA_PTXAS overrides) and its version, read from `ptxas --version`
/// once per file.
struct Ptxas {
  std::string path;     // "" when none is found
  int version = 0;      // its CUDA release as CUDA_VERSION spells it (13000: 13.0); 0 when unknown
  std::string release;  // "13.0 (V13.0.88)", or why the version is unknown
  std::string line;     // the release line ptxas printed ("Cuda compilation tools, release 13.0, V13.0.88")
  /// "ptxas 13.0 (V13.0.88)": how every diagnostic names it.
  std::string str() const;
};
Ptxas findPtxas();
/// The ptxas to run for `row`'s PTX, for `purpose` ("resources of @k"):
/// DeviceError when there is none, CompileError naming both versions when
/// it is older than the row's minCuda (Targets.def), before it runs.
Ptxas ptxasFor(const GpuArch& row, const std::string& purpose);
/// Runs ptxas `p` on `ptx` for `row` with `flags`, the cubin in dir's
/// k.cubin; a DeviceError naming ptxas's version when it rejects the PTX.
ToolResult runPtxas(const Ptxas& p, const GpuArch& row, const std::string& ptx, const std::string& kernel,
                    const std::vector<std::string>& flags, TempDir& dir);
/// SASS of kernel `kernel`'s PTX for `row`: ptxas, then nvdisasm or
/// cuobjdump (DeviceError naming what is missing).
std::string sass(const std::string& ptx, const GpuArch& row, const std::string& kernel);
/// The CUDA toolkit's line of toolchainVersions (ptxas's version or that
/// none was found) and libdevice's.
std::string toolchainLines();
}  // namespace nvptx

}  // namespace tessera::codegen

// The GPU architecture table (Targets.def) as data: LLVM-free, for every
// layer (the IR's resource checks, codegen, the runtime's emulator device,
// the tool).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct GpuArch {
  enum class Vendor { NVIDIA, AMD };
  Vendor vendor;
  const char* arch;           // "sm_80", "gfx942", ...
  unsigned warpSize;          // 32, or 64 on CDNA
  int64_t maxSharedBytes;     // per block / workgroup
  int maxRegistersPerThread;  // 32-bit registers one thread can address

  /// The target spelling: "nvptx:sm_80", "amdgpu:gfx942".
  std::string spelling() const { return std::string(vendor == Vendor::NVIDIA ? "nvptx:" : "amdgpu:") + arch; }
};

/// Every row of Targets.def, NVIDIA first, in table order.
const std::vector<GpuArch>& gpuArchs();
/// The row of `arch` ("sm_80", "gfx942") of `vendor`, or null.
const GpuArch* findGpuArch(GpuArch::Vendor vendor, const std::string& arch);
/// "sm_80|sm_86|..." of one vendor, for usage text and error messages.
std::string gpuArchList(GpuArch::Vendor vendor, const char* separator = "|");

}  // namespace tessera

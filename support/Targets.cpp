#include "tessera/support/Targets.h"

namespace tessera {

const std::vector<GpuArch>& gpuArchs() {
  // NVIDIA: 255 registers per thread on sm_80+. AMD: the VGPRs one lane of a
  // wave can address (512 on CDNA with the accumulation VGPRs, 256 on RDNA3).
  static const std::vector<GpuArch> rows = {
#define TS_NVPTX_TARGET(arch, sharedKiB, ptxFeature, smemPerSmKiB, threadsPerSm, blocksPerSm) \
  {GpuArch::Vendor::NVIDIA, #arch, 32, int64_t{sharedKiB} * 1024, 255},
#define TS_AMDGPU_TARGET(arch, wave, features, ldsKiB, vgprsPerSimd, maxWavesPerSimd, simdsPerCu, ldsPerCuKiB) \
  {GpuArch::Vendor::AMD, #arch, wave, int64_t{ldsKiB} * 1024, (wave) == 64 ? 512 : 256},
#include "tessera/support/Targets.def"
  };
  return rows;
}

const GpuArch* findGpuArch(GpuArch::Vendor vendor, const std::string& arch) {
  for (const GpuArch& a : gpuArchs())
    if (a.vendor == vendor && arch == a.arch) return &a;
  return nullptr;
}

std::string gpuArchList(GpuArch::Vendor vendor, const char* separator) {
  std::string r;
  for (const GpuArch& a : gpuArchs())
    if (a.vendor == vendor) r += (r.empty() ? "" : separator) + std::string(a.arch);
  return r;
}

}  // namespace tessera

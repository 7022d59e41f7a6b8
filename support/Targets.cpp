#include "tessera/support/Targets.h"

#include <algorithm>

namespace tessera {

const std::vector<GpuArch>& gpuArchs() {
  // NVIDIA: the registers per thread of the row (255). AMD: the VGPRs one
  // lane of a wave can address (512 on CDNA with the accumulation VGPRs, 256
  // on RDNA3).
  static const std::vector<GpuArch> rows = {
#define TS_NVPTX_TARGET(arch_, warp, sharedKiB, ptxIsa_, minCuda_, smemPerSmKiB, threadsPerSm_, blocksPerSm_, \
                        regsPerSm, regsPerThread, fp8Mma_, wgmma_, tma, tcgen05_, tcgen05I8_, tmemColumns_,   \
                        maxClusterBlocks_, mmaBlockScale_, clc_)                                              \
  {.vendor = GpuArch::Vendor::NVIDIA,                                                                         \
   .arch = #arch_,                                                                                            \
   .warpSize = warp,                                                                                          \
   .maxSharedBytes = int64_t{sharedKiB} * 1024,                                                               \
   .maxRegistersPerThread = regsPerThread,                                                                    \
   .llvmFeatures = "+ptx" #ptxIsa_,                                                                           \
   .sharedPerUnit = int64_t{smemPerSmKiB} * 1024,                                                             \
   .threadsPerSm = threadsPerSm_,                                                                             \
   .blocksPerSm = blocksPerSm_,                                                                               \
   .registersPerSm = regsPerSm,                                                                               \
   .ptxIsa = ptxIsa_,                                                                                         \
   .minCuda = minCuda_,                                                                                       \
   .fp8Mma = fp8Mma_,                                                                                         \
   .wgmma = wgmma_,                                                                                           \
   .tensorCopies = tma,                                                                                       \
   .tcgen05 = tcgen05_,                                                                                       \
   .tcgen05I8 = tcgen05I8_,                                                                                   \
   .tmemColumns = tmemColumns_,                                                                               \
   .maxClusterBlocks = maxClusterBlocks_,                                                                     \
   .mmaBlockScale = mmaBlockScale_,                                                                           \
   .clusterLaunchControl = clc_},
#define TS_AMDGPU_TARGET(arch_, wave, features, ldsKiB, vgprsPerSimd_, maxWavesPerSimd_, simdsPerCu_, ldsPerCuKiB, \
                         vgprGranule_, gfxMajor_, matrixCore_, i8MfmaK_, fp8Mfma_, f16MfmaK_, f8f6f4MfmaK_,        \
                         wmmaLaneElems_, fp8Wmma_)                                                                 \
  {.vendor = GpuArch::Vendor::AMD,                                                                                 \
   .arch = #arch_,                                                                                                 \
   .warpSize = wave,                                                                                               \
   .maxSharedBytes = int64_t{ldsKiB} * 1024,                                                                       \
   .maxRegistersPerThread = (wave) == 64 ? 512 : 256,                                                              \
   .llvmFeatures = features,                                                                                       \
   .sharedPerUnit = int64_t{ldsPerCuKiB} * 1024,                                                                   \
   .vgprsPerSimd = vgprsPerSimd_,                                                                                  \
   .maxWavesPerSimd = maxWavesPerSimd_,                                                                            \
   .simdsPerCu = simdsPerCu_,                                                                                      \
   .vgprGranule = vgprGranule_,                                                                                    \
   .gfxMajor = gfxMajor_,                                                                                          \
   .matrixCore = GpuArch::MatrixCore::matrixCore_,                                                                 \
   .i8MfmaK = i8MfmaK_,                                                                                            \
   .fp8Mfma = GpuArch::Fp8Mfma::fp8Mfma_,                                                                          \
   .f16MfmaK = f16MfmaK_,                                                                                          \
   .f8f6f4MfmaK = f8f6f4MfmaK_,                                                                                    \
   .wmmaLaneElems = wmmaLaneElems_,                                                                                \
   .fp8Wmma = fp8Wmma_},
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

std::string gpuTargetsWith(bool GpuArch::* column, const char* separator) {
  std::string r;
  for (const GpuArch& a : gpuArchs())
    if (a.*column) r += (r.empty() ? "" : separator) + a.spelling();
  return r;
}

Occupancy occupancy(const GpuArch& a, int regs, int64_t sharedBytes, int threadsPerBlock) {
  Occupancy o;
  const int64_t threads = std::max(threadsPerBlock, 1);
  const int64_t warps = (threads + a.warpSize - 1) / a.warpSize;
  auto s = [](int64_t v) { return std::to_string(v); };
  if (a.vendor == GpuArch::Vendor::NVIDIA) {
    const int64_t regsPerWarp = (std::max(regs, 1) * int64_t{a.warpSize} + 255) / 256 * 256;
    const int64_t byRegs = a.registersPerSm / (regsPerWarp * warps);
    const int64_t byShared = a.sharedPerUnit / ((std::max<int64_t>(sharedBytes, 0) + 127) / 128 * 128 + 1024);
    const int64_t byThreads = a.threadsPerSm / threads;
    o.blocks = static_cast<int>(std::min({byRegs, byShared, byThreads, int64_t{a.blocksPerSm}}));
    o.value = static_cast<int>(o.blocks * warps);
    o.text = s(o.blocks) + " blocks per SM, " + s(o.value) + " of " + s(a.threadsPerSm / a.warpSize) +
             " warps (register limit " + s(byRegs) + ", shared-memory limit " + s(byShared) + ", thread limit " +
             s(byThreads) + ", block limit " + s(a.blocksPerSm) + ")";
    return o;
  }
  const int gran = a.vgprGranule;
  const int vg = std::max(1, (regs + gran - 1) / gran * gran);
  const int64_t byVgpr = std::min(a.maxWavesPerSimd, a.vgprsPerSimd / vg);
  const int64_t groups = sharedBytes > 0 ? a.sharedPerUnit / sharedBytes : int64_t{1} << 20;
  const int64_t byLds = groups * warps / a.simdsPerCu;
  o.value = static_cast<int>(std::max<int64_t>(0, std::min(byVgpr, byLds)));
  o.blocks = static_cast<int>(std::min<int64_t>(groups, o.value * a.simdsPerCu / std::max<int64_t>(warps, 1)));
  o.text = s(o.value) + " waves per SIMD (VGPR limit " + s(byVgpr) + ", LDS limit " +
           s(std::min<int64_t>(byLds, 1 << 16)) + ", max " + s(a.maxWavesPerSimd) + ")";
  return o;
}

}  // namespace tessera

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
  /// AMD's matrix instructions (Targets.def's matrixCore column).
  enum class MatrixCore { None, Mfma, Wmma };
  /// The formats AMD's fp8/bf8 MFMAs read (Targets.def's fp8Mfma column):
  /// gfx942's FNUZ e4m3fnuz / e5m2fnuz, gfx950's OCP e4m3 / e5m2.
  enum class Fp8Mfma { None, Fnuz, Ocp };
  Vendor vendor;
  const char* arch;           // "sm_80", "gfx942", ...
  unsigned warpSize;          // 32, or 64 on CDNA
  int64_t maxSharedBytes;     // per block / workgroup
  int maxRegistersPerThread;  // 32-bit registers one thread can address
  const char* llvmFeatures;   // the feature string of LLVM's TargetMachine ("+ptx84", "+wavefrontsize64")
  /// What an SM / CU holds, for occupancy: NVIDIA shared memory, threads
  /// and block slots per SM (and registersPerSm); AMD VGPRs per SIMD lane,
  /// wave slots per SIMD, SIMDs per CU and LDS per CU.
  int64_t sharedPerUnit;                                      // bytes of shared memory per SM / LDS per CU
  int threadsPerSm = 0, blocksPerSm = 0;                      // NVIDIA
  int vgprsPerSimd = 0, maxWavesPerSimd = 0, simdsPerCu = 0;  // AMD
  int vgprGranule = 8;                                        // AMD: VGPRs are allocated in blocks of it
  int registersPerSm = 0;                                     // NVIDIA: 32-bit registers per SM
  /// NVIDIA: the PTX ISA version the code states (major * 10 + minor: 84
  /// is 8.4) and the oldest CUDA toolkit whose ptxas assembles it (major *
  /// 1000 + minor * 10, as CUDA_VERSION: 12080 is 12.8).
  int ptxIsa = 0, minCuda = 0;
  /// Instructions an architecture has (Targets.def explains each column).
  bool fp8Mma = false, wgmma = false, tensorCopies = false;  // NVIDIA
  bool tcgen05 = false;                                      // NVIDIA: Blackwell's tcgen05 MMA and tensor memory
  bool tcgen05I8 = false;                                    // NVIDIA: tcgen05.mma kind::i8
  int tmemColumns = 0;                                       // NVIDIA: tensor memory per SM, 32-bit columns
  int maxClusterBlocks = 0;                                  // NVIDIA: portable cluster size; 0: no clusters
  bool mmaBlockScale = false;                                // NVIDIA: mma.sync .kind::mxf8f6f4.block_scale
  bool clusterLaunchControl = false;                         // NVIDIA: clusterlaunchcontrol.try_cancel
  int gfxMajor = 0;                                          // AMD: 9 (CDNA), 11 (RDNA3), 12 (RDNA4)
  MatrixCore matrixCore = MatrixCore::None;                  // AMD
  int i8MfmaK = 0;                                           // AMD: K of the i8 MFMA, 0: none
  Fp8Mfma fp8Mfma = Fp8Mfma::None;                           // AMD: the fp8/bf8 MFMAs' formats
  int f16MfmaK = 0;                                          // AMD: K of the 16x16 f16/bf16 MFMA, 0: none
  int f8f6f4MfmaK = 0;                                       // AMD: K of the 16x16 f8f6f4 MFMA (128), 0: none
  int wmmaLaneElems = 0;                                     // AMD: operand elements per lane of WMMA 16x16x16
  bool fp8Wmma = false;                                      // AMD: the OCP fp8/bf8 WMMAs

  /// The target spelling: "nvptx:sm_80", "amdgpu:gfx942".
  std::string spelling() const { return std::string(vendor == Vendor::NVIDIA ? "nvptx:" : "amdgpu:") + arch; }
};

/// Every row of Targets.def, NVIDIA first, in table order.
const std::vector<GpuArch>& gpuArchs();
/// The row of `arch` ("sm_80", "gfx942") of `vendor`, or null.
const GpuArch* findGpuArch(GpuArch::Vendor vendor, const std::string& arch);
/// Occupancy of a kernel using `regs` registers (VGPRs) per thread,
/// `sharedBytes` of shared memory (LDS) per block and `threadsPerBlock`
/// threads: NVIDIA blocks and warps per SM, limited by registers (allocated
/// per warp in units of 256), shared memory (units of 128 bytes plus the
/// 1 KiB the system reserves per block on sm_80+), threads and block slots;
/// AMD waves per SIMD, limited by VGPRs (allocated in granules of 8 on
/// wave64, 16 on wave32), wave slots and LDS per CU. `text` names the value
/// and every limit ("5 blocks per SM, 20 of 64 warps (register limit 5,
/// ...)" / "7 waves per SIMD (VGPR limit 8, LDS limit 7, max 8)").
struct Occupancy {
  int blocks = 0;  // NVIDIA: resident blocks per SM; AMD: workgroups per CU
  int value = 0;   // NVIDIA: warps per SM; AMD: waves per SIMD
  std::string text;
};
Occupancy occupancy(const GpuArch& arch, int regs, int64_t sharedBytes, int threadsPerBlock);

/// "sm_80|sm_86|..." of one vendor, for usage text and error messages.
std::string gpuArchList(GpuArch::Vendor vendor, const char* separator = "|");
/// The spellings of the rows that have `column` ("nvptx:sm_90a" for
/// &GpuArch::tensorCopies), for error messages.
std::string gpuTargetsWith(bool GpuArch::* column, const char* separator = ", ");

}  // namespace tessera

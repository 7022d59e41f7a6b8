// The launch limits GPU drivers enforce: one table for every place that
// checks a GPU launch, so that the SIMT emulator refuses what the driver of
// the architecture it emulates would refuse (a grid every NVIDIA GPU refuses
// must not run on Device::emulator("nvptx:sm_80")), with the same error.
//
//   - the emulator device (runtime/lib/EmuDevice.cpp) and its machine
//     (runtime/emu/Machine.cpp, emu::launch) check the row of the vendor
//     they emulate;
//   - the HIP device checks the AMD row before hipModuleLaunchKernel;
//   - the CUDA device checks the NVIDIA row with the grid limits its driver
//     reports (CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_*).
//
// The limits are the vendor's, the same for every architecture Tessera
// targets, so they are not columns of Targets.def.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/support/Targets.h"

namespace tessera::rt {

struct LaunchLimits {
  uint32_t maxGrid[3];          // blocks in each grid dimension
  uint32_t maxBlock[3];         // threads in each block dimension
  uint32_t maxThreadsPerBlock;  // the block dimensions' product
  /// Grid times block in each dimension (HIP counts a grid in work-items,
  /// 32-bit per dimension); 0 when there is no such limit.
  uint64_t maxWorkItems;
};

/// NVIDIA, every compute capability from 3.0 (so every sm_80..sm_120a
/// target): cuLaunchKernel refuses gridDim.x > 2^31 - 1, gridDim.y/z >
/// 65535, more than 1024 threads per block, blockDim.x/y > 1024 and
/// blockDim.z > 64 (CUDA C++ Programming Guide, "Technical Specifications
/// per Compute Capability").
inline constexpr LaunchLimits kNvidiaLaunchLimits{{2147483647u, 65535u, 65535u}, {1024, 1024, 64}, 1024, 0};

/// AMD through HIP (clr's hipModuleLaunchKernel and its launch parameter
/// checks): grid times block at most 2^32 - 1 work-items in each dimension
/// (the AQL dispatch packet's 32-bit grid size), at most 1024 threads per
/// block (maxThreadsPerBlock, and maxThreadsDim in each dimension, of every
/// AMD GPU), and gridDim.x <= 2^31 - 1, gridDim.y/z <= 65536.
inline constexpr LaunchLimits kAmdLaunchLimits{{2147483647u, 65536u, 65536u}, {1024, 1024, 1024}, 1024, 0xffffffffull};

/// The row of a vendor.
const LaunchLimits& launchLimits(GpuArch::Vendor vendor);

/// "" when a launch of `grid` blocks of `block` threads is within `limits`;
/// else which limit it exceeds, naming `device` ("cuda:0 NVIDIA A100",
/// "emu:nvptx:sm_80 (SIMT emulator, warp 32)"):
///   grid {1, 65536, 1} exceeds <device>'s limit of 65535 blocks in dimension y
/// Callers prefix the kernel's name and throw LaunchError.
std::string launchLimitViolation(const LaunchLimits& limits, const uint32_t grid[3], const uint32_t block[3],
                                 const std::string& device);

}  // namespace tessera::rt

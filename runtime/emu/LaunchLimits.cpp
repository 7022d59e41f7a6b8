// The vendors' launch limits (tessera/runtime/LaunchLimits.h). Here, in the
// emulator's library, because its machine checks them too, and the runtime's
// devices link it (tessera_emu depends on nothing of the runtime).

#include "tessera/runtime/LaunchLimits.h"

namespace tessera::rt {
namespace {

std::string dim3Text(const uint32_t v[3]) {
  return "{" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " + std::to_string(v[2]) + "}";
}

}  // namespace

const LaunchLimits& launchLimits(GpuArch::Vendor vendor) {
  return vendor == GpuArch::Vendor::AMD ? kAmdLaunchLimits : kNvidiaLaunchLimits;
}

std::string launchLimitViolation(const LaunchLimits& limits, const uint32_t grid[3], const uint32_t block[3],
                                 const std::string& device) {
  static const char* const kAxis[3] = {"x", "y", "z"};
  // The block first: a block the device cannot run is wrong whatever the grid.
  const uint64_t threads = uint64_t{block[0]} * block[1] * block[2];
  if (threads > limits.maxThreadsPerBlock)
    return "a block of " + std::to_string(threads) + " threads exceeds " + device + "'s limit of " +
           std::to_string(limits.maxThreadsPerBlock) + " threads per block";
  for (int d = 0; d < 3; ++d)
    if (block[d] > limits.maxBlock[d])
      return "block " + dim3Text(block) + " exceeds " + device + "'s limit of " + std::to_string(limits.maxBlock[d]) +
             " threads in dimension " + kAxis[d];
  for (int d = 0; d < 3; ++d)
    if (grid[d] > limits.maxGrid[d])
      return "grid " + dim3Text(grid) + " exceeds " + device + "'s limit of " + std::to_string(limits.maxGrid[d]) +
             " blocks in dimension " + kAxis[d];
  if (limits.maxWorkItems)
    for (int d = 0; d < 3; ++d) {
      const uint64_t items = uint64_t{grid[d]} * block[d];
      if (items > limits.maxWorkItems)
        return "grid " + dim3Text(grid) + " of blocks " + dim3Text(block) + " is " + std::to_string(items) +
               " work-items in dimension " + kAxis[d] + ", over " + device + "'s limit of " +
               std::to_string(limits.maxWorkItems) + " work-items per dimension";
    }
  return {};
}

}  // namespace tessera::rt

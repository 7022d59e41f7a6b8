// The device side of a profiled launch (tessera/support/Profile.h,
// tessera/runtime/Profile.h): the buffer the kernel records into, its
// header, and the decoding of what the kernel wrote into a Profile.
#pragma once

#include "DeviceImpl.h"
#include "tessera/runtime/Profile.h"

namespace tessera::rt {

class ProfileBuffer {
 public:
  /// Allocates and initialises the buffer of a launch of `kernel` over
  /// `programs` programs in all; without `opts` (a profiled kernel launched
  /// without LaunchOptions::profile) one that records nothing.
  ProfileBuffer(const Kernel::State& kernel, const ProfileOptions* opts, uint64_t programs);
  ProfileBuffer(const ProfileBuffer&) = delete;
  ProfileBuffer& operator=(const ProfileBuffer&) = delete;
  ~ProfileBuffer();
  /// The kernel's last parameter: on the CPU the buffer's address itself,
  /// on a GPU (kernelParams) the address of it.
  void* param();
  /// After the kernel has run: reads the buffer back into `out`.
  void finish(Profile& out);

 private:
  const Kernel::State& kernel_;
  DevicePtr ptr_ = 0;
  uint64_t bytes_ = 0;
  uint32_t capacity_ = 0, warps_ = 0, programs_ = 0;
};

}  // namespace tessera::rt

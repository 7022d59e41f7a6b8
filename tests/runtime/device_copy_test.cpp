// Device-to-device copies (Buffer::copyFrom, copyFromAsync) on every kind of
// device this machine can make: the CPU, the emulator, and the CUDA and HIP
// devices on their fake drivers (tests/runtime/fake), whose memory is not
// the host's, so a copy that went through the wrong call would be seen.

#include <catch2/catch.hpp>

#include <numeric>
#include <string>
#include <vector>

#include "../env_guard.h"
#include "../../runtime/lib/DeviceImpl.h"
#include "error_of.h"
#include "tessera/tessera.h"

using namespace tessera::rt;
using Catch::Matchers::Contains;
using tessera::DType;
using tessera::rt::testing::errorOf;

namespace {

/// Copies a prefix, then a whole buffer asynchronously behind a host upload
/// on the same stream (the order is the stream's), and checks both.
void checkCopies(const Device& dev) {
  INFO(dev.name());
  std::vector<int32_t> v(1000);
  std::iota(v.begin(), v.end(), -300);
  Buffer a = dev.upload(DType::I32, v), b = dev.alloc(DType::I32, 1000);
  b.fillBytes(0xff);
  b.copyFrom(a, 400 * sizeof(int32_t));
  std::vector<int32_t> got = b.read<int32_t>();
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == (i < 400 ? v[i] : -1));

  Stream s = dev.createStream();
  std::vector<int32_t> w(1000, 7);
  Buffer c = dev.alloc(DType::I32, 1000);
  a.copyFromHostAsync(s, w.data(), w.size() * sizeof(int32_t));
  c.copyFromAsync(s, a, a.bytes());
  s.synchronize();
  CHECK(c.read<int32_t>() == w);
}

}  // namespace

TEST_CASE("device-to-device copies on the CPU and the emulators", "[runtime][copy]") {
  checkCopies(Device::cpu());
  checkCopies(Device::emulator("nvptx:sm_80"));
  checkCopies(Device::emulator("amdgpu:gfx942"));
}

TEST_CASE("device-to-device copies on the fake CUDA and HIP drivers", "[runtime][copy][fake]") {
  {
    tessera::testing::EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
    checkCopies(Device(createCudaDevice(0)));
  }
  tessera::testing::EnvGuard env("TESSERA_HIP_LIBRARY", TESSERA_FAKE_HIP);
  checkCopies(Device::hip(0));
}

TEST_CASE("device-to-device copies used the wrong way are clear errors", "[runtime][copy]") {
  Device cpu = Device::cpu(), emu = Device::emulator("nvptx:sm_80");
  Buffer a = cpu.alloc(DType::F32, 16), b = cpu.alloc(DType::F32, 8), e = emu.alloc(DType::F32, 16);
  CHECK_THAT(
      errorOf<tessera::LaunchError>([&] { a.copyFrom(e, 16); }),
      Contains("Buffer::copyFrom: the source buffer belongs to 'emu:nvptx:sm_80") && Contains("copy through the host"));
  CHECK_THAT(errorOf<tessera::LaunchError>([&] { a.copyFrom(b, 64); }),
             Contains("64 bytes requested but the source holds only 8 f32 elements (32 bytes)"));
  CHECK_THAT(errorOf<tessera::LaunchError>([&] { b.copyFrom(a, 64); }),
             Contains("but the destination holds only 8 f32 elements"));
  CHECK_THAT(errorOf<tessera::LaunchError>([&] { a.copyFrom(a, 4); }), Contains("ranges overlap"));
  CHECK_THAT(errorOf<tessera::LaunchError>([&] { a.copyFrom(Buffer(), 4); }), Contains("null Buffer"));
  CHECK_THAT(errorOf<tessera::LaunchError>([&] { a.copyFromAsync(emu.createStream(), b, 4); }),
             Contains("Buffer::copyFromAsync: the stream belongs to 'emu:nvptx:sm_80"));
  a.copyFrom(b, 0);  // nothing to do, and no error
}

TEST_CASE("large host-memory copies are split over the device's threads, every byte moved once", "[runtime][copy]") {
  // 9 MiB and 5 bytes: nine 1 MiB chunks over the threads and a ragged
  // tail; the bytes after the copied prefix stay as they were.
  const size_t n = (size_t{9} << 20) + 5, prefix = n - 3;
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 2654435761u >> 24);
  for (const Device& dev : {Device::cpu(), Device::emulator("nvptx:sm_80")}) {
    INFO(dev.name());
    Buffer a = dev.upload(DType::U8, v), b = dev.alloc(DType::U8, n);
    b.fillBytes(0x5a);
    b.copyFrom(a, prefix);
    std::vector<uint8_t> got = b.read<uint8_t>();
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += got[i] != (i < prefix ? v[i] : uint8_t(0x5a));
    CHECK(wrong == 0);
    Stream s = dev.createStream();
    Buffer c = dev.alloc(DType::U8, n);
    c.copyFromAsync(s, a, n);
    s.synchronize();
    CHECK(c.read<uint8_t>() == v);
  }
}

// The CUDA device's streams, events, asynchronous copies and external memory
// (Device::wrap of a CUdeviceptr, DLPack tensors on kDLCUDA), against the
// fake libcuda (tests/runtime/fake): memory the "application" allocated
// outside Tessera runs through a kernel in place, with no copy.

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "../../runtime/lib/DeviceImpl.h"
#include "fake/fake_driver.h"
#include "gpu_test_support.h"
#include "tessera/runtime/DLPack.h"
#include "tessera/runtime/Runtime.h"
#include "error_of.h"

using namespace tessera;
using namespace tessera::rt;
using namespace tessera::rt::testing;
using Catch::Matchers::Contains;

namespace {

/// The fake driver's inspection entry points.
struct Fake {
  unsigned long long (*alloc)(int, size_t) = fakeFn<unsigned long long (*)(int, size_t)>(TESSERA_FAKE_CUDA,
                                                                                         "fake_cuda_alloc");
  void (*free)(unsigned long long) = fakeFn<void (*)(unsigned long long)>(TESSERA_FAKE_CUDA, "fake_cuda_free");
  int (*poke)(unsigned long long, const void*,
              size_t) = fakeFn<int (*)(unsigned long long, const void*, size_t)>(TESSERA_FAKE_CUDA, "fake_cuda_poke");
  int (*peek)(unsigned long long, void*, size_t) = fakeFn<int (*)(unsigned long long, void*, size_t)>(TESSERA_FAKE_CUDA,
                                                                                                      "fake_cuda_peek");
  int (*copies)() = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_copies");
  void* (*createStream)(int) = fakeFn<void* (*)(int)>(TESSERA_FAKE_CUDA, "fake_cuda_create_stream");
  void (*destroyStream)(void*) = fakeFn<void (*)(void*)>(TESSERA_FAKE_CUDA, "fake_cuda_destroy_stream");
  int (*streamLaunches)(void*) = fakeFn<int (*)(void*)>(TESSERA_FAKE_CUDA, "fake_cuda_stream_launches");
  int (*liveEvents)() = fakeFn<int (*)()>(TESSERA_FAKE_CUDA, "fake_cuda_live_events");
  void (*failNextSync)(int) = fakeFn<void (*)(int)>(TESSERA_FAKE_CUDA, "fake_cuda_fail_next_sync");
};

/// `values` written into a fresh allocation of the fake device `dev`.
unsigned long long fakeArray(const Fake& f, int dev, const std::vector<float>& values) {
  const unsigned long long p = f.alloc(dev, values.size() * sizeof(float));
  REQUIRE(f.poke(p, values.data(), values.size() * sizeof(float)) == 1);
  return p;
}

std::vector<float> fakeRead(const Fake& f, unsigned long long p, size_t n) {
  std::vector<float> v(n);
  REQUIRE(f.peek(p, v.data(), n * sizeof(float)) == 1);
  return v;
}

}  // namespace

TEST_CASE("fake CUDA: a raw CUdeviceptr and a kDLCUDA tensor run through a kernel in place", "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Fake f;
  Device dev(createCudaDevice(1));
  Kernel k = dev.load(vaddBinary(4));
  const unsigned long long a = fakeArray(f, 1, {1, 2, 3, 4, 5, 6});
  const unsigned long long b = fakeArray(f, 1, {10, 20, 30, 40, 50, 60});
  const unsigned long long out = fakeArray(f, 1, std::vector<float>(6, -1.0f));
  int freed = 0;
  {
    WrapOptions o;
    o.deleter = [&] { ++freed; };
    Buffer da = dev.wrap(a, DType::F32, 6, o);
    Buffer db = dev.wrap(b, DType::F32, 6);
    CHECK(da.isExternal());
    CHECK(reinterpret_cast<unsigned long long>(da.data()) == a);

    // The output comes in as a DLPack tensor, as from another framework.
    int64_t shape[2] = {2, 3};
    dlpack::DLManagedTensor t{};
    t.dl_tensor = {reinterpret_cast<void*>(out), {dlpack::kDLCUDA, 1}, 2, {dlpack::kDLFloat, 32, 1}, shape, nullptr, 0};
    static int tensorDeletes = 0;
    tensorDeletes = 0;
    t.deleter = [](dlpack::DLManagedTensor*) { ++tensorDeletes; };
    Buffer dout = fromDLPack(dev, &t);
    CHECK(dout.count() == 6);

    const int copiesBefore = f.copies();
    Stream s = dev.createStream();
    LaunchOptions lo;
    lo.stream = s;
    k.launch(Dim3(2), {da, db, dout, 6}, lo);
    s.synchronize();
    CHECK(f.copies() == copiesBefore);  // nothing was copied: the kernel ran on the caller's memory
    CHECK(fakeRead(f, out, 6) == std::vector<float>{11, 22, 33, 44, 55, 66});
    dout = Buffer();
    CHECK(tensorDeletes == 1);
  }
  CHECK(freed == 1);                     // the deleter ran once, when the last handle went
  for (auto p : {a, b, out}) f.free(p);  // the caller's memory is still the caller's to free
}

TEST_CASE("fake CUDA: DLPack export names the GPU, and a versioned kDLCUDA import works in place",
          "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Fake f;
  Device dev(createCudaDevice(1));
  Buffer b = dev.upload(DType::F32, std::vector<float>{1, 2, 3});
  dlpack::DLManagedTensorVersioned* t = toDLPackVersioned(b);
  CHECK((t->dl_tensor.device.device_type == dlpack::kDLCUDA && t->dl_tensor.device.device_id == 1));
  CHECK(t->dl_tensor.data == b.data());
  b = Buffer();
  // The tensor keeps the device memory: the fake still resolves it.
  CHECK(fakeRead(f, reinterpret_cast<unsigned long long>(t->dl_tensor.data), 3) == std::vector<float>{1, 2, 3});
  const int copies = f.copies();
  Buffer back = fromDLPack(dev, t);
  CHECK(f.copies() == copies);
  CHECK(back.read<float>() == std::vector<float>{1, 2, 3});
}

TEST_CASE("fake CUDA: memory of another device or too small is refused", "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Fake f;
  Device dev0(createCudaDevice(0));
  const unsigned long long on1 = f.alloc(1, 64);
  const unsigned long long on0 = f.alloc(0, 64);
  int deletes = 0;
  WrapOptions counted;
  counted.deleter = [&] { ++deletes; };

  CHECK_THAT(errorOf<DeviceError>([&] { dev0.wrap(on1, DType::F32, 16, counted); }),
             Contains("cuda:0 Fake A100: Device::wrap of 64 bytes at 0x") && Contains("the memory is on cuda:1"));
  CHECK_THAT(errorOf<UsageError>([&] { dev0.wrap(on0, DType::F32, 17, counted); }),
             Contains("its allocation holds only 64 bytes from that address"));
  CHECK_THAT(errorOf<UsageError>([&] { dev0.wrap(on0 + 32, DType::F32, 9, counted); }),
             Contains("only 32 bytes from that address"));
  std::vector<float> host(16);
  CHECK_THAT(errorOf<DeviceError>([&] { dev0.wrap(host.data(), DType::F32, 16, counted); }),
             Contains("not memory the CUDA driver knows"));
  CHECK(deletes == 0);  // nothing is taken on error

  // DLPack: the right type on the wrong ordinal, and host memory.
  int64_t shape[1] = {16};
  dlpack::DLManagedTensor t{};
  t.dl_tensor = {reinterpret_cast<void*>(on0), {dlpack::kDLCUDA, 1}, 1, {dlpack::kDLFloat, 32, 1}, shape, nullptr, 0};
  CHECK_THAT(errorOf<DeviceError>([&] { fromDLPack(dev0, &t); }),
             Contains("the tensor is on kDLCUDA device 1 but this is device 0"));
  t.dl_tensor.device = {dlpack::kDLCPU, 0};
  CHECK_THAT(errorOf<DeviceError>([&] { fromDLPack(dev0, &t); }),
             Contains("the tensor is on kDLCPU (device 0) but this device's memory is kDLCUDA"));
  f.free(on0);
  f.free(on1);
}

TEST_CASE("fake CUDA: wrapped streams, events, asynchronous copies, errors at synchronisation", "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Fake f;
  Device dev(createCudaDevice(0));
  Kernel k = dev.load(vaddBinary(4));

  SECTION("a caller's CUstream is used, not owned") {
    void* raw = f.createStream(0);
    {
      Stream s = dev.wrapStream(raw);
      CHECK(s.native() == raw);
      Buffer a = dev.alloc(DType::F32, 4), out = dev.alloc(DType::F32, 4);
      LaunchOptions lo;
      lo.stream = s;
      k.launch(Dim3(1), {a, a, out, 4}, lo);
      k.launch(Dim3(1), {a, a, out, 4}, lo);
      s.synchronize();
      CHECK(f.streamLaunches(raw) == 2);
    }
    CHECK(f.streamLaunches(raw) == 2);  // still alive: the Stream did not destroy it
    f.destroyStream(raw);

    void* other = f.createStream(1);
    CHECK_THAT(errorOf<DeviceError>([&] { dev.wrapStream(other); }), Contains("belongs to another context"));
    f.destroyStream(other);
    CHECK_THAT(errorOf<DeviceError>([&] { dev.wrapStream(nullptr); }), Contains("the handle is null"));
  }

  SECTION("events: record, wait from another stream, synchronize, elapsed time") {
    const int events0 = f.liveEvents();
    {
      Stream s1 = dev.createStream(), s2 = dev.createStream();
      Event start = dev.createEvent(), end = dev.createEvent();
      Buffer a = dev.alloc(DType::F32, 4), out = dev.alloc(DType::F32, 4);
      LaunchOptions lo;
      lo.stream = s1;
      start.record(s1);
      for (int i = 0; i < 3; ++i) k.launch(Dim3(1), {a, a, out, 4}, lo);
      end.record(s1);
      s2.wait(end);
      end.synchronize();
      // The fake's clock advances 1 ms per launch.
      CHECK(Event::elapsedMs(start, end) == Approx(3.0));
      CHECK(f.liveEvents() == events0 + 2);
    }
    CHECK(f.liveEvents() == events0);
  }

  SECTION("asynchronous copies") {
    Stream s = dev.createStream();
    Buffer b = dev.alloc(DType::F32, 3);
    std::vector<float> in{1.5f, 2.5f, 3.5f}, back(3);
    b.copyFromHostAsync(s, in.data(), 12);
    b.copyToHostAsync(s, back.data(), 12);
    s.synchronize();
    CHECK(back == in);
    Device other(createCudaDevice(1));
    CHECK_THAT(errorOf<LaunchError>([&] { b.copyToHostAsync(other.createStream(), back.data(), 12); }),
               Contains("the stream belongs to 'cuda:1 Fake H100' but the buffer to 'cuda:0 Fake A100'"));
  }

  SECTION("a fault of an asynchronous launch is thrown by the next synchronisation, naming the kernel") {
    Stream s = dev.createStream();
    Buffer a = dev.alloc(DType::F32, 8), out = dev.alloc(DType::F32, 8);
    LaunchOptions lo;
    lo.stream = s;
    f.failNextSync(700);
    k.launch(Dim3(2), {a, a, out, 8}, lo);  // returns: the fault is not known yet
    CHECK_THAT(errorOf<DeviceError>([&] { s.synchronize(); }),
               Contains("cuda:0 Fake A100: running kernel 'vadd' (grid {2, 1, 1}, 4 threads per block") &&
                   Contains("cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS"));
    f.failNextSync(700);
    k.launch(Dim3(1), {a, a, out, 8}, lo);
    CHECK_THAT(errorOf<DeviceError>([&] { dev.synchronize(); }),
               Contains("after kernel 'vadd'") && Contains("cuCtxSynchronize failed"));
  }

  SECTION("a stream of another device is refused by the launch") {
    Device other(createCudaDevice(1));
    Buffer a = dev.alloc(DType::F32, 8);
    LaunchOptions lo;
    lo.stream = other.createStream();
    CHECK_THAT(errorOf<LaunchError>([&] { k.launch(Dim3(1), {a, a, a, 8}, lo); }),
               Contains("vadd: LaunchOptions::stream is a stream of 'cuda:1 Fake H100' but the kernel is loaded on "
                        "'cuda:0 Fake A100'"));
    Event e = other.createEvent();
    CHECK_THAT(errorOf<UsageError>([&] { e.record(dev.defaultStream()); }),
               Contains("the event belongs to 'cuda:1 Fake H100' and the stream to 'cuda:0 Fake A100'"));
  }
}

TEST_CASE("fake CUDA: a buffer of a device instance that is gone, and one that lives on", "[gpu][cuda][fake]") {
  EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Buffer kept;
  {
    Device first(createCudaDevice(0));
    kept = first.upload(DType::F32, std::vector<float>{1, 2, 3, 4});
  }
  // The Device handle is gone, but the buffer keeps its device (and the
  // context) alive: it still reads back.
  CHECK(kept.read<float>() == std::vector<float>{1, 2, 3, 4});
  // A kernel of a new instance of the same GPU does not take it: its memory
  // belongs to the old instance's context.
  Device second(createCudaDevice(0));
  Kernel k = second.load(vaddBinary());
  CHECK_THAT(errorOf<LaunchError>([&] { k.launch(Dim3(1), {kept, kept, kept, 4}); }),
             Contains("is a Buffer on device 'cuda:0 Fake A100' but the kernel is loaded on 'cuda:0 Fake A100' "
                      "(another instance)"));
}

// Streams and events on host devices, the cases that went wrong: a wait
// keeps the record of the event that was latest when it was called (as
// cuStreamWaitEvent does), so re-recording the event behind the wait cannot
// deadlock the waiting stream; and the error of a launch on a stream whose
// last handle went before it was synchronised is kept by the device and
// thrown by Device::synchronize.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "../../runtime/lib/DeviceImpl.h"  // createCudaDevice: a fresh fake CUDA device
#include "../env_guard.h"
#include "registry.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/tessera.h"
#include "error_of.h"

namespace ts = tessera;
using tessera::DType;
using tessera::rt::testing::errorOf;
using namespace tessera::rt;
using Catch::Matchers::Contains;

namespace {

LaunchOptions on(const Stream& s, unsigned threads = 0) {
  LaunchOptions o;
  o.stream = s;
  o.threads = threads;
  return o;
}

// A gate: flags[1] = 42 once flags[0] is set. The waiter gives up after a
// bound, so that nothing here can hang the suite even if the test's own
// release were skipped.
void passGate(int32_t* flags) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::atomic_ref<int32_t>(flags[0]).load() == 0) {
    if (std::chrono::steady_clock::now() > give_up) return;
    std::this_thread::yield();
  }
  std::atomic_ref<int32_t>(flags[1]).store(42);
}

// The gate as a CPU kernel (a host function) and as an emulated GPU thread
// body: no compiled kernel needed to hold a stream busy.
void gateHost(void* const* args, int64_t, int64_t, const int32_t*) { passGate(*static_cast<int32_t* const*>(args[0])); }
void gateEmulated(void* const* args) { passGate(*static_cast<int32_t* const*>(args[0])); }

Kernel gateKernel(const Device& dev) {
  Binary b;
  if (dev.kind() == DeviceKind::CPU) {
    b.format = Binary::Format::HostFunction;
    b.hostEntry = gateHost;
  } else {
    b.format = Binary::Format::EmulatedGpu;
    b.emuThread = gateEmulated;
    b.threadsPerBlock = 1;
  }
  b.signature.kernelName = "gate";
  b.signature.args = {{ArgSpec::Kind::Pointer, DType::I32, "flags"}};
  return dev.load(b);
}

/// Opens the gate of `flags` (host memory on both devices) now, and in any
/// case when it goes, so that an assertion failing early leaves no kernel
/// waiting.
class GateRelease {
 public:
  explicit GateRelease(const Buffer& flags) : flags_(static_cast<int32_t*>(flags.data())) {}
  ~GateRelease() { open(); }
  void open() { std::atomic_ref<int32_t>(flags_[0]).store(1); }

 private:
  int32_t* flags_;
};

}  // namespace

TEST_CASE("a wait keeps the record that was latest when it was called: re-recording the event behind it returns",
          "[runtime][stream][event]") {
  using namespace std::chrono_literals;
  for (Device dev : {Device::cpu(), Device::emulator("nvptx:sm_80")}) {
    INFO(dev.name());
    Kernel gate = gateKernel(dev);
    Buffer flags = dev.alloc(DType::I32, 2);
    std::vector<int32_t> seen(2, -1);
    Stream s1 = dev.createStream(), s2 = dev.createStream();
    Event e = dev.createEvent();
    GateRelease release(flags);
    // Two programs on one thread: the launch goes to s1's worker (a
    // one-program CPU launch on an idle stream would run here, inline).
    gate.launch(Dim3(2), {flags}, on(s1, 1));
    e.record(s1);  // queued behind the gate
    s2.wait(e);    // waits for that record ...
    e.record(s2);  // ... not for this one, queued behind the wait on s2
    flags.copyToHostAsync(s2, seen.data(), seen.size() * sizeof(int32_t));
    release.open();

    // Bounded, and structured so that a regression fails instead of hanging:
    // the synchronisation runs on another thread; if it has not returned in
    // time, a record on an idle stream completes the event at once, which
    // frees a wait that (wrongly) waits for the event's latest record
    // instead of the one it was called after; the thread can then be
    // joined. Only if even that fails is the future left behind (leaked, so
    // that its destructor does not block on a thread that never ends).
    std::future<void> synced = std::async(std::launch::async, [s2] { s2.synchronize(); });
    const bool returned = synced.wait_for(20s) == std::future_status::ready;
    if (!returned) {
      Stream idle = dev.createStream();
      e.record(idle);
      if (synced.wait_for(20s) != std::future_status::ready) {
        new std::future<void>(std::move(synced));  // deliberately leaked: see above
        FAIL("Stream::synchronize never returned, even after the event was recorded on an idle stream");
      }
    }
    CHECK(returned);  // false: the wait deadlocked on the record queued behind it
    synced.get();
    // The wait did wait for the gate's launch on s1: the copy after it saw
    // the kernel's write.
    CHECK(seen[1] == 42);
    e.synchronize();  // the latest record (on s2) has completed
    s1.synchronize();
  }
}

TEST_CASE("a wait on an event recorded again later on another stream waits for the first record only",
          "[runtime][stream][event]") {
  // The converse: a record on s3 after the wait must not be what s2 waits
  // for. s3 is held by its own gate, opened only after s2 has finished (a
  // wait on the latest record would hold s2 until that gate gives up, and
  // the gate's write would be missing).
  for (Device dev : {Device::cpu(), Device::emulator("nvptx:sm_80")}) {
    INFO(dev.name());
    Kernel gate = gateKernel(dev);
    Buffer flags1 = dev.alloc(DType::I32, 2), flags3 = dev.alloc(DType::I32, 2);
    Stream s1 = dev.createStream(), s2 = dev.createStream(), s3 = dev.createStream();
    Event e = dev.createEvent();
    GateRelease release3(flags3), release1(flags1);
    gate.launch(Dim3(2), {flags1}, on(s1, 1));
    gate.launch(Dim3(2), {flags3}, on(s3, 1));
    e.record(s1);
    s2.wait(e);
    e.record(s3);  // completes only when s3's gate opens, after s2 is done
    release1.open();
    s2.synchronize();  // returns: it waited for the record on s1, which completed
    CHECK(flags1.read<int32_t>()[1] == 42);
    release3.open();
    e.synchronize();
    CHECK(flags3.read<int32_t>()[1] == 42);
  }
}

TEST_CASE("fake CUDA and HIP drivers: re-recording an event after a wait returns, as on host devices",
          "[runtime][stream][event][fake]") {
  // The drivers capture the event at cuStreamWaitEvent / hipStreamWaitEvent;
  // the fakes run every call at once. The sequence returns and the copies
  // ordered after the wait see the data ordered before the record.
  auto sequence = [](const Device& dev) {
    INFO(dev.name());
    Stream s1 = dev.createStream(), s2 = dev.createStream();
    Event e = dev.createEvent();
    Buffer b = dev.alloc(DType::I32, 4);
    std::vector<int32_t> in{1, 2, 3, 4}, out(4, 0);
    b.copyFromHostAsync(s1, in.data(), 16);
    e.record(s1);
    s2.wait(e);
    e.record(s2);
    b.copyToHostAsync(s2, out.data(), 16);
    s2.synchronize();
    e.synchronize();
    CHECK(out == in);
  };
  {
    tessera::testing::EnvGuard env("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
    sequence(Device(createCudaDevice(0)));
  }
  tessera::testing::EnvGuard env("TESSERA_HIP_LIBRARY", TESSERA_FAKE_HIP);
  sequence(Device::hip(0));
}

TEST_CASE("the error of a stream dropped before it was synchronised is thrown by Device::synchronize",
          "[runtime][stream]") {
  constexpr int kBlock = 256;
  SECTION("cpu: a checked launch that leaves its buffer") {
    Device cpu = Device::cpu();
    auto k = ts::compile(ts::examples::vectorAdd(kBlock), cpu);
    Buffer small = cpu.alloc(DType::F32, 100), big = cpu.alloc(DType::F32, 4 * kBlock);
    try {
      cpu.synchronize();  // the CPU device is shared: errors earlier tests left are not this test's
    } catch (const ts::Error&) {
    }
    for (unsigned programs : {1u, 4u}) {  // run inline and on the worker: the same rule
      INFO(programs << " programs");
      {
        Stream s = cpu.createStream();
        LaunchOptions o = on(s);
        o.checkBounds = true;
        k.launchWith(Dim3(programs), {big, small, big, int32_t(programs * kBlock)}, o);
      }  // the only handle goes: the stream waits for its work, then hands its error to the device
      CHECK_THAT(errorOf<ts::LaunchError>([&] { cpu.synchronize(); }),
                 Contains("vector_add: out-of-bounds access by") && Contains("argument 1 (ptr<f32> a)"));
      CHECK_NOTHROW(cpu.synchronize());  // thrown once
    }
  }
  SECTION("emulator: an out-of-bounds access found by the emulator") {
    Device emu = Device::emulator("nvptx:sm_80");
    auto k = ts::compile(ts::examples::vectorAdd(kBlock), emu);
    Buffer small = emu.alloc(DType::F32, 100), big = emu.alloc(DType::F32, 2 * kBlock);
    try {
      emu.synchronize();
    } catch (const ts::Error&) {
    }
    {
      Stream s = emu.createStream();
      k.launchWith(Dim3(2), {big, small, big, int32_t(2 * kBlock)}, on(s));
    }
    CHECK_THAT(errorOf<ts::emu::EmulatorError>([&] { emu.synchronize(); }), Contains("kernel 'vector_add'"));
    CHECK_NOTHROW(emu.synchronize());
  }
}

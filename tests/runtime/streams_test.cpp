// Streams on host devices: asynchronous launches and copies, events, errors
// thrown at the next synchronisation with the kernel's name, and two CPU
// streams that provably run at the same time -- each kernel waits for the
// other through memory, so neither finishes unless both run together.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "registry.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/tessera.h"
#include "error_of.h"

namespace ts = tessera;
using tessera::rt::testing::errorOf;
using namespace tessera::rt;
using Catch::Matchers::Contains;
using tessera::DType;

namespace {

constexpr int kBlock = 256;

LaunchOptions on(const Stream& s, unsigned threads = 0) {
  LaunchOptions o;
  o.stream = s;
  o.threads = threads;
  return o;
}

// A host-function kernel (the CPU device's binary format) taking one i32
// buffer of flags: kernel `me` raises flags[me], then waits for
// flags[other]; flags[2 + me] = 1 when it saw it. A waiter gives up after a
// generous bound, so a runtime that serialised the two launches fails the
// test instead of hanging it.
template <int Me>
void handshake(void* const* args, int64_t, int64_t, const int32_t*) {
  int32_t* flags = *static_cast<int32_t* const*>(args[0]);
  std::atomic_ref<int32_t>(flags[Me]).store(1);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::atomic_ref<int32_t>(flags[1 - Me]).load() == 0) {
    if (std::chrono::steady_clock::now() > give_up) return;
    std::this_thread::yield();
  }
  flags[2 + Me] = 1;
}

Kernel handshakeKernel(const Device& dev, Binary::HostEntry entry, const char* name) {
  Binary b;
  b.format = Binary::Format::HostFunction;
  b.hostEntry = entry;
  b.signature.kernelName = name;
  b.signature.args = {{ArgSpec::Kind::Pointer, DType::I32, "flags"}};
  return dev.load(b);
}

}  // namespace

TEST_CASE("two launches on two CPU streams run at the same time", "[runtime][stream]") {
  Device cpu = Device::cpu();
  Kernel a = handshakeKernel(cpu, handshake<0>, "handshake_a"), b = handshakeKernel(cpu, handshake<1>, "handshake_b");
  Buffer flags = cpu.alloc(DType::I32, 4);
  Stream s1 = cpu.createStream(), s2 = cpu.createStream();
  // Two programs each (a one-program launch may run inline on the caller),
  // one thread each (so each runs on its stream's worker, not the pool).
  a.launch(Dim3(2), {flags}, on(s1, 1));
  b.launch(Dim3(2), {flags}, on(s2, 1));
  s1.synchronize();
  s2.synchronize();
  CHECK(flags.read<int32_t>() == std::vector<int32_t>{1, 1, 1, 1});
}

TEST_CASE("asynchronous launches, copies and events on host devices", "[runtime][stream]") {
  for (Device dev : {Device::cpu(), Device::emulator("nvptx:sm_80")}) {
    INFO(dev.name());
    auto k = ts::compile(ts::examples::vectorAdd(kBlock), dev);
    const int n = 4096;
    std::vector<float> a(n), b(n), got(n, -1.0f);
    for (int i = 0; i < n; ++i) a[i] = float(i), b[i] = 1.0f;
    Buffer da = dev.alloc(DType::F32, n), db = dev.alloc(DType::F32, n), dout = dev.alloc(DType::F32, n);
    Buffer d2 = dev.alloc(DType::F32, n);

    Stream s1 = dev.createStream(), s2 = dev.createStream();
    Event start = dev.createEvent(), copied = dev.createEvent(), done = dev.createEvent();
    start.record(s1);
    da.copyFromHostAsync(s1, a.data(), n * sizeof(float));
    db.copyFromHostAsync(s1, b.data(), n * sizeof(float));
    copied.record(s1);
    k.launchWith(Dim3(n / kBlock), {dout, da, db, n}, on(s1));
    // s2 waits for s1's launch through an event, then adds once more.
    done.record(s1);
    s2.wait(done);
    k.launchWith(Dim3(n / kBlock), {d2, dout, db, n}, on(s2));
    d2.copyToHostAsync(s2, got.data(), n * sizeof(float));
    s2.synchronize();
    for (int i = 0; i < n; i += 31) REQUIRE(got[i] == float(i) + 2.0f);
    done.synchronize();
    CHECK(Event::elapsedMs(start, done) >= 0.0);
    CHECK(Event::elapsedMs(start, copied) <= Event::elapsedMs(start, done));
    dev.synchronize();

    // A synchronous launch after asynchronous ones on the default stream
    // is ordered after them, and still returns with its result.
    Stream def = dev.defaultStream();
    k.launchWith(Dim3(n / kBlock), {dout, da, da, n}, on(def));
    k.launch(Dim3(n / kBlock), d2, dout, db, n);
    CHECK(d2.read<float>()[100] == 201.0f);
  }
}

TEST_CASE("an asynchronous launch's error is thrown at the next synchronisation, naming the kernel",
          "[runtime][stream]") {
  SECTION("cpu: a checked launch that leaves its buffer") {
    Device cpu = Device::cpu();
    auto k = ts::compile(ts::examples::vectorAdd(kBlock), cpu);
    Buffer small = cpu.alloc(DType::F32, 100), big = cpu.alloc(DType::F32, 4 * kBlock);
    for (unsigned programs : {1u, 4u}) {  // run inline and on the worker: the same rule
      INFO(programs << " programs");
      Stream s = cpu.createStream();
      LaunchOptions o = on(s);
      o.checkBounds = true;
      k.launchWith(Dim3(programs), {big, small, big, int32_t(programs * kBlock)}, o);  // returns: nothing thrown yet
      CHECK_THAT(errorOf<ts::LaunchError>([&] { s.synchronize(); }),
                 Contains("vector_add: out-of-bounds access by") && Contains("argument 1 (ptr<f32> a)"));
      s.synchronize();  // thrown once: the stream is usable again
    }
    // On the default stream, the next blocking call throws it.
    LaunchOptions o = on(cpu.defaultStream(), 1);
    o.checkBounds = true;
    k.launchWith(Dim3(4), {big, small, big, int32_t(4 * kBlock)}, o);
    CHECK_THAT(errorOf<ts::LaunchError>([&] { big.read<float>(); }), Contains("vector_add: out-of-bounds access"));
  }
  SECTION("emulator: an out-of-bounds access found by the emulator, thrown by Device::synchronize") {
    Device emu = Device::emulator("nvptx:sm_80");
    auto k = ts::compile(ts::examples::vectorAdd(kBlock), emu);
    Buffer small = emu.alloc(DType::F32, 100), big = emu.alloc(DType::F32, 2 * kBlock);
    Stream s = emu.createStream();
    // vector_add masks by n: an n past the small buffer reads outside it.
    k.launchWith(Dim3(2), {big, small, big, int32_t(2 * kBlock)}, on(s));
    CHECK_THAT(errorOf<ts::emu::EmulatorError>([&] { emu.synchronize(); }), Contains("kernel 'vector_add'"));
  }
}

TEST_CASE("streams, events and copies used the wrong way are clear errors", "[runtime][stream]") {
  Device cpu = Device::cpu(), emu = Device::emulator("nvptx:sm_80");
  auto k = ts::compile(ts::examples::vectorAdd(kBlock), cpu);
  Buffer x = cpu.alloc(DType::F32, kBlock);
  CHECK_THAT(errorOf<ts::LaunchError>([&] { k.launchWith(Dim3(1), {x, x, x, kBlock}, on(emu.createStream())); }),
             Contains("vector_add: LaunchOptions::stream is a stream of 'emu:nvptx:sm_80") &&
                 Contains("but the kernel is loaded on 'cpu"));
  CHECK_THAT(errorOf<ts::LaunchError>([&] { x.copyFromHostAsync(emu.createStream(), nullptr, 0); }),
             Contains("Buffer::copyFromHostAsync: the stream belongs to 'emu:nvptx:sm_80"));
  std::vector<float> host(kBlock);
  CHECK_THAT(errorOf<ts::LaunchError>([&] { x.copyToHostAsync(Stream(), host.data(), 4); }),
             Contains("the Stream is null"));
  CHECK_THAT(errorOf<ts::LaunchError>([&] { x.copyToHostAsync(cpu.createStream(), host.data(), 4 * kBlock + 4); }),
             Contains("1028 bytes requested but the buffer holds only 256 f32 elements"));
  CHECK_THAT(errorOf<ts::DeviceError>([&] { cpu.wrapStream(reinterpret_cast<void*>(0x1000)); }),
             Contains("has no driver streams to wrap"));
  CHECK_THAT(errorOf<ts::UsageError>([&] { Stream().synchronize(); }), Contains("null Stream"));
  Event e = cpu.createEvent();
  CHECK_THAT(errorOf<ts::UsageError>([&] { e.synchronize(); }), Contains("the event was never recorded"));
  CHECK_THAT(errorOf<ts::UsageError>([&] { e.record(emu.createStream()); }),
             Contains("the event belongs to 'cpu") && Contains("and the stream to 'emu:nvptx:sm_80"));
  CHECK_THAT(errorOf<ts::UsageError>([&] { emu.createStream().wait(e); }), Contains("never recorded"));
  Event other = emu.createEvent();
  other.record(emu.defaultStream());
  e.record(cpu.defaultStream());
  CHECK_THAT(errorOf<ts::UsageError>([&] { Event::elapsedMs(e, other); }), Contains("both must be of one device"));
  CHECK_THAT(errorOf<ts::UsageError>([&] { Event().record(cpu.defaultStream()); }), Contains("null Event"));
}

TEST_CASE("a stream's work outlives its handles, and the deleter of wrapped memory waits for it", "[runtime][stream]") {
  Device cpu = Device::cpu();
  Kernel a = handshakeKernel(cpu, handshake<0>, "handshake_a"), b = handshakeKernel(cpu, handshake<1>, "handshake_b");
  std::vector<int32_t> flags(4, 0);
  bool freed = false;
  {
    WrapOptions o;
    o.deleter = [&] { freed = true; };
    Buffer f = cpu.wrap(flags.data(), DType::I32, 4, o);
    Stream s1 = cpu.createStream();
    a.launch(Dim3(2), {f}, on(s1, 1));  // waits for b, which is not launched yet
    f = Buffer();
    CHECK(!freed);  // the queued launch holds the buffer
    Stream s2 = cpu.createStream();
    b.launch(Dim3(2), {cpu.wrap(flags.data(), DType::I32, 4)}, on(s2, 1));
  }  // the streams' handles go: each waits for its work first
  CHECK(freed);
  CHECK(flags == std::vector<int32_t>{1, 1, 1, 1});
}

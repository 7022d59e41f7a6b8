// The runtime types a program names, through <tessera/tessera.h> alone and
// the `ts::` namespace alias, as docs/runtime.md writes them: streams,
// events, external memory and DLPack need no `rt::`. That this file
// compiles is most of the test; it also runs the asynchronous program the
// documentation describes.

#include <catch2/catch.hpp>

#include <type_traits>
#include <vector>

#include <tessera/tessera.h>

namespace ts = tessera;

static_assert(std::is_same_v<ts::Stream, ts::rt::Stream>);
static_assert(std::is_same_v<ts::Event, ts::rt::Event>);
static_assert(std::is_same_v<ts::WrapOptions, ts::rt::WrapOptions>);
static_assert(std::is_same_v<ts::dlpack::DLManagedTensor, ts::rt::dlpack::DLManagedTensor>);
static_assert(std::is_same_v<ts::dlpack::DLManagedTensorVersioned, ts::rt::dlpack::DLManagedTensorVersioned>);

namespace {

ts::Kernel scale(int BLOCK) {
  return ts::kernel("alias_scale", [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto i = ts::program_id(0) * BLOCK + ts::arange(BLOCK);
    auto m = i < n;
    ts::store(out + i, ts::load(in + i, m) * 2.0f, m);
  });
}

}  // namespace

TEST_CASE("ts::Stream, ts::Event, ts::WrapOptions and the DLPack calls, as docs/runtime.md uses them",
          "[dsl][runtime]") {
  const int n = 1000, block = 256;
  for (ts::Device dev : {ts::Device::cpu(), ts::Device::emulator("nvptx:sm_80")}) {
    INFO(dev.name());
    auto k = ts::compile(scale(block), dev);
    std::vector<float> host(n), result(n, -1.0f);
    for (int i = 0; i < n; ++i) host[i] = float(i);

    // A caller's memory, wrapped without a copy; its deleter runs when the
    // last handle (and the last queued launch using it) is gone.
    bool released = false;
    ts::WrapOptions own;
    own.deleter = [&] { released = true; };
    std::vector<float> callerMemory(n);
    ts::Buffer out = dev.wrap(callerMemory.data(), ts::DType::F32, n, own);
    ts::Buffer in = dev.alloc(ts::DType::F32, n);

    ts::Stream copy = dev.createStream(), compute = dev.createStream();
    ts::Event uploaded = dev.createEvent();
    in.copyFromHostAsync(copy, host.data(), n * sizeof(float));
    uploaded.record(copy);
    compute.wait(uploaded);
    ts::LaunchOptions opts;
    opts.stream = compute;
    k.launchWith(ts::Dim3((n + block - 1) / block), {out, in, n}, opts);
    out.copyToHostAsync(compute, result.data(), n * sizeof(float));
    compute.synchronize();
    CHECK(result[999] == 1998.0f);
    CHECK(callerMemory[10] == 20.0f);

    // DLPack: export, then import as the consumer of the tensor would.
    ts::dlpack::DLManagedTensor* t = ts::toDLPack(out);
    ts::Buffer back = ts::fromDLPack(dev, t);
    CHECK(back.data() == callerMemory.data());
    ts::dlpack::DLManagedTensorVersioned* tv = ts::toDLPackVersioned(in);
    CHECK(ts::fromDLPack(dev, tv).count() == size_t(n));
    out = ts::Buffer();
    CHECK(!released);  // the import still holds the memory
    back = ts::Buffer();
    CHECK(released);
    dev.synchronize();
  }
}

// Checked launches on the CPU (LaunchOptions::checkBounds,
// TESSERA_CHECK_BOUNDS=1): an access outside its buffer is a LaunchError
// naming the op and the user's line, and nothing outside any buffer is read
// or written; correct launches give the same results as unchecked ones.
#include <catch2/catch.hpp>

#include "checked_options.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../cpu_paths.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;

namespace {

std::string at(int line) { return std::string(__FILE__) + ":" + std::to_string(line); }

ts::LaunchOptions checked() { return ts::testing::checkedLaunch(); }

}  // namespace

TEST_CASE("checked CPU launches report loads, stores and atomics past their buffer", "[dsl][checked]") {
  int loadLine = 0, storeLine = 0, atomicLine = 0;
  ts::Kernel k = ts::kernel("scale", [&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto i = ts::program_id(0) * 64 + ts::arange(64);
    loadLine = __LINE__ + 1;  // the next line
    auto x = ts::load(in + i, i < n, 0.0f);
    storeLine = __LINE__ + 1;  // the next line
    ts::store(out + i, x * 2.0f, i < n);
  });
  ts::Kernel ka = ts::kernel("acc", [&](ts::Ptr<float> out, ts::Int n) {
    auto i = ts::arange(32);
    atomicLine = __LINE__ + 1;  // the next line
    ts::atomic_add(out + i * n, 1.0f);
  });
  for (const ts::Device& dev : testpaths::cpuDevices()) {
    INFO(dev.name());
    auto ck = ts::compile(k, dev);
    // Large enough to run, then too small for n (the masks allow 1000).
    ts::Buffer in = dev.alloc(ts::DType::F32, 1000), out = dev.alloc(ts::DType::F32, 1000);
    ts::Buffer small = dev.alloc(ts::DType::F32, 100);
    in.write(std::vector<float>(1000, 1.5f));
    ck.launchWith({16}, {out, in, 1000}, checked());
    CHECK(out.read<float>() == std::vector<float>(1000, 3.0f));
    try {
      ck.launchWith({16}, {out, small, 1000}, checked());
      FAIL("no error");
    } catch (const ts::LaunchError& e) {
      std::string m = e.what();
      CHECK_THAT(m, Contains("out-of-bounds access by 'load @ " + at(loadLine)));
      CHECK_THAT(m, Contains("argument 1 (ptr<f32> arg1) at byte offset 400, outside its 400 bytes (100 f32"));
    }
    // The store: the out buffer (a view 10 elements into a 1000) is too short.
    small.write(std::vector<float>(100, -1.0f));
    ts::Buffer canary = dev.alloc(ts::DType::F32, 200);
    canary.write(std::vector<float>(200, 7.0f));
    try {
      ck.launchWith({16}, {ts::rt::Arg(canary), in, 150}, checked());  // 150 > 200? no: fits
    } catch (...) {
      FAIL("a launch inside its buffer was refused");
    }
    ts::rt::Arg tail(canary);
    tail.offset = 150;  // 50 elements left, the kernel writes 150
    canary.write(std::vector<float>(200, 7.0f));
    try {
      ck.launchWith({16}, {tail, in, 150}, checked());
      FAIL("no error");
    } catch (const ts::LaunchError& e) {
      std::string m = e.what();
      CHECK_THAT(m, Contains("'store @ " + at(storeLine)) && Contains("argument 0 (ptr<f32> arg0)") &&
                        Contains("outside its 200 bytes (50 f32"));
    }
    // Programs whose accesses fit ran; none wrote past the view's end, which
    // here is the end of the allocation (the check stops the access itself).
    std::vector<float> c = canary.read<float>();
    for (size_t j = 0; j < 150; ++j) REQUIRE(c[j] == 7.0f);
    // Atomics: 32 lanes strided by n over a buffer of 32 * 4 elements.
    auto ca = ts::compile(ka, dev);
    ts::Buffer acc = dev.alloc(ts::DType::F32, 128);
    ca.launchWith({1}, {acc, 4}, checked());
    CHECK_THROWS_WITH(
        ca.launchWith({1}, {acc, 5}, checked()),
        Contains("'atomic_add @ " + at(atomicLine)) && Contains("at byte offset 520, outside its 512 bytes"));
  }
}

TEST_CASE("checked launches: masked-off lanes, negative offsets, scalar pointers, staged copies", "[dsl][checked]") {
  int line = 0;
  // Negative offsets: program 0 reads in[i - 1].
  ts::Kernel shift = ts::kernel("shift", [&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int lo) {
    auto i = ts::arange(16);
    line = __LINE__ + 1;  // the next line
    auto x = ts::load(in + (i - lo), i >= lo - 1);
    ts::store(out + i, x);
  });
  // A scalar pointer load.
  int scalarLine = 0;
  ts::Kernel one = ts::kernel("one", [&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int j) {
    scalarLine = __LINE__ + 1;  // the next line
    auto v = ts::load(in + j);
    ts::store(out, v);
  });
  // A pipelined loop's staged copies (copy ops into shared buffers).
  int copyLine = 0;
  ts::Kernel sum = ts::kernel("chunks", [&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto buf = ts::alloc_shared(ts::f32, {16});
    auto acc = ts::for_pipelined(0, n, 16, 2, ts::zeros({16}, ts::f32), [&](ts::Int k, ts::Tensor a) {
      auto i = k + ts::arange(16);
      copyLine = __LINE__ + 1;  // the next line
      auto t = ts::stage_copy(buf, in + i);
      return a + t.load();
    });
    ts::store(out + ts::arange(16), acc);
  });
  for (const ts::Device& dev : testpaths::cpuDevices()) {
    INFO(dev.name());
    ts::Buffer in = dev.upload(ts::DType::F32, std::vector<float>(64, 1.0f)), out = dev.alloc(ts::DType::F32, 16);
    auto ks = ts::compile(shift, dev);
    ks.launchWith({1}, {out, in, 0}, checked());  // lane 0 masked: i - 0 >= 0 everywhere
    CHECK_THROWS_WITH(ks.launchWith({1}, {out, in, 1}, checked()),
                      Contains("'load @ " + at(line)) && Contains("byte offset -4"));
    auto k1 = ts::compile(one, dev);
    k1.launchWith({1}, {out, in, 63}, checked());
    CHECK_THROWS_WITH(k1.launchWith({1}, {out, in, 64}, checked()),
                      Contains("'load @ " + at(scalarLine)) && Contains("byte offset 256"));
    auto kc = ts::compile(sum, dev);
    kc.launchWith({1}, {out, in, 64}, checked());
    CHECK(out.read<float>() == std::vector<float>(16, 4.0f));
    CHECK_THROWS_WITH(kc.launchWith({1}, {out, in, 80}, checked()),
                      Contains("'copy @ " + at(copyLine)) && Contains("argument 1 (ptr<f32> arg1)"));
  }
}

TEST_CASE("TESSERA_CHECK_BOUNDS=1 checks every CPU launch, every example passes checked", "[dsl][checked]") {
  ts::Kernel k = ts::kernel("rd", [](ts::Ptr<float> out, ts::Ptr<const float> in) {
    auto i = ts::arange(32);
    ts::store(out + i, ts::load(in + i));
  });
  ts::Device dev = ts::Device::cpu();
  auto ck = ts::compile(k, dev);
  ts::Buffer in = dev.alloc(ts::DType::F32, 8), out = dev.alloc(ts::DType::F32, 64);
  ::setenv("TESSERA_CHECK_BOUNDS", "1", 1);
  CHECK_THROWS_AS(ck.launch({1}, out, in), ts::LaunchError);
  ::unsetenv("TESSERA_CHECK_BOUNDS");
  // Real GPUs refuse a checked launch rather than ignore it; not testable
  // without one here (tests/runtime covers the refusal through the runtime).
}

// ts::device_assert (IR.h, "Assertions"): a checked launch on the CPU paths
// and the emulated GPUs raises a LaunchError naming the message and the
// user's line where an element is false, and nothing where all hold; an
// unchecked compile is the compile of the kernel without the assertion; a
// ragged tile schedule asserts its offsets; misuse is a DslError.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../cpu_paths.h"
#include "checked_options.h"
#include "dsl_test_util.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

std::string at(int line) { return std::string(__FILE__) + ":" + std::to_string(line); }

int tileLine = 0, scalarLine = 0;

ts::Kernel doubler(bool asserting) {
  return ts::kernel("doubler", [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto i = ts::arange(64);
    if (asserting) {
      scalarLine = __LINE__ + 1;  // the next line
      ts::device_assert(n <= 50, "the buffers' 50 elements");
    }
    auto x = ts::load(in + i, i < n, 0.0f);
    if (asserting) {
      tileLine = __LINE__ + 1;  // the next line
      ts::device_assert(x >= 0.0f, "inputs must be non-negative");
    }
    ts::store(out + i, x * 2.0f, i < n);
  });
}

}  // namespace

TEST_CASE("device_assert: checked launches report a false element with its message and line, on every path",
          "[dsl][checked][assert]") {
  for (ts::Device dev : testpaths::cpuPathsAndEmulators()) {
    INFO(dev.name());
    ts::CompiledKernel k = ts::compile(doubler(true), dev);
    ts::Buffer in = dev.upload(ts::f32, std::vector<float>(50, 1.5f)), out = dev.alloc(ts::f32, 64);
    // All true: the checked launch computes what the unchecked one does.
    k.launchWith({1}, {out, in, int32_t(50)}, ts::testing::checkedLaunch());
    std::vector<float> got = out.read<float>();
    CHECK(std::vector<float>(got.begin(), got.begin() + 50) == std::vector<float>(50, 3.0f));
    // A negative element: reported with the message and the line.
    std::vector<float> x(50, 1.5f);
    x[37] = -1.0f;
    in.write(x);
    try {
      k.launchWith({1}, {out, in, int32_t(50)}, ts::testing::checkedLaunch());
      FAIL("no error");
    } catch (const ts::LaunchError& e) {
      CHECK_THAT(e.what(), Contains("assertion failed: 'assert \"inputs must be non-negative\" @ " + at(tileLine)));
    }
    // A false scalar.
    try {
      k.launchWith({1}, {out, in, int32_t(51)}, ts::testing::checkedLaunch());
      FAIL("no error");
    } catch (const ts::LaunchError& e) {
      CHECK_THAT(e.what(), Contains("assertion failed: 'assert \"the buffers' 50 elements\" @ " + at(scalarLine)));
    }
    // Unchecked, nothing is tested.
    k.launch(ts::Dim3(1), out, in, int32_t(50));
    CHECK(out.read<float>()[37] == -2.0f);
  }
}

TEST_CASE("device_assert: an unchecked compile is the compile without the assertions", "[dsl][assert]") {
  for (const char* target : {"cpu:x86-64-v3", "nvptx:sm_90a", "amdgpu:gfx942"}) {
    INFO(target);
    const ts::Target t = ts::Target::parse(target);
    CHECK(ts::compile(doubler(true), t).dump(ts::Stage::LLVMOptimized) ==
          ts::compile(doubler(false), t).dump(ts::Stage::LLVMOptimized));
    ts::CompileOptions checked;
    checked.checkBounds = true;
    CHECK_THAT(ts::compile(doubler(true), t, checked).dump(ts::Stage::TileIR), Contains("assert("));
  }
}

TEST_CASE("device_assert: a ragged schedule's offsets are checked in a checked launch", "[dsl][checked][assert]") {
  int line = 0;
  ts::Kernel k = ts::kernel("rows", [&](ts::Ptr<int32_t> owner, ts::Ptr<const int32_t> offsets, ts::Int groups) {
    line = __LINE__ + 1;  // the next line
    ts::for_tiles(ts::Tiles(0, 4, 4, 4).ragged(offsets, groups).persistent(),
                  [&](const ts::Tile& t) { ts::store(owner + t.index, t.group); });
  });
  for (ts::Device dev : testpaths::cpuPathsAndEmulators()) {
    INFO(dev.name());
    ts::CompiledKernel c = ts::compile(k, dev);
    ts::Buffer owner = dev.upload(ts::i32, std::vector<int32_t>(8, -1));
    ts::Buffer good = dev.upload(ts::i32, std::vector<int32_t>{0, 4, 4, 9});
    c.launchWith({2}, {owner, good, int32_t(3)}, ts::testing::checkedLaunch());
    CHECK(owner.read<int32_t>() == std::vector<int32_t>{0, 2, 2, -1, -1, -1, -1, -1});
    for (const std::vector<int32_t>& bad : {std::vector<int32_t>{0, 9, 4, 9}, std::vector<int32_t>{-4, 0, 4, 8}}) {
      ts::Buffer off = dev.upload(ts::i32, bad);
      try {
        c.launchWith({2}, {owner, off, int32_t(3)}, ts::testing::checkedLaunch());
        FAIL("no error");
      } catch (const ts::LaunchError& e) {
        CHECK_THAT(e.what(), Contains("assertion failed: 'assert \"Tiles::ragged: the offsets must start at 0 or "
                                      "above and never decrease\" @ " +
                                      at(line)));
      }
    }
  }
}

TEST_CASE("device_assert misuse", "[dsl][assert][errors]") {
  int line = 0;
  std::string msg = dsltest::traceError([&](ts::Ptr<float> p, ts::Int) {
    line = __LINE__ + 1;
    ts::device_assert(ts::load(p), "positive");
  });
  CHECK_THAT(msg, StartsWith(dsltest::at(__FILE__, line)));
  CHECK_THAT(msg, Contains("device_assert: the condition must be a boolean (i1) scalar or tile"));
  msg = dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
    line = __LINE__ + 1;
    ts::device_assert(n > 0, "");
  });
  CHECK_THAT(msg, StartsWith(dsltest::at(__FILE__, line)));
  CHECK_THAT(msg, Contains("the assertion needs a message"));
}

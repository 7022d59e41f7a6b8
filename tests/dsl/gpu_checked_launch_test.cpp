// Checked launches on GPU targets (LaunchOptions::checkBounds on emulated
// GPUs): the checked compile (codegen/gpu/LowerChecks.cpp) reports the first
// access outside its buffer as the CPU's checked launch does, naming the op,
// the user's line, the thread and the program, and never performs it: the
// guard elements around a view stay as they were, and the emulator's own
// checks (which would report an access outside every allocation) find
// nothing.
#include <catch2/catch.hpp>

#include "checked_options.h"

#include <string>
#include <vector>

#include "registry.h"
#include "tessera/support/Targets.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace ex = tessera::examples;
using Catch::Matchers::Contains;

namespace {

// The planted violations run on every GPU target of Targets.def; the
// examples, whose compiles dominate, on one target per lowering family.
const char* const kArchs[] = {"nvptx:sm_80", "nvptx:sm_90a", "amdgpu:gfx942", "amdgpu:gfx1100"};

std::vector<std::string> everyGpuTarget() {
  std::vector<std::string> all;
  for (const ts::GpuArch& a : ts::gpuArchs()) all.push_back(a.spelling());
  return all;
}

std::string at(int line) { return std::string(__FILE__) + ":" + std::to_string(line); }

ts::LaunchOptions checked() { return ts::testing::checkedLaunch(); }

}  // namespace

TEST_CASE("checked launches on emulated GPUs report loads, stores and atomics outside their buffer",
          "[dsl][checked][emu]") {
  int loadLine = 0, storeLine = 0, atomicLine = 0;
  ts::Kernel k = ts::kernel("shifted", [&](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n, ts::Int shift) {
    auto i = ts::arange(128);
    loadLine = __LINE__ + 1;  // the next line
    auto x = ts::load(in + i, i < n, 0.0f);
    storeLine = __LINE__ + 1;  // the next line
    ts::store(out + (i - shift), x * 2.0f);
  });
  ts::Kernel ka = ts::kernel("acc", [&](ts::Ptr<float> out, ts::Int stride) {
    auto i = ts::arange(32);
    atomicLine = __LINE__ + 1;  // the next line
    ts::atomic_add(out + i * stride, 1.0f);
  });
  for (const std::string& arch : everyGpuTarget()) {
    INFO(arch);
    ts::Device dev = ts::Device::emulator(arch);
    auto ck = ts::compile(k, dev);
    ts::Buffer in = dev.alloc(ts::DType::F32, 128), small = dev.alloc(ts::DType::F32, 100);
    ts::Buffer out = dev.alloc(ts::DType::F32, 256);
    in.write(std::vector<float>(128, 1.5f));
    small.write(std::vector<float>(100, 1.5f));
    // A view 64 elements into `out`: elements 0..63 are a guard.
    ts::rt::Arg view(out);
    view.offset = 64;

    // In bounds: the checked launch computes what the unchecked one does.
    out.write(std::vector<float>(256, 7.0f));
    ck.launchWith({1}, {view, in, 128, 0}, checked());
    std::vector<float> got = out.read<float>();
    CHECK(std::vector<float>(got.begin(), got.begin() + 64) == std::vector<float>(64, 7.0f));
    CHECK(std::vector<float>(got.begin() + 64, got.begin() + 192) == std::vector<float>(128, 3.0f));

    // The load: `in` holds 100 elements, the mask allows 128.
    try {
      ck.launchWith({1}, {view, small, 128, 0}, checked());
      FAIL("no error");
    } catch (const ts::LaunchError& e) {
      std::string m = e.what();
      CHECK_THAT(m, Contains("out-of-bounds access by 'load @ " + at(loadLine)));
      CHECK_THAT(m, Contains("argument 1 (ptr<f32> arg1) at byte offset "));
      CHECK_THAT(m, Contains("outside its 400 bytes (100 f32"));
      CHECK_THAT(m, Contains("of program (0, 0, 0)"));
      CHECK_THAT(m, Contains("the access was not performed (checked launch)"));
    }

    // The store: 16 elements before the view's start, into the guard.
    out.write(std::vector<float>(256, 7.0f));
    try {
      ck.launchWith({1}, {view, in, 128, 16}, checked());
      FAIL("no error");
    } catch (const ts::LaunchError& e) {
      std::string m = e.what();
      CHECK_THAT(m, Contains("out-of-bounds access by 'store @ " + at(storeLine)));
      CHECK_THAT(m, Contains("argument 0 (ptr<f32> arg0) at byte offset -"));
      CHECK_THAT(m, Contains("outside its 768 bytes (192 f32"));
      CHECK_THAT(m, Contains(", by thread "));
    }
    got = out.read<float>();
    CHECK(std::vector<float>(got.begin(), got.begin() + 64) == std::vector<float>(64, 7.0f));  // never written
    CHECK(std::vector<float>(got.begin() + 64, got.begin() + 176) == std::vector<float>(112, 3.0f));

    // Past the end: the last 16 elements would land after the view (and its
    // allocation), where the emulator itself would report them.
    ts::rt::Arg tail(out);
    tail.offset = 144;  // 112 elements left, the kernel writes 128
    try {
      ck.launchWith({1}, {tail, in, 128, 0}, checked());
      FAIL("no error");
    } catch (const ts::LaunchError& e) {
      std::string m = e.what();
      CHECK_THAT(m, Contains("out-of-bounds access by 'store @ " + at(storeLine)));
      CHECK_THAT(m, Contains("outside its 448 bytes (112 f32"));
    }

    // Atomics: lane i adds at i * stride.
    auto cka = ts::compile(ka, dev);
    ts::Buffer acc = dev.alloc(ts::DType::F32, 64);
    acc.write(std::vector<float>(64, 0.0f));
    ts::rt::Arg accView(acc);
    accView.offset = 32;
    cka.launchWith({1}, {accView, 1}, checked());
    try {
      cka.launchWith({1}, {accView, -1}, checked());  // lanes 1..31 before the view
      FAIL("no error");
    } catch (const ts::LaunchError& e) {
      std::string m = e.what();
      CHECK_THAT(m, Contains("out-of-bounds access by 'atomic_add @ " + at(atomicLine)));
      CHECK_THAT(m, Contains("argument 0 (ptr<f32> arg0) at byte offset -"));
    }
    std::vector<float> a = acc.read<float>();
    CHECK(std::vector<float>(a.begin(), a.begin() + 32) == std::vector<float>(32, 0.0f));
    CHECK(a[32] == 2.0f);  // lane 0 of both launches
    CHECK(std::vector<float>(a.begin() + 33, a.end()) == std::vector<float>(31, 1.0f));
  }
}

TEST_CASE("checked launches on emulated GPUs report a shared buffer's slot index out of range", "[dsl][checked][emu]") {
  // buffer_slot with an index the kernel takes as an argument (tile IR
  // only: the DSL's staged buffers index their slots themselves).
  ts::Kernel k = ts::parseKernel(R"(kernel @slots(%out: ptr<f32, global>, %s: i32) {
  %0 = alloc() : buffer<shared, 2x64xf32>
  %1 = arange() {end = 64, start = 0} : tile<64xi32>
  %2 = cast(%1) : tile<64xf32>
  %3 = buffer_slot(%0, %s) : buffer<shared, 64xf32> loc("slots.cpp":12:3)
  local_store(%3, %2)
  barrier()
  %4 = local_load(%3) : tile<64xf32>
  %5 = splat(%out) : tile<64xptr<f32, global>>
  %6 = ptr_add(%5, %1) : tile<64xptr<f32, global>>
  store(%6, %4)
  return()
}
)",
                                 "slots.tir");
  std::vector<float> want(64);
  for (int i = 0; i < 64; ++i) want[static_cast<size_t>(i)] = static_cast<float>(i);
  for (const std::string& arch : everyGpuTarget()) {
    INFO(arch);
    ts::Device dev = ts::Device::emulator(arch);
    auto ck = ts::compile(k, dev);
    ts::Buffer out = dev.alloc(ts::DType::F32, 64);
    ck.launchWith({1}, {out, 1}, checked());
    CHECK(out.read<float>() == want);
    for (int s : {2, -1}) {
      INFO("slot " << s);
      try {
        ck.launchWith({1}, {out, s}, checked());
        FAIL("no error");
      } catch (const ts::LaunchError& e) {
        std::string m = e.what();
        CHECK_THAT(m, Contains("out-of-bounds access by 'buffer_slot @ slots.cpp:12:3': slot " + std::to_string(s) +
                               " of a shared buffer of 2 slots"));
      }
      CHECK(out.read<float>() == want);  // through slot 0 instead
    }
  }
}

TEST_CASE("bundled examples pass checked launches on emulated GPUs (no false reports)", "[examples][checked][emu]") {
  const char* const names[] = {"gemm_f16", "softmax", "flash_attention", "moe_grouped_gemm"};
  for (const char* arch : kArchs) {
    ts::Device dev = ts::Device::emulator(arch);
    for (const auto& e : ex::all()) {
      bool sampled = false;
      for (const char* n : names) sampled = sampled || e.name == n;
      if (!sampled) continue;
      // The first two test shapes of each (aligned, ragged: masked edges).
      for (size_t s = 0; s < 2 && s < e.testShapes.size(); ++s) {
        INFO(e.name << " on " << dev.name() << ", test shape " << s);
        ex::RunContext ctx;
        ctx.device = dev;
        ctx.shape = e.testShapes[s];
        ctx.launch.threads = 2;
        ctx.launch.checkBounds = true;
        ex::CheckResult r = e.run(ctx);
        INFO(r.detail);
        REQUIRE(r.ok);
      }
    }
  }
}

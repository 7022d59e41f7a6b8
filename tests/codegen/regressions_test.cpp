// Regression tests for bugs found by testing Tessera from outside (kernels
// written as users write them, fuzzed IR, bad API and CLI inputs). Each case
// names the bug it pins down; error cases assert the documented exception
// type and the user's file:line.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/runtime/Emulator.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;

namespace {

const char* const kGpuTargets[] = {"nvptx:sm_80", "nvptx:sm_86", "nvptx:sm_89", "nvptx:sm_90a",
                                   "amdgpu:gfx90a", "amdgpu:gfx942", "amdgpu:gfx1100"};

ts::Kernel addOne(const std::string& name, int* line = nullptr) {
  if (line) *line = __LINE__ + 1;
  return ts::kernel(name, [](ts::Ptr<float> out, ts::Int n) {
    auto i = ts::arange(128);
    ts::store(out + i, ts::load(out + i, i < n, 0.0f) + 1.0f, i < n);
  });
}

std::string at(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }

}  // namespace

TEST_CASE("numWarps of 0 or a non-power of two is a CompileError on every GPU target", "[codegen][gpu][regression]") {
  // Was: SIGFPE (0) and an InternalError from the layouts (3, 5, 6).
  int line = 0;
  ts::Kernel k = addOne("warps", &line);
  for (const char* target : kGpuTargets) {
    for (int w : {0, -1, 3, 5, 6, 64, 1 << 20}) {
      INFO(target << " numWarps " << w);
      ts::CompileOptions o;
      o.numWarps = w;
      try {
        ts::compile(k, ts::Target::parse(target), o);
        FAIL("compiled");
      } catch (const ts::CompileError& e) {
        std::string m = e.what();
        CHECK_THAT(m, Contains("numWarps = " + std::to_string(w)));
        CHECK_THAT(m, Contains(at(__FILE__, line)));
        CHECK_THAT(m, Contains("use one of 1, 2, 4"));
        CHECK_THAT(m, Contains(w >= 1 && w < 64 ? "not a power of two" : "out of range"));
      }
    }
    ts::CompileOptions o;
    o.numWarps = 8;
    CHECK_NOTHROW(ts::compile(k, ts::Target::parse(target), o));
  }
}

TEST_CASE("kernel names that are not C identifiers are a VerifyError on every target", "[codegen][regression]") {
  // Was: an InternalError wrapping LLVM's fatal error on NVPTX only.
  for (const char* name : {"my-kernel", "a b", "\xc3\xa9t\xc3\xa9", "9lives", "x.y"}) {
    // Reported when the kernel is traced, before any target is involved.
    int line = 0;
    INFO("'" << name << "'");
    try {
      addOne(name, &line);
      FAIL("traced");
    } catch (const ts::VerifyError& e) {
      CHECK_THAT(std::string(e.what()), Contains(at(__FILE__, line)) && Contains("must be a C identifier"));
    }
  }
  // And in textual IR, whatever the target.
  try {
    ts::parseKernel("kernel @my-kernel() {\n  return()\n}\n", "k.tir");
    FAIL("parsed");
  } catch (const ts::InternalError& e) {
    FAIL(e.what());
  } catch (const ts::Error& e) {
    CHECK_THAT(std::string(e.what()), Contains("k.tir:1"));
  }
  CHECK_THROWS_AS(addOne(""), ts::DslError);
  CHECK_NOTHROW(ts::compile(addOne("_ok_9"), ts::Target::parse("nvptx:sm_80")));
}

TEST_CASE("float atomic_max compiles for NVIDIA targets and is exact in the emulator", "[codegen][gpu][regression]") {
  // Was: "NVPTX backend does not support syncscope agent" for every f32/f16
  // atomic_max (the AMD scope was used on every vendor).
  ts::Kernel kmax = ts::kernel("amax", [](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto i = ts::program_id(0) * 64 + ts::arange(64);
    ts::atomic_max(out + ts::arange(64) * 0, ts::load(in + i, i < n, -ts::inf), i < n);
  });
  ts::Kernel kmax16 = ts::kernel("amax16", [](ts::Ptr<ts::half> out, ts::Ptr<const ts::half> in) {
    auto i = ts::arange(64);
    ts::atomic_max(out + ts::arange(64) * 0, ts::load(in + i));
  });
  for (const char* target : {"nvptx:sm_80", "nvptx:sm_86", "nvptx:sm_89", "nvptx:sm_90a", "amdgpu:gfx942"}) {
    INFO(target);
    CHECK_NOTHROW(ts::compile(kmax, ts::Target::parse(target)).dump(ts::Stage::Assembly));
    CHECK_NOTHROW(ts::compile(kmax16, ts::Target::parse(target)).dump(ts::Stage::Assembly));
  }
  const int n = 1000;
  std::vector<float> in(n);
  for (int j = 0; j < n; ++j) in[size_t(j)] = std::sin(float(j) * 0.37f) * float(j % 97);
  float want = -INFINITY;
  for (float v : in) want = std::max(want, v);
  for (const char* emu : {"nvptx:sm_80", "amdgpu:gfx942"}) {
    ts::Device dev = ts::Device::emulator(emu);
    auto k = ts::compile(kmax, dev);
    ts::Buffer din = dev.upload(ts::DType::F32, in), dout = dev.upload(ts::DType::F32, std::vector<float>{-INFINITY});
    k.launch({uint32_t((n + 63) / 64)}, dout, din, n);
    CHECK(dout.read<float>()[0] == want);
  }
}

TEST_CASE("f32 -> bf16 casts keep denormals on the CPU and in the emulator", "[codegen][regression]") {
  // Was: the emulator flushed denormal inputs to zero (x86's VCVTNEPS2BF16
  // on hosts with AVX512-BF16), while PTX's cvt.rn.bf16.f32 keeps them.
  ts::Kernel k = ts::kernel("tobf16", [](ts::Ptr<ts::bfloat16> out, ts::Ptr<const float> in) {
    auto i = ts::arange(16);
    ts::store(out + i, ts::load(in + i).to(ts::bf16));
  });
  std::vector<uint32_t> bits = {0x00000001u, 0x00008000u, 0x00010000u, 0x00018000u, 0x00028000u, 0x007fffffu,
                                0x80000001u, 0x80010000u, 0x807f0000u, 0x00400000u, 0x3f800000u, 0x00000000u,
                                0x7f800000u, 0x0001ffffu, 0x00017fffu, 0x80018001u};
  std::vector<float> in(16);
  std::memcpy(in.data(), bits.data(), 64);
  // Round to nearest even on the bit pattern: no flushing.
  std::vector<uint16_t> want(16);
  for (size_t j = 0; j < 16; ++j) want[j] = uint16_t((bits[j] + 0x7fffu + ((bits[j] >> 16) & 1u)) >> 16);
  std::vector<ts::Device> devs = {ts::Device::cpu(), ts::Device::emulator("nvptx:sm_80"),
                                  ts::Device::emulator("amdgpu:gfx942")};
  for (const ts::Device& dev : devs) {
    INFO(dev.name());
    auto ck = ts::compile(k, dev);
    ts::Buffer din = dev.upload(ts::DType::F32, in), dout = dev.alloc(ts::DType::BF16, 16);
    ck.launch({1}, dout, din);
    CHECK(dout.read<uint16_t>() == want);
  }
}

TEST_CASE("API misuse is a documented UsageError; emulator reports are LaunchErrors", "[codegen][regression]") {
  // Was: the plain base tessera::Error, and emu::EmulatorError deriving from it.
  CHECK_THROWS_AS(ts::compile(ts::Kernel{}, ts::Device::cpu()), ts::UsageError);
  CHECK_THROWS_AS(ts::parseStage("bogus"), ts::UsageError);
  CHECK_THROWS_AS(ts::compile(addOne("k"), ts::Target::cpu()).dump(ts::Stage::PTX), ts::UsageError);
  CHECK_THROWS_AS(ts::CompiledKernel{}.dump(ts::Stage::TileIR), ts::UsageError);
  // An out-of-bounds access the emulator catches: a buffer of 8 for 128 reads.
  ts::Device emu = ts::Device::emulator("nvptx:sm_80");
  ts::Kernel k = ts::kernel("oob", [](ts::Ptr<float> out) {
    auto i = ts::arange(128);
    ts::store(out + i, ts::load(out + i) + 1.0f);
  });
  auto ck = ts::compile(k, emu);
  ts::Buffer small = emu.alloc(ts::DType::F32, 8);
  CHECK_THROWS_AS(ck.launch({1}, small), ts::LaunchError);
  CHECK_THROWS_AS(ck.launch({1}, small), ts::emu::EmulatorError);
}

TEST_CASE("a TESSERA_DUMP_DIR that cannot be written warns and compiles", "[codegen][regression]") {
  // Was: every compile failed while the debugging aid was misconfigured.
  ::setenv("TESSERA_DUMP_DIR", "/proc/self/status/not-a-dir", 1);
  ts::clearCache();
  CHECK_NOTHROW(ts::compile(addOne("dumped"), ts::Device::cpu()));
  ::unsetenv("TESSERA_DUMP_DIR");
}

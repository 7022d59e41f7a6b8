// Buffers, devices and loading on the CPU device.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "tessera/runtime/Runtime.h"

using namespace tessera;
using namespace tessera::rt;
using Catch::Matchers::Contains;

namespace {

void noopEntry(void* const*, int64_t, int64_t, const int32_t*) {}

}  // namespace

TEST_CASE("cpu device is present and named", "[runtime][device]") {
  Device cpu = Device::cpu();
  CHECK(cpu.kind() == DeviceKind::CPU);
  CHECK(cpu == Device::cpu());
  CHECK_THAT(cpu.name(), Contains("cpu ("));
  CHECK(cpu.defaultThreads() >= 1);
  auto all = Device::all();
  REQUIRE(!all.empty());
  CHECK(all.front() == cpu);
  CHECK(std::string(name(DeviceKind::CPU)) == "cpu");
  CHECK(std::string(name(DeviceKind::CUDA)) == "cuda");
  CHECK(std::string(name(DeviceKind::HIP)) == "hip");
  cpu.synchronize();
}

TEST_CASE("alloc is zeroed, aligned and sized", "[runtime][buffer]") {
  Device cpu = Device::cpu();
  // Dirty memory, free it, and allocate the same size again: the allocator
  // very likely hands the same block back, which must come back zeroed.
  for (int round = 0; round < 3; ++round) {
    Buffer b = cpu.alloc(DType::F32, 1000);
    REQUIRE(b);
    CHECK(b.dtype() == DType::F32);
    CHECK(b.count() == 1000);
    CHECK(b.bytes() == 4000);
    CHECK(reinterpret_cast<uintptr_t>(b.data()) % 64 == 0);
    CHECK(b.device() == cpu);
    auto bytes = b.read<uint8_t>();
    REQUIRE(bytes.size() == 4000);
    for (size_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] != 0) FAIL("byte " << i << " of a fresh buffer is " << int(bytes[i]));
    b.fillBytes(0xFF);
  }
  Buffer bits = cpu.alloc(DType::I1, 7);
  CHECK(bits.bytes() == 7);  // i1 is one byte per element
  Buffer empty = cpu.alloc(DType::F64, 0);
  CHECK(empty.count() == 0);
  CHECK(empty.bytes() == 0);
  CHECK(empty.data() != nullptr);
  CHECK(empty.read<double>().empty());
}

TEST_CASE("write/read round trip and fill", "[runtime][buffer]") {
  Device cpu = Device::cpu();
  std::vector<float> host(37);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.5f * float(i) - 3.25f;
  Buffer b = cpu.upload(DType::F32, host);
  CHECK(b.count() == 37);
  CHECK(b.read<float>() == host);
  CHECK(std::memcmp(b.data(), host.data(), host.size() * 4) == 0);

  // A partial copy touches only the first bytes.
  std::vector<float> head = {100.f, 200.f};
  b.write(head);
  auto back = b.read<float>();
  CHECK(back[0] == 100.f);
  CHECK(back[1] == 200.f);
  CHECK(back[2] == host[2]);

  b.fillBytes(0x3F);
  for (uint8_t x : b.read<uint8_t>()) REQUIRE(x == 0x3F);

  // Copies share one allocation.
  Buffer alias = b;
  alias.fillBytes(0);
  for (float x : b.read<float>()) REQUIRE(x == 0.f);
}

TEST_CASE("copy size mismatches are reported with both sizes", "[runtime][buffer]") {
  Device cpu = Device::cpu();
  Buffer b = cpu.alloc(DType::F32, 16);  // 64 bytes
  std::vector<float> big(20);
  REQUIRE_THROWS_AS(b.write(big), LaunchError);
  REQUIRE_THROWS_WITH(b.write(big), Contains("80 bytes") && Contains("64 bytes") && Contains("16 f32"));
  std::vector<char> dst(65);
  REQUIRE_THROWS_AS(b.copyToHost(dst.data(), 65), LaunchError);
  REQUIRE_THROWS_WITH(b.copyToHost(dst.data(), 65), Contains("65 bytes") && Contains("64 bytes"));
  REQUIRE_THROWS_AS(b.copyFromHost(nullptr, 4), LaunchError);

  // upload of host data whose size is not a whole number of elements.
  std::vector<uint8_t> odd(6);
  REQUIRE_THROWS_AS(cpu.upload(DType::F32, odd), LaunchError);
}

TEST_CASE("a null buffer reports misuse", "[runtime][buffer]") {
  Buffer null;
  CHECK(null.isNull());
  CHECK(!null);
  REQUIRE_THROWS_AS(null.count(), LaunchError);
  REQUIRE_THROWS_WITH(null.bytes(), Contains("null Buffer"));
  REQUIRE_THROWS_AS(null.fillBytes(0), LaunchError);
  REQUIRE_THROWS_AS(null.read<float>(), LaunchError);
}

TEST_CASE("signature text", "[runtime][kernel]") {
  KernelSignature sig{"softmax",
                      {{ArgSpec::Kind::Pointer, DType::F32, "out"},
                       {ArgSpec::Kind::Pointer, DType::F32, "in"},
                       {ArgSpec::Kind::Scalar, DType::I32, "cols"}},
                      {}};
  CHECK(sig.str() == "softmax(ptr<f32> out, ptr<f32> in, i32 cols)");
  KernelSignature unnamed{"k", {{ArgSpec::Kind::Scalar, DType::BF16, ""}}, {}};
  CHECK(unnamed.str() == "k(bf16)");
  CHECK(KernelSignature{"empty", {}, {}}.str() == "empty()");
}

TEST_CASE("cpu load accepts host functions only and keeps the owner alive", "[runtime][kernel]") {
  Device cpu = Device::cpu();
  Binary ptx;
  ptx.format = Binary::Format::PTX;
  ptx.signature.kernelName = "saxpy";
  ptx.ptx = ".version 8.0";
  REQUIRE_THROWS_AS(cpu.load(ptx), DeviceError);
  REQUIRE_THROWS_WITH(cpu.load(ptx), Contains("saxpy") && Contains("PTX"));
  Binary hsaco = ptx;
  hsaco.format = Binary::Format::HSACO;
  REQUIRE_THROWS_WITH(cpu.load(hsaco), Contains("HSACO"));

  Binary noEntry;
  noEntry.signature.kernelName = "saxpy";
  REQUIRE_THROWS_AS(cpu.load(noEntry), DeviceError);
  REQUIRE_THROWS_WITH(cpu.load(noEntry), Contains("no host entry"));

  auto owner = std::make_shared<int>(42);
  std::weak_ptr<int> watch = owner;
  Kernel k;
  {
    Binary bin;
    bin.signature.kernelName = "noop";
    bin.hostEntry = &noopEntry;
    bin.owner = std::move(owner);
    k = cpu.load(bin);
  }
  CHECK(!watch.expired());  // the binary is gone, the kernel keeps the code
  CHECK(k.signature().kernelName == "noop");
  k.launch({1}, {});
  k = Kernel();
  CHECK(watch.expired());

  REQUIRE_THROWS_AS(k.launch({1}, {}), LaunchError);
  REQUIRE_THROWS_AS(k.signature(), LaunchError);
}

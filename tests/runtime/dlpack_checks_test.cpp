// DLPack and external memory on host devices, what the header and
// docs/runtime.md promise: every Tessera dtype imports and exports
// (unsigned integers and the four 8-bit floats included) and the DLPack
// dtypes without a Tessera type are refused; host memory is device_id 0,
// any other id is refused naming it; an address range that runs past the
// end of the 64-bit address space is refused by Device::wrap and by a
// DLPack import's byte_offset. Nothing refused is taken.

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tessera/runtime/DLPack.h"
#include "tessera/runtime/Runtime.h"
#include "error_of.h"

using tessera::DeviceError;
using tessera::DType;
using tessera::UsageError;
using tessera::rt::testing::errorOf;
using namespace tessera::rt;
using namespace tessera::rt::dlpack;
using Catch::Matchers::Contains;

namespace {

/// A one-dimensional tensor over `data` that counts its deleter's calls.
struct Tensor {
  int64_t shape[1];
  int deletes = 0;
  DLManagedTensor managed{};

  Tensor(void* data, DLDataType t, int64_t n, DLDevice dev = {kDLCPU, 0}) : shape{n} {
    managed.dl_tensor = DLTensor{data, dev, 1, t, shape, nullptr, 0};
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { ++static_cast<Tensor*>(self->manager_ctx)->deletes; };
  }
};

}  // namespace

TEST_CASE("DLPack: unsigned integers and the 8-bit floats import and export, other dtypes are refused",
          "[runtime][external][dlpack]") {
  struct Row {
    DLDataType dl;
    DType ts;
  };
  const std::vector<Row> rows = {
      {{kDLUInt, 8, 1}, DType::U8},
      {{kDLUInt, 16, 1}, DType::U16},
      {{kDLUInt, 32, 1}, DType::U32},
      {{kDLUInt, 64, 1}, DType::U64},
      {{kDLFloat8_e4m3fn, 8, 1}, DType::F8E4M3},
      {{kDLFloat8_e5m2, 8, 1}, DType::F8E5M2},
      {{kDLFloat8_e4m3fnuz, 8, 1}, DType::F8E4M3FNUZ},
      {{kDLFloat8_e5m2fnuz, 8, 1}, DType::F8E5M2FNUZ},
      {{kDLFloat8_e8m0fnu, 8, 1}, DType::E8M0},
  };
  for (Device dev : {Device::cpu(), Device::emulator("nvptx:sm_80")}) {
    INFO(dev.name());
    std::vector<uint64_t> mem(4);
    for (const Row& r : rows) {
      INFO(tessera::name(r.ts));
      {
        Tensor t(mem.data(), r.dl, 4);
        Buffer b = fromDLPack(dev, &t.managed);
        CHECK(b.dtype() == r.ts);
        CHECK(b.count() == 4);
        CHECK(b.data() == mem.data());
      }
      DLManagedTensor* out = toDLPack(dev.alloc(r.ts, 2));
      CHECK((out->dl_tensor.dtype.code == r.dl.code && out->dl_tensor.dtype.bits == r.dl.bits &&
             out->dl_tensor.dtype.lanes == 1));
      out->deleter(out);
    }
    // The DLPack 1.1 floats Tessera has no type for: e3m4 (7), e4m3 with
    // infinities (8), e4m3b11fnuz (9); and opaque handles (3).
    for (uint8_t code : {3, 7, 8, 9}) {
      INFO("code " << int(code));
      Tensor t(mem.data(), {code, 8, 1}, 4);
      CHECK_THAT(errorOf<UsageError>([&] { fromDLPack(dev, &t.managed); }),
                 Contains("the dtype has no Tessera equivalent (code " + std::to_string(code) + ", 8 bits"));
      CHECK(t.deletes == 0);
    }
    // The 6- and 4-bit floats: DLPack leaves their packing to the producer,
    // so they are refused with the way to pass them (their codes as bytes),
    // and a Tessera buffer of their codes has no DLPack type either.
    for (uint8_t code : {15, 16, 17}) {
      INFO("code " << int(code));
      Tensor t(mem.data(), {code, uint8_t(code == 17 ? 4 : 6), 1}, 4);
      CHECK_THAT(errorOf<UsageError>([&] { fromDLPack(dev, &t.managed); }),
                 Contains("pass their codes as a uint8 tensor"));
    }
    // Refused before anything is handed out (the sanitizer build checks
    // that the half-made export is freed).
    CHECK_THAT(errorOf<UsageError>([&] { toDLPack(dev.alloc(DType::F4E2M1, 2)); }),
               Contains("export its codes as a u8 buffer"));
    CHECK_THAT(errorOf<UsageError>([&] { toDLPackVersioned(dev.alloc(DType::F6E3M2, 2)); }),
               Contains("export its codes as a u8 buffer"));
    Tensor wide(mem.data(), {kDLFloat8_e5m2, 16, 1}, 4);
    CHECK_THAT(errorOf<UsageError>([&] { fromDLPack(dev, &wide.managed); }),
               Contains("no Tessera dtype has this width (code 12, 16 bits"));
  }
}

TEST_CASE("DLPack on host devices: device_id must be 0, as DLPack gives host memory", "[runtime][external][dlpack]") {
  std::vector<float> mem(4);
  for (Device dev : {Device::cpu(), Device::emulator("nvptx:sm_80")}) {
    INFO(dev.name());
    for (DLDeviceType type : {kDLCPU, kDLCUDAHost, kDLROCMHost}) {
      for (int32_t id : {1, -1, 7}) {
        INFO("type " << int(type) << ", id " << id);
        Tensor t(mem.data(), {kDLFloat, 32, 1}, 4, {type, id});
        CHECK_THAT(errorOf<DeviceError>([&] { fromDLPack(dev, &t.managed); }),
                   Contains(" device " + std::to_string(id) + " but this is device 0") &&
                       Contains("DLPack gives host memory, pinned or not, device_id 0"));
        CHECK(t.deletes == 0);
      }
      Tensor ok(mem.data(), {kDLFloat, 32, 1}, 4, {type, 0});
      CHECK(fromDLPack(dev, &ok.managed).data() == mem.data());
      CHECK(ok.deletes == 1);
    }
  }
  // The message names the device type and the id.
  Tensor t(mem.data(), {kDLFloat, 32, 1}, 4, {kDLCPU, 1});
  CHECK_THAT(errorOf<DeviceError>([&] { fromDLPack(Device::cpu(), &t.managed); }),
             Contains("fromDLPack (DLManagedTensor) on cpu") &&
                 Contains("the tensor is on kDLCPU device 1 but this is device 0"));
}

TEST_CASE("an address range past the end of the 64-bit address space is refused", "[runtime][external][dlpack]") {
  constexpr uint64_t kTop = std::numeric_limits<uint64_t>::max();
  for (Device dev : {Device::cpu(), Device::emulator("nvptx:sm_80")}) {
    INFO(dev.name());
    int deletes = 0;
    WrapOptions counted;
    counted.deleter = [&] { ++deletes; };
    // 16-byte aligned, 16 bytes below 2^64: 4 floats end exactly at 2^64,
    // whose address does not exist; 8 would wrap around to 16.
    const uint64_t high = kTop - 15;
    for (size_t n : {4, 8}) {
      INFO(n << " elements");
      CHECK_THAT(errorOf<UsageError>([&] { dev.wrap(high, DType::F32, n, counted); }),
                 Contains("Device::wrap on " + dev.name()) &&
                     Contains("at 0xfffffffffffffff0: the range runs past the end of the 64-bit address space"));
    }
    CHECK(deletes == 0);
    // The last representable address is a valid end.
    CHECK(dev.wrap(high, DType::F32, 3).count() == 3);

    // DLPack: data + byte_offset itself wraps (here to address 16, aligned
    // and not null: nothing else would catch it) ...
    std::vector<float> mem(4);
    Tensor t(mem.data(), {kDLFloat, 32, 1}, 4);
    const uint64_t offset = (kTop - reinterpret_cast<uint64_t>(mem.data())) + 17;
    t.managed.dl_tensor.byte_offset = offset;
    CHECK_THAT(
        errorOf<UsageError>([&] { fromDLPack(dev, &t.managed); }),
        Contains("fromDLPack (DLManagedTensor) on " + dev.name()) &&
            Contains("+ byte_offset (" + std::to_string(offset) + ") runs past the end of the 64-bit address space"));
    // ... or the tensor's bytes after it do.
    t.managed.dl_tensor.data = reinterpret_cast<void*>(uintptr_t{16});
    t.managed.dl_tensor.byte_offset = high - 16;
    CHECK_THAT(errorOf<UsageError>([&] { fromDLPack(dev, &t.managed); }),
               Contains("fromDLPack (DLManagedTensor) on " + dev.name()) &&
                   Contains("the range runs past the end of the 64-bit address space"));
    CHECK(t.deletes == 0);
  }
}

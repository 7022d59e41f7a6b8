// External memory on host devices: Device::wrap of a caller's pointer and
// DLPack import / export, on the CPU and the SIMT emulator. The caller's
// memory goes through a real compiled kernel in place, deleters run exactly
// once when the last handle goes, and every malformed input is a clear error
// that takes nothing.

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "registry.h"
#include "tessera/runtime/DLPack.h"
#include "tessera/tessera.h"
#include "error_of.h"

namespace ts = tessera;
using tessera::rt::testing::errorOf;
using namespace tessera::rt;
using namespace tessera::rt::dlpack;
using Catch::Matchers::Contains;
using tessera::DType;

namespace {

constexpr int kBlock = 256;

/// out = a + b through the vector_add example, compiled for `dev`.
void vectorAdd(const Device& dev, const Buffer& out, const Buffer& a, const Buffer& b, int n) {
  auto k = ts::compile(ts::examples::vectorAdd(kBlock), dev);
  k.launch(Dim3((n + kBlock - 1) / kBlock), out, a, b, n);
}

/// A DLPack tensor over `data` that counts its deleter calls.
struct CountedTensor {
  int64_t shape[2];
  int64_t strides[2];
  int deletes = 0;
  DLManagedTensor managed{};
  DLManagedTensorVersioned versioned{};

  CountedTensor(void* data, DLDataType t, int64_t rows, int64_t cols, DLDevice dev = {kDLCPU, 0})
      : shape{rows, cols}, strides{cols, 1} {
    const DLTensor tensor{data, dev, 2, t, shape, nullptr, 0};
    managed.dl_tensor = tensor;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { ++static_cast<CountedTensor*>(self->manager_ctx)->deletes; };
    versioned.version = {1, 0};
    versioned.dl_tensor = tensor;
    versioned.manager_ctx = this;
    versioned.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<CountedTensor*>(self->manager_ctx)->deletes;
    };
  }
};

const DLDataType kF32{kDLFloat, 32, 1};

}  // namespace

TEST_CASE("a caller's host memory runs through a compiled kernel in place", "[runtime][external]") {
  for (Device dev : {Device::cpu(), Device::emulator("nvptx:sm_80")}) {
    INFO(dev.name());
    const int n = 1000;
    std::vector<float> a(n), b(n), out(n, -1.0f);
    for (int i = 0; i < n; ++i) a[i] = float(i), b[i] = 0.5f * float(i);
    int freed = 0;
    {
      WrapOptions o;
      o.deleter = [&] { ++freed; };
      o.capacityBytes = out.size() * sizeof(float);
      Buffer wa = dev.wrap(a.data(), DType::F32, n), wb = dev.wrap(b.data(), DType::F32, n);
      Buffer wout = dev.wrap(out.data(), DType::F32, n, o);
      CHECK(wout.data() == out.data());
      CHECK(wout.isExternal());
      Buffer copy = wout;  // a second handle: the deleter waits for both
      vectorAdd(dev, wout, wa, wb, n);
      wout = Buffer();
      CHECK(freed == 0);
      for (int i = 0; i < n; i += 37) REQUIRE(out[i] == a[i] + b[i]);  // the result is in the caller's vector
    }
    CHECK(freed == 1);
  }
}

TEST_CASE("a DLPack tensor runs through a compiled kernel in place, both forms", "[runtime][external][dlpack]") {
  for (Device dev : {Device::cpu(), Device::emulator("amdgpu:gfx942")}) {
    INFO(dev.name());
    std::vector<float> a(24, 2.0f), b(24), out(24, 0.0f);
    for (int i = 0; i < 24; ++i) b[i] = float(i);
    CountedTensor ta(a.data(), kF32, 4, 6), tb(b.data(), kF32, 4, 6), tout(out.data(), kF32, 4, 6);
    tb.versioned.dl_tensor.strides = tb.strides;  // explicit row-major strides are accepted too
    {
      Buffer ba = fromDLPack(dev, &ta.managed);
      Buffer bb = fromDLPack(dev, &tb.versioned);
      Buffer bout = fromDLPack(dev, &tout.versioned);
      CHECK(bout.count() == 24);
      CHECK(bout.data() == out.data());
      vectorAdd(dev, bout, ba, bb, 24);
      CHECK(ta.deletes == 0);
    }
    for (int i = 0; i < 24; ++i) REQUIRE(out[i] == 2.0f + float(i));
    CHECK(ta.deletes == 1);
    CHECK(tb.deletes == 1);
    CHECK(tout.deletes == 1);
  }
}

TEST_CASE("DLPack export and re-import give the same memory, and exports keep it alive",
          "[runtime][external][dlpack]") {
  Device dev = Device::cpu();
  Buffer b = dev.upload(DType::I32, std::vector<int32_t>{1, 2, 3, 4, 5});
  void* const mem = b.data();

  DLManagedTensor* t = toDLPack(b);
  DLManagedTensorVersioned* tv = toDLPackVersioned(b);
  CHECK(t->dl_tensor.data == mem);
  CHECK(t->dl_tensor.ndim == 1);
  CHECK(t->dl_tensor.shape[0] == 5);
  CHECK((t->dl_tensor.device.device_type == kDLCPU && t->dl_tensor.device.device_id == 0));
  CHECK((t->dl_tensor.dtype.code == kDLInt && t->dl_tensor.dtype.bits == 32 && t->dl_tensor.dtype.lanes == 1));
  CHECK((tv->version.major == 1 && tv->flags == 0));
  CHECK(tv->dl_tensor.data == mem);

  b = Buffer();  // the producer lets go; the tensors still hold the memory
  Buffer back = fromDLPack(dev, t);
  Buffer backV = fromDLPack(dev, tv);
  CHECK(back.data() == mem);
  CHECK(backV.data() == mem);
  CHECK(back.dtype() == DType::I32);
  CHECK(back.read<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 5});
  back.write(std::vector<int32_t>{9, 9, 9, 9, 9});
  CHECK(backV.read<int32_t>() == std::vector<int32_t>{9, 9, 9, 9, 9});
  // Dropping the imports calls the exports' deleters, which release the
  // original allocation (a leak or a double free shows under the sanitizers).
  back = Buffer();
  backV = Buffer();

  // Every dtype maps both ways.
  for (DType d :
       {DType::I1, DType::I8, DType::I16, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
    DLManagedTensor* x = toDLPack(dev.alloc(d, 3));
    Buffer y = fromDLPack(dev, x);
    CHECK(y.dtype() == d);
    CHECK(y.count() == 3);
  }
  // The emulator's memory is host memory.
  DLManagedTensor* e = toDLPack(Device::emulator("nvptx:sm_80").alloc(DType::F32, 2));
  CHECK(e->dl_tensor.device.device_type == kDLCPU);
  e->deleter(e);
  CHECK_THROWS_AS(toDLPack(Buffer()), ts::UsageError);
}

TEST_CASE("DLPack tensors Tessera cannot use are refused, and nothing is taken", "[runtime][external][dlpack]") {
  Device dev = Device::cpu();
  std::vector<float> mem(24);
  auto refuse = [&](CountedTensor& t, const std::string& want, bool device = false) {
    INFO(want);
    const std::string msg = device ? errorOf<ts::DeviceError>([&] { fromDLPack(dev, &t.managed); })
                                   : errorOf<ts::UsageError>([&] { fromDLPack(dev, &t.managed); });
    CHECK_THAT(msg, Contains("fromDLPack (DLManagedTensor) on cpu") && Contains(want));
    CHECK(t.deletes == 0);
  };
  {
    CountedTensor t(mem.data(), kF32, 4, 6, {kDLCUDA, 0});
    refuse(t, "the tensor is on kDLCUDA (device 0) but this device's memory is kDLCPU", true);
  }
  {
    CountedTensor t(mem.data(), {kDLComplex, 64, 1}, 4, 3);
    refuse(t, "complex numbers have no Tessera dtype (code 5, 64 bits, 1 lanes)");
  }
  {
    CountedTensor t(mem.data(), {kDLFloat, 32, 4}, 4, 1);
    refuse(t, "vector dtypes are not supported (code 2, 32 bits, 4 lanes)");
  }
  {
    CountedTensor t(mem.data(), {kDLFloat, 8, 1}, 4, 6);
    refuse(t, "no Tessera dtype has this width (code 2, 8 bits, 1 lanes)");
  }
  {
    CountedTensor t(mem.data(), {kDLUInt, 12, 1}, 4, 6);
    refuse(t, "no Tessera dtype has this width (code 1, 12 bits, 1 lanes)");
  }
  {
    CountedTensor t(mem.data(), kF32, 4, 6);
    t.managed.dl_tensor.strides = t.strides;
    t.strides[0] = 12;  // every other row: a strided view
    refuse(t, "not row-major contiguous: dimension 0 (size 4) has stride 12, expected 6");
    t.strides[0] = 6;
    t.strides[1] = 4;  // a column-major-like view
    refuse(t, "dimension 1 (size 6) has stride 4, expected 1");
  }
  {
    CountedTensor t(nullptr, kF32, 4, 6);
    refuse(t, "the data pointer is null but the tensor has 24 elements");
  }
  {
    CountedTensor t(mem.data(), kF32, -1, 6);
    refuse(t, "dimension 0 has negative size -1");
  }
  {
    CountedTensor t(mem.data(), kF32, 4, 6);
    t.managed.dl_tensor.byte_offset = 2;  // not a whole float
    refuse(t, "is not aligned to the element size (4 bytes)");
  }
  {
    CountedTensor t(mem.data(), kF32, 4, 6);
    t.versioned.version = {2, 0};
    CHECK_THAT(errorOf<ts::UsageError>([&] { fromDLPack(dev, &t.versioned); }),
               Contains("DLPack version 2.0 has another ABI"));
    t.versioned.version = {1, 1};
    t.versioned.flags = kFlagReadOnly;
    CHECK_THAT(errorOf<ts::UsageError>([&] { fromDLPack(dev, &t.versioned); }), Contains("the tensor is read-only"));
    CHECK(t.deletes == 0);
  }
  CHECK_THAT(errorOf<ts::UsageError>([&] { fromDLPack(dev, static_cast<DLManagedTensor*>(nullptr)); }),
             Contains("the tensor is null"));
}

TEST_CASE("DLPack: size-1 dimensions may have any stride, and scalars, offsets and empty tensors work",
          "[runtime][external][dlpack]") {
  Device dev = Device::cpu();
  std::vector<float> mem{0, 1, 2, 3, 4, 5};
  {
    CountedTensor t(mem.data(), kF32, 1, 6);
    t.managed.dl_tensor.strides = t.strides;
    t.strides[0] = 999;  // what frameworks put on a broadcast or sliced size-1 dimension
    Buffer b = fromDLPack(dev, &t.managed);
    CHECK(b.count() == 6);
  }
  {
    CountedTensor t(mem.data(), kF32, 2, 2);
    t.managed.dl_tensor.byte_offset = 2 * sizeof(float);  // starts at mem[2]
    Buffer b = fromDLPack(dev, &t.managed);
    CHECK(b.data() == &mem[2]);
    CHECK(b.read<float>() == std::vector<float>{2, 3, 4, 5});
  }
  {
    CountedTensor t(mem.data(), kF32, 1, 1);
    t.managed.dl_tensor.ndim = 0;  // a scalar: one element
    CHECK(fromDLPack(dev, &t.managed).count() == 1);
  }
  {
    CountedTensor t(nullptr, kF32, 0, 6);  // no elements: a null pointer is fine
    CHECK(fromDLPack(dev, &t.managed).count() == 0);
    CHECK(t.deletes == 1);
  }
}

TEST_CASE("Device::wrap: bad input is refused before anything is taken", "[runtime][external]") {
  Device cpu = Device::cpu();
  int deletes = 0;
  WrapOptions counted;
  counted.deleter = [&] { ++deletes; };
  std::vector<float> v(16);

  CHECK_THAT(errorOf<ts::UsageError>([&] { cpu.wrap(nullptr, DType::F32, 4, counted); }),
             Contains("Device::wrap on cpu") && Contains("of 4 f32 elements: the address is null"));
  CHECK_THAT(errorOf<ts::UsageError>([&] { cpu.wrap(reinterpret_cast<char*>(v.data()) + 2, DType::F32, 4, counted); }),
             Contains("is not aligned to the element size (4 bytes)"));
  WrapOptions small = counted;
  small.capacityBytes = 60;
  CHECK_THAT(errorOf<ts::UsageError>([&] { cpu.wrap(v.data(), DType::F32, 16, small); }),
             Contains("(64 bytes): more than the 60 bytes of WrapOptions::capacityBytes"));
  CHECK_THAT(errorOf<ts::UsageError>([&] { cpu.wrap(v.data(), DType::F64, SIZE_MAX / 4, counted); }),
             Contains("the size in bytes overflows"));
  CHECK(deletes == 0);
  CHECK(cpu.wrap(nullptr, DType::F32, 0).count() == 0);  // nothing to point at: fine

  // The emulator knows its own allocations: a wrap inside one may not run
  // past its end.
  Device emu = Device::emulator("nvptx:sm_80");
  Buffer owned = emu.alloc(DType::F32, 16);
  auto* base = static_cast<float*>(owned.data());
  CHECK_THAT(errorOf<ts::UsageError>([&] { emu.wrap(base + 8, DType::F32, 9, counted); }),
             Contains("32 bytes into an allocation of 64 bytes: only 32 bytes remain"));
  CHECK(deletes == 0);
  Buffer view = emu.wrap(base + 8, DType::F32, 8);
  CHECK(view.data() == base + 8);

  // keepAlive holds the owner until the last handle goes.
  auto owner = std::make_shared<std::vector<float>>(8, 1.0f);
  std::weak_ptr<std::vector<float>> watch = owner;
  WrapOptions keep;
  keep.keepAlive = owner;
  Buffer held = cpu.wrap(owner->data(), DType::F32, 8, std::move(keep));
  owner.reset();
  CHECK(!watch.expired());
  CHECK(held.read<float>() == std::vector<float>(8, 1.0f));
  held = Buffer();
  CHECK(watch.expired());
}

// The SIMT emulator as a runtime device: spelling, binaries it accepts,
// memory, launches through tessera::compile, and the checks it runs
// (out-of-bounds accesses reported with the tile op and its source line).
// Also: asking for CUDA / HIP devices on a machine without them.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

#include "../../runtime/lib/DeviceImpl.h"  // encodeEmuTensorMap
#include "tessera/ir/Builder.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace rt = tessera::rt;
using namespace tessera::ir;
using tessera::DType;

namespace {

Location L(uint32_t line) { return Location{"emu_device_test.cpp", line, 5}; }
Type i32() { return Type::scalar(DType::I32); }
Type gptr() { return Type::ptr(DType::F32, MemSpace::Global); }

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "(no error)";
}

/// out[i] = 2 * x[i] for i < n, one BLOCK-wide tile per program. With
/// `maskLoad` false neither the load of x nor the store is masked: the load
/// reads past the end of x for a ragged n (the bug the emulator must catch;
/// line 31 is the load). The store stays unmasked too, so that the optimiser
/// cannot sink the load under the store's mask, which would hide the bug on
/// a GPU as well.
ts::Kernel doubler(int64_t BLOCK, bool maskLoad) {
  auto f = std::make_shared<Function>(maskLoad ? "doubler" : "doubler_oob", L(30));
  Value* out = f->addArgument(gptr(), "out");
  Value* x = f->addArgument(gptr(), "x");
  Value* n = f->addArgument(i32(), "n");
  Builder b(&f->body());
  b.setLoc(L(30));
  Value* offs = b.binary(OpCode::Add, b.splat(b.binary(OpCode::Mul, b.programId(0), b.constant(i32(), BLOCK)), {BLOCK}),
                         b.arange(0, BLOCK));
  Value* mask = b.cmp("lt", offs, b.splat(n, {BLOCK}));
  b.setLoc(L(31));
  Value* v = b.load(b.ptrAdd(b.splat(x, {BLOCK}), offs), maskLoad ? mask : nullptr);
  b.setLoc(L(32));
  Value* y = b.binary(OpCode::Add, v, v);
  b.store(b.ptrAdd(b.splat(out, {BLOCK}), offs), y, maskLoad ? mask : nullptr);
  b.ret();
  return ts::Kernel(std::shared_ptr<const Function>(std::move(f)));
}

/// out[i] = x[BLOCK-1-i] through a shared buffer: x is loaded, written to
/// shared memory, read back and reversed by a layout-changing permutation.
/// The lowering must separate the shared write and reads by barriers; the
/// emulator checks that it does.
ts::Kernel sharedRoundTrip(int64_t BLOCK) {
  auto f = std::make_shared<Function>("shared_round_trip", L(50));
  Value* out = f->addArgument(gptr(), "out");
  Value* x = f->addArgument(gptr(), "x");
  Builder b(&f->body());
  b.setLoc(L(51));
  Value* offs = b.arange(0, BLOCK);
  Value* v = b.load(b.ptrAdd(b.splat(x, {BLOCK}), offs));
  b.setLoc(L(52));
  Value* buf = b.alloc(MemSpace::Shared, DType::F32, {BLOCK});
  b.localStore(buf, v);
  b.setLoc(L(53));
  Value* w = b.localLoad(buf);
  b.setLoc(L(54));
  Value* rev = b.binary(OpCode::Sub, b.constant(Type::tile(i32(), {BLOCK}), BLOCK - 1), offs);
  b.store(b.ptrAdd(b.splat(out, {BLOCK}), rev), w);
  b.ret();
  return ts::Kernel(std::shared_ptr<const Function>(std::move(f)));
}

}  // namespace

TEST_CASE("Device::emulator: names, architectures, identity", "[runtime][emu]") {
  rt::Device nv = rt::Device::emulator("nvptx:sm_80");
  CHECK(nv.kind() == rt::DeviceKind::Emulator);
  CHECK(nv.name() == "emu:nvptx:sm_80 (SIMT emulator, warp 32)");
  CHECK(nv.arch() == "nvptx:sm_80");
  CHECK(rt::Device::emulator("amdgpu:gfx942").name() == "emu:amdgpu:gfx942 (SIMT emulator, warp 64)");
  CHECK(rt::Device::emulator("amdgpu:gfx1100").name() == "emu:amdgpu:gfx1100 (SIMT emulator, warp 32)");
  CHECK(rt::Device::emulator("amdgpu:gfx90a").arch() == "amdgpu:gfx90a");
  CHECK(rt::Device::emulator("nvptx:sm_90a").arch() == "nvptx:sm_90a");
  // One shared device per architecture, as Device::cpu().
  CHECK(rt::Device::emulator("nvptx:sm_80") == nv);
  CHECK_FALSE(rt::Device::emulator("nvptx:sm_86") == nv);
  CHECK(rt::Device::cpu().arch().empty());
  // Emulators are not physical devices.
  for (const rt::Device& d : rt::Device::all()) CHECK(d.kind() != rt::DeviceKind::Emulator);
}

TEST_CASE("Device::emulator rejects unknown spellings and lists the valid ones", "[runtime][emu]") {
  for (const char* bad : {"sm_80", "nvptx:sm_75", "amdgpu:gfx900", "emu:nvptx:sm_80", "", "cpu", "NVPTX:SM_80"}) {
    INFO(bad);
    std::string msg;
    try {
      rt::Device::emulator(bad);
    } catch (const ts::DeviceError& e) {
      msg = e.what();
    }
    CHECK(msg.find(std::string("'") + bad + "'") != std::string::npos);
    CHECK(msg.find("nvptx:sm_80, nvptx:sm_86, nvptx:sm_89, nvptx:sm_90a, nvptx:sm_100a, nvptx:sm_103a, "
                   "nvptx:sm_120a, amdgpu:gfx90a, amdgpu:gfx942, amdgpu:gfx950, amdgpu:gfx1100, amdgpu:gfx1200, "
                   "amdgpu:gfx1201") != std::string::npos);
  }
  CHECK(errorOf([] { rt::Device::emulator("emu:nvptx:sm_80"); }).find("without the \"emu:\" prefix") !=
        std::string::npos);
}

TEST_CASE("emulator memory: zeroed allocations, copies, fills", "[runtime][emu]") {
  rt::Device d = rt::Device::emulator("amdgpu:gfx942");
  rt::Buffer b = d.alloc(DType::F32, 37);
  CHECK(b.device() == d);
  CHECK(reinterpret_cast<uintptr_t>(b.data()) % 64 == 0);
  CHECK(b.read<float>() == std::vector<float>(37, 0.0f));
  std::vector<float> v(37);
  std::iota(v.begin(), v.end(), 1.0f);
  b.write(v);
  CHECK(b.read<float>() == v);
  b.fillBytes(0);
  CHECK(b.read<float>() == std::vector<float>(37, 0.0f));
  rt::Buffer empty = d.alloc(DType::I32, 0);
  CHECK(empty.count() == 0);
  CHECK(empty.data() != nullptr);
}

TEST_CASE("the emulator loads only EmulatedGpu binaries", "[runtime][emu]") {
  rt::Device d = rt::Device::emulator("nvptx:sm_80");
  rt::Binary bin;
  bin.signature.kernelName = "k";
  for (auto [fmt, word] : {std::pair{rt::Binary::Format::HostFunction, "host function"},
                           std::pair{rt::Binary::Format::PTX, "PTX"}, std::pair{rt::Binary::Format::HSACO, "HSACO"}}) {
    bin.format = fmt;
    std::string msg = errorOf([&] { d.load(bin); });
    INFO(msg);
    CHECK(msg.find(word) != std::string::npos);
    CHECK(msg.find("emu:nvptx:sm_80") != std::string::npos);
    CHECK(msg.find("'k'") != std::string::npos);
  }
  bin.format = rt::Binary::Format::EmulatedGpu;
  CHECK(errorOf([&] { d.load(bin); }).find("no thread entry point") != std::string::npos);
  // A kernel compiled for another vendor / wave size.
  ts::CompiledKernel amd = ts::compile(doubler(256, true), rt::Device::emulator("amdgpu:gfx942"));
  CHECK(amd.launchable());
  bin.emuThread = amd.artifact().binary.emuThread;
  bin.emuAmd = true;
  bin.emuWarpSize = 64;
  bin.threadsPerBlock = amd.artifact().binary.threadsPerBlock;
  std::string msg = errorOf([&] { d.load(bin); });
  CHECK(msg.find("AMDGPU") != std::string::npos);
  CHECK(msg.find("nvptx:sm_80") != std::string::npos);
}

TEST_CASE("a kernel compiled for the emulator runs and matches on every architecture", "[runtime][emu]") {
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    rt::Device d = rt::Device::emulator(arch);
    ts::CompiledKernel k = ts::compile(doubler(256, true), d);
    CHECK(k.artifact().target.str() == std::string("emu:") + arch);
    for (int n : {1, 700, 768}) {  // one element, ragged, aligned
      INFO(arch << " n = " << n);
      std::vector<float> x(n);
      for (int i = 0; i < n; ++i) x[i] = 0.25f * float(i) - 3.0f;
      rt::Buffer bx = d.upload(DType::F32, x);
      rt::Buffer bout = d.alloc(DType::F32, size_t(n));
      rt::LaunchOptions o;
      o.threads = 2;
      k.launchWith(ts::Dim3(uint32_t((n + 255) / 256)), {bout, bx, int32_t(n)}, o);
      std::vector<float> out = bout.read<float>();
      for (int i = 0; i < n; ++i) REQUIRE(out[i] == 2 * x[i]);
    }
  }
}

TEST_CASE("an unmasked load past a buffer is an EmulatorError naming the tile op and its line", "[runtime][emu]") {
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    INFO(arch);
    rt::Device d = rt::Device::emulator(arch);
    ts::CompiledKernel k = ts::compile(doubler(256, false), d);
    // n = 300: the second program's tile reads x[300..511], past the end
    // (out holds the whole 512-element tile).
    rt::Buffer bx = d.alloc(DType::F32, 300);
    rt::Buffer bout = d.alloc(DType::F32, 512);
    std::string msg;
    try {
      k.launch(ts::Dim3(2), bout, bx, int32_t(300));
    } catch (const ts::emu::EmulatorError& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(msg.find("out-of-bounds global access") != std::string::npos);
    CHECK(msg.find("load @ emu_device_test.cpp:31") != std::string::npos);
    CHECK(msg.find("doubler_oob") != std::string::npos);
    // Masked, the same shapes are fine.
    ts::CompiledKernel good = ts::compile(doubler(256, true), d);
    CHECK_NOTHROW(good.launch(ts::Dim3(2), bout, bx, int32_t(300)));
  }
}

TEST_CASE("a buffer shorter than the kernel's n is out of bounds on the emulator", "[runtime][emu]") {
  rt::Device d = rt::Device::emulator("nvptx:sm_80");
  ts::CompiledKernel k = ts::compile(doubler(256, true), d);
  rt::Buffer out = d.alloc(DType::F32, 256);
  // The masked kernel trusts n: with n = 256 and x of 100 elements it reads
  // past x, which only the registry of live allocations can tell.
  rt::Buffer shortX = d.alloc(DType::F32, 100);
  std::string msg = errorOf([&] { k.launch(ts::Dim3(1), out, shortX, int32_t(256)); });
  CHECK(msg.find("out-of-bounds global access") != std::string::npos);
  CHECK(msg.find("load @ emu_device_test.cpp:31") != std::string::npos);
}

TEST_CASE("shared-memory round trips lowered for GPUs are race-free on the emulator", "[runtime][emu]") {
  // Tile IR has no way to write a racy program (the lowering places the
  // barriers); this checks that it does, with the race checker on.
  for (const char* arch : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    INFO(arch);
    rt::Device d = rt::Device::emulator(arch);
    ts::CompiledKernel k = ts::compile(sharedRoundTrip(512), d);
    std::vector<float> x(512);
    for (int i = 0; i < 512; ++i) x[i] = float(i * 3 + 1);
    rt::Buffer bx = d.upload(DType::F32, x);
    rt::Buffer bout = d.alloc(DType::F32, 512);
    k.launch(ts::Dim3(1), bout, bx);
    std::vector<float> out = bout.read<float>();
    for (int i = 0; i < 512; ++i) REQUIRE(out[i] == x[511 - i]);
  }
}

TEST_CASE("compile for the emulator caches like any target", "[runtime][emu]") {
  ts::Kernel kern = doubler(128, true);
  rt::Device d = rt::Device::emulator("amdgpu:gfx1100");
  ts::compile(kern, d);
  ts::CacheStats before = ts::cacheStats();
  ts::compile(kern, d);
  ts::CacheStats after = ts::cacheStats();
  CHECK(after.hits == before.hits + 1);
  CHECK(after.misses == before.misses);
  // The inspection-only path reaches the same entry (the hooks are not part
  // of the key).
  ts::CompiledKernel insp = ts::compile(kern, ts::Target::parse("emu:amdgpu:gfx1100"));
  CHECK(ts::cacheStats().hits == after.hits + 1);
  CHECK_FALSE(insp.launchable());
}

namespace {
/// The body of one emulated thread that copies its hidden tensor-map
/// parameter (after out, a, K, M) into `out`: no compiled kernel needed to
/// see what the launch handed the machine.
void copyTensorMap(void* const* args) {
  void* out = nullptr;
  std::memcpy(&out, args[0], sizeof out);
  std::memcpy(out, args[4], sizeof(ts::emu::TensorMap));
}

rt::Binary tensorMapCopier(int64_t boxRows) {
  rt::Binary bin;
  bin.format = rt::Binary::Format::EmulatedGpu;
  bin.emuThread = &copyTensorMap;
  bin.threadsPerBlock = 1;
  bin.signature.kernelName = "copy_map";
  bin.signature.args = {{ts::ArgSpec::Kind::Pointer, DType::U8, "out"},
                        {ts::ArgSpec::Kind::Pointer, DType::F32, "a"},
                        {ts::ArgSpec::Kind::Scalar, DType::I32, "K"},
                        {ts::ArgSpec::Kind::Scalar, DType::I32, "M"}};
  ts::TensorMapSpec m;
  m.source = 1;
  m.dtype = DType::F32;
  m.rank = 3;
  m.dims[0] = {2, 1, 0};
  m.dims[1] = {-1, 1, 2};  // two rows a plane (within the plane stride)
  m.dims[2] = {-1, 1, 5};
  m.strides[0] = {-1, 1, 1};
  m.strides[1] = {2, 1, 0};
  m.strides[2] = {2, 2, 0};  // planes of 2*K: every other row
  m.box[0] = 16, m.box[1] = static_cast<uint32_t>(boxRows), m.box[2] = 1;
  m.swizzleBytes = 64;
  bin.signature.tensorMaps = {m};
  return bin;
}
}  // namespace

namespace {
/// Every field of an emulator tensor map (read from `bytes`), to compare
/// with the map a test expects.
std::string mapText(const void* bytes) {
  ts::emu::TensorMap t;
  std::memcpy(&t, bytes, sizeof t);
  std::string s = t.magic == ts::emu::TensorMap::kMagic ? "map" : "not a map";
  s += " at " + std::to_string(t.global) + " rank " + std::to_string(t.rank) + " elem " + std::to_string(t.elemBytes);
  for (unsigned d = 0; d < 3; ++d)
    s += " [" + std::to_string(t.dims[d]) + " / " + std::to_string(t.strides[d]) + " / " + std::to_string(t.box[d]) +
         "]";
  return s + " swizzle " + std::to_string(t.swizzleBytes);
}
}  // namespace

TEST_CASE("the emulator encodes tensor maps in its own format", "[runtime][emu][tma]") {
  SECTION("the encoding") {
    rt::TensorMapRequest r;
    r.dtype = DType::BF16;
    r.rank = 2;
    r.address = 0x10000;
    r.dims[0] = 96, r.dims[1] = 7;
    r.strides[0] = 2, r.strides[1] = 192;
    r.box[0] = 64, r.box[1] = 8;
    r.swizzleBytes = 128;
    alignas(64) unsigned char bytes[128];
    std::memset(bytes, 0xAB, sizeof bytes);
    rt::encodeEmuTensorMap(r, bytes);
    CHECK(mapText(bytes) == "map at 65536 rank 2 elem 2 [96 / 2 / 64] [7 / 192 / 8] [1 / 0 / 1] swizzle 128");
  }
  SECTION("a launch hands the kernel the map after its arguments, synchronously and on a stream") {
    rt::Device d = rt::Device::emulator("nvptx:sm_90a");
    rt::Kernel k = d.load(tensorMapCopier(4));
    rt::Buffer a = d.alloc(DType::F32, 40 * 10 * 5);
    rt::Arg shifted(a);
    shifted.offset = 4;  // 16 bytes
    for (bool async : {false, true}) {
      INFO("async " << async);
      rt::Buffer out = d.alloc(DType::U8, 128);
      rt::LaunchOptions o;
      rt::Stream st = d.createStream();
      if (async) o.stream = st;
      k.launch(rt::Dim3(1), {out, shifted, 40, 10}, o);
      st.synchronize();
      std::vector<uint8_t> bytes = out.read<uint8_t>();
      CHECK(mapText(bytes.data()) == "map at " + std::to_string(reinterpret_cast<uint64_t>(a.data()) + 16) +
                                         " rank 3 elem 4 [40 / 4 / 16] [2 / 160 / 4] [5 / 320 / 1] swizzle 64");
    }
    // The launch-time checks apply: K = 6 f32 rows are 24 bytes.
    rt::Buffer out = d.alloc(DType::U8, 128);
    CHECK(errorOf([&] { k.launch(rt::Dim3(1), {out, a, 6, 10}); }) ==
          "copy_map: argument 'K' (i32 K = 6): the TMA tensor map of 'a' needs a row stride that is a multiple of "
          "16 bytes (6 f32 = 24 bytes); pad the rows to a multiple of 4 elements");
    CHECK_THAT(errorOf([&] { d.load(tensorMapCopier(257)).launch(rt::Dim3(1), {out, a, 40, 10}); }),
               Catch::Contains("has a box of 257 elements in dimension 1, but box dimensions are 1..256"));
  }
  SECTION("emulators without TMA refuse the kernel") {
    for (const char* arch : {"nvptx:sm_89", "amdgpu:gfx942"}) {
      INFO(arch);
      rt::Device d = rt::Device::emulator(arch);
      rt::Binary bin = tensorMapCopier(4);
      bin.emuAmd = arch[0] == 'a';
      bin.emuWarpSize = bin.emuAmd ? 64 : 32;
      rt::Kernel k = d.load(bin);
      rt::Buffer a = d.alloc(DType::F32, 40 * 10 * 5), out = d.alloc(DType::U8, 128);
      CHECK_THAT(errorOf([&] { k.launch(rt::Dim3(1), {out, a, 40, 10}); }),
                 Catch::Contains("copy_map: tensor maps need an NVIDIA sm_90 device or its emulator") &&
                     Catch::Contains(std::string("loaded on emu:") + arch));
    }
  }
}

TEST_CASE("Device::cuda / Device::hip without a GPU name what is missing", "[runtime][gpu]") {
  bool haveCuda = false, haveHip = false;
  for (const rt::Device& d : rt::Device::all()) {
    haveCuda |= d.kind() == rt::DeviceKind::CUDA;
    haveHip |= d.kind() == rt::DeviceKind::HIP;
  }
  if (!haveCuda) {
    std::string msg;
    try {
      rt::Device::cuda();
    } catch (const ts::DeviceError& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(msg.find("libcuda") != std::string::npos);
  }
  if (!haveHip) {
    std::string msg;
    try {
      rt::Device::hip();
    } catch (const ts::DeviceError& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(msg.find("libamdhip64") != std::string::npos);
  }
  CHECK_THROWS_AS(rt::Device::cuda(-1), ts::DeviceError);
  CHECK_THROWS_AS(rt::Device::hip(-1), ts::DeviceError);
}

// The device-independent half of the runtime: buffers (allocated and
// wrapped) and devices. Launch validation and marshalling are in Launch.cpp,
// streams and events in Stream.cpp; devices only see checked calls.

#include "tessera/runtime/Runtime.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "DeviceImpl.h"

namespace tessera::rt {

std::string Dim3::str() const {
  return "{" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + "}";
}

std::string describeLaunch(const KernelSignature& sig, Dim3 grid, unsigned threadsPerBlock, unsigned sharedBytes,
                           Dim3 cluster) {
  return "kernel '" + sig.kernelName + "' (grid " + grid.str() +
         (cluster.count() > 1 ? " in clusters of " + cluster.str() : std::string()) + ", " +
         std::to_string(threadsPerBlock) + " threads per block, " + std::to_string(sharedBytes) +
         " bytes of shared memory)";
}

const char* name(DeviceKind k) {
  switch (k) {
    case DeviceKind::CPU: return "cpu";
    case DeviceKind::CUDA: return "cuda";
    case DeviceKind::HIP: return "hip";
    case DeviceKind::Emulator: return "emulator";
  }
  return "?";
}

// ---- conversions --------------------------------------------------------

uint16_t floatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN; a NaN stays a (quiet) NaN
    if (a == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  // 65520 is halfway between the largest half (65504, odd mantissa) and
  // 65536: ties-to-even and everything above go to infinity.
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {  // below 2^-14: a half subnormal (or zero)
    // |f| <= 2^-25 is at most half of the smallest subnormal 2^-24; the tie
    // at exactly 2^-25 goes to the even zero.
    if (a <= 0x33000000u) return sign;
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const unsigned shift = 126u - (a >> 23);  // value / 2^-24 = mant >> shift
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t exp = (a >> 23) - 127 + 15, mant = a & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // a carry bumps the exponent, as it should
  return static_cast<uint16_t>(sign | h);
}

uint16_t floatToBFloat16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(x >> 16);
}

// ---- Buffer ------------------------------------------------------------

namespace {

const Buffer::State& live(const std::shared_ptr<Buffer::State>& s, const char* what) {
  if (!s)
    throw LaunchError(std::string("Buffer::") + what +
                      " called on a null Buffer (default-constructed); allocate it with "
                      "Device::alloc first");
  return *s;
}

/// Sizes and the host pointer of a copy, against the buffer.
void checkCopy(const Buffer::State& s, const char* what, const void* host, size_t bytes) {
  if (bytes > s.bytes())
    throw LaunchError(std::string("Buffer::") + what + ": " + std::to_string(bytes) +
                      " bytes requested but the buffer holds only " + bufferDesc(s));
  if (bytes && !host) throw LaunchError(std::string("Buffer::") + what + ": the host pointer is null");
}

/// The stream of an asynchronous copy: not null, of the buffer's device.
StreamImpl& copyStream(const Buffer::State& b, const Stream& s, const char* what) {
  if (s.isNull()) throw LaunchError(std::string("Buffer::") + what + ": the Stream is null (default-constructed)");
  if (s.deviceImpl() != b.device)
    throw LaunchError(std::string("Buffer::") + what + ": the stream belongs to '" + s.deviceImpl()->name() +
                      "' but the buffer to '" + b.device->name() + "'; use a stream of the buffer's device");
  return *s.impl();
}

}  // namespace

std::string bufferDesc(const Buffer::State& s) {
  return std::to_string(s.count) + " " + name(s.dtype) + " elements (" + std::to_string(s.bytes()) + " bytes)";
}

std::string hexAddress(DevicePtr p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, p);
  return buf;
}

DType Buffer::dtype() const { return live(state_, "dtype").dtype; }
size_t Buffer::count() const { return live(state_, "count").count; }
size_t Buffer::bytes() const { return live(state_, "bytes").bytes(); }
void* Buffer::data() const { return reinterpret_cast<void*>(live(state_, "data").ptr); }
Device Buffer::device() const { return Device(live(state_, "device").device); }

bool Buffer::isExternal() const { return live(state_, "isExternal").external; }

// Blocking copies and fills are ordered after the default stream's work
// (and throw its first error), as synchronous launches are.
void Buffer::copyFromHost(const void* src, size_t bytes) {
  const State& s = live(state_, "copyFromHost");
  checkCopy(s, "copyFromHost", src, bytes);
  s.device->defaultStream()->synchronize();
  s.device->copyHostToDevice(s.ptr, src, bytes);
}

void Buffer::copyToHost(void* dst, size_t bytes) const {
  const State& s = live(state_, "copyToHost");
  checkCopy(s, "copyToHost", dst, bytes);
  s.device->defaultStream()->synchronize();
  s.device->copyDeviceToHost(dst, s.ptr, bytes);
}

void Buffer::copyFromHostAsync(const Stream& st, const void* src, size_t bytes) {
  const State& s = live(state_, "copyFromHostAsync");
  checkCopy(s, "copyFromHostAsync", src, bytes);
  s.device->copyHostToDeviceAsync(copyStream(s, st, "copyFromHostAsync"), s.ptr, src, bytes, state_);
}

void Buffer::copyToHostAsync(const Stream& st, void* dst, size_t bytes) const {
  const State& s = live(state_, "copyToHostAsync");
  checkCopy(s, "copyToHostAsync", dst, bytes);
  s.device->copyDeviceToHostAsync(copyStream(s, st, "copyToHostAsync"), dst, s.ptr, bytes, state_);
}

namespace {
/// A device-to-device copy's checks: both buffers live, of one device, the
/// size within both, and the ranges apart.
const Buffer::State& checkDeviceCopy(const Buffer::State& dst, const std::shared_ptr<Buffer::State>& srcState,
                                     const char* what, size_t bytes) {
  const Buffer::State& src = live(srcState, what);
  if (src.device != dst.device)
    throw LaunchError(std::string("Buffer::") + what + ": the source buffer belongs to '" + src.device->name() +
                      "' but the destination to '" + dst.device->name() +
                      "'; copy through the host (copyToHost, copyFromHost) between devices");
  for (const auto* b : {&dst, &src})
    if (bytes > b->bytes())
      throw LaunchError(std::string("Buffer::") + what + ": " + std::to_string(bytes) + " bytes requested but the " +
                        (b == &dst ? "destination" : "source") + " holds only " + bufferDesc(*b));
  if (bytes && dst.ptr < src.ptr + bytes && src.ptr < dst.ptr + bytes)
    throw LaunchError(std::string("Buffer::") + what + ": the source and destination ranges overlap (" +
                      std::to_string(bytes) + " bytes)");
  return src;
}
}  // namespace

void Buffer::copyFrom(const Buffer& src, size_t bytes) {
  const State& d = live(state_, "copyFrom");
  const State& s = checkDeviceCopy(d, src.state(), "copyFrom", bytes);
  d.device->defaultStream()->synchronize();
  d.device->copyDeviceToDevice(d.ptr, s.ptr, bytes);
}

void Buffer::copyFromAsync(const Stream& st, const Buffer& src, size_t bytes) {
  const State& d = live(state_, "copyFromAsync");
  const State& s = checkDeviceCopy(d, src.state(), "copyFromAsync", bytes);
  StreamImpl& stream = copyStream(d, st, "copyFromAsync");
  // Both allocations stay alive until the copy has run.
  auto keep = std::make_shared<std::pair<std::shared_ptr<State>, std::shared_ptr<State>>>(state_, src.state());
  d.device->copyDeviceToDeviceAsync(stream, d.ptr, s.ptr, bytes, std::move(keep));
}

void Buffer::fillBytes(uint8_t byte) {
  const State& s = live(state_, "fillBytes");
  s.device->defaultStream()->synchronize();
  s.device->fill(s.ptr, byte, s.bytes());
}

// ---- Device ------------------------------------------------------------

Device Device::cpu() {
  static const Device d(createCpuDevice(""));
  return d;
}

namespace {

/// One shared device per (kind, key), like Device::cpu(): two handles to the
/// same emulator or GPU compare equal, so buffers and kernels mix freely.
template <typename Make>
Device sharedDevice(const std::string& key, Make make) {
  static std::mutex mu;
  static std::map<std::string, Device>* devices = new std::map<std::string, Device>();  // outlives users
  std::lock_guard<std::mutex> lock(mu);
  auto it = devices->find(key);
  if (it != devices->end()) return it->second;
  Device d(make());
  devices->emplace(key, d);
  return d;
}

}  // namespace

Device Device::cpu(const std::string& cpu) {
  if (cpu.empty()) return Device::cpu();
  return sharedDevice("cpu:" + cpu, [&] { return createCpuDevice(cpu); });
}

Device Device::emulator(const std::string& arch) {
  return sharedDevice("emu:" + arch, [&] { return createEmuDevice(arch); });
}

Device Device::cuda(int ordinal) {
  // createCudaDevice throws DeviceError naming what is missing (libcuda.so.1,
  // the driver, the ordinal, a negative one included); a failed lookup is
  // not cached, so a later call retries.
  return sharedDevice("cuda:" + std::to_string(ordinal), [&] { return createCudaDevice(ordinal); });
}

Device Device::hip(int ordinal) {
  return sharedDevice("hip:" + std::to_string(ordinal), [&] { return createHipDevice(ordinal); });
}

std::vector<Device> Device::all() {
  std::vector<Device> r{cpu()};
  for (int i = 0, n = cudaDeviceCount(); i < n; ++i) r.push_back(cuda(i));
  for (int i = 0, n = hipDeviceCount(); i < n; ++i) r.push_back(hip(i));
  return r;
}

std::string Device::arch() const { return impl_->arch(); }

DeviceKind Device::kind() const { return impl_->kind(); }
std::string Device::name() const { return impl_->name(); }
unsigned Device::defaultThreads() const { return impl_->defaultThreads(); }
void Device::synchronize() const { impl_->synchronize(); }

Buffer Device::alloc(DType dtype, size_t count) const {
  const size_t elem = byteSize(dtype);
  if (count > std::numeric_limits<size_t>::max() / elem)
    throw DeviceError(impl_->name() + ": cannot allocate " + std::to_string(count) + " " + tessera::name(dtype) +
                      " elements: the size in bytes overflows");
  // A zero-element buffer still gets a real (tiny) allocation, so its
  // address is valid to pass to a kernel that reads nothing from it.
  const size_t bytes = count * elem;
  DevicePtr p = impl_->alloc(bytes ? bytes : 1);
  return Buffer(std::make_shared<Buffer::State>(impl_, dtype, count, p));
}

Buffer Device::wrap(uint64_t address, DType dtype, size_t count, WrapOptions opts) const {
  const size_t elem = byteSize(dtype);
  const std::string what =
      "Device::wrap on " + impl_->name() + " of " + std::to_string(count) + " " + tessera::name(dtype) + " elements";
  if (count > std::numeric_limits<size_t>::max() / elem) throw UsageError(what + ": the size in bytes overflows");
  const size_t bytes = count * elem;
  if (!address && count) throw UsageError(what + ": the address is null");
  if (address % elem)
    throw UsageError(what + ": the address " + hexAddress(address) + " is not aligned to the element size (" +
                     std::to_string(elem) + " bytes)");
  // The end of the range must be an address: one that wraps past 2^64 (or
  // is 2^64 itself) would make every later end-of-range computation (the
  // emulator's registry, bounds checks, copies) wrap to a small number.
  if (bytes > std::numeric_limits<uint64_t>::max() - address)
    throw UsageError(what + " (" + std::to_string(bytes) + " bytes) at " + hexAddress(address) +
                     ": the range runs past the end of the 64-bit address space");
  if (opts.capacityBytes && bytes > opts.capacityBytes)
    throw UsageError(what + " (" + std::to_string(bytes) + " bytes): more than the " +
                     std::to_string(opts.capacityBytes) + " bytes of WrapOptions::capacityBytes");
  if (bytes) impl_->adoptExternal(address, bytes);
  // From here on the buffer owns the deleter: nothing below throws but
  // make_shared's bad_alloc, after which the memory is still untracked.
  std::shared_ptr<Buffer::State> st;
  try {
    st = std::make_shared<Buffer::State>(impl_, dtype, count, address);
  } catch (...) {
    if (bytes) impl_->releaseExternal(address, bytes);
    throw;
  }
  st->external = true;
  st->deleter = std::move(opts.deleter);
  st->keepAlive = std::move(opts.keepAlive);
  return Buffer(std::move(st));
}

Kernel Device::load(const Binary& bin) const {
  auto st = std::make_shared<Kernel::State>();
  st->device = impl_;
  st->signature = bin.signature;
  st->loaded = impl_->load(bin);
  st->boundsChecked = bin.boundsChecked;
  st->opNames = bin.opNames;
  st->profiled = bin.profiled;
  st->profileScopes = bin.profileScopes;
  st->profileWarps = bin.profileWarps;
  st->profileClock = bin.profileClock;
  st->format = bin.format;
  st->cluster = Dim3(bin.cluster[0], bin.cluster[1], bin.cluster[2]);
  return Kernel(std::move(st));
}

}  // namespace tessera::rt

// A stand-in for libamdhip64.so, loaded through TESSERA_HIP_LIBRARY: just
// enough of the HIP runtime for a HIP device to exist (two devices,
// gfx90a and gfx942), allocate, copy, fill and run streams and events on
// memory whose addresses are not host addresses -- so that the RCCL engine
// (fake_nccl.cpp built as FAKE_RCCL) is tested without AMD GPUs. Module
// loading and launches are refused (hipErrorNotSupported) but for one
// bounds-checked kernel, which tests what a checked launch passes: other
// kernels on HIP are tested on real GPUs only.
//
// The current device is per thread (0 until hipSetDevice), as in HIP.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#define FAKE_EXPORT __attribute__((visibility("default")))

namespace {

using hipError_t = int;
constexpr hipError_t OK = 0, InvalidValue = 1, OutOfMemory = 2, InvalidDevice = 101, InvalidHandle = 400,
                     NotSupported = 801;

struct Alloc {
  std::vector<uint8_t> bytes;
  int device;
};
struct Stream {
  int device;
};

std::mutex mu;
thread_local int current = 0;
std::map<uint64_t, Alloc> memory;
uint64_t nextAddress = 0x6b0000000000ull;
std::map<void*, std::unique_ptr<Stream>> streams;
std::map<void*, std::unique_ptr<int>> events;

uint8_t* resolve(uint64_t p, size_t n) {
  auto it = memory.upper_bound(p);
  if (it == memory.begin()) return nullptr;
  --it;
  const uint64_t off = p - it->first;
  if (off > it->second.bytes.size() || n > it->second.bytes.size() - off) return nullptr;
  return it->second.bytes.data() + off;
}

uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

int checkedModule = 0;        // the one module and function (see hipModuleLoadData)
uint64_t lastParams[6] = {};  // of the last launch of checked_oob

}  // namespace

extern "C" {

hipError_t hipGetDeviceCount(int* n) {
  *n = 2;
  return OK;
}
hipError_t hipSetDevice(int d) {
  if (d < 0 || d > 1) return InvalidDevice;
  current = d;
  return OK;
}
hipError_t hipDeviceGetName(char* name, int len, int d) {
  if (d < 0 || d > 1) return InvalidDevice;
  std::snprintf(name, size_t(len), "%s", d == 0 ? "Fake MI250X" : "Fake MI300X");
  return OK;
}
// The runtime finds gcnArchName by its content anywhere in the structure.
hipError_t hipGetDevicePropertiesR0600(void* props, int d) {
  if (d < 0 || d > 1) return InvalidDevice;
  std::snprintf(static_cast<char*>(props) + 1160, 64, "%s", d == 0 ? "gfx90a:sramecc+:xnack-" : "gfx942:sramecc+");
  return OK;
}
hipError_t hipMalloc(void** p, size_t bytes) {
  if (bytes > (size_t{1} << 30)) return OutOfMemory;
  std::lock_guard<std::mutex> l(mu);
  const uint64_t a = nextAddress;
  memory[a] = Alloc{std::vector<uint8_t>(bytes ? bytes : 1, 0xCD), current};
  nextAddress += (bytes + 4095) / 4096 * 4096 + 4096;
  *p = reinterpret_cast<void*>(a);
  return OK;
}
hipError_t hipFree(void* p) {
  std::lock_guard<std::mutex> l(mu);
  return memory.erase(addr(p)) ? OK : InvalidValue;
}
hipError_t hipMemcpy(void* dst, const void* src, size_t n, int kind) {
  std::lock_guard<std::mutex> l(mu);
  if (kind == 1) {  // host to device
    uint8_t* d = resolve(addr(dst), n);
    if (!d) return InvalidValue;
    std::memcpy(d, src, n);
    return OK;
  }
  if (kind == 2) {
    const uint8_t* s = resolve(addr(src), n);
    if (!s) return InvalidValue;
    std::memcpy(dst, s, n);
    return OK;
  }
  if (kind == 3) {  // device to device
    uint8_t* d = resolve(addr(dst), n);
    const uint8_t* s = resolve(addr(src), n);
    if (!d || !s) return InvalidValue;
    std::memmove(d, s, n);
    return OK;
  }
  return InvalidValue;
}
hipError_t hipMemcpyAsync(void* dst, const void* src, size_t n, int kind, void*) {
  return hipMemcpy(dst, src, n, kind);
}
hipError_t hipMemset(void* dst, int v, size_t n) {
  std::lock_guard<std::mutex> l(mu);
  uint8_t* d = resolve(addr(dst), n);
  if (!d) return InvalidValue;
  std::memset(d, v, n);
  return OK;
}
hipError_t hipMemGetAddressRange(void** base, size_t* size, void* p) {
  std::lock_guard<std::mutex> l(mu);
  auto it = memory.upper_bound(addr(p));
  if (it == memory.begin()) return InvalidValue;
  --it;
  *base = reinterpret_cast<void*>(it->first);
  *size = it->second.bytes.size();
  return OK;
}
hipError_t hipStreamCreate(void** s) {
  std::lock_guard<std::mutex> l(mu);
  auto st = std::make_unique<Stream>(Stream{current});
  *s = st.get();
  streams[st.get()] = std::move(st);
  return OK;
}
hipError_t hipStreamDestroy(void* s) {
  std::lock_guard<std::mutex> l(mu);
  return streams.erase(s) ? OK : InvalidHandle;
}
hipError_t hipStreamSynchronize(void* s) {
  std::lock_guard<std::mutex> l(mu);
  return streams.count(s) ? OK : InvalidHandle;
}
hipError_t hipStreamWaitEvent(void*, void*, unsigned) { return OK; }
hipError_t hipDeviceSynchronize() { return OK; }
hipError_t hipEventCreate(void** e) {
  std::lock_guard<std::mutex> l(mu);
  auto ev = std::make_unique<int>(0);
  *e = ev.get();
  events[ev.get()] = std::move(ev);
  return OK;
}
hipError_t hipEventDestroy(void* e) {
  std::lock_guard<std::mutex> l(mu);
  return events.erase(e) ? OK : InvalidHandle;
}
hipError_t hipEventRecord(void*, void*) { return OK; }
hipError_t hipEventSynchronize(void*) { return OK; }
hipError_t hipEventElapsedTime(float* ms, void*, void*) {
  *ms = 0;
  return OK;
}
// Only the bounds-checked kernel of the launch tests loads (a code object
// beginning "FAKE_CHECKED"): its launch records its parameters and writes a
// violation into its record, as fake_cuda.cpp's checked_oob does.
hipError_t hipModuleLoadData(void** module, const void* image) {
  if (!module || !image || std::memcmp(image, "FAKE_CHECKED", 12) != 0) return NotSupported;
  *module = &checkedModule;
  return OK;
}
hipError_t hipModuleUnload(void*) { return OK; }
hipError_t hipModuleGetFunction(void** fn, void* module, const char* name) {
  if (module != &checkedModule || std::strcmp(name, "checked_oob") != 0) return NotSupported;
  *fn = &checkedModule;
  return OK;
}
hipError_t hipDeviceGetAttribute(int* v, int attr, int) {
  if (attr != 63) return NotSupported;  // hipDeviceAttributeMultiprocessorCount
  *v = 304;                             // MI300X
  return OK;
}
// 2 workgroups per CU for any kernel: enough to tell the product from the CUs.
hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void* fn, int, size_t) {
  if (fn != &checkedModule) return NotSupported;
  *blocks = 2;
  return OK;
}
// checked_oob(ptr a, ptr out, i32 n, i64 extent(a), i64 extent(out), ptr record).
hipError_t hipModuleLaunchKernel(void* fn, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                                 void** params, void**) {
  if (fn != &checkedModule || !params) return NotSupported;
  std::lock_guard<std::mutex> l(mu);
  std::memcpy(&lastParams[0], params[0], 8);
  std::memcpy(&lastParams[1], params[1], 8);
  uint32_t n = 0;
  std::memcpy(&n, params[2], 4);
  lastParams[2] = n;
  for (int i = 3; i < 6; ++i) std::memcpy(&lastParams[i], params[i], 8);
  if (uint8_t* rec = resolve(lastParams[5], 48)) {
    const int32_t head[4] = {1, 1, 1, 0};
    const int64_t offset = static_cast<int64_t>(lastParams[4]);
    const int32_t who[4] = {5, 1, 0, 0};
    std::memcpy(rec + 8, head, sizeof head);
    std::memcpy(rec + 24, &offset, sizeof offset);
    std::memcpy(rec + 32, who, sizeof who);
  }
  return OK;
}
FAKE_EXPORT void fake_hip_last_params(uint64_t* out) { std::memcpy(out, lastParams, sizeof lastParams); }
const char* hipGetErrorName(hipError_t e) {
  switch (e) {
    case OK: return "hipSuccess";
    case InvalidValue: return "hipErrorInvalidValue";
    case OutOfMemory: return "hipErrorOutOfMemory";
    case InvalidDevice: return "hipErrorInvalidDevice";
    case InvalidHandle: return "hipErrorInvalidHandle";
    case NotSupported: return "hipErrorNotSupported";
  }
  return "hipErrorUnknown";
}
const char* hipGetErrorString(hipError_t e) { return hipGetErrorName(e); }

// ---- for the fake RCCL and the tests -------------------------------------------

FAKE_EXPORT int fake_hip_peek(unsigned long long p, void* dst, size_t n) {
  std::lock_guard<std::mutex> l(mu);
  const uint8_t* s = resolve(p, n);
  if (!s) return 0;
  std::memcpy(dst, s, n);
  return 1;
}
FAKE_EXPORT int fake_hip_poke(unsigned long long p, const void* src, size_t n) {
  std::lock_guard<std::mutex> l(mu);
  uint8_t* d = resolve(p, n);
  if (!d) return 0;
  std::memcpy(d, src, n);
  return 1;
}
FAKE_EXPORT int fake_hip_stream_device(void* s) {
  std::lock_guard<std::mutex> l(mu);
  auto it = streams.find(s);
  return it == streams.end() ? -1 : it->second->device;
}
FAKE_EXPORT int fake_hip_current_device() { return current; }
FAKE_EXPORT int fake_hip_live_allocations() {
  std::lock_guard<std::mutex> l(mu);
  return int(memory.size());
}

}  // extern "C"

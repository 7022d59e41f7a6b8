// The fake libcuda's streams, events, asynchronous copies and pointer
// queries, and the entry points a test uses to act as another library using
// CUDA would (its own allocations and streams). See fake_cuda.cpp.

#include "fake_cuda_state.h"

using namespace fakecuda;

extern "C" {

CUresult cuStreamGetCtx(void* s, void** ctx) {
  std::lock_guard<std::mutex> l(mu);
  if (!liveStreams.count(s)) return INVALID_HANDLE;
  *ctx = static_cast<Stream*>(s)->ctx;
  return OK;
}

CUresult cuEventCreate(void** e, unsigned flags) {
  NEED_CONTEXT();
  if (flags != 0) return INVALID_VALUE;
  std::lock_guard<std::mutex> l(mu);
  auto ev = std::make_unique<Event>(Event{current});
  *e = ev.get();
  liveEvents[ev.get()] = std::move(ev);
  return OK;
}

CUresult cuEventDestroy_v2(void* e) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  return liveEvents.erase(e) ? OK : INVALID_HANDLE;
}

CUresult cuEventRecord(void* e, void* s) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  auto it = liveEvents.find(e);
  if (it == liveEvents.end() || !liveStreams.count(s)) return INVALID_HANDLE;
  if (it->second->ctx != current || static_cast<Stream*>(s)->ctx != current) return INVALID_CONTEXT;
  it->second->recorded = true;
  it->second->ms = clockMs;
  return OK;
}

CUresult cuStreamWaitEvent(void* s, void* e, unsigned flags) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  if (!liveStreams.count(s) || !liveEvents.count(e) || flags != 0) return INVALID_HANDLE;
  return OK;
}

CUresult cuEventSynchronize(void* e) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  return liveEvents.count(e) ? OK : INVALID_HANDLE;
}

CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  auto ia = liveEvents.find(a), ib = liveEvents.find(b);
  if (ia == liveEvents.end() || ib == liveEvents.end()) return INVALID_HANDLE;
  if (!ia->second->recorded || !ib->second->recorded) return INVALID_HANDLE;
  *ms = static_cast<float>(ib->second->ms - ia->second->ms);
  return OK;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, void* s) {
  if (!liveStreams.count(s)) return INVALID_HANDLE;
  return cuMemcpyHtoD_v2(dst, src, n);
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* s) {
  if (!liveStreams.count(s)) return INVALID_HANDLE;
  return cuMemcpyDtoH_v2(dst, src, n);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void* s) {
  if (!liveStreams.count(s)) return INVALID_HANDLE;
  return cuMemcpyDtoD_v2(dst, src, n);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  NEED_CONTEXT();
  std::lock_guard<std::mutex> l(mu);
  auto it = allocationOf(p);
  if (it == memory.end()) return NOT_FOUND;
  *base = it->first;
  *size = it->second.bytes.size();
  return OK;
}

CUresult cuPointerGetAttribute(void* data, int attr, CUdeviceptr p) {
  NEED_CONTEXT();
  if (attr != 9) return INVALID_VALUE;  // only CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
  std::lock_guard<std::mutex> l(mu);
  auto it = allocationOf(p);
  if (it == memory.end()) return INVALID_VALUE;  // what the driver says for host memory
  *static_cast<int*>(data) = it->second.device;
  return OK;
}

// Memory and streams a test makes as another library using CUDA would, not
// through Tessera (no context needed).
FAKE_EXPORT unsigned long long fake_cuda_alloc(int device, size_t bytes) {
  std::lock_guard<std::mutex> l(mu);
  return allocate(device, bytes);
}
FAKE_EXPORT void fake_cuda_free(unsigned long long p) {
  std::lock_guard<std::mutex> l(mu);
  memory.erase(p);
}
FAKE_EXPORT int fake_cuda_poke(unsigned long long p, const void* src, size_t n) {
  std::lock_guard<std::mutex> l(mu);
  uint8_t* d = resolve(p, n);
  if (!d) return 0;
  std::memcpy(d, src, n);
  return 1;
}
FAKE_EXPORT int fake_cuda_peek(unsigned long long p, void* dst, size_t n) {
  std::lock_guard<std::mutex> l(mu);
  const uint8_t* s = resolve(p, n);
  if (!s) return 0;
  std::memcpy(dst, s, n);
  return 1;
}
FAKE_EXPORT int fake_cuda_copies() {
  std::lock_guard<std::mutex> l(mu);
  return copies;
}
FAKE_EXPORT void* fake_cuda_create_stream(int device) {
  std::lock_guard<std::mutex> l(mu);
  auto stream = std::make_unique<Stream>(Stream{&contexts[device]});
  void* h = stream.get();
  liveStreams[h] = std::move(stream);
  return h;
}
FAKE_EXPORT void fake_cuda_destroy_stream(void* s) {
  std::lock_guard<std::mutex> l(mu);
  liveStreams.erase(s);
}
FAKE_EXPORT int fake_cuda_stream_launches(void* s) {
  std::lock_guard<std::mutex> l(mu);
  auto it = liveStreams.find(s);
  return it == liveStreams.end() ? -1 : it->second->launches;
}
// For the fake NCCL (fake_nccl.cpp): the device of a stream (-1: not a
// live stream) and of the calling thread's current context (-1: none).
FAKE_EXPORT int fake_cuda_stream_device(void* s) {
  std::lock_guard<std::mutex> l(mu);
  auto it = liveStreams.find(s);
  return it == liveStreams.end() ? -1 : it->second->ctx->device;
}
FAKE_EXPORT int fake_cuda_current_device() { return current ? current->device : -1; }
FAKE_EXPORT int fake_cuda_live_events() {
  std::lock_guard<std::mutex> l(mu);
  return static_cast<int>(liveEvents.size());
}

}  // extern "C"

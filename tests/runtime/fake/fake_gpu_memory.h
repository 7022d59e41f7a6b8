// What the fake vendor libraries (fake_nccl.cpp, fake_blas.cpp) use of the
// fake driver they run on: its memory, streams and current device, exported
// by fake_cuda.cpp (fake_cuda_*) or, for the HIP builds (FAKE_ON_HIP),
// fake_hip.cpp (fake_hip_*).
#pragma once

#include <cstddef>

#define FAKE_EXPORT __attribute__((visibility("default")))

#ifdef FAKE_ON_HIP
#define FAKE_GPU(name) fake_hip_##name
#else
#define FAKE_GPU(name) fake_cuda_##name
#endif
extern "C" {
int FAKE_GPU(peek)(unsigned long long p, void* dst, size_t n);
int FAKE_GPU(poke)(unsigned long long p, const void* src, size_t n);
int FAKE_GPU(stream_device)(void* stream);
int FAKE_GPU(current_device)();
}

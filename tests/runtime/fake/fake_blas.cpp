// A stand-in for libcublas.so (or, built as FAKE_ROCBLAS, librocblas.so),
// loaded by the benchmarks' BLAS peer (perf/lib/Peers.cpp) through
// TESSERA_CUBLAS_LIBRARY / TESSERA_ROCBLAS_LIBRARY, so that the peer's
// loading, handle, stream and GEMM arguments are tested without a GPU, on
// the fake CUDA driver's (or fake HIP runtime's) memory, which it links.
//
// Its GEMM follows the libraries' documented column-major definition,
// C[i + j ldc] = alpha sum_l op(A)[i, l] op(B)[l, j] + beta C (no transposes
// here), independently of how the peer maps a row-major problem onto it:
// a wrong mapping gives a wrong product. It needs a current device and a
// stream of that device (or the null stream), as the libraries do. Tests
// read the last call through fake_blas_* and can fail the next call.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(FAKE_ROCBLAS) && !defined(FAKE_ON_HIP)
#define FAKE_ON_HIP 1
#endif
#include "fake_gpu_memory.h"

namespace {

#ifdef FAKE_ROCBLAS
constexpr int kF16 = 150, kF32 = 151, kBF16 = 168, kOpN = 111;
constexpr int kInvalidHandle = 1, kInvalidValue = 11, kNotInitialized = 1;
#else
constexpr int kF32 = 0, kF16 = 2, kBF16 = 14, kOpN = 0;
constexpr int kInvalidHandle = 1, kInvalidValue = 7, kNotInitialized = 1;  // NOT_INITIALIZED, INVALID_VALUE
#endif

struct Handle {
  int device;
  void* stream = nullptr;
};

int failNext = 0;
struct Call {
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  void* stream = nullptr;
  int device = -1;
} last;

int takeFailure() {
  int f = failNext;
  failNext = 0;
  return f;
}

size_t elemBytes(int t) { return t == kF32 ? 4 : 2; }

double decode(const uint8_t* p, int t) {
  if (t == kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (t == kBF16) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp(double(m), -24) : e == 31 ? INFINITY : std::ldexp(double(m | 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

void encode(double v, uint8_t* p, int t) {
  const float f = static_cast<float>(v);
  if (t == kF32) {
    std::memcpy(p, &f, 4);
    return;
  }
  uint16_t h;
  if (t == kBF16) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
    h = static_cast<uint16_t>(u >> 16);
  } else {
    const _Float16 x = static_cast<_Float16>(f);
    std::memcpy(&h, &x, 2);
  }
  std::memcpy(p, &h, 2);
}

std::vector<uint8_t> read(const void* p, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  if (!FAKE_GPU(peek)(reinterpret_cast<unsigned long long>(p), v.data(), bytes)) v.clear();
  return v;
}

/// Column-major C (m x n, ldc) = A (m x k, lda) · B (k x n, ldb); beta = 0.
int gemm(Handle* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int at, int lda,
         const void* b, int bt, int ldb, const void* beta, void* c, int ct, int ldc) {
  if (int f = takeFailure()) return f;
  if (!h) return kInvalidHandle;
  if (FAKE_GPU(current_device)() != h->device) return kNotInitialized;
  if (h->stream && FAKE_GPU(stream_device)(h->stream) != h->device) return kInvalidValue;
  if (ta != kOpN || tb != kOpN || m <= 0 || n <= 0 || k <= 0 || lda < m || ldb < k || ldc < m) return kInvalidValue;
  if (at != bt || (at != kF16 && at != kBF16 && at != kF32) || (ct != at && ct != kF32)) return kInvalidValue;
  if (*static_cast<const float*>(alpha) != 1.0f || *static_cast<const float*>(beta) != 0.0f) return kInvalidValue;
  last = {m, n, k, lda, ldb, ldc, h->stream, h->device};
  const size_t ea = elemBytes(at), ec = elemBytes(ct);
  std::vector<uint8_t> A = read(a, (size_t(lda) * (k - 1) + m) * ea), B = read(b, (size_t(ldb) * (n - 1) + k) * ea);
  std::vector<uint8_t> C = read(c, (size_t(ldc) * (n - 1) + m) * ec);
  if (A.empty() || B.empty() || C.empty()) return kInvalidValue;  // outside the device's allocations
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int l = 0; l < k; ++l)
        s += decode(&A[(size_t(i) + size_t(l) * lda) * ea], at) * decode(&B[(size_t(l) + size_t(j) * ldb) * ea], at);
      encode(s, &C[(size_t(i) + size_t(j) * ldc) * ec], ct);
    }
  FAKE_GPU(poke)(reinterpret_cast<unsigned long long>(c), C.data(), C.size());
  return 0;
}

int create(void** out) {
  if (int f = takeFailure()) return f;
  const int dev = FAKE_GPU(current_device)();
  if (dev < 0) return kNotInitialized;
  *out = new Handle{dev};
  return 0;
}

}  // namespace

extern "C" {

FAKE_EXPORT void fake_blas_fail_next(int status) { failNext = status; }
FAKE_EXPORT void fake_blas_last_call(int* out8, void** stream) {
  const int v[8] = {last.m, last.n, last.k, last.lda, last.ldb, last.ldc, last.device, 0};
  std::memcpy(out8, v, sizeof v);
  *stream = last.stream;
}

#ifdef FAKE_ROCBLAS
FAKE_EXPORT int rocblas_create_handle(void** h) { return create(h); }
FAKE_EXPORT int rocblas_destroy_handle(void* h) {
  delete static_cast<Handle*>(h);
  return 0;
}
FAKE_EXPORT int rocblas_set_stream(void* h, void* s) {
  if (int f = takeFailure()) return f;
  static_cast<Handle*>(h)->stream = s;
  return 0;
}
FAKE_EXPORT int rocblas_gemm_ex(void* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int at,
                                int lda, const void* b, int bt, int ldb, const void* beta, const void* c, int ct,
                                int ldc, void* d, int dt, int ldd, int compute, int algo, int32_t, uint32_t) {
  // The peer writes C in place: D is C, and the sum is in f32.
  if (d != c || dt != ct || ldd != ldc || compute != kF32 || algo != 0) return kInvalidValue;
  return gemm(static_cast<Handle*>(h), ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, d, dt, ldd);
}
FAKE_EXPORT const char* rocblas_status_to_string(int s) {
  return s == kInvalidHandle ? "rocblas_status_invalid_handle" : "rocblas_status_other";
}
FAKE_EXPORT int rocblas_get_version_string(char* buf, size_t len) {
  std::strncpy(buf, "4.9.9-fake", len);
  return 0;
}
#else
FAKE_EXPORT int cublasCreate_v2(void** h) { return create(h); }
FAKE_EXPORT int cublasDestroy_v2(void* h) {
  delete static_cast<Handle*>(h);
  return 0;
}
FAKE_EXPORT int cublasSetStream_v2(void* h, void* s) {
  if (int f = takeFailure()) return f;
  static_cast<Handle*>(h)->stream = s;
  return 0;
}
FAKE_EXPORT int cublasGetVersion_v2(void*, int* v) {
  *v = 130999;
  return 0;
}
FAKE_EXPORT int cublasGemmEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int at,
                             int lda, const void* b, int bt, int ldb, const void* beta, void* c, int ct, int ldc,
                             int compute, int algo) {
  if (compute != 68 || algo != -1) return kInvalidValue;  // CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT
  return gemm(static_cast<Handle*>(h), ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc);
}
FAKE_EXPORT const char* cublasGetStatusName(int s) {
  return s == 1 ? "CUBLAS_STATUS_NOT_INITIALIZED" : s == 7 ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_OTHER";
}
#endif

}  // extern "C"

// The cuBLAS and rocBLAS declarations the benchmarks' BLAS peer calls
// (perf-private). They are written here -- enums as int, handles as void* --
// rather than taken from cublas_v2.h / rocblas.h, so the project builds
// without either; tests/perf/peers_test.cpp checks them against
// cublas_api.h where it is installed, and the fake libraries of the tests
// define their functions with exactly these types.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::perf::blasabi {

namespace cublas {
constexpr int kSuccess = 0;
constexpr int kOpN = 0;                        // CUBLAS_OP_N
constexpr int kComputeF32 = 68;                // CUBLAS_COMPUTE_32F
constexpr int kAlgoDefault = -1;               // CUBLAS_GEMM_DEFAULT
constexpr int kF32 = 0, kF16 = 2, kBF16 = 14;  // cudaDataType: CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF
using Create = int (*)(void** handle);
using Destroy = int (*)(void* handle);
using SetStream = int (*)(void* handle, void* stream);
using GetVersion = int (*)(void* handle, int* version);
using GemmEx = int (*)(void* handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a,
                       int aType, int lda, const void* b, int bType, int ldb, const void* beta, void* c, int cType,
                       int ldc, int computeType, int algo);
using StatusName = const char* (*)(int status);
}  // namespace cublas

namespace rocblas {
constexpr int kSuccess = 0;
constexpr int kOpNone = 111;                        // rocblas_operation_none
constexpr int kF16 = 150, kF32 = 151, kBF16 = 168;  // rocblas_datatype_*_r
constexpr int kAlgoStandard = 0;                    // rocblas_gemm_algo_standard
using Create = int (*)(void** handle);
using Destroy = int (*)(void* handle);
using SetStream = int (*)(void* handle, void* stream);
using GemmEx = int (*)(void* handle, int transA, int transB, int m, int n, int k, const void* alpha, const void* a,
                       int aType, int lda, const void* b, int bType, int ldb, const void* beta, const void* c,
                       int cType, int ldc, void* d, int dType, int ldd, int computeType, int algo,
                       int32_t solutionIndex, uint32_t flags);
using StatusName = const char* (*)(int status);
using VersionString = int (*)(char* buf, size_t len);
}  // namespace rocblas

}  // namespace tessera::perf::blasabi

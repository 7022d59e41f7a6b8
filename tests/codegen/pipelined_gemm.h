// The software-pipelined f16 (and i8) GEMM kernels shared by the pipeline tests
// (gpu/gpu_pipeline_test.cpp, gpu/gpu_slot_dot_test.cpp,
// gpu/gpu_resource_check_test.cpp, tests/dsl/pipelined_test.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "tessera/tessera.h"

namespace gemmtest {

/// C[M,N] (f32) = A[M,K] @ B[K,N] (f16, row-major), one BM x BN tile per
/// program (program_id(0) along M, (1) along N), the K loop written with
/// for_pipelined over `stages` and the tiles staged through shared memory;
/// masked lanes read 0.
inline tessera::Kernel pipelinedGemmF16(const std::string& name, int64_t BM, int64_t BN, int64_t BK, int64_t stages) {
  namespace ts = tessera;
  return ts::kernel(
      name, {"c", "a", "b", "M", "N", "K"},
      [=](ts::Ptr<float> c, ts::Ptr<const ts::half> a, ts::Ptr<const ts::half> b, ts::Int M, ts::Int N, ts::Int K) {
        auto row = ts::expand_dims(ts::program_id(0) * BM + ts::arange(BM), 1);
        auto col = ts::expand_dims(ts::program_id(1) * BN + ts::arange(BN), 0);
        auto rk = ts::arange(BK);
        auto sa = ts::alloc_shared(ts::f16, {BM, BK});
        auto sb = ts::alloc_shared(ts::f16, {BK, BN});
        auto acc = ts::for_pipelined(0, K, BK, stages, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k, ts::Tensor acc) {
          auto ka = ts::expand_dims(k + rk, 0);
          auto kb = ts::expand_dims(k + rk, 1);
          auto ta = ts::stage_copy(sa, a + row * K + ka, (row < M) & (ka < K));
          auto tb = ts::stage_copy(sb, b + kb * N + col, (kb < K) & (col < N));
          return ts::dot(ta.load(), tb.load(), acc);
        });
        ts::store(c + row * N + col, acc, (row < M) & (col < N));
      });
}

/// The same GEMM of i8 operands into an i32 accumulator (C[M,N] i32):
/// the tensor-core i8 path (mma.sync m16n8k32 s8, MFMA / WMMA i8).
inline tessera::Kernel pipelinedGemmI8(const std::string& name, int64_t BM, int64_t BN, int64_t BK, int64_t stages) {
  namespace ts = tessera;
  return ts::kernel(
      name, {"c", "a", "b", "M", "N", "K"},
      [=](ts::Ptr<int32_t> c, ts::Ptr<const int8_t> a, ts::Ptr<const int8_t> b, ts::Int M, ts::Int N, ts::Int K) {
        auto row = ts::expand_dims(ts::program_id(0) * BM + ts::arange(BM), 1);
        auto col = ts::expand_dims(ts::program_id(1) * BN + ts::arange(BN), 0);
        auto rk = ts::arange(BK);
        auto sa = ts::alloc_shared(ts::i8, {BM, BK});
        auto sb = ts::alloc_shared(ts::i8, {BK, BN});
        auto acc = ts::for_pipelined(0, K, BK, stages, ts::zeros({BM, BN}, ts::i32), [&](ts::Int k, ts::Tensor acc) {
          auto ka = ts::expand_dims(k + rk, 0);
          auto kb = ts::expand_dims(k + rk, 1);
          auto ta = ts::stage_copy(sa, a + row * K + ka, (row < M) & (ka < K));
          auto tb = ts::stage_copy(sb, b + kb * N + col, (kb < K) & (col < N));
          return ts::dot(ta.load(), tb.load(), acc);
        });
        ts::store(c + row * N + col, acc, (row < M) & (col < N));
      });
}

/// The lines of tileMatmul's first shared alloc and of its loop, for tests
/// of messages that name them.
struct TileMatmulLines {
  int alloc = 0, loop = 0;
};

/// c[BM x BN] (f32) = a[BM x K] @ b[K x BN] (f16), one tile, the K loop
/// pipelined over `stages`; masked lanes read 0.
inline tessera::Kernel tileMatmul(const std::string& name, int64_t BM, int64_t BN, int64_t BK, int64_t stages,
                                  TileMatmulLines* lines = nullptr) {
  namespace ts = tessera;
  return ts::kernel(name, {"c", "a", "b", "K"},
                    [=](ts::Ptr<float> c, ts::Ptr<const ts::half> a, ts::Ptr<const ts::half> b, ts::Int K) {
                      auto rm = ts::arange(BM);
                      auto rn = ts::arange(BN);
                      auto rk = ts::arange(BK);
                      if (lines) lines->alloc = __LINE__ + 1;
                      auto sa = ts::alloc_shared(ts::f16, {BM, BK});
                      auto sb = ts::alloc_shared(ts::f16, {BK, BN});
                      if (lines) lines->loop = __LINE__ + 1;
                      auto acc = ts::for_pipelined(
                          0, K, BK, stages, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k, ts::Tensor acc) {
                            auto ka = ts::expand_dims(rk, 0) + k;
                            auto ta = ts::stage_copy(sa, a + ts::expand_dims(rm, 1) * K + ka, ka < K);
                            auto kb = ts::expand_dims(rk, 1) + k;
                            auto tb = ts::stage_copy(sb, b + kb * BN + ts::expand_dims(rn, 0), kb < K);
                            return ts::dot(ta.load(), tb.load(), acc);
                          });
                      ts::store(c + ts::expand_dims(rm, 1) * BN + ts::expand_dims(rn, 0), acc);
                    });
}

}  // namespace gemmtest

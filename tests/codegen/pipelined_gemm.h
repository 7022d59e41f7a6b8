// The software-pipelined f16 GEMM kernel shared by the GPU pipeline tests
// (gpu_pipeline_test.cpp, gpu_slot_dot_test.cpp).
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

}  // namespace gemmtest

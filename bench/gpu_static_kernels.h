// The kernels of the static GPU code-quality benchmark beyond the bundled
// examples (bench/gpu_static_bench.cpp; Triton's versions of the same in
// bench/triton/static_peer.py). Each comes with a check against a plain C++
// reference on any device, run by tests/codegen/bench_kernels_test.cpp on the
// CPU and both emulators, and by the benchmark before it reports a number.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "registry.h"
#include "tessera/tessera.h"

namespace tessera::bench {

struct GpuBenchKernel {
  std::string name;    // kernel family: scalar_store, gemv, rope, transpose, attention, gemm_f16
  std::string config;  // tile sizes, warps, variant: "64x128 w4"
  Kernel kernel;
  int numWarps = 4;
  /// The GPU targets the configuration is made for, separated by spaces
  /// ("nvptx:sm_90a nvptx:sm_100a": their shared memory or instructions),
  /// empty for all; the CPU runs it too.
  std::string gpuOnly;
  /// Shapes the test runs: aligned to the tiles, and ragged.
  std::vector<std::vector<int64_t>> testShapes;
  /// Generates inputs of `shape`, compiles for `dev` with `opts`, launches
  /// and compares with the reference.
  std::function<examples::CheckResult(const Device& dev, const CompileOptions& opts, const std::vector<int64_t>& shape)>
      check;
};

/// Every configuration the benchmark measures, in a stable order.
std::vector<GpuBenchKernel> gpuBenchKernels();

// The kernels themselves (arguments in order; all tensors row-major):
/// out[p] = p for each program p, one scalar store: the least a kernel
/// does, so its compile time is a backend's fixed cost per compile.  out   grid: n
Kernel scalarStore();
/// y[M] = A[M, K] @ x[K], f32; BM rows per program, K loop of BK.   y, a, x, M, K   grid: ceil(M / BM)
Kernel gemv(int BM, int BK);
/// Rotary embedding, rotate-half form, f32: for each row r and i < HD/2,
///   out[r, i] = x1 cos - x2 sin, out[r, i + HD/2] = x2 cos + x1 sin
/// with x1 = x[r, i], x2 = x[r, i + HD/2], cos/sin = tables[r, i] (rows x
/// HD/2; no sin/cos op: the tables come from memory).   out, x, cos, sin, rows   grid: ceil(rows / BR)
Kernel rope(int BR, int HD);
/// out[N, M] = in[M, N]^T, f32, B x B tiles.                       out, in, M, N   grid: (ceil(M/B), ceil(N/B))
Kernel transpose(int B);
/// The flash_attention example's kernel (examples/flash_attention.cpp) with
/// BM x BN blocks.                                    o, q, k, v, n   grid: (ceil(n / BM), heads)
Kernel attention(int BM, int BN, int D, bool causal);
/// C (f16) = A (f16) @ B (f16), f32 accumulation, no epilogue (gemm_f16's
/// pipelined main loop).                                         c, a, b, M, N, K
Kernel gemmF16Plain(examples::GemmBlocks blocks);

}  // namespace tessera::bench

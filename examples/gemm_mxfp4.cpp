// gemm_mxfp4: C (f32) = A (mxfp4) @ B^T (mxfp4): f4e2m1 codes two a byte, blocks of 32 with e8m0 scales, f32
// accumulation.
//
// The kernel and its reference are examples/block_scaled.h's, shared by the
// block-scaled GEMMs: a K loop of masked loads of the codes and the block
// scales, one ts::dot_scaled per step. Native: sm_100a/sm_103a (tcgen05.mma
// kind::mxf4, packed, 128-row tiles, K steps of 64 and more), sm_120a
// (packed on kind::mxf4 at K steps of 64 and more, else unpacked on
// kind::mxf8f6f4) and gfx950
// (packed on v_mfma_scale, K steps of 64 and more); elsewhere decomposed
// (decoded exactly, scaled into bf16, a bf16 dot), which the compile's
// warnings say, with the cost (docs/dot_scaled.md).
//
// Shape: {M, N, K}; default {300, 200, 150}. K need not be a multiple of the
// block: the last block of each row is partial, its codes past K zero.
#include "block_scaled.h"

namespace tessera::examples {

Example gemmMXFP4Example() {
  return scaledGemmExample(
      "gemm_mxfp4", ScaledFormat::mxfp4,
      "C (f32) = A (mxfp4) @ B^T (mxfp4): f4e2m1 codes two a byte, blocks of 32 with e8m0 scales, f32 accumulation");
}

}  // namespace tessera::examples

// Usage: gemm_mxfp4 [--dump] [M N K]
TESSERA_EXAMPLE_PROGRAM(gemmMXFP4Example)

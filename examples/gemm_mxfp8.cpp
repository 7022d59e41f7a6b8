// gemm_mxfp8: C (f32) = A (mxfp8 e4m3) @ B^T (mxfp8 e4m3): blocks of 32 with e8m0 scales, f32 accumulation.
//
// The kernel and its reference are examples/block_scaled.h's, shared by the
// block-scaled GEMMs: a K loop of masked loads of the codes and the block
// scales (on sm_100a/sm_103a the codes staged by a pipeline), one
// ts::dot_scaled per step. sm_100a/sm_103a run it on tcgen05.mma
// kind::mxf8f6f4 (128-row tiles), sm_120a on the block-scaled mma.sync
// (kind::mxf8f6f4), gfx950 on v_mfma_scale (K steps of 64 and more);
// elsewhere it runs decomposed (decoded exactly, scaled into bf16, a bf16
// dot), which the compile's warnings say, with the cost (dot_scaled.md).
//
// Shape: {M, N, K}; default {300, 200, 150}. K need not be a multiple of the
// block: the last block of each row is partial, its codes past K zero.
#include "block_scaled.h"

namespace tessera::examples {

Example gemmMXFP8Example() {
  return scaledGemmExample(
      "gemm_mxfp8", ScaledFormat::mxfp8_e4m3,
      "C (f32) = A (mxfp8 e4m3) @ B^T (mxfp8 e4m3): blocks of 32 with e8m0 scales, f32 accumulation");
}

}  // namespace tessera::examples

// Usage: gemm_mxfp8 [--dump] [M N K]
TESSERA_EXAMPLE_PROGRAM(gemmMXFP8Example)

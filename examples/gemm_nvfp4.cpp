// gemm_nvfp4: C (f32) = A (nvfp4) @ B^T (nvfp4): f4e2m1 codes two a byte, blocks of 16 with f8e4m3 scales, a per-tensor
// scale, f32 accumulation.
//
// The kernel and its reference are examples/block_scaled.h's, shared by the
// block-scaled GEMMs: a K loop of masked loads of the codes and the block
// scales, one ts::dot_scaled per step. Native: sm_100a/sm_103a (tcgen05.mma
// kind::mxf4nvf4, 128-row tiles) and sm_120a (mma.sync kind::mxf4nvf4), at
// K steps of 64 and more; elsewhere (gfx950's scaled MFMAs take e8m0 scales
// only) the dot runs decomposed (decoded exactly, scaled into bf16, a bf16
// dot) and the compile's warnings say so, with the cost (docs/dot_scaled.md).
//
// Shape: {M, N, K}; default {300, 200, 150}. K need not be a multiple of the
// block: the last block of each row is partial, its codes past K zero.
#include "block_scaled.h"

namespace tessera::examples {

Example gemmNVFP4Example() {
  return scaledGemmExample("gemm_nvfp4", ScaledFormat::nvfp4,
                           "C (f32) = A (nvfp4) @ B^T (nvfp4): f4e2m1 codes two a byte, blocks of 16 with f8e4m3 "
                           "scales, a per-tensor scale, f32 accumulation");
}

}  // namespace tessera::examples

// Usage: gemm_nvfp4 [--dump] [M N K]
TESSERA_EXAMPLE_PROGRAM(gemmNVFP4Example)

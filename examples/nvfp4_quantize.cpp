// nvfp4_quantize: NVFP4's two-level quantisation of an f32 matrix: the
// per-tensor f32 scale s (amax(x) / (6 x 448), an argument: computed by the
// previous step or a reduction), per block of 16 an f8e4m3 scale
// e4m3(amax_block / 6 / s), and each element divided by (scale x s) rounds
// to the nearest f4e2m1 code, stored two a byte: the operands of
// gemm_nvfp4.
//
// The kernel and its reference (the plain C++ quantiser, in the same f32
// arithmetic, compared bit for bit) are examples/block_scaled.h's. Shape:
// {rows, cols}; default {37, 1000}.
#include "block_scaled.h"

namespace tessera::examples {

Example nvfp4QuantizeExample() {
  return quantiseExample("nvfp4_quantize", ScaledFormat::nvfp4,
                         "NVFP4 two-level quantisation: per-tensor f32 and per-16 f8e4m3 scales, f4e2m1 codes");
}

}  // namespace tessera::examples

// Usage: nvfp4_quantize [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(nvfp4QuantizeExample)

// mxfp8_quantize: MXFP8 (e4m3) quantisation of an f32 matrix, row by row in
// blocks of 32 (OCP MX v1.0, 6.3): each block's e8m0 scale is the exponent
// of its amax minus f8e4m3's largest exponent, 8 (NaN for a block holding a
// NaN or an infinity), and each element divided by it is cast to f8e4m3
// (round to nearest even, saturating at 448), one code a byte: the
// operands of gemm_mxfp8.
//
// The kernel and its reference (the plain C++ quantiser, compared bit for
// bit) are examples/block_scaled.h's. Shape: {rows, cols}; default {37,
// 1000}.
#include "block_scaled.h"

namespace tessera::examples {

Example mxfp8QuantizeExample() {
  return quantiseExample("mxfp8_quantize", ScaledFormat::mxfp8_e4m3,
                         "MXFP8 quantisation: block amax -> e8m0 scale, f8e4m3 codes");
}

}  // namespace tessera::examples

// Usage: mxfp8_quantize [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(mxfp8QuantizeExample)

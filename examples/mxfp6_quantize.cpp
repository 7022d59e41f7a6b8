// mxfp6_quantize: MXFP6 (e2m3) quantisation of an f32 matrix, row by row in
// blocks of 32 (OCP MX v1.0, 6.3): each block's e8m0 scale is the exponent
// of its amax minus f6e2m3's largest exponent, 2 (NaN for a block holding a
// NaN or an infinity), and each element divided by it is cast to f6e2m3
// (round to nearest even, saturating at 7.5), one code a byte in its low
// six bits: the operands of ts::dot_scaled's mxfp6_e2m3.
//
// The kernel and its reference (the plain C++ quantiser, compared bit for
// bit) are examples/block_scaled.h's. Shape: {rows, cols}; default {37,
// 1000}.
#include "block_scaled.h"

namespace tessera::examples {

Example mxfp6QuantizeExample() {
  return quantiseExample("mxfp6_quantize", ScaledFormat::mxfp6_e2m3,
                         "MXFP6 quantisation: block amax -> e8m0 scale, f6e2m3 codes (one a byte)");
}

}  // namespace tessera::examples

// Usage: mxfp6_quantize [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(mxfp6QuantizeExample)

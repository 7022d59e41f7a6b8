// mx_dequantize: MXFP4 dequantisation: the f4e2m1 codes, two a byte, are
// unpacked (ts::unpack_fp4), decoded exactly (ts::mx_decode) and multiplied
// by their block's e8m0 scale, broadcast over the block: f32 out, the exact
// value of each element.
//
// The kernel and its reference are examples/block_scaled.h's (the inputs
// are the plain C++ quantiser's codes and scales). Shape: {rows, cols};
// default {37, 1000}.
#include "block_scaled.h"

namespace tessera::examples {

Example mxDequantizeExample() {
  return dequantiseExample("mx_dequantize", ScaledFormat::mxfp4,
                           "MXFP4 dequantisation: unpack, decode, times the e8m0 block scale, f32 out");
}

}  // namespace tessera::examples

// Usage: mx_dequantize [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(mxDequantizeExample)

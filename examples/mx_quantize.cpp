// mx_quantize: MXFP4 quantisation of an f32 matrix, row by row in blocks of
// 32 (OCP MX v1.0, 6.3): each block's amax gives its e8m0 scale (the
// exponent of amax minus f4e2m1's largest exponent, 2; NaN for a block
// holding a NaN or an infinity), each element divided by it rounds to the
// nearest f4e2m1 code (ties to even, saturating at 6), and the codes are
// stored two a byte (ts::pack_fp4): the operands of gemm_mxfp4.
//
// The kernel and its reference (the plain C++ quantiser, compared bit for
// bit) are examples/block_scaled.h's. Shape: {rows, cols}; default {37,
// 1000}: cols need not be a multiple of the block (the last block of a row
// is partial) nor even (the last byte's high nibble is 0).
#include "block_scaled.h"

namespace tessera::examples {

Example mxQuantizeExample() {
  return quantiseExample("mx_quantize", ScaledFormat::mxfp4,
                         "MXFP4 quantisation: block amax -> e8m0 scale, f4e2m1 codes two a byte");
}

}  // namespace tessera::examples

// Usage: mx_quantize [--dump] [rows cols]
TESSERA_EXAMPLE_PROGRAM(mxQuantizeExample)

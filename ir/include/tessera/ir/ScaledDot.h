// Block-scaled dots in the tile IR (`dot_scaled`, IR.h; docs/dot_scaled.md):
// the formats it takes, as one table, and the exact decoding of their codes
// as tile-IR ops, which the DSL's ts::mx_decode / ts::unpack_fp4 and the
// decompose-scaled-dots pass share (one definition of the decomposition).
#pragma once

#include <cstdint>
#include <string>

#include "tessera/ir/Builder.h"

namespace tessera::ir {

/// One operand format of `dot_scaled` (ScaledFormats.def).
struct ScaledFormatInfo {
  const char* name;  // the attribute's value: mxfp8_e4m3, ..., nvfp4
  DType elem;        // what the codes are
  bool packed;       // two codes a byte along K (element 2j in the low nibble of byte j)
  DType scale;       // e8m0, or f8e4m3 for nvfp4
  int64_t block;     // elements along K per scale
};

/// The format named `name`; nullptr when there is none.
const ScaledFormatInfo* findScaledFormat(const std::string& name);
/// "mxfp8_e4m3, mxfp8_e5m2, ...": the legal names, for messages.
const std::string& scaledFormatNames();

/// The f32 values of a u8 tile of codes of `fmt` (an MX element dtype,
/// e8m0, or an fp8 dtype), exactly, with integer and bit operations.
Value* buildMxDecode(Builder& b, Value* codes, DType fmt);
/// A u8 tile of fp4 codes packed two a byte along the last dim, unpacked
/// to one a byte (the last dim doubled).
Value* buildUnpackFp4(Builder& b, Value* packed);

/// The element dtype of operand `operand` (0: A, 1: B) of dot `dot`: the
/// operand's dtype, but for the block-scaled dot (IR.h), whose u8 operands
/// hold the dtype its `a_elem` / `b_elem` names.
DType dotOperandElem(const Op& dot, unsigned operand);
/// Elements along K per byte of a dot's operands: 2 for the `packed`
/// block-scaled dot (fp4 x fp4 two a byte, IR.h), else 1.
int64_t dotElemsPerByte(const Op& dot);
/// A dot's K in elements: A's columns times dotElemsPerByte.
int64_t dotK(const Op& dot);
/// The elements along K per scale of a block-scaled dot (IR.h): 32 for
/// e8m0 scales, 16 for `scale_elem = "ue4m3"` (NVFP4's).
int64_t dotScaleBlock(const Op& dot);
/// How a target's block-scaled matrix instruction takes a dot_scaled
/// (codegen's gpuScaledDotNative; decompose-scaled-dots writes the form):
/// not at all (decomposed), its codes one a byte in containers
/// (buildMmaContainers), or, fp4 x fp4, as packed (two a byte along K).
enum class ScaledDotForm : int { Decomposed, Containers, PackedFp4 };
/// The codes of `codes` (a u8 tile of format `f`, fp4 packed) one a byte,
/// as the block-scaled dot's containers hold them: fp8 as they are, fp6 in
/// the low six bits, fp4 in bits 2-5 (the `kind::mxf8f6f4` containers of
/// the PTX ISA), the padding bits zero.
Value* buildMmaContainers(Builder& b, Value* codes, const ScaledFormatInfo& f);

}  // namespace tessera::ir

// Blackwell's fifth-generation tensor-core instructions (tcgen05, sm_100a /
// sm_103a): the encodings the compiler writes and the emulator reads, kept
// in one place (PTX ISA, "TensorCore 5th Generation Family Instructions":
// the instruction descriptor, the shared-memory matrix descriptor, tensor
// memory addresses).
//
// Tensor memory (TMEM) is 128 lanes x 512 columns of 32-bit cells per CTA.
// An address is (lane << 16) | column. Warp w of a CTA may access only the
// lanes 32 (w % 4) .. 32 (w % 4) + 31 with tcgen05.ld/st.
//
// The shared-memory matrix descriptor is wgmma's (start >> 4 in bits 0-13,
// LBO >> 4 in 16-29, SBO >> 4 in 32-45; the swizzle's 128/64/32-byte codes
// read the same at bits 61-63 as wgmma's 1/2/3 at bits 62-63) plus a
// version of 1 in bits 46-47, which tcgen05 requires.
#pragma once

#include <cstdint>

namespace tessera::tcgen05 {

inline constexpr uint32_t kLanes = 128;
inline constexpr uint32_t kColumns = 512;
/// The descriptor version bits tcgen05 requires (wgmma's are 0).
inline constexpr uint64_t kDescriptorVersion = uint64_t{1} << 46;

inline constexpr uint32_t address(uint32_t lane, uint32_t column) { return (lane << 16) | column; }
inline constexpr uint32_t laneOf(uint32_t addr) { return addr >> 16; }
inline constexpr uint32_t columnOf(uint32_t addr) { return addr & 0xFFFF; }

/// The kinds of tcgen05.mma this compiler writes, as LLVM's
/// llvm.nvvm.tcgen05.mma.* take them (their `kind` operand).
enum class Kind : uint32_t { F16 = 0, Tf32 = 1, F8f6f4 = 2, I8 = 3 };

/// The K of one instruction, in elements: 32 bytes of each row of A and B.
inline constexpr uint32_t kOf(Kind k) { return k == Kind::F8f6f4 || k == Kind::I8 ? 32 : k == Kind::Tf32 ? 8 : 16; }

/// The type codes of the instruction descriptor's A, B and D fields (PTX
/// ISA, "Instruction descriptor format for .kind::tf32, .kind::f16,
/// .kind::f8f6f4 and .kind::i8"); their meaning depends on the kind.
namespace code {
inline constexpr uint32_t kF16 = 0, kBf16 = 1, kTf32 = 2;   // A/B of kind::f16, kind::tf32
inline constexpr uint32_t kE4m3 = 0, kE5m2 = 1;             // A/B of kind::f8f6f4 (fp6/fp4: 3, 4, 5)
inline constexpr uint32_t kU8 = 0, kS8 = 1;                 // A/B of kind::i8
inline constexpr uint32_t kDF16 = 0, kDF32 = 1, kDS32 = 2;  // D
}  // namespace code

/// The 32-bit instruction descriptor of the dense kinds (f16, tf32,
/// f8f6f4, i8): the fields this compiler sets. No saturation, no negation.
struct InstrDesc {
  uint32_t dType = code::kDF32;
  uint32_t aType = code::kF16, bType = code::kF16;
  bool aMnMajor = false;  // A stored M-major (else K-major)
  bool bMnMajor = false;  // B stored N-major (else K-major)
  uint32_t m = 64, n = 8;

  constexpr uint32_t encode() const {
    return dType << 4 | aType << 7 | bType << 10 | (aMnMajor ? 1u : 0u) << 15 | (bMnMajor ? 1u : 0u) << 16 |
           (n >> 3) << 17 | (m >> 4) << 24;
  }
  /// The fields of `bits` for an instruction of kind `k`; false where it
  /// sets one this compiler never writes (sparsity, saturation, negation,
  /// the max shift) or a type `k` does not take (fp6/fp4 included).
  static constexpr bool decode(uint32_t bits, Kind k, InstrDesc& d) {
    if ((bits & 0xF) != 0 || (bits >> 13 & 3) != 0 || (bits >> 6 & 1) != 0 || (bits >> 23 & 1) != 0 ||
        (bits >> 29) != 0)
      return false;
    d.dType = (bits >> 4) & 3;
    d.aType = (bits >> 7) & 7;
    d.bType = (bits >> 10) & 7;
    auto in = [&](uint32_t lo, uint32_t hi) {
      return d.aType >= lo && d.aType <= hi && d.bType >= lo && d.bType <= hi;
    };
    switch (k) {
      case Kind::F16:
        if (d.dType > code::kDF32 || !in(code::kF16, code::kBf16)) return false;
        break;
      case Kind::Tf32:
        if (d.dType != code::kDF32 || !in(code::kTf32, code::kTf32)) return false;
        break;
      case Kind::F8f6f4:
        if (d.dType != code::kDF32 || !in(code::kE4m3, code::kE5m2)) return false;
        break;
      case Kind::I8:
        if (d.dType != code::kDS32 || !in(code::kU8, code::kS8)) return false;
        break;
    }
    d.aMnMajor = (bits >> 15 & 1) != 0;
    d.bMnMajor = (bits >> 16 & 1) != 0;
    d.n = ((bits >> 17) & 0x3F) << 3;
    d.m = ((bits >> 24) & 0x1F) << 4;
    return true;
  }
};

/// The block-scaled kinds (.kind::mxf8f6f4, mxf4, mxf4nvf4 with
/// .block_scale; LLVM's llvm.nvvm.tcgen05.mma.shared.<kind>.block_scale
/// .block32 / .block16 intrinsics, one per kind), each with its own
/// instruction descriptor (ScaledInstrDesc). M is 128 (cta_group::1); K is
/// 32 bytes of each row of A and B: 32 fp8 codes (mxf8f6f4, one e8m0
/// scale of 32 per row: scale_vec::1X), or 64 fp4 codes two a byte, the
/// even k in the low nibble (mxf4: two e8m0 scales of 32, 2X; mxf4nvf4:
/// four UE4M3 scales of 16, 4X).
enum class ScaledKind : uint32_t { MxF8f6f4 = 0, MxF4 = 1, MxF4Nvf4 = 2 };
/// Elements along K of one instruction.
inline constexpr uint32_t kOf(ScaledKind k) { return k == ScaledKind::MxF8f6f4 ? 32 : 64; }
/// Scales per row (and column of B) one instruction reads: 1, 2 or 4.
inline constexpr uint32_t scalesPerInstr(ScaledKind k) {
  return k == ScaledKind::MxF8f6f4 ? 1 : k == ScaledKind::MxF4 ? 2 : 4;
}

/// The A/B type codes of the block-scaled descriptors: mxf8f6f4's (the fp6
/// and fp4 codes name the padded shared-memory formats, which this
/// compiler does not write), and E2M1 of mxf4 / mxf4nvf4.
namespace scode {
inline constexpr uint32_t kE4m3 = 0, kE5m2 = 1, kE2m3 = 3, kE3m2 = 4, kE2m1 = 5;  // mxf8f6f4
inline constexpr uint32_t kFp4E2m1 = 1;                                           // mxf4, mxf4nvf4
}  // namespace scode

/// The 32-bit instruction descriptor of the block-scaled kinds (PTX ISA,
/// "Instruction descriptor format for .kind::mxf8f6f4, .kind::mxf4 and
/// .kind::mxf4nvf4"): B's scale-factor ID in bits 4-5, A/B types at 7 and
/// 10, the major-ness bits at 15/16, N >> 3 at 17-22, the scale type at 23
/// (1: UE8M0; 0: UE4M3, mxf4nvf4 only), M >> 7 at 27-28, A's scale-factor
/// ID at 29-30. No dtype field (D is f32), no sparsity or negation here.
/// The IDs pick the byte of each 32-bit scale cell the instruction's first
/// scale is in (scaleCell): 0-3 (1X), 0 or 2 (2X), 0 (4X).
struct ScaledInstrDesc {
  uint32_t aType = scode::kE4m3, bType = scode::kE4m3;
  bool bMnMajor = false;  // B stored N-major (mxf8f6f4 with 8-bit B only)
  uint32_t m = 128, n = 8;
  bool ue8m0 = true;
  uint32_t sfA = 0, sfB = 0;

  constexpr uint32_t encode() const {
    return sfB << 4 | aType << 7 | bType << 10 | (bMnMajor ? 1u : 0u) << 16 | (n >> 3) << 17 | (ue8m0 ? 1u : 0u) << 23 |
           (m >> 7) << 27 | sfA << 29;
  }
  /// The fields of `bits` for kind `k`; false where a field is one this
  /// compiler never writes (sparsity, negation, A transposed, K96, reserved
  /// bits), a type `k` does not take, or an ID or scale type `k` forbids.
  static constexpr bool decode(uint32_t bits, ScaledKind k, ScaledInstrDesc& d) {
    if ((bits & 0xF) != 0 || (bits >> 6 & 1) != 0 || (bits >> 13 & 7) != 0 || (bits >> 24 & 7) != 0 ||
        (bits >> 31) != 0)
      return false;
    d.sfB = bits >> 4 & 3;
    d.aType = bits >> 7 & 7;
    d.bType = bits >> 10 & 7;
    d.bMnMajor = (bits >> 16 & 1) != 0;
    d.n = ((bits >> 17) & 0x3F) << 3;
    d.ue8m0 = (bits >> 23 & 1) != 0;
    d.m = ((bits >> 27) & 3) << 7;
    d.sfA = bits >> 29 & 3;
    auto fp8 = [](uint32_t t) { return t == scode::kE4m3 || t == scode::kE5m2; };
    switch (k) {
      case ScaledKind::MxF8f6f4: return fp8(d.aType) && fp8(d.bType) && d.ue8m0;
      case ScaledKind::MxF4:
        return d.aType == scode::kFp4E2m1 && d.bType == scode::kFp4E2m1 && !d.bMnMajor && d.ue8m0 && d.sfA % 2 == 0 &&
               d.sfB % 2 == 0;
      case ScaledKind::MxF4Nvf4:
        return d.aType == scode::kFp4E2m1 && d.bType == scode::kFp4E2m1 && !d.bMnMajor && d.sfA == 0 && d.sfB == 0;
    }
    return false;
  }
};

/// Scales in tensor memory. A block-scaled instruction reads the scale of
/// row r of A (column r of B) from the cell (lane r % 128, column c0 + r /
/// 32) of the columns c0 its scale operand names, byte ID + j for its j-th
/// scale; the hardware wants every 32-lane quarter to hold the same cells
/// (row r's scales in lanes r % 32 + 32 q for every q), which the copy
/// below writes. So 128 rows of 4 scales take 4 columns: an "atom".
inline constexpr uint32_t kScaleAtomRows = 128, kScaleAtomScales = 4, kScaleAtomBytes = 512, kScaleAtomColumns = 4;
/// The column (from the operand's first) and the lane of row r's scales.
inline constexpr uint32_t scaleColumn(uint32_t r) { return r / 32; }
inline constexpr uint32_t scaleLane(uint32_t r) { return r % 128; }
/// Where an atom's scale (row r < 128, scale s < 4) is in shared memory for
/// tcgen05.cp .32x128b.warpx4, which copies 32 rows of 16 bytes (row x to
/// lane x of every quarter, its 4 words to 4 columns): row r % 32, word r /
/// 32, byte s. The cuBLAS / CUTLASS "128x4" scale atom (ScaleLayouts.h).
inline constexpr uint32_t scaleAtomByte(uint32_t r, uint32_t s) { return (r % 32) * 16 + (r / 32) * 4 + s; }

/// The TMEM lane of row `r` of an M x N accumulator: M = 128 is the
/// identity (one row per lane); M = 64 (cta_group::1, the data path whose
/// 16 rows per warp sit in the first 16 lanes of each warp's 32).
inline constexpr uint32_t laneOfRow(uint32_t m, uint32_t r) { return m == 128 ? r : 32 * (r / 16) + r % 16; }

/// tcgen05.ld / st .16x256b: register `r` of lane `l` holds the cell (row,
/// column) of the 16 x 8N block the instruction moves (.xN): rows are
/// consecutive TMEM lanes from the address's lane, columns consecutive
/// from its column; for each 8 columns the 4 registers are mma.m16n8k16's
/// C fragment.
inline constexpr uint32_t ld16x256bRow(uint32_t l, uint32_t r) { return l / 4 + 8 * ((r / 2) % 2); }
inline constexpr uint32_t ld16x256bColumn(uint32_t l, uint32_t r) { return r % 2 + 2 * (l % 4) + 8 * (r / 4); }

}  // namespace tessera::tcgen05

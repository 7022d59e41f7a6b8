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

/// The 32-bit instruction descriptor of kind::f16 (and kind::tf32): the
/// fields this compiler sets. Dense, no saturation, no negation.
struct InstrDesc {
  bool f32Accumulator = true;  // D: f32 (else f16)
  bool aBf16 = false;          // A: bf16 (else f16)
  bool bBf16 = false;
  bool aMnMajor = false;  // A stored M-major (else K-major)
  bool bMnMajor = false;  // B stored N-major (else K-major)
  uint32_t m = 64, n = 8;

  constexpr uint32_t encode() const {
    return (f32Accumulator ? 1u : 0u) << 4 | (aBf16 ? 1u : 0u) << 7 | (bBf16 ? 1u : 0u) << 10 |
           (aMnMajor ? 1u : 0u) << 15 | (bMnMajor ? 1u : 0u) << 16 | (n >> 3) << 17 | (m >> 4) << 24;
  }
  /// The fields of `bits`; false where it sets one this compiler never
  /// writes (sparsity, saturation, negation, other formats, max shift).
  static constexpr bool decode(uint32_t bits, InstrDesc& d) {
    const uint32_t dFmt = (bits >> 4) & 3, aFmt = (bits >> 7) & 7, bFmt = (bits >> 10) & 7;
    if ((bits & 0xF) != 0 || (bits >> 13 & 3) != 0 || (bits >> 23 & 1) != 0 || (bits >> 29) != 0) return false;
    if (dFmt > 1 || aFmt > 1 || bFmt > 1) return false;
    d.f32Accumulator = dFmt == 1;
    d.aBf16 = aFmt == 1;
    d.bBf16 = bFmt == 1;
    d.aMnMajor = (bits >> 15 & 1) != 0;
    d.bMnMajor = (bits >> 16 & 1) != 0;
    d.n = ((bits >> 17) & 0x3F) << 3;
    d.m = ((bits >> 24) & 0x1F) << 4;
    return true;
  }
};

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

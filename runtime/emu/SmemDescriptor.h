// The shared-memory matrix descriptor that wgmma (Hopper) and tcgen05.mma
// (Blackwell) read their operands through, and the canonical layouts it
// names (PTX ISA, "Matrix Descriptor Format", "Shared Memory Matrix
// Layout"): the byte address of each 16-byte piece of an operand. Private
// to runtime/emu.
#pragma once

#include <cstdint>

namespace tessera::emu::detail {

struct SmemDescriptor {
  uint64_t start = 0, lbo = 0, sbo = 0;
  unsigned swizzle = 0;    // wgmma's code: 0 none, 1 128-byte, 2 64-byte, 3 32-byte
  uint64_t rowBytes = 16;  // of a swizzled row (16 without a swizzle)

  /// wgmma's encoding (swizzle in bits 62-63).
  static SmemDescriptor wgmma(uint64_t d) {
    SmemDescriptor s;
    s.start = (d & 0x3FFF) << 4;
    s.lbo = ((d >> 16) & 0x3FFF) << 4;
    s.sbo = ((d >> 32) & 0x3FFF) << 4;
    s.swizzle = static_cast<unsigned>(d >> 62);
    s.rowBytes = s.swizzle == 0 ? 16 : 256u >> s.swizzle;
    return s;
  }

  /// The address after the swizzle: 16-byte chunk c of a row at chunk
  /// c ^ ((address >> 7) & (rowBytes / 16 - 1)).
  uint64_t swizzled(uint64_t a) const { return swizzle == 0 ? a : a ^ (((a >> 7) & (rowBytes / 16 - 1)) << 4); }

  /// K-major (rows of K; A, or B^T): the piece holding K bytes
  /// [kByte, kByte + 16) of row `row` (an M or N index), before the swizzle.
  uint64_t kMajor(uint64_t row, uint64_t kByte) const {
    return swizzle == 0 ? start + (row / 8) * sbo + (row % 8) * 16 + (kByte / 16) * lbo
                        : start + (row / 8) * sbo + (row % 8) * rowBytes + kByte;
  }
  /// N-major (B: rows of N): the piece holding N bytes [nByte, nByte + 16)
  /// of row k, before the swizzle.
  uint64_t nMajor(uint64_t k, uint64_t nByte) const {
    return swizzle == 0 ? start + (nByte / 16) * sbo + (k / 8) * lbo + (k % 8) * 16
                        : start + (nByte / rowBytes) * lbo + (k / 8) * sbo + (k % 8) * rowBytes + nByte % rowBytes;
  }
};

}  // namespace tessera::emu::detail

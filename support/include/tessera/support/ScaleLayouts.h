// The layouts block-scaled matrix instructions read their scales in, so a
// program can store its scales in them once (docs/dot_scaled.md, "Scale
// layouts"). ts::dot_scaled takes a scale tile row-major, [rows, K / bs]
// (bs = ts::scaleBlock(fmt): 32 for MX, 16 for nvfp4), one byte a scale
// (e8m0 or f8e4m3 codes); these convert such an array to each vendor's
// layout and back, on the host, with nothing but the bytes moved.
// dot_scaled takes the row-major tile; the tcgen05 lowering stages it
// into these atoms itself (tessera/support/Tcgen05.h, scaleAtomByte).
//
// NVIDIA tcgen05 (sm_100a, kind::mxf8f6f4 / mxf4 / mxf4nvf4): the "128x4"
// atom of the cuBLAS documentation ("1D block scaling factors layout"; CUTLASS
// and cuDNN build the same one). 128 rows and 4 scale columns (four blocks
// along K) are 512 bytes seen as 32 rows of 16 bytes: the scale of row r,
// block c is byte (r % 32) * 16 + (r / 32) * 4 + c: the 16-byte row x holds
// rows x, x + 32, x + 64 and x + 96, four blocks each. CUTLASS copies such
// an atom from shared to tensor memory with tcgen05.cp's .32x128b.warpx4
// shape, each 16-byte row to the same lane of all four lane quarters.
// Atoms are laid out row-tile-major, then K-tile: atom (i, j) of rows
// [128 i, 128 i + 128) and blocks [4 j, 4 j + 4) starts at byte
// (i * ceil(blocks / 4) + j) * 512.
//
// AMD gfx950 scaled MFMA (v_mfma_scale_f32_16x16x128_f8f6f4): lane l of the
// wave supplies the scale of row l % 16 and block l / 16 of a 16-row x
// 128-K step (4 blocks of 32). A tile of 16 rows and 4 blocks is 64 bytes in
// lane order: the scale of row r, block c is byte (c % 4) * 16 + r % 16, so
// a wave loads its scale operand with one 1-byte-per-lane load (lane l reads
// byte l of its tile). Tiles are laid out row-tile-major, then K-tile: tile
// (i, j) of rows [16 i, 16 i + 16) and blocks [4 j, 4 j + 4) starts at byte
// (i * ceil(blocks / 4) + j) * 64.
//
// Rows and blocks past the array (to a multiple of the atom) are padding,
// written with `fill`: 0 by default, the smallest e8m0 scale (2^-127) and
// f8e4m3's +0, both finite, so a zero padding element stays 0 (never NaN).
// The reverse conversions ignore the padding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/support/Tcgen05.h"

namespace tessera {

/// The tcgen05 atom: 128 rows x 4 blocks, 512 bytes.
inline constexpr int64_t kTcgen05ScaleRows = tcgen05::kScaleAtomRows, kTcgen05ScaleBlocks = tcgen05::kScaleAtomScales,
                         kTcgen05ScaleAtomBytes = tcgen05::kScaleAtomBytes;
/// The gfx950 scaled-MFMA tile: 16 rows x 4 blocks (128 K of 32-blocks), 64 bytes.
inline constexpr int64_t kGfx950ScaleRows = 16, kGfx950ScaleBlocks = 4, kGfx950ScaleTileBytes = 64;

/// Bytes of the tcgen05 layout of `rows` x `blocks` scales: rows padded to
/// 128 and blocks to 4. UsageError for a negative count.
size_t tcgen05ScaleBytes(int64_t rows, int64_t blocks);
/// Where the scale of (`row`, `block`) is in the tcgen05 layout of scales
/// with `blocks` blocks a row (the formula at the top of this file).
/// UsageError for a negative row or a block outside [0, blocks).
size_t tcgen05ScaleOffset(int64_t row, int64_t block, int64_t blocks);
/// Row-major [rows, blocks] scales (`scales.size()` == rows * blocks, else
/// a UsageError) in the tcgen05 layout, padding written with `fill`.
std::vector<uint8_t> toTcgen05ScaleLayout(const std::vector<uint8_t>& scales, int64_t rows, int64_t blocks,
                                          uint8_t fill = 0);
/// The row-major [rows, blocks] scales of a tcgen05 layout
/// (`swizzled.size()` == tcgen05ScaleBytes(rows, blocks), else a UsageError).
std::vector<uint8_t> fromTcgen05ScaleLayout(const std::vector<uint8_t>& swizzled, int64_t rows, int64_t blocks);

/// The same for the gfx950 scaled-MFMA layout: rows padded to 16, blocks to 4.
size_t gfx950ScaleBytes(int64_t rows, int64_t blocks);
size_t gfx950ScaleOffset(int64_t row, int64_t block, int64_t blocks);
std::vector<uint8_t> toGfx950ScaleLayout(const std::vector<uint8_t>& scales, int64_t rows, int64_t blocks,
                                         uint8_t fill = 0);
std::vector<uint8_t> fromGfx950ScaleLayout(const std::vector<uint8_t>& lanes, int64_t rows, int64_t blocks);

}  // namespace tessera

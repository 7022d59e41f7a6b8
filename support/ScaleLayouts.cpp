// Scale layouts of the block-scaled matrix instructions (ScaleLayouts.h).
#include "tessera/support/ScaleLayouts.h"

#include <string>

#include "tessera/support/Error.h"
#include "tessera/support/Tcgen05.h"

namespace tessera {
namespace {

// One vendor's layout: tiles of tileRows x 4 blocks, row-tile-major then
// K-tile, and where (row % tileRows, block % 4) is inside a tile.
struct Layout {
  const char* name;
  int64_t tileRows, tileBlocks, tileBytes;
  size_t (*inTile)(int64_t r, int64_t c);
};

size_t tcgen05InAtom(int64_t r, int64_t c) { return tcgen05::scaleAtomByte(uint32_t(r), uint32_t(c)); }
size_t gfx950InTile(int64_t r, int64_t c) { return size_t(c * 16 + r); }

constexpr Layout kTcgen05{"tcgen05", kTcgen05ScaleRows, kTcgen05ScaleBlocks, kTcgen05ScaleAtomBytes, tcgen05InAtom};
constexpr Layout kGfx950{"gfx950", kGfx950ScaleRows, kGfx950ScaleBlocks, kGfx950ScaleTileBytes, gfx950InTile};

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void checkCounts(const Layout& l, const char* fn, int64_t rows, int64_t blocks) {
  if (rows < 0 || blocks < 0)
    throw UsageError(std::string(fn) + ": " + std::to_string(rows) + " rows x " + std::to_string(blocks) +
                     " blocks: the counts must be >= 0");
  // Bounded so that the padded size fits in size_t with room to spare.
  if (rows > (int64_t{1} << 31) || blocks > (int64_t{1} << 31))
    throw UsageError(std::string(fn) + ": " + std::to_string(rows) + " rows x " + std::to_string(blocks) +
                     " blocks is beyond the " + l.name + " layout's 2^31 rows and blocks");
}

size_t bytesOf(const Layout& l, const char* fn, int64_t rows, int64_t blocks) {
  checkCounts(l, fn, rows, blocks);
  return size_t(ceilDiv(rows, l.tileRows) * ceilDiv(blocks, l.tileBlocks) * l.tileBytes);
}

size_t offsetOf(const Layout& l, int64_t row, int64_t block, int64_t blocks) {
  const int64_t kTiles = ceilDiv(blocks, l.tileBlocks);
  return size_t(((row / l.tileRows) * kTiles + block / l.tileBlocks) * l.tileBytes) +
         l.inTile(row % l.tileRows, block % l.tileBlocks);
}

size_t checkedOffset(const Layout& l, const char* fn, int64_t row, int64_t block, int64_t blocks) {
  checkCounts(l, fn, 0, blocks);
  if (row < 0 || block < 0 || block >= blocks || row > (int64_t{1} << 31))
    throw UsageError(std::string(fn) + ": (row " + std::to_string(row) + ", block " + std::to_string(block) +
                     ") is outside a layout of " + std::to_string(blocks) + " blocks a row");
  return offsetOf(l, row, block, blocks);
}

std::vector<uint8_t> toLayout(const Layout& l, const char* fn, const std::vector<uint8_t>& scales, int64_t rows,
                              int64_t blocks, uint8_t fill) {
  const size_t bytes = bytesOf(l, fn, rows, blocks);
  if (scales.size() != size_t(rows) * size_t(blocks))
    throw UsageError(std::string(fn) + ": " + std::to_string(scales.size()) + " scales given for " +
                     std::to_string(rows) + " rows x " + std::to_string(blocks) + " blocks (" +
                     std::to_string(size_t(rows) * size_t(blocks)) + ")");
  std::vector<uint8_t> out(bytes, fill);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < blocks; ++c) out[offsetOf(l, r, c, blocks)] = scales[size_t(r * blocks + c)];
  return out;
}

std::vector<uint8_t> fromLayout(const Layout& l, const char* fn, const std::vector<uint8_t>& laid, int64_t rows,
                                int64_t blocks) {
  const size_t bytes = bytesOf(l, fn, rows, blocks);
  if (laid.size() != bytes)
    throw UsageError(std::string(fn) + ": " + std::to_string(laid.size()) + " bytes given; the " + l.name +
                     " layout of " + std::to_string(rows) + " rows x " + std::to_string(blocks) + " blocks has " +
                     std::to_string(bytes));
  std::vector<uint8_t> out(size_t(rows) * size_t(blocks));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < blocks; ++c) out[size_t(r * blocks + c)] = laid[offsetOf(l, r, c, blocks)];
  return out;
}

}  // namespace

size_t tcgen05ScaleBytes(int64_t rows, int64_t blocks) { return bytesOf(kTcgen05, "tcgen05ScaleBytes", rows, blocks); }
size_t tcgen05ScaleOffset(int64_t row, int64_t block, int64_t blocks) {
  return checkedOffset(kTcgen05, "tcgen05ScaleOffset", row, block, blocks);
}
std::vector<uint8_t> toTcgen05ScaleLayout(const std::vector<uint8_t>& scales, int64_t rows, int64_t blocks,
                                          uint8_t fill) {
  return toLayout(kTcgen05, "toTcgen05ScaleLayout", scales, rows, blocks, fill);
}
std::vector<uint8_t> fromTcgen05ScaleLayout(const std::vector<uint8_t>& swizzled, int64_t rows, int64_t blocks) {
  return fromLayout(kTcgen05, "fromTcgen05ScaleLayout", swizzled, rows, blocks);
}

size_t gfx950ScaleBytes(int64_t rows, int64_t blocks) { return bytesOf(kGfx950, "gfx950ScaleBytes", rows, blocks); }
size_t gfx950ScaleOffset(int64_t row, int64_t block, int64_t blocks) {
  return checkedOffset(kGfx950, "gfx950ScaleOffset", row, block, blocks);
}
std::vector<uint8_t> toGfx950ScaleLayout(const std::vector<uint8_t>& scales, int64_t rows, int64_t blocks,
                                         uint8_t fill) {
  return toLayout(kGfx950, "toGfx950ScaleLayout", scales, rows, blocks, fill);
}
std::vector<uint8_t> fromGfx950ScaleLayout(const std::vector<uint8_t>& lanes, int64_t rows, int64_t blocks) {
  return fromLayout(kGfx950, "fromGfx950ScaleLayout", lanes, rows, blocks);
}

}  // namespace tessera

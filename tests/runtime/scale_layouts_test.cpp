// The scale layouts of support/ScaleLayouts.h: positions worked out by hand
// from the documented formulas (tcgen05: byte (r % 32) * 16 + (r / 32) * 4 +
// c of a 512-byte atom of 128 rows x 4 blocks; gfx950: byte c * 16 + r of a
// 64-byte tile of 16 rows x 4 blocks, i.e. lane order; both row-tile-major,
// then K-tile), every padded position used exactly once, round trips over
// shapes that are and are not multiples of the atom, the padding's fill,
// and the errors.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "tessera/support/Error.h"
#include "tessera/support/ScaleLayouts.h"

namespace ts = tessera;

namespace {

struct Vendor {
  const char* name;
  int64_t tileRows;
  size_t (*bytes)(int64_t, int64_t);
  size_t (*offset)(int64_t, int64_t, int64_t);
  std::vector<uint8_t> (*to)(const std::vector<uint8_t>&, int64_t, int64_t, uint8_t);
  std::vector<uint8_t> (*from)(const std::vector<uint8_t>&, int64_t, int64_t);
};

const Vendor kVendors[] = {
    {"tcgen05", 128, ts::tcgen05ScaleBytes, ts::tcgen05ScaleOffset, ts::toTcgen05ScaleLayout,
     ts::fromTcgen05ScaleLayout},
    {"gfx950", 16, ts::gfx950ScaleBytes, ts::gfx950ScaleOffset, ts::toGfx950ScaleLayout, ts::fromGfx950ScaleLayout},
};

std::vector<uint8_t> randomScales(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  // Never the fill (0), so a padding byte cannot pass for a scale.
  for (uint8_t& b : v) b = uint8_t(1 + rng() % 255);
  return v;
}

}  // namespace

TEST_CASE("tcgen05 scale layout: hand-computed positions", "[scale_layouts]") {
  // One K-tile (4 blocks): inside the first atom.
  CHECK(ts::tcgen05ScaleOffset(0, 0, 4) == 0);
  CHECK(ts::tcgen05ScaleOffset(0, 3, 4) == 3);
  CHECK(ts::tcgen05ScaleOffset(1, 0, 4) == 16);
  CHECK(ts::tcgen05ScaleOffset(32, 0, 4) == 4);
  CHECK(ts::tcgen05ScaleOffset(33, 2, 4) == 1 * 16 + 1 * 4 + 2);
  CHECK(ts::tcgen05ScaleOffset(100, 2, 4) == 4 * 16 + 3 * 4 + 2);
  CHECK(ts::tcgen05ScaleOffset(127, 3, 4) == 511);
  CHECK(ts::tcgen05ScaleOffset(128, 0, 4) == 512);  // the next row tile
  // Six blocks: two K-tiles a row tile, the second one padded to 4 blocks.
  CHECK(ts::tcgen05ScaleOffset(0, 4, 6) == 512);
  CHECK(ts::tcgen05ScaleOffset(100, 2, 6) == 78);
  CHECK(ts::tcgen05ScaleOffset(130, 1, 6) == 2 * 512 + 2 * 16 + 1);
  CHECK(ts::tcgen05ScaleOffset(130, 5, 6) == 3 * 512 + 2 * 16 + 1);
  CHECK(ts::tcgen05ScaleBytes(130, 6) == 4 * 512);
  CHECK(ts::tcgen05ScaleBytes(128, 4) == 512);
  CHECK(ts::tcgen05ScaleBytes(1, 1) == 512);
  CHECK(ts::tcgen05ScaleBytes(0, 0) == 0);

  // The conversion puts each scale where the formula says: rows 33 and 100
  // of a 101 x 3 array, and the padding (row 101 on, block 3) is the fill.
  std::vector<uint8_t> s = randomScales(101 * 3, 1);
  std::vector<uint8_t> t = ts::toTcgen05ScaleLayout(s, 101, 3, 0xAA);
  REQUIRE(t.size() == 512);
  CHECK(t[22] == s[33 * 3 + 2]);
  CHECK(t[78] == s[100 * 3 + 2]);
  CHECK(t[16 * 5 + 0 * 4 + 1] == s[5 * 3 + 1]);
  CHECK(t[3] == 0xAA);                     // row 0, block 3: past K
  CHECK(t[(101 % 32) * 16 + 12] == 0xAA);  // row 101: past the rows
}

TEST_CASE("gfx950 scale layout: hand-computed lanes", "[scale_layouts]") {
  // Lane l holds row l % 16, block l / 16 of its 16-row x 4-block tile.
  CHECK(ts::gfx950ScaleOffset(0, 0, 4) == 0);
  CHECK(ts::gfx950ScaleOffset(1, 0, 4) == 1);
  CHECK(ts::gfx950ScaleOffset(0, 1, 4) == 16);
  CHECK(ts::gfx950ScaleOffset(5, 2, 4) == 37);
  CHECK(ts::gfx950ScaleOffset(15, 3, 4) == 63);
  CHECK(ts::gfx950ScaleOffset(16, 0, 4) == 64);
  // Six blocks: two K-tiles a row tile.
  CHECK(ts::gfx950ScaleOffset(5, 4, 6) == 64 + 5);
  CHECK(ts::gfx950ScaleOffset(17, 5, 6) == 3 * 64 + 16 + 1);
  CHECK(ts::gfx950ScaleBytes(17, 6) == 4 * 64);
  CHECK(ts::gfx950ScaleBytes(16, 4) == 64);

  std::vector<uint8_t> s = randomScales(3 * 2, 2);
  std::vector<uint8_t> t = ts::toGfx950ScaleLayout(s, 3, 2, 0x7F);
  REQUIRE(t.size() == 64);
  for (int l = 0; l < 64; ++l) {
    const int r = l % 16, c = l / 16;
    CAPTURE(l);
    CHECK(t[size_t(l)] == (r < 3 && c < 2 ? s[size_t(r * 2 + c)] : 0x7F));
  }
}

TEST_CASE("scale layouts: every padded position once, and round trips", "[scale_layouts]") {
  const std::pair<int64_t, int64_t> shapes[] = {{128, 4}, {256, 8}, {16, 4},  {32, 12}, {1, 1}, {130, 5},
                                                {37, 3},  {17, 9},  {300, 1}, {0, 0},   {0, 5}, {5, 0}};
  for (const Vendor& v : kVendors) {
    for (auto [rows, blocks] : shapes) {
      CAPTURE(v.name, rows, blocks);
      const size_t bytes = v.bytes(rows, blocks);
      const int64_t paddedRows = (rows + v.tileRows - 1) / v.tileRows * v.tileRows;
      const int64_t paddedBlocks = (blocks + 3) / 4 * 4;
      CHECK(bytes == size_t(paddedRows * paddedBlocks));
      // A bijection of the padded positions onto [0, bytes).
      std::set<size_t> seen;
      for (int64_t r = 0; r < paddedRows; ++r)
        for (int64_t c = 0; c < blocks; ++c) seen.insert(v.offset(r, c, blocks));
      CHECK(seen.size() == size_t(paddedRows * blocks));
      if (!seen.empty()) CHECK(*seen.rbegin() < bytes);

      const std::vector<uint8_t> s = randomScales(size_t(rows * blocks), unsigned(rows * 31 + blocks));
      const std::vector<uint8_t> t = v.to(s, rows, blocks, 0);
      REQUIRE(t.size() == bytes);
      CHECK(v.from(t, rows, blocks) == s);
      // The padding is the fill and nothing else: every byte that is not a
      // scale's is 0 (the scales are never 0).
      size_t fills = 0;
      for (uint8_t b : t) fills += b == 0;
      CHECK(fills == bytes - s.size());
    }
  }
}

TEST_CASE("scale layouts: wrong sizes and positions are usage errors", "[scale_layouts]") {
  std::vector<uint8_t> s(10);
  CHECK_THROWS_AS(ts::toTcgen05ScaleLayout(s, 3, 4), ts::UsageError);
  CHECK_THROWS_AS(ts::toGfx950ScaleLayout(s, 3, 4), ts::UsageError);
  CHECK_THROWS_AS(ts::fromTcgen05ScaleLayout(std::vector<uint8_t>(511), 1, 1), ts::UsageError);
  CHECK_THROWS_AS(ts::fromGfx950ScaleLayout(std::vector<uint8_t>(65), 1, 1), ts::UsageError);
  CHECK_THROWS_AS(ts::tcgen05ScaleBytes(-1, 4), ts::UsageError);
  CHECK_THROWS_AS(ts::tcgen05ScaleOffset(0, 4, 4), ts::UsageError);
  CHECK_THROWS_AS(ts::gfx950ScaleOffset(-1, 0, 4), ts::UsageError);
}

// The model of the L2 traffic of a wave of tiles (tessera/perf/TileTraffic.h):
// small cases counted by hand, and the MI300X row's 8 XCDs, where renumbering
// a grouped GEMM for its chiplets must cut what its L2s fetch.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "tessera/perf/SpeedOfLight.h"
#include "tessera/perf/TileTraffic.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace perf = tessera::perf;

TEST_CASE("tile traffic: a 4 x 4 grid of tiles, 8 programs on 2 chiplets, counted by hand", "[perf][tiles]") {
  // Rows order: programs 0..7 compute tiles 0..7, tile rows 0 and 1.
  ts::Tiles rows(64, 64, 16, 16);
  perf::WaveTraffic w = perf::waveTraffic(rows, 64, 64, 32, 2, 8, 8, 2);
  // Chiplet 0 runs programs 0, 2, 4, 6: tiles (0,0) (0,2) (1,0) (1,2), 2 A
  // panels and 2 B panels; chiplet 1 the odd columns, as many.
  CHECK(w.aPanels == 4);
  CHECK(w.bPanels == 4);
  CHECK(w.aOneL2 == 2);
  CHECK(w.bOneL2 == 4);
  CHECK(w.bytes == (4 * 16 * 32 + 4 * 32 * 16) * 2);
  // Renumbered, chiplet 0 takes tiles 0..3 (row 0, every column), chiplet
  // 1 tiles 4..7: one A panel each but every B panel each. The rows order
  // gains nothing from it.
  ts::Tiles rowsChiplets(64, 64, 16, 16);
  rowsChiplets.chiplets(2);
  w = perf::waveTraffic(rowsChiplets, 64, 64, 32, 2, 8, 8, 2);
  CHECK(w.aPanels == 2);
  CHECK(w.bPanels == 8);
  // Grouped in bands of 2 rows (column-major in a band): tiles 0..7 are
  // columns 0..3 of rows 0 and 1. Dealt round-robin, chiplet 0 gets tiles
  // 0, 2, 4, 6: row 0 only, all four columns; renumbered, tiles 0..3: both
  // rows, columns 0 and 1.
  ts::Tiles grouped(64, 64, 16, 16);
  grouped.grouped(2);
  w = perf::waveTraffic(grouped, 64, 64, 32, 2, 8, 8, 2);
  CHECK(w.aPanels == 2);
  CHECK(w.bPanels == 8);
  grouped.chiplets(2);
  w = perf::waveTraffic(grouped, 64, 64, 32, 2, 8, 8, 2);
  CHECK(w.aPanels == 4);
  CHECK(w.bPanels == 4);
  CHECK(w.aOneL2 == 2);
  CHECK(w.bOneL2 == 4);
}

TEST_CASE("tile traffic: renumbering a grouped GEMM for MI300X's 8 XCDs cuts what the L2s fetch", "[perf][tiles]") {
  const perf::Machine* mi300x = perf::findGpuMachine("mi300x");
  REQUIRE(mi300x);
  CHECK(mi300x->chiplets == 8);
  REQUIRE(perf::findGpuMachine("h100_sxm"));
  CHECK(perf::findGpuMachine("h100_sxm")->chiplets == 1);
  // 8192^3 f16 in 256 x 256 tiles (32 x 32 of them), one program per CU,
  // a persistent grid of 304.
  const int64_t n = 8192, wave = mi300x->units;
  ts::Tiles plain(n, n, 256, 256), renumbered(n, n, 256, 256);
  plain.grouped(8).persistent();
  renumbered.grouped(8).persistent().chiplets(mi300x->chiplets);
  const perf::WaveTraffic a = perf::waveTraffic(plain, n, n, n, 2, wave, wave, mi300x->chiplets);
  const perf::WaveTraffic b = perf::waveTraffic(renumbered, n, n, n, 2, wave, wave, mi300x->chiplets);
  INFO("dealt round-robin: " << a.aPanels << " A + " << a.bPanels << " B panels; renumbered: " << b.aPanels << " A + "
                             << b.bPanels << " B; one L2: " << a.aOneL2 << " A + " << a.bOneL2 << " B");
  // Round-robin, each XCD sees one tile row of each band and every column.
  CHECK(a.aPanels == 16);
  CHECK(a.bPanels == 256);
  CHECK(a.aOneL2 == b.aOneL2);
  CHECK(a.bOneL2 == b.bOneL2);
  CHECK(b.bytes < a.bytes / 2);
  CHECK(b.overfetch() < 2.5);
  CHECK(a.overfetch() > 5);
  // On one L2 (a machine of one chiplet) the renumbering changes nothing.
  CHECK(perf::waveTraffic(plain, n, n, n, 2, wave, wave, 1).bytes ==
        perf::waveTraffic(renumbered, n, n, n, 2, wave, wave, 1).bytes);
  if (std::getenv("TESSERA_TEST_SHOW_TRAFFIC"))
    WARN("round-robin " << a.aPanels << " A + " << a.bPanels << " B panels, " << a.bytes / (1 << 20) << " MiB, x"
                        << a.overfetch() << "; renumbered " << b.aPanels << " A + " << b.bPanels << " B, "
                        << b.bytes / (1 << 20) << " MiB, x" << b.overfetch() << "; one L2 " << a.aOneL2 << " A + "
                        << a.bOneL2 << " B, " << a.bytesOneL2 / (1 << 20) << " MiB");
}

TEST_CASE("tile traffic: bad sizes and ragged schedules are usage errors", "[perf][tiles][errors]") {
  ts::Tiles t(64, 64, 16, 16);
  CHECK_THROWS_AS(perf::waveTraffic(t, 0, 64, 32, 2, 8, 8, 2), ts::UsageError);
  CHECK_THROWS_AS(perf::waveTraffic(t, 64, 64, 32, 2, 8, 8, 0), ts::UsageError);
  CHECK_THROWS_AS(t.coords(16, 4, 4), ts::UsageError);
  CHECK_THROWS_AS(ts::Tiles::chipletProgram(8, 8, 2), ts::UsageError);
}

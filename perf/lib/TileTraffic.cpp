// The first wave's operand panels per L2 (TileTraffic.h): an enumeration of
// the wave's tiles in the numbering the kernel computes (Tiles::coords and
// Tiles::chipletProgram, the host's view of the traced code).
#include "tessera/perf/TileTraffic.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <vector>

#include "tessera/support/Error.h"

namespace tessera::perf {

WaveTraffic waveTraffic(const Tiles& s, int64_t M, int64_t N, int64_t K, int elemBytes, int64_t grid, int64_t wave,
                        int chiplets) {
  if (M < 1 || N < 1 || K < 1 || elemBytes < 1 || grid < 1 || wave < 1 || chiplets < 1)
    throw UsageError(
        fmt::format("waveTraffic: sizes, grid, wave and chiplets must be positive (M {}, N {}, K {}, "
                    "{} bytes, grid {}, wave {}, {} chiplets)",
                    M, N, K, elemBytes, grid, wave, chiplets));
  if (s.isRagged()) throw UsageError("waveTraffic: the model covers dense schedules, not ragged ones");
  const int64_t tm = (M + s.tileM() - 1) / s.tileM(), tn = (N + s.tileN() - 1) / s.tileN();
  const int64_t tiles = tm * tn;
  int64_t renumber = 0;  // chiplets the schedule renumbers for; 0: none
  if (!s.chipletCount().none()) renumber = s.chipletCount().isLiteral() ? s.chipletCount().intValue() : chiplets;
  WaveTraffic w;
  w.chiplets = chiplets;
  w.wave = std::min(wave, grid);
  std::vector<std::set<int64_t>> a(static_cast<size_t>(chiplets)), b(static_cast<size_t>(chiplets));
  std::set<int64_t> a1, b1;
  for (int64_t p = 0; p < w.wave; ++p) {
    const int64_t t = renumber ? Tiles::chipletProgram(p, grid, renumber) : p;
    if (t >= tiles) continue;  // a program past the count computes nothing
    const auto [m, n] = s.coords(t, tm, tn);
    a[static_cast<size_t>(p % chiplets)].insert(m);
    b[static_cast<size_t>(p % chiplets)].insert(n);
    a1.insert(m);
    b1.insert(n);
  }
  for (int c = 0; c < chiplets; ++c) {
    w.aPanels += static_cast<int64_t>(a[static_cast<size_t>(c)].size());
    w.bPanels += static_cast<int64_t>(b[static_cast<size_t>(c)].size());
  }
  w.aOneL2 = static_cast<int64_t>(a1.size());
  w.bOneL2 = static_cast<int64_t>(b1.size());
  const double aBytes = double(s.tileM()) * double(K) * elemBytes, bBytes = double(K) * double(s.tileN()) * elemBytes;
  w.bytes = double(w.aPanels) * aBytes + double(w.bPanels) * bBytes;
  w.bytesOneL2 = double(w.aOneL2) * aBytes + double(w.bOneL2) * bBytes;
  return w;
}

}  // namespace tessera::perf

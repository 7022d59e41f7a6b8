// Which operand panels a wave of output tiles brings into the L2s: the
// model of ts::Tiles' orders and of Tiles::chiplets() on a machine whose L2s
// are private to chiplets (Machines.def's chiplets column; docs/model.md,
// "Tile order and the L2s").
//
// A GEMM tile (m, n) reads A's row panel m (tileM x K) and B's column panel
// n (K x tileN). The programs resident at once (a wave) run tiles that share
// panels; an L2 fetches each panel its programs read once, and the L2s of
// different chiplets fetch it once each. The model counts, for the first
// wave, the distinct panels per L2 summed over the L2s, beside the count
// with one L2 for all, which no order can beat.
#pragma once

#include <cstdint>

#include "tessera/dsl/Tiles.h"

namespace tessera::perf {

struct WaveTraffic {
  int64_t wave = 0;                  // programs in the wave (at most the tiles)
  int chiplets = 1;                  // L2s the programs are dealt to round-robin
  int64_t aPanels = 0, bPanels = 0;  // panels fetched, summed over the L2s
  int64_t aOneL2 = 0, bOneL2 = 0;    // the same with a single L2
  double bytes = 0, bytesOneL2 = 0;  // the panels' bytes

  /// bytes over bytesOneL2: how many times the chiplets fetch what one L2 would.
  double overfetch() const { return bytesOneL2 > 0 ? bytes / bytesOneL2 : 1; }
};

/// The first `wave` programs of a `grid`-program launch of dense schedule
/// `s` over an M x N x K GEMM whose operands take `elemBytes` per element,
/// program p running on L2 p % chiplets. Program p of the wave computes tile
/// chipletProgram(p) where `s` renumbers for chiplets (its count if a
/// literal, else `chiplets`), tile p otherwise: its only tile, or its first
/// of a persistent loop. Bad sizes are a UsageError.
WaveTraffic waveTraffic(const Tiles& s, int64_t M, int64_t N, int64_t K, int elemBytes, int64_t grid, int64_t wave,
                        int chiplets);

}  // namespace tessera::perf

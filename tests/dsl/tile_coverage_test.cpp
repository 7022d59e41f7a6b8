// The tile coverage check (ir/analysis/TileCoverage.h) over kernels traced
// from ts::for_tiles: every dense schedule is accepted, split-K and stream-K
// with their K ranges too, a ragged schedule (tiles from memory) is
// reported as not analysable, and a grouped mapping written by hand with a
// band bug, or a split whose K loops overlap, is rejected naming what is
// wrong and the line.
#include <string>
#include <vector>

#include "dsl_test_util.h"
#include "tessera/ir/analysis/TileCoverage.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;
using tessera::ir::TileCoverage;

namespace {

constexpr int BM = 4, BN = 8;

/// A 2-D copy over the tiles of `schedule` (applied to Tiles(M, N, BM, BN)).
template <class S>
ts::Kernel tileCopy(S schedule) {
  return ts::kernel("tile_copy", {"out", "in", "M", "N", "X"},
                    [=](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int M, ts::Int N, ts::Int X) {
                      ts::Tiles t(M, N, BM, BN);
                      schedule(t, X);
                      ts::for_tiles(t, [&](const ts::Tile& x) {
                        auto rows = ts::expand_dims(x.row0 + ts::arange(BM), 1);
                        auto cols = ts::expand_dims(x.col0 + ts::arange(BN), 0);
                        auto mask = (rows < x.rowEnd) & (cols < x.colEnd);
                        ts::store(out + rows * N + cols, ts::load(in + rows * N + cols, mask, 0.0f), mask);
                      });
                    });
}

/// The finding for `out`, the one output of the kernels here.
TileCoverage outFinding(const ts::Kernel& k) {
  const std::vector<TileCoverage> found = tessera::ir::checkTileCoverage(k.ir());
  REQUIRE(found.size() == 1);
  CHECK(found[0].output == "%out");
  return found[0];
}

}  // namespace

TEST_CASE("tile coverage: every for_tiles schedule stores each tile once", "[dsl][tiles][coverage]") {
  struct Case {
    const char* name;
    void (*apply)(ts::Tiles&, const ts::Int&);
  };
  const Case cases[] = {
      {"rows", [](ts::Tiles& t, const ts::Int&) { t.rows(); }},
      {"columns", [](ts::Tiles& t, const ts::Int&) { t.columns(); }},
      {"grouped(3)", [](ts::Tiles& t, const ts::Int&) { t.grouped(3); }},
      {"snake", [](ts::Tiles& t, const ts::Int&) { t.snake(); }},
      {"grouped(3) reversed", [](ts::Tiles& t, const ts::Int&) { t.grouped(3).reversed(); }},
      {"rows persistent", [](ts::Tiles& t, const ts::Int&) { t.rows().persistent(); }},
      {"grouped(2) persistent", [](ts::Tiles& t, const ts::Int&) { t.grouped(2).persistent(); }},
      {"snake persistent", [](ts::Tiles& t, const ts::Int&) { t.snake().persistent(); }},
      {"grouped(2) chiplets(3)", [](ts::Tiles& t, const ts::Int&) { t.grouped(2).chiplets(3); }},
      {"grouped(2) persistent chiplets(3)",
       [](ts::Tiles& t, const ts::Int&) { t.grouped(2).persistent().chiplets(3); }},
      {"columns persistent chiplets(X)", [](ts::Tiles& t, const ts::Int& x) { t.columns().persistent().chiplets(x); }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const TileCoverage f = outFinding(tileCopy(c.apply));
    INFO(f.text);
    CHECK(f.kind == TileCoverage::Kind::Checked);
    CHECK_THAT(f.text, Contains("every tile stored exactly once") && Contains("%M and %N of 1 to 6 tiles of 4x8"));
  }
}

TEST_CASE("tile coverage: ragged schedules are not analysable, and say why", "[dsl][tiles][coverage]") {
  // The tiles come from the offsets in memory.
  {
    auto k = ts::kernel("ragged", {"out", "offsets", "groups", "N"},
                        [](ts::Ptr<float> out, ts::Ptr<const int32_t> offsets, ts::Int groups, ts::Int N) {
                          ts::Tiles t(0, N, BM, BN);
                          ts::for_tiles(t.ragged(offsets, groups), [&](const ts::Tile& x) {
                            auto rows = ts::expand_dims(x.row0 + ts::arange(BM), 1);
                            auto cols = ts::expand_dims(x.col0 + ts::arange(BN), 0);
                            ts::store(out + rows * N + cols, ts::zeros({BM, BN}, ts::f32),
                                      (rows < x.rowEnd) & (cols < x.colEnd));
                          });
                        });
    const TileCoverage f = outFinding(k);
    CHECK(f.kind == TileCoverage::Kind::NotAnalysable);
    CHECK_THAT(f.text, Contains("not analysable"));
  }
}

TEST_CASE("tile coverage: a hand-written grouped mapping with a band bug is rejected", "[dsl][tiles][coverage]") {
  // Bands of 2 tile rows, column after column, but the last band is taken
  // as 2 rows high even when a single tile row is left: its programs land
  // outside the grid (masked off) and the tiles they owed are never stored.
  constexpr int G = 2;
  auto k = ts::kernel("swizzle", {"out", "M", "N"}, [](ts::Ptr<float> out, ts::Int M, ts::Int N) {
    auto pid = ts::program_id(0);
    auto tm = (M + (BM - 1)) / BM, tn = (N + (BN - 1)) / BN;
    ts::if_else(pid < tm * tn, [&] {
      auto perBand = tn * G;
      auto m = (pid / perBand) * G + (pid % perBand) % G;
      auto n = (pid % perBand) / G;
      auto rows = ts::expand_dims(m * BM + ts::arange(BM), 1);
      auto cols = ts::expand_dims(n * BN + ts::arange(BN), 0);
      ts::store(out + rows * N + cols, ts::zeros({BM, BN}, ts::f32), (rows < M) & (cols < N));
    });
  });
  CHECK_THROWS_AS(tessera::ir::checkTileCoverage(k.ir()), ts::VerifyError);
  CHECK_THROWS_WITH(tessera::ir::checkTileCoverage(k.ir()),
                    Contains("tile_coverage_test.cpp:") &&
                        Contains("error: tile coverage: tile (0, 1) is never stored: no program computes it (%M = 1, "
                                 "%N = 9, 1 x 2 tiles of 4x8, 2 programs); program 1 stores tile (1, 0), masked off"));
}

TEST_CASE("tile coverage: a row per program is another model, not a violation", "[dsl][tiles][coverage]") {
  // Softmax's store: row `pid` at pid * cols, masked by c < cols. Every
  // program stores (the grid is the rows), and its tiles are not the
  // columns its mask bounds: nothing is claimed.
  constexpr int BLOCK = 16;
  auto k = ts::kernel("rows", {"out", "cols"}, [](ts::Ptr<float> out, ts::Int cols) {
    auto c = ts::arange(BLOCK);
    ts::store(out + ts::program_id(0) * cols + c, ts::zeros({BLOCK}, ts::f32), c < cols);
  });
  const TileCoverage f = outFinding(k);
  INFO(f.text);
  CHECK(f.kind == TileCoverage::Kind::NotAnalysable);
  CHECK_THAT(f.text, Contains("not analysable"));
}

namespace {

/// A K-split GEMM-like kernel: each unit runs its K loop [kBegin, kEnd).
ts::Kernel splitGemm(bool streamK, bool persistent) {
  return ts::kernel("split", {"out", "a", "ws", "flags", "M", "N", "K"},
                    [=](ts::Ptr<float> out, ts::Ptr<const float> a, ts::Ptr<float> ws, ts::Ptr<int32_t> flags,
                        ts::Int M, ts::Int N, ts::Int K) {
                      ts::Tiles t(M, N, BM, BN);
                      if (streamK)
                        t.streamK(K, 4);
                      else
                        t.splitK(3, K, 4).persistent(persistent);
                      ts::for_tiles(
                          t.workspace(ws, flags),
                          [&](const ts::Tile& x) {
                            auto rows = ts::expand_dims(x.row0 + ts::arange(BM), 1);
                            return ts::for_range(x.kBegin, x.kEnd, 4, ts::zeros({BM, BN}, ts::f32),
                                                 [&](ts::Int k0, ts::Tensor acc) {
                                                   auto v = ts::load(a + rows * K + k0, rows < x.rowEnd, 0.0f);
                                                   return acc + ts::broadcast_to(v, {BM, BN});
                                                 });
                          },
                          [&](const ts::Tile& x, const ts::Tensor& acc) {
                            auto rows = ts::expand_dims(x.row0 + ts::arange(BM), 1);
                            auto cols = ts::expand_dims(x.col0 + ts::arange(BN), 0);
                            ts::store(out + rows * N + cols, acc, (rows < x.rowEnd) & (cols < x.colEnd));
                          });
                    });
}

}  // namespace

TEST_CASE("tile coverage: split-K and stream-K store each tile once and run each K iteration once",
          "[dsl][tiles][coverage]") {
  for (auto [streamK, persistent] : {std::pair{false, false}, std::pair{false, true}, std::pair{true, true}}) {
    INFO((streamK ? "stream-K" : "split-K(3)") << (persistent ? " persistent" : ""));
    const std::vector<TileCoverage> found = tessera::ir::checkTileCoverage(splitGemm(streamK, persistent).ir());
    REQUIRE(!found.empty());
    const TileCoverage& out = found.front();
    INFO(out.text);
    CHECK(out.output == "%out");
    CHECK(out.kind == TileCoverage::Kind::Checked);
    CHECK_THAT(out.text, Contains("the K loops of each tile's work units cover one range from 0, each iteration once "
                                  "(%K = 1, 13, "));
  }
  // Every unit's K loop running to K: the splits of a tile overlap.
  const ts::Kernel k = splitGemm(false, false);
  std::unique_ptr<tessera::ir::Function> f = tessera::ir::clone(k.ir());
  tessera::ir::Op* loop = nullptr;
  tessera::ir::walk(f->body(), [&](tessera::ir::Op& op) {
    if (!loop && op.code() == tessera::ir::OpCode::For && op.numResults() == 1) loop = &op;
  });
  REQUIRE(loop != nullptr);
  loop->setOperand(1, f->arg(6));  // hi = K
  CHECK_THROWS_WITH(tessera::ir::checkTileCoverage(*f),
                    Contains("tile_coverage_test.cpp:") && Contains("error: tile coverage: K iterations of the tile of "
                                                                    "counter %flags[0] run twice: [0, "));
}

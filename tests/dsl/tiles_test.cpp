// ts::for_tiles (Tiles.h): every order and the ragged schedule computed on
// the CPU paths and three emulated GPUs, against a plain C++ model of the
// numbering; every tile computed exactly once whatever the grid; a GEMM on
// the construct against a double reference; the misuse errors.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../cpu_paths.h"
#include "support.h"
#include "../env_guard.h"
#include "dsl_test_util.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

struct Schedule {
  ts::TileOrder order = ts::TileOrder::Rows;
  int64_t groupM = 1;
  bool persistent = false;
  bool reversed = false;
};

std::string str(const Schedule& s) {
  const char* o[] = {"rows", "columns", "grouped", "snake"};
  return std::string(o[int(s.order)]) +
         (s.order == ts::TileOrder::Grouped ? "(" + std::to_string(s.groupM) + ")" : "") +
         (s.persistent ? " persistent" : "") + (s.reversed ? " reversed" : "");
}

ts::Tiles& apply(ts::Tiles& t, const Schedule& s) {
  switch (s.order) {
    case ts::TileOrder::Rows: t.rows(); break;
    case ts::TileOrder::Columns: t.columns(); break;
    case ts::TileOrder::Grouped: t.grouped(s.groupM); break;
    case ts::TileOrder::Snake: t.snake(); break;
  }
  return t.persistent(s.persistent).reversed(s.reversed);
}

/// The model: tile t of a tm x tn space in the order, written from the
/// order's definition (Tiles.h), not from the DSL code.
std::pair<int64_t, int64_t> model(const Schedule& s, int64_t t, int64_t tm, int64_t tn) {
  if (s.reversed) t = tm * tn - 1 - t;  // the last tile of the order first
  switch (s.order) {
    case ts::TileOrder::Rows: return {t / tn, t % tn};
    case ts::TileOrder::Columns: return {t % tm, t / tm};
    case ts::TileOrder::Snake: {
      const int64_t m = t / tn, r = t % tn;
      return {m, m % 2 ? tn - 1 - r : r};
    }
    case ts::TileOrder::Grouped: {
      // Walk the bands: band b holds tile rows [b G, min((b+1) G, tm)),
      // numbered column after column.
      int64_t first = 0, base = 0;
      for (;;) {
        const int64_t size = std::min(s.groupM, tm - first);
        if (t < base + size * tn) return {first + (t - base) % size, (t - base) / size};
        base += size * tn;
        first += size;
      }
    }
  }
  return {-1, -1};
}

constexpr int kFields = 8;  // index, m, n, group, row0, col0, rowEnd, colEnd

/// Each tile writes its fields at record[index] and its index at
/// cell[group][m][n] (cells sized for the largest group).
ts::Kernel recorder(const Schedule& sch, int64_t BM, int64_t BN, bool ragged) {
  return ts::kernel("tiles", {"record", "cell", "M", "N", "offsets", "groups", "maxTm"},
                    [=](ts::Ptr<int32_t> record, ts::Ptr<int32_t> cell, ts::Int M, ts::Int N,
                        ts::Ptr<const int32_t> offsets, ts::Int groups, ts::Int maxTm) {
                      ts::Tiles t(M, N, BM, BN);
                      if (ragged) t.ragged(offsets, groups);
                      ts::for_tiles(apply(t, sch), [&](const ts::Tile& x) {
                        auto r = record + x.index * kFields;
                        const ts::Tensor f[kFields] = {x.index, x.m, x.n, x.group, x.row0, x.col0, x.rowEnd, x.colEnd};
                        for (int i = 0; i < kFields; ++i) ts::store(r + i, f[i]);
                        auto tn = (N + (BN - 1)) / BN;
                        ts::store(cell + (x.group * maxTm + x.m) * tn + x.n, x.index);
                      });
                    });
}

struct Expected {
  std::vector<int32_t> record;  // kFields per tile
  int64_t tiles = 0, maxTm = 0, tn = 0, groups = 1;
};

Expected expect(const Schedule& s, int64_t M, int64_t N, int64_t BM, int64_t BN, const std::vector<int32_t>* offsets) {
  if (offsets && s.reversed) {
    // Reversed ragged: the forward ragged numbering read backwards (the
    // last group's last tile first), each tile renumbered by its position.
    Schedule forward = s;
    forward.reversed = false;
    Expected e = expect(forward, M, N, BM, BN, offsets), r = e;
    for (int64_t t = 0; t < e.tiles; ++t) {
      std::copy_n(&e.record[size_t((e.tiles - 1 - t) * kFields)], kFields, &r.record[size_t(t * kFields)]);
      r.record[size_t(t * kFields)] = static_cast<int32_t>(t);
    }
    return r;
  }
  Expected e;
  e.tn = (N + BN - 1) / BN;
  std::vector<std::pair<int64_t, int64_t>> groups;  // rows [start, end)
  if (offsets)
    for (size_t g = 0; g + 1 < offsets->size(); ++g) groups.push_back({(*offsets)[g], (*offsets)[g + 1]});
  else
    groups.push_back({0, M});
  e.groups = static_cast<int64_t>(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto [start, end] = groups[g];
    const int64_t tm = (end - start + BM - 1) / BM;
    e.maxTm = std::max(e.maxTm, tm);
    for (int64_t local = 0; local < tm * e.tn; ++local) {
      const auto [m, n] = model(s, local, tm, e.tn);
      const int64_t f[kFields] = {e.tiles, m, n, offsets ? int64_t(g) : 0, start + m * BM, n * BN, end, N};
      for (int64_t v : f) e.record.push_back(static_cast<int32_t>(v));
      ++e.tiles;
    }
  }
  return e;
}

/// Runs the recorder with `programs` programs and checks every field of
/// every tile and that each cell was written by exactly its tile.
void check(ts::Device& dev, const Schedule& s, int64_t M, int64_t N, int64_t BM, int64_t BN,
           const std::vector<int32_t>* offsets, int64_t programs) {
  const Expected e = expect(s, M, N, BM, BN, offsets);
  INFO(dev.name() << ": " << str(s) << ", " << M << " x " << N << " in " << BM << " x " << BN << " tiles"
                  << (offsets ? ", ragged" : "") << ", " << programs << " programs, " << e.tiles << " tiles");
  ts::CompiledKernel k = ts::compile(recorder(s, BM, BN, offsets != nullptr), dev);
  const size_t cells = static_cast<size_t>(std::max<int64_t>(1, e.groups * e.maxTm * e.tn));
  ts::Buffer record = dev.upload(ts::i32, std::vector<int32_t>(static_cast<size_t>(e.tiles + 1) * kFields, -7));
  ts::Buffer cell = dev.upload(ts::i32, std::vector<int32_t>(cells, -1));
  ts::Buffer off = dev.upload(ts::i32, offsets ? *offsets : std::vector<int32_t>{0});
  k.launch(ts::Dim3(static_cast<uint32_t>(programs)), record, cell, int32_t(M), int32_t(N), off, int32_t(e.groups),
           int32_t(e.maxTm));
  std::vector<int32_t> got = record.read<int32_t>();
  got.resize(static_cast<size_t>(e.tiles) * kFields + kFields);
  // The slot past the last tile stays untouched: no tile numbered `tiles`.
  CHECK(std::all_of(got.end() - kFields, got.end(), [](int32_t v) { return v == -7; }));
  got.resize(static_cast<size_t>(e.tiles) * kFields);
  CHECK(got == e.record);
  // Each cell holds its tile's number; cells of no tile stay -1.
  std::vector<int32_t> want(cells, -1);
  for (int64_t t = 0; t < e.tiles; ++t) {
    const int32_t* r = &e.record[static_cast<size_t>(t * kFields)];
    want[static_cast<size_t>((r[3] * e.maxTm + r[1]) * e.tn + r[2])] = static_cast<int32_t>(t);
  }
  CHECK(cell.read<int32_t>() == want);
}

const Schedule kSchedules[] = {
    {ts::TileOrder::Rows, 1, false},
    {ts::TileOrder::Columns, 1, false},
    {ts::TileOrder::Grouped, 3, false},
    {ts::TileOrder::Snake, 1, false},
    {ts::TileOrder::Rows, 1, true},
    {ts::TileOrder::Grouped, 2, true},
    {ts::TileOrder::Columns, 1, true},
    {ts::TileOrder::Snake, 1, true},
    // Longest first for causal attention: the last tile rows first.
    {ts::TileOrder::Rows, 1, true, true},
    {ts::TileOrder::Grouped, 3, false, true},
};

}  // namespace

TEST_CASE("for_tiles: the models of the orders are bijections", "[dsl][tiles]") {
  // The test's own model first: each order numbers every tile once.
  for (const Schedule& s : kSchedules)
    for (int64_t tm : {1, 2, 5, 7})
      for (int64_t tn : {1, 3, 4}) {
        std::vector<int> seen(static_cast<size_t>(tm * tn), 0);
        for (int64_t t = 0; t < tm * tn; ++t) {
          const auto [m, n] = model(s, t, tm, tn);
          REQUIRE((m >= 0 && m < tm && n >= 0 && n < tn));
          ++seen[static_cast<size_t>(m * tn + n)];
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
      }
}

TEST_CASE("for_tiles: every order, dense, on the CPU and the emulated GPUs", "[dsl][tiles]") {
  for (ts::Device dev : testpaths::cpuPathsAndEmulators())
    for (const Schedule& s : kSchedules) {
      // Ragged edges (37 x 29 in 8 x 8: 5 x 4 tiles), a single tile, and
      // an empty space.
      for (auto [M, N] : {std::pair<int64_t, int64_t>{37, 29}, {3, 5}, {0, 9}}) {
        const int64_t tiles = ts::Tiles::count(M, N, 8, 8);
        if (s.persistent)
          for (int64_t programs : {int64_t{1}, int64_t{3}, tiles + 2}) check(dev, s, M, N, 8, 8, nullptr, programs);
        else
          check(dev, s, M, N, 8, 8, nullptr, tiles + 2);  // programs past the count do nothing
      }
    }
}

TEST_CASE("for_tiles: chiplets(X) gives each chiplet's programs consecutive tiles, every tile once", "[dsl][tiles]") {
  // Each tile counts its visits and records its program; the schedule is
  // grouped, 6 x 5 tiles of 4 x 4, persistent or one tile per program.
  const int64_t M = 23, N = 20, B = 4, tiles = ts::Tiles::count(M, N, B, B);
  auto kernel = [&](bool persistent) {
    return ts::kernel("owners", [=](ts::Ptr<int32_t> owner, ts::Ptr<int32_t> visits, ts::Int chiplets) {
      ts::Tiles t(M, N, B, B);
      t.grouped(2).persistent(persistent).chiplets(chiplets);
      ts::for_tiles(t, [&](const ts::Tile& x) {
        ts::store(owner + x.index, ts::program_id(0));
        ts::atomic_add(visits + x.index, 1);
      });
    });
  };
  for (ts::Device dev : testpaths::cpuPathsAndEmulators())
    for (bool persistent : {true, false}) {
      ts::CompiledKernel k = ts::compile(kernel(persistent), dev);
      for (int32_t X : {1, 3, 8, 0})  // 0 counts as 1
        for (int64_t P : persistent ? std::vector<int64_t>{1, 5, 8, 13} : std::vector<int64_t>{tiles, tiles + 7}) {
          INFO(dev.name() << (persistent ? ", persistent" : "") << ", " << X << " chiplets, " << P << " programs");
          ts::Buffer owner = dev.upload(ts::i32, std::vector<int32_t>(size_t(tiles), -1));
          ts::Buffer visits = dev.upload(ts::i32, std::vector<int32_t>(size_t(tiles), 0));
          k.launch(ts::Dim3(uint32_t(P)), owner, visits, X);
          CHECK(visits.read<int32_t>() == std::vector<int32_t>(size_t(tiles), 1));
          // The first min(P, tiles) tiles go to distinct programs, dealt
          // chiplet by chiplet (program p runs on chiplet p % X as its
          // (p / X)-th): chiplet 0's programs in order, then chiplet 1's, ...
          const std::vector<int32_t> o = owner.read<int32_t>();
          const int32_t x = std::max(X, 1);
          for (int64_t t = 1; t < std::min(P, tiles); ++t) {
            INFO("tile " << t << ": program " << o[size_t(t)] << ", tile " << t - 1 << ": program "
                         << o[size_t(t - 1)]);
            const int32_t c = o[size_t(t)] % x, prev = o[size_t(t - 1)] % x;
            CHECK((c == prev ? o[size_t(t)] / x == o[size_t(t - 1)] / x + 1 : c == prev + 1 && o[size_t(t)] / x == 0));
          }
          // A persistent program's later tiles follow its first by P.
          if (persistent)
            for (int64_t t = P; t < tiles; ++t) CHECK(o[size_t(t)] == o[size_t(t - P)]);
        }
    }
}

TEST_CASE("for_tiles: ragged groups, empty ones included, have no tile for an empty group", "[dsl][tiles]") {
  // Groups of 5, 0, 7, 0, 1 and 16 rows; the third ends mid-tile. One
  // tile in all (a group of 3 rows between empty ones), and no tile.
  const std::vector<int32_t> offsets = {0, 5, 5, 12, 12, 13, 29};
  const std::vector<int32_t> single = {2, 2, 5, 5};
  const std::vector<int32_t> allEmpty = {4, 4, 4};
  for (ts::Device dev : testpaths::cpuPathsAndEmulators())
    for (const Schedule& s :
         {kSchedules[0], kSchedules[2], kSchedules[4], kSchedules[5], kSchedules[8], kSchedules[9]}) {
      const int64_t bound = ts::Tiles::raggedBound(29, 6, 10, 4, 4);
      if (s.persistent) {
        for (int64_t programs : {int64_t{1}, int64_t{5}}) check(dev, s, 0, 10, 4, 4, &offsets, programs);
        check(dev, s, 0, 3, 4, 4, &single, 2);
        check(dev, s, 0, 10, 4, 4, &allEmpty, 2);
      } else {
        check(dev, s, 0, 10, 4, 4, &offsets, bound);
        check(dev, s, 0, 3, 4, 4, &single, ts::Tiles::raggedBound(3, 3, 3, 4, 4));
        check(dev, s, 0, 10, 4, 4, &allEmpty, 1);
      }
    }
}

TEST_CASE(
    "for_tiles: reversed() hands out a ragged schedule's tiles last group first, longest first when the groups "
    "grow",
    "[dsl][tiles]") {
  // Groups ordered shortest to longest (0, 3, 0, 6, 9 and 17 rows; 4 x 4
  // tiles, 2 tile columns): reversed, tile 0 is the last tile row of the
  // longest group, and the groups come in order of decreasing length.
  const std::vector<int32_t> offsets = {0, 0, 3, 3, 9, 18, 35};
  const std::vector<int64_t> tilesOf = {0, 2, 0, 4, 6, 10};  // ceil(rows / 4) x 2
  const int64_t tn = 2, total = 22;
  for (const Schedule& s : {kSchedules[8], kSchedules[9]}) {
    INFO(str(s));
    ts::Tiles host(0, 8, 4, 4);
    apply(host, s);
    // The host's coordinates: every tile once, groups by decreasing
    // length, and within a group its tile rows last first.
    std::vector<int> seen(6 * 5 * 2, 0);
    int64_t prevGroup = 6, prevRows = 1 << 30;
    for (int64_t t = 0; t < total; ++t) {
      const auto [g, m, n] = host.raggedCoords(t, offsets, tn);
      REQUIRE((g >= 0 && g < 6 && m >= 0 && m * tn < tilesOf[size_t(g)] && n >= 0 && n < tn));
      ++seen[size_t((g * 5 + m) * 2 + n)];
      const int64_t rows = offsets[size_t(g + 1)] - offsets[size_t(g)];
      CHECK(g <= prevGroup);
      CHECK(rows <= prevRows);
      prevGroup = g;
      prevRows = rows;
    }
    CHECK(std::accumulate(seen.begin(), seen.end(), 0) == total);
    CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c <= 1; }));
    CHECK(host.raggedCoords(0, offsets, tn) == std::tuple<int64_t, int64_t, int64_t>{5, 4, 1});  // both orders
    CHECK(std::get<0>(host.raggedCoords(total - 1, offsets, tn)) == 1);  // the shortest non-empty group last
    CHECK_THROWS_AS(host.raggedCoords(total, offsets, tn), ts::UsageError);
    // The device agrees with the host, field by field, on every target.
    for (ts::Device dev : testpaths::cpuPathsAndEmulators()) {
      const Expected e = expect(s, 0, 8, 4, 4, &offsets);
      REQUIRE(e.tiles == total);
      for (int64_t t = 0; t < total; ++t) {
        const auto [g, m, n] = host.raggedCoords(t, offsets, tn);
        const int32_t* r = &e.record[size_t(t * kFields)];
        CHECK(std::tuple<int64_t, int64_t, int64_t>{r[3], r[1], r[2]} == std::tuple{g, m, n});
      }
      check(dev, s, 0, 8, 4, 4, &offsets, s.persistent ? 3 : ts::Tiles::raggedBound(35, 6, 8, 4, 4));
    }
  }
  // Forward, the host follows the groups in order.
  ts::Tiles forward(0, 8, 4, 4);
  CHECK(std::get<0>(forward.raggedCoords(0, offsets, tn)) == 1);
  CHECK(forward.raggedCoords(total - 1, offsets, tn) == std::tuple<int64_t, int64_t, int64_t>{5, 4, 1});
}

namespace {

constexpr int kGemmM = 53, kGemmN = 37, kGemmK = 29;

/// C = A @ B in f32 over grouped persistent tiles of 16 x 16.
ts::Kernel tilesGemm() {
  constexpr int BM = 16, BN = 16, BK = 8;
  return ts::kernel("tiles_gemm", [](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b, ts::Int M,
                                     ts::Int N, ts::Int K) {
    ts::for_tiles(ts::Tiles(M, N, BM, BN).grouped(2).persistent(), [&](const ts::Tile& t) {
      auto rows = ts::expand_dims(t.row0 + ts::arange(BM), 1), cols = ts::expand_dims(t.col0 + ts::arange(BN), 0);
      auto rk = ts::arange(BK);
      auto acc = ts::for_range(0, K, BK, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
        auto ka = ts::expand_dims(k0 + rk, 0), kb = ts::expand_dims(k0 + rk, 1);
        auto x = ts::load(a + rows * K + ka, (rows < t.rowEnd) & (ka < K), 0.0f);
        auto y = ts::load(b + kb * N + cols, (kb < K) & (cols < t.colEnd), 0.0f);
        return ts::dot(x, y, acc);
      });
      ts::store(c + rows * N + cols, acc, (rows < t.rowEnd) & (cols < t.colEnd));
    });
  });
}

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<float> runGemm(const ts::CompiledKernel& k, ts::Device& dev, const std::vector<float>& A,
                           const std::vector<float>& B, uint32_t programs, unsigned threads) {
  ts::Buffer c = dev.upload(ts::f32, std::vector<float>(kGemmM * kGemmN, NAN));
  ts::LaunchOptions o;
  o.threads = threads;
  k.launchWith(ts::Dim3(programs), {c, dev.upload(ts::f32, A), dev.upload(ts::f32, B), kGemmM, kGemmN, kGemmK}, o);
  return c.read<float>();
}

}  // namespace

TEST_CASE("for_tiles: a GEMM over grouped persistent tiles matches a double reference", "[dsl][tiles]") {
  const int M = kGemmM, N = kGemmN, K = kGemmK;
  const std::vector<float> A = randomFloats(M * K, 7), B = randomFloats(K * N, 8);
  for (ts::Device dev : testpaths::cpuPathsAndEmulators()) {
    INFO(dev.name());
    ts::CompiledKernel k = ts::compile(tilesGemm(), dev);
    for (uint32_t programs : {1u, 5u}) {
      std::vector<float> got = runGemm(k, dev, A, B, programs, 0);
      int bad = 0;
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double want = 0;
          for (int q = 0; q < K; ++q) want += double(A[i * K + q]) * B[q * N + j];
          if (!(std::abs(got[i * N + j] - want) <= 1e-4 * (1 + std::abs(want))) && bad++ < 3)
            UNSCOPED_INFO("C[" << i << "][" << j << "] = " << got[i * N + j] << ", want " << want);
        }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("for_tiles: a persistent pipelined f16 GEMM on the emulated GPUs, several tiles per program",
          "[dsl][tiles][emu]") {
  // Each program runs the pipelined K loop (async copies, slots, barriers)
  // once per tile: the next tile must find every slot and barrier as the
  // first did (the emulator reports races and hangs). Integer inputs: the
  // sums are exact, so the results must equal the reference exactly.
  ts::Kernel k =
      dsltest::pipelinedTilesGemm<32, 32, 16>("tiles_gemm_f16", [](ts::Tiles& t) { t.grouped(2).persistent(); });
  const int M = 70, N = 45, K = 40;  // 3 x 2 tiles, ragged in M, N and K
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> u(-3, 3);
  std::vector<float> A(M * K), B(K * N);
  for (float& v : A) v = float(u(rng));
  for (float& v : B) v = float(u(rng));
  const dsltest::ExactHalfGemm g(M, N, K, A, B);
  for (const char* target : {"nvptx:sm_80", "nvptx:sm_90a", "amdgpu:gfx942", "amdgpu:gfx1100"}) {
    INFO(target);
    ts::Device dev = ts::Device::emulator(target);
    ts::CompiledKernel ck = ts::compile(k, dev);
    for (uint32_t programs : {1u, 4u}) {
      INFO(programs << " programs");
      CHECK(g.run(ck, dev, programs) == g.want);
    }
  }
}

TEST_CASE("deterministic: bitwise-identical results across grids and threads, float atomic adds refused",
          "[dsl][tiles][deterministic]") {
  const std::vector<float> A = randomFloats(kGemmM * kGemmK, 9), B = randomFloats(kGemmK * kGemmN, 10);
  ts::CompileOptions det;
  det.deterministic = true;
  for (ts::Device dev : testpaths::cpuPathsAndEmulators()) {
    INFO(dev.name());
    ts::CompiledKernel k = ts::compile(tilesGemm(), dev, det);
    const std::vector<float> first = runGemm(k, dev, A, B, 1, 1);
    for (uint32_t programs : {2u, 3u, 7u, 40u})
      for (unsigned threads : {1u, 2u}) {
        INFO(programs << " programs, " << threads << " threads");
        const std::vector<float> again = runGemm(k, dev, A, B, programs, threads);
        CHECK(std::memcmp(again.data(), first.data(), first.size() * sizeof(float)) == 0);
      }
  }
  int line = 0;
  auto atomics = [&](bool floatAdd) {
    return ts::kernel("atomics", [&, floatAdd](ts::Ptr<float> f, ts::Ptr<int32_t> i) {
      auto r = ts::arange(8);
      ts::atomic_max(f + r, 1.0f);
      ts::atomic_add(i + r, 1);
      line = __LINE__ + 1;
      if (floatAdd) ts::atomic_add(f + r, 1.0f);
    });
  };
  ts::Device cpu = ts::Device::cpu();
  CHECK_NOTHROW(ts::compile(atomics(false), cpu, det));
  CHECK_NOTHROW(ts::compile(atomics(true), cpu));
  const std::string where = std::string(__FILE__) + ":" + std::to_string(line) + ":";
  CHECK_THROWS_MATCHES(ts::compile(atomics(true), cpu, det), ts::CompileError,
                       Catch::Matchers::Predicate<ts::CompileError>([&](const ts::CompileError& e) {
                         const std::string m = e.what();
                         return m.find(where) == 0 &&
                                m.find("atomic_add on f32 is refused under CompileOptions::deterministic") !=
                                    std::string::npos;
                       }));
  {
    ts::testing::EnvGuard on("TESSERA_DETERMINISTIC", "1");
    CHECK_THROWS_AS(ts::compile(atomics(true), cpu), ts::CompileError);
    CHECK_THROWS_AS(ts::compile(atomics(true), ts::Device::emulator("amdgpu:gfx942")), ts::CompileError);
  }
}

TEST_CASE("for_tiles misuse", "[dsl][tiles][errors]") {
  int line = 0;
  SECTION("an empty tile") {
    std::string msg = dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
      line = __LINE__ + 1;
      ts::Tiles t(n, n, 0, 16);
    });
    CHECK_THAT(msg, StartsWith(dsltest::at(__FILE__, line)));
    CHECK_THAT(msg, Contains("the tile must be at least 1 x 1 elements, got 0 x 16"));
  }
  SECTION("a band of no rows") {
    std::string msg = dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
      ts::Tiles t(n, n, 16, 16);
      line = __LINE__ + 1;
      t.grouped(0);
    });
    CHECK_THAT(msg, StartsWith(dsltest::at(__FILE__, line)));
    CHECK_THAT(msg, Contains("Tiles::grouped: the band must be at least 1 tile row, got 0"));
  }
  SECTION("offsets that are not i32") {
    std::string msg = dsltest::traceError([&](ts::Ptr<const float> off, ts::Int n) {
      ts::Tiles t(n, n, 16, 16);
      line = __LINE__ + 1;
      t.ragged(off, 4);
    });
    CHECK_THAT(msg, StartsWith(dsltest::at(__FILE__, line)));
    CHECK_THAT(msg, Contains("the offsets must be a pointer to i32"));
  }
  SECTION("no chiplets") {
    std::string msg = dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
      ts::Tiles t(n, n, 16, 16);
      line = __LINE__ + 1;
      t.chiplets(0);
    });
    CHECK_THAT(msg, StartsWith(dsltest::at(__FILE__, line)));
    CHECK_THAT(msg, Contains("Tiles::chiplets: the chiplet count must be an integer from 1 to 1024, got"));
  }
  SECTION("a float extent") {
    std::string msg = dsltest::traceError([&](ts::Ptr<float>, ts::Float x) {
      line = __LINE__ + 1;
      ts::for_tiles(ts::Tiles(x, 4, 16, 16), [](const ts::Tile&) {});
    });
    CHECK_THAT(msg, StartsWith(dsltest::at(__FILE__, line)));
    CHECK_THAT(msg, Contains("for_tiles: M must be an integer scalar"));
  }
}

// ts::for_tiles over K-split schedules (Tiles::splitK, Tiles::streamK): a
// GEMM on each against a plain C++ reference on the CPU paths and three
// emulated GPUs, over tile-multiple and ragged shapes, a single tile, K
// shorter than the splits and grids of several sizes; the fix-up's flags
// left zero by every launch; bitwise-identical results across grids and
// threads under deterministic mode; a pipelined f16 body on the emulated
// GPUs; ragged schedules; the misuse errors.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../cpu_paths.h"
#include "support.h"
#include "dsl_test_util.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

constexpr int BM = 8, BN = 8, BK = 4;

/// splits 0: stream-K; otherwise split-K with that many splits.
struct Split {
  int64_t splits = 0;
  bool persistent = false;
  int chiplets = 0;  // Tiles::chiplets(n) where n > 0
  bool stream() const { return splits == 0; }
};

std::string str(const Split& s) {
  return (s.stream() ? std::string("stream-K")
                     : "split-K(" + std::to_string(s.splits) + ")" + (s.persistent ? " persistent" : "")) +
         (s.chiplets ? " on " + std::to_string(s.chiplets) + " chiplets" : "");
}

/// C = A @ B (f32) over grouped 8 x 8 tiles, each unit's K range in steps
/// of 4 (the range may end mid-step at K: the loads mask k < t.kEnd).
ts::Kernel splitGemm(const Split& sp) {
  return ts::kernel("split_gemm", [=](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b,
                                      ts::Ptr<float> ws, ts::Ptr<int32_t> flags, ts::Int M, ts::Int N, ts::Int K) {
    ts::Tiles tiles(M, N, BM, BN);
    tiles.grouped(2);
    if (sp.stream())
      tiles.streamK(K, BK);
    else
      tiles.splitK(sp.splits, K, BK).persistent(sp.persistent);
    tiles.workspace(ws, flags);
    if (sp.chiplets) tiles.chiplets(sp.chiplets);
    ts::for_tiles(
        tiles,
        [&](const ts::Tile& t) {
          auto rows = ts::expand_dims(t.row0 + ts::arange(BM), 1), cols = ts::expand_dims(t.col0 + ts::arange(BN), 0);
          auto rk = ts::arange(BK);
          return ts::for_range(t.kBegin, t.kEnd, BK, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
            auto ka = ts::expand_dims(k0 + rk, 0), kb = ts::expand_dims(k0 + rk, 1);
            auto x = ts::load(a + rows * K + ka, (rows < t.rowEnd) & (ka < t.kEnd), 0.0f);
            auto y = ts::load(b + kb * N + cols, (kb < t.kEnd) & (cols < t.colEnd), 0.0f);
            return ts::dot(x, y, acc);
          });
        },
        [&](const ts::Tile& t, const ts::Tensor& acc) {
          auto rows = ts::expand_dims(t.row0 + ts::arange(BM), 1), cols = ts::expand_dims(t.col0 + ts::arange(BN), 0);
          ts::store(c + rows * N + cols, acc, (rows < t.rowEnd) & (cols < t.colEnd));
        });
  });
}

struct Problem {
  int M, N, K;
  std::vector<float> A, B;
  std::vector<double> want;  // the double reference
};

/// Integer inputs in [-3, 3] (every partial sum exact in f32: the result
/// must equal the reference exactly, whatever the order of the adds), or
/// uniform floats in [-1, 1).
Problem problem(int M, int N, int K, bool integers, unsigned seed) {
  Problem p{M, N, K, std::vector<float>(size_t(M) * K), std::vector<float>(size_t(K) * N), {}};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> ui(-3, 3);
  std::uniform_real_distribution<float> uf(-1, 1);
  for (auto* v : {&p.A, &p.B})
    for (float& x : *v) x = integers ? float(ui(rng)) : uf(rng);
  p.want.assign(size_t(M) * N, 0.0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int q = 0; q < K; ++q) p.want[size_t(i) * N + j] += double(p.A[size_t(i) * K + q]) * p.B[size_t(q) * N + j];
  return p;
}

int64_t tilesOf(const Problem& p) { return ts::Tiles::count(p.M, p.N, BM, BN); }

/// The work units a split-K launch needs without persistent().
int64_t unitsOf(const Problem& p, const Split& s) { return tilesOf(p) * s.splits; }

/// Runs the GEMM with workspace and flags of exactly the documented sizes
/// (the emulator and a checked launch catch an access past them) and
/// checks that the launch left every flag zero.
std::vector<float> run(const ts::CompiledKernel& k, ts::Device& dev, const Problem& p, const Split& s,
                       uint32_t programs, unsigned threads, bool checked = false) {
  const int64_t ws = s.stream() ? ts::Tiles::streamKWorkspace(programs, BM, BN)
                                : ts::Tiles::splitKWorkspace(tilesOf(p), s.splits, BM, BN);
  ts::Buffer c = dev.upload(ts::f32, std::vector<float>(size_t(p.M) * p.N, NAN));
  ts::Buffer flags = dev.upload(ts::i32, std::vector<int32_t>(size_t(std::max<int64_t>(tilesOf(p), 1)), 0));
  ts::Buffer work = dev.upload(ts::f32, std::vector<float>(size_t(std::max<int64_t>(ws, 1)), NAN));
  ts::LaunchOptions o;
  o.threads = threads;
  o.checkBounds = checked;
  k.launchWith(ts::Dim3(programs), {c, dev.upload(ts::f32, p.A), dev.upload(ts::f32, p.B), work, flags, p.M, p.N, p.K},
               o);
  const std::vector<int32_t> left = flags.read<int32_t>();
  CHECK(std::all_of(left.begin(), left.end(), [](int32_t f) { return f == 0; }));
  return c.read<float>();
}

/// Elements off the reference by more than `tol` (relative to 1 + |want|);
/// the first few are reported.
int mismatches(const std::vector<float>& got, const Problem& p, double tol) {
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - p.want[i]) <= tol * (1 + std::abs(p.want[i]))) && bad++ < 3)
      UNSCOPED_INFO("C[" << i / p.N << "][" << i % p.N << "] = " << got[i] << ", want " << p.want[i]);
  return bad;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The grids to try: for split-K without persistent() the unit count (and
/// more: programs past it do nothing), otherwise machines of several sizes,
/// one with more programs than the problem has work.
std::vector<uint32_t> grids(const Problem& p, const Split& s, bool few) {
  const int64_t units = s.stream() ? tilesOf(p) * std::max(1, (p.K + BK - 1) / BK) : unitsOf(p, s);
  if (!s.stream() && !s.persistent) return {uint32_t(units), uint32_t(units + 2)};
  if (few) return {1, uint32_t(units + 3)};
  return {1, 2, 3, 5, uint32_t(units + 3)};
}

const Split kSplits[] = {{3, false}, {3, true}, {0, false}};
// The same with the programs renumbered for 3 chiplets: still every unit once.
const Split kChipletSplits[] = {{3, true, 3}, {0, false, 3}};

}  // namespace

TEST_CASE("for_tiles split-K and stream-K: a GEMM equals the reference exactly on integer inputs",
          "[dsl][tiles][splitk]") {
  // 19 x 13 x 37: 3 x 2 tiles, ragged in M, N and K; 16 x 16 x 32: tile
  // and K-step multiples; 5 x 7 x 9: a single tile; 12 x 9 x 3: K shorter
  // than one step, so all but one split of each tile is empty; 9 x 9 x 0:
  // no K at all (C = 0).
  const std::vector<Problem> problems = {problem(19, 13, 37, true, 1), problem(16, 16, 32, true, 2),
                                         problem(5, 7, 9, true, 3), problem(12, 9, 3, true, 4),
                                         problem(9, 9, 0, true, 5)};
  for (ts::Device dev : testpaths::cpuPathsAndEmulators()) {
    const bool emulated = dev.kind() == ts::rt::DeviceKind::Emulator;
    std::vector<Split> splits(std::begin(kSplits), std::end(kSplits));
    splits.insert(splits.end(), std::begin(kChipletSplits), std::end(kChipletSplits));
    for (const Split& s : splits) {
      ts::CompiledKernel k = ts::compile(splitGemm(s), dev);
      for (size_t i = 0; i < problems.size(); ++i) {
        // The emulator is slow: the ragged shape and the short K there.
        if (emulated && i != 0 && i != 3) continue;
        const Problem& p = problems[i];
        for (uint32_t programs : grids(p, s, emulated)) {
          INFO(dev.name() << ", " << str(s) << ", " << p.M << " x " << p.N << " x " << p.K << ", " << programs
                          << " programs");
          CHECK(mismatches(run(k, dev, p, s, programs, 0), p, 0.0) == 0);
        }
      }
    }
  }
}

TEST_CASE("for_tiles split-K and stream-K: checked launches stay inside the documented workspace",
          "[dsl][tiles][splitk]") {
  const Problem p = problem(19, 13, 37, true, 6);
  ts::Device cpu = ts::Device::cpu();
  for (const Split& s : kSplits) {
    INFO(str(s));
    ts::CompiledKernel k = ts::compile(splitGemm(s), cpu);
    for (uint32_t programs : grids(p, s, true)) CHECK(mismatches(run(k, cpu, p, s, programs, 2, true), p, 0.0) == 0);
  }
  // Half the split-K workspace: the checked launch names the fix-up's
  // store, at the for_tiles line of splitGemm, instead of writing past it.
  const Split s = kSplits[0];
  ts::CompiledKernel k = ts::compile(splitGemm(s), cpu);
  ts::Buffer work = cpu.alloc(ts::f32, size_t(ts::Tiles::splitKWorkspace(tilesOf(p), s.splits, BM, BN) / 2));
  ts::LaunchOptions o;
  o.checkBounds = true;
  std::string msg;
  try {
    k.launchWith(ts::Dim3(uint32_t(unitsOf(p, s))),
                 {cpu.alloc(ts::f32, size_t(p.M * p.N)), cpu.upload(ts::f32, p.A), cpu.upload(ts::f32, p.B), work,
                  cpu.upload(ts::i32, std::vector<int32_t>(size_t(tilesOf(p)), 0)), p.M, p.N, p.K},
                 o);
  } catch (const ts::LaunchError& e) {
    msg = e.what();
  }
  CHECK_THAT(msg, Contains("out-of-bounds access by 'store @ "));
  CHECK_THAT(msg, Contains("tiles_split_test.cpp:"));
}

TEST_CASE("for_tiles split-K and stream-K: bitwise identical across grids and threads under deterministic mode",
          "[dsl][tiles][splitk][deterministic]") {
  // Random floats: the order of the adds shows in the bits. Split-K's K
  // boundaries do not depend on the grid, so every grid, persistent or
  // not, gives the same bits; stream-K's shares do, so its bits are
  // checked per grid, across threads and repeated launches.
  const Problem p = problem(19, 13, 37, false, 7);
  ts::CompileOptions det;
  det.deterministic = true;
  for (ts::Device dev : testpaths::cpuPathsAndEmulators()) {
    const bool emulated = dev.kind() == ts::rt::DeviceKind::Emulator;
    INFO(dev.name());
    ts::CompiledKernel split = ts::compile(splitGemm(kSplits[0]), dev, det);
    ts::CompiledKernel persistent = ts::compile(splitGemm(kSplits[1]), dev, det);
    const std::vector<float> first = run(split, dev, p, kSplits[0], uint32_t(unitsOf(p, kSplits[0])), 1);
    CHECK(mismatches(first, p, 1e-5) == 0);
    for (unsigned threads : {1u, 2u}) {
      INFO(threads << " threads");
      CHECK(sameBits(run(split, dev, p, kSplits[0], uint32_t(unitsOf(p, kSplits[0]) + 2), threads), first));
      for (uint32_t programs : grids(p, kSplits[1], emulated)) {
        INFO(programs << " programs");
        CHECK(sameBits(run(persistent, dev, p, kSplits[1], programs, threads), first));
      }
    }
    ts::CompiledKernel stream = ts::compile(splitGemm(kSplits[2]), dev, det);
    for (uint32_t programs : emulated ? std::vector<uint32_t>{5} : std::vector<uint32_t>{2, 5, 7}) {
      INFO("stream-K, " << programs << " programs");
      const std::vector<float> once = run(stream, dev, p, kSplits[2], programs, 1);
      CHECK(mismatches(once, p, 1e-5) == 0);
      CHECK(sameBits(run(stream, dev, p, kSplits[2], programs, 2), once));
      if (!emulated) CHECK(sameBits(run(stream, dev, p, kSplits[2], programs, 2), once));
    }
  }
}

TEST_CASE("for_tiles split-K and stream-K: a pipelined f16 GEMM on the emulated GPUs", "[dsl][tiles][splitk][emu]") {
  // The GPU form of the body: a 3-stage pipelined K loop through shared
  // memory (async copies, slots, barriers), restarted for every unit a
  // program runs, each unit then storing, counting in and perhaps joining
  // its tile. Integer inputs: the result must equal the reference exactly.
  constexpr int TM = 32, TN = 32, TK = 16;
  auto gemm = [](bool stream) {
    return ts::kernel("split_gemm_f16", [=](ts::Ptr<float> c, ts::Ptr<const ts::half> a, ts::Ptr<const ts::half> b,
                                            ts::Ptr<float> ws, ts::Ptr<int32_t> flags, ts::Int M, ts::Int N,
                                            ts::Int K) {
      auto sa = ts::alloc_shared(ts::f16, {TM, TK});
      auto sb = ts::alloc_shared(ts::f16, {TK, TN});
      ts::Tiles tiles(M, N, TM, TN);
      if (stream)
        tiles.streamK(K, TK);
      else
        tiles.splitK(3, K, TK).persistent();
      ts::for_tiles(
          tiles.workspace(ws, flags),
          [&](const ts::Tile& t) {
            auto rows = ts::expand_dims(t.row0 + ts::arange(TM), 1), cols = ts::expand_dims(t.col0 + ts::arange(TN), 0);
            auto rk = ts::arange(TK);
            return ts::for_pipelined(
                t.kBegin, t.kEnd, TK, 3, ts::zeros({TM, TN}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
                  auto ka = ts::expand_dims(k0 + rk, 0), kb = ts::expand_dims(k0 + rk, 1);
                  auto x = ts::stage_copy(sa, a + rows * K + ka, (rows < t.rowEnd) & (ka < t.kEnd));
                  auto y = ts::stage_copy(sb, b + kb * N + cols, (kb < t.kEnd) & (cols < t.colEnd));
                  return ts::dot(x.load(), y.load(), acc);
                });
          },
          [&](const ts::Tile& t, const ts::Tensor& acc) {
            auto rows = ts::expand_dims(t.row0 + ts::arange(TM), 1), cols = ts::expand_dims(t.col0 + ts::arange(TN), 0);
            ts::store(c + rows * N + cols, acc, (rows < t.rowEnd) & (cols < t.colEnd));
          });
    });
  };
  const Problem p = problem(45, 40, 88, true, 9);  // 2 x 2 tiles, 6 K steps (the last partial)
  std::vector<uint16_t> Ah(p.A.size()), Bh(p.B.size());
  std::transform(p.A.begin(), p.A.end(), Ah.begin(), tessera::examples::toHalf);
  std::transform(p.B.begin(), p.B.end(), Bh.begin(), tessera::examples::toHalf);
  const int64_t tiles = ts::Tiles::count(p.M, p.N, TM, TN);
  for (const char* target : {"nvptx:sm_80", "amdgpu:gfx942", "amdgpu:gfx1100"})
    for (bool stream : {false, true}) {
      ts::Device dev = ts::Device::emulator(target);
      ts::CompiledKernel k = ts::compile(gemm(stream), dev);
      for (uint32_t programs : {2u, 5u}) {
        INFO(target << (stream ? ", stream-K, " : ", split-K(3), ") << programs << " programs");
        const int64_t ws =
            stream ? ts::Tiles::streamKWorkspace(programs, TM, TN) : ts::Tiles::splitKWorkspace(tiles, 3, TM, TN);
        ts::Buffer c = dev.upload(ts::f32, std::vector<float>(size_t(p.M) * p.N, NAN));
        ts::Buffer flags = dev.upload(ts::i32, std::vector<int32_t>(size_t(tiles), 0));
        k.launch(ts::Dim3(programs), c, dev.upload(ts::f16, Ah), dev.upload(ts::f16, Bh),
                 dev.alloc(ts::f32, size_t(ws)), flags, p.M, p.N, p.K);
        CHECK(mismatches(c.read<float>(), p, 0.0) == 0);
        const std::vector<int32_t> left = flags.read<int32_t>();
        CHECK(std::all_of(left.begin(), left.end(), [](int32_t f) { return f == 0; }));
      }
    }
}

TEST_CASE("for_tiles split-K and stream-K over a ragged schedule: every group's tiles joined once",
          "[dsl][tiles][splitk]") {
  // Groups of 5, 0, 11 and 3 rows over one shared B: C rows of group g are
  // A's rows times B, each tile's K in 2 splits or dealt out by stream-K.
  const std::vector<int32_t> offsets = {0, 5, 5, 16, 19};
  const int groups = 4, N = 10, K = 13, rows = 19;
  const Problem p = problem(rows, N, K, true, 8);
  auto kernel = [](bool stream) {
    return ts::kernel("ragged_split", [=](ts::Ptr<float> c, ts::Ptr<const float> a, ts::Ptr<const float> b,
                                          ts::Ptr<float> ws, ts::Ptr<int32_t> flags, ts::Ptr<const int32_t> off,
                                          ts::Int G, ts::Int Nn, ts::Int Kk) {
      ts::Tiles tiles(0, Nn, BM, BN);
      tiles.ragged(off, G);
      if (stream)
        tiles.streamK(Kk, BK);
      else
        tiles.splitK(2, Kk, BK);
      ts::for_tiles(
          tiles.workspace(ws, flags),
          [&](const ts::Tile& t) {
            auto r = ts::expand_dims(t.row0 + ts::arange(BM), 1), cols = ts::expand_dims(t.col0 + ts::arange(BN), 0);
            return ts::for_range(t.kBegin, t.kEnd, BK, ts::zeros({BM, BN}, ts::f32), [&](ts::Int k0, ts::Tensor acc) {
              auto ka = ts::expand_dims(k0 + ts::arange(BK), 0), kb = ts::expand_dims(k0 + ts::arange(BK), 1);
              auto x = ts::load(a + r * Kk + ka, (r < t.rowEnd) & (ka < t.kEnd), 0.0f);
              auto y = ts::load(b + kb * Nn + cols, (kb < t.kEnd) & (cols < t.colEnd), 0.0f);
              return ts::dot(x, y, acc);
            });
          },
          [&](const ts::Tile& t, const ts::Tensor& acc) {
            auto r = ts::expand_dims(t.row0 + ts::arange(BM), 1), cols = ts::expand_dims(t.col0 + ts::arange(BN), 0);
            ts::store(c + r * Nn + cols, acc, (r < t.rowEnd) & (cols < t.colEnd));
          });
    });
  };
  const int64_t bound = ts::Tiles::raggedBound(rows, groups, N, BM, BN);
  for (ts::Device dev : {ts::Device::cpu(), ts::Device::emulator("nvptx:sm_80")})
    for (bool stream : {false, true}) {
      ts::CompiledKernel k = ts::compile(kernel(stream), dev);
      // Split-K: a unit per split of every possible tile; stream-K: the 8
      // tiles' 32 iterations in shares of 11 or 10, 7 or 6, crossing tiles.
      for (uint32_t programs : stream ? std::vector<uint32_t>{3, 5} : std::vector<uint32_t>{uint32_t(bound * 2)}) {
        INFO(dev.name() << (stream ? ", stream-K, " : ", split-K(2), ") << programs << " programs");
        const int64_t ws =
            stream ? ts::Tiles::streamKWorkspace(programs, BM, BN) : ts::Tiles::splitKWorkspace(bound, 2, BM, BN);
        ts::Buffer c = dev.upload(ts::f32, std::vector<float>(size_t(rows) * N, NAN));
        ts::Buffer flags = dev.upload(ts::i32, std::vector<int32_t>(size_t(bound), 0));
        k.launch(ts::Dim3(programs), c, dev.upload(ts::f32, p.A), dev.upload(ts::f32, p.B),
                 dev.alloc(ts::f32, size_t(ws)), flags, dev.upload(ts::i32, offsets), groups, N, K);
        CHECK(mismatches(c.read<float>(), p, 0.0) == 0);
        const std::vector<int32_t> left = flags.read<int32_t>();
        CHECK(std::all_of(left.begin(), left.end(), [](int32_t f) { return f == 0; }));
      }
    }
}

TEST_CASE("for_tiles split-K and stream-K misuse", "[dsl][tiles][splitk][errors]") {
  int line = 0;
  const auto body = [](const ts::Tile&) { return ts::zeros({8, 8}, ts::f32); };
  const auto epilogue = [](const ts::Tile&, const ts::Tensor&) {};
  auto check = [&](const std::string& msg, const char* what) {
    CHECK_THAT(msg, StartsWith(dsltest::at(__FILE__, line)));
    CHECK_THAT(msg, Contains(what));
  };
  SECTION("no split") {
    check(dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
            ts::Tiles t(n, n, 8, 8);
            line = __LINE__ + 1;
            t.splitK(0, n, 4);
          }),
          "Tiles::splitK: a tile needs at least 1 split, got 0");
  }
  SECTION("a K step of no elements") {
    check(dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
            ts::Tiles t(n, n, 8, 8);
            line = __LINE__ + 1;
            t.streamK(n, 0);
          }),
          "Tiles::streamK: a K step must be at least 1 element, got 0");
  }
  SECTION("a float K") {
    check(dsltest::traceError([&](ts::Ptr<float>, ts::Float x) {
            ts::Tiles t(8, 8, 8, 8);
            line = __LINE__ + 1;
            t.splitK(2, x, 4);
          }),
          "Tiles::splitK: K must be an integer scalar");
  }
  SECTION("a negative K") {
    check(dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
            ts::Tiles t(n, n, 8, 8);
            line = __LINE__ + 1;
            t.splitK(2, -4, 4);
          }),
          "Tiles::splitK: K must be a non-negative i32, got integer literal -4");
  }
  SECTION("K split twice") {
    check(dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
            ts::Tiles t(n, n, 8, 8);
            t.splitK(2, n, 4);
            line = __LINE__ + 1;
            t.streamK(n, 4);
          }),
          "Tiles::streamK: the schedule's K is already split");
  }
  SECTION("a read-only workspace") {
    check(dsltest::traceError([&](ts::Ptr<const float> ws, ts::Ptr<int32_t> flags, ts::Int n) {
            ts::Tiles t(n, n, 8, 8);
            line = __LINE__ + 1;
            t.streamK(n, 4).workspace(ws, flags);
          }),
          "Tiles::workspace: the partials must be a writable pointer to f32 (ts::Ptr<float>), got ptr<f32");
  }
  SECTION("float flags") {
    check(dsltest::traceError([&](ts::Ptr<float> ws, ts::Ptr<float> flags, ts::Int n) {
            ts::Tiles t(n, n, 8, 8);
            line = __LINE__ + 1;
            t.streamK(n, 4).workspace(ws, flags);
          }),
          "Tiles::workspace: the flags must be a writable pointer to i32");
  }
  SECTION("split tiles without a workspace") {
    check(
        dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
          line = __LINE__ + 1;
          ts::for_tiles(ts::Tiles(n, n, 8, 8).splitK(4, n, 4), body, epilogue);
        }),
        "for_tiles: splitK(4) joins partial tiles through a workspace: give the schedule .workspace(partials, flags)");
    check(dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
            line = __LINE__ + 1;
            ts::for_tiles(ts::Tiles(n, n, 8, 8).streamK(n, 4), body, epilogue);
          }),
          "for_tiles: streamK joins partial tiles through a workspace");
  }
  SECTION("a split schedule without an epilogue") {
    check(dsltest::traceError([&](ts::Ptr<float> ws, ts::Ptr<int32_t> flags, ts::Int n) {
            line = __LINE__ + 1;
            ts::for_tiles(ts::Tiles(n, n, 8, 8).splitK(2, n, 4).workspace(ws, flags), [](const ts::Tile&) {});
          }),
          "for_tiles: a schedule with splitK or streamK meets its partial tiles in an epilogue");
  }
  SECTION("an epilogue without a split") {
    check(dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
            line = __LINE__ + 1;
            ts::for_tiles(ts::Tiles(n, n, 8, 8), body, epilogue);
          }),
          "for_tiles: an epilogue needs a K split");
  }
  SECTION("an accumulator of the wrong shape or dtype") {
    check(dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
            line = __LINE__ + 1;
            ts::for_tiles(
                ts::Tiles(n, n, 8, 8).splitK(1, n, 4), [](const ts::Tile&) { return ts::zeros({8, 4}, ts::f32); },
                epilogue);
          }),
          "for_tiles: the body must return the tile's f32 accumulator, tile<8x8xf32>; got tile<8x4xf32>");
    check(dsltest::traceError([&](ts::Ptr<float>, ts::Int n) {
            line = __LINE__ + 1;
            ts::for_tiles(
                ts::Tiles(n, n, 8, 8).splitK(1, n, 4), [](const ts::Tile&) { return ts::zeros({8, 8}, ts::f16); },
                epilogue);
          }),
          "got tile<8x8xf16>");
  }
}

// Tiles::dynamic(), ts::cancel_program and ts::do_while: one program per
// tile, each taking the tiles of the programs it cancels. On the emulated
// Blackwell targets (cluster launch control) a program that started takes
// the tiles of programs not yet started, which then never run; elsewhere
// nothing is cancelled. Either way each tile is computed exactly once,
// checked here by counting, per element, how often it was written.
#include <algorithm>
#include <string>
#include <vector>

#include "../cpu_paths.h"
#include "dsl_test_util.h"
#include "tessera/ir/analysis/TileCoverage.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using Catch::Matchers::Contains;

namespace {

constexpr int BM = 8, BN = 8;

/// Adds 1 to every element of its tiles (so an element computed twice reads
/// 2) and counts the programs that started in started[0].
ts::Kernel countingTiles() {
  return ts::kernel("dynamic_tiles", {"out", "started", "M", "N"},
                    [](ts::Ptr<int32_t> out, ts::Ptr<int32_t> started, ts::Int M, ts::Int N) {
                      ts::atomic_add(started, 1);
                      ts::for_tiles(ts::Tiles(M, N, BM, BN).grouped(2).dynamic(), [&](const ts::Tile& t) {
                        auto rows = ts::expand_dims(t.row0 + ts::arange(BM), 1);
                        auto cols = ts::expand_dims(t.col0 + ts::arange(BN), 0);
                        auto mask = (rows < t.rowEnd) & (cols < t.colEnd);
                        ts::atomic_add(out + rows * N + cols, ts::full({BM, BN}, 1, ts::i32), mask);
                      });
                    });
}

struct Run {
  std::vector<int32_t> out;
  int32_t started = 0;
};

Run run(const ts::CompiledKernel& k, ts::Device& dev, int M, int N, uint32_t programs, unsigned threads) {
  ts::Buffer out = dev.upload(ts::i32, std::vector<int32_t>(size_t(M) * N, 0));
  ts::Buffer started = dev.upload(ts::i32, std::vector<int32_t>{0});
  ts::LaunchOptions o;
  o.threads = threads;
  k.launchWith(ts::Dim3(programs), {out, started, M, N}, o);
  return {out.read<int32_t>(), started.read<int32_t>()[0]};
}

}  // namespace

TEST_CASE("Tiles::dynamic: every tile once, and on Blackwell the started programs take the cancelled ones' tiles",
          "[dsl][tiles][emu]") {
  const int M = 37, N = 29;  // 5 x 4 tiles, ragged in both
  const int64_t count = ts::Tiles::count(M, N, BM, BN);
  REQUIRE(count == 20);
  struct Case {
    ts::Device dev;
    bool cancels;
  };
  std::vector<Case> cases;
  for (const std::string& cpu : testpaths::runnableCpus()) cases.push_back({ts::Device::cpu(cpu), false});
  for (const char* g : {"nvptx:sm_90a", "amdgpu:gfx942"}) cases.push_back({ts::Device::emulator(g), false});
  for (const char* g : {"nvptx:sm_100a", "nvptx:sm_120a"}) cases.push_back({ts::Device::emulator(g), true});
  for (Case& c : cases) {
    INFO(c.dev.name());
    ts::CompiledKernel k = ts::compile(countingTiles(), c.dev);
    for (uint32_t programs : {uint32_t(count), uint32_t(count + 3)})
      for (unsigned threads : {1u, 2u}) {
        INFO(programs << " programs, " << threads << " host threads");
        Run r = run(k, c.dev, M, N, programs, threads);
        CHECK(std::count(r.out.begin(), r.out.end(), 1) == M * N);
        if (!c.cancels) {
          CHECK(r.started == int32_t(programs));
        } else if (threads == 1) {
          // One host thread runs program 0 first, which cancels programs
          // 1 .. count-1 and takes their tiles; its next request fails
          // (programs == count), or cancels program count, past the tiles,
          // and it stops: the programs after that one start and find no
          // tile.
          CHECK(r.started == (programs == count ? 1 : int32_t(programs - count)));
        } else {
          CHECK(r.started >= 1);
          CHECK(r.started < int32_t(programs));
        }
      }
  }
}

TEST_CASE("Tiles::dynamic: the PTX asks the hardware on Blackwell and nowhere else", "[dsl][tiles]") {
  for (const char* t : {"nvptx:sm_100a", "nvptx:sm_103a", "nvptx:sm_120a", "nvptx:sm_90a", "nvptx:sm_80"}) {
    INFO(t);
    const std::string ptx = ts::compile(countingTiles(), ts::Target::parse(t)).dump(ts::Stage::PTX);
    const bool blackwell = std::string(t) != "nvptx:sm_90a" && std::string(t) != "nvptx:sm_80";
    CHECK((ptx.find("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128") !=
           std::string::npos) == blackwell);
    CHECK((ptx.find("clusterlaunchcontrol.query_cancel.is_canceled") != std::string::npos) == blackwell);
  }
}

TEST_CASE("Tiles::dynamic: the coverage proof holds cancelling nothing and cancelling all it can",
          "[dsl][tiles][coverage]") {
  auto copy = [](bool ownTileAgain) {
    return ts::kernel("dyn_copy", {"out", "M", "N"}, [=](ts::Ptr<float> out, ts::Int M, ts::Int N) {
      auto tm = (M + (BM - 1)) / BM, tn = (N + (BN - 1)) / BN;
      auto pid = ts::program_id(0);
      ts::if_else(pid < tm * tn, [&] {
        ts::do_while(std::tuple{pid}, [&](ts::Int t) {
          // The bug: the tile of the program's own id, whichever it took.
          ts::Int tile = ownTileAgain ? pid : t;
          auto rows = ts::expand_dims((tile / tn) * BM + ts::arange(BM), 1);
          auto cols = ts::expand_dims((tile % tn) * BN + ts::arange(BN), 0);
          ts::store(out + rows * N + cols, ts::zeros({BM, BN}, ts::f32), (rows < M) & (cols < N));
          auto next = ts::cancel_program();
          return std::tuple{(next >= 0) & (next < tm * tn), next};
        });
      });
    });
  };
  const std::vector<tessera::ir::TileCoverage> good = tessera::ir::checkTileCoverage(copy(false).ir());
  REQUIRE(good.size() == 1);
  INFO(good[0].text);
  CHECK(good[0].kind == tessera::ir::TileCoverage::Kind::Checked);
  CHECK_THAT(good[0].text, Contains("every tile stored exactly once") &&
                               Contains("cancel_program cancelling nothing and cancelling every program it can"));
  CHECK_THROWS_WITH(tessera::ir::checkTileCoverage(copy(true).ir()),
                    Contains("dynamic_tiles_test.cpp:") &&
                        Contains("tile (0, 0) is stored twice: by program 0 (iteration 0) and by program 0 "
                                 "(iteration 1)") &&
                        Contains("each cancel_program cancelling the next program not started"));
}

TEST_CASE("do_while: a loop whose trip count is found as it runs, on every target", "[dsl][emu]") {
  // The Collatz steps of n = program + 1, with a carried step count: the
  // trip count depends on the program.
  auto k = ts::kernel("collatz", {"out"}, [](ts::Ptr<int32_t> out) {
    auto p = ts::program_id(0);
    auto [n, steps] = ts::do_while(std::tuple{p + 1, p * 0}, [&](ts::Int n, ts::Int steps) {
      ts::Int next = ts::where(n % 2 == 0, n / 2, 3 * n + 1);
      ts::Int m = ts::where(n == 1, n, next);
      return std::tuple{m != 1, m, steps + ts::where(n == 1, 0, 1)};
    });
    ts::store(out + p, steps * 1000 + n);
  });
  auto collatz = [](int n) {
    int s = 0;
    while (n != 1) n = n % 2 == 0 ? n / 2 : 3 * n + 1, ++s;
    return s;
  };
  const int P = 40;
  for (ts::Device dev : testpaths::cpuPathsAndEmulators()) {
    INFO(dev.name());
    ts::Buffer out = dev.upload(ts::i32, std::vector<int32_t>(P, -1));
    ts::compile(k, dev).launchWith(ts::Dim3(P), {out}, {});
    std::vector<int32_t> got = out.read<int32_t>();
    for (int p = 0; p < P; ++p) {
      INFO("n = " << p + 1);
      // The body runs once more at n = 1 (a do-while), adding nothing.
      CHECK(got[p] == collatz(p + 1) * 1000 + 1);
    }
  }
}

TEST_CASE("do_while and dynamic(): bad input is a DslError naming the line", "[dsl][tiles]") {
  auto tileCarried = [] {
    return ts::kernel("bad", {"out"}, [](ts::Ptr<float> out) {
      auto p = ts::program_id(0);
      ts::do_while(std::tuple{ts::zeros({4}, ts::f32)}, [&](ts::Tensor x) { return std::tuple{p < 0, x}; });
      ts::store(out + ts::arange(4), ts::zeros({4}, ts::f32));
    });
  };
  CHECK_THROWS_AS(tileCarried(), ts::DslError);
  CHECK_THROWS_WITH(tileCarried(), Contains("dynamic_tiles_test.cpp:") &&
                                       Contains("do_while: carried value #0 is tile<4xf32>; a do_while carries "
                                                "scalars only"));
  auto notI1 = [] {
    return ts::kernel("bad2", {"out"}, [](ts::Ptr<int32_t> out) {
      auto [n] = ts::do_while(std::tuple{ts::program_id(0) + 3}, [&](ts::Int n) { return std::tuple{n, n - 1}; });
      ts::store(out, n);
    });
  };
  CHECK_THROWS_WITH(notI1(), Contains("do_while: the condition must be a scalar i1"));
  auto withPersistent = [] {
    return ts::kernel("bad3", {"out", "M"}, [](ts::Ptr<float> out, ts::Int M) {
      ts::for_tiles(ts::Tiles(M, 8, BM, BN).dynamic().persistent(),
                    [&](const ts::Tile& t) { ts::store(out + t.row0, 1.0f); });
    });
  };
  CHECK_THROWS_WITH(withPersistent(), Contains("dynamic_tiles_test.cpp:") &&
                                          Contains("a dynamic() schedule runs one program per unit of work") &&
                                          Contains("persistent()"));
}

TEST_CASE("Tiles::dynamic: a pipelined f16 GEMM, tiles taken from cancelled programs on emulated Blackwell",
          "[dsl][tiles][emu]") {
  // The pipelined K loop (tensor copies and tcgen05 on sm_100a, wgmma on
  // sm_90a, mma.sync on sm_120a) runs once per tile a program takes: the
  // next tile must find every slot, barrier phase and accumulator column as
  // the first did (the emulator reports races and hangs). Integer inputs:
  // the sums are exact.
  constexpr int TM = 64, TN = 64;
  ts::Kernel k =
      dsltest::pipelinedTilesGemm<TM, TN, 32>("dynamic_gemm_f16", [](ts::Tiles& t) { t.grouped(2).dynamic(); });
  const int M = 150, N = 136, K = 96;  // 3 x 3 tiles, ragged in M and N
  std::vector<float> A(M * K), B(K * N);
  for (int i = 0; i < M * K; ++i) A[i] = float((i * 7) % 5 - 2);
  for (int i = 0; i < K * N; ++i) B[i] = float((i * 3) % 7 - 3);
  const dsltest::ExactHalfGemm g(M, N, K, A, B);
  const int64_t count = ts::Tiles::count(M, N, TM, TN);
  for (const char* target : {"nvptx:sm_100a", "nvptx:sm_120a", "nvptx:sm_90a", "amdgpu:gfx942"}) {
    INFO(target);
    ts::Device dev = ts::Device::emulator(target);
    ts::CompiledKernel ck = ts::compile(k, dev);
    for (unsigned threads : {1u, 2u}) {
      INFO(threads << " host threads");
      ts::LaunchOptions o;
      o.threads = threads;
      CHECK(g.run(ck, dev, uint32_t(count), o) == g.want);
    }
  }
}

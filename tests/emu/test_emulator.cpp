// Tests of the SIMT machine with hand-written "kernels" that call the hooks
// the way the compiler's rewritten GPU modules do.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../../codegen/emu/EmuCompile.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/support/Error.h"
#include "SharedAccess.h"

using namespace tessera::emu;

namespace {

LaunchConfig makeConfig(std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block, Vendor v = Vendor::NVIDIA,
                        unsigned warp = 32) {
  LaunchConfig c;
  c.vendor = v;
  c.warpSize = warp;
  std::copy(grid.begin(), grid.end(), c.grid);
  std::copy(block.begin(), block.end(), c.block);
  c.kernelName = "test_kernel";
  return c;
}

using tessera::emu::test::sload;
using tessera::emu::test::sstore;
template <class T>
T gload(const T* p, int op) {
  return *static_cast<const T*>(tessera_emu_global_access(const_cast<T*>(p), sizeof(T), TESSERA_EMU_LOAD, op));
}
template <class T>
void gstore(T* p, T v, int op) {
  *static_cast<T*>(tessera_emu_global_access(p, sizeof(T), TESSERA_EMU_STORE, op)) = v;
}

int32_t linearThread() {
  return tessera_emu_thread_id_x() +
         tessera_emu_block_dim_x() *
             (tessera_emu_thread_id_y() + tessera_emu_block_dim_y() * tessera_emu_thread_id_z());
}
int32_t linearBlock() {
  return tessera_emu_block_id_x() +
         tessera_emu_grid_dim_x() * (tessera_emu_block_id_y() + tessera_emu_grid_dim_y() * tessera_emu_block_id_z());
}
int32_t blockThreads() { return tessera_emu_block_dim_x() * tessera_emu_block_dim_y() * tessera_emu_block_dim_z(); }

template <class T>
T& param(void* const* args, int i) {
  return *static_cast<T*>(args[i]);
}

}  // namespace

// ---------------------------------------------------------------------------
TEST_CASE("every thread of a 3-D grid of 3-D blocks runs exactly once", "[emu]") {
  for (unsigned hostThreads : {1u, 2u}) {
    LaunchConfig cfg = makeConfig({3, 2, 2}, {4, 3, 5});
    cfg.hostThreads = hostThreads;
    const size_t total = 3 * 2 * 2 * 4 * 3 * 5;
    std::vector<int32_t> ids(total, -1), hits(total, 0);
    // Each slot packs the thread's own view of its coordinates, to check them.
    std::vector<int32_t> coords(total * 6, -1);
    int32_t* pIds = ids.data();
    int32_t* pHits = hits.data();
    int32_t* pCoords = coords.data();
    cfg.globalBuffers = {{pIds, total * 4}, {pHits, total * 4}, {pCoords, total * 24}};
    void* args[] = {&pIds, &pHits, &pCoords};
    auto kernel = +[](void* const* a) {
      int32_t gid = linearBlock() * blockThreads() + linearThread();
      int32_t* ids = param<int32_t*>(a, 0);
      int32_t* hits = param<int32_t*>(a, 1);
      int32_t* co = param<int32_t*>(a, 2) + gid * 6;
      gstore(&ids[gid], gid, 0);
      gstore(&hits[gid], gload(&hits[gid], 1) + 1, 2);
      int32_t v[6] = {tessera_emu_thread_id_x(), tessera_emu_thread_id_y(), tessera_emu_thread_id_z(),
                      tessera_emu_block_id_x(),  tessera_emu_block_id_y(),  tessera_emu_block_id_z()};
      for (int i = 0; i < 6; ++i) gstore(&co[i], v[i], 3);
    };
    LaunchReport rep = launch(kernel, args, cfg);
    CHECK(rep.blocks == 12);
    CHECK(rep.threads == total);
    CHECK_FALSE(rep.hasErrors());
    for (size_t g = 0; g < total; ++g) {
      REQUIRE(ids[g] == static_cast<int32_t>(g));
      REQUIRE(hits[g] == 1);
      size_t t = g % 60, b = g / 60;
      REQUIRE(coords[g * 6 + 0] == static_cast<int32_t>(t % 4));
      REQUIRE(coords[g * 6 + 1] == static_cast<int32_t>(t / 4 % 3));
      REQUIRE(coords[g * 6 + 2] == static_cast<int32_t>(t / 12));
      REQUIRE(coords[g * 6 + 3] == static_cast<int32_t>(b % 3));
      REQUIRE(coords[g * 6 + 4] == static_cast<int32_t>(b / 3 % 2));
      REQUIRE(coords[g * 6 + 5] == static_cast<int32_t>(b / 6));
    }
  }
}

// ---------------------------------------------------------------------------
// Tree reduction in shared memory; the tree is sized to the next power of
// two so blocks that are not one (96, 1000 threads) are covered too.
static void blockReduceKernel(void* const* a) {
  const int64_t* in = param<const int64_t*>(a, 0);
  int64_t* out = param<int64_t*>(a, 1);
  auto* sh = static_cast<int64_t*>(tessera_emu_shared_base());
  const int32_t t = linearThread(), n = blockThreads(), b = linearBlock();
  sstore(&sh[t], gload(&in[int64_t{b} * n + t], 0), 1);
  tessera_emu_barrier(2);
  int32_t p2 = 1;
  while (p2 < n) p2 <<= 1;
  for (int32_t s = p2 / 2; s > 0; s >>= 1) {
    if (t < s && t + s < n) sstore(&sh[t], sload(&sh[t], 3) + sload(&sh[t + s], 4), 5);
    tessera_emu_barrier(6);
  }
  if (t == 0) gstore(&out[b], sload(&sh[0], 7), 8);
}

static std::vector<int64_t> runBlockReduce(uint32_t blocks, uint32_t threads, unsigned hostThreads,
                                           LaunchReport* repOut = nullptr) {
  std::vector<int64_t> in(size_t{blocks} * threads), out(blocks, -1);
  // Block b holds 1..n scaled by (b+1), so a result mixed up between blocks shows.
  for (uint32_t b = 0; b < blocks; ++b)
    for (uint32_t t = 0; t < threads; ++t) in[size_t{b} * threads + t] = int64_t{t + 1} * (b + 1);
  LaunchConfig cfg = makeConfig({blocks, 1, 1}, {threads, 1, 1});
  cfg.sharedBytes = threads * sizeof(int64_t);
  cfg.hostThreads = hostThreads;
  const int64_t* pin = in.data();
  int64_t* pout = out.data();
  cfg.globalBuffers = {{pin, in.size() * 8}, {pout, out.size() * 8}};
  void* args[] = {&pin, &pout};
  LaunchReport rep = launch(&blockReduceKernel, args, cfg);
  if (repOut) *repOut = rep;
  return out;
}

TEST_CASE("block reduction through shared memory and barriers", "[emu]") {
  for (uint32_t n : {1u, 32u, 96u, 256u, 1000u, 1024u}) {
    LaunchReport rep;
    std::vector<int64_t> out = runBlockReduce(5, n, 1, &rep);
    INFO("block of " << n);
    CHECK(rep.count(IssueKind::SharedRace) == 0);
    CHECK_FALSE(rep.hasErrors());
    for (uint32_t b = 0; b < 5; ++b) REQUIRE(out[b] == int64_t{n} * (n + 1) / 2 * (b + 1));
  }
}

TEST_CASE("blocks on two host threads give the same results and reports", "[emu]") {
  LaunchReport r1, r2;
  std::vector<int64_t> a = runBlockReduce(64, 256, 1, &r1);
  std::vector<int64_t> b = runBlockReduce(64, 256, 2, &r2);
  CHECK(a == b);
  for (uint32_t i = 0; i < 64; ++i) REQUIRE(a[i] == int64_t{256} * 257 / 2 * (i + 1));
  CHECK(r1.fiberSwitches == r2.fiberSwitches);
  CHECK(r1.totalBankConflicts == r2.totalBankConflicts);
  CHECK_FALSE(r2.hasErrors());
}

// ---------------------------------------------------------------------------
TEST_CASE("warp reduction with shfl bfly on warp32, wave64 and wave32", "[emu]") {
  struct Case {
    Vendor v;
    unsigned w;
  };
  for (Case cs : {Case{Vendor::NVIDIA, 32}, Case{Vendor::AMD, 64}, Case{Vendor::AMD, 32}}) {
    LaunchConfig cfg = makeConfig({3, 1, 1}, {128, 1, 1}, cs.v, cs.w);
    std::vector<int32_t> out(3 * 128, 0);
    int32_t* pout = out.data();
    cfg.globalBuffers = {{pout, out.size() * 4}};
    void* args[] = {&pout};
    launch(
        +[](void* const* a) {
          const int32_t W = tessera_emu_warp_size();
          const uint64_t full = W == 64 ? ~uint64_t{0} : 0xFFFFFFFFull;
          int32_t t = linearThread(), b = linearBlock();
          int32_t v = t * 7 + b * 1000 + 1;
          for (int32_t off = W / 2; off > 0; off /= 2)
            v += tessera_emu_shfl_sync(TESSERA_EMU_SHFL_BFLY, full, v, off, W - 1);
          gstore(&param<int32_t*>(a, 0)[b * 128 + t], v, 0);
        },
        args, cfg);
    for (int32_t b = 0; b < 3; ++b)
      for (int32_t t = 0; t < 128; ++t) {
        int32_t w0 = t / int32_t(cs.w) * int32_t(cs.w), expect = 0;
        for (int32_t l = w0; l < w0 + int32_t(cs.w); ++l) expect += l * 7 + b * 1000 + 1;
        INFO("warp size " << cs.w << " block " << b << " thread " << t);
        REQUIRE(out[b * 128 + t] == expect);
      }
  }
}

// ---------------------------------------------------------------------------
// Reference: CUDA's documented width-based shuffles, which the CUDA headers
// express as shfl.sync with c = ((W - width) << 8) | clamp.
namespace {
struct ShflRef {
  int32_t src;
  bool pred;
};
ShflRef cudaShflRef(int mode, int lane, int arg, int width) {
  int base = lane / width * width, pos = lane % width;
  switch (mode) {
    case TESSERA_EMU_SHFL_UP: return pos >= arg ? ShflRef{lane - arg, true} : ShflRef{lane, false};
    case TESSERA_EMU_SHFL_DOWN: return pos + arg < width ? ShflRef{lane + arg, true} : ShflRef{lane, false};
    case TESSERA_EMU_SHFL_BFLY: {
      int src = lane ^ arg;
      return src < base + width ? ShflRef{src, true} : ShflRef{lane, false};
    }
    default:  // idx: the lane index wraps within the segment
      return ShflRef{base + (arg & (width - 1)), true};
  }
}
struct ShflParams {
  int32_t mode, arg, width;
  int32_t* out;
  int32_t* pred;
};
}  // namespace

TEST_CASE("shfl up/down/bfly/idx follow the PTX clamp and segment rules", "[emu]") {
  for (auto [vendor, W] : {std::pair{Vendor::NVIDIA, 32}, std::pair{Vendor::AMD, 64}}) {
    for (int mode : {TESSERA_EMU_SHFL_UP, TESSERA_EMU_SHFL_DOWN, TESSERA_EMU_SHFL_BFLY, TESSERA_EMU_SHFL_IDX}) {
      for (int width = 2; width <= W; width *= 2) {
        std::vector<int> argsToTry = {0, 1, 3, width - 1, width, width + 1, W - 1};
        if (mode == TESSERA_EMU_SHFL_IDX) argsToTry.push_back(-1);
        if (mode == TESSERA_EMU_SHFL_BFLY) argsToTry = {0, 1, width / 2, width - 1};
        for (int arg : argsToTry) {
          LaunchConfig cfg = makeConfig({1, 1, 1}, {uint32_t(W), 1, 1}, vendor, W);
          std::vector<int32_t> out(W, -1), pred(W, -1);
          ShflParams p{mode, arg, width, out.data(), pred.data()};
          void* args[] = {&p};
          launch(
              +[](void* const* a) {
                const ShflParams& p = param<ShflParams>(a, 0);
                const int32_t W = tessera_emu_warp_size(), lane = tessera_emu_lane_id();
                const uint64_t full = W == 64 ? ~uint64_t{0} : 0xFFFFFFFFull;
                const int32_t clamp = p.mode == TESSERA_EMU_SHFL_UP ? 0 : W - 1;
                const int32_t c = ((W - p.width) << 8) | clamp;
                uint64_t r = tessera_emu_shfl_sync_pred(p.mode, full, 100 + lane, p.arg, c);
                p.out[lane] = static_cast<int32_t>(r);
                p.pred[lane] = static_cast<int32_t>(r >> 32);
              },
              args, cfg);
          for (int lane = 0; lane < W; ++lane) {
            // Arguments wider than the lane field are truncated, as in PTX.
            ShflRef ref = cudaShflRef(mode, lane, arg & (W - 1), width);
            INFO("W " << W << " mode " << mode << " width " << width << " arg " << arg << " lane " << lane);
            REQUIRE(out[lane] == 100 + ref.src);
            if (mode != TESSERA_EMU_SHFL_IDX) REQUIRE(pred[lane] == int(ref.pred));
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
TEST_CASE("vote all/any/uni and ballot, full and partial member masks", "[emu]") {
  LaunchConfig cfg = makeConfig({1, 1, 1}, {64, 1, 1});
  std::vector<uint64_t> out(64 * 5, 7);
  uint64_t* pout = out.data();
  void* args[] = {&pout};
  launch(
      +[](void* const* a) {
        uint64_t* o = param<uint64_t*>(a, 0) + linearThread() * 5;
        const int32_t lane = tessera_emu_lane_id(), warp = linearThread() / 32;
        // warp 0: pred = lane % 3 == 0; warp 1: pred true everywhere.
        int32_t pred = warp == 0 ? lane % 3 == 0 : 1;
        o[0] = tessera_emu_vote_sync(TESSERA_EMU_VOTE_ALL, 0xFFFFFFFF, pred);
        o[1] = tessera_emu_vote_sync(TESSERA_EMU_VOTE_ANY, 0xFFFFFFFF, pred);
        o[2] = tessera_emu_vote_sync(TESSERA_EMU_VOTE_UNI, 0xFFFFFFFF, pred);
        o[3] = tessera_emu_ballot_sync(0xFFFFFFFF, pred);
        // Only the even lanes take part here; odd lanes skip it.
        if (lane % 2 == 0) o[4] = tessera_emu_ballot_sync(0x55555555, lane % 4 == 0);
      },
      args, cfg);
  uint64_t ball0 = 0;
  for (int l = 0; l < 32; l += 3) ball0 |= uint64_t{1} << l;
  for (int t = 0; t < 64; ++t) {
    const uint64_t* o = &out[t * 5];
    INFO("thread " << t);
    if (t < 32) {
      CHECK(o[0] == 0);
      CHECK(o[1] == 1);
      CHECK(o[2] == 0);
      CHECK(o[3] == ball0);
    } else {
      CHECK(o[0] == 1);
      CHECK(o[1] == 1);
      CHECK(o[2] == 1);
      CHECK(o[3] == 0xFFFFFFFFull);
    }
    CHECK(o[4] == (t % 2 == 0 ? 0x11111111ull : 7));
  }
}

TEST_CASE("wave64 ballot covers all 64 lanes", "[emu]") {
  LaunchConfig cfg = makeConfig({1, 1, 1}, {64, 1, 1}, Vendor::AMD, 64);
  std::vector<uint64_t> out(64, 0);
  uint64_t* pout = out.data();
  void* args[] = {&pout};
  launch(
      +[](void* const* a) {
        int32_t l = tessera_emu_lane_id();
        param<uint64_t*>(a, 0)[l] = tessera_emu_ballot_sync(~uint64_t{0}, l >= 60 || l == 5);
      },
      args, cfg);
  const uint64_t expect = (uint64_t{0xF} << 60) | (uint64_t{1} << 5);
  for (uint64_t v : out) REQUIRE(v == expect);
}

// ---------------------------------------------------------------------------
TEST_CASE("ds_bpermute, readlane, readfirstlane and wave ballot over the live lanes", "[emu]") {
  // 80 threads on wave64: wave 1 is partial (lanes 16..63 do not exist).
  LaunchConfig cfg = makeConfig({1, 1, 1}, {80, 1, 1}, Vendor::AMD, 64);
  std::vector<int32_t> out(80 * 3, -7);
  int32_t* pout = out.data();
  void* args[] = {&pout};
  launch(
      +[](void* const* a) {
        int32_t* o = param<int32_t*>(a, 0) + linearThread() * 3;
        const int32_t lane = tessera_emu_lane_id(), t = linearThread();
        // Lanes 0 and 1 of wave 0 leave early: they are no longer live.
        if (t < 2) return;
        int32_t src = (lane * 5 + 1) % 64;
        o[0] = tessera_emu_ds_bpermute(src * 4, 1000 + t);
        o[1] = tessera_emu_readlane(2000 + t, 9);
        o[2] = tessera_emu_readfirstlane(3000 + t);
        // Ballot over the live lanes only: the exited lanes 0 and 1 give no bit.
        if (tessera_emu_wave_ballot(1) != (t < 64 ? ~uint64_t{3} : uint64_t{0xFFFF})) o[2] = -1;
      },
      args, cfg);
  for (int t = 0; t < 80; ++t) {
    INFO("thread " << t);
    const int32_t* o = &out[t * 3];
    if (t < 2) {
      CHECK(o[0] == -7);
      continue;
    }
    const int wave = t / 64, lane = t % 64, src = (lane * 5 + 1) % 64;
    const int live = wave == 0 ? 64 : 16;
    bool srcLive = src < live && !(wave == 0 && src < 2);
    CHECK(o[0] == (srcLive ? 1000 + wave * 64 + src : 0));
    CHECK(o[1] == 2000 + wave * 64 + 9);
    CHECK(o[2] == 3000 + (wave == 0 ? 2 : 64));
  }
}

// ---------------------------------------------------------------------------
namespace {
struct RaceParams {
  int32_t a, b;    // the two threads that touch word 0
  int32_t second;  // 0 = write, 1 = read
  int32_t withBarrier;
};
void raceKernel(void* const* args) {
  const RaceParams& p = param<RaceParams>(args, 0);
  auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
  const int32_t t = linearThread();
  // Each thread also writes its own private word: never a race.
  sstore(&sh[4 + t], t, 3);
  if (t == p.a) sstore(&sh[0], 111, 0);
  if (p.withBarrier) tessera_emu_barrier(4);
  if (t == p.b) {
    if (p.second == 0)
      sstore(&sh[0], 222, 1);
    else
      (void)sload(&sh[0], 2);
  }
  (void)sload(&sh[4 + t], 5);
}
LaunchConfig raceConfig() {
  LaunchConfig cfg = makeConfig({2, 1, 1}, {64, 1, 1});
  cfg.sharedBytes = 68 * 4;
  cfg.opNames = {"store a at race.cpp:10",      "store b at race.cpp:12", "load b at race.cpp:14",
                 "store private at race.cpp:8", "barrier at race.cpp:11", "load private at race.cpp:16"};
  cfg.throwOnError = false;
  return cfg;
}
}  // namespace

TEST_CASE("a shared-memory race is reported with both threads and the op", "[emu]") {
  for (int second : {0, 1}) {
    LaunchConfig cfg = raceConfig();
    RaceParams p{3, 40, second, 0};
    void* args[] = {&p};
    LaunchReport rep = launch(&raceKernel, args, cfg);
    INFO(rep.summary());
    REQUIRE(rep.count(IssueKind::SharedRace) == 2);  // once per block
    REQUIRE(rep.issues.size() == 1);                 // one distinct (op, op) pair
    const Issue& is = rep.issues[0];
    CHECK(is.kind == IssueKind::SharedRace);
    CHECK(is.thread[0] == 40);
    CHECK(is.hasOther);
    CHECK(is.otherThread[0] == 3);
    CHECK(is.opId == 1 + second);
    CHECK(is.otherOpId == 0);
    CHECK(is.block[0] == 0);
    CHECK_THAT(is.message, Catch::Contains("thread (40,0,0)") && Catch::Contains("thread (3,0,0)") &&
                               Catch::Contains("store a at race.cpp:10") && Catch::Contains("kernel 'test_kernel'") &&
                               Catch::Contains("block (0,0,0)") && Catch::Contains("shared offset 0"));
    CHECK_THAT(is.message, Catch::Contains(second == 0 ? "store b at race.cpp:12" : "load b at race.cpp:14"));

    cfg.throwOnError = true;
    CHECK_THROWS_WITH(launch(&raceKernel, args, cfg),
                      Catch::Contains("shared-memory race") && Catch::Contains("store a at race.cpp:10"));
    CHECK_THROWS_AS(launch(&raceKernel, args, cfg), EmulatorError);
  }
}

TEST_CASE("the same accesses separated by a barrier are not a race", "[emu]") {
  for (int second : {0, 1}) {
    LaunchConfig cfg = raceConfig();
    cfg.throwOnError = true;
    RaceParams p{3, 40, second, 1};
    void* args[] = {&p};
    LaunchReport rep = launch(&raceKernel, args, cfg);
    CHECK(rep.count(IssueKind::SharedRace) == 0);
    CHECK_FALSE(rep.hasErrors());
  }
  // Two reads of one word by different threads are no race either.
  LaunchConfig cfg = raceConfig();
  cfg.throwOnError = true;
  LaunchReport rep = launch(
      +[](void* const*) {
        auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
        if (linearThread() == 0) sstore(&sh[0], 1, 0);
        tessera_emu_barrier(4);
        (void)sload(&sh[0], 2);
      },
      nullptr, cfg);
  CHECK_FALSE(rep.hasErrors());
}

TEST_CASE("atomics on one shared word do not race each other, but race plain stores", "[emu]") {
  LaunchConfig cfg = raceConfig();
  auto kernel = +[](void* const* a) {
    auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
    const int32_t t = linearThread();
    if (t == 0) sstore(&sh[0], 0, 0);
    tessera_emu_barrier(4);
    auto* p = static_cast<int32_t*>(tessera_emu_shared_access(&sh[0], 4, TESSERA_EMU_ATOMIC, 1));
    *p += 1;  // fibers never run concurrently, so this is atomic here
    if (param<int32_t>(a, 0) && t == 63) sstore(&sh[0], 5, 2);
  };
  int32_t plain = 0;
  void* args[] = {&plain};
  LaunchReport rep = launch(kernel, args, cfg);
  CHECK_FALSE(rep.hasErrors());
  plain = 1;
  rep = launch(kernel, args, cfg);
  CHECK(rep.count(IssueKind::SharedRace) == 2);
}

TEST_CASE("shared memory starts poisoned with 0xCD", "[emu]") {
  LaunchConfig cfg = makeConfig({1, 1, 1}, {1, 1, 1});
  cfg.sharedBytes = 64;
  uint32_t seen = 0;
  uint32_t* ps = &seen;
  void* args[] = {&ps};
  launch(
      +[](void* const* a) {
        **static_cast<uint32_t**>(a[0]) = sload(static_cast<uint32_t*>(tessera_emu_shared_base()) + 7, 0);
      },
      args, cfg);
  CHECK(seen == 0xCDCDCDCDu);
}

// ---------------------------------------------------------------------------
TEST_CASE("out-of-bounds shared and global accesses are reported, not performed", "[emu]") {
  LaunchConfig cfg = makeConfig({2, 1, 1}, {32, 1, 1});
  cfg.sharedBytes = 32 * 4;
  cfg.opNames = {"store shared at oob.cpp:5", "store global at oob.cpp:7", "load shared at oob.cpp:9"};
  cfg.throwOnError = false;
  std::vector<float> buf(33, 0.0f);  // 32 registered + 1 guard element
  buf[32] = 42.0f;
  float* pbuf = buf.data();
  cfg.globalBuffers = {{pbuf, 32 * sizeof(float)}};
  void* args[] = {&pbuf};
  LaunchReport rep = launch(
      +[](void* const* a) {
        auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
        const int32_t t = linearThread();
        sstore(&sh[t + 1], t, 0);                          // thread 31 writes one past the end
        if (t == 0) (void)sload(sh - 1, 2);                // and thread 0 reads before the start
        gstore(&param<float*>(a, 0)[t + 1], float(t), 1);  // thread 31 writes the guard element
      },
      args, cfg);
  INFO(rep.summary());
  CHECK(rep.count(IssueKind::SharedOutOfBounds) == 4);  // 2 per block
  CHECK(rep.count(IssueKind::GlobalOutOfBounds) == 2);
  CHECK(buf[32] == 42.0f);  // redirected to scratch
  CHECK(buf[31] == 30.0f);
  bool sawShared = false, sawBefore = false, sawGlobal = false;
  for (const Issue& is : rep.issues) {
    if (is.kind == IssueKind::SharedOutOfBounds && is.opId == 0) {
      sawShared = true;
      CHECK(is.thread[0] == 31);
      CHECK_THAT(is.message, Catch::Contains("shared offset 128") && Catch::Contains("oob.cpp:5"));
    }
    if (is.kind == IssueKind::SharedOutOfBounds && is.opId == 2) {
      sawBefore = true;
      CHECK_THAT(is.message, Catch::Contains("shared offset -4"));
    }
    if (is.kind == IssueKind::GlobalOutOfBounds) {
      sawGlobal = true;
      CHECK(is.thread[0] == 31);
      CHECK_THAT(is.message, Catch::Contains("oob.cpp:7") && Catch::Contains("at offset 128"));
    }
  }
  CHECK(sawShared);
  CHECK(sawBefore);
  CHECK(sawGlobal);
  cfg.throwOnError = true;
  CHECK_THROWS_AS(
      launch(+[](void* const*) { (void)gload(reinterpret_cast<int32_t*>(64), 0); }, nullptr, cfg), EmulatorError);
}

// ---------------------------------------------------------------------------
namespace {
struct BankParams {
  int32_t strideWords;
  int32_t bytes;  // 4 or 8
};
LaunchReport runBank(int32_t stride, int32_t bytes, Vendor v = Vendor::NVIDIA, unsigned W = 32) {
  LaunchConfig cfg = makeConfig({2, 1, 1}, {64, 1, 1}, v, W);
  cfg.sharedBytes = 64 * 64 * 8;
  cfg.opNames = {"first access", "second access"};
  BankParams p{stride, bytes};
  void* args[] = {&p};
  return launch(
      +[](void* const* a) {
        const BankParams& p = param<BankParams>(a, 0);
        auto* sh = static_cast<char*>(tessera_emu_shared_base());
        const int32_t lane = tessera_emu_lane_id();
        // Two dynamic instances of op 0 (a loop) and one of op 1.
        for (int it = 0; it < 2; ++it)
          tessera_emu_shared_access(sh + lane * p.strideWords * 4, p.bytes, TESSERA_EMU_LOAD, 0);
        tessera_emu_shared_access(sh + (lane % 4) * 4, 4, TESSERA_EMU_LOAD, 1);
      },
      args, cfg);
}
}  // namespace

TEST_CASE("bank conflicts per warp access", "[emu]") {
  // 2 blocks x 2 warps x 2 instances of op 0 = 8 warp accesses.
  LaunchReport r1 = runBank(1, 4);
  REQUIRE(r1.conflictsOf(0));
  CHECK(r1.conflictsOf(0)->warpAccesses == 8);
  CHECK(r1.conflictsOf(0)->conflicts == 0);
  CHECK(r1.conflictsOf(0)->wavefronts == 8);
  // Op 1: lanes read 4 words (broadcast within each word): no conflict.
  CHECK(r1.conflictsOf(1)->conflicts == 0);
  CHECK(r1.conflictsOf(1)->warpAccesses == 4);
  CHECK(r1.totalBankConflicts == 0);

  LaunchReport r32 = runBank(32, 4);
  CHECK(r32.conflictsOf(0)->conflicts == 31 * 8);  // every lane in bank 0
  CHECK(r32.totalBankConflicts == 31 * 8);
  CHECK(runBank(2, 4).conflictsOf(0)->conflicts == 1 * 8);  // two-way
  CHECK(runBank(0, 4).conflictsOf(0)->conflicts == 0);      // broadcast
  CHECK(runBank(33, 4).conflictsOf(0)->conflicts == 0);     // padded rows
  // 8-byte accesses, stride 2 words: half-warp phases of 16 lanes, each
  // covering all 32 banks once: no conflict, two wavefronts.
  LaunchReport r8 = runBank(2, 8);
  CHECK(r8.conflictsOf(0)->conflicts == 0);
  CHECK(r8.conflictsOf(0)->wavefronts == 2 * 8);

  // wave64: 1 block of 64 lanes = 1 wave per block, two 32-lane phases.
  LaunchReport a1 = runBank(1, 4, Vendor::AMD, 64);
  CHECK(a1.conflictsOf(0)->warpAccesses == 4);
  CHECK(a1.conflictsOf(0)->conflicts == 0);
  CHECK(a1.conflictsOf(0)->wavefronts == 8);
  CHECK(runBank(32, 4, Vendor::AMD, 64).conflictsOf(0)->conflicts == 31 * 2 * 4);
}

// ---------------------------------------------------------------------------
TEST_CASE("threads that exit count as arrived at a barrier", "[emu]") {
  LaunchConfig cfg = makeConfig({2, 1, 1}, {64, 1, 1});
  cfg.sharedBytes = 64 * 4;
  std::vector<int32_t> out(128, -1);
  int32_t* pout = out.data();
  void* args[] = {&pout};
  launch(
      +[](void* const* a) {
        auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
        const int32_t t = linearThread();
        if (t >= 40) return;
        sstore(&sh[t], t * 2, 0);
        tessera_emu_barrier(1);
        param<int32_t*>(a, 0)[linearBlock() * 64 + t] = sload(&sh[39 - t], 2);
      },
      args, cfg);
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 64; ++t) REQUIRE(out[b * 64 + t] == (t < 40 ? (39 - t) * 2 : -1));
}

TEST_CASE("divergent barriers and deadlocks are reported, not hung", "[emu]") {
  LaunchConfig cfg = makeConfig({3, 1, 1}, {64, 1, 1});
  cfg.throwOnError = false;
  cfg.opNames = {"barrier at div.cpp:3", "barrier at div.cpp:5"};

  // Threads meet at two different barrier instructions.
  LaunchReport rep = launch(
      +[](void* const*) {
        if (linearThread() < 16)
          tessera_emu_barrier(0);
        else
          tessera_emu_barrier(1);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::DivergentBarrier) == 3);
  REQUIRE(!rep.issues.empty());
  CHECK_THAT(rep.issues[0].message, Catch::Contains("div.cpp:3") && Catch::Contains("div.cpp:5"));

  // Half a warp waits in a full-mask shuffle, the other half at a barrier.
  rep = launch(
      +[](void* const*) {
        if (tessera_emu_lane_id() < 16)
          tessera_emu_shfl_sync(TESSERA_EMU_SHFL_IDX, 0xFFFFFFFF, 1, 0, 31);
        else
          tessera_emu_barrier(-1);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::Deadlock) == 3);
  REQUIRE(!rep.issues.empty());
  CHECK_THAT(rep.issues[0].message, Catch::Contains("no thread can proceed") && Catch::Contains("shfl.sync"));

  cfg.throwOnError = true;
  CHECK_THROWS_AS(launch(
                      +[](void* const*) {
                        if (linearThread() != 5) tessera_emu_barrier(-1);
                        if (linearThread() == 5) tessera_emu_vote_sync(TESSERA_EMU_VOTE_ANY, 0xFFFFFFFF, 1);
                      },
                      nullptr, cfg),
                  EmulatorError);
}

// ---- named barriers with a thread count, setmaxnreg ---------------------------
namespace {

std::vector<std::pair<std::string, void*>> hookTable() {
  std::vector<std::pair<std::string, void*>> v;
  for (auto [name, addr] : hookSymbols()) v.emplace_back(name, addr);
  return v;
}

bool hasIssue(const LaunchReport& rep, IssueKind kind, const std::string& text) {
  for (const auto& is : rep.issues)
    if (is.kind == kind && is.message.find(text) != std::string::npos) return true;
  return false;
}

const char* kNvHead =
    "target datalayout = \"e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64\"\n"
    "target triple = \"nvptx64-nvidia-cuda\"\n";

/// A warp-specialised block of 8 warps: warps 0-3 (the "producers") exit at
/// once, warps 4-7 exchange values through shared memory between named
/// barriers `bar.sync 1, 128`: write w0, sync, read the neighbour's, SYNC2,
/// write w1 = read + 1000, sync, read the neighbour's again into out.
const char* kNamedBarrierModule = R"(
@tile = internal addrspace(3) global [128 x i32] undef, align 4

define ptx_kernel void @consumers(ptr addrspace(1) %out) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %producer = icmp ult i32 %tid, 128
  br i1 %producer, label %exit, label %work
work:
  %c = sub i32 %tid, 128
  %mine = getelementptr inbounds [128 x i32], ptr addrspace(3) @tile, i32 0, i32 %c
  %c1 = add i32 %c, 1
  %nb = and i32 %c1, 127
  %theirs = getelementptr inbounds [128 x i32], ptr addrspace(3) @tile, i32 0, i32 %nb
  %w0 = mul i32 %tid, 3
  store i32 %w0, ptr addrspace(3) %mine, align 4, !tessera.op !0
  call void @llvm.nvvm.barrier.cta.sync.aligned.count(i32 1, i32 128)
  %r1 = load i32, ptr addrspace(3) %theirs, align 4, !tessera.op !1
  SYNC2
  %w1 = add i32 %r1, 1000
  store i32 %w1, ptr addrspace(3) %mine, align 4, !tessera.op !2
  call void @llvm.nvvm.barrier.cta.sync.aligned.count(i32 1, i32 128)
  %r2 = load i32, ptr addrspace(3) %theirs, align 4, !tessera.op !3
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = mul i32 %bid, 128
  %o = add i32 %base, %c
  %po = getelementptr inbounds i32, ptr addrspace(1) %out, i32 %o
  store i32 %r2, ptr addrspace(1) %po, align 4
  br label %exit
exit:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare void @llvm.nvvm.barrier.cta.sync.aligned.count(i32, i32)

!0 = !{!"store tile[c] = w0 @ named.cpp:1"}
!1 = !{!"load tile[c + 1] @ named.cpp:2"}
!2 = !{!"store tile[c] = w1 @ named.cpp:3"}
!3 = !{!"load tile[c + 1] @ named.cpp:4"}
)";

struct NamedRun {
  std::vector<int32_t> out;
  LaunchReport rep;
};

NamedRun runNamedBarrierModule(const std::string& sync2, uint32_t blocks) {
  std::string text = std::string(kNvHead) + kNamedBarrierModule;
  text.replace(text.find("SYNC2"), 5, sync2);
  tessera::codegen::EmuKernel k = tessera::codegen::compileForEmulator(text, false, 32, hookTable());
  LaunchConfig cfg = makeConfig({blocks, 1, 1}, {256, 1, 1});
  cfg.kernelName = k.kernelName;
  cfg.opNames = k.opNames;
  cfg.sharedBytes = std::max<size_t>(k.staticSharedBytes, 128 * 4);
  cfg.throwOnError = false;
  NamedRun r;
  r.out.assign(blocks * 128, -1);
  cfg.globalBuffers.emplace_back(r.out.data(), r.out.size() * sizeof(int32_t));
  int32_t* pout = r.out.data();
  void* args[] = {&pout};
  r.rep = launch(k.threadFn, args, cfg);
  return r;
}

}  // namespace

TEST_CASE("bar.sync 1, 128 syncs four consumer warps while the producer warps have exited", "[emu][barrier]") {
  NamedRun r = runNamedBarrierModule("call void @llvm.nvvm.barrier.cta.sync.aligned.count(i32 1, i32 128)", 2);
  INFO(r.rep.summary());
  CHECK_FALSE(r.rep.hasErrors());
  for (uint32_t b = 0; b < 2; ++b)
    for (int32_t c = 0; c < 128; ++c) {
      // The neighbour's second value: its first read (of c + 2's w0) + 1000.
      const int32_t want = 3 * (128 + (c + 2) % 128) + 1000;
      REQUIRE(r.out[b * 128 + c] == want);
    }

  // Without the barrier between the first read and the second write, the
  // neighbour's write races with this thread's read: the named barriers
  // are what orders the accesses.
  NamedRun racy = runNamedBarrierModule("", 1);
  CHECK(racy.rep.count(IssueKind::SharedRace) > 0);
  CHECK(hasIssue(racy.rep, IssueKind::SharedRace, "named.cpp:2"));
}

TEST_CASE("named barriers: counts, ids and sites", "[emu][barrier]") {
  LaunchConfig cfg = makeConfig({1, 1, 1}, {256, 1, 1});
  cfg.throwOnError = false;
  cfg.sharedBytes = 256 * 4;
  std::vector<int32_t> out(256, -1);
  int32_t* pout = out.data();
  void* args[] = {&pout};

  // Warp 0 (a producer) never reaches barrier 1; the other seven warps
  // meet there from two different sites, which is the same named barrier.
  // Warps 1-4 then rewrite their values between two rounds of barrier 2
  // (count 128) while warps 5-7 pass on; a whole-block barrier at the end
  // still completes (warp 0 has exited).
  LaunchReport rep = launch(
      +[](void* const* a) {
        auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
        const int32_t t = linearThread();
        if (t < 32) return;
        sstore(&sh[t], t + 7, 0);
        if (t % 2)
          tessera_emu_barrier_count(10, 1, 224);
        else
          tessera_emu_barrier_count(11, 1, 224);
        int32_t v = sload(&sh[t == 255 ? 160 : t + 1], 1);
        if (t < 160) {
          tessera_emu_barrier_count(12, 2, 128);  // warps 1-4 have read
          sstore(&sh[t], t * 100, 2);
          tessera_emu_barrier_count(14, 2, 128);
          v += sload(&sh[t == 159 ? 32 : t + 1], 3);
        }
        tessera_emu_barrier(13);
        param<int32_t*>(a, 0)[t] = v;
      },
      args, cfg);
  INFO(rep.summary());
  CHECK_FALSE(rep.hasErrors());
  for (int32_t t = 0; t < 256; ++t) {
    const int32_t first = (t == 255 ? 160 : t + 1) + 7;
    const int32_t want = t < 32 ? -1 : t < 160 ? first + (t == 159 ? 32 : t + 1) * 100 : first;
    REQUIRE(out[t] == want);
  }

  // Bad counts and ids, and one barrier used with two counts in one phase.
  cfg.opNames = {"bar.sync 1, 100 @ bad.cpp:1", "bar.sync 1, 256 @ bad.cpp:2", "bar.sync 1, 128 @ bad.cpp:3",
                 "bar.sync 16, 128 @ bad.cpp:4", "bar.sync 0 @ bad.cpp:5"};
  rep = launch(+[](void* const*) { tessera_emu_barrier_count(0, 1, 100); }, nullptr, cfg);
  CHECK(rep.count(IssueKind::DivergentBarrier) == 1);
  CHECK(rep.count(IssueKind::Deadlock) == 0);
  CHECK(hasIssue(rep, IssueKind::DivergentBarrier,
                 "bar.sync 1, 100 (op #0 'bar.sync 1, 100 @ bad.cpp:1'): the thread count must be a positive "
                 "multiple of the warp size (32) and at most the block's 256 threads"));
  rep = launch(+[](void* const*) { tessera_emu_barrier_count(0, 1, 512); }, nullptr, cfg);
  CHECK(hasIssue(rep, IssueKind::DivergentBarrier, "bar.sync 1, 512"));
  rep = launch(+[](void* const*) { tessera_emu_barrier_count(0, 1, 0); }, nullptr, cfg);
  CHECK(hasIssue(rep, IssueKind::DivergentBarrier, "bar.sync 1, 0"));
  rep = launch(+[](void* const*) { tessera_emu_barrier_count(3, 16, 128); }, nullptr, cfg);
  CHECK(hasIssue(rep, IssueKind::DivergentBarrier,
                 "bar.sync 16, 128 (op #3 'bar.sync 16, 128 @ bad.cpp:4'): "
                 "the barrier id must be in 0..15"));
  rep = launch(
      +[](void* const*) {
        if (linearThread() < 128)
          tessera_emu_barrier_count(1, 1, 256);
        else
          tessera_emu_barrier_count(2, 1, 128);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::DivergentBarrier) == 1);
  CHECK(hasIssue(rep, IssueKind::DivergentBarrier, "barrier 1 used with counts 256 and 128"));
  // The whole-block barrier is barrier 0: a count there in the same phase
  // is the same kind of error.
  rep = launch(
      +[](void* const*) {
        if (linearThread() < 128)
          tessera_emu_barrier(4);
        else
          tessera_emu_barrier_count(2, 0, 128);
      },
      nullptr, cfg);
  CHECK(hasIssue(rep, IssueKind::DivergentBarrier, "barrier 0 used with counts none (whole block) and 128"));
}

TEST_CASE("a named barrier that can never fill is a deadlock naming it", "[emu][barrier]") {
  LaunchConfig cfg = makeConfig({2, 1, 1}, {256, 1, 1});
  cfg.throwOnError = false;
  cfg.opNames = {"bar.sync 1, 256 @ never.cpp:7"};
  // Exited threads do not count toward a counted barrier: 128 arrive at
  // bar.sync 1, 256 and the others are gone.
  LaunchReport rep = launch(
      +[](void* const*) {
        if (linearThread() < 128) return;
        tessera_emu_barrier_count(0, 1, 256);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::Deadlock) == 2);
  REQUIRE(rep.issues.size() == 1);
  CHECK(rep.issues[0].kind == IssueKind::Deadlock);
  CHECK_THAT(rep.issues[0].message,
             Catch::Contains("128 threads wait at a barrier") &&
                 Catch::Contains("barrier 1 (bar.sync 1, 256, first at op #0 'bar.sync 1, 256 @ never.cpp:7'): 128 of "
                                 "256 threads arrived, and only 128 threads are live (128 exited)"));

  // The same count with every thread arriving completes (and a thread that
  // arrives twice as often as the others waits in the next phase for ever).
  rep = launch(+[](void* const*) { tessera_emu_barrier_count(0, 1, 256); }, nullptr, cfg);
  CHECK_FALSE(rep.hasErrors());
  rep = launch(
      +[](void* const*) {
        tessera_emu_barrier_count(0, 1, 128);
        if (linearThread() < 64) tessera_emu_barrier_count(0, 1, 128);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::Deadlock) == 2);
  CHECK(hasIssue(rep, IssueKind::Deadlock, "64 of 128 threads arrived"));
}

TEST_CASE("setmaxnreg is checked and otherwise does nothing", "[emu][barrier]") {
  auto kernel = [](const std::string& body, const std::string& decls = "") {
    return std::string(kNvHead) + decls +
           "define ptx_kernel void @regs(ptr addrspace(1) %out) {\n"
           "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n" +
           body +
           "  %v = mul i32 %tid, 7\n"
           "  %p = getelementptr inbounds i32, ptr addrspace(1) %out, i32 %tid\n"
           "  store i32 %v, ptr addrspace(1) %p, align 4\n"
           "  ret void\n}\n"
           "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n";
  };
  const std::string intrinsics =
      "declare void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32 immarg)\n"
      "declare void @llvm.nvvm.setmaxnreg.dec.sync.aligned.u32(i32 immarg)\n";
  auto run = [](const std::string& text) {
    tessera::codegen::EmuKernel k = tessera::codegen::compileForEmulator(text, false, 32, hookTable());
    LaunchConfig cfg = makeConfig({1, 1, 1}, {64, 1, 1});
    cfg.opNames = k.opNames;
    std::vector<int32_t> out(64, -1);
    cfg.globalBuffers.emplace_back(out.data(), out.size() * sizeof(int32_t));
    int32_t* pout = out.data();
    void* args[] = {&pout};
    LaunchReport rep = launch(k.threadFn, args, cfg);
    CHECK_FALSE(rep.hasErrors());
    return out;
  };
  // Inline assembly with the count as a literal and as an immediate
  // operand, and the intrinsics.
  std::vector<int32_t> out =
      run(kernel("  call void asm sideeffect \"setmaxnreg.dec.sync.aligned.u32 40;\", \"~{memory}\"()\n"
                 "  call void asm sideeffect \"setmaxnreg.inc.sync.aligned.u32 $0;\\0A\", \"n\"(i32 232)\n"
                 "  call void @llvm.nvvm.setmaxnreg.dec.sync.aligned.u32(i32 24)\n"
                 "  call void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32 256)\n",
                 intrinsics));
  for (int32_t t = 0; t < 64; ++t) REQUIRE(out[t] == 7 * t);

  auto rejected = [&](const std::string& body, const std::string& what) {
    INFO(body);
    std::string text = kernel(body, intrinsics);
    CHECK_THROWS_AS(tessera::codegen::compileForEmulator(text, false, 32, hookTable()), tessera::CompileError);
    CHECK_THROWS_WITH(tessera::codegen::compileForEmulator(text, false, 32, hookTable()),
                      Catch::Contains(what + ": the register count must be a multiple of 8 in [24, 256]"));
  };
  rejected("  call void asm sideeffect \"setmaxnreg.inc.sync.aligned.u32 41;\", \"\"()\n",
           "setmaxnreg.inc.sync.aligned.u32 41");
  rejected("  call void asm sideeffect \"setmaxnreg.dec.sync.aligned.u32 $0;\", \"n\"(i32 41)\n",
           "setmaxnreg.dec.sync.aligned.u32 41");
  rejected("  call void asm sideeffect \"setmaxnreg.inc.sync.aligned.u32 264;\", \"\"()\n",
           "setmaxnreg.inc.sync.aligned.u32 264");
  rejected("  call void asm sideeffect \"setmaxnreg.dec.sync.aligned.u32 16;\", \"\"()\n",
           "setmaxnreg.dec.sync.aligned.u32 16");
}

TEST_CASE("warp collective misuse is reported", "[emu]") {
  LaunchConfig cfg = makeConfig({1, 1, 1}, {32, 1, 1});
  cfg.throwOnError = false;
  // A lane exits while the others wait for it in a full-mask shuffle.
  LaunchReport rep = launch(
      +[](void* const*) {
        if (tessera_emu_lane_id() == 7) return;
        tessera_emu_shfl_sync(TESSERA_EMU_SHFL_DOWN, 0xFFFFFFFF, 1, 1, 31);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::CollectiveMisuse) == 1);
  REQUIRE(rep.issues.size() == 1);
  CHECK_THAT(rep.issues[0].message, Catch::Contains("exited"));

  // The executing lane is not in its own member mask.
  rep = launch(+[](void* const*) { tessera_emu_vote_sync(TESSERA_EMU_VOTE_ALL, 0x1, 1); }, nullptr, cfg);
  CHECK(rep.count(IssueKind::CollectiveMisuse) == 1);

  // Lanes of one collective with different masks.
  rep = launch(
      +[](void* const*) {
        uint64_t m = tessera_emu_lane_id() == 0 ? 0x3 : 0xFFFFFFFF;
        tessera_emu_ballot_sync(m, 1);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::CollectiveMisuse) == 1);
}

TEST_CASE("kernel exceptions and bad launches", "[emu]") {
  LaunchConfig cfg = makeConfig({1, 1, 1}, {8, 1, 1});
  cfg.throwOnError = false;
  LaunchReport rep = launch(
      +[](void* const*) {
        if (linearThread() == 5) throw std::runtime_error("boom in thread five");
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::KernelException) == 1);
  REQUIRE(rep.issues.size() == 1);
  CHECK_THAT(rep.issues[0].message, Catch::Contains("boom in thread five") && Catch::Contains("thread (5,0,0)"));

  auto k = +[](void* const*) {};
  LaunchConfig bad = makeConfig({1, 1, 1}, {1025, 1, 1});
  CHECK_THROWS_AS(launch(k, nullptr, bad), tessera::LaunchError);
  bad = makeConfig({0, 1, 1}, {32, 1, 1});
  CHECK_THROWS_AS(launch(k, nullptr, bad), tessera::LaunchError);
  bad = makeConfig({1, 1, 1}, {32, 1, 1}, Vendor::NVIDIA, 64);
  CHECK_THROWS_AS(launch(k, nullptr, bad), tessera::LaunchError);
  CHECK_THROWS_AS(launch(nullptr, nullptr, makeConfig({1, 1, 1}, {1, 1, 1})), tessera::LaunchError);
  CHECK_THROWS_AS(tessera_emu_thread_id_x(), EmulatorError);
}

namespace {
// wgmma.mma_async m64n8k16 (f16) by four warps: A all ones from the lanes'
// registers, B^T (8 x 16, K-major, unswizzled core matrices: k 8-15 one
// LBO = 128 bytes on) written to shared memory by thread 0, so D(r, c) is
// the sum over k of B(k, c). With `writeEarly`, thread 0 overwrites a byte
// of B after issuing the MMA and before its wait retires it.
struct WgmmaParams {
  int writeEarly;
  float* out;  // 128 threads x 4 accumulators
};
uint16_t halfOf(int v) {  // small non-negative integers
  if (v == 0) return 0;
  int e = 0;
  while ((2 << e) <= v) ++e;
  return static_cast<uint16_t>((e + 15) << 10 | ((v << (10 - e)) & 0x3FF));
}
void wgmmaKernel(void* const* args) {
  auto& p = param<WgmmaParams>(args, 0);
  auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
  const int t = linearThread();
  if (t == 0)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k)
        sstore(reinterpret_cast<uint16_t*>(sh + n * 16 + (k / 8) * 128 + (k % 8) * 2), halfOf((n + k) % 3), 0);
  tessera_emu_barrier(1);
  const uint32_t one2 = 0x3C003C00u;  // two f16 ones
  uint32_t a[4] = {one2, one2, one2, one2};
  float c[4] = {0, 0, 0, 0}, d[4];
  const uint64_t desc = 0 | (uint64_t{128 >> 4} << 16) | (uint64_t{256 >> 4} << 32);  // start 0, no swizzle
  tessera_emu_wgmma(8, a, desc, c, d, 2);
  tessera_emu_wgmma_commit();
  if (p.writeEarly && t == 0) sstore(reinterpret_cast<uint16_t*>(sh + 130), uint16_t{0}, 3);
  tessera_emu_wgmma_wait(0);
  for (int i = 0; i < 4; ++i) gstore(p.out + t * 4 + i, d[i], 4);
}
}  // namespace

TEST_CASE("wgmma reads its B through the descriptor and keeps it in flight until the wait", "[emu][wgmma]") {
  for (int early : {0, 1}) {
    std::vector<float> out(128 * 4, -1.0f);
    WgmmaParams p{early, out.data()};
    void* args[] = {&p};
    LaunchConfig cfg = makeConfig({1, 1, 1}, {128, 1, 1});
    cfg.sharedBytes = 512;
    cfg.throwOnError = false;
    cfg.opNames = {"store B", "barrier", "wgmma at mma.cpp:7", "store B early at mma.cpp:9", "store out"};
    cfg.globalBuffers = {{out.data(), out.size() * sizeof(float)}};
    LaunchReport rep = launch(&wgmmaKernel, args, cfg);
    INFO(rep.summary());
    if (!early) {
      CHECK_FALSE(rep.hasErrors());
    } else {
      REQUIRE(rep.count(IssueKind::SharedRace) >= 1);
      CHECK_THAT(rep.issues[0].message, Catch::Contains("store B early at mma.cpp:9") &&
                                            Catch::Contains("wgmma.mma_async / tcgen05.mma read") &&
                                            Catch::Contains("wgmma at mma.cpp:7") &&
                                            Catch::Contains("no wgmma.wait_group has retired its group"));
    }
    // Every warp's 16 rows (the values were read at the issue).
    for (int th = 0; th < 128; ++th) {
      const int tq = th % 32 % 4;
      for (int i = 0; i < 4; ++i) {
        const int col = 2 * tq + i % 2;
        float want = 0;
        for (int k = 0; k < 16; ++k) want += float((col + k) % 3);
        INFO("thread " << th << " accumulator " << i);
        CHECK(out[size_t(th * 4 + i)] == want);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// mbarrier and TMA tile loads, called as codegen/nvptx/NVPTXTma.h's protocol
// has them: thread 0 initialises the barrier (count 1), announces the box's
// bytes, issues the copy and arrives; every thread waits with try_wait.
namespace {
constexpr uint32_t kTmaDst = 1024;  // aligned for every swizzle (8 x 128 bytes)
const std::vector<std::string> kTmaOps = {
    "mbarrier.init at tma.cpp:1", "barrier at tma.cpp:2",    "expect_tx at tma.cpp:3",
    "tma load at tma.cpp:4",      "early read at tma.cpp:5", "arrive at tma.cpp:6",
    "try_wait at tma.cpp:7",      "read box at tma.cpp:8",   "store out at tma.cpp:9"};
struct TmaParams {
  const TensorMap* map;
  int32_t c[3];
  unsigned char* out;   // the box read back from shared memory, element by element in box order
  int32_t extraTx = 0;  // bytes announced beyond the box's
  int32_t mode = 0;     // 0: as the protocol; 1: thread 5 reads the box before the arrive;
                        // 2: nobody arrives; 3: nobody arrives or waits
  uint32_t dst = kTmaDst;
};
uint64_t boxElems(const TensorMap& m) { return uint64_t{m.box[0]} * m.box[1] * (m.rank == 3 ? m.box[2] : 1); }

// The shared offset of byte `b` of a box at `dst`, written as CUTLASS's
// Swizzle<B, 4, 3> (B = 1, 2, 3 for 32, 64, 128 bytes): the bits 7.. of the
// address, masked, are XORed into bits 4...
uint64_t swizzledOffset(uint64_t dst, uint64_t b, uint32_t swizzleBytes) {
  const uint64_t a = dst + b;
  if (!swizzleBytes) return a;
  const uint64_t bits = swizzleBytes == 32 ? 1 : swizzleBytes == 64 ? 2 : 3;
  const uint64_t yyy = ((uint64_t{1} << bits) - 1) << 7;
  return a ^ ((a & yyy) >> 3);
}

void tmaKernel(void* const* args) {
  const TmaParams& p = param<TmaParams>(args, 0);
  auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
  void* bar = sh + 8;
  const int32_t t = linearThread(), n = blockThreads();
  const TensorMap& m = *p.map;
  const uint64_t elems = boxElems(m), E = m.elemBytes;
  if (t == 0) tessera_emu_mbarrier_init(bar, 1, 0);
  tessera_emu_barrier(1);
  if (t == 0) {
    tessera_emu_mbarrier_expect_tx(bar, static_cast<int32_t>(elems * E) + p.extraTx, 2);
    tessera_emu_tma_load(sh + p.dst, p.map, static_cast<int32_t>(m.rank), p.c[0], p.c[1], p.c[2], bar, 3);
  }
  if (p.mode == 1) {
    tessera_emu_barrier(1);
    if (t == 5) (void)sload(reinterpret_cast<uint32_t*>(sh + p.dst + 32), 4);
    tessera_emu_barrier(1);
  }
  if (p.mode == 3) return;
  if (t == 0 && p.mode != 2) tessera_emu_mbarrier_arrive(bar, 5);
  while (!tessera_emu_mbarrier_try_wait(bar, 0, 6)) {
  }
  for (uint64_t e = static_cast<uint64_t>(t); e < elems; e += static_cast<uint64_t>(n)) {
    const void* s =
        tessera_emu_shared_access(sh + swizzledOffset(p.dst, e * E, m.swizzleBytes), E, TESSERA_EMU_LOAD, 7);
    std::memcpy(tessera_emu_global_access(p.out + e * E, E, TESSERA_EMU_STORE, 8), s, E);
  }
}

LaunchConfig tmaConfig(uint32_t threads = 64) {
  LaunchConfig cfg = makeConfig({1, 1, 1}, {threads, 1, 1});
  cfg.sharedBytes = 4096;
  cfg.opNames = kTmaOps;
  cfg.throwOnError = false;
  return cfg;
}

// A 20 x 48 f16 tensor in rows of 56 elements (the pitch is wider than the
// tensor: columns 48..55 exist in memory but are outside it).
struct Tensor2d {
  static constexpr int kRows = 20, kCols = 48, kPitch = 56;
  std::vector<uint16_t> data = std::vector<uint16_t>(kRows * kPitch);
  Tensor2d() {
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kPitch; ++c) data[size_t(r * kPitch + c)] = static_cast<uint16_t>(r * 64 + c + 1);
  }
  TensorMap map(uint32_t box0, uint32_t box1, uint32_t swizzle) const {
    TensorMap m;
    m.global = reinterpret_cast<uintptr_t>(data.data());
    m.rank = 2;
    m.elemBytes = 2;
    m.dims[0] = kCols;
    m.dims[1] = kRows;
    m.strides[0] = 2;
    m.strides[1] = kPitch * 2;
    m.box[0] = box0;
    m.box[1] = box1;
    m.swizzleBytes = swizzle;
    return m;
  }
  uint16_t at(int64_t r, int64_t c) const {  // zero outside the tensor, as TMA fills
    return r < 0 || r >= kRows || c < 0 || c >= kCols ? 0 : data[size_t(r * kPitch + c)];
  }
};
}  // namespace

TEST_CASE("TMA 2-D loads with 32/64/128-byte swizzles zero-fill outside the tensor", "[emu][tma]") {
  Tensor2d tensor;
  for (uint32_t swizzle : {64u, 32u, 128u}) {
    const uint32_t box0 = swizzle / 2, box1 = 16;  // rows of exactly `swizzle` bytes
    const TensorMap map = tensor.map(box0, box1, swizzle);
    // Partly outside the tensor: rows above it, and columns right of it (or left of it).
    const int32_t c0 = swizzle == 32 ? -8 : 24, c1 = -3;
    std::vector<uint16_t> out(size_t{box0} * box1, 0xBEEF);
    TmaParams p{&map, {c0, c1, 0}, reinterpret_cast<unsigned char*>(out.data())};
    void* args[] = {&p};
    LaunchConfig cfg = tmaConfig();
    cfg.globalBuffers = {{tensor.data.data(), tensor.data.size() * 2}, {out.data(), out.size() * 2}};
    LaunchReport rep = launch(&tmaKernel, args, cfg);
    INFO("swizzle " << swizzle << ": " << rep.summary());
    CHECK_FALSE(rep.hasErrors());  // the waiters read the box without a block barrier: no race
    for (uint32_t y = 0; y < box1; ++y)
      for (uint32_t x = 0; x < box0; ++x) {
        INFO("box element (" << x << ", " << y << ")");
        REQUIRE(out[y * box0 + x] == tensor.at(int64_t{c1} + y, int64_t{c0} + x));
      }
  }
}

TEST_CASE("TMA 3-D loads without swizzle lay the box out densely", "[emu][tma]") {
  // A 5 x 6 x 24 f32 tensor; boxes of 3 x 4 x 8 at two corners.
  constexpr int X = 24, Y = 6, Z = 5;
  std::vector<uint32_t> data(X * Y * Z);
  for (int z = 0; z < Z; ++z)
    for (int y = 0; y < Y; ++y)
      for (int x = 0; x < X; ++x) data[size_t((z * Y + y) * X + x)] = uint32_t(z * 10000 + y * 100 + x + 1);
  TensorMap map;
  map.global = reinterpret_cast<uintptr_t>(data.data());
  map.rank = 3;
  map.elemBytes = 4;
  map.dims[0] = X, map.dims[1] = Y, map.dims[2] = Z;
  map.strides[0] = 4, map.strides[1] = X * 4, map.strides[2] = X * Y * 4;
  map.box[0] = 8, map.box[1] = 4, map.box[2] = 3;
  for (std::array<int32_t, 3> c : {std::array<int32_t, 3>{20, 4, 3}, std::array<int32_t, 3>{-2, -1, -1}}) {
    std::vector<uint32_t> out(8 * 4 * 3, 0xDEADBEEF);
    TmaParams p{&map, {c[0], c[1], c[2]}, reinterpret_cast<unsigned char*>(out.data())};
    p.dst = 128;
    void* args[] = {&p};
    LaunchConfig cfg = tmaConfig(32);
    cfg.globalBuffers = {{data.data(), data.size() * 4}, {out.data(), out.size() * 4}};
    LaunchReport rep = launch(&tmaKernel, args, cfg);
    INFO(rep.summary());
    CHECK_FALSE(rep.hasErrors());
    for (int z = 0; z < 3; ++z)
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 8; ++x) {
          const int gx = c[0] + x, gy = c[1] + y, gz = c[2] + z;
          const bool in = gx >= 0 && gx < X && gy >= 0 && gy < Y && gz >= 0 && gz < Z;
          INFO("box element (" << x << ", " << y << ", " << z << ")");
          REQUIRE(out[size_t((z * 4 + y) * 8 + x)] == (in ? data[size_t((gz * Y + gy) * X + gx)] : 0u));
        }
  }
}

TEST_CASE("reading a TMA destination before its phase completes is a race naming the copy", "[emu][tma]") {
  Tensor2d tensor;
  const TensorMap map = tensor.map(32, 16, 64);
  std::vector<uint16_t> out(32 * 16);
  TmaParams p{&map, {0, 0, 0}, reinterpret_cast<unsigned char*>(out.data())};
  p.mode = 1;
  void* args[] = {&p};
  LaunchConfig cfg = tmaConfig();
  cfg.globalBuffers = {{tensor.data.data(), tensor.data.size() * 2}, {out.data(), out.size() * 2}};
  LaunchReport rep = launch(&tmaKernel, args, cfg);
  INFO(rep.summary());
  CHECK(rep.count(IssueKind::SharedRace) == 1);
  REQUIRE(rep.issues.size() == 1);
  const Issue& is = rep.issues[0];
  CHECK(is.opId == 4);
  CHECK(is.otherOpId == 3);
  CHECK(is.thread[0] == 5);
  CHECK(is.otherThread[0] == 0);
  CHECK_THAT(is.message, Catch::Contains("early read at tma.cpp:5") && Catch::Contains("tma load at tma.cpp:4") &&
                             Catch::Contains("conflicts with a TMA load") &&
                             Catch::Contains("the phase of its mbarrier has not completed"));
  // Still a correct result once the thread waited.
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 32; ++x) REQUIRE(out[size_t(y * 32 + x)] == tensor.at(y, x));
}

TEST_CASE("an mbarrier phase that cannot complete is a deadlock naming the barrier and what it lacks", "[emu][tma]") {
  Tensor2d tensor;
  const TensorMap map = tensor.map(32, 16, 64);
  std::vector<uint16_t> out(32 * 16);
  LaunchConfig cfg = tmaConfig();
  cfg.globalBuffers = {{tensor.data.data(), tensor.data.size() * 2}, {out.data(), out.size() * 2}};
  TmaParams p{&map, {0, 0, 0}, reinterpret_cast<unsigned char*>(out.data())};
  void* args[] = {&p};
  // The one deadlock report of a launch, its message.
  auto deadlock = [](const LaunchReport& rep) {
    INFO(rep.summary());
    CHECK(rep.count(IssueKind::Deadlock) == 1);
    REQUIRE(rep.issues.size() == 1);
    return rep.issues[0].message;
  };

  SECTION("expect_tx announces more bytes than the copies deliver") {
    p.extraTx = 64;
    const std::string msg = deadlock(launch(&tmaKernel, args, cfg));
    CHECK_THAT(msg, Catch::Contains("64 on mbarriers") && Catch::Contains("mbarrier at shared offset 8") &&
                        Catch::Contains("mbarrier.init at tma.cpp:1") && Catch::Contains("parity 0") &&
                        Catch::Contains("lacks 64 bytes of transactions") &&
                        Catch::Contains("expect_tx announced 64 bytes more than the copies delivered"));
    CHECK_THAT(msg, !Catch::Contains("arrivals"));
  }
  SECTION("nobody arrives") {
    p.mode = 2;
    const std::string msg = deadlock(launch(&tmaKernel, args, cfg));
    CHECK_THAT(msg, Catch::Contains("mbarrier at shared offset 8") && Catch::Contains("lacks 1 of its 1 arrivals") &&
                        !Catch::Contains("bytes of transactions"));
  }
  SECTION("a wait on a barrier nobody ever arrives at, with no copy") {
    LaunchReport rep = launch(
        +[](void* const*) {
          auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
          if (linearThread() == 0) tessera_emu_mbarrier_init(sh + 16, 2, 0);
          tessera_emu_barrier(1);
          while (!tessera_emu_mbarrier_try_wait(sh + 16, 0, 6)) {
          }
        },
        nullptr, cfg);
    CHECK_THAT(deadlock(rep), Catch::Contains("64 threads wait on the mbarrier at shared offset 16") &&
                                  Catch::Contains("lacks 2 of its 2 arrivals"));
  }
}

namespace {
// Double buffering over 8 tiles of a 64 x 16 f32 tensor: tile i goes to
// buffer i % 2 through barrier i % 2, so each barrier serves 4 phases and
// the wait for tile i uses parity (i / 2) & 1. Tile i + 1 is issued before
// tile i is read; a block barrier after the reads frees the buffer.
struct PipeParams {
  const TensorMap* map;
  float* out;  // the 8 tiles as read back, 128 floats each
};
void pipelineKernel(void* const* args) {
  const PipeParams& p = param<PipeParams>(args, 0);
  auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
  const int32_t t = linearThread();
  void* bars[2] = {sh, sh + 8};
  unsigned char* bufs[2] = {sh + 1024, sh + 1024 + 512};
  auto issue = [&](int tile) {
    tessera_emu_mbarrier_expect_tx(bars[tile % 2], 512, 2);
    tessera_emu_tma_load(bufs[tile % 2], p.map, 2, 0, tile * 8, 0, bars[tile % 2], 3);
    tessera_emu_mbarrier_arrive(bars[tile % 2], 5);
  };
  if (t == 0) {
    tessera_emu_mbarrier_init(bars[0], 1, 0);
    tessera_emu_mbarrier_init(bars[1], 1, 0);
  }
  tessera_emu_barrier(1);
  if (t == 0) issue(0);
  for (int tile = 0; tile < 8; ++tile) {
    if (t == 0 && tile + 1 < 8) issue(tile + 1);
    while (!tessera_emu_mbarrier_try_wait(bars[tile % 2], (tile / 2) & 1, 6)) {
    }
    for (int e = t; e < 128; e += 64) {
      // 64-byte swizzle: rows of 16 floats.
      const float v = sload(reinterpret_cast<float*>(sh + swizzledOffset(1024 + (tile % 2) * 512, e * 4, 64)), 7);
      gstore(&p.out[tile * 128 + e], v, 8);
    }
    tessera_emu_barrier(1);
  }
}
}  // namespace

TEST_CASE("two mbarriers reused over four phases each, waited on by parity", "[emu][tma]") {
  std::vector<float> data(64 * 16), out(8 * 128, -1.0f);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i) * 0.5f + 1.0f;
  TensorMap map;
  map.global = reinterpret_cast<uintptr_t>(data.data());
  map.rank = 2;
  map.elemBytes = 4;
  map.dims[0] = 16, map.dims[1] = 64;
  map.strides[0] = 4, map.strides[1] = 64;
  map.box[0] = 16, map.box[1] = 8;
  map.swizzleBytes = 64;
  PipeParams p{&map, out.data()};
  void* args[] = {&p};
  LaunchConfig cfg = tmaConfig();
  cfg.grid[0] = 2;  // the second block starts with fresh barriers
  cfg.globalBuffers = {{data.data(), data.size() * 4}, {out.data(), out.size() * 4}};
  LaunchReport rep = launch(&pipelineKernel, args, cfg);
  INFO(rep.summary());
  CHECK_FALSE(rep.hasErrors());
  for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == data[i]);
}

TEST_CASE("mbarrier and TMA misuse is reported naming the op", "[emu][tma]") {
  Tensor2d tensor;
  std::vector<uint16_t> out(64 * 16);
  LaunchConfig cfg = tmaConfig();
  cfg.globalBuffers = {{tensor.data.data(), tensor.data.size() * 2}, {out.data(), out.size() * 2}};
  auto run = [&](const TensorMap& map, TmaParams p) {
    p.map = &map;
    p.out = reinterpret_cast<unsigned char*>(out.data());
    void* args[] = {&p};
    return launch(&tmaKernel, args, cfg);
  };
  auto only = [](const LaunchReport& rep, IssueKind k, int32_t op, const std::string& text) {
    INFO(rep.summary());
    CHECK(rep.count(k) == 1);
    CHECK(rep.count(IssueKind::Deadlock) == 0);
    REQUIRE(rep.issues.size() == 1);
    CHECK(rep.issues[0].opId == op);
    CHECK_THAT(rep.issues[0].message, Catch::Contains(text) && Catch::Contains(kTmaOps[size_t(op)]));
  };
  SECTION("a destination not 128-byte aligned") {
    TmaParams p{};
    p.dst = kTmaDst + 64;
    only(run(tensor.map(8, 16, 0), p), IssueKind::AsyncCopyMisuse, 3, "not 128-byte aligned");
  }
  SECTION("a swizzled destination not aligned to 8 x the swizzle") {
    TmaParams p{};
    p.dst = kTmaDst + 128;
    only(run(tensor.map(32, 16, 64), p), IssueKind::AsyncCopyMisuse, 3, "not 512-byte aligned");
  }
  SECTION("box rows that do not match the swizzle") {
    only(run(tensor.map(16, 16, 64), TmaParams{}), IssueKind::AsyncCopyMisuse, 3, "under a 64-byte swizzle");
  }
  SECTION("copies delivering more bytes than expect_tx announced") {
    TmaParams p{};
    p.extraTx = -16;
    only(run(tensor.map(32, 16, 64), p), IssueKind::AsyncCopyMisuse, 3, "expect_tx announced fewer bytes");
  }
  SECTION("a thread that exits before its copy is performed") {
    TmaParams p{};
    p.mode = 3;
    only(run(tensor.map(32, 16, 64), p), IssueKind::AsyncCopyMisuse, 3, "exits with 1 TMA copies");
  }
  SECTION("a box read beyond the registered buffer") {
    TensorMap map = tensor.map(32, 16, 0);
    map.dims[1] = 40;  // the buffer has 20 rows
    TmaParams p{};
    p.c[1] = 16;
    LaunchReport rep = run(map, p);
    INFO(rep.summary());
    // One per box row past the buffer's 20 that falls outside every
    // registered buffer: how many do depends on where the host placed the
    // other registered buffers (a row may land in one of them).
    CHECK(rep.count(IssueKind::GlobalOutOfBounds) >= 1);
    CHECK(rep.count(IssueKind::GlobalOutOfBounds) <= 12);
    REQUIRE(rep.issues.size() == 1);
    CHECK(rep.issues[0].opId == 3);
    CHECK_THAT(rep.issues[0].message,
               Catch::Contains("outside every registered global buffer") && Catch::Contains("tma load at tma.cpp:4"));
  }
  SECTION("an uninitialised barrier") {
    LaunchReport rep = launch(
        +[](void* const*) {
          auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
          tessera_emu_barrier(1);
          while (!tessera_emu_mbarrier_try_wait(sh + 24, 0, 6)) {
          }
        },
        nullptr, cfg);
    only(rep, IssueKind::AsyncCopyMisuse, 6, "mbarrier at shared offset 24, which no mbarrier.init has initialised");
  }
  SECTION("a barrier address not 8-byte aligned") {
    LaunchReport rep = launch(
        +[](void* const*) {
          auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
          if (linearThread() == 0) tessera_emu_mbarrier_init(sh + 4, 1, 0);
        },
        nullptr, cfg);
    only(rep, IssueKind::AsyncCopyMisuse, 0, "not 8-byte aligned");
  }
}

TEST_CASE("hook symbols are complete and distinct", "[emu]") {
  const auto& hooks = hookSymbols();
  CHECK(hooks.size() == 74);  // EmuHooks.def
  std::vector<std::string> names;
  for (const auto& [n, p] : hooks) {
    CHECK(std::string(n).rfind("tessera_emu_", 0) == 0);
    CHECK(p != nullptr);
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}

// ---------------------------------------------------------------------------
TEST_CASE("fiber switch cost (timing print)", "[emu][timing]") {
  constexpr int kBarriers = 200;
  LaunchConfig cfg = makeConfig({4, 1, 1}, {1024, 1, 1});
  cfg.countBankConflicts = false;
  auto t0 = std::chrono::steady_clock::now();
  LaunchReport rep = launch(
      +[](void* const*) {
        for (int i = 0; i < kBarriers; ++i) tessera_emu_barrier(-1);
      },
      nullptr, cfg);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The last thread to arrive at a barrier continues without a switch.
  CHECK(rep.fiberSwitches == 4ull * (1024 + kBarriers * 1023));
  std::printf("emulator: %llu fiber switches in %.3f s = %.1f ns per switch (barrier round trip)\n",
              static_cast<unsigned long long>(rep.fiberSwitches), s, s * 1e9 / double(rep.fiberSwitches));

  // The shape of a row softmax on 1024x1024: 1024 blocks x 1024 threads, a
  // few barriers and shared accesses per thread, on 2 host threads.
  LaunchConfig sm = makeConfig({1024, 1, 1}, {1024, 1, 1});
  sm.hostThreads = 2;
  sm.sharedBytes = 1024 * 4;
  t0 = std::chrono::steady_clock::now();
  rep = launch(
      +[](void* const*) {
        auto* sh = static_cast<float*>(tessera_emu_shared_base());
        int32_t t = tessera_emu_thread_id_x();
        sstore(&sh[t], float(t), 0);
        tessera_emu_barrier(1);
        float v = sload(&sh[t ^ 1], 2);
        tessera_emu_barrier(3);
        sstore(&sh[t], v, 4);
      },
      nullptr, sm);
  s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK_FALSE(rep.hasErrors());
  std::printf("emulator: 1M threads, 2 barriers + 3 checked shared accesses each, 2 host threads: %.3f s\n", s);
}

// TMA tile stores (codegen/nvptx/NVPTXTma.h's kTmaStore2d, the GEMM
// epilogue's): every thread writes its share of the box to shared memory,
// a barrier, then one thread stores the box; elements outside the tensor's
// dims are not written.
namespace {
struct TmaStoreParams {
  const TensorMap* map;
  int32_t c[2];
  uint32_t src = kTmaDst;
  bool lateWrite = false;  // thread 5 writes the box after the barrier: a race with the store's read
};

void tmaStoreKernel(void* const* args) {
  const TmaStoreParams& p = param<TmaStoreParams>(args, 0);
  auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
  const int32_t t = linearThread(), n = blockThreads();
  const uint64_t elems = uint64_t{p.map->box[0]} * p.map->box[1];
  for (uint64_t e = static_cast<uint64_t>(t); e < elems; e += static_cast<uint64_t>(n)) {
    const uint16_t v = static_cast<uint16_t>(0x4000 + e);
    std::memcpy(tessera_emu_shared_access(sh + p.src + 2 * e, 2, TESSERA_EMU_STORE, 7), &v, 2);
  }
  tessera_emu_barrier(1);
  if (p.lateWrite && t == 5) {
    const uint16_t v = 1;
    std::memcpy(tessera_emu_shared_access(sh + p.src, 2, TESSERA_EMU_STORE, 7), &v, 2);
  }
  if (t == 0) tessera_emu_tma_store(sh + p.src, p.map, p.c[0], p.c[1], 4);
}
}  // namespace

TEST_CASE("TMA 2-D stores write the box inside the tensor only, and their misuse is reported", "[emu][tma]") {
  auto run = [](Tensor2d& tensor, const TensorMap& map, TmaStoreParams p) {
    p.map = &map;
    void* args[] = {&p};
    LaunchConfig cfg = tmaConfig();
    cfg.globalBuffers = {{tensor.data.data(), tensor.data.size() * 2}};
    return launch(&tmaStoreKernel, args, cfg);
  };
  SECTION("clipped at the tensor's rows and columns") {
    Tensor2d tensor;
    const Tensor2d before;
    const TensorMap map = tensor.map(16, 8, 0);
    const int32_t c0 = 40, c1 = 16;  // columns 40..55 (48.. outside), rows 16..23 (20.. outside)
    LaunchReport rep = run(tensor, map, TmaStoreParams{nullptr, {c0, c1}});
    INFO(rep.summary());
    CHECK_FALSE(rep.hasErrors());
    for (int r = 0; r < Tensor2d::kRows; ++r)
      for (int c = 0; c < Tensor2d::kPitch; ++c) {
        const bool inBox = r >= c1 && r < c1 + 8 && c >= c0 && c < c0 + 16 && c < Tensor2d::kCols;
        const uint16_t want = inBox ? static_cast<uint16_t>(0x4000 + (r - c1) * 16 + (c - c0))
                                    : before.data[size_t(r * Tensor2d::kPitch + c)];
        INFO("element (" << r << ", " << c << ")");
        REQUIRE(tensor.data[size_t(r * Tensor2d::kPitch + c)] == want);
      }
  }
  auto only = [](const LaunchReport& rep, IssueKind k, const std::string& text) {
    INFO(rep.summary());
    REQUIRE(rep.issues.size() == 1);
    CHECK(rep.issues[0].kind == k);
    CHECK_THAT(rep.issues[0].message, Catch::Contains(text) && Catch::Contains(kTmaOps[4]));
  };
  SECTION("a write of the source after the writers' barrier races with the store's read") {
    Tensor2d tensor;
    TmaStoreParams p{nullptr, {0, 0}};
    p.lateWrite = true;
    // Whichever runs first, the report names the store (op #4) and the write.
    only(run(tensor, tensor.map(16, 8, 0), p), IssueKind::SharedRace, "with no barrier in between");
  }
  SECTION("a source off 128 bytes and a swizzled map are misuse") {
    Tensor2d tensor;
    TmaStoreParams p{nullptr, {0, 0}};
    p.src = kTmaDst + 64;
    only(run(tensor, tensor.map(16, 8, 0), p), IssueKind::AsyncCopyMisuse, "is not 128-byte aligned");
    only(run(tensor, tensor.map(32, 8, 64), TmaStoreParams{nullptr, {0, 0}}), IssueKind::AsyncCopyMisuse,
         "with a swizzled tensor map");
  }
}

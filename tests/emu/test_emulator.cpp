// Tests of the SIMT machine with hand-written "kernels" that call the hooks
// the way the compiler's rewritten GPU modules do.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "tessera/runtime/Emulator.h"

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

template <class T>
T sload(T* p, int op) {
  return *static_cast<T*>(tessera_emu_shared_access(p, sizeof(T), TESSERA_EMU_LOAD, op));
}
template <class T>
void sstore(T* p, T v, int op) {
  *static_cast<T*>(tessera_emu_shared_access(p, sizeof(T), TESSERA_EMU_STORE, op)) = v;
}
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
                                            Catch::Contains("wgmma.mma_async read") &&
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

TEST_CASE("hook symbols are complete and distinct", "[emu]") {
  const auto& hooks = hookSymbols();
  CHECK(hooks.size() == 37);
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

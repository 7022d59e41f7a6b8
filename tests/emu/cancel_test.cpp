// Cluster launch control on the SIMT machine: a kernel written in C++
// calling the hooks as a rewritten module does. A block asks for blocks
// that have not started; a cancelled block never runs, its id comes back
// in the response; the requests end when none is left; reading the
// response before its mbarrier phase completes is a race, and a request
// after a failed one is misuse.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/runtime/Emulator.h"
#include "tessera/support/EmuAbi.h"
#include "SharedAccess.h"

using namespace tessera::emu;
using tessera::emu::test::sload;

namespace {

enum Op { kInit, kBar, kExpect, kCancel, kArrive, kWait, kReadFlag, kReadX, kStore };

struct Params {
  int32_t* taken;        // per block: the tiles it took (its own and those it cancelled); -1: never ran
  int32_t* cancelledBy;  // per block: the block that cancelled it, -1 if none
  int mode = 0;          // 1: one more request after the failed one; 2: thread 5 reads before the wait
};

template <class T>
void gstore(T* p, T v) {
  *static_cast<T*>(tessera_emu_global_access(p, sizeof(T), TESSERA_EMU_STORE, kStore)) = v;
}

void cancelKernel(void* const* a) {
  const Params& p = **static_cast<Params* const*>(a[0]);
  auto* sh = static_cast<unsigned char*>(tessera_emu_shared_base());
  void* response = sh;  // 16 bytes, 16-byte aligned
  void* bar = sh + 16;
  const int32_t t = tessera_emu_thread_id_x(), me = tessera_emu_block_id_x();
  if (t == 0) tessera_emu_mbarrier_init(bar, 1, kInit);
  tessera_emu_barrier(kBar);
  int32_t took = 1, parity = 0;
  for (;;) {
    if (t == 0) {
      tessera_emu_mbarrier_expect_tx(bar, 16, kExpect);
      tessera_emu_clc_try_cancel(response, bar, kCancel);
    }
    if (p.mode == 2) {  // thread 5 reads while the response is in flight
      tessera_emu_barrier(kBar);
      if (t == 5) (void)sload(reinterpret_cast<int32_t*>(sh + 12), kReadFlag);
      tessera_emu_barrier(kBar);
    }
    if (t == 0) tessera_emu_mbarrier_arrive(bar, kArrive);
    while (!tessera_emu_mbarrier_try_wait(bar, parity, kWait)) {
    }
    parity ^= 1;
    const int32_t flag = sload(reinterpret_cast<int32_t*>(sh + 12), kReadFlag);
    const int32_t x = sload(reinterpret_cast<int32_t*>(sh), kReadX);
    tessera_emu_barrier(kBar);  // every thread read it before the next request
    if (flag != TESSERA_EMU_CLC_CANCELLED) break;
    ++took;
    if (t == 0) gstore(&p.cancelledBy[x], me);
  }
  if (p.mode == 1 && t == 0) {
    tessera_emu_mbarrier_expect_tx(bar, 16, kExpect);
    tessera_emu_clc_try_cancel(response, bar, kCancel);
  }
  if (t == 0) gstore(&p.taken[me], took);
}

struct Result {
  LaunchReport rep;
  std::vector<int32_t> taken, cancelledBy;
};

Result run(uint32_t blocks, unsigned hostThreads, int mode = 0) {
  Result r;
  r.taken.assign(blocks, -1);
  r.cancelledBy.assign(blocks, -1);
  Params p{r.taken.data(), r.cancelledBy.data(), mode};
  Params* pp = &p;
  void* args[] = {&pp};
  LaunchConfig c;
  c.grid[0] = blocks;
  c.block[0] = 32;
  c.sharedBytes = 64;
  c.hostThreads = hostThreads;
  c.kernelName = "cancel_kernel";
  c.opNames = {"mbarrier.init @ c.cpp:1", "bar.sync @ c.cpp:2", "expect_tx @ c.cpp:3",
               "try_cancel @ c.cpp:4",    "arrive @ c.cpp:5",   "try_wait @ c.cpp:6",
               "read flag @ c.cpp:7",     "read x @ c.cpp:8",   "store @ c.cpp:9"};
  c.globalBuffers = {{r.taken.data(), blocks * 4}, {r.cancelledBy.data(), blocks * 4}};
  c.throwOnError = false;
  r.rep = launch(&cancelKernel, args, c);
  return r;
}

bool hasIssue(const LaunchReport& rep, IssueKind kind, const std::string& text) {
  for (const auto& is : rep.issues)
    if (is.kind == kind && is.message.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("cluster launch control: one host thread's first block cancels every other", "[emu][clc]") {
  Result r = run(6, 1);
  INFO(r.rep.summary());
  CHECK(!r.rep.hasErrors());
  CHECK(r.rep.blocksCancelled == 5);
  CHECK_THAT(r.rep.summary(), Catch::Contains("6 blocks (5 cancelled)"));
  CHECK(r.taken == std::vector<int32_t>{6, -1, -1, -1, -1, -1});
  CHECK(r.cancelledBy == std::vector<int32_t>{-1, 0, 0, 0, 0, 0});
}

TEST_CASE("cluster launch control: each block runs or is cancelled, never both, never neither", "[emu][clc]") {
  for (int rep = 0; rep < 4; ++rep) {
    Result r = run(40, 2);
    INFO(r.rep.summary());
    CHECK(!r.rep.hasErrors());
    int64_t ran = 0, tiles = 0;
    for (uint32_t b = 0; b < 40; ++b) {
      INFO("block " << b);
      CHECK((r.taken[b] == -1) == (r.cancelledBy[b] != -1));
      if (r.taken[b] != -1) ++ran, tiles += r.taken[b];
      if (r.cancelledBy[b] != -1) CHECK(r.taken[r.cancelledBy[b]] > 1);
    }
    CHECK(tiles == 40);
    CHECK(uint64_t(40 - ran) == r.rep.blocksCancelled);
  }
}

TEST_CASE("cluster launch control: misuse and races are reported", "[emu][clc]") {
  SECTION("a request after a failed one") {
    Result r = run(3, 1, 1);
    INFO(r.rep.summary());
    CHECK(hasIssue(r.rep, IssueKind::AsyncCopyMisuse,
                   "clusterlaunchcontrol.try_cancel after a request of this block failed"));
  }
  SECTION("the response read before its phase completes") {
    Result r = run(3, 1, 2);
    INFO(r.rep.summary());
    CHECK(r.rep.count(IssueKind::SharedRace) >= 1);
  }
}

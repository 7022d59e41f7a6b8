// Thread-block clusters on the SIMT machine: kernels written in C++ calling
// the hooks as a rewritten module does (exchanges through mapa and the
// cluster barrier, every special register, the reports), and one NVPTX
// module with the real intrinsics run through the emulator's compile.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "../../codegen/emu/EmuCompile.h"
#include "tessera/runtime/Emulator.h"
#include "tessera/support/EmuAbi.h"
#include "tessera/support/Error.h"
#include "SharedAccess.h"

using namespace tessera::emu;

namespace {

LaunchConfig clusterConfig(std::array<uint32_t, 3> grid, std::array<uint32_t, 3> cluster, uint32_t threads = 32) {
  LaunchConfig c;
  std::copy(grid.begin(), grid.end(), c.grid);
  std::copy(cluster.begin(), cluster.end(), c.cluster);
  c.block[0] = threads;
  c.kernelName = "cluster_kernel";
  c.sharedBytes = 1024;
  c.opNames = {"store mine @ c.cpp:1", "load theirs @ c.cpp:2",  "store out @ c.cpp:3",
               "arrive @ c.cpp:4",     "wait @ c.cpp:5",         "mapa @ c.cpp:6",
               "bar.sync @ c.cpp:7",   "store theirs @ c.cpp:8", "load mine @ c.cpp:9"};
  c.throwOnError = false;
  return c;
}

enum Op { kStoreMine, kLoadTheirs, kStoreOut, kArrive, kWait, kMapa, kBarSync, kStoreTheirs, kLoadMine };

using tessera::emu::test::sload;
using tessera::emu::test::sstore;
template <class T>
T cload(T* p, int op) {
  return *static_cast<T*>(tessera_emu_cluster_access(p, sizeof(T), TESSERA_EMU_LOAD, op));
}
template <class T>
void cstore(T* p, T v, int op) {
  *static_cast<T*>(tessera_emu_cluster_access(p, sizeof(T), TESSERA_EMU_STORE, op)) = v;
}
template <class T>
void gstore(T* p, T v) {
  *static_cast<T*>(tessera_emu_global_access(p, sizeof(T), TESSERA_EMU_STORE, kStoreOut)) = v;
}
void clusterSync() {
  tessera_emu_cluster_arrive(kArrive, 0);
  tessera_emu_cluster_wait(kWait);
}
int32_t* remote(int32_t* p, int32_t rank) { return static_cast<int32_t*>(tessera_emu_mapa(p, rank, kMapa)); }
int64_t linearBlock() {
  return tessera_emu_block_id_x() +
         int64_t{tessera_emu_grid_dim_x()} *
             (tessera_emu_block_id_y() + int64_t{tessera_emu_grid_dim_y()} * tessera_emu_block_id_z());
}

bool hasIssue(const LaunchReport& rep, IssueKind kind, const std::string& text) {
  for (const auto& is : rep.issues)
    if (is.kind == kind && is.message.find(text) != std::string::npos) return true;
  return false;
}

// Every block writes rank * 1000 + block + thread into its own shared
// memory, meets the cluster, sums what every block of its cluster wrote for
// its thread, and meets the cluster again before exiting (so no block's
// shared memory goes away while another reads it).
void allGatherKernel(void* const* a) {
  int64_t* out = *static_cast<int64_t**>(a[0]);
  auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
  const int32_t t = tessera_emu_thread_id_x(), rank = tessera_emu_cluster_ctarank();
  sstore(&sh[t], rank * 1000 + static_cast<int32_t>(linearBlock()) * 10 + t, kStoreMine);
  clusterSync();
  int64_t sum = 0;
  for (int32_t r = 0; r < tessera_emu_cluster_nctarank(); ++r) sum += cload(remote(&sh[t], r), kLoadTheirs);
  clusterSync();
  gstore(&out[linearBlock() * tessera_emu_block_dim_x() + t], sum);
}

std::vector<int64_t> expectedAllGather(const LaunchConfig& cfg) {
  const uint32_t gx = cfg.grid[0], gy = cfg.grid[1], gz = cfg.grid[2], n = cfg.block[0];
  std::vector<int64_t> want(size_t{gx} * gy * gz * n);
  for (uint32_t z = 0; z < gz; ++z)
    for (uint32_t y = 0; y < gy; ++y)
      for (uint32_t x = 0; x < gx; ++x) {
        const uint32_t cx = x / cfg.cluster[0] * cfg.cluster[0], cy = y / cfg.cluster[1] * cfg.cluster[1],
                       cz = z / cfg.cluster[2] * cfg.cluster[2];
        for (uint32_t t = 0; t < n; ++t) {
          int64_t sum = 0;
          for (uint32_t dz = 0; dz < cfg.cluster[2]; ++dz)
            for (uint32_t dy = 0; dy < cfg.cluster[1]; ++dy)
              for (uint32_t dx = 0; dx < cfg.cluster[0]; ++dx) {
                const int64_t rank = dx + cfg.cluster[0] * (dy + cfg.cluster[1] * dz);
                const int64_t b = (cx + dx) + int64_t{gx} * ((cy + dy) + int64_t{gy} * (cz + dz));
                sum += rank * 1000 + b * 10 + t;
              }
          want[((int64_t{z} * gy + y) * gx + x) * n + t] = sum;
        }
      }
  return want;
}

}  // namespace

namespace {
/// Runs allGatherKernel under `cfg` and checks every block gathered the
/// right values with no report.
void checkAllGather(LaunchConfig cfg) {
  std::vector<int64_t> out(size_t{cfg.grid[0]} * cfg.grid[1] * cfg.grid[2] * cfg.block[0], -1);
  cfg.globalBuffers = {{out.data(), out.size() * sizeof(int64_t)}};
  int64_t* pout = out.data();
  void* args[] = {&pout};
  LaunchReport rep = launch(&allGatherKernel, args, cfg);
  INFO(rep.summary());
  CHECK_FALSE(rep.hasErrors());
  CHECK(out == expectedAllGather(cfg));
}
}  // namespace

TEST_CASE("clusters of 2, 4 and 2x2 blocks exchange shared memory through mapa and cluster barriers",
          "[emu][cluster]") {
  struct Shape {
    std::array<uint32_t, 3> grid, cluster;
  };
  for (const Shape& s : {Shape{{4, 1, 1}, {2, 1, 1}}, Shape{{8, 2, 1}, {4, 1, 1}}, Shape{{4, 4, 2}, {2, 2, 1}},
                         Shape{{2, 2, 2}, {1, 1, 2}}}) {
    for (unsigned hostThreads : {1u, 2u}) {
      LaunchConfig cfg = clusterConfig(s.grid, s.cluster);
      cfg.hostThreads = hostThreads;
      checkAllGather(cfg);
    }
  }
}

TEST_CASE("every cluster special register", "[emu][cluster]") {
  // Grid 4x4x2 in 2x2x1 clusters of 1-thread blocks: each block records
  // its ten registers.
  LaunchConfig cfg = clusterConfig({4, 4, 2}, {2, 2, 1}, 1);
  constexpr int kRegs = 15;
  std::vector<int32_t> out(32 * kRegs, -1);
  cfg.globalBuffers = {{out.data(), out.size() * sizeof(int32_t)}};
  int32_t* pout = out.data();
  void* args[] = {&pout};
  auto kernel = +[](void* const* a) {
    int32_t* o = *static_cast<int32_t**>(a[0]) + linearBlock() * kRegs;
    const int32_t v[kRegs] = {
        tessera_emu_cluster_ctarank(),  tessera_emu_cluster_nctarank(), tessera_emu_cluster_ctaid_x(),
        tessera_emu_cluster_ctaid_y(),  tessera_emu_cluster_ctaid_z(),  tessera_emu_cluster_nctaid_x(),
        tessera_emu_cluster_nctaid_y(), tessera_emu_cluster_nctaid_z(), tessera_emu_cluster_id_x(),
        tessera_emu_cluster_id_y(),     tessera_emu_cluster_id_z(),     tessera_emu_cluster_nid_x(),
        tessera_emu_cluster_nid_y(),    tessera_emu_cluster_nid_z(),    tessera_emu_cluster_explicit()};
    for (int i = 0; i < kRegs; ++i) gstore(&o[i], v[i]);
  };
  for (bool clusters : {true, false}) {
    if (!clusters) std::fill(cfg.cluster, cfg.cluster + 3, 1u);
    std::fill(out.begin(), out.end(), -1);
    LaunchReport rep = launch(kernel, args, cfg);
    INFO(rep.summary());
    REQUIRE_FALSE(rep.hasErrors());
    const uint32_t cx = cfg.cluster[0], cy = cfg.cluster[1];
    for (uint32_t z = 0; z < 2; ++z)
      for (uint32_t y = 0; y < 4; ++y)
        for (uint32_t x = 0; x < 4; ++x) {
          const int32_t* o = &out[((z * 4 + y) * 4 + x) * kRegs];
          INFO("block " << x << "," << y << "," << z << " clusters " << clusters);
          CHECK(o[0] == static_cast<int32_t>(x % cx + cx * (y % cy)));
          CHECK(o[1] == static_cast<int32_t>(cx * cy));
          CHECK(o[2] == static_cast<int32_t>(x % cx));
          CHECK(o[3] == static_cast<int32_t>(y % cy));
          CHECK(o[4] == 0);
          CHECK(o[5] == static_cast<int32_t>(cx));
          CHECK(o[6] == static_cast<int32_t>(cy));
          CHECK(o[7] == 1);
          CHECK(o[8] == static_cast<int32_t>(x / cx));
          CHECK(o[9] == static_cast<int32_t>(y / cy));
          CHECK(o[10] == static_cast<int32_t>(z));
          CHECK(o[11] == static_cast<int32_t>(4 / cx));
          CHECK(o[12] == static_cast<int32_t>(4 / cy));
          CHECK(o[13] == 2);
          CHECK(o[14] == (clusters ? 1 : 0));
        }
  }
}

TEST_CASE("without clusters, barrier.cluster is a block barrier and mapa to rank 0 is the block itself",
          "[emu][cluster]") {
  checkAllGather(clusterConfig({3, 1, 1}, {1, 1, 1}));
}

namespace {

// Block 1 (rank 1) writes into block 0's shared memory; block 0 reads it.
// `order`: 0 = no synchronisation, 1 = a block barrier (bar.sync) in both
// blocks, 2 = a cluster barrier. `localFirst`: block 0 writes its own word
// first and block 1 reads it (the other direction).
struct RaceParams {
  int order;
  bool localFirst;
};

void raceKernel(void* const* a) {
  const RaceParams& p = **static_cast<RaceParams* const*>(a[0]);
  auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
  const int32_t t = tessera_emu_thread_id_x(), rank = tessera_emu_cluster_ctarank();
  auto sync = [&] {
    if (p.order == 1) tessera_emu_barrier(kBarSync);
    if (p.order == 2) clusterSync();
  };
  if (!p.localFirst) {
    if (rank == 1) cstore(remote(&sh[t], 0), t, kStoreTheirs);
    sync();
    if (rank == 0) (void)sload(&sh[t], kLoadMine);
  } else {
    if (rank == 0) sstore(&sh[t], t, kStoreMine);
    sync();
    if (rank == 1) (void)cload(remote(&sh[t], 0), kLoadTheirs);
  }
  clusterSync();  // block 0 stays until block 1 is done with its memory
}

}  // namespace

TEST_CASE("cross-block races: both directions, and a block barrier does not order a remote access", "[emu][cluster]") {
  for (bool localFirst : {false, true}) {
    for (int order : {0, 1, 2}) {
      LaunchConfig cfg = clusterConfig({2, 1, 1}, {2, 1, 1});
      RaceParams p{order, localFirst};
      RaceParams* pp = &p;
      void* args[] = {&pp};
      LaunchReport rep = launch(&raceKernel, args, cfg);
      INFO(rep.summary() << " localFirst " << localFirst << " order " << order);
      if (order == 2) {
        CHECK_FALSE(rep.hasErrors());
        continue;
      }
      REQUIRE(rep.count(IssueKind::SharedRace) > 0);
      REQUIRE(rep.issues.size() == 1);
      const Issue& is = rep.issues[0];
      CHECK(is.kind == IssueKind::SharedRace);
      CHECK(is.hasOther);
      // Whichever access the schedule makes second reports the pair.
      const int local = localFirst ? kStoreMine : kLoadMine, far = localFirst ? kLoadTheirs : kStoreTheirs;
      CHECK(std::minmax(is.opId, is.otherOpId) == std::minmax(local, far));
      const std::string& m = is.message;
      CHECK_THAT(m, Catch::Contains(cfg.opNames[local]) && Catch::Contains(cfg.opNames[far]) &&
                        Catch::Contains("block (0,0,0) (cluster rank 0)") && Catch::Contains("block (1,0,0)") &&
                        Catch::Contains("(cluster rank 1)") && Catch::Contains("of 4 bytes"));
      CHECK_THAT(m, Catch::Contains("no cluster barrier in between"));
    }
  }
}

TEST_CASE("accessing the shared memory of a cluster block that has exited is reported", "[emu][cluster]") {
  LaunchConfig cfg = clusterConfig({2, 1, 1}, {2, 1, 1});
  // Rank 0 exits at once (its fibers run first); rank 1 then reads its memory.
  auto kernel = +[](void* const*) {
    auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
    if (tessera_emu_cluster_ctarank() == 1) (void)cload(remote(&sh[tessera_emu_thread_id_x()], 0), kLoadTheirs);
  };
  LaunchReport rep = launch(kernel, nullptr, cfg);
  INFO(rep.summary());
  REQUIRE(rep.count(IssueKind::SharedOutOfBounds) == 32);
  CHECK(
      hasIssue(rep, IssueKind::SharedOutOfBounds, "of block (0,0,0) (cluster rank 0), whose threads have all exited"));
  CHECK(hasIssue(rep, IssueKind::SharedOutOfBounds, "load theirs @ c.cpp:2"));
}

TEST_CASE("a cluster block that never arrives is a deadlock naming what each block waits for", "[emu][cluster]") {
  LaunchConfig cfg = clusterConfig({2, 1, 1}, {2, 1, 1});
  // Block 1's thread 0 goes to the cluster barrier while its other
  // threads wait for it at bar.sync: neither barrier can complete.
  auto kernel = +[](void* const*) {
    if (tessera_emu_cluster_ctarank() == 1 && tessera_emu_thread_id_x() != 0)
      tessera_emu_barrier(kBarSync);
    else
      clusterSync();
  };
  LaunchReport rep = launch(kernel, nullptr, cfg);
  INFO(rep.summary());
  REQUIRE(rep.count(IssueKind::Deadlock) == 1);
  const std::string& m = rep.issues.at(0).message;
  CHECK_THAT(m, Catch::Contains("no thread of the cluster can proceed") &&
                    Catch::Contains("block (0,0,0) (cluster rank 0): 0 threads wait at a barrier") &&
                    Catch::Contains("32 at barrier.cluster") &&
                    Catch::Contains("block (1,0,0) (cluster rank 1): 31 threads wait at a barrier") &&
                    Catch::Contains("33 of the cluster's 64 live threads arrived in phase 1") &&
                    Catch::Contains("wait @ c.cpp:5"));
}

TEST_CASE("exited threads count as arrived at the cluster barrier", "[emu][cluster]") {
  LaunchConfig cfg = clusterConfig({2, 1, 1}, {2, 1, 1});
  // Half of each block exits at once; the rest meet twice.
  auto kernel = +[](void* const*) {
    if (tessera_emu_thread_id_x() % 2) return;
    clusterSync();
    clusterSync();
  };
  LaunchReport rep = launch(kernel, nullptr, cfg);
  INFO(rep.summary());
  CHECK_FALSE(rep.hasErrors());
}

TEST_CASE("cluster barrier misuse is reported naming the op", "[emu][cluster]") {
  LaunchConfig cfg = clusterConfig({2, 1, 1}, {2, 1, 1});
  SECTION("a wait without an arrive") {
    LaunchReport rep = launch(+[](void* const*) { tessera_emu_cluster_wait(kWait); }, nullptr, cfg);
    INFO(rep.summary());
    CHECK(rep.count(IssueKind::DivergentBarrier) >= 1);
    CHECK(hasIssue(rep, IssueKind::DivergentBarrier,
                   "barrier.cluster.wait without a barrier.cluster.arrive before it [op #4 'wait @ c.cpp:5']"));
  }
  SECTION("two arrives without a wait") {
    LaunchReport rep = launch(
        +[](void* const*) {
          tessera_emu_cluster_arrive(kArrive, 0);
          tessera_emu_cluster_arrive(kBarSync, 1);
        },
        nullptr, cfg);
    INFO(rep.summary());
    CHECK(hasIssue(rep, IssueKind::DivergentBarrier, "barrier.cluster.arrive a second time"));
    CHECK(hasIssue(rep, IssueKind::DivergentBarrier, "[op #6 'bar.sync @ c.cpp:7']"));
  }
  SECTION("mapa to a rank outside the cluster") {
    LaunchReport rep = launch(
        +[](void* const*) {
          auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
          (void)remote(sh, 2);
        },
        nullptr, cfg);
    INFO(rep.summary());
    CHECK(hasIssue(rep, IssueKind::SharedOutOfBounds, "mapa of shared offset 0 to cluster rank 2 of a cluster of 2"));
  }
  SECTION("a remote access past the end of the block's shared memory") {
    LaunchReport rep = launch(
        +[](void* const*) {
          auto* sh = static_cast<int32_t*>(tessera_emu_shared_base());
          int32_t* p = remote(sh, 1 - tessera_emu_cluster_ctarank());
          (void)cload(reinterpret_cast<int64_t*>(p + 255), kLoadTheirs);
          clusterSync();
        },
        nullptr, cfg);
    INFO(rep.summary());
    CHECK(hasIssue(rep, IssueKind::SharedOutOfBounds, "read of 8 bytes at shared offset 1020 of block"));
  }
}

TEST_CASE("cluster launches are validated", "[emu][cluster]") {
  auto bad = [](std::array<uint32_t, 3> grid, std::array<uint32_t, 3> cluster, Vendor v, const std::string& text) {
    LaunchConfig cfg = clusterConfig(grid, cluster);
    cfg.vendor = v;
    if (v == Vendor::AMD) cfg.warpSize = 64;
    CHECK_THROWS_AS(launch(+[](void* const*) {}, nullptr, cfg), tessera::LaunchError);
    CHECK_THROWS_WITH(launch(+[](void* const*) {}, nullptr, cfg), Catch::Contains(text));
  };
  bad({2, 1, 1}, {0, 1, 1}, Vendor::NVIDIA, "cluster dimension 0 is zero");
  bad({6, 1, 1}, {4, 1, 1}, Vendor::NVIDIA, "grid dimension 0 (6 blocks) is not a multiple of the cluster's 4");
  bad({2, 3, 1}, {1, 2, 1}, Vendor::NVIDIA, "grid dimension 1 (3 blocks)");
  bad({16, 1, 1}, {16, 1, 1}, Vendor::NVIDIA, "has 16 blocks, over the portable maximum of 8 blocks per cluster");
  bad({4, 4, 1}, {2, 2, 1}, Vendor::AMD, "thread-block clusters are NVIDIA's");
  LaunchConfig ok = clusterConfig({8, 2, 1}, {8, 1, 1});
  CHECK_NOTHROW(launch(+[](void* const*) {}, nullptr, ok));
}

// ---- the real intrinsics, through the emulator's compile ---------------------
namespace {

// Each thread stores into its block's tile, meets the cluster, reads the
// same slot of the other block's tile through mapa (a GEP on the
// shared::cluster pointer), and meets the cluster again before exiting.
// SYNC1 is the first meeting (replaced to test the race report).
const char* kClusterModule = R"(target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@tile = internal addrspace(3) global [64 x float] undef, align 4

define ptx_kernel void @exchange(ptr addrspace(1) %out) #0 {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %rank = call i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()
  %n = call i32 @llvm.nvvm.read.ptx.sreg.cluster.nctarank()
  %cid = call i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %mine = getelementptr inbounds [64 x float], ptr addrspace(3) @tile, i32 0, i32 %tid
  %b100 = mul i32 %bid, 100
  %v = add i32 %b100, %tid
  %vf = sitofp i32 %v to float
  store float %vf, ptr addrspace(3) %mine, align 4, !tessera.op !0
  SYNC1
  %r1 = add i32 %rank, 1
  %other = urem i32 %r1, %n
  %base = call ptr addrspace(7) @llvm.nvvm.mapa.shared.cluster(ptr addrspace(3) @tile, i32 %other)
  %q = getelementptr inbounds float, ptr addrspace(7) %base, i32 %tid
  %x = load float, ptr addrspace(7) %q, align 4, !tessera.op !1
  %k = mul i32 %cid, 1000
  %kf = sitofp i32 %k to float
  %y = fadd float %x, %kf
  %o0 = mul i32 %bid, 64
  %o = add i32 %o0, %tid
  %po = getelementptr inbounds float, ptr addrspace(1) %out, i32 %o
  store float %y, ptr addrspace(1) %po, align 4
  call void @llvm.nvvm.barrier.cluster.arrive()
  call void @llvm.nvvm.barrier.cluster.wait()
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()
declare i32 @llvm.nvvm.read.ptx.sreg.cluster.nctarank()
declare i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()
declare ptr addrspace(7) @llvm.nvvm.mapa.shared.cluster(ptr addrspace(3), i32)
declare void @llvm.nvvm.barrier.cluster.arrive()
declare void @llvm.nvvm.barrier.cluster.arrive.relaxed.aligned()
declare void @llvm.nvvm.barrier.cluster.wait()
declare void @llvm.nvvm.barrier.cluster.wait.aligned()
declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32)

attributes #0 = { "nvvm.cluster_dim"="2,1,1" }

!0 = !{!"store tile[tid] @ exchange.cpp:1"}
!1 = !{!"load other tile[tid] @ exchange.cpp:2"}
)";

std::vector<std::pair<std::string, void*>> hookTable() {
  std::vector<std::pair<std::string, void*>> v;
  for (auto [name, addr] : hookSymbols()) v.emplace_back(name, addr);
  return v;
}

}  // namespace

TEST_CASE("an NVPTX module with the cluster intrinsics runs through the emulator's compile", "[emu][cluster]") {
  auto run = [](const std::string& sync1, std::vector<float>& out) {
    std::string text = kClusterModule;
    text.replace(text.find("SYNC1"), 5, sync1);
    tessera::codegen::EmuKernel k = tessera::codegen::compileForEmulator(text, false, 32, hookTable());
    CHECK(k.uncheckedAccesses == 0);
    LaunchConfig cfg;
    cfg.grid[0] = 4;
    cfg.block[0] = 64;
    std::copy(k.cluster, k.cluster + 3, cfg.cluster);
    cfg.kernelName = k.kernelName;
    cfg.opNames = k.opNames;
    cfg.sharedBytes = k.staticSharedBytes;
    cfg.throwOnError = false;
    out.assign(4 * 64, -1);
    cfg.globalBuffers = {{out.data(), out.size() * sizeof(float)}};
    float* pout = out.data();
    void* args[] = {&pout};
    LaunchReport rep = launch(k.threadFn, args, cfg);
    CHECK(k.cluster[0] == 2);
    CHECK(k.cluster[1] == 1);
    return rep;
  };
  std::vector<float> out;
  for (const char* sync :
       {"call void @llvm.nvvm.barrier.cluster.arrive()\n  call void @llvm.nvvm.barrier.cluster.wait()",
        "call void @llvm.nvvm.barrier.cluster.arrive.relaxed.aligned()\n  call void "
        "@llvm.nvvm.barrier.cluster.wait.aligned()"}) {
    LaunchReport rep = run(sync, out);
    INFO(rep.summary());
    CHECK_FALSE(rep.hasErrors());
    for (int b = 0; b < 4; ++b)
      for (int t = 0; t < 64; ++t) REQUIRE(out[b * 64 + t] == float((b ^ 1) * 100 + t + (b / 2) * 1000));
  }
  // A block barrier instead of the cluster barrier: the remote read races
  // with the other block's store.
  LaunchReport rep = run("call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)", out);
  INFO(rep.summary());
  REQUIRE(rep.count(IssueKind::SharedRace) > 0);
  CHECK(hasIssue(rep, IssueKind::SharedRace, "load other tile[tid] @ exchange.cpp:2"));
  CHECK(hasIssue(rep, IssueKind::SharedRace, "store tile[tid] @ exchange.cpp:1"));
  CHECK(hasIssue(rep, IssueKind::SharedRace, "no cluster barrier in between"));
}

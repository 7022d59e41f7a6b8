// Grid decomposition over the thread pool, thread-count selection,
// exception propagation and concurrent launches.

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tessera/runtime/Runtime.h"

#include "../env_guard.h"

using namespace tessera;
using namespace tessera::rt;
using Catch::Matchers::Contains;

namespace {

template <typename T>
T* ptrArg(void* const* args, int i) {
  return *static_cast<T* const*>(args[i]);
}

struct Chunk {
  int64_t begin, end;
  std::thread::id thread;
};
std::mutex gChunkMu;
std::vector<Chunk> gChunks;

// (ptr<i32> hits, ptr<i32> grid): counts each program at index
// x + gx * (y + gy * z), decomposing the linear id with x fastest, and
// records the chunk it was given.
void gridEntry(void* const* args, int64_t begin, int64_t end, const int32_t* grid) {
  int32_t* hits = ptrArg<int32_t>(args, 0);
  int32_t* dims = ptrArg<int32_t>(args, 1);
  const int64_t gx = grid[0], gy = grid[1];
  for (int64_t p = begin; p < end; ++p) {
    const int64_t x = p % gx, y = (p / gx) % gy, z = p / (gx * gy);
    std::atomic_ref<int32_t>(hits[x + gx * (y + gy * z)]).fetch_add(1);
  }
  std::lock_guard<std::mutex> lock(gChunkMu);
  gChunks.push_back({begin, end, std::this_thread::get_id()});
  std::copy(grid, grid + 3, dims);
}

Kernel gridKernel() {
  Binary bin;
  bin.signature = {
      "grid", {{ArgSpec::Kind::Pointer, DType::I32, "hits"}, {ArgSpec::Kind::Pointer, DType::I32, "dims"}}, {}};
  bin.hostEntry = &gridEntry;
  return Device::cpu().load(bin);
}

/// Launches gridKernel and checks every program ran once; returns the chunks.
std::vector<Chunk> runGrid(Dim3 grid, LaunchOptions opts) {
  Device cpu = Device::cpu();
  Buffer hits = cpu.alloc(DType::I32, grid.count()), dims = cpu.alloc(DType::I32, 3);
  {
    std::lock_guard<std::mutex> lock(gChunkMu);
    gChunks.clear();
  }
  gridKernel().launch(grid, {hits, dims}, opts);
  auto h = hits.read<int32_t>();
  for (size_t i = 0; i < h.size(); ++i) {
    INFO("program " << i);
    REQUIRE(h[i] == 1);
  }
  CHECK(dims.read<int32_t>() == std::vector<int32_t>{int32_t(grid.x), int32_t(grid.y), int32_t(grid.z)});
  std::lock_guard<std::mutex> lock(gChunkMu);
  auto chunks = gChunks;
  std::sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) { return a.begin < b.begin; });
  // Contiguous, covering [0, n), balanced within one program.
  REQUIRE(!chunks.empty());
  CHECK(chunks.front().begin == 0);
  CHECK(chunks.back().end == int64_t(grid.count()));
  int64_t lo = INT64_MAX, hi = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i) CHECK(chunks[i].begin == chunks[i - 1].end);
    lo = std::min(lo, chunks[i].end - chunks[i].begin);
    hi = std::max(hi, chunks[i].end - chunks[i].begin);
  }
  CHECK(hi - lo <= 1);
  return chunks;
}

std::set<std::thread::id> threadsOf(const std::vector<Chunk>& cs) {
  std::set<std::thread::id> s;
  for (auto& c : cs) s.insert(c.thread);
  return s;
}

using tessera::testing::EnvGuard;

}  // namespace

TEST_CASE("every program of a 3-D grid runs exactly once", "[runtime][grid]") {
  for (unsigned threads : {1u, 2u, 3u}) {
    INFO(threads << " threads");
    auto chunks = runGrid({5, 3, 2}, LaunchOptions{threads});
    CHECK(chunks.size() == threads);
    // A worker that has not started yet leaves its chunk to the caller.
    CHECK(threadsOf(chunks).size() <= threads);
    // The calling thread takes the first chunk itself.
    CHECK(chunks.front().thread == std::this_thread::get_id());
  }
  // More threads than programs: one program per chunk.
  auto chunks = runGrid({2, 1, 1}, LaunchOptions{8});
  CHECK(chunks.size() == 2);
  // A single program runs inline on the caller.
  chunks = runGrid({1}, LaunchOptions{4});
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0].thread == std::this_thread::get_id());
  // Odd sizes split evenly and the pool grows.
  runGrid({7, 11, 3}, LaunchOptions{5});
  runGrid({1000}, LaunchOptions{2});
}

namespace {
std::atomic<int> gArrived{0};
std::atomic<int> gTimedOut{0};
std::set<std::thread::id> gBarrierThreads;

// (i32 parties): every program waits until `parties` programs are inside at
// once, so the launch completes only if they truly run concurrently.
void barrierEntry(void* const* args, int64_t begin, int64_t end, const int32_t*) {
  const int parties = *static_cast<const int32_t*>(args[0]);
  {
    std::lock_guard<std::mutex> lock(gChunkMu);
    gBarrierThreads.insert(std::this_thread::get_id());
  }
  gArrived += int(end - begin);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (gArrived.load() < parties) {
    if (std::chrono::steady_clock::now() > deadline) {
      gTimedOut++;
      return;
    }
    std::this_thread::yield();
  }
}
}  // namespace

TEST_CASE("chunks run concurrently on distinct threads", "[runtime][grid]") {
  Binary bin;
  bin.signature = {"barrier", {{ArgSpec::Kind::Scalar, DType::I32, "parties"}}, {}};
  bin.hostEntry = &barrierEntry;
  Kernel k = Device::cpu().load(bin);
  for (int threads : {2, 3, 4}) {
    gArrived = 0;
    gTimedOut = 0;
    gBarrierThreads.clear();
    k.launch({unsigned(threads)}, {threads}, LaunchOptions{unsigned(threads)});
    CHECK(gTimedOut == 0);
    CHECK(gBarrierThreads.size() == size_t(threads));
    CHECK(gBarrierThreads.count(std::this_thread::get_id()) == 1);
  }
}

TEST_CASE("TESSERA_NUM_THREADS selects the default thread count", "[runtime][grid]") {
  {
    EnvGuard env("TESSERA_NUM_THREADS", "3");
    CHECK(Device::cpu().defaultThreads() == 3);
    CHECK_THAT(Device::cpu().name(), Contains("3 threads"));
    CHECK(runGrid({30}, {}).size() == 3);
    CHECK(runGrid({30}, LaunchOptions{2}).size() == 2);  // the option wins
  }
  {
    EnvGuard env("TESSERA_NUM_THREADS", "1");
    auto chunks = runGrid({30}, {});
    REQUIRE(chunks.size() == 1);
    CHECK(chunks[0].thread == std::this_thread::get_id());
  }
  {
    EnvGuard env("TESSERA_NUM_THREADS", nullptr);
    CHECK(Device::cpu().defaultThreads() == std::max(1u, std::thread::hardware_concurrency()));
  }
  {
    EnvGuard env("TESSERA_NUM_THREADS", "");  // empty counts as unset
    CHECK(Device::cpu().defaultThreads() == std::max(1u, std::thread::hardware_concurrency()));
  }
  Device cpu = Device::cpu();
  Buffer hits = cpu.alloc(DType::I32, 30), dims = cpu.alloc(DType::I32, 3);
  Kernel k = gridKernel();
  for (const char* bad : {"0", "abc", "4x", "-2", " 2", "99999999999999999999"}) {
    INFO("TESSERA_NUM_THREADS=" << bad);
    EnvGuard env("TESSERA_NUM_THREADS", bad);
    REQUIRE_THROWS_AS(k.launch({30}, {hits, dims}), LaunchError);
    REQUIRE_THROWS_WITH(k.launch({30}, {hits, dims}),
                        Contains("TESSERA_NUM_THREADS") && Contains(std::string("'") + bad + "'"));
    REQUIRE_THROWS_AS(cpu.defaultThreads(), LaunchError);
    CHECK_THAT(cpu.name(), Contains("cpu ("));       // the name stays usable
    k.launch({30}, {hits, dims}, LaunchOptions{2});  // an explicit count does not read it
  }
}

namespace {
void throwingEntry(void* const* args, int64_t begin, int64_t end, const int32_t*) {
  const int32_t throwAt = *static_cast<const int32_t*>(args[0]);
  if (throwAt >= begin && throwAt < end) throw std::runtime_error("program " + std::to_string(throwAt) + " failed");
}
}  // namespace

TEST_CASE("an exception in a kernel entry reaches the caller", "[runtime][grid]") {
  Binary bin;
  bin.signature = {"thrower", {{ArgSpec::Kind::Scalar, DType::I32, "at"}}, {}};
  bin.hostEntry = &throwingEntry;
  Kernel k = Device::cpu().load(bin);
  for (int at : {0, 63, 40, 5}) {  // in the caller's chunk and in workers' chunks
    for (unsigned threads : {1u, 2u, 4u}) {
      INFO("throw at " << at << " with " << threads << " threads");
      REQUIRE_THROWS_WITH(k.launch({64}, {at}, LaunchOptions{threads}), "program " + std::to_string(at) + " failed");
    }
  }
  k.launch({64}, {-1}, LaunchOptions{4});  // the pool survives
  REQUIRE_THROWS_WITH(k.launch({1}, {0}), "program 0 failed");

  std::atomic<int64_t> sum{0};
  REQUIRE_THROWS_AS(parallelFor(100, 3,
                                [&](int64_t b, int64_t e) {
                                  if (b > 0) throw std::logic_error("worker");
                                  sum += e - b;
                                }),
                    std::logic_error);
}

TEST_CASE("parallelFor splits ranges and nests without deadlock", "[runtime][grid]") {
  for (int64_t n : {0, 1, 2, 5, 64, 1001}) {
    for (unsigned t : {1u, 2u, 3u, 7u}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::atomic<int> chunks{0};
      parallelFor(n, t, [&](int64_t b, int64_t e) {
        ++chunks;
        for (int64_t i = b; i < e; ++i) seen[size_t(i)]++;
      });
      INFO("n=" << n << " threads=" << t);
      CHECK(chunks == std::min<int64_t>(n, t));
      for (auto& s : seen) REQUIRE(s == 1);
    }
  }
  std::atomic<int64_t> total{0};
  parallelFor(4, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallelFor(10, 4, [&](int64_t bb, int64_t ee) { total += ee - bb; });  // runs inline
  });
  CHECK(total == 40);
}

namespace {
// (ptr<i32> out, i32 tag): out[p] = tag * 1000 + p.
void tagEntry(void* const* args, int64_t begin, int64_t end, const int32_t*) {
  int32_t* out = ptrArg<int32_t>(args, 0);
  const int32_t tag = *static_cast<const int32_t*>(args[1]);
  for (int64_t p = begin; p < end; ++p) out[p] = tag * 1000 + int32_t(p);
}
}  // namespace

TEST_CASE("launches from several threads at once", "[runtime][grid]") {
  Binary bin;
  bin.signature = {
      "tag", {{ArgSpec::Kind::Pointer, DType::I32, "out"}, {ArgSpec::Kind::Scalar, DType::I32, "tag"}}, {}};
  bin.hostEntry = &tagEntry;
  Kernel k = Device::cpu().load(bin);
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      Buffer out = Device::cpu().alloc(DType::I32, 97);
      for (int iter = 0; iter < 300; ++iter) {
        const int32_t tag = t * 1000 + iter;
        k.launch({97}, {out, tag}, LaunchOptions{unsigned(1 + iter % 3)});
        auto v = out.read<int32_t>();
        for (int p = 0; p < 97; ++p)
          if (v[size_t(p)] != tag * 1000 + p) failures++;
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(failures == 0);
}

namespace {
void emptyEntry(void* const*, int64_t, int64_t, const int32_t*) {}

double medianLaunchMicros(const Kernel& k, Dim3 grid, unsigned threads) {
  std::vector<double> us;
  for (int i = 0; i < 200; ++i) k.launch(grid, {}, LaunchOptions{threads});  // warm up
  for (int i = 0; i < 5000; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    k.launch(grid, {}, LaunchOptions{threads});
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}
}  // namespace

// Median time of a 2-thread parallelFor whose two chunks must meet, so the
// worker really takes part (an empty kernel's chunk is usually claimed by
// the caller before the worker looks); `idle` between calls lets the worker
// fall asleep.
double medianRendezvousMicros(std::chrono::microseconds idle) {
  std::vector<double> us;
  for (int i = 0; i < (idle.count() ? 500 : 5000); ++i) {
    std::atomic<int> met{0};
    if (idle.count()) std::this_thread::sleep_for(idle);
    auto t0 = std::chrono::steady_clock::now();
    parallelFor(64, 2, [&](int64_t, int64_t) {
      met++;
      while (met.load() < 2) std::this_thread::yield();
    });
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

TEST_CASE("launch overhead", "[runtime][.perf]") {
  Binary bin;
  bin.signature = {"empty", {}, {}};
  bin.hostEntry = &emptyEntry;
  Kernel k = Device::cpu().load(bin);
  std::cout << "median launch overhead of an empty kernel: 1 program: " << medianLaunchMicros(k, {1}, 2)
            << " us; 64 programs on 2 threads: " << medianLaunchMicros(k, {64}, 2)
            << " us; 64 programs on 1 thread: " << medianLaunchMicros(k, {64}, 1) << " us\n"
            << "median pool round trip with the worker taking part: back to back: "
            << medianRendezvousMicros(std::chrono::microseconds(0))
            << " us; worker asleep: " << medianRendezvousMicros(std::chrono::microseconds(500)) << " us\n";
}

// Collectives in one process: groups of host devices (the in-process
// engine), the NCCL engine on the fake CUDA driver and the fake NCCL, the
// RCCL engine on the fake HIP runtime and the fake RCCL (tests/runtime/fake/),
// bootstraps, the cross-rank check of calls, timeouts, and every argument
// error. Across processes, under mpirun: tests/collectives_test.sh.

#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "checks.h"
#include "error_of.h"
#include "gpu_test_support.h"
#include "tessera/runtime/Collectives.h"

using namespace tessera;
using namespace tessera::rt;
using Catch::Matchers::Contains;
using tessera::rt::testing::EnvGuard;
using tessera::rt::testing::errorOf;
using tessera::rt::testing::fakeFn;

namespace {

/// Runs fn(member) on one thread per member; the errors, by rank ("" = ok).
std::vector<std::string> onThreads(const std::vector<Communicator>& cs,
                                   const std::function<std::string(const Communicator&)>& fn) {
  std::vector<std::string> errs(cs.size());
  std::vector<std::thread> ts;
  for (size_t i = 0; i < cs.size(); ++i)
    ts.emplace_back([&, i] {
      try {
        errs[i] = fn(cs[i]);
      } catch (const std::exception& e) {
        errs[i] = std::string("exception: ") + e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errs;
}

/// Runs make(rank) then fn on one thread per rank: members of a group whose
/// creation needs every rank at once (a bootstrap).
std::vector<std::string> ranksOnThreads(int n, const std::function<Communicator(int)>& make,
                                        const std::function<std::string(const Communicator&)>& fn) {
  std::vector<std::string> errs(static_cast<size_t>(n));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        Communicator c = make(r);
        errs[size_t(r)] = fn(c);
      } catch (const std::exception& e) {
        errs[size_t(r)] = std::string("exception: ") + e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errs;
}

void requireAllPassed(const std::vector<std::string>& errs) {
  for (size_t r = 0; r < errs.size(); ++r) {
    INFO("rank " << r);
    CHECK(errs[r] == "");
  }
}

std::vector<Communicator> cpuGroup(int n, CommOptions opts = {}) {
  return Communicator::createLocal(std::vector<Device>(size_t(n), Device::cpu()), opts);
}

/// A loopback TCP port nobody listens on (just released by the kernel).
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

// ---- the in-process engine ---------------------------------------------------------

TEST_CASE("in-process groups of host devices run every collective", "[runtime][collectives]") {
  for (int n : {1, 2, 3, 4}) {
    INFO(n << " members");
    std::vector<Communicator> cs = cpuGroup(n);
    REQUIRE(cs.size() == size_t(n));
    CHECK(cs[1 % n].rank() == 1 % n);
    CHECK(cs[0].size() == n);
    CHECK(cs[0].engine() == CommEngine::Local);
    CHECK_THAT(cs[0].engineName(), Contains("local"));
    requireAllPassed(onThreads(cs, [](const Communicator& c) { return collcheck::all(c, {}); }));
    requireAllPassed(onThreads(cs, [](const Communicator& c) { return collcheck::all(c, c.device().createStream()); }));
  }
}

TEST_CASE("one thread drives an in-process group through streams and groups", "[runtime][collectives]") {
  // A CPU and an emulator member: both host memory.
  std::vector<Communicator> cs = Communicator::createLocal({Device::cpu(), Device::emulator("nvptx:sm_80")});
  std::vector<Stream> ss = {cs[0].device().createStream(), cs[1].device().createStream()};
  std::vector<Buffer> bs;
  for (int r = 0; r < 2; ++r)
    bs.push_back(collcheck::upload(cs[size_t(r)], DType::F32, std::vector<double>(100, r + 1.0)));
  for (int r = 0; r < 2; ++r) cs[size_t(r)].allReduce(bs[size_t(r)], bs[size_t(r)], ReduceOp::Sum, ss[size_t(r)]);
  for (auto& s : ss) s.synchronize();
  for (auto& b : bs) CHECK(collcheck::download(b) == std::vector<double>(100, 3.0));
  // A swap between the members in one group, issued by one thread; the
  // synchronous calls of a group run on each member's default stream and
  // are waited for at groupEnd.
  Buffer in0 = cs[0].device().alloc(DType::F32, 100), in1 = cs[1].device().alloc(DType::F32, 100);
  Communicator::groupStart();
  cs[0].send(bs[0], 1);
  cs[1].send(bs[1], 0);
  cs[0].recv(in0, 1);
  cs[1].recv(in1, 0);
  Communicator::groupEnd();
  CHECK(collcheck::download(in0) == std::vector<double>(100, 3.0));
  CHECK(collcheck::download(in1) == std::vector<double>(100, 3.0));
}

TEST_CASE("a member that never makes its call fails the others with a CommError in time", "[runtime][collectives]") {
  CommOptions o;
  o.timeoutSeconds = 0.3;
  std::vector<Communicator> cs = cpuGroup(3, o);
  Buffer b = cs[0].device().alloc(DType::F32, 10);
  const auto t0 = std::chrono::steady_clock::now();
  // Synchronous, from the only thread: members 1 and 2 never call.
  std::string e = errorOf<CommError>([&] { cs[0].allReduce(b, b, ReduceOp::Sum); });
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK_THAT(e, Contains("all_reduce (sum) of 10 f32 elements on rank 0 of 3 (local)"));
  CHECK_THAT(e, Contains("rank(s) 1, 2 did not make the call within 0.3 s"));
  CHECK_THAT(e, Contains("give each member's calls a stream"));
  // The group is unusable afterwards, for every member, at once.
  CHECK_THAT(errorOf<CommError>([&] { cs[2].allReduce(b, b, ReduceOp::Sum); }), Contains("failed earlier"));
  // A send nobody receives: named too.
  std::vector<Communicator> two = cpuGroup(2, o);
  CHECK_THAT(errorOf<CommError>([&] { two[0].send(b, 1); }), Contains("rank 1 made no matching recv"));
}

TEST_CASE("mismatched calls are a CommError on every member, and the group works afterwards",
          "[runtime][collectives]") {
  std::vector<Communicator> cs = cpuGroup(3);
  auto expect = [&](const char* what, const std::function<void(const Communicator&)>& bad,
                    const std::vector<const char*>& texts) {
    INFO(what);
    auto errs = onThreads(cs, [&](const Communicator& c) -> std::string {
      std::string e = errorOf<CommError>([&] { bad(c); });
      for (const char* t : texts)
        if (e.find(t) == std::string::npos) return "rank " + std::to_string(c.rank()) + ": '" + e + "' lacks " + t;
      return collcheck::allReduce(c, DType::F32, ReduceOp::Sum, 50, false, {});
    });
    requireAllPassed(errs);
  };
  expect("count",
         [](const Communicator& c) {
           Buffer b = c.device().alloc(DType::F32, c.rank() == 2 ? 11 : 10);
           c.allReduce(b, b, ReduceOp::Sum);
         },
         {"the ranks' calls do not match", "ranks 0-1: all_reduce (sum) of 10 f32 elements",
          "rank 2: all_reduce (sum) of 11 f32 elements", "no data was moved"});
  expect("dtype",
         [](const Communicator& c) {
           Buffer b = c.device().alloc(c.rank() == 1 ? DType::BF16 : DType::F32, 10);
           c.allReduce(b, b, ReduceOp::Sum);
         },
         {"rank 1: all_reduce (sum) of 10 bf16 elements"});
  expect("operation",
         [](const Communicator& c) {
           Buffer s = c.device().alloc(DType::F32, 6), r = c.device().alloc(DType::F32, 2);
           if (c.rank() == 0)
             c.allGather(r, s);
           else
             c.reduceScatter(s, r, ReduceOp::Sum);
         },
         {"rank 0: all_gather of 2 f32 elements per rank", "ranks 1-2: reduce_scatter (sum)"});
  expect("all_to_all counts",
         [](const Communicator& c) {
           std::vector<size_t> sc(3, 1), rc(3, 1);
           if (c.rank() == 1) rc[2] = 2;
           Buffer s = c.device().alloc(DType::I32, 3), r = c.device().alloc(DType::I32, 4);
           c.allToAll(s, sc, r, rc);
         },
         {"rank 2 sends 1 i32 element to rank 1 but rank 1 expects 2 i32 elements from it"});
  // Send against recv: ranks 0 and 1 pair up, rank 2 only joins the
  // all_reduce that follows.
  requireAllPassed(onThreads(cs, [](const Communicator& c) -> std::string {
    if (c.rank() < 2) {
      std::string e = errorOf<CommError>([&] {
        if (c.rank() == 0) c.send(c.device().alloc(DType::F32, 5), 1);
        if (c.rank() == 1) c.recv(c.device().alloc(DType::F32, 7), 0);
      });
      if (e.find("the two sides do not match: rank 0 sends 5 f32 elements") == std::string::npos ||
          e.find("rank 1 receives 7 f32 elements") == std::string::npos)
        return "send / recv: " + e;
    }
    return collcheck::allReduce(c, DType::F32, ReduceOp::Sum, 50, false, {});
  }));
  // CommOptions::verify = false (in-process groups check all the same).
  CommOptions o;
  o.verify = false;
  requireAllPassed(onThreads(cpuGroup(2, o), [](const Communicator& c) { return collcheck::all(c, {}); }));
}

TEST_CASE("collective calls check their arguments on their own rank", "[runtime][collectives]") {
  std::vector<Communicator> cs = cpuGroup(2);
  const Communicator& c = cs[0];
  Device cpu = Device::cpu();
  Buffer f10 = cpu.alloc(DType::F32, 10), f20 = cpu.alloc(DType::F32, 20), i8 = cpu.alloc(DType::I8, 10);
  CHECK_THAT(errorOf<UsageError>([&] { Communicator().allReduce(f10, f10, ReduceOp::Sum); }),
             Contains("null Communicator"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(Buffer(), f10, ReduceOp::Sum); }),
             Contains("Communicator::allReduce (rank 0 of 2 (local)): the send buffer is null"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(f10, f20, ReduceOp::Sum); }),
             Contains("the send view holds 10 elements and the recv view 20"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(f10, cpu.alloc(DType::I32, 10), ReduceOp::Sum); }),
             Contains("the send buffer holds f32 and the recv buffer i32"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(i8, i8, ReduceOp::Max); }),
             Contains("i8 elements cannot be reduced"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(BufferView(f20, 0, 10), BufferView(f20, 5, 10), ReduceOp::Sum); }),
             Contains("overlap"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(BufferView(f10, 4, 7), f10, ReduceOp::Sum); }),
             Contains("runs past the buffer's end"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(BufferView(f10, 11, 0), f10, ReduceOp::Sum); }),
             Contains("starts at element 11"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allGather(f10, f10); }),
             Contains("the recv view holds 10 elements but 2 ranks x 10 sent = 20 are gathered"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allGather(BufferView(f20, 5, 10), f20); }),
             Contains("in place, it must be this rank's block"));
  CHECK_THAT(errorOf<UsageError>([&] { c.reduceScatter(f10, f10, ReduceOp::Sum); }),
             Contains("the send view holds 10 elements but 2 ranks x 10 received = 20 are reduced"));
  CHECK_THAT(errorOf<UsageError>([&] { c.broadcast(f10, 2); }),
             Contains("the root 2 is not a rank of this group (0 to 1)"));
  CHECK_THAT(errorOf<UsageError>([&] { c.send(f10, -1); }), Contains("the peer -1 is not a rank"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allToAll(f10, {1}, f20, {1, 1}); }),
             Contains("sendCounts has 1 entries; give one per rank (2)"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allToAll(f10, {6, 6}, f20, {1, 1}); }),
             Contains("the send counts add up to more than the send view's 10 elements"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allToAll(f10, f20); }), Contains("equal blocks need"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allToAll(BufferView(f20, 0, 10), BufferView(f20, 5, 10)); }),
             Contains("not in place"));
  // Buffers and streams of another device.
  Device emu = Device::emulator("nvptx:sm_80");
  CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(emu.alloc(DType::F32, 10), f10, ReduceOp::Sum); }),
             Contains("the send buffer belongs to 'emu:nvptx:sm_80"));
  CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(f10, f10, ReduceOp::Sum, emu.createStream()); }),
             Contains("the stream belongs to"));
  // Groups.
  CHECK_THAT(errorOf<UsageError>([] { Communicator::groupEnd(); }), Contains("without a matching"));
  Stream s0 = cpu.createStream(), s1 = cpu.createStream();
  Communicator::groupStart();
  c.send(f10, 1, s0);
  std::string e = errorOf<UsageError>([&] { c.recv(f20, 1, s1); });
  cs[1].recv(cpu.alloc(DType::F32, 10), 0, s1);
  Communicator::groupEnd();
  CHECK_THAT(e, Contains("must use the same stream"));
  s0.synchronize();
  s1.synchronize();
}

TEST_CASE("the collective timeout comes from the options or TESSERA_COMM_TIMEOUT", "[runtime][collectives]") {
  CommOptions o;
  o.timeoutSeconds = -1;
  CHECK_THAT(errorOf<UsageError>([&] { cpuGroup(2, o); }), Contains("CommOptions::timeoutSeconds = -1"));
  {
    EnvGuard env("TESSERA_COMM_TIMEOUT", "soon");
    CHECK_THAT(errorOf<UsageError>([&] { cpuGroup(2); }), Contains("TESSERA_COMM_TIMEOUT='soon' is not a number"));
  }
  EnvGuard env("TESSERA_COMM_TIMEOUT", "0.25");
  std::vector<Communicator> cs = cpuGroup(2);
  Buffer b = cs[0].device().alloc(DType::F32, 1);
  CHECK_THAT(errorOf<CommError>([&] { cs[0].allReduce(b, b, ReduceOp::Sum); }), Contains("within 0.25 s"));
}

TEST_CASE("groups are created with the engine their devices need", "[runtime][collectives]") {
  CHECK_THAT(errorOf<UsageError>([] { Communicator::createLocal({}); }), Contains("no devices"));
  CHECK_THAT(errorOf<UsageError>([] { Communicator::create(Device(nullptr)); }), Contains("the device is null"));
  CommOptions local;
  local.engine = CommEngine::Local;
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::create(Device::cpu(), local); }),
             Contains("use Communicator::createLocal"));
  CommOptions nccl;
  nccl.engine = CommEngine::NCCL;
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::create(Device::cpu(), nccl); }),
             Contains("NCCL runs on CUDA devices only"));
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::createLocal({Device::cpu()}, nccl); }),
             Contains("host devices of one process use the in-process engine"));
  CommOptions ranked;
  ranked.rank = 0;
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::createLocal({Device::cpu()}, ranked); }),
             Contains("are for Communicator::create"));
  CHECK(name(CommEngine::RCCL) == std::string("rccl"));
  CHECK(name(ReduceOp::Prod) == std::string("prod"));
}

TEST_CASE("a missing MPI library is a DeviceError naming it", "[runtime][collectives]") {
  {
    EnvGuard env("TESSERA_MPI_LIBRARY", "/nonexistent/libmpi.so.40");
    std::string e = errorOf<DeviceError>([] { Communicator::create(Device::cpu()); });
    CHECK_THAT(e, Contains("MPI not available: dlopen(/nonexistent/libmpi.so.40) failed (from TESSERA_MPI_LIBRARY)"));
    CHECK_THAT(e, Contains("apt-get install openmpi-bin libopenmpi-dev"));
  }
  {
    EnvGuard env("TESSERA_MPI_LIBRARY", TESSERA_FAKE_CUDA);  // a library, but not MPI
    CHECK_THAT(errorOf<DeviceError>([] { Communicator::create(Device::cpu()); }), Contains("lacks MPI_Initialized"));
  }
  // Options that do not apply to MPI groups.
  CommOptions o;
  o.bootstrap = "file:/tmp/x";
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::create(Device::cpu(), o); }),
             Contains("CommOptions::rank, size and bootstrap are for NCCL and RCCL"));
}

// ---- NCCL on the fake CUDA driver ------------------------------------------------

TEST_CASE("NCCL groups of the GPUs of one process, on the fake driver", "[runtime][collectives][nccl]") {
  EnvGuard cuda("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  EnvGuard nccl("TESSERA_NCCL_LIBRARY", TESSERA_FAKE_NCCL);
  auto groups = fakeFn<int (*)()>(TESSERA_FAKE_NCCL, "fake_nccl_groups");
  auto live = fakeFn<int (*)()>(TESSERA_FAKE_NCCL, "fake_nccl_live_comms");
  auto lastCall = fakeFn<void (*)(char*, size_t)>(TESSERA_FAKE_NCCL, "fake_nccl_last_call");
  const int groupsBefore = groups(), liveBefore = live();
  {
    std::vector<Communicator> cs = Communicator::createLocal({Device::cuda(0), Device::cuda(1)});
    CHECK(live() == liveBefore + 2);
    CHECK(cs[1].rank() == 1);
    CHECK(cs[0].engine() == CommEngine::NCCL);
    CHECK_THAT(cs[0].engineName(), Contains("nccl 2.28.9 (" TESSERA_FAKE_NCCL ")"));
    // One thread, two GPUs: the calls in a group, each on its GPU's stream.
    std::vector<Stream> ss = {cs[0].device().createStream(), cs[1].device().createStream()};
    std::vector<Buffer> bs;
    for (int r = 0; r < 2; ++r)
      bs.push_back(collcheck::upload(cs[size_t(r)], DType::BF16, std::vector<double>(300, r + 1.5)));
    Communicator::groupStart();
    for (int r = 0; r < 2; ++r) cs[size_t(r)].allReduce(bs[size_t(r)], bs[size_t(r)], ReduceOp::Max, ss[size_t(r)]);
    Communicator::groupEnd();
    for (auto& s : ss) s.synchronize();
    for (auto& b : bs) CHECK(collcheck::download(b) == std::vector<double>(300, 2.5));
    CHECK(groups() > groupsBefore);
    char call[256];
    lastCall(call, sizeof call);
    // bf16 max on NCCL's own types (ncclBfloat16 = 9, ncclMax = 2), with
    // device 1's context current and its stream.
    CHECK(std::string(call) == "AllReduce count=300 type=9 op=2 device=1 stream_device=1");
    // Data movement is in bytes (ncclInt8), whatever the dtype; the
    // synchronous calls of a group are waited for at its end.
    std::vector<Buffer> gs = {cs[0].device().alloc(DType::BF16, 600), cs[1].device().alloc(DType::BF16, 600)};
    Communicator::groupStart();
    for (int r = 0; r < 2; ++r) cs[size_t(r)].allGather(bs[size_t(r)], gs[size_t(r)]);
    Communicator::groupEnd();
    lastCall(call, sizeof call);
    CHECK(std::string(call) == "AllGather count=600 type=0 op=-1 device=1 stream_device=1");
    CHECK(collcheck::download(gs[0]) == std::vector<double>(600, 2.5));
  }
  CHECK(live() == liveBefore);  // ncclCommDestroy when the members go
  CHECK_THAT(errorOf<UsageError>([] { Communicator::createLocal({Device::cuda(0), Device::cuda(0)}); }),
             Contains("appears twice"));
}

TEST_CASE("NCCL ranks on threads meet through the TCP and file bootstraps", "[runtime][collectives][nccl]") {
  EnvGuard cuda("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  EnvGuard nccl("TESSERA_NCCL_LIBRARY", TESSERA_FAKE_NCCL);
  const std::string tcp = "tcp:127.0.0.1:" + std::to_string(freePort());
  auto make = [](const std::string& bootstrap) {
    return [bootstrap](int r) {
      CommOptions o;
      o.bootstrap = bootstrap;
      o.rank = r;
      o.size = 2;
      o.timeoutSeconds = 30;
      return Communicator::create(Device::cuda(r), o);
    };
  };
  // Every call, synchronous and on streams, checked across ranks over the
  // rendezvous's connections.
  requireAllPassed(ranksOnThreads(2, make(tcp), [](const Communicator& c) {
    if (auto e = collcheck::all(c, {}, 300); !e.empty()) return "synchronous: " + e;
    return collcheck::all(c, c.device().createStream(), 300);
  }));
  // A mismatch is found before anything is enqueued, on both ranks.
  const std::string tcp2 = "tcp:127.0.0.1:" + std::to_string(freePort());
  requireAllPassed(ranksOnThreads(2, make(tcp2), [](const Communicator& c) -> std::string {
    std::string e = errorOf<CommError>([&] {
      Buffer b = c.device().alloc(DType::F32, c.rank() ? 8 : 9);
      c.allReduce(b, b, ReduceOp::Sum);
    });
    if (e.find("rank 0: all_reduce (sum) of 9 f32 elements; rank 1: all_reduce (sum) of 8") == std::string::npos)
      return "mismatch: " + e;
    return collcheck::allReduce(c, DType::F32, ReduceOp::Sum, 64, false, {});
  }));
  // The file bootstrap: rank 0 writes the id, removed once both joined.
  const std::string path = std::filesystem::temp_directory_path() / ("tessera-nccl-id-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  requireAllPassed(ranksOnThreads(2, make("file:" + path), [](const Communicator& c) {
    return collcheck::allReduce(c, DType::F32, ReduceOp::Sum, 100, false, {});
  }));
  CHECK_FALSE(std::filesystem::exists(path));
}

// The CUDA toolkit's own libnccl.so.2, not the stand-in: every entry point
// the engine declares resolves in it (a missing one would be named, as
// above), and with no GPU behind the (fake) driver, creating the group
// reaches NCCL, whose own failure comes back named with its call.
TEST_CASE("the CUDA toolkit's real NCCL loads and reports its own error without a GPU",
          "[runtime][collectives][nccl]") {
  std::string real;
  for (const char* p : {"/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2"})
    if (::access(p, R_OK) == 0) real = p;
  if (real.empty()) {
    WARN("SKIPPED: no libnccl.so.2 in /usr/local/cuda (the CUDA toolkit's NCCL)");
    return;
  }
  EnvGuard cuda("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  EnvGuard nccl("TESSERA_NCCL_LIBRARY", real.c_str());
  Device gpu = Device::cuda(0);
  CommOptions one;
  one.bootstrap = "tcp:127.0.0.1:" + std::to_string(freePort());
  one.rank = 0;
  one.size = 1;
  std::string why;
  try {
    Communicator::create(gpu, one);
  } catch (const tessera::Error& e) {
    why = e.what();
  }
  INFO(why);
  // Loaded and resolved (no "not available"); ncclGetUniqueId ran (the
  // TCP bootstrap carried its id); ncclCommInitRank is NCCL's refusal,
  // with its status text and ncclGetLastError's detail.
  CHECK_THAT(why, !Contains("not available"));
  CHECK_THAT(why, Contains("ncclCommInitRank (rank 0 of 1) failed: "));
  CHECK_THAT(why, Contains("(ncclResult_t "));
  CHECK_THAT(why, Contains("; last error: "));
}

TEST_CASE("NCCL errors: missing library, failed calls, bootstraps", "[runtime][collectives][nccl]") {
  EnvGuard cuda("TESSERA_CUDA_LIBRARY", TESSERA_FAKE_CUDA);
  Device gpu = Device::cuda(0);
  CommOptions one;
  one.bootstrap = "tcp:127.0.0.1:" + std::to_string(freePort());
  one.rank = 0;
  one.size = 1;
  {
    EnvGuard nccl("TESSERA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
    CHECK_THAT(errorOf<DeviceError>([&] { Communicator::create(gpu, one); }),
               Contains("NCCL not available: dlopen(/nonexistent/libnccl.so.2) failed (from TESSERA_NCCL_LIBRARY)"));
  }
  {
    EnvGuard nccl("TESSERA_NCCL_LIBRARY", TESSERA_FAKE_CUDA);
    CHECK_THAT(errorOf<DeviceError>([&] { Communicator::create(gpu, one); }), Contains("lacks ncclGetVersion"));
  }
  EnvGuard nccl("TESSERA_NCCL_LIBRARY", TESSERA_FAKE_NCCL);
  auto failNext = fakeFn<void (*)(int)>(TESSERA_FAKE_NCCL, "fake_nccl_fail_next");
  auto asyncError = fakeFn<void (*)(int)>(TESSERA_FAKE_NCCL, "fake_nccl_set_async_error");
  auto aborts = fakeFn<int (*)()>(TESSERA_FAKE_NCCL, "fake_nccl_aborts");
  const int abortsBefore = aborts();
  {
    Communicator c = Communicator::create(gpu, one);
    CHECK(c.size() == 1);
    Buffer b = gpu.alloc(DType::F32, 16);
    c.allReduce(b, b, ReduceOp::Sum);
    failNext(5);
    std::string e = errorOf<CommError>([&] { c.allReduce(b, b, ReduceOp::Sum); });
    CHECK_THAT(
        e, Contains("all_reduce (sum) of 16 f32 elements on rank 0 of 1 (nccl): ncclAllReduce failed: invalid usage"));
    CHECK_THAT(e, Contains("last error: injected failure"));
    CHECK_THAT(errorOf<CommError>([&] { c.broadcast(b, 0); }), Contains("failed earlier"));
  }
  CHECK(aborts() == abortsBefore + 1);  // a failed communicator is aborted, not destroyed
  {
    one.bootstrap = "tcp:127.0.0.1:" + std::to_string(freePort());
    Communicator c = Communicator::create(gpu, one);
    Buffer b = gpu.alloc(DType::I32, 4);
    asyncError(6);
    CHECK_THAT(errorOf<CommError>([&] { c.allReduce(b, b, ReduceOp::Sum); }),
               Contains("NCCL reports an asynchronous error: remote process exited"));
  }
  // Bootstrap mistakes.
  CommOptions bad = one;
  bad.bootstrap = "smoke:signals";
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::create(gpu, bad); }), Contains("is not \"mpi\""));
  bad.bootstrap = "tcp:127.0.0.1";
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::create(gpu, bad); }), Contains("no port"));
  bad.bootstrap = "tcp:somewhere:80";
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::create(gpu, bad); }), Contains("is not an IPv4 address"));
  bad.bootstrap = "tcp:127.0.0.1:" + std::to_string(freePort());
  bad.rank = 2;
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::create(gpu, bad); }),
             Contains("needs this member's CommOptions::rank"));
  bad.rank = 1;
  bad.size = 2;
  bad.timeoutSeconds = 0.3;  // rank 0 never comes
  CHECK_THAT(errorOf<CommError>([&] { Communicator::create(gpu, bad); }),
             Contains("rank 0 did not open the rendezvous"));
  const std::string path = std::filesystem::temp_directory_path() / ("tessera-stale-" + std::to_string(::getpid()));
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fclose(f);
  }
  bad.bootstrap = "file:" + path;
  bad.rank = 0;
  CHECK_THAT(errorOf<CommError>([&] { Communicator::create(gpu, bad); }), Contains("exists already"));
  std::filesystem::remove(path);
  CommOptions none;
  CHECK_THAT(errorOf<UsageError>([&] { Communicator::create(gpu, none); }), Contains("not started by mpirun"));
  // A stream of another device.
  {
    one.bootstrap = "tcp:127.0.0.1:" + std::to_string(freePort());
    Communicator c = Communicator::create(gpu, one);
    Buffer b = gpu.alloc(DType::F32, 4);
    CHECK_THAT(errorOf<UsageError>([&] { c.allReduce(b, b, ReduceOp::Sum, Device::cuda(1).createStream()); }),
               Contains("the stream belongs to 'cuda:1"));
  }
}

// ---- RCCL on the fake HIP runtime ----------------------------------------------------

TEST_CASE("RCCL groups on the fake HIP runtime", "[runtime][collectives][rccl]") {
  EnvGuard hip("TESSERA_HIP_LIBRARY", TESSERA_FAKE_HIP);
  {
    EnvGuard rccl("TESSERA_RCCL_LIBRARY", nullptr);
    // librccl.so is not installed here.
    std::string e = errorOf<DeviceError>([] { Communicator::createLocal({Device::hip(0), Device::hip(1)}); });
    CHECK_THAT(e, Contains("RCCL not available: dlopen(librccl.so) failed"));
  }
  EnvGuard rccl("TESSERA_RCCL_LIBRARY", TESSERA_FAKE_RCCL);
  std::vector<Communicator> cs = Communicator::createLocal({Device::hip(0), Device::hip(1)});
  CHECK(cs[0].engine() == CommEngine::RCCL);
  CHECK_THAT(cs[1].engineName(), Contains("rccl 2.28.9"));
  std::vector<Buffer> bs;
  for (int r = 0; r < 2; ++r)
    bs.push_back(collcheck::upload(cs[size_t(r)], DType::F16, std::vector<double>(50, r + 1)));
  Communicator::groupStart();
  for (int r = 0; r < 2; ++r) cs[size_t(r)].allReduce(bs[size_t(r)], bs[size_t(r)], ReduceOp::Sum);
  Communicator::groupEnd();
  for (auto& b : bs) CHECK(collcheck::download(b) == std::vector<double>(50, 3));
  // Ranks on threads, through the TCP bootstrap: every call.
  const std::string tcp = "tcp:127.0.0.1:" + std::to_string(freePort());
  requireAllPassed(ranksOnThreads(
      2,
      [&](int r) {
        CommOptions o;
        o.bootstrap = tcp;
        o.rank = r;
        o.size = 2;
        o.timeoutSeconds = 30;
        return Communicator::create(Device::hip(r), o);
      },
      [](const Communicator& c) { return collcheck::all(c, c.device().createStream(), 200); }));
}

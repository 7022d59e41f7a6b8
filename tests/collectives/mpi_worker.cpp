// One rank of the multi-process collective tests (tests/collectives_test.sh
// starts it under mpirun): `comm_mpi_worker MODE`. Every rank prints one
// line "rank R: PASS ..." or "rank R: FAIL ..." and exits 0 or 1.
//
//   ops             every call, dtype and operation, synchronous and on a
//                   stream, on the CPU device; on the emulator device;
//                   on external memory; ordered with events
//   mismatch-count  the ranks' counts differ: a CommError naming both sides
//   mismatch-dtype  f32 against i32; mismatch-op: sum against max;
//   mismatch-root   broadcast roots; mismatch-p2p: a send of 10 against a
//                   recv of 12; mismatch-alltoall: per-peer counts
//                   (each then checks that the communicator still works)
//   dead-peer       the last rank is killed (SIGKILL) while the others are
//                   in an all_reduce waiting for it; they must fail with a
//                   CommError within the timeout (TESSERA_COMM_TIMEOUT).
//                   (A rank that dies after sending its part may let some
//                   others complete: which ones depends on the algorithm.)
//   no-call         the last rank never makes the call and exits at once
//                   after the others' timeout: they fail with the timeout.
//                   It ends without MPI_Finalize, as the others do once
//                   their communicator failed: Open MPI's MPI_Finalize
//                   waits in a job-wide fence for ranks that skip it, which
//                   it usually (not always) sees have exited.
//
// Built as comm_mpi_worker_linked (TS_WORKER_LINKS_MPI), the program links
// Open MPI itself, initialises it and uses MPI_COMM_WORLD before Tessera
// does: Tessera must then use that MPI (not initialise or finalise its own)
// and find the predefined objects where the program's copy relocations put
// them.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#ifdef TS_WORKER_LINKS_MPI
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include "checks.h"
#include "tessera/runtime/Collectives.h"

namespace {

using namespace tessera;
using namespace tessera::rt;
using tessera::collcheck::upload;

int rankOf(const Communicator& c) { return c ? c.rank() : -1; }

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// A mismatch: `bad` makes this rank's side of the call; every rank must
// throw a CommError containing `expect`, and the communicator must work
// afterwards.
template <class F>
std::string expectMismatch(const Communicator& c, const char* expect, F&& bad) {
  try {
    bad();
    return "no error (want a CommError containing '" + std::string(expect) + "')";
  } catch (const CommError& e) {
    const std::string m = e.what();
    if (m.find(expect) == std::string::npos) return "the CommError does not say '" + std::string(expect) + "': " + m;
    if (auto again = collcheck::allReduce(c, DType::F32, ReduceOp::Sum, 100, false, {}); !again.empty())
      return "the communicator does not work after the mismatch: " + again;
    return "";
  }
}

std::string ops(const Communicator& c) {
  if (auto e = collcheck::all(c, {}); !e.empty()) return "synchronous: " + e;
  Stream s = c.device().createStream();
  if (auto e = collcheck::all(c, s); !e.empty()) return "on a stream: " + e;
  // The same group on the SIMT emulator's (host) memory.
  Communicator emu = Communicator::create(Device::emulator("nvptx:sm_80"));
  if (auto e = collcheck::allReduce(emu, DType::F32, ReduceOp::Sum, 333, false, {}); !e.empty())
    return "emulator: " + e;
  // External memory: a std::vector wrapped in place.
  std::vector<float> host(64, float(c.rank() + 1));
  Buffer ext = c.device().wrap(host.data(), DType::F32, host.size());
  c.allReduce(ext, ext, ReduceOp::Sum);
  const float want = float(c.size() * (c.size() + 1) / 2);
  for (float v : host)
    if (v != want) return "external memory: got " + std::to_string(v) + ", want " + std::to_string(want);
  // Ordered with events: a copy on one stream, the all_reduce on another
  // that waits for it, then a copy back after an event.
  Stream copyStream = c.device().createStream(), commStream = c.device().createStream();
  std::vector<float> in(4096, 1.0f), out(4096, 0.0f);
  Buffer buf = c.device().alloc(DType::F32, in.size());
  buf.copyFromHostAsync(copyStream, in.data(), in.size() * 4);
  Event copied = c.device().createEvent();
  copied.record(copyStream);
  commStream.wait(copied);
  c.allReduce(buf, buf, ReduceOp::Sum, commStream);
  Event reduced = c.device().createEvent();
  reduced.record(commStream);
  copyStream.wait(reduced);
  buf.copyToHostAsync(copyStream, out.data(), out.size() * 4);
  copyStream.synchronize();
  for (float v : out)
    if (v != float(c.size())) return "ordered with events: got " + std::to_string(v);
  return "";
}

std::string mismatch(const Communicator& c, const std::string& mode) {
  const int r = c.rank(), P = c.size();
  const bool odd = r == P - 1;  // the rank that differs
  Device d = c.device();
  if (mode == "mismatch-count")
    return expectMismatch(c, "do not match", [&] {
      Buffer b = d.alloc(DType::F32, odd ? 1001 : 1000);
      c.allReduce(b, b, ReduceOp::Sum);
    });
  if (mode == "mismatch-dtype")
    return expectMismatch(c, "do not match", [&] {
      Buffer b = d.alloc(odd ? DType::I32 : DType::F32, 256);
      c.allReduce(b, b, ReduceOp::Sum);
    });
  if (mode == "mismatch-op")
    return expectMismatch(c, "all_reduce (max)", [&] {
      Buffer b = d.alloc(DType::F32, 16);
      c.allReduce(b, b, odd ? ReduceOp::Max : ReduceOp::Sum);
    });
  if (mode == "mismatch-root")
    return expectMismatch(c, "from rank 1", [&] {
      Buffer b = d.alloc(DType::I32, 16);
      c.broadcast(b, odd ? 1 : 0);
    });
  if (mode == "mismatch-p2p") {
    // Ranks 0 and 1 pair up; the others only check the communicator.
    if (r > 1) return collcheck::allReduce(c, DType::F32, ReduceOp::Sum, 100, false, {});
    return expectMismatch(c, "do not match", [&] {
      if (r == 0) c.send(d.alloc(DType::F32, 10), 1);
      if (r == 1) c.recv(d.alloc(DType::F32, 12), 0);
      // Rank > 1 joins the follow-up all_reduce only.
    });
  }
  if (mode == "mismatch-alltoall")
    return expectMismatch(c, "sendCounts[r] must equal", [&] {
      std::vector<size_t> sc(static_cast<size_t>(P), 2), rc(static_cast<size_t>(P), 2);
      if (odd) rc[0] = 3;
      Buffer s = d.alloc(DType::F32, 2 * size_t(P)), rb = d.alloc(DType::F32, 2 * size_t(P) + 1);
      c.allToAll(s, sc, rb, rc);
    });
  return "unknown mode " + mode;
}

std::string deadPeer(const Communicator& c) {
  const int r = c.rank(), P = c.size();
  Buffer b = c.device().alloc(DType::F32, size_t(16) << 20);  // 64 MiB: the call lasts
  // Everyone is in the group before the peer dies.
  if (auto e = collcheck::allReduce(c, DType::F32, ReduceOp::Sum, 10, false, {}); !e.empty()) return e;
  if (r == P - 1) {
    // The others are inside the all_reduce, waiting for this rank's part,
    // when it dies: none of them can complete it.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::printf("rank %d: dying while the others are in the all_reduce\n", r);
    std::fflush(stdout);
    ::kill(::getpid(), SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.allReduce(b, b, ReduceOp::Sum);
  } catch (const CommError& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("rank %d: CommError after %.1f s: %s\n", r, s, firstLine(e.what()).c_str());
    // The communicator refuses further calls at once.
    try {
      c.allReduce(b, b, ReduceOp::Sum);
      return "a call after the failure did not throw";
    } catch (const CommError& e2) {
      if (std::string(e2.what()).find("failed earlier") == std::string::npos)
        return std::string("a call after the failure: ") + e2.what();
    }
    return "";
  }
  return "the all_reduce completed although rank " + std::to_string(P - 1) + " died";
}

std::string noCall(const Communicator& c) {
  const int r = c.rank(), P = c.size();
  if (r == P - 1) {
    // Stays alive past the others' timeout without making the call.
    const char* t = std::getenv("TESSERA_COMM_TIMEOUT");
    std::this_thread::sleep_for(std::chrono::duration<double>(t ? std::atof(t) + 2 : 7));
    return "";
  }
  Buffer b = c.device().alloc(DType::F32, 1000);
  try {
    c.allReduce(b, b, ReduceOp::Sum);
  } catch (const CommError& e) {
    std::printf("rank %d: CommError: %s\n", r, firstLine(e.what()).c_str());
    return std::string(e.what()).find("did not start the matching call") != std::string::npos
               ? ""
               : std::string("unexpected message: ") + e.what();
  }
  return "the all_reduce completed without the last rank";
}

}  // namespace

int main(int argc, char** argv) {
#ifdef TS_WORKER_LINKS_MPI
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Barrier(MPI_COMM_WORLD);
#endif
  const std::string mode = argc > 1 ? argv[1] : "ops";
  Communicator c;
  std::string err;
  try {
    c = Communicator::create(Device::cpu());
    if (mode == "ops")
      err = ops(c);
    else if (mode.rfind("mismatch-", 0) == 0)
      err = mismatch(c, mode);
    else if (mode == "dead-peer")
      err = deadPeer(c);
    else if (mode == "no-call")
      err = noCall(c);
    else
      err = "unknown mode '" + mode + "'";
  } catch (const std::exception& e) {
    err = std::string("exception: ") + e.what();
  }
  std::printf("rank %d: %s %s%s%s\n", rankOf(c), err.empty() ? "PASS" : "FAIL", mode.c_str(), err.empty() ? "" : ": ",
              err.c_str());
  std::fflush(stdout);
  if (mode == "no-call" && c && c.rank() == c.size() - 1) std::_Exit(err.empty() ? 0 : 1);
#ifdef TS_WORKER_LINKS_MPI
  c = Communicator();  // its duplicate of MPI_COMM_WORLD is freed before MPI_Finalize
  MPI_Finalize();
#endif
  return err.empty() ? 0 : 1;
}

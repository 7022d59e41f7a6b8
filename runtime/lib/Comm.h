// Collectives, runtime-private: the calls as the engines see them (checked
// above, in Collectives.cpp), the member interface every engine implements
// (MPI in MpiEngine.cpp, NCCL / RCCL in NcclEngine.cpp, the in-process
// engine in LocalEngine.cpp), the cross-rank check of calls (CommCheck.cpp)
// and the bootstrap channels (Bootstrap.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "DeviceImpl.h"
#include "tessera/runtime/Collectives.h"

namespace tessera::rt {

namespace comm {

enum class Kind : uint8_t { AllReduce, AllGather, ReduceScatter, Broadcast, AllToAll, Send, Recv };
const char* kindName(Kind k);  // "all_reduce", ...
inline bool isPointToPoint(Kind k) { return k == Kind::Send || k == Kind::Recv; }

/// One member's call, checked: addresses are the views' (offset applied),
/// counts are in elements of `dtype`.
struct Call {
  Kind kind = Kind::AllReduce;
  ReduceOp op = ReduceOp::Sum;  // all_reduce, reduce_scatter
  DType dtype = DType::F32;
  DevicePtr send = 0, recv = 0;  // broadcast / send: `send`; recv: `recv`
  /// all_reduce, broadcast, send, recv: the elements; all_gather: each
  /// rank's block (send); reduce_scatter: each rank's block (recv);
  /// all_to_all: unused (the per-peer counts).
  size_t count = 0;
  int peer = -1;                               // broadcast: the root; send / recv: the other rank
  std::vector<size_t> sendCounts, recvCounts;  // all_to_all, elements per rank
  bool inPlace = false;                        // all_reduce: send == recv; all_gather: send is recv's block
};

/// "all_reduce (sum) of 1024 f32 elements", "send of 10 i32 elements to rank 1".
std::string describe(const Call& c);

/// What one rank says about its next group of collective calls; every rank
/// gathers every rank's and compares them before data moves. Plain int64s,
/// the same layout everywhere.
struct Header {
  int64_t seq = 0;  // the member's collective group number, from 0
  int64_t calls = 0;
  // The first collective call.
  int64_t kind = -1, dtype = -1, op = -1, count = -1, peer = -1;
  int64_t digest = 0;  // of every collective call of the group
};
static_assert(sizeof(Header) == 8 * sizeof(int64_t));

/// What the two sides of a send / recv tell each other first.
struct PeerHeader {
  int64_t seq = 0;  // the call's number between this pair, in this direction
  int64_t kind = -1, dtype = -1, count = -1;
};

Header headerOf(const std::vector<Call>& calls, int64_t seq);
/// Throws CommError naming the differing ranks when the headers of all
/// ranks (all[r] is rank r's) are not the same; `self` is this rank.
void compareHeaders(const std::vector<Header>& all, int self, const std::string& engine);
/// all_to_all counts: countsOfAll[p] is rank p's allToAllCounts (its
/// sendCounts, then its recvCounts). Every rank checks every pair and throws
/// the same CommError on a mismatch.
void compareAllToAll(const std::vector<std::vector<int64_t>>& countsOfAll, DType dtype, int self,
                     const std::string& engine);
std::vector<int64_t> allToAllCounts(const Call& c);
PeerHeader peerHeaderOf(const Call& c, int64_t seq);
/// Both sides' headers of one send / recv pair; throws CommError on a mismatch.
void comparePeer(const PeerHeader& mine, const PeerHeader& theirs, int self, int peer, const std::string& engine);

/// dst[i] = dst[i] op src[i] for n elements of dtype (f16 / bf16 through
/// f32, rounded once per element).
void reduceInto(DType t, ReduceOp op, void* dst, const void* src, size_t n);
/// Whether `t` may be reduced.
bool reducible(DType t);

/// The wait bound of a call: CommOptions::timeoutSeconds, else
/// TESSERA_COMM_TIMEOUT, else 300 s. UsageError for a bad value.
double resolveTimeout(double optionSeconds);

using Clock = std::chrono::steady_clock;
inline Clock::time_point deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}
/// "5 s", "0.5 s".
std::string secondsText(double s);

/// The order a member's batches run in: the order they were submitted,
/// whatever streams they were queued on, so that every rank issues its
/// calls to the engine in the same order.
class Turns {
 public:
  uint64_t take() {
    std::lock_guard<std::mutex> lock(mu_);
    return next_++;
  }
  /// Waits until `ticket` is served; false at the deadline.
  bool wait(uint64_t ticket, Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return serving_ == ticket; });
  }
  void pass() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++serving_;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0, serving_ = 0;
};

/// A group of calls of one member, and what keeps their buffers alive.
struct Batch {
  std::vector<Call> calls;
  std::vector<std::shared_ptr<Buffer::State>> keep;
  std::string what;  // describe(first call), for messages
};

/// A control channel between the ranks of a group, for the cross-rank check
/// of NCCL / RCCL calls and their bootstrap: MPI, or the TCP rendezvous.
class Control {
 public:
  virtual ~Control() = default;
  /// Every rank's `bytes` (rank r's at r * bytes of `out`); blocks until all
  /// ranks have called it, CommError after the deadline.
  virtual void allGather(const void* in, void* out, size_t bytes, Clock::time_point deadline) = 0;
  virtual std::string name() const = 0;
};

/// A control channel over MPI_COMM_WORLD (a duplicate of it); rank and size
/// are MPI's.
struct MpiWorld {
  std::shared_ptr<Control> control;
  int rank = 0, size = 1;
};
MpiWorld mpiWorld(const std::string& call, double timeoutSeconds);

/// NCCL's unique id (128 opaque bytes), agreed by every rank through a
/// bootstrap: "mpi", "file:PATH" or "tcp:HOST:PORT". The TCP rendezvous
/// stays open as the group's control channel (`control`).
struct Rendezvous {
  std::shared_ptr<Control> control;  // null for "file:"
  int rank = 0, size = 1;
  /// "file:" on rank 0: the file, removed once every rank has joined.
  std::string removeWhenJoined;
};
/// Rank 0 produces the id with `makeId` (called only there); every rank
/// returns it in `id`.
Rendezvous rendezvous(const CommOptions& opts, const std::string& call, double timeoutSeconds,
                      const std::function<void(void* id)>& makeId, void* id, size_t idBytes);

}  // namespace comm

/// One member of a group: what a Communicator handle shares. Each engine
/// derives its own.
class CommMember {
 public:
  virtual ~CommMember() = default;
  CommMember(const CommMember&) = delete;
  CommMember& operator=(const CommMember&) = delete;

  std::shared_ptr<DeviceImpl> device;
  int rank = 0, size = 1;
  CommEngine engine = CommEngine::Auto;
  double timeoutSeconds = 300;
  bool verify = true;

  virtual std::string engineName() const = 0;
  /// Whether a call with these element counts fits the engine (MPI counts
  /// are ints); UsageError naming the limit otherwise.
  virtual void checkCount(const comm::Call& c) const {}
  /// Runs `batch` now, on the calling thread (`stream` null: the caller has
  /// already waited for the default stream), or queues it on `stream` and
  /// returns. Errors of a queued batch go to the stream.
  virtual void submit(comm::Batch batch, StreamImpl* stream) = 0;
  /// The stream a synchronous call of a group runs on (Communicator::groupEnd
  /// then waits for it): the device's default stream; for host engines a
  /// stream of the member's own, after waiting for the default stream --
  /// members of one process may share a device, and one member's call must
  /// not queue behind another's on a shared stream.
  virtual std::shared_ptr<StreamImpl> groupStream() { return device->defaultStream(); }
  /// The engine's own group bracket, around the submits of one
  /// Communicator::groupEnd (ncclGroupStart / ncclGroupEnd); a key that
  /// says which members share it (one per library), or null for none.
  virtual const void* vendorGroup() const { return nullptr; }
  virtual void vendorGroupStart() {}
  virtual void vendorGroupEnd() {}

  /// The error that made the group unusable (a timeout, an engine failure),
  /// or empty. Every later call throws it.
  std::string failure() const {
    std::lock_guard<std::mutex> lock(failMu_);
    return failure_;
  }
  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(failMu_);
    if (failure_.empty()) failure_ = why;
  }
  /// "rank 0 of 2 (mpi)", for messages.
  std::string who() const;

 protected:
  CommMember() = default;
  /// groupStream for host engines.
  std::shared_ptr<StreamImpl> ownStream() {
    device->defaultStream()->synchronize();
    std::call_once(ownOnce_, [&] { own_ = device->createStream(); });
    return own_;
  }

 private:
  mutable std::mutex failMu_;
  std::string failure_;
  std::once_flag ownOnce_;
  std::shared_ptr<StreamImpl> own_;
};

// The engines.
std::shared_ptr<CommMember> createMpiMember(const std::shared_ptr<DeviceImpl>& device, const CommOptions& opts,
                                            double timeoutSeconds);
std::vector<std::shared_ptr<CommMember>> createLocalMembers(const std::vector<std::shared_ptr<DeviceImpl>>& devices,
                                                            const CommOptions& opts, double timeoutSeconds);
/// NCCL (CUDA devices) and RCCL (HIP devices): one member per process with
/// a bootstrap, or every device of this process (ncclCommInitAll).
std::shared_ptr<CommMember> createNcclMember(const std::shared_ptr<DeviceImpl>& device, CommEngine which,
                                             const CommOptions& opts, double timeoutSeconds);
std::vector<std::shared_ptr<CommMember>> createNcclLocalMembers(const std::vector<std::shared_ptr<DeviceImpl>>& devices,
                                                                CommEngine which, const CommOptions& opts,
                                                                double timeoutSeconds);

}  // namespace tessera::rt

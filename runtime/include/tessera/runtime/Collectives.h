// Collectives across devices: a Communicator is one member (one device, one
// rank) of a group of devices that reduce, gather, scatter and exchange
// Tessera buffers. The communication runs on an existing engine, loaded
// with dlopen like the GPU drivers:
//
//   CPU and emulator devices across processes   MPI (Open MPI, libmpi.so.40)
//   CUDA devices                                NCCL (libnccl.so.2)
//   HIP devices                                 RCCL (librccl.so)
//   several host devices in one process         in-process copies ("local")
//
// Calls are asynchronous on a stream of the member's device (ordered with
// launches, copies and events there) or, with a null stream, synchronous.
// Every member must make the same calls in the same order, as with NCCL and
// MPI; each call is checked against the other ranks' (counts, dtypes,
// operation, root) before any data moves, and a mismatch, a peer that died
// or a call that never comes is a CommError on every rank that waits, never
// a hang. docs/collectives.md has the model, the engines and the figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/runtime/Runtime.h"

namespace tessera::rt {

/// How all_reduce and reduce_scatter combine the ranks' elements.
enum class ReduceOp { Sum, Prod, Max, Min };
const char* name(ReduceOp op);  // "sum", "prod", "max", "min"

/// The engine a communicator runs on.
enum class CommEngine {
  Auto,   ///< MPI for CPU and emulator devices, NCCL for CUDA, RCCL for HIP
  MPI,    ///< host memory across processes (Open MPI's libmpi.so.40)
  NCCL,   ///< CUDA devices (libnccl.so.2)
  RCCL,   ///< HIP devices (librccl.so)
  Local,  ///< host devices of one process (Communicator::createLocal only)
};
const char* name(CommEngine e);  // "auto", "mpi", "nccl", "rccl", "local"

struct CommOptions {
  CommEngine engine = CommEngine::Auto;
  /// How NCCL / RCCL members find each other (the unique id of the group):
  ///   "mpi"                 rank 0's id is broadcast over MPI_COMM_WORLD;
  ///                         rank and size are MPI's (under mpirun)
  ///   "file:/path"          rank 0 writes the id to /path, the others wait
  ///                         for it to appear
  ///   "tcp:127.0.0.1:PORT"  rank 0 listens there, the others connect
  /// Empty: "mpi" when the process was started by mpirun or MPI is
  /// initialised, else an error. MPI members always use MPI's rank and size.
  std::string bootstrap;
  /// This member's rank and the group's size, for "file:" and "tcp:".
  int rank = -1;
  int size = -1;
  /// A call (or the creation of the group) that has not completed after
  /// this many seconds fails with a CommError instead of waiting for ever.
  /// 0: TESSERA_COMM_TIMEOUT (seconds), else 300.
  double timeoutSeconds = 0;
  /// Compare every call with the other ranks' before moving data (a small
  /// exchange per call) so that mismatched counts, dtypes or operations are
  /// a CommError naming both sides rather than corrupt data or a hang. NCCL
  /// and RCCL groups check only when they have a control channel (the "mpi"
  /// and "tcp:" bootstraps); in-process groups always check (it is free
  /// there). See docs/collectives.md.
  bool verify = true;
};

/// A range of a buffer: `count` elements from element `offset` (the rest of
/// the buffer when count is npos). A Buffer converts to the whole of it.
struct BufferView {
  static constexpr size_t npos = static_cast<size_t>(-1);
  Buffer buffer;
  size_t offset = 0;
  size_t count = npos;
  BufferView() = default;
  BufferView(const Buffer& b) : buffer(b) {}  // NOLINT: a whole buffer reads naturally
  BufferView(const Buffer& b, size_t offsetElems, size_t countElems)
      : buffer(b), offset(offsetElems), count(countElems) {}
};

class CommMember;

/// One member of a group of devices. Copyable handle; the group's engine
/// resources are released when the last handle of every member is gone.
///
/// Buffers are flat arrays of `dtype` elements on this member's device. In
/// the per-call counts below, P is size(), and "elements" are of the
/// buffers' dtype (send and recv must have the same one):
///   all_reduce      send and recv: n elements each (send == recv: in place)
///   all_gather      send: n; recv: P * n, rank r's block at r * n
///   reduce_scatter  send: P * n; recv: n, this rank's block of the result
///   broadcast       buf: n on every rank; root's elements overwrite the rest
///   all_to_all      send: blocks for ranks 0..P-1 packed in rank order,
///                   sendCounts[p] elements for rank p; recv likewise with
///                   recvCounts[p] from rank p. Rank p's sendCounts[r] must
///                   equal rank r's recvCounts[p].
///   send / recv     n elements to / from `peer`, whose recv / send must
///                   name this rank with the same n and dtype
/// Reductions (all_reduce, reduce_scatter) take f32, f16, bf16, f64, i32
/// and i64; f16 and bf16 are combined in f32 and rounded once per step.
/// Data movement takes every dtype.
///
/// `stream` null: synchronous -- ordered after the device's default stream
/// and returns when the call has completed, throwing its error. A stream of
/// this member's device: queued there, returns at once; its errors are
/// thrown by the stream's next synchronisation. The buffers are held until
/// the call has run; the elements must not be touched by other work until
/// then (order with events).
class Communicator {
 public:
  Communicator() = default;
  bool isNull() const { return !m_; }
  explicit operator bool() const { return !isNull(); }

  /// This process's member of a group with one device per process: MPI's
  /// rank and size for host devices (the processes started by mpirun), or
  /// NCCL / RCCL with opts.bootstrap for GPUs. Every rank must call it.
  /// Throws DeviceError when the engine's library is missing (naming it),
  /// UsageError for bad options, CommError when the group cannot form in
  /// time.
  static Communicator create(const Device& device, const CommOptions& opts = {});
  /// A group of the devices in this process, member i being devices[i]
  /// (rank i): host devices with the in-process engine (CommEngine::Local),
  /// CUDA devices with NCCL (ncclCommInitAll), HIP devices with RCCL. One
  /// thread may drive them all: give each member's calls a stream (a
  /// synchronous call waits for the other members), and bracket the GPU
  /// members' calls with groupStart / groupEnd as NCCL requires.
  static std::vector<Communicator> createLocal(const std::vector<Device>& devices, const CommOptions& opts = {});

  int rank() const;
  int size() const;
  Device device() const;
  CommEngine engine() const;
  /// "mpi (Open MPI v4.1.4, libmpi.so.40)", "nccl 2.28.9 (libnccl.so.2)", "local".
  std::string engineName() const;

  void allReduce(const BufferView& send, const BufferView& recv, ReduceOp op, const Stream& stream = {}) const;
  void allGather(const BufferView& send, const BufferView& recv, const Stream& stream = {}) const;
  void reduceScatter(const BufferView& send, const BufferView& recv, ReduceOp op, const Stream& stream = {}) const;
  void broadcast(const BufferView& buf, int root, const Stream& stream = {}) const;
  void allToAll(const BufferView& send, const std::vector<size_t>& sendCounts, const BufferView& recv,
                const std::vector<size_t>& recvCounts, const Stream& stream = {}) const;
  /// Equal blocks: send and recv of P * n elements, n to and from each rank.
  void allToAll(const BufferView& send, const BufferView& recv, const Stream& stream = {}) const;
  void send(const BufferView& buf, int peer, const Stream& stream = {}) const;
  void recv(const BufferView& buf, int peer, const Stream& stream = {}) const;

  /// Calls made by this thread between groupStart and groupEnd (nestable)
  /// are issued together at the outermost groupEnd, as ncclGroupStart /
  /// ncclGroupEnd do: a member's sends and receives then proceed at once
  /// (an exchange with a peer cannot deadlock), and one thread can drive
  /// several GPUs. Each member's calls in a group must share one stream.
  static void groupStart();
  static void groupEnd();

  explicit Communicator(std::shared_ptr<CommMember> m) : m_(std::move(m)) {}
  const std::shared_ptr<CommMember>& member() const { return m_; }

 private:
  std::shared_ptr<CommMember> m_;
};

/// True when this process was started by mpirun / mpiexec (Open MPI, MPICH
/// or a PMI launcher), so that Communicator::create(Device::cpu()) forms a
/// group of the job's processes; without it, that group has one member.
bool launchedByMpi();

}  // namespace tessera::rt

// The MPI engine: host devices (CPU, emulator) across processes, one member
// per process, on Open MPI loaded with dlopen (libmpi.so.40, or the library
// named by TESSERA_MPI_LIBRARY; declarations in MpiAbi.h).
//
// Each communicator duplicates MPI_COMM_WORLD (its traffic never meets the
// program's own) with MPI_ERRORS_RETURN. A batch of calls (one call, or a
// group) runs on the stream's worker thread -- or on the caller's for a
// synchronous call -- in the order the host submitted them (a ticket per
// communicator, so that two streams cannot issue one communicator's calls
// in different orders on different ranks). It starts nonblocking operations
// (MPI_Iallreduce, ...) and tests them until they complete or the deadline
// passes: a peer that died or never calls is a CommError, never a hang.
// Before the data moves, the ranks compare their calls (Comm.h, Header):
// an all-gather of 64 bytes per rank for collectives, an exchange of 32
// bytes between the two sides of a send / recv.

#include <dlfcn.h>
#include <sched.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "Comm.h"
#include "DriverLoader.h"
#include "HostStream.h"
#include "MpiAbi.h"
#include "tessera/support/Environment.h"

namespace tessera::rt {
namespace {

using namespace mpiabi;
using comm::Call;
using comm::Clock;
using comm::Kind;

constexpr const char* kEnvVar = tessera::env::name(tessera::env::Var::MpiLibrary);

// Tags of the engine's point-to-point traffic (on its own communicator).
constexpr int kTagFromSender = 1;    // a send's header, to the receiver
constexpr int kTagFromReceiver = 2;  // a recv's header, to the sender
constexpr int kTagData = 3;

struct MpiLibrary {
  driver::Library lib;
#define TESSERA_FIELD(field, sym, R, params) PFN_##field field = nullptr;
  TESSERA_MPI_FUNCTIONS(TESSERA_FIELD)
#undef TESSERA_FIELD
#define TESSERA_FIELD(field, sym) void* field = nullptr;
  TESSERA_MPI_OBJECTS(TESSERA_FIELD)
#undef TESSERA_FIELD
  std::string unavailable;

  explicit MpiLibrary(const std::string& override) {
    lib = driver::openLibrary(override, kEnvVar, {"libmpi.so.40"});
    if (!lib.handle) {
      unavailable = "MPI not available: " + lib.error +
                    " (the MPI engine needs Open MPI's libmpi.so.40: apt-get install openmpi-bin libopenmpi-dev, or "
                    "set TESSERA_MPI_LIBRARY)";
      return;
    }
    std::string missing;
#define TESSERA_RESOLVE(field, sym, ...)                                    \
  field = reinterpret_cast<decltype(field)>(driver::findSymbol(lib, #sym)); \
  if (!field) missing += std::string(missing.empty() ? "" : ", ") + #sym;
    TESSERA_MPI_FUNCTIONS(TESSERA_RESOLVE)
#undef TESSERA_RESOLVE
    // The predefined objects: a program linked against MPI that names one
    // (MPI_COMM_WORLD) holds it in its own data by a copy relocation, and
    // MPI then uses that copy, not the library's; the global scope finds
    // it. Loaded by us alone, the library's own is the one.
#define TESSERA_RESOLVE(field, sym)                  \
  field = ::dlsym(RTLD_DEFAULT, #sym);               \
  if (!field) field = driver::findSymbol(lib, #sym); \
  if (!field) missing += std::string(missing.empty() ? "" : ", ") + #sym;
    TESSERA_MPI_OBJECTS(TESSERA_RESOLVE)
#undef TESSERA_RESOLVE
    if (!missing.empty())
      unavailable = "MPI not available: " + lib.path + " lacks " + missing +
                    " (the MPI engine needs Open MPI 3 or newer; MPICH's ABI is not supported)";
  }
};

std::shared_ptr<const MpiLibrary> mpiLibrary() { return driver::cachedDriver<MpiLibrary>(kEnvVar); }

// ---- f16 / bf16 reductions: MPI has no such types, so user operations on
// 16-bit words combine them (in f32, rounded back per element).
template <DType T, ReduceOp Op>
void userOp(void* in, void* inout, int* len, MPI_Datatype*) {
  comm::reduceInto(T, Op, inout, in, static_cast<size_t>(*len));
}

/// MPI in this process: the library, whether Tessera initialised it (and
/// so finalises it at exit), the 16-bit float operations.
class MpiProcess {
 public:
  std::shared_ptr<const MpiLibrary> lib;
  std::string version;    // "Open MPI v4.1.4, ..."
  bool ownsInit = false;  // Tessera called MPI_Init_thread
  MPI_Op halfOps[4] = {}, bf16Ops[4] = {};
  /// A communicator failed with operations in flight: MPI_Finalize could
  /// wait for a dead peer, so it is skipped at exit.
  std::atomic<bool> broken{false};

  static std::shared_ptr<MpiProcess> get(const std::string& call) {
    static std::mutex mu;
    static std::shared_ptr<MpiProcess> process;
    std::lock_guard<std::mutex> lock(mu);
    if (process) return process;
    auto lib = mpiLibrary();
    if (!lib->unavailable.empty()) throw DeviceError(call + ": " + lib->unavailable);
    auto p = std::shared_ptr<MpiProcess>(new MpiProcess(lib, call));
    process = p;
    return process;
  }

  std::string errorText(int code) const {
    char buf[kMaxErrorString + 1] = {};
    int len = 0;
    if (lib->ErrorString(code, buf, &len) != kSuccess) return "MPI error " + std::to_string(code);
    return std::string(buf, size_t(std::max(0, std::min(len, kMaxErrorString)))) + " (MPI error " +
           std::to_string(code) + ")";
  }

  MPI_Datatype type(DType t) const {
    switch (t) {
      // Unsigned elements only move (reductions take no unsigned dtype):
      // the signed type of their width carries the same bits.
      case DType::I1:
      case DType::I8:
      case DType::U8: return lib->TypeInt8;
      case DType::I16:
      case DType::U16: return lib->TypeInt16;
      case DType::I32:
      case DType::U32: return lib->TypeInt32;
      case DType::I64:
      case DType::U64: return lib->TypeInt64;
      case DType::F16:
      case DType::BF16: return lib->TypeUint16;
      case DType::F32: return lib->TypeFloat;
      case DType::F64: return lib->TypeDouble;
      case DType::F8E4M3:
      case DType::F8E5M2:
      case DType::F8E4M3FNUZ:
      case DType::F8E5M2FNUZ:
      case DType::F4E2M1:
      case DType::F6E2M3:
      case DType::F6E3M2:
      case DType::E8M0: return lib->TypeByte;  // moved, never reduced (CommCheck)
    }
    return lib->TypeByte;
  }

  MPI_Op op(DType t, ReduceOp r) const {
    if (t == DType::F16) return halfOps[int(r)];
    if (t == DType::BF16) return bf16Ops[int(r)];
    switch (r) {
      case ReduceOp::Sum: return lib->OpSum;
      case ReduceOp::Prod: return lib->OpProd;
      case ReduceOp::Max: return lib->OpMax;
      case ReduceOp::Min: return lib->OpMin;
    }
    return lib->OpSum;
  }

 private:
  MpiProcess(std::shared_ptr<const MpiLibrary> l, const std::string& call) : lib(std::move(l)) {
    auto check = [&](int rc, const char* what) {
      if (rc != kSuccess) throw DeviceError(call + ": " + what + " failed: " + errorText(rc));
    };
    int finalized = 0, initialized = 0, provided = 0;
    check(lib->Finalized(&finalized), "MPI_Finalized");
    if (finalized)
      throw DeviceError(call +
                        ": MPI was already finalised in this process (MPI_Finalize); create communicators "
                        "before it");
    check(lib->Initialized(&initialized), "MPI_Initialized");
    if (!initialized) {
      check(lib->InitThread(nullptr, nullptr, kThreadMultiple, &provided), "MPI_Init_thread");
      ownsInit = true;
      std::atexit(finalizeAtExit);
    } else {
      check(lib->QueryThread(&provided), "MPI_Query_thread");
    }
    if (provided < kThreadMultiple)
      throw DeviceError(call + ": MPI " + (ownsInit ? std::string("offers") : std::string("was initialised with")) +
                        " thread level " + std::to_string(provided) +
                        ", but Tessera's collectives run on stream threads and need kThreadMultiple (" +
                        std::to_string(kThreadMultiple) +
                        "): call MPI_Init_thread(..., kThreadMultiple, ...) or use an MPI built with threads");
    char v[kMaxLibraryVersionString + 1] = {};
    int len = 0;
    if (lib->GetLibraryVersion(v, &len) == kSuccess) {
      version.assign(v, size_t(std::max(0, std::min(len, kMaxLibraryVersionString))));
      if (auto cut = version.find_first_of(",\n"); cut != std::string::npos) version.resize(cut);
    }
#define TESSERA_OPS(T, table)                                                      \
  check(lib->OpCreate(&userOp<T, ReduceOp::Sum>, 1, &table[0]), "MPI_Op_create");  \
  check(lib->OpCreate(&userOp<T, ReduceOp::Prod>, 1, &table[1]), "MPI_Op_create"); \
  check(lib->OpCreate(&userOp<T, ReduceOp::Max>, 1, &table[2]), "MPI_Op_create");  \
  check(lib->OpCreate(&userOp<T, ReduceOp::Min>, 1, &table[3]), "MPI_Op_create");
    TESSERA_OPS(DType::F16, halfOps)
    TESSERA_OPS(DType::BF16, bf16Ops)
#undef TESSERA_OPS
    static_assert(int(ReduceOp::Sum) == 0 && int(ReduceOp::Prod) == 1 && int(ReduceOp::Max) == 2 &&
                  int(ReduceOp::Min) == 3);
  }

  static void finalizeAtExit();
};

std::weak_ptr<MpiProcess>& processForExit() {
  static auto* w = new std::weak_ptr<MpiProcess>();  // never destroyed: read at exit
  return *w;
}

void MpiProcess::finalizeAtExit() {
  auto p = processForExit().lock();
  if (!p || p->broken.load()) return;
  int finalized = 1;
  if (p->lib->Finalized(&finalized) != kSuccess || finalized) return;
  for (MPI_Op* table : {p->halfOps, p->bf16Ops})
    for (int i = 0; i < 4; ++i) p->lib->OpFree(&table[i]);
  p->lib->Finalize();
}

std::shared_ptr<MpiProcess> mpiProcess(const std::string& call) {
  auto p = MpiProcess::get(call);
  processForExit() = p;
  return p;
}

/// What a call that timed out may still use: MPI may write its buffers when
/// a late peer arrives, so they are never freed.
void bury(std::vector<std::shared_ptr<void>> things) {
  static std::mutex mu;
  static auto* graveyard = new std::vector<std::shared_ptr<void>>();
  std::lock_guard<std::mutex> lock(mu);
  for (auto& t : things) graveyard->push_back(std::move(t));
}

/// A duplicate of MPI_COMM_WORLD with errors returned, not fatal.
struct DupComm {
  std::shared_ptr<MpiProcess> mpi;
  MPI_Comm comm = nullptr;
  int rank = 0, size = 1;

  DupComm(std::shared_ptr<MpiProcess> p, const std::string& call) : mpi(std::move(p)) {
    const MpiLibrary& l = *mpi->lib;
    auto check = [&](int rc, const char* what) {
      if (rc != kSuccess) throw CommError(call + ": " + what + " failed: " + mpi->errorText(rc));
    };
    check(l.CommDup(l.CommWorld, &comm), "MPI_Comm_dup(MPI_COMM_WORLD)");
    check(l.CommSetErrhandler(comm, l.ErrorsReturn), "MPI_Comm_set_errhandler");
    check(l.CommRank(comm, &rank), "MPI_Comm_rank");
    check(l.CommSize(comm, &size), "MPI_Comm_size");
  }
  ~DupComm() {
    // Not after a failure (operations may still be in flight) or after the
    // program finalised MPI.
    int finalized = 1;
    if (comm && !mpi->broken.load() && mpi->lib->Finalized(&finalized) == kSuccess && !finalized)
      mpi->lib->CommFree(&comm);
  }
  DupComm(const DupComm&) = delete;
  DupComm& operator=(const DupComm&) = delete;
};

/// Everything the MPI operations of one batch point at, so that a timeout
/// can bury it all at once.
struct Held {
  std::vector<std::shared_ptr<void>> items;
  template <typename T>
  T* make(size_t n) {
    auto v = std::make_shared<std::vector<T>>(n);
    items.push_back(v);
    return v->data();
  }
};

class MpiMember final : public CommMember, public std::enable_shared_from_this<MpiMember> {
 public:
  MpiMember(std::shared_ptr<DeviceImpl> dev, std::unique_ptr<DupComm> c, double timeout, bool verifyCalls)
      : comm_(std::move(c)) {
    device = std::move(dev);
    rank = comm_->rank;
    size = comm_->size;
    engine = CommEngine::MPI;
    timeoutSeconds = timeout;
    verify = verifyCalls;
    sendSeq_.assign(size_t(size), 0);
    recvSeq_.assign(size_t(size), 0);
  }

  std::string engineName() const override {
    const std::string& v = comm_->mpi->version;
    return "mpi (" + (v.empty() ? std::string("MPI") : v) + ", " + comm_->mpi->lib->lib.path + ")";
  }

  void checkCount(const Call& c) const override {
    auto fits = [](size_t n) { return n <= size_t(INT_MAX); };
    bool ok = fits(c.count) && fits(c.count * size_t(size));
    size_t s = 0, r = 0;
    for (size_t x : c.sendCounts) s += x;
    for (size_t x : c.recvCounts) r += x;
    ok = ok && fits(s) && fits(r);
    if (!ok)
      throw UsageError("Communicator: " + comm::describe(c) + " on " + who() +
                       ": MPI counts and offsets are ints, so one call moves at most 2^31 - 1 elements per buffer; "
                       "split it into several calls");
  }

  std::shared_ptr<StreamImpl> groupStream() override { return ownStream(); }

  void submit(comm::Batch batch, StreamImpl* stream) override {
    if (!stream) {
      device->defaultStream()->synchronize();
      run(batch, turns_.take());
      return;
    }
    const uint64_t ticket = turns_.take();
    auto self = shared_from_this();
    static_cast<HostStream&>(*stream).submit(
        [self, ticket, b = std::make_shared<comm::Batch>(std::move(batch))] { self->run(*b, ticket); });
  }

 private:
  const MpiLibrary& lib() const { return *comm_->mpi->lib; }
  MPI_Comm comm() const { return comm_->comm; }

  // Runs one batch when its turn comes; the turn passes on however it ends.
  void run(comm::Batch& batch, uint64_t ticket) {
    const auto deadline = comm::deadlineAfter(timeoutSeconds);
    if (!turns_.wait(ticket, deadline)) {
      const std::string why = batch.what + " on " + who() + ": waited " + comm::secondsText(timeoutSeconds) +
                              " for this communicator's earlier calls to finish";
      fail(why);
      throw CommError(why);
    }
    struct Pass {
      comm::Turns& t;
      ~Pass() { t.pass(); }
    } pass{turns_};
    if (std::string f = failure(); !f.empty())
      throw CommError(batch.what + " on " + who() +
                      ": the communicator failed earlier and cannot be used any more: " + f);
    Held held;
    try {
      if (verify) check(batch, held, deadline);
      exchange(batch, held, deadline);
    } catch (const Stuck&) {
      // Operations are in flight: their memory must outlive this process's
      // use of the communicator.
      for (auto& k : batch.keep) held.items.push_back(k);
      bury(std::move(held.items));
      throw CommError(failure());
    }
  }

  struct Stuck {};

  // Tests `reqs` until they complete; a timeout or an MPI error makes the
  // communicator unusable (Stuck, with the reason kept as the failure).
  void waitAll(std::vector<MPI_Request>& reqs, Clock::time_point deadline, const std::string& what, const char* phase) {
    if (reqs.empty()) return;
    const auto start = Clock::now();
    for (unsigned i = 0;; ++i) {
      int done = 0;
      if (int rc = lib().Testall(int(reqs.size()), reqs.data(), &done, nullptr); rc != kSuccess) {
        fail(what + " on " + who() + ": MPI_Testall failed: " + comm_->mpi->errorText(rc) +
             " (a peer may have died); the communicator cannot be used any more");
        comm_->mpi->broken = true;
        throw Stuck{};
      }
      if (done) return;
      if ((i & 15) != 15) continue;
      const auto now = Clock::now();
      if (now > deadline) {
        fail(what + " on " + who() + ": " + phase + " within " + comm::secondsText(timeoutSeconds) +
             " (TESSERA_COMM_TIMEOUT or CommOptions::timeoutSeconds): a peer died, stopped, or did not make the "
             "matching call; the communicator cannot be used any more");
        comm_->mpi->broken = true;
        throw Stuck{};
      }
      // Spin briefly (latency), then share the core: under mpirun
      // --oversubscribe several ranks and the compute streams share a core.
      if (now - start > std::chrono::microseconds(100)) sched_yield();
      if (now - start > std::chrono::milliseconds(20)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void start(int rc, const std::string& what, const char* fn) {
    if (rc == kSuccess) return;
    // Nothing of this call is in flight; earlier requests of the batch may be.
    fail(what + " on " + who() + ": " + fn + " failed: " + comm_->mpi->errorText(rc));
    comm_->mpi->broken = true;
    throw Stuck{};
  }

  // The cross-rank comparison, before any data moves. A mismatch leaves the
  // communicator usable: every rank saw the same headers and failed alike.
  void check(const comm::Batch& batch, Held& held, Clock::time_point deadline) {
    const MpiLibrary& l = lib();
    bool collective = false;
    for (const Call& c : batch.calls) collective = collective || !comm::isPointToPoint(c.kind);
    std::vector<MPI_Request> reqs;
    comm::Header* mine = nullptr;
    comm::Header* all = nullptr;
    if (collective) {
      mine = held.make<comm::Header>(1);
      *mine = comm::headerOf(batch.calls, collSeq_++);
      all = held.make<comm::Header>(size_t(size));
      reqs.emplace_back();
      start(l.Iallgather(mine, 8, l.TypeInt64, all, 8, l.TypeInt64, comm(), &reqs.back()), batch.what,
            "MPI_Iallgather");
    }
    struct Pair {
      const Call* call;
      comm::PeerHeader* mine;
      comm::PeerHeader* theirs;
    };
    std::vector<Pair> pairs;
    for (const Call& c : batch.calls) {
      if (!comm::isPointToPoint(c.kind)) continue;
      const bool send = c.kind == Kind::Send;
      int64_t& seq = send ? sendSeq_[size_t(c.peer)] : recvSeq_[size_t(c.peer)];
      Pair p{&c, held.make<comm::PeerHeader>(1), held.make<comm::PeerHeader>(1)};
      *p.mine = comm::peerHeaderOf(c, seq++);
      reqs.emplace_back();
      start(l.Isend(p.mine, 4, l.TypeInt64, c.peer, send ? kTagFromSender : kTagFromReceiver, comm(), &reqs.back()),
            batch.what, "MPI_Isend");
      reqs.emplace_back();
      start(l.Irecv(p.theirs, 4, l.TypeInt64, c.peer, send ? kTagFromReceiver : kTagFromSender, comm(), &reqs.back()),
            batch.what, "MPI_Irecv");
      pairs.push_back(p);
    }
    waitAll(reqs, deadline, batch.what, "the other ranks did not start the matching call");
    const std::string eng = engineName();
    if (collective) comm::compareHeaders(std::vector<comm::Header>(all, all + size), rank, eng);
    for (const Pair& p : pairs) comm::comparePeer(*p.mine, *p.theirs, rank, p.call->peer, eng);
    // all_to_all: each rank's sendCounts against the receivers' recvCounts.
    for (const Call& c : batch.calls) {
      if (c.kind != Kind::AllToAll) continue;
      const size_t per = 2 * size_t(size);
      auto* counts = held.make<int64_t>(per);
      auto* gathered = held.make<int64_t>(size_t(size) * per);
      const std::vector<int64_t> mineCounts = comm::allToAllCounts(c);
      std::copy(mineCounts.begin(), mineCounts.end(), counts);
      std::vector<MPI_Request> r(1);
      start(l.Iallgather(counts, int(per), l.TypeInt64, gathered, int(per), l.TypeInt64, comm(), &r[0]), batch.what,
            "MPI_Iallgather");
      waitAll(r, deadline, batch.what, "the other ranks did not finish comparing all_to_all counts");
      std::vector<std::vector<int64_t>> all2(static_cast<size_t>(size));
      for (size_t p = 0; p < size_t(size); ++p) all2[p].assign(gathered + p * per, gathered + (p + 1) * per);
      comm::compareAllToAll(all2, c.dtype, rank, eng);
    }
  }

  void exchange(const comm::Batch& batch, Held& held, Clock::time_point deadline) {
    const MpiLibrary& l = lib();
    const MpiProcess& mp = *comm_->mpi;
    std::vector<MPI_Request> reqs;
    struct Copy {
      void* dst;
      const void* src;
      size_t bytes;
    };
    std::vector<Copy> after;
    auto ptr = [](DevicePtr p) { return reinterpret_cast<void*>(p); };
    for (const Call& c : batch.calls) {
      const MPI_Datatype t = mp.type(c.dtype);
      const int n = static_cast<int>(c.count);
      const size_t elt = byteSize(c.dtype);
      const std::string& what = batch.what;
      reqs.emplace_back();
      MPI_Request* q = &reqs.back();
      switch (c.kind) {
        case Kind::AllReduce:
          start(l.Iallreduce(c.inPlace ? kInPlace : ptr(c.send), ptr(c.recv), n, t, mp.op(c.dtype, c.op), comm(), q),
                what, "MPI_Iallreduce");
          break;
        case Kind::AllGather:
          start(l.Iallgather(c.inPlace ? kInPlace : ptr(c.send), n, t, ptr(c.recv), n, t, comm(), q), what,
                "MPI_Iallgather");
          break;
        case Kind::ReduceScatter: {
          // In place (recv is this rank's block of send) the result goes
          // through a temporary: MPI's kInPlace means something else.
          void* out = ptr(c.recv);
          if (c.inPlace) {
            out = held.make<uint8_t>(c.count * elt);
            after.push_back({ptr(c.recv), out, c.count * elt});
          }
          start(l.IreduceScatterBlock(ptr(c.send), out, n, t, mp.op(c.dtype, c.op), comm(), q), what,
                "MPI_Ireduce_scatter_block");
          break;
        }
        case Kind::Broadcast: start(l.Ibcast(ptr(c.send), n, t, c.peer, comm(), q), what, "MPI_Ibcast"); break;
        case Kind::AllToAll: {
          int* sc = held.make<int>(size_t(size));
          int* sd = held.make<int>(size_t(size));
          int* rc = held.make<int>(size_t(size));
          int* rd = held.make<int>(size_t(size));
          int so = 0, ro = 0;
          for (int p = 0; p < size; ++p) {
            sc[p] = static_cast<int>(c.sendCounts[size_t(p)]);
            rc[p] = static_cast<int>(c.recvCounts[size_t(p)]);
            sd[p] = so;
            rd[p] = ro;
            so += sc[p];
            ro += rc[p];
          }
          start(l.Ialltoallv(ptr(c.send), sc, sd, t, ptr(c.recv), rc, rd, t, comm(), q), what, "MPI_Ialltoallv");
          break;
        }
        case Kind::Send: start(l.Isend(ptr(c.send), n, t, c.peer, kTagData, comm(), q), what, "MPI_Isend"); break;
        case Kind::Recv: start(l.Irecv(ptr(c.recv), n, t, c.peer, kTagData, comm(), q), what, "MPI_Irecv"); break;
      }
    }
    waitAll(reqs, deadline, batch.what, "the data exchange did not finish");
    for (const Copy& c : after) std::memcpy(c.dst, c.src, c.bytes);
  }

  std::unique_ptr<DupComm> comm_;
  comm::Turns turns_;
  // Touched only by the batch whose turn it is.
  int64_t collSeq_ = 0;
  std::vector<int64_t> sendSeq_, recvSeq_;
};

/// MPI_COMM_WORLD as a control channel (NCCL / RCCL bootstrap and checks).
class MpiControl final : public comm::Control {
 public:
  explicit MpiControl(std::unique_ptr<DupComm> c) : comm_(std::move(c)) {}
  std::string name() const override { return "MPI_COMM_WORLD"; }
  void allGather(const void* in, void* out, size_t bytes, Clock::time_point deadline) override {
    std::lock_guard<std::mutex> lock(mu_);
    const MpiLibrary& l = *comm_->mpi->lib;
    if (broken_) throw CommError("the MPI control channel failed earlier");
    MPI_Request req = nullptr;
    if (int rc = l.Iallgather(in, int(bytes), l.TypeByte, out, int(bytes), l.TypeByte, comm_->comm, &req);
        rc != kSuccess)
      throw CommError("MPI_Iallgather failed: " + comm_->mpi->errorText(rc));
    for (unsigned i = 0;; ++i) {
      int done = 0;
      if (int rc = l.Testall(1, &req, &done, nullptr); rc != kSuccess) {
        broken_ = true;
        comm_->mpi->broken = true;
        throw CommError("MPI_Testall failed: " + comm_->mpi->errorText(rc));
      }
      if (done) return;
      if ((i & 15) == 15 && Clock::now() > deadline) {
        broken_ = true;
        comm_->mpi->broken = true;
        // `in` and `out` belong to the caller: the request is abandoned
        // with them, and MPI will not be finalised.
        throw CommError("the other ranks did not reach the same point within the timeout (over " + name() +
                        "): a peer died, stopped, or made another call");
      }
      if ((i & 255) == 255) sched_yield();
    }
  }

 private:
  std::mutex mu_;
  bool broken_ = false;
  std::unique_ptr<DupComm> comm_;
};

}  // namespace

std::shared_ptr<CommMember> createMpiMember(const std::shared_ptr<DeviceImpl>& device, const CommOptions& opts,
                                            double timeoutSeconds) {
  const std::string call = "Communicator::create on " + device->name() + " (mpi)";
  if (opts.rank != -1 || opts.size != -1 || !opts.bootstrap.empty())
    throw UsageError(call +
                     ": an MPI group's ranks are the processes mpirun started (MPI_COMM_WORLD); "
                     "CommOptions::rank, size and bootstrap are for NCCL and RCCL");
  auto mpi = mpiProcess(call);
  return std::make_shared<MpiMember>(device, std::make_unique<DupComm>(mpi, call), timeoutSeconds, opts.verify);
}

namespace comm {

MpiWorld mpiWorld(const std::string& call, double timeoutSeconds) {
  auto mpi = mpiProcess(call);
  auto c = std::make_unique<DupComm>(mpi, call);
  MpiWorld w;
  w.rank = c->rank;
  w.size = c->size;
  w.control = std::make_shared<MpiControl>(std::move(c));
  return w;
}

}  // namespace comm
}  // namespace tessera::rt

// The NCCL engine (CUDA devices, libnccl.so.2) and the RCCL engine (HIP
// devices, librccl.so): one implementation, since RCCL keeps NCCL's API.
// Loaded with dlopen like the drivers (declarations in NcclAbi.h); the
// library is found the same way (TESSERA_NCCL_LIBRARY, TESSERA_RCCL_LIBRARY
// name another), and a missing one is a DeviceError naming it.
//
// Calls are enqueued on the stream's CUstream / hipStream_t with the
// device's context current, each batch between ncclGroupStart and
// ncclGroupEnd; the stream holds the buffers until it is synchronised, as
// for a launch. Data movement is in bytes (ncclInt8); reductions use NCCL's
// own types, bf16 included. With a control channel (the "mpi" or "tcp:"
// bootstrap) the ranks compare each batch's collective calls on the host
// before enqueueing it.

#include <unistd.h>

#include "Comm.h"
#include "DriverLoader.h"
#include "NcclAbi.h"
#include "tessera/support/Environment.h"

#include <algorithm>

namespace tessera::rt {
namespace {

using namespace ncclabi;
using comm::Call;
using comm::Kind;

struct VendorLib {
  driver::Library lib;
#define TESSERA_FIELD(field, sym, R, params) PFN_##field field = nullptr;
  TESSERA_NCCL_FUNCTIONS(TESSERA_FIELD)
#undef TESSERA_FIELD
  PFN_GetLastError GetLastError = nullptr;
  CommEngine which;
  const char* display;  // "NCCL", "RCCL"
  std::string unavailable;
  std::string version;  // "2.28.9"

  VendorLib(const std::string& override, CommEngine w, const char* envVar, std::initializer_list<const char*> names,
            const char* disp)
      : which(w), display(disp) {
    lib = driver::openLibrary(override, envVar, names);
    if (!lib.handle) {
      unavailable = std::string(display) + " not available: " + lib.error;
      return;
    }
    std::string missing;
#define TESSERA_RESOLVE(field, sym, R, params)                          \
  field = reinterpret_cast<PFN_##field>(driver::findSymbol(lib, #sym)); \
  if (!field) missing += std::string(missing.empty() ? "" : ", ") + #sym;
    TESSERA_NCCL_FUNCTIONS(TESSERA_RESOLVE)
#undef TESSERA_RESOLVE
    GetLastError = reinterpret_cast<PFN_GetLastError>(driver::findSymbol(lib, "ncclGetLastError"));
    if (!missing.empty()) {
      unavailable = std::string(display) + " not available: " + lib.path + " lacks " + missing + " (Tessera needs " +
                    display + " 2.7 or newer)";
      return;
    }
    int v = 0;
    if (GetVersion(&v) == ncclSuccess) {
      // NCCL_VERSION_CODE: X * 10000 + Y * 100 + Z from 2.9, X * 1000 + Y * 100 + Z before.
      const int major = v >= 20900 ? v / 10000 : v / 1000, minor = v >= 20900 ? v % 10000 / 100 : v % 1000 / 100;
      version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
    }
  }

  /// "invalid argument (run with NCCL_DEBUG=WARN for details); last error: ..."
  std::string errorText(ncclResult_t r, ncclComm_t comm = nullptr) const {
    const char* s = GetErrorString ? GetErrorString(r) : nullptr;
    std::string t =
        s ? std::string(s) + " (ncclResult_t " + std::to_string(r) + ")" : "ncclResult_t " + std::to_string(r);
    if (GetLastError)
      if (const char* last = GetLastError(comm); last && *last) t += "; last error: " + std::string(last);
    return t;
  }
};

struct NcclLib : VendorLib {
  explicit NcclLib(const std::string& o)
      : VendorLib(o, CommEngine::NCCL, tessera::env::name(tessera::env::Var::NcclLibrary), {"libnccl.so.2"}, "NCCL") {}
};
struct RcclLib : VendorLib {
  explicit RcclLib(const std::string& o)
      : VendorLib(o, CommEngine::RCCL, tessera::env::name(tessera::env::Var::RcclLibrary),
                  {"librccl.so", "librccl.so.1"}, "RCCL") {}
};

std::shared_ptr<const VendorLib> vendorLib(CommEngine which) {
  if (which == CommEngine::RCCL)
    return driver::cachedDriver<RcclLib>(tessera::env::name(tessera::env::Var::RcclLibrary));
  return driver::cachedDriver<NcclLib>(tessera::env::name(tessera::env::Var::NcclLibrary));
}

ncclDataType_t reduceType(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    default: TS_UNREACHABLE("nccl: checked above: not reducible");
  }
}

ncclRedOp_t redOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Prod: return ncclProd;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

class NcclMember final : public CommMember {
 public:
  NcclMember(std::shared_ptr<DeviceImpl> dev, std::shared_ptr<const VendorLib> l, ncclComm_t c,
             std::shared_ptr<comm::Control> control, int r, int n, double timeout, bool verifyCalls)
      : lib_(std::move(l)), comm_(c), control_(std::move(control)) {
    device = std::move(dev);
    rank = r;
    size = n;
    engine = lib_->which;
    timeoutSeconds = timeout;
    verify = verifyCalls;
  }
  ~NcclMember() override {
    try {
      device->makeCurrent();
    } catch (...) {  // the driver may be shutting down; release anyway
    }
    // After a failure the peers may never come: abort rather than wait.
    if (failure().empty())
      lib_->CommDestroy(comm_);
    else
      lib_->CommAbort(comm_);
  }

  std::string engineName() const override {
    std::string n = lib_->which == CommEngine::RCCL ? "rccl" : "nccl";
    if (!lib_->version.empty()) n += " " + lib_->version;
    return n + " (" + lib_->lib.path + ")";
  }

  const void* vendorGroup() const override { return lib_.get(); }
  void vendorGroupStart() override { check(lib_->GroupStart(), "ncclGroupStart", "a group"); }
  void vendorGroupEnd() override { check(lib_->GroupEnd(), "ncclGroupEnd", "a group"); }

  void submit(comm::Batch batch, StreamImpl* stream) override {
    std::lock_guard<std::mutex> lock(mu_);  // NCCL: one thread at a time per communicator
    if (std::string f = failure(); !f.empty())
      throw CommError(batch.what + " on " + who() +
                      ": the communicator failed earlier and cannot be used any more: " + f);
    device->makeCurrent();
    std::shared_ptr<StreamImpl> def;
    StreamImpl* s = stream;
    if (!s) {
      def = device->defaultStream();
      s = def.get();
    }
    if (verify && control_) crossCheck(batch);
    const ncclStream_t ns = s->native();
    check(lib_->GroupStart(), "ncclGroupStart", batch.what);
    std::exception_ptr err;
    try {
      for (const Call& c : batch.calls) issue(c, ns, batch.what);
    } catch (...) {
      err = std::current_exception();
    }
    const ncclResult_t end = lib_->GroupEnd();
    if (err) std::rethrow_exception(err);
    check(end, "ncclGroupEnd", batch.what);
    // The buffers stay alive until the stream is synchronised.
    static_cast<DriverStream&>(*s).keep(
        std::make_shared<std::vector<std::shared_ptr<Buffer::State>>>(std::move(batch.keep)));
    if (!stream) s->synchronize();
    ncclResult_t async = ncclSuccess;
    if (lib_->CommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
      const std::string why = batch.what + " on " + who() + ": " + lib_->display +
                              " reports an asynchronous error: " + lib_->errorText(async, comm_);
      fail(why);
      throw CommError(why);
    }
  }

 private:
  void check(ncclResult_t r, const char* fn, const std::string& what) {
    if (r == ncclSuccess) return;
    const std::string why = what + " on " + who() + ": " + fn + " failed: " + lib_->errorText(r, comm_);
    fail(why);
    throw CommError(why);
  }

  void issue(const Call& c, ncclStream_t s, const std::string& what) {
    const VendorLib& l = *lib_;
    auto* send = reinterpret_cast<const void*>(c.send);
    auto* recv = reinterpret_cast<void*>(c.recv);
    const size_t elt = byteSize(c.dtype);
    switch (c.kind) {
      case Kind::AllReduce:
        return check(l.AllReduce(send, recv, c.count, reduceType(c.dtype), redOp(c.op), comm_, s), "ncclAllReduce",
                     what);
      case Kind::AllGather:
        return check(l.AllGather(send, recv, c.count * elt, ncclInt8, comm_, s), "ncclAllGather", what);
      case Kind::ReduceScatter:
        return check(l.ReduceScatter(send, recv, c.count, reduceType(c.dtype), redOp(c.op), comm_, s),
                     "ncclReduceScatter", what);
      case Kind::Broadcast:
        return check(l.Broadcast(send, recv, c.count * elt, ncclInt8, c.peer, comm_, s), "ncclBroadcast", what);
      case Kind::AllToAll: {
        // NCCL's all-to-all with per-peer counts: a send and a receive per
        // peer in one group.
        size_t so = 0, ro = 0;
        for (int p = 0; p < size; ++p) {
          const size_t sb = c.sendCounts[size_t(p)] * elt, rb = c.recvCounts[size_t(p)] * elt;
          if (sb)
            check(l.Send(reinterpret_cast<const uint8_t*>(send) + so, sb, ncclInt8, p, comm_, s), "ncclSend", what);
          if (rb) check(l.Recv(reinterpret_cast<uint8_t*>(recv) + ro, rb, ncclInt8, p, comm_, s), "ncclRecv", what);
          so += sb;
          ro += rb;
        }
        return;
      }
      case Kind::Send: return check(l.Send(send, c.count * elt, ncclInt8, c.peer, comm_, s), "ncclSend", what);
      case Kind::Recv: return check(l.Recv(recv, c.count * elt, ncclInt8, c.peer, comm_, s), "ncclRecv", what);
    }
  }

  // The collective calls of a batch against every rank's, over the control
  // channel, before anything is enqueued.
  void crossCheck(const comm::Batch& batch) {
    bool collective = false;
    for (const Call& c : batch.calls) collective = collective || !comm::isPointToPoint(c.kind);
    if (!collective) return;
    const auto deadline = comm::deadlineAfter(timeoutSeconds);
    const comm::Header mine = comm::headerOf(batch.calls, seq_++);
    std::vector<comm::Header> all(static_cast<size_t>(size));
    try {
      control_->allGather(&mine, all.data(), sizeof mine, deadline);
    } catch (const CommError& e) {
      const std::string why = batch.what + " on " + who() + ": comparing the call with the other ranks: " + e.what();
      fail(why);
      throw CommError(why);
    }
    comm::compareHeaders(all, rank, engineName());
    for (const Call& c : batch.calls) {
      if (c.kind != Kind::AllToAll) continue;
      const std::vector<int64_t> counts = comm::allToAllCounts(c);
      const size_t per = counts.size();
      std::vector<int64_t> gathered(size_t(size) * per);
      try {
        control_->allGather(counts.data(), gathered.data(), per * sizeof(int64_t), deadline);
      } catch (const CommError& e) {
        const std::string why = batch.what + " on " + who() + ": comparing all_to_all counts: " + e.what();
        fail(why);
        throw CommError(why);
      }
      std::vector<std::vector<int64_t>> rows(static_cast<size_t>(size));
      for (size_t p = 0; p < size_t(size); ++p)
        rows[p].assign(gathered.begin() + p * per, gathered.begin() + (p + 1) * per);
      comm::compareAllToAll(rows, c.dtype, rank, engineName());
    }
  }

  std::mutex mu_;
  std::shared_ptr<const VendorLib> lib_;
  ncclComm_t comm_ = nullptr;
  std::shared_ptr<comm::Control> control_;
  int64_t seq_ = 0;
};

std::shared_ptr<const VendorLib> loadOrThrow(CommEngine which, const std::string& call) {
  auto lib = vendorLib(which);
  if (!lib->unavailable.empty()) throw DeviceError(call + ": " + lib->unavailable);
  return lib;
}

}  // namespace

std::shared_ptr<CommMember> createNcclMember(const std::shared_ptr<DeviceImpl>& device, CommEngine which,
                                             const CommOptions& opts, double timeoutSeconds) {
  const std::string call =
      "Communicator::create on " + device->name() + " (" + (which == CommEngine::RCCL ? "rccl" : "nccl") + ")";
  auto lib = loadOrThrow(which, call);
  ncclUniqueId id{};
  comm::Rendezvous rv = comm::rendezvous(
      opts, call, timeoutSeconds,
      [&](void* p) {
        if (ncclResult_t r = lib->GetUniqueId(static_cast<ncclUniqueId*>(p)); r != ncclSuccess)
          throw CommError(call + ": ncclGetUniqueId failed: " + lib->errorText(r));
      },
      &id, sizeof id);
  device->makeCurrent();
  ncclComm_t c = nullptr;
  const ncclResult_t r = lib->CommInitRank(&c, rv.size, id, rv.rank);
  if (!rv.removeWhenJoined.empty()) ::unlink(rv.removeWhenJoined.c_str());
  if (r != ncclSuccess)
    throw CommError(call + ": ncclCommInitRank (rank " + std::to_string(rv.rank) + " of " + std::to_string(rv.size) +
                    ") failed: " + lib->errorText(r));
  return std::make_shared<NcclMember>(device, lib, c, rv.control, rv.rank, rv.size, timeoutSeconds, opts.verify);
}

std::vector<std::shared_ptr<CommMember>> createNcclLocalMembers(const std::vector<std::shared_ptr<DeviceImpl>>& devices,
                                                                CommEngine which, const CommOptions& opts,
                                                                double timeoutSeconds) {
  const std::string call =
      std::string("Communicator::createLocal (") + (which == CommEngine::RCCL ? "rccl" : "nccl") + ")";
  auto lib = loadOrThrow(which, call);
  std::vector<int> ordinals;
  for (const auto& d : devices) {
    const int o = d->ordinal();
    if (std::find(ordinals.begin(), ordinals.end(), o) != ordinals.end())
      throw UsageError(call + ": device " + d->name() + " appears twice; " + lib->display +
                       " takes each GPU once per group");
    ordinals.push_back(o);
  }
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  devices[0]->makeCurrent();
  if (ncclResult_t r = lib->CommInitAll(comms.data(), static_cast<int>(devices.size()), ordinals.data());
      r != ncclSuccess)
    throw CommError(call + ": ncclCommInitAll failed: " + lib->errorText(r));
  std::vector<std::shared_ptr<CommMember>> members;
  const int n = static_cast<int>(devices.size());
  for (int i = 0; i < n; ++i)
    members.push_back(std::make_shared<NcclMember>(devices[size_t(i)], lib, comms[size_t(i)], nullptr, i, n,
                                                   timeoutSeconds, opts.verify));
  return members;
}

}  // namespace tessera::rt

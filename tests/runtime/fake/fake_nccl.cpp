// A stand-in for libnccl.so.2, loaded by the runtime through
// TESSERA_NCCL_LIBRARY, so that the NCCL engine (library loading, the
// unique-id bootstrap, communicator creation, every call and its
// arguments, groups, errors) is tested without GPUs, on the fake CUDA
// driver's memory (fake_cuda.cpp, which it links).
//
// It behaves like NCCL where the engine depends on it:
//  * ranks of one unique id form a clique, whether they come from one
//    thread (ncclCommInitAll) or several (ncclCommInitRank, one per thread,
//    which returns once every rank has joined);
//  * every call needs a current CUDA context on the calling thread and a
//    stream of the communicator's device (ncclInvalidUsage otherwise, with
//    ncclGetLastError saying why);
//  * collectives match in call order per communicator; a collective is
//    carried out on the fake device memory once every rank has made it
//    (by whichever thread makes it last), sends and receives once both
//    sides are there. Since the fake streams do no work, a call (or a
//    group, at ncclGroupEnd) returns only when its operations are done --
//    where NCCL would return at once and its stream would wait -- so a
//    single thread driving several ranks must group their calls, as with
//    NCCL; a wait longer than 20 s is ncclRemoteError;
//  * reductions of f32, f16, bf16, f64, i32, i64 with sum, prod, max, min.
// Tests read what it saw through fake_nccl_* (dlsym) and can make the next
// call fail, or set an asynchronous error. Its functions have the types the
// runtime calls them through (runtime/lib/NcclAbi.h).

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../../runtime/lib/NcclAbi.h"

// Built as FAKE_RCCL it is librccl.so instead, on the fake HIP runtime's
// memory and streams (fake_hip.cpp): RCCL keeps NCCL's API.
#if defined(FAKE_RCCL) && !defined(FAKE_ON_HIP)
#define FAKE_ON_HIP 1
#endif
#include "fake_gpu_memory.h"

namespace {

using ncclResult_t = int;
constexpr ncclResult_t Success = 0, InvalidArgument = 4, InvalidUsage = 5;

// The unique id is the runtime's own type (NcclAbi.h): clang's
// -fsanitize=function checks each call through a pointer against the
// callee's exact type, and a look-alike struct of another name differs.
using UniqueId = tessera::rt::ncclabi::ncclUniqueId;

enum Kind { AllReduce, AllGather, ReduceScatter, Broadcast, Send, Recv };
const char* kindName(int k) {
  static const char* names[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Send", "Recv"};
  return names[k];
}

struct Op {
  int kind;
  unsigned long long send, recv;
  size_t count;
  int dtype, op, root, peer;
  std::shared_ptr<bool> done = std::make_shared<bool>(false);
};

struct Clique;
struct Comm {
  Clique* clique;
  int rank, device;
  int64_t seq = 0;
  ncclResult_t asyncError = Success;
};

struct Clique {
  int nranks;
  std::vector<Comm*> comms;  // by rank; null until joined
  std::map<int64_t, std::vector<std::unique_ptr<Op>>> pending;
  std::map<std::pair<int, int>, std::deque<Op>> sends, recvs;
};

std::mutex mu;
std::condition_variable cv;
std::map<std::string, std::unique_ptr<Clique>> cliques;
std::map<void*, std::unique_ptr<Comm>> comms;
int nextId = 1, calls = 0, groupStarts = 0, groupEnds = 0, aborts = 0, destroys = 0;
ncclResult_t failNext = Success;
std::string lastCall;
thread_local std::string lastError;  // per thread: read by ncclGetLastError without the lock
thread_local int groupDepth = 0;
thread_local std::vector<std::pair<Comm*, Op>> grouped;

size_t typeBytes(int t) {
  switch (t) {
    case 0:
    case 1: return 1;  // int8, uint8
    case 2:
    case 3:
    case 7: return 4;  // int32, uint32, float32
    case 4:
    case 5:
    case 8: return 8;  // int64, uint64, float64
    case 6:
    case 9: return 2;  // float16, bfloat16
  }
  return 0;
}

double load(int t, const uint8_t* p) {
  switch (t) {
    case 0: return double(*reinterpret_cast<const int8_t*>(p));
    case 2: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case 4: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return double(v);
    }
    case 6: {
      _Float16 v;
      std::memcpy(&v, p, 2);
      return double(v);
    }
    case 7: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case 8: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case 9: {
      uint32_t u = uint32_t(p[0] | p[1] << 8) << 16;
      float v;
      std::memcpy(&v, &u, 4);
      return v;
    }
  }
  return 0;
}

void store(int t, uint8_t* p, double x) {
  switch (t) {
    case 0: {
      int8_t v = int8_t(x);
      std::memcpy(p, &v, 1);
      return;
    }
    case 2: {
      int32_t v = int32_t(x);
      std::memcpy(p, &v, 4);
      return;
    }
    case 4: {
      int64_t v = int64_t(x);
      std::memcpy(p, &v, 8);
      return;
    }
    case 6: {
      _Float16 v = _Float16(x);
      std::memcpy(p, &v, 2);
      return;
    }
    case 7: {
      float v = float(x);
      std::memcpy(p, &v, 4);
      return;
    }
    case 8: std::memcpy(p, &x, 8); return;
    case 9: {
      float f = float(x);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      uint16_t b = uint16_t(u >> 16);
      std::memcpy(p, &b, 2);
      return;
    }
  }
}

double combine(int op, double a, double b) {
  switch (op) {
    case 0: return a + b;
    case 1: return a * b;
    case 2: return a > b ? a : b;
    case 3: return a < b ? a : b;
  }
  return a;
}

std::vector<uint8_t> peek(unsigned long long p, size_t n) {
  std::vector<uint8_t> v(n);
  if (n && !FAKE_GPU(peek)(p, v.data(), n)) std::fprintf(stderr, "fake nccl: bad device address\n");
  return v;
}
void poke(unsigned long long p, const std::vector<uint8_t>& v) {
  if (!v.empty() && !FAKE_GPU(poke)(p, v.data(), v.size())) std::fprintf(stderr, "fake nccl: bad device address\n");
}

// Every rank's op of one collective (by rank), carried out.
void run(const std::vector<std::unique_ptr<Op>>& ops) {
  const int n = int(ops.size());
  const Op& o = *ops[0];
  const size_t tb = typeBytes(o.dtype);
  switch (o.kind) {
    case AllReduce:
    case ReduceScatter: {
      const size_t total = o.kind == AllReduce ? o.count : o.count * size_t(n);
      std::vector<std::vector<uint8_t>> in;
      for (auto& x : ops) in.push_back(peek(x->send, total * tb));
      std::vector<uint8_t> res(total * tb);
      for (size_t i = 0; i < total; ++i) {
        double acc = load(o.dtype, &in[0][i * tb]);
        for (int r = 1; r < n; ++r) acc = combine(o.op, acc, load(o.dtype, &in[size_t(r)][i * tb]));
        store(o.dtype, &res[i * tb], acc);
      }
      for (int r = 0; r < n; ++r) {
        if (o.kind == AllReduce) {
          poke(ops[size_t(r)]->recv, res);
        } else {
          const size_t b = o.count * tb;
          poke(ops[size_t(r)]->recv, std::vector<uint8_t>(res.begin() + ptrdiff_t(size_t(r) * b),
                                                          res.begin() + ptrdiff_t(size_t(r + 1) * b)));
        }
      }
      return;
    }
    case AllGather: {
      std::vector<uint8_t> all;
      for (auto& x : ops) {
        auto part = peek(x->send, o.count * tb);
        all.insert(all.end(), part.begin(), part.end());
      }
      for (auto& x : ops) poke(x->recv, all);
      return;
    }
    case Broadcast: {
      auto data = peek(ops[size_t(o.root)]->send, o.count * tb);
      for (auto& x : ops) poke(x->recv, data);
      return;
    }
  }
}

void markDone(const std::vector<std::unique_ptr<Op>>& ops) {
  for (auto& x : ops) *x->done = true;
  cv.notify_all();
}

void matchP2P(Clique& c, std::pair<int, int> key) {
  auto& s = c.sends[key];
  auto& r = c.recvs[key];
  while (!s.empty() && !r.empty()) {
    poke(r.front().recv, peek(s.front().send, s.front().count * typeBytes(s.front().dtype)));
    *s.front().done = *r.front().done = true;
    cv.notify_all();
    s.pop_front();
    r.pop_front();
  }
}

// One rank's op, under mu.
void post(Comm* comm, const Op& op) {
  Clique& c = *comm->clique;
  if (op.kind == Send || op.kind == Recv) {
    auto key = op.kind == Send ? std::make_pair(comm->rank, op.peer) : std::make_pair(op.peer, comm->rank);
    (op.kind == Send ? c.sends : c.recvs)[key].push_back(op);
    matchP2P(c, key);
    return;
  }
  auto& slot = c.pending[comm->seq++];
  slot.resize(size_t(c.nranks));
  slot[size_t(comm->rank)] = std::make_unique<Op>(op);
  for (auto& x : slot)
    if (!x) return;
  run(slot);
  markDone(slot);
  c.pending.erase(comm->seq - 1);
}

ncclResult_t fail(ncclResult_t r, const std::string& why) {
  lastError = why;
  return r;
}

// Waits (under `l`) until the ops are done: the fake's stand-in for the
// stream's work.
ncclResult_t await(std::unique_lock<std::mutex>& l, const std::vector<std::shared_ptr<bool>>& done) {
  const bool ok = cv.wait_for(l, std::chrono::seconds(20), [&] {
    for (auto& d : done)
      if (!*d) return false;
    return true;
  });
  return ok ? Success : fail(6, "the other ranks did not make the matching calls within 20 s");
}

ncclResult_t enqueue(void* commp, Op op, void* stream) {
  std::unique_lock<std::mutex> l(mu);
  ++calls;
  lastCall = std::string(kindName(op.kind)) + " count=" + std::to_string(op.count) +
             " type=" + std::to_string(op.dtype) + " op=" + std::to_string(op.op) +
             " device=" + std::to_string(FAKE_GPU(current_device)()) +
             " stream_device=" + std::to_string(FAKE_GPU(stream_device)(stream));
  if (failNext != Success) {
    ncclResult_t r = failNext;
    failNext = Success;
    return fail(r, "injected failure");
  }
  auto it = comms.find(commp);
  if (it == comms.end()) return fail(InvalidArgument, "unknown communicator");
  Comm* comm = it->second.get();
  if (FAKE_GPU(current_device)() < 0) return fail(InvalidUsage, "no current device on this thread");
  if (FAKE_GPU(stream_device)(stream) != comm->device)
    return fail(InvalidUsage, "the stream is not on the communicator's device " + std::to_string(comm->device));
  if ((op.kind == Send || op.kind == Recv) && (op.peer < 0 || op.peer >= comm->clique->nranks))
    return fail(InvalidArgument, "peer out of range");
  if (groupDepth > 0) {
    grouped.emplace_back(comm, op);
    return Success;
  }
  post(comm, op);
  return await(l, {op.done});
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* v) {
  *v = 22809;
  return Success;
}

ncclResult_t ncclGetUniqueId(UniqueId* id) {
  std::lock_guard<std::mutex> l(mu);
  std::memset(id, 0, sizeof *id);
  std::snprintf(id->internal, sizeof id->internal, "fake-nccl-%d", nextId++);
  return Success;
}

static Comm* join(const std::string& key, int nranks, int rank, int device) {
  auto& c = cliques[key];
  if (!c) {
    c = std::make_unique<Clique>();
    c->nranks = nranks;
    c->comms.assign(size_t(nranks), nullptr);
  }
  auto comm = std::make_unique<Comm>(Comm{c.get(), rank, device});
  Comm* p = comm.get();
  c->comms[size_t(rank)] = p;
  comms[p] = std::move(comm);
  return p;
}

// As NCCL's, it returns once every rank has joined (20 s at most).
ncclResult_t ncclCommInitRank(void** comm, int nranks, UniqueId id, int rank) {
  std::unique_lock<std::mutex> l(mu);
  if (nranks < 1 || rank < 0 || rank >= nranks) return fail(InvalidArgument, "bad rank or size");
  const int dev = FAKE_GPU(current_device)();
  if (dev < 0) return fail(InvalidUsage, "ncclCommInitRank without a current CUDA context");
  auto& c = cliques[id.internal];
  if (c && (c->nranks != nranks || c->comms[size_t(rank)]))
    return fail(InvalidUsage, "rank " + std::to_string(rank) + " joins twice, or the sizes differ");
  Comm* me = join(id.internal, nranks, rank, dev);
  *comm = me;
  cv.notify_all();
  Clique* c2 = me->clique;
  const bool all = cv.wait_for(l, std::chrono::seconds(20), [&] {
    for (auto* m : c2->comms)
      if (!m) return false;
    return true;
  });
  return all ? Success : fail(6, "the other ranks did not join within 20 s");
}

ncclResult_t ncclCommInitAll(void** out, int ndev, const int* devlist) {
  std::lock_guard<std::mutex> l(mu);
  const std::string key = "fake-nccl-all-" + std::to_string(nextId++);
  for (int i = 0; i < ndev; ++i) out[i] = join(key, ndev, i, devlist ? devlist[i] : i);
  return Success;
}

static ncclResult_t release(void* comm) {
  auto it = comms.find(comm);
  if (it == comms.end()) return fail(InvalidArgument, "unknown communicator");
  Clique* c = it->second->clique;
  c->comms[size_t(it->second->rank)] = nullptr;
  comms.erase(it);
  for (auto* m : c->comms)
    if (m) return Success;
  for (auto ci = cliques.begin(); ci != cliques.end(); ++ci)
    if (ci->second.get() == c) {
      cliques.erase(ci);
      break;
    }
  return Success;
}

ncclResult_t ncclCommDestroy(void* comm) {
  std::lock_guard<std::mutex> l(mu);
  ++destroys;
  return release(comm);
}

ncclResult_t ncclCommAbort(void* comm) {
  std::lock_guard<std::mutex> l(mu);
  ++aborts;
  return release(comm);
}

ncclResult_t ncclCommGetAsyncError(void* comm, ncclResult_t* err) {
  std::lock_guard<std::mutex> l(mu);
  auto it = comms.find(comm);
  if (it == comms.end()) return InvalidArgument;
  *err = it->second->asyncError;
  return Success;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case 0: return "no error";
    case 1: return "unhandled cuda error";
    case 2: return "unhandled system error";
    case 3: return "internal error";
    case 4: return "invalid argument";
    case 5: return "invalid usage";
    case 6: return "remote process exited or there was a network error";
    case 7: return "NCCL operation in progress";
  }
  return "unknown result code";
}

const char* ncclGetLastError(void*) { return lastError.c_str(); }

ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, int type, int op, void* comm, void* stream) {
  return enqueue(comm, Op{AllReduce, (unsigned long long)s, (unsigned long long)r, count, type, op, -1, -1}, stream);
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t count, int type, void* comm, void* stream) {
  return enqueue(comm, Op{AllGather, (unsigned long long)s, (unsigned long long)r, count, type, -1, -1, -1}, stream);
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t count, int type, int op, void* comm, void* stream) {
  return enqueue(comm, Op{ReduceScatter, (unsigned long long)s, (unsigned long long)r, count, type, op, -1, -1},
                 stream);
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t count, int type, int root, void* comm, void* stream) {
  return enqueue(comm, Op{Broadcast, (unsigned long long)s, (unsigned long long)r, count, type, -1, root, -1}, stream);
}
ncclResult_t ncclSend(const void* s, size_t count, int type, int peer, void* comm, void* stream) {
  return enqueue(comm, Op{Send, (unsigned long long)s, 0, count, type, -1, -1, peer}, stream);
}
ncclResult_t ncclRecv(void* r, size_t count, int type, int peer, void* comm, void* stream) {
  return enqueue(comm, Op{Recv, 0, (unsigned long long)r, count, type, -1, -1, peer}, stream);
}

ncclResult_t ncclGroupStart() {
  std::lock_guard<std::mutex> l(mu);
  ++groupStarts;
  ++groupDepth;
  return Success;
}

ncclResult_t ncclGroupEnd() {
  std::unique_lock<std::mutex> l(mu);
  ++groupEnds;
  if (groupDepth == 0) return fail(InvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth > 0) return Success;
  auto ops = std::move(grouped);
  grouped.clear();
  std::vector<std::shared_ptr<bool>> done;
  for (auto& [comm, op] : ops)
    if (comms.count(comm)) {
      post(comm, op);
      done.push_back(op.done);
    }
  return await(l, done);
}

// ---- for the tests ------------------------------------------------------------

FAKE_EXPORT int fake_nccl_calls() {
  std::lock_guard<std::mutex> l(mu);
  return calls;
}
FAKE_EXPORT int fake_nccl_groups() {
  std::lock_guard<std::mutex> l(mu);
  return groupStarts == groupEnds ? groupStarts : -1;
}
FAKE_EXPORT int fake_nccl_live_comms() {
  std::lock_guard<std::mutex> l(mu);
  return int(comms.size());
}
FAKE_EXPORT int fake_nccl_aborts() {
  std::lock_guard<std::mutex> l(mu);
  return aborts;
}
FAKE_EXPORT void fake_nccl_last_call(char* out, size_t n) {
  std::lock_guard<std::mutex> l(mu);
  std::snprintf(out, n, "%s", lastCall.c_str());
}
FAKE_EXPORT void fake_nccl_fail_next(int result) {
  std::lock_guard<std::mutex> l(mu);
  failNext = result;
}
FAKE_EXPORT void fake_nccl_set_async_error(int result) {
  std::lock_guard<std::mutex> l(mu);
  for (auto& [p, c] : comms) c->asyncError = result;
}

}  // extern "C"

// Communicator, above the engines: the choice of engine, the checks every
// call gets on its own rank (null or foreign buffers, sizes, dtypes,
// overlaps, streams), and groups. The engines only see checked calls
// (Comm.h); what no rank can check alone -- that the ranks' calls match --
// is compared across ranks by the engines before data moves (CommCheck.cpp).

#include "tessera/runtime/Collectives.h"

#include <algorithm>
#include <cstdlib>

#include "Comm.h"

namespace tessera::rt {
namespace {

using comm::Batch;
using comm::Call;
using comm::Kind;

CommMember& live(const std::shared_ptr<CommMember>& m, const char* what) {
  if (!m)
    throw UsageError(std::string("Communicator::") + what +
                     " called on a null Communicator (default-constructed); get one from Communicator::create or "
                     "Communicator::createLocal");
  return *m;
}

std::string prefix(const CommMember& m, const char* what) {
  return std::string("Communicator::") + what + " (" + m.who() + ")";
}

// Host devices share host memory: a buffer of one CPU device serves another.
bool sameMemory(const std::shared_ptr<DeviceImpl>& a, const std::shared_ptr<DeviceImpl>& b) {
  return a == b || (a->kind() == DeviceKind::CPU && b->kind() == DeviceKind::CPU);
}

struct View {
  std::shared_ptr<Buffer::State> state;
  DevicePtr ptr = 0;
  size_t count = 0;
  DType dtype = DType::F32;
  size_t bytes() const { return count * byteSize(dtype); }
};

View resolve(const BufferView& v, const CommMember& m, const char* what, const char* role) {
  const std::string where = prefix(m, what);
  if (v.buffer.isNull()) throw UsageError(where + ": the " + role + " buffer is null (default-constructed)");
  const auto& st = v.buffer.state();
  if (!sameMemory(st->device, m.device))
    throw UsageError(where + ": the " + role + " buffer belongs to '" + st->device->name() +
                     "' but this member's device is '" + m.device->name() + "'" +
                     (st->device->name() == m.device->name() ? " (another instance)" : "") +
                     "; use buffers of the member's device");
  if (v.offset > st->count)
    throw UsageError(where + ": the " + role + " view starts at element " + std::to_string(v.offset) +
                     " but the buffer holds only " + bufferDesc(*st));
  const size_t count = v.count == BufferView::npos ? st->count - v.offset : v.count;
  if (count > st->count - v.offset)
    throw UsageError(where + ": the " + role + " view of " + std::to_string(count) + " elements from element " +
                     std::to_string(v.offset) + " runs past the buffer's end (it holds " + bufferDesc(*st) + ")");
  View r;
  r.state = st;
  r.count = count;
  r.dtype = st->dtype;
  r.ptr = st->ptr + v.offset * byteSize(st->dtype);
  return r;
}

bool overlap(const View& a, const View& b) {
  return a.bytes() && b.bytes() && a.ptr < b.ptr + b.bytes() && b.ptr < a.ptr + a.bytes();
}

void sameDType(const View& s, const View& r, const CommMember& m, const char* what) {
  if (s.dtype != r.dtype)
    throw UsageError(prefix(m, what) + ": the send buffer holds " + name(s.dtype) + " and the recv buffer " +
                     name(r.dtype) + "; both must have one dtype");
}

void checkReducible(DType t, const CommMember& m, const char* what) {
  if (!comm::reducible(t))
    throw UsageError(prefix(m, what) + ": " + name(t) +
                     " elements cannot be reduced; reductions take f32, f16, bf16, f64, i32 and i64");
}

void checkRank(int r, const CommMember& m, const char* what, const char* role) {
  if (r < 0 || r >= m.size)
    throw UsageError(prefix(m, what) + ": " + role + " " + std::to_string(r) + " is not a rank of this group (0 to " +
                     std::to_string(m.size - 1) + ")");
}

// ---- groups ------------------------------------------------------------------

struct GroupEntry {
  std::shared_ptr<CommMember> member;
  std::shared_ptr<StreamImpl> stream;  // null: synchronous
  Batch batch;
};

struct ThreadGroup {
  int depth = 0;
  std::vector<GroupEntry> entries;
};

ThreadGroup& threadGroup() {
  thread_local ThreadGroup g;
  return g;
}

void checkUsable(const CommMember& m, const char* what) {
  std::string f = m.failure();
  if (!f.empty())
    throw CommError(prefix(m, what) + ": the communicator failed earlier and cannot be used any more: " + f);
}

void issue(const std::shared_ptr<CommMember>& mp, const char* what, Call call,
           std::vector<std::shared_ptr<Buffer::State>> keep, const Stream& stream) {
  CommMember& m = *mp;
  checkUsable(m, what);
  if (!stream.isNull() && stream.deviceImpl() != m.device)
    throw UsageError(prefix(m, what) + ": the stream belongs to '" + stream.deviceImpl()->name() +
                     "' but this member's device is '" + m.device->name() + "'; use a stream of the member's device");
  m.checkCount(call);
  ThreadGroup& g = threadGroup();
  if (g.depth > 0) {
    for (GroupEntry& e : g.entries)
      if (e.member == mp) {
        if (e.stream != stream.impl())
          throw UsageError(prefix(m, what) +
                           ": every call of one member in a group must use the same stream (this member's earlier "
                           "calls in the group used another)");
        e.batch.calls.push_back(std::move(call));
        for (auto& k : keep) e.batch.keep.push_back(std::move(k));
        return;
      }
    Batch b;
    b.what = comm::describe(call);
    b.calls.push_back(std::move(call));
    b.keep = std::move(keep);
    g.entries.push_back({mp, stream.impl(), std::move(b)});
    return;
  }
  Batch b;
  b.what = comm::describe(call);
  b.calls.push_back(std::move(call));
  b.keep = std::move(keep);
  m.submit(std::move(b), stream.impl().get());
}

}  // namespace

// ---- creation ----------------------------------------------------------------

bool launchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS"})
    if (const char* s = std::getenv(v); s && *s) return true;
  return false;
}

Communicator Communicator::create(const Device& device, const CommOptions& opts) {
  const std::shared_ptr<DeviceImpl>& d = device.impl();
  if (!d) throw UsageError("Communicator::create: the device is null");
  const double timeout = comm::resolveTimeout(opts.timeoutSeconds);
  const DeviceKind k = d->kind();
  const bool host = k == DeviceKind::CPU || k == DeviceKind::Emulator;
  CommEngine e = opts.engine;
  if (e == CommEngine::Auto) e = host ? CommEngine::MPI : k == DeviceKind::CUDA ? CommEngine::NCCL : CommEngine::RCCL;
  const std::string call = "Communicator::create on " + d->name();
  auto refuse = [&](const std::string& why) { throw UsageError(call + ": " + why); };
  switch (e) {
    case CommEngine::MPI:
      if (!host) refuse("MPI moves host memory; a " + std::string(name(k)) + " device uses NCCL (CUDA) or RCCL (HIP)");
      return Communicator(createMpiMember(d, opts, timeout));
    case CommEngine::NCCL:
      if (k != DeviceKind::CUDA) refuse("NCCL runs on CUDA devices only");
      return Communicator(createNcclMember(d, e, opts, timeout));
    case CommEngine::RCCL:
      if (k != DeviceKind::HIP) refuse("RCCL runs on HIP devices only");
      return Communicator(createNcclMember(d, e, opts, timeout));
    case CommEngine::Local:
      refuse("CommEngine::Local groups the devices of one process: use Communicator::createLocal");
    case CommEngine::Auto: break;
  }
  TS_UNREACHABLE("Communicator::create: engine");
}

std::vector<Communicator> Communicator::createLocal(const std::vector<Device>& devices, const CommOptions& opts) {
  const std::string call = "Communicator::createLocal";
  if (devices.empty()) throw UsageError(call + ": no devices; give one device per member");
  std::vector<std::shared_ptr<DeviceImpl>> ds;
  for (const Device& dev : devices) {
    if (!dev.impl()) throw UsageError(call + ": device " + std::to_string(ds.size()) + " is null");
    ds.push_back(dev.impl());
  }
  const double timeout = comm::resolveTimeout(opts.timeoutSeconds);
  auto hostKind = [](DeviceKind k) { return k == DeviceKind::CPU || k == DeviceKind::Emulator; };
  const DeviceKind k0 = ds[0]->kind();
  for (size_t i = 1; i < ds.size(); ++i)
    if (hostKind(ds[i]->kind()) != hostKind(k0) || (!hostKind(k0) && ds[i]->kind() != k0))
      throw UsageError(call + ": devices of different kinds ('" + ds[0]->name() + "' and '" + ds[i]->name() +
                       "'); one group holds host devices, CUDA devices or HIP devices");
  if (opts.rank != -1 || opts.size != -1 || !opts.bootstrap.empty())
    throw UsageError(call +
                     ": CommOptions::rank, size and bootstrap are for Communicator::create; a local group's "
                     "ranks are the devices' positions");
  std::vector<std::shared_ptr<CommMember>> members;
  CommEngine e = opts.engine;
  if (hostKind(k0)) {
    if (e != CommEngine::Auto && e != CommEngine::Local)
      throw UsageError(call + ": host devices of one process use the in-process engine (CommEngine::Local), not " +
                       name(e));
    members = createLocalMembers(ds, opts, timeout);
  } else {
    const CommEngine want = k0 == DeviceKind::CUDA ? CommEngine::NCCL : CommEngine::RCCL;
    if (e != CommEngine::Auto && e != want)
      throw UsageError(call + ": " + name(k0) + " devices use " + name(want) + ", not " + name(e));
    members = createNcclLocalMembers(ds, want, opts, timeout);
  }
  std::vector<Communicator> r;
  for (auto& m : members) r.emplace_back(std::move(m));
  return r;
}

int Communicator::rank() const { return live(m_, "rank").rank; }
int Communicator::size() const { return live(m_, "size").size; }
Device Communicator::device() const { return Device(live(m_, "device").device); }
CommEngine Communicator::engine() const { return live(m_, "engine").engine; }
std::string Communicator::engineName() const { return live(m_, "engineName").engineName(); }

// ---- calls -------------------------------------------------------------------

void Communicator::allReduce(const BufferView& send, const BufferView& recv, ReduceOp op, const Stream& stream) const {
  const char* what = "allReduce";
  CommMember& m = live(m_, what);
  View s = resolve(send, m, what, "send"), r = resolve(recv, m, what, "recv");
  sameDType(s, r, m, what);
  checkReducible(s.dtype, m, what);
  if (s.count != r.count)
    throw UsageError(prefix(m, what) + ": the send view holds " + std::to_string(s.count) +
                     " elements and the recv view " + std::to_string(r.count) + "; all_reduce needs the same count");
  Call c;
  c.kind = Kind::AllReduce;
  c.op = op;
  c.dtype = s.dtype;
  c.send = s.ptr;
  c.recv = r.ptr;
  c.count = s.count;
  c.inPlace = s.ptr == r.ptr;
  if (!c.inPlace && overlap(s, r))
    throw UsageError(prefix(m, what) + ": the send and recv views overlap without being the same elements");
  issue(m_, what, std::move(c), {s.state, r.state}, stream);
}

void Communicator::allGather(const BufferView& send, const BufferView& recv, const Stream& stream) const {
  const char* what = "allGather";
  CommMember& m = live(m_, what);
  View s = resolve(send, m, what, "send"), r = resolve(recv, m, what, "recv");
  sameDType(s, r, m, what);
  if (r.count != s.count * size_t(m.size))
    throw UsageError(prefix(m, what) + ": the recv view holds " + std::to_string(r.count) + " elements but " +
                     std::to_string(m.size) + " ranks x " + std::to_string(s.count) +
                     " sent = " + std::to_string(s.count * size_t(m.size)) + " are gathered");
  Call c;
  c.kind = Kind::AllGather;
  c.dtype = s.dtype;
  c.send = s.ptr;
  c.recv = r.ptr;
  c.count = s.count;
  c.inPlace = s.ptr == r.ptr + size_t(m.rank) * s.bytes();
  if (!c.inPlace && overlap(s, r))
    throw UsageError(prefix(m, what) +
                     ": the send view overlaps the recv view; in place, it must be this rank's block of it (recv "
                     "elements rank * n to rank * n + n)");
  issue(m_, what, std::move(c), {s.state, r.state}, stream);
}

void Communicator::reduceScatter(const BufferView& send, const BufferView& recv, ReduceOp op,
                                 const Stream& stream) const {
  const char* what = "reduceScatter";
  CommMember& m = live(m_, what);
  View s = resolve(send, m, what, "send"), r = resolve(recv, m, what, "recv");
  sameDType(s, r, m, what);
  checkReducible(s.dtype, m, what);
  if (s.count != r.count * size_t(m.size))
    throw UsageError(prefix(m, what) + ": the send view holds " + std::to_string(s.count) + " elements but " +
                     std::to_string(m.size) + " ranks x " + std::to_string(r.count) +
                     " received = " + std::to_string(r.count * size_t(m.size)) + " are reduced");
  Call c;
  c.kind = Kind::ReduceScatter;
  c.op = op;
  c.dtype = s.dtype;
  c.send = s.ptr;
  c.recv = r.ptr;
  c.count = r.count;
  c.inPlace = r.ptr == s.ptr + size_t(m.rank) * r.bytes();
  if (!c.inPlace && overlap(s, r))
    throw UsageError(prefix(m, what) +
                     ": the recv view overlaps the send view; in place, it must be this rank's block of it (send "
                     "elements rank * n to rank * n + n)");
  issue(m_, what, std::move(c), {s.state, r.state}, stream);
}

void Communicator::broadcast(const BufferView& buf, int root, const Stream& stream) const {
  const char* what = "broadcast";
  CommMember& m = live(m_, what);
  View b = resolve(buf, m, what, "");
  checkRank(root, m, what, "the root");
  Call c;
  c.kind = Kind::Broadcast;
  c.dtype = b.dtype;
  c.send = c.recv = b.ptr;
  c.count = b.count;
  c.peer = root;
  c.inPlace = true;
  issue(m_, what, std::move(c), {b.state}, stream);
}

void Communicator::allToAll(const BufferView& send, const std::vector<size_t>& sendCounts, const BufferView& recv,
                            const std::vector<size_t>& recvCounts, const Stream& stream) const {
  const char* what = "allToAll";
  CommMember& m = live(m_, what);
  View s = resolve(send, m, what, "send"), r = resolve(recv, m, what, "recv");
  sameDType(s, r, m, what);
  for (const auto* v : {&sendCounts, &recvCounts})
    if (v->size() != size_t(m.size))
      throw UsageError(prefix(m, what) + ": " + (v == &sendCounts ? "sendCounts" : "recvCounts") + " has " +
                       std::to_string(v->size()) + " entries; give one per rank (" + std::to_string(m.size) + ")");
  auto total = [&](const std::vector<size_t>& v, const View& view, const char* role) {
    size_t t = 0;
    for (size_t x : v) {
      if (x > view.count - std::min(t, view.count))
        throw UsageError(prefix(m, what) + ": the " + role + " counts add up to more than the " + role + " view's " +
                         std::to_string(view.count) + " elements");
      t += x;
    }
  };
  total(sendCounts, s, "send");
  total(recvCounts, r, "recv");
  if (overlap(s, r))
    throw UsageError(prefix(m, what) + ": the send and recv views overlap; all_to_all is not in place");
  Call c;
  c.kind = Kind::AllToAll;
  c.dtype = s.dtype;
  c.send = s.ptr;
  c.recv = r.ptr;
  c.sendCounts = sendCounts;
  c.recvCounts = recvCounts;
  issue(m_, what, std::move(c), {s.state, r.state}, stream);
}

void Communicator::allToAll(const BufferView& send, const BufferView& recv, const Stream& stream) const {
  const char* what = "allToAll";
  CommMember& m = live(m_, what);
  View s = resolve(send, m, what, "send"), r = resolve(recv, m, what, "recv");
  if (s.count % size_t(m.size) || r.count != s.count)
    throw UsageError(prefix(m, what) + ": equal blocks need send and recv views of the same count, a multiple of " +
                     std::to_string(m.size) + " (the send view holds " + std::to_string(s.count) +
                     " elements, the recv view " + std::to_string(r.count) +
                     "); give per-rank counts for anything else");
  std::vector<size_t> counts(size_t(m.size), s.count / size_t(m.size));
  allToAll(send, counts, recv, counts, stream);
}

void Communicator::send(const BufferView& buf, int peer, const Stream& stream) const {
  const char* what = "send";
  CommMember& m = live(m_, what);
  View b = resolve(buf, m, what, "send");
  checkRank(peer, m, what, "the peer");
  Call c;
  c.kind = Kind::Send;
  c.dtype = b.dtype;
  c.send = b.ptr;
  c.count = b.count;
  c.peer = peer;
  issue(m_, what, std::move(c), {b.state}, stream);
}

void Communicator::recv(const BufferView& buf, int peer, const Stream& stream) const {
  const char* what = "recv";
  CommMember& m = live(m_, what);
  View b = resolve(buf, m, what, "recv");
  checkRank(peer, m, what, "the peer");
  Call c;
  c.kind = Kind::Recv;
  c.dtype = b.dtype;
  c.recv = b.ptr;
  c.count = b.count;
  c.peer = peer;
  issue(m_, what, std::move(c), {b.state}, stream);
}

// ---- groups ------------------------------------------------------------------

void Communicator::groupStart() { ++threadGroup().depth; }

void Communicator::groupEnd() {
  ThreadGroup& g = threadGroup();
  if (g.depth == 0)
    throw UsageError("Communicator::groupEnd without a matching Communicator::groupStart on this thread");
  if (--g.depth > 0) return;
  std::vector<GroupEntry> entries = std::move(g.entries);
  g.entries.clear();
  // The engines' own brackets (ncclGroupStart), one per library, around
  // every submit; synchronous members run on a stream (CommMember::
  // groupStream) and are waited for after the bracket closes, so that one thread can drive
  // several members without one waiting for a call the next has not made.
  std::vector<CommMember*> brackets;
  for (GroupEntry& e : entries) {
    const void* key = e.member->vendorGroup();
    if (key && std::none_of(brackets.begin(), brackets.end(), [&](CommMember* b) { return b->vendorGroup() == key; }))
      brackets.push_back(e.member.get());
  }
  std::exception_ptr first;
  for (CommMember* b : brackets) b->vendorGroupStart();
  std::vector<std::shared_ptr<StreamImpl>> waits;
  for (GroupEntry& e : entries) {
    try {
      std::shared_ptr<StreamImpl> s = e.stream;
      if (!s) {
        s = e.member->groupStream();
        waits.push_back(s);
      }
      e.member->submit(std::move(e.batch), s.get());
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  for (CommMember* b : brackets) {
    try {
      b->vendorGroupEnd();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  for (auto& s : waits) {
    try {
      s->synchronize();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace tessera::rt

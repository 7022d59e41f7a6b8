// The in-process engine: several host devices (CPU, emulator) of one
// process as the members of a group (Communicator::createLocal). Host
// memory is shared, so the members' calls meet in a rendezvous and each
// member copies and reduces what it needs straight from the others'
// buffers; there is nothing to transport.
//
// A collective is a round: every member posts its batch (the calls of one
// submission) and waits until all have posted; then each computes its
// results into private memory while the others read its buffers; once every
// member has finished reading, each writes its results (so in-place calls
// and views that alias across members are safe). Results are bit-identical
// on every member: reductions combine the ranks in rank order. Sends and
// receives meet in per-pair mailboxes, in order. A member that does not
// come within the timeout is named in the CommError of the others, whose
// posts are withdrawn, so that nothing is left pointing at their memory.

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>

#include "Comm.h"
#include "HostStream.h"

namespace tessera::rt {
namespace {

using comm::Batch;
using comm::Call;
using comm::Clock;
using comm::Kind;

void* at(DevicePtr p, size_t byteOffset = 0) { return reinterpret_cast<uint8_t*>(p) + byteOffset; }

class LocalMember;

/// What the members of one group share.
class LocalGroup {
 public:
  explicit LocalGroup(int n) : size(n) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::weak_ptr<LocalMember>> members;

  struct Round {
    std::vector<const Batch*> batches;  // by rank; null until posted
    int arrived = 0, computed = 0, left = 0;
  };
  std::map<int64_t, Round> rounds;  // by collective sequence number

  struct Post {
    const Call* call;
    bool done = false;
    std::string error;  // a mismatch, found by whoever matched the pair
  };
  // (sender, receiver) -> the posts waiting for their other side, in order.
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Post>>> sends, recvs;

  void failAll(const std::string& why);
};

class LocalMember final : public CommMember, public std::enable_shared_from_this<LocalMember> {
 public:
  LocalMember(std::shared_ptr<DeviceImpl> dev, std::shared_ptr<LocalGroup> g, int r, double timeout, bool verifyCalls)
      : group_(std::move(g)) {
    device = std::move(dev);
    rank = r;
    size = group_->size;
    engine = CommEngine::Local;
    timeoutSeconds = timeout;
    verify = verifyCalls;
  }

  std::string engineName() const override {
    return "local (" + std::to_string(size) + " host device" + (size == 1 ? "" : "s") + " of this process)";
  }

  std::shared_ptr<StreamImpl> groupStream() override { return ownStream(); }

  void submit(Batch batch, StreamImpl* stream) override {
    if (!stream) {
      device->defaultStream()->synchronize();
      run(batch, turns_.take());
      return;
    }
    const uint64_t ticket = turns_.take();
    auto self = shared_from_this();
    static_cast<HostStream&>(*stream).submit(
        [self, ticket, b = std::make_shared<Batch>(std::move(batch))] { self->run(*b, ticket); });
  }

 private:
  void run(const Batch& batch, uint64_t ticket) {
    if (std::string f = failure(); !f.empty())
      throw CommError(batch.what + " on " + who() + ": the group failed earlier and cannot be used any more: " + f);
    const auto deadline = comm::deadlineAfter(timeoutSeconds);
    if (!turns_.wait(ticket, deadline)) {
      const std::string why = batch.what + " on " + who() + ": waited " + comm::secondsText(timeoutSeconds) +
                              " for this member's earlier calls to finish";
      group_->failAll(why);
      throw CommError(why);
    }
    struct Pass {
      comm::Turns& t;
      ~Pass() { t.pass(); }
    } pass{turns_};
    bool collective = false, p2p = false;
    for (const Call& c : batch.calls) (comm::isPointToPoint(c.kind) ? p2p : collective) = true;
    if (collective) runRound(batch, deadline);
    if (p2p) runPointToPoint(batch, deadline);
  }

  // ---- collectives ----------------------------------------------------------

  void runRound(const Batch& batch, Clock::time_point deadline) {
    LocalGroup& g = *group_;
    const int64_t seq = collSeq_++;
    std::unique_lock<std::mutex> lock(g.mu);
    LocalGroup::Round& round = g.rounds[seq];
    round.batches.resize(size_t(size), nullptr);
    round.batches[size_t(rank)] = &batch;
    ++round.arrived;
    g.cv.notify_all();
    if (!g.cv.wait_until(lock, deadline, [&] { return round.arrived == size || !failure().empty(); })) {
      // Withdraw: nobody reads a batch before every member has posted.
      std::string missing;
      for (int r = 0; r < size; ++r)
        if (!round.batches[size_t(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      round.batches[size_t(rank)] = nullptr;
      if (--round.arrived == 0) g.rounds.erase(seq);
      const std::string why = batch.what + " on " + who() + ": rank(s) " + missing + " did not make the call within " +
                              comm::secondsText(timeoutSeconds) +
                              " (TESSERA_COMM_TIMEOUT or CommOptions::timeoutSeconds); with several members in one "
                              "thread, give each member's calls a stream";
      lock.unlock();
      g.failAll(why);
      throw CommError(why);
    }
    if (round.arrived != size) {  // another member failed the group
      round.batches[size_t(rank)] = nullptr;
      if (--round.arrived == 0) g.rounds.erase(seq);
      throw CommError(batch.what + " on " + who() + ": the group failed: " + failure());
    }
    const std::vector<const Batch*> all = round.batches;
    lock.unlock();

    std::string mismatch;
    std::vector<std::vector<uint8_t>> results;
    try {
      check(all, seq);  // always: free here, and a mismatch would read past a buffer
      results = compute(all);
    } catch (const CommError& e) {
      mismatch = e.what();  // every member finds the same mismatch
    }

    lock.lock();
    ++round.computed;
    g.cv.notify_all();
    // Everyone has posted; each computes without waiting on anyone, so this
    // wait is short unless a member was stopped (bounded all the same).
    if (!g.cv.wait_until(lock, deadline, [&] { return round.computed == size; })) {
      const std::string why = batch.what + " on " + who() + ": the other members did not finish reading within " +
                              comm::secondsText(timeoutSeconds);
      lock.unlock();
      g.failAll(why);
      throw CommError(why);
    }
    lock.unlock();
    if (mismatch.empty()) write(batch, results);
    lock.lock();
    if (++round.left == size) g.rounds.erase(seq);
    lock.unlock();
    if (!mismatch.empty()) throw CommError(mismatch);
  }

  void check(const std::vector<const Batch*>& all, int64_t seq) const {
    std::vector<comm::Header> headers;
    for (const Batch* b : all) headers.push_back(comm::headerOf(b->calls, seq));
    comm::compareHeaders(headers, rank, engineName());
    const Batch& mine = *all[size_t(rank)];
    size_t i = 0;
    for (const Call& c : mine.calls) {
      if (comm::isPointToPoint(c.kind)) continue;
      if (c.kind == Kind::AllToAll) {
        std::vector<std::vector<int64_t>> counts;
        for (const Batch* b : all) counts.push_back(comm::allToAllCounts(collectiveAt(*b, i)));
        comm::compareAllToAll(counts, c.dtype, rank, engineName());
      }
      ++i;
    }
  }

  static const Call& collectiveAt(const Batch& b, size_t i) {
    for (const Call& c : b.calls)
      if (!comm::isPointToPoint(c.kind) && i-- == 0) return c;
    TS_UNREACHABLE("local engine: the groups were compared");
  }

  // This member's results, one per collective call, computed from every
  // member's buffers (nothing is written yet).
  std::vector<std::vector<uint8_t>> compute(const std::vector<const Batch*>& all) const {
    std::vector<std::vector<uint8_t>> out;
    const Batch& mine = *all[size_t(rank)];
    size_t i = 0;
    for (const Call& c : mine.calls) {
      if (comm::isPointToPoint(c.kind)) continue;
      auto theirs = [&](int r) -> const Call& { return collectiveAt(*all[size_t(r)], i); };
      const size_t elt = byteSize(c.dtype), n = c.count;
      std::vector<uint8_t> res;
      switch (c.kind) {
        case Kind::AllReduce:
          res.resize(n * elt);
          if (n) std::memcpy(res.data(), at(theirs(0).send), n * elt);
          for (int r = 1; r < size; ++r) comm::reduceInto(c.dtype, c.op, res.data(), at(theirs(r).send), n);
          break;
        case Kind::AllGather:
          res.resize(size_t(size) * n * elt);
          for (int r = 0; r < size; ++r)
            if (n) std::memcpy(res.data() + size_t(r) * n * elt, at(theirs(r).send), n * elt);
          break;
        case Kind::ReduceScatter: {
          const size_t off = size_t(rank) * n * elt;
          res.resize(n * elt);
          if (n) std::memcpy(res.data(), at(theirs(0).send, off), n * elt);
          for (int r = 1; r < size; ++r) comm::reduceInto(c.dtype, c.op, res.data(), at(theirs(r).send, off), n);
          break;
        }
        case Kind::Broadcast:
          if (rank != c.peer) {
            res.resize(n * elt);
            if (n) std::memcpy(res.data(), at(theirs(c.peer).send), n * elt);
          }
          break;
        case Kind::AllToAll: {
          size_t total = 0;
          for (size_t x : c.recvCounts) total += x;
          res.resize(total * elt);
          size_t dst = 0;
          for (int p = 0; p < size; ++p) {
            const Call& t = theirs(p);
            size_t src = 0;  // our block's offset in rank p's send view
            for (int q = 0; q < rank; ++q) src += t.sendCounts[size_t(q)];
            const size_t m = c.recvCounts[size_t(p)];
            if (m) std::memcpy(res.data() + dst * elt, at(t.send, src * elt), m * elt);
            dst += m;
          }
          break;
        }
        case Kind::Send:
        case Kind::Recv: break;
      }
      out.push_back(std::move(res));
      ++i;
    }
    return out;
  }

  void write(const Batch& batch, const std::vector<std::vector<uint8_t>>& results) const {
    size_t i = 0;
    for (const Call& c : batch.calls) {
      if (comm::isPointToPoint(c.kind)) continue;
      const std::vector<uint8_t>& r = results[i++];
      if (!r.empty()) std::memcpy(at(c.recv), r.data(), r.size());
    }
  }

  // ---- sends and receives ---------------------------------------------------

  void runPointToPoint(const Batch& batch, Clock::time_point deadline) {
    LocalGroup& g = *group_;
    std::vector<std::shared_ptr<LocalGroup::Post>> mine;
    std::vector<std::pair<std::shared_ptr<LocalGroup::Post>, std::shared_ptr<LocalGroup::Post>>> toCopy;
    {
      std::lock_guard<std::mutex> lock(g.mu);
      for (const Call& c : batch.calls) {
        if (!comm::isPointToPoint(c.kind)) continue;
        const bool send = c.kind == Kind::Send;
        const auto key = send ? std::make_pair(rank, c.peer) : std::make_pair(c.peer, rank);
        auto post = std::make_shared<LocalGroup::Post>();
        post->call = &c;
        mine.push_back(post);
        auto& own = send ? g.sends[key] : g.recvs[key];
        auto& other = send ? g.recvs[key] : g.sends[key];
        if (!other.empty() && own.empty()) {
          // The other side is waiting: match now (this thread copies).
          auto theirs = other.front();
          other.pop_front();
          toCopy.emplace_back(send ? post : theirs, send ? theirs : post);
        } else {
          own.push_back(post);
        }
      }
    }
    for (auto& [s, r] : toCopy) match(*s, *r);
    if (!toCopy.empty()) g.cv.notify_all();

    std::unique_lock<std::mutex> lock(g.mu);
    auto allDone = [&] {
      return std::all_of(mine.begin(), mine.end(), [](const auto& p) { return p->done; }) || !failure().empty();
    };
    if (!g.cv.wait_until(lock, deadline, allDone)) {
      // Withdraw what nobody matched; a matched post is finished by its
      // matcher (it copies without the lock), so wait for that.
      std::string missing;
      for (auto& p : mine) {
        if (p->done) continue;
        const bool send = p->call->kind == Kind::Send;
        const auto key = send ? std::make_pair(rank, p->call->peer) : std::make_pair(p->call->peer, rank);
        auto& q = send ? g.sends[key] : g.recvs[key];
        auto it = std::find(q.begin(), q.end(), p);
        if (it != q.end()) {
          q.erase(it);
          missing += std::string(missing.empty() ? "" : "; ") + "rank " + std::to_string(p->call->peer) +
                     " made no matching " + (send ? "recv" : "send");
        }
      }
      g.cv.wait(lock, [&] {
        return std::all_of(mine.begin(), mine.end(), [&](const auto& p) {
          return p->done || [&] {
            const bool send = p->call->kind == Kind::Send;
            const auto key = send ? std::make_pair(rank, p->call->peer) : std::make_pair(p->call->peer, rank);
            auto& q = send ? g.sends[key] : g.recvs[key];
            return std::find(q.begin(), q.end(), p) == q.end();
          }();
        });
      });
      const std::string why = batch.what + " on " + who() + ": " + (missing.empty() ? "a peer failed" : missing) +
                              " within " + comm::secondsText(timeoutSeconds) +
                              " (TESSERA_COMM_TIMEOUT or CommOptions::timeoutSeconds)";
      lock.unlock();
      g.failAll(why);
      throw CommError(why);
    }
    if (!failure().empty() && !std::all_of(mine.begin(), mine.end(), [](const auto& p) { return p->done; }))
      throw CommError(batch.what + " on " + who() + ": the group failed: " + failure());
    for (auto& p : mine)
      if (!p->error.empty()) throw CommError(p->error);
  }

  // Copies a matched pair (or records why it cannot), then marks both done.
  void match(LocalGroup::Post& s, LocalGroup::Post& r) {
    const Call& sc = *s.call;
    const Call& rc = *r.call;
    std::string error;
    if (sc.dtype != rc.dtype || sc.count != rc.count) {
      // rank sc.peer is the receiver, rc.peer the sender.
      comm::PeerHeader hs = comm::peerHeaderOf(sc, 0), hr = comm::peerHeaderOf(rc, 0);
      try {
        comm::comparePeer(hs, hr, rc.peer, sc.peer, engineName());
      } catch (const CommError& e) {
        error = e.what();
      }
    } else if (sc.count) {
      std::memcpy(at(rc.recv), at(sc.send), std::min(sc.count * byteSize(sc.dtype), rc.count * byteSize(rc.dtype)));
    }
    std::lock_guard<std::mutex> lock(group_->mu);
    s.error = r.error = error;
    s.done = r.done = true;
  }

  std::shared_ptr<LocalGroup> group_;
  comm::Turns turns_;
  int64_t collSeq_ = 0;
};

void LocalGroup::failAll(const std::string& why) {
  std::vector<std::shared_ptr<LocalMember>> live;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& w : members)
      if (auto m = w.lock()) live.push_back(std::move(m));
  }
  for (auto& m : live) m->fail(why);
  {
    std::lock_guard<std::mutex> lock(mu);  // wakes waiters after the failure is visible
  }
  cv.notify_all();
}

}  // namespace

std::vector<std::shared_ptr<CommMember>> createLocalMembers(const std::vector<std::shared_ptr<DeviceImpl>>& devices,
                                                            const CommOptions& opts, double timeoutSeconds) {
  auto group = std::make_shared<LocalGroup>(static_cast<int>(devices.size()));
  std::vector<std::shared_ptr<CommMember>> members;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto m = std::make_shared<LocalMember>(devices[i], group, static_cast<int>(i), timeoutSeconds, opts.verify);
    group->members.push_back(m);
    members.push_back(std::move(m));
  }
  return members;
}

}  // namespace tessera::rt

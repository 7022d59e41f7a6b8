// How the ranks of an NCCL / RCCL group agree on its unique id (Comm.h,
// rendezvous): over MPI, through a file, or through a TCP rendezvous whose
// connections then stay open as the group's control channel (the
// cross-rank check of calls). Every wait is bounded by the timeout.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "Comm.h"

namespace tessera::rt::comm {
namespace {

constexpr uint32_t kMagic = 0x54534352;  // "TSCR"

std::string errnoText(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

int remainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : left > 1000 ? 1000 : static_cast<int>(left);
}

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// Reads or writes exactly `n` bytes before the deadline.
void transfer(int fd, void* buf, size_t n, bool write, Clock::time_point deadline, const std::string& what) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n) {
    pollfd pf{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    const int ms = remainingMs(deadline);
    if (ms == 0) throw CommError(what + ": timed out");
    const int r = ::poll(&pf, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw CommError(what + ": poll failed: " + errnoText(errno));
    if (r == 0) continue;
    const ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k < 0) throw CommError(what + ": " + (write ? "send" : "recv") + " failed: " + errnoText(errno));
    if (k == 0) throw CommError(what + ": the other side closed the connection (it failed or exited)");
    p += k;
    n -= size_t(k);
  }
}

sockaddr_in parseAddress(const std::string& hostPort, const std::string& spec) {
  const size_t colon = hostPort.rfind(':');
  auto bad = [&](const std::string& why) -> sockaddr_in {
    throw UsageError("CommOptions::bootstrap '" + spec + "': " + why + "; write tcp:127.0.0.1:PORT");
  };
  if (colon == std::string::npos) return bad("no port");
  std::string host = hostPort.substr(0, colon), port = hostPort.substr(colon + 1);
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) return bad("'" + host + "' is not an IPv4 address");
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p < 1 || p > 65535) return bad("'" + port + "' is not a port (1 to 65535)");
  a.sin_port = htons(static_cast<uint16_t>(p));
  return a;
}

/// The TCP rendezvous's connections: rank 0 holds one per other rank, the
/// others one to rank 0. allGather goes through rank 0.
class TcpControl final : public Control {
 public:
  TcpControl(int rank, int size, std::string where, std::vector<Fd> peers)
      : rank_(rank), size_(size), where_(std::move(where)), peers_(std::move(peers)) {}
  std::string name() const override { return "the TCP rendezvous at " + where_; }

  void allGather(const void* in, void* out, size_t bytes, Clock::time_point deadline) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) throw CommError(name() + " failed earlier");
    try {
      auto* o = static_cast<uint8_t*>(out);
      std::memcpy(o + size_t(rank_) * bytes, in, bytes);
      if (rank_ == 0) {
        for (int r = 1; r < size_; ++r)
          transfer(peers_[size_t(r)].fd, o + size_t(r) * bytes, bytes, false, deadline,
                   "waiting for rank " + std::to_string(r) + " over " + name());
        for (int r = 1; r < size_; ++r)
          transfer(peers_[size_t(r)].fd, o, bytes * size_t(size_), true, deadline,
                   "answering rank " + std::to_string(r) + " over " + name());
      } else {
        transfer(peers_[0].fd, const_cast<void*>(in), bytes, true, deadline, "talking to rank 0 over " + name());
        transfer(peers_[0].fd, o, bytes * size_t(size_), false, deadline, "waiting for rank 0 over " + name());
      }
    } catch (const CommError& e) {
      broken_ = true;  // a half-done exchange cannot be resumed
      throw CommError(std::string(e.what()) + " (a peer died, stopped, or made another call)");
    }
  }

 private:
  std::mutex mu_;
  bool broken_ = false;
  int rank_, size_;
  std::string where_;
  std::vector<Fd> peers_;  // rank 0: indexed by rank (0 unused); others: [0] is rank 0
};

struct Hello {
  uint32_t magic;
  int32_t rank, size;
};

Rendezvous tcpRendezvous(const CommOptions& opts, const std::string& spec, const std::string& call,
                         Clock::time_point deadline, const std::function<void(void*)>& makeId, void* id,
                         size_t idBytes) {
  const sockaddr_in addr = parseAddress(spec.substr(4), spec);
  const int rank = opts.rank, size = opts.size;
  const std::string what = call + ": bootstrap " + spec;
  std::vector<Fd> peers(size_t(rank == 0 ? size : 1));
  if (rank == 0) {
    Fd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (l.fd < 0) throw CommError(what + ": socket failed: " + errnoText(errno));
    const int one = 1;
    ::setsockopt(l.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(l.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
      throw CommError(what + ": rank 0 cannot listen there: bind failed: " + errnoText(errno));
    if (::listen(l.fd, size) != 0) throw CommError(what + ": listen failed: " + errnoText(errno));
    makeId(id);
    for (int joined = 1; joined < size;) {
      pollfd pf{l.fd, POLLIN, 0};
      const int ms = remainingMs(deadline);
      if (ms == 0)
        throw CommError(what + ": only " + std::to_string(joined - 1) + " of the " + std::to_string(size - 1) +
                        " other ranks connected within the timeout (did every rank start, with the same address?)");
      if (::poll(&pf, 1, ms) <= 0) continue;
      Fd c(::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (c.fd < 0) continue;
      ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Hello h{};
      transfer(c.fd, &h, sizeof h, false, deadline, what + ": reading a rank's greeting");
      if (h.magic != kMagic) continue;  // not one of ours
      if (h.size != size)
        throw CommError(what + ": rank " + std::to_string(h.rank) + " says the group has " + std::to_string(h.size) +
                        " ranks, rank 0 says " + std::to_string(size) + "; every rank must pass the same size");
      if (h.rank < 1 || h.rank >= size || peers[size_t(h.rank)].fd >= 0)
        throw CommError(what + ": two ranks claim rank " + std::to_string(h.rank) +
                        "; give every rank its own CommOptions::rank");
      transfer(c.fd, id, idBytes, true, deadline, what + ": sending the id to rank " + std::to_string(h.rank));
      peers[size_t(h.rank)] = std::move(c);
      ++joined;
    }
  } else {
    for (;;) {
      Fd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (c.fd < 0) throw CommError(what + ": socket failed: " + errnoText(errno));
      if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
        const int one = 1;
        ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        Hello h{kMagic, rank, size};
        transfer(c.fd, &h, sizeof h, true, deadline, what + ": greeting rank 0");
        transfer(c.fd, id, idBytes, false, deadline, what + ": waiting for rank 0's id");
        peers[0] = std::move(c);
        break;
      }
      if (Clock::now() > deadline)
        throw CommError(what + ": rank 0 did not open the rendezvous within the timeout (connect: " + errnoText(errno) +
                        ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  Rendezvous r;
  r.rank = rank;
  r.size = size;
  r.control = std::make_shared<TcpControl>(rank, size, spec.substr(4), std::move(peers));
  return r;
}

Rendezvous fileRendezvous(const CommOptions& opts, const std::string& spec, const std::string& call,
                          Clock::time_point deadline, const std::function<void(void*)>& makeId, void* id,
                          size_t idBytes) {
  const std::string path = spec.substr(5);
  const std::string what = call + ": bootstrap " + spec;
  if (path.empty()) throw UsageError(what + ": no path; write file:/some/path");
  if (opts.rank == 0) {
    makeId(id);
    // Written aside and renamed, so a reader never sees half an id; the
    // file must not exist yet, so that no rank can read an earlier job's.
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (f.fd < 0) throw CommError(what + ": cannot write " + tmp + ": " + errnoText(errno));
    if (::write(f.fd, id, idBytes) != static_cast<ssize_t>(idBytes))
      throw CommError(what + ": cannot write " + tmp + ": " + errnoText(errno));
    if (::link(tmp.c_str(), path.c_str()) != 0) {
      const int e = errno;
      ::unlink(tmp.c_str());
      if (e == EEXIST)
        throw CommError(what + ": " + path +
                        " exists already (left by an earlier job?); remove it, or use a path of this job's own");
      throw CommError(what + ": cannot create " + path + ": " + errnoText(e));
    }
    ::unlink(tmp.c_str());
  } else {
    for (;;) {
      Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (f.fd >= 0) {
        ssize_t k = ::read(f.fd, id, idBytes);
        if (k == static_cast<ssize_t>(idBytes)) break;
      }
      if (Clock::now() > deadline) throw CommError(what + ": rank 0 did not write " + path + " within the timeout");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  Rendezvous r;
  r.rank = opts.rank;
  r.size = opts.size;
  if (opts.rank == 0) r.removeWhenJoined = path;
  return r;
}

}  // namespace

Rendezvous rendezvous(const CommOptions& opts, const std::string& call, double timeoutSeconds,
                      const std::function<void(void*)>& makeId, void* id, size_t idBytes) {
  std::string spec = opts.bootstrap;
  if (spec.empty()) {
    if (!launchedByMpi())
      throw UsageError(call +
                       ": no bootstrap: this process was not started by mpirun, so set CommOptions::bootstrap "
                       "(\"file:/path\" or \"tcp:127.0.0.1:PORT\") with CommOptions::rank and size");
    spec = "mpi";
  }
  const auto deadline = deadlineAfter(timeoutSeconds);
  if (spec == "mpi") {
    MpiWorld w = mpiWorld(call, timeoutSeconds);
    if ((opts.rank != -1 && opts.rank != w.rank) || (opts.size != -1 && opts.size != w.size))
      throw UsageError(call + ": CommOptions::rank " + std::to_string(opts.rank) + " and size " +
                       std::to_string(opts.size) + " differ from MPI's (" + std::to_string(w.rank) + " of " +
                       std::to_string(w.size) + "); leave them at -1 with the \"mpi\" bootstrap");
    std::vector<uint8_t> all(idBytes * size_t(w.size));
    std::vector<uint8_t> mine(idBytes, 0);
    if (w.rank == 0) makeId(mine.data());
    w.control->allGather(mine.data(), all.data(), idBytes, deadline);
    std::memcpy(id, all.data(), idBytes);  // rank 0's
    Rendezvous r;
    r.control = w.control;
    r.rank = w.rank;
    r.size = w.size;
    return r;
  }
  const bool file = spec.rfind("file:", 0) == 0, tcp = spec.rfind("tcp:", 0) == 0;
  if (!file && !tcp)
    throw UsageError(call + ": CommOptions::bootstrap '" + spec +
                     "' is not \"mpi\", \"file:/path\" or \"tcp:127.0.0.1:PORT\"");
  if (opts.size < 1 || opts.rank < 0 || opts.rank >= opts.size)
    throw UsageError(call + ": the " + spec.substr(0, spec.find(':')) +
                     " bootstrap needs this member's CommOptions::rank and the group's size (0 <= rank < size); "
                     "got rank " +
                     std::to_string(opts.rank) + ", size " + std::to_string(opts.size));
  return file ? fileRendezvous(opts, spec, call, deadline, makeId, id, idBytes)
              : tcpRendezvous(opts, spec, call, deadline, makeId, id, idBytes);
}

}  // namespace tessera::rt::comm

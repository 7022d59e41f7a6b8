// The persistent thread pool CPU grids run on.
//
// Launch overhead matters more than anything else here: a small kernel runs
// for microseconds, so waking workers through a mutex + condition variable
// per launch would cost as much as the kernel. Instead every worker owns a
// cache-line-sized mailbox with a sequence number; a launch bumps the
// sequence of just the workers it needs. An idle worker spins on its own
// mailbox for a short while (so back-to-back launches never enter the
// kernel) and then sleeps in a futex wait (std::atomic::wait); the launcher
// only issues the wake-up system call when the worker announced its sleep.
//
// The range is cut into fixed contiguous chunks, one per thread, but chunks
// are *claimed* through an atomic counter rather than assigned: the caller
// runs chunk 0, then claims whatever no worker has started yet. On a busy
// machine a worker may not get a core for a long time; the launch then
// finishes on the caller instead of waiting for the scheduler. The caller
// only ever waits for chunks a worker is actually running.
//
// A worker touches the job only between entering (active_++) and leaving
// (active_--), and only while the job is open; the caller closes the job and
// waits for active_ to drain before it returns, so a late worker can never
// run a chunk with the fields of a finished (or the next) launch.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "DeviceImpl.h"

namespace tessera::rt {
namespace {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long an idle thread keeps polling before it goes to sleep. Long enough
// to cover the host-side gap between back-to-back launches, short enough not
// to steal a shared core for long.
constexpr auto kSpinTime = std::chrono::microseconds(60);

/// Waits until `a` differs from `old`: spins for kSpinTime, then sleeps.
/// `sleeping` tells the other side that a notify is needed.
uint32_t waitForChange(const std::atomic<uint32_t>& a, uint32_t old, std::atomic<uint32_t>& sleeping) {
  uint32_t v = a.load(std::memory_order_acquire);
  if (v != old) return v;
  auto start = std::chrono::steady_clock::now();
  for (unsigned i = 1;; ++i) {
    cpuRelax();
    v = a.load(std::memory_order_acquire);
    if (v != old) return v;
    // Read the clock only now and then: it costs more than a pause.
    if ((i & 63) == 0 && std::chrono::steady_clock::now() - start > kSpinTime) break;
  }
  // Announce the sleep before the final check; the other side bumps the value
  // before it reads `sleeping` (both sequentially consistent), so either it
  // sees the flag and notifies, or this load sees the new value.
  sleeping.store(1, std::memory_order_seq_cst);
  while ((v = a.load(std::memory_order_seq_cst)) == old) a.wait(old, std::memory_order_seq_cst);
  sleeping.store(0, std::memory_order_relaxed);
  return v;
}

struct alignas(64) Mailbox {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleeping{0};
};

// True on pool workers, and on a launcher while it runs chunks: a
// parallelFor issued from inside a chunk runs inline instead of waiting for
// a pool that is busy with the outer call.
thread_local bool tInsidePool = false;

class Pool {
 public:
  Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  ~Pool() {
    std::lock_guard<std::mutex> lock(submitMu_);
    stop_.store(true, std::memory_order_seq_cst);
    for (auto& m : boxes_) {
      m->seq.fetch_add(1, std::memory_order_seq_cst);
      m->seq.notify_one();
    }
    for (auto& t : threads_) t.join();
  }

  void run(int64_t n, unsigned chunks, RangeFn fn, void* ctx) {
    std::lock_guard<std::mutex> lock(submitMu_);
    grow(chunks - 1);

    fn_ = fn;
    ctx_ = ctx;
    chunks_ = chunks;
    base_ = n / chunks;
    extra_ = n % chunks;
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    callerSleeping_.store(0, std::memory_order_relaxed);
    next_.store(1, std::memory_order_relaxed);     // chunk 0 is the caller's
    open_.store(true, std::memory_order_seq_cst);  // publishes the fields above

    for (unsigned w = 0; w + 1 < chunks; ++w) {
      Mailbox& m = *boxes_[w];
      m.seq.fetch_add(1, std::memory_order_seq_cst);
      if (m.sleeping.load(std::memory_order_seq_cst)) m.seq.notify_one();
    }

    tInsidePool = true;
    runChunk(0);
    claimChunks();
    tInsidePool = false;

    // Every chunk is claimed; close the job and wait for the workers still
    // inside it (those running a chunk, or just looking). Their decrements
    // form a release sequence, so their writes are visible afterwards.
    open_.store(false, std::memory_order_seq_cst);
    uint32_t inside = active_.load(std::memory_order_seq_cst);
    if (inside != 0) {
      auto start = std::chrono::steady_clock::now();
      for (unsigned i = 1; (inside = active_.load(std::memory_order_seq_cst)) != 0; ++i) {
        cpuRelax();
        if ((i & 63) == 0 && std::chrono::steady_clock::now() - start > kSpinTime) break;
      }
      if (inside != 0) {
        callerSleeping_.store(1, std::memory_order_seq_cst);
        while ((inside = active_.load(std::memory_order_seq_cst)) != 0) active_.wait(inside, std::memory_order_seq_cst);
      }
    }

    if (failed_.load(std::memory_order_acquire)) {
      std::exception_ptr e = std::move(error_);
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

 private:
  int64_t chunkBegin(int64_t c) const { return c * base_ + std::min<int64_t>(c, extra_); }

  void runChunk(int64_t c) {
    try {
      fn_(ctx_, chunkBegin(c), chunkBegin(c + 1));
    } catch (...) {
      // Keep the first failure; the launcher rethrows it once all chunks end.
      bool expected = false;
      if (failed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) error_ = std::current_exception();
    }
  }

  void claimChunks() {
    for (;;) {
      const int64_t c = next_.fetch_add(1, std::memory_order_acq_rel);
      if (c >= chunks_) return;
      runChunk(c);
    }
  }

  void grow(unsigned workers) {
    while (boxes_.size() < workers) {
      auto box = std::make_unique<Mailbox>();
      Mailbox* m = box.get();
      boxes_.push_back(std::move(box));
      try {
        threads_.emplace_back([this, m] { workerLoop(*m); });
      } catch (const std::system_error& e) {
        boxes_.pop_back();
        throw DeviceError(std::string("cpu: cannot start a worker thread (") + e.what() +
                          "); lower TESSERA_NUM_THREADS or LaunchOptions::threads");
      }
    }
  }

  void workerLoop(Mailbox& m) {
    tInsidePool = true;
    uint32_t seen = 0;
    for (;;) {
      seen = waitForChange(m.seq, seen, m.sleeping);
      if (stop_.load(std::memory_order_acquire)) return;
      // Enter, then check the job is open (both sequentially consistent,
      // mirrored by the caller's close-then-read-active_): either the caller
      // sees this worker inside, or this worker sees the job closed.
      active_.fetch_add(1, std::memory_order_seq_cst);
      if (open_.load(std::memory_order_seq_cst)) claimChunks();
      if (active_.fetch_sub(1, std::memory_order_seq_cst) == 1 && callerSleeping_.load(std::memory_order_seq_cst))
        active_.notify_one();
    }
  }

  std::mutex submitMu_;  // one launch uses the pool at a time
  std::vector<std::unique_ptr<Mailbox>> boxes_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};

  // The current launch; written only while no worker is inside it.
  RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t chunks_ = 0, base_ = 0, extra_ = 0;
  std::exception_ptr error_;
  alignas(64) std::atomic<int64_t> next_{0};
  alignas(64) std::atomic<uint32_t> active_{0};
  std::atomic<bool> open_{false};
  std::atomic<uint32_t> callerSleeping_{0};
  std::atomic<bool> failed_{false};
};

Pool& pool() {
  // Created on first parallel launch; joined by static destruction at exit.
  static Pool p;
  return p;
}

}  // namespace

void parallelForRaw(int64_t n, unsigned threads, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  // The same cap the devices put on launches: a runaway count must not
  // start thousands of threads that then live until exit.
  int64_t chunks = std::min<int64_t>(std::clamp(threads, 1u, kMaxHostThreads), n);
  if (chunks <= 1 || tInsidePool) {
    fn(ctx, 0, n);
    return;
  }
  pool().run(n, static_cast<unsigned>(chunks), fn, ctx);
}

void parallelFor(int64_t n, unsigned threads, const std::function<void(int64_t, int64_t)>& fn) {
  using F = std::function<void(int64_t, int64_t)>;
  parallelForRaw(
      n, threads, [](void* ctx, int64_t b, int64_t e) { (*static_cast<const F*>(ctx))(b, e); }, const_cast<F*>(&fn));
}

}  // namespace tessera::rt

// Streams and events of host-memory devices (see HostStream.h).

#include "HostStream.h"

#include <algorithm>
#include <cstring>

#include <system_error>
#include <utility>

namespace tessera::rt {
namespace {

// As long as the pool's workers poll (ThreadPool.cpp): it covers the host's
// gap between launches without holding a shared core for long.
constexpr auto kSpinTime = std::chrono::microseconds(60);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

// ---- OrphanErrors ------------------------------------------------------------

void OrphanErrors::keep(std::exception_ptr e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_) first_ = std::move(e);
}

std::exception_ptr OrphanErrors::take() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(first_, nullptr);
}

// ---- HostStream -----------------------------------------------------------

HostStream::~HostStream() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();  // a polling worker sees stop_ once it sleeps, at the latest after kSpinTime
  if (worker_.joinable()) worker_.join();
  if (error_ && orphans_) orphans_->keep(std::move(error_));
}

void HostStream::submit(std::function<void()> task) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!worker_.joinable()) {
    try {
      worker_ = std::thread([this] { workerLoop(); });
    } catch (const std::system_error& e) {
      throw DeviceError(std::string("cannot start a stream's worker thread (") + e.what() + ")");
    }
  }
  queue_.push_back(std::move(task));
  pending_.fetch_add(1, std::memory_order_acq_rel);
  queued_.fetch_add(1, std::memory_order_release);
  const bool wake = sleeping_;
  lock.unlock();
  if (wake) wake_.notify_one();
}

void HostStream::workerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty() && !stop_) {
      lock.unlock();
      const auto start = std::chrono::steady_clock::now();
      for (unsigned i = 1; queued_.load(std::memory_order_acquire) == 0; ++i) {
        cpuRelax();
        if ((i & 63) == 0 && std::chrono::steady_clock::now() - start > kSpinTime) break;
      }
      lock.lock();
      sleeping_ = true;
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      sleeping_ = false;
    }
    if (queue_.empty()) return;  // stop_ with nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    queued_.fetch_sub(1, std::memory_order_relaxed);
    lock.unlock();
    std::exception_ptr err;
    try {
      task();
    } catch (...) {
      err = std::current_exception();
    }
    task = nullptr;  // drops the launch's keep-alives before the work counts as done
    lock.lock();
    if (err && !error_) error_ = err;
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_all();
  }
}

void HostStream::fail(std::exception_ptr e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_) error_ = std::move(e);
}

void HostStream::drain() {
  if (idle()) return;
  // Short work finishes while we poll; only longer work costs a sleep.
  const auto start = std::chrono::steady_clock::now();
  for (unsigned i = 1; !idle(); ++i) {
    cpuRelax();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() - start > kSpinTime) break;
  }
  if (idle()) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void HostStream::synchronize() {
  drain();
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = std::move(error_);
    error_ = nullptr;
  }
  if (e) std::rethrow_exception(e);
}

// ---- HostEvent -------------------------------------------------------------

void HostMarker::complete() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    when_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
}

void HostMarker::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
}

bool HostMarker::done(std::chrono::steady_clock::time_point* when) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_ && when) *when = when_;
  return done_;
}

std::shared_ptr<HostMarker> HostEvent::arm() {
  auto m = std::make_shared<HostMarker>();
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = m;
  return m;
}

std::shared_ptr<HostMarker> HostEvent::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

// ---- HostMemoryDevice ----------------------------------------------------------

void HostMemoryDevice::run(StreamImpl& s, bool inlineOk, std::function<void()> work) {
  auto& hs = static_cast<HostStream&>(s);
  if (inlineOk && hs.idle()) {
    try {
      work();
    } catch (...) {
      hs.fail(std::current_exception());
    }
    return;
  }
  hs.submit(std::move(work));
}

void HostMemoryDevice::copyHostToDeviceAsync(StreamImpl& s, DevicePtr dst, const void* src, size_t bytes,
                                             std::shared_ptr<void> keep) {
  // A memcpy is cheaper than a hand-over when nothing has to run first.
  run(s, true, [this, dst, src, bytes, keep = std::move(keep)] { copyHostToDevice(dst, src, bytes); });
}

void HostMemoryDevice::copyDeviceToHostAsync(StreamImpl& s, void* dst, DevicePtr src, size_t bytes,
                                             std::shared_ptr<void> keep) {
  run(s, true, [this, dst, src, bytes, keep = std::move(keep)] { copyDeviceToHost(dst, src, bytes); });
}

void HostMemoryDevice::copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes) {
  constexpr size_t kParallelBytes = size_t{4} << 20, kChunk = size_t{1} << 20;
  const unsigned threads = bytes >= kParallelBytes ? defaultThreads() : 1;
  if (threads <= 1) {
    if (bytes) std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    return;
  }
  struct Copy {
    char* dst;
    const char* src;
    size_t bytes;
  } c{reinterpret_cast<char*>(dst), reinterpret_cast<const char*>(src), bytes};
  parallelForRaw(
      static_cast<int64_t>((bytes + kChunk - 1) / kChunk), threads,
      [](void* p, int64_t b, int64_t e) {
        auto* c = static_cast<Copy*>(p);
        const size_t lo = static_cast<size_t>(b) * kChunk, hi = std::min(static_cast<size_t>(e) * kChunk, c->bytes);
        std::memcpy(c->dst + lo, c->src + lo, hi - lo);
      },
      &c);
}

void HostMemoryDevice::copyDeviceToDeviceAsync(StreamImpl& s, DevicePtr dst, DevicePtr src, size_t bytes,
                                               std::shared_ptr<void> keep) {
  run(s, true, [this, dst, src, bytes, keep = std::move(keep)] { copyDeviceToDevice(dst, src, bytes); });
}

std::shared_ptr<StreamImpl> HostMemoryDevice::createStream() {
  auto s = std::make_shared<HostStream>(orphans_);
  streams_.add(s);
  return s;
}

std::shared_ptr<StreamImpl> HostMemoryDevice::defaultStream() {
  std::call_once(defaultOnce_, [this] {
    default_ = std::make_shared<HostStream>();
    streams_.add(default_);
  });
  return default_;
}

std::shared_ptr<StreamImpl> HostMemoryDevice::wrapStream(void*) {
  throw DeviceError(name() +
                    " has no driver streams to wrap (Device::wrapStream takes a CUstream or a "
                    "hipStream_t); use Device::createStream");
}

void HostMemoryDevice::recordEvent(const std::shared_ptr<EventImpl>& e, StreamImpl& s) {
  // The task holds the marker, not the event: a dropped Event handle must
  // not dangle, and a re-record must not change what this one completes.
  std::shared_ptr<HostMarker> m = static_cast<HostEvent&>(*e).arm();
  run(s, true, [m] { m->complete(); });
}

void HostMemoryDevice::waitEvent(StreamImpl& s, const std::shared_ptr<EventImpl>& e) {
  // The recording that is latest now (Stream::wait checked there is one).
  std::shared_ptr<HostMarker> m = static_cast<HostEvent&>(*e).latest();
  if (!m || m->done(nullptr)) return;
  static_cast<HostStream&>(s).submit([m] { m->wait(); });
}

void HostMemoryDevice::synchronizeEvent(EventImpl& e) {
  if (std::shared_ptr<HostMarker> m = static_cast<HostEvent&>(e).latest()) m->wait();
}

double HostMemoryDevice::elapsedMs(EventImpl& start, EventImpl& end) {
  std::chrono::steady_clock::time_point a, b;
  const std::shared_ptr<HostMarker> ma = static_cast<HostEvent&>(start).latest();
  const std::shared_ptr<HostMarker> mb = static_cast<HostEvent&>(end).latest();
  if (!ma || !mb || !ma->done(&a) || !mb->done(&b))
    throw DeviceError(name() + ": Event::elapsedMs: an event has not completed yet; synchronize it first");
  return std::chrono::duration<double, std::milli>(b - a).count();
}

void HostMemoryDevice::synchronize() {
  // An error of a stream already gone came first: it was kept before any
  // live stream's work was waited for.
  std::exception_ptr first = orphans_->take();
  for (const auto& s : streams_.live()) {
    try {
      s->synchronize();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace tessera::rt

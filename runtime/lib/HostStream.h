// Streams of the devices whose memory is host memory (the CPU, the SIMT
// emulator), runtime-private.
//
// A HostStream is a FIFO of tasks run in order by one worker thread of its
// own, started on the first task, so two streams make progress at the same
// time. An idle worker polls for a short while before it sleeps, so that
// back-to-back launches are handed over without a wake-up system call (as
// the thread pool's workers do, ThreadPool.cpp). A task's exception is kept
// (the first one) and thrown by the next synchronize(), as a GPU reports a
// fault at the next synchronisation; a stream that goes unsynchronised hands
// it to its device, whose synchronize() throws it. Work
// that is cheaper to run than to hand over (a one-program launch, a copy)
// runs inline on the submitting thread when the stream is idle: an idle
// stream has nothing to order it after.
#pragma once

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "DeviceImpl.h"

namespace tessera::rt {

/// The errors of streams whose last handle went before they were
/// synchronised. The device keeps them for its next synchronize(), which is
/// documented to throw the first error of any stream: without this, the
/// error of a launch on a stream dropped unsynchronised would be lost.
class OrphanErrors {
 public:
  /// Keeps `e` unless an earlier one is kept.
  void keep(std::exception_ptr e);
  /// The kept error (null if none), handed over once.
  std::exception_ptr take();

 private:
  std::mutex mu_;
  std::exception_ptr first_;
};

class HostStream final : public StreamImpl {
 public:
  /// `orphans`: where an error nobody synchronised goes when the stream
  /// does (null: it is dropped, as for a device's own default stream, which
  /// goes with the device).
  explicit HostStream(std::shared_ptr<OrphanErrors> orphans = {}) : orphans_(std::move(orphans)) {}
  /// Waits for the queued work (a handle may go while its work runs), then
  /// hands an error no synchronize() took to the device.
  ~HostStream() override;
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  /// Queues `task` after everything submitted so far.
  void submit(std::function<void()> task);
  /// Nothing queued or running: work may run inline, in order.
  bool idle() const { return pending_.load(std::memory_order_acquire) == 0; }
  /// Keeps the error of work run inline, as if the worker had run it.
  void fail(std::exception_ptr e);
  void synchronize() override;
  /// Waits without throwing (Event::synchronize, destruction).
  void drain();

 private:
  void workerLoop();

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::deque<std::function<void()>> queue_;
  std::atomic<uint64_t> pending_{0};  // queued + running
  std::atomic<uint64_t> queued_{0};   // queue_.size(), for the worker's spin
  std::exception_ptr error_;
  std::shared_ptr<OrphanErrors> orphans_;
  bool stop_ = false;
  bool sleeping_ = false;  // the worker waits on wake_ (both under mu_)
  std::thread worker_;
};

/// One recording of a HostEvent: completed (with the steady-clock time) when
/// its stream reaches the point it marks.
class HostMarker {
 public:
  void complete();
  void wait();
  bool done(std::chrono::steady_clock::time_point* when) const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::chrono::steady_clock::time_point when_{};
};

/// An event on host streams: its latest recording. Each record() makes a new
/// marker, so a Stream::wait keeps the marker that was latest when wait was
/// called, as cuStreamWaitEvent does: re-recording the event later (even on
/// the waiting stream, behind the wait) does not change what the wait waits
/// for. A wait therefore only ever waits for work submitted before it, and
/// streams cannot wait for each other in a cycle.
class HostEvent final : public EventImpl {
 public:
  /// Starts a new recording and returns its marker, for the stream to
  /// complete when it reaches it.
  std::shared_ptr<HostMarker> arm();
  /// The latest recording (null before the first).
  std::shared_ptr<HostMarker> latest() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<HostMarker> latest_;
};

/// A device whose memory is host memory (the CPU, the SIMT emulator):
/// copies and fills are memcpy / memset, streams are HostStreams, and
/// events HostEvents. Each device only adds its launches.
class HostMemoryDevice : public DeviceImpl {
 public:
  void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  }
  void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes) override {
    if (bytes) std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  }
  void fill(DevicePtr dst, uint8_t byte, size_t bytes) override {
    if (bytes) std::memset(reinterpret_cast<void*>(dst), byte, bytes);
  }
  /// Copies of 4 MiB and more are split over the device's threads, as its
  /// kernels are: one thread moves a fraction of what the memory system
  /// gives (`tessera bench --peers` times a kernel against this copy).
  void copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes) override;
  void copyHostToDeviceAsync(StreamImpl& s, DevicePtr dst, const void* src, size_t bytes,
                             std::shared_ptr<void> keep) override;
  void copyDeviceToHostAsync(StreamImpl& s, void* dst, DevicePtr src, size_t bytes,
                             std::shared_ptr<void> keep) override;
  void copyDeviceToDeviceAsync(StreamImpl& s, DevicePtr dst, DevicePtr src, size_t bytes,
                               std::shared_ptr<void> keep) override;

  std::shared_ptr<StreamImpl> createStream() override;
  std::shared_ptr<StreamImpl> defaultStream() override;
  std::shared_ptr<StreamImpl> wrapStream(void* native) override;
  std::shared_ptr<EventImpl> createEvent() override { return std::make_shared<HostEvent>(); }
  void recordEvent(const std::shared_ptr<EventImpl>& e, StreamImpl& s) override;
  void waitEvent(StreamImpl& s, const std::shared_ptr<EventImpl>& e) override;
  void synchronizeEvent(EventImpl& e) override;
  double elapsedMs(EventImpl& start, EventImpl& end) override;
  void synchronize() override;

 protected:
  /// Runs `work` on `s`: inline when `inlineOk` and the stream is idle
  /// (an exception then goes to the stream, as from the worker), else queued.
  static void run(StreamImpl& s, bool inlineOk, std::function<void()> work);

 private:
  std::once_flag defaultOnce_;
  std::shared_ptr<HostStream> default_;
  StreamList<HostStream> streams_;
  std::shared_ptr<OrphanErrors> orphans_ = std::make_shared<OrphanErrors>();
};

}  // namespace tessera::rt

// Streams and events, above the devices: null handles, streams and events
// of another device, and events used before they were recorded are caught
// here; the devices only translate the calls.

#include "DeviceImpl.h"

namespace tessera::rt {
namespace {

StreamImpl& liveStream(const std::shared_ptr<StreamImpl>& s, const char* what) {
  if (!s)
    throw UsageError(std::string("Stream::") + what +
                     " called on a null Stream (default-constructed); get one from Device::createStream");
  return *s;
}

EventImpl& liveEvent(const std::shared_ptr<EventImpl>& e, const char* what) {
  if (!e)
    throw UsageError(std::string("Event::") + what +
                     " called on a null Event (default-constructed); get one from Device::createEvent");
  return *e;
}

EventImpl& recordedEvent(const std::shared_ptr<EventImpl>& e, const char* what) {
  EventImpl& ev = liveEvent(e, what);
  if (!ev.recorded)
    throw UsageError(std::string("Event::") + what + ": the event was never recorded; call Event::record first");
  return ev;
}

void sameDevice(const std::shared_ptr<DeviceImpl>& a, const std::shared_ptr<DeviceImpl>& b, const std::string& what) {
  if (a != b)
    throw UsageError(what + ": the event belongs to '" + a->name() + "' and the stream to '" + b->name() + "'" +
                     (a->name() == b->name() ? " (another instance)" : "") + "; events and streams of one device only");
}

}  // namespace

Device Stream::device() const {
  liveStream(impl_, "device");
  return Device(device_);
}

void Stream::synchronize() const { liveStream(impl_, "synchronize").synchronize(); }

void* Stream::native() const { return liveStream(impl_, "native").native(); }

void Stream::wait(const Event& e) const {
  StreamImpl& s = liveStream(impl_, "wait");
  recordedEvent(e.impl(), "wait (through Stream::wait)");
  sameDevice(e.deviceImpl(), device_, "Stream::wait");
  device_->waitEvent(s, e.impl());
}

void Event::record(const Stream& s) {
  liveEvent(impl_, "record");
  StreamImpl& st = liveStream(s.impl(), "record (through Event::record)");
  sameDevice(device_, s.deviceImpl(), "Event::record");
  device_->recordEvent(impl_, st);
  impl_->recorded = true;
}

void Event::synchronize() const { device_->synchronizeEvent(recordedEvent(impl_, "synchronize")); }

double Event::elapsedMs(const Event& start, const Event& end) {
  EventImpl& a = recordedEvent(start.impl_, "elapsedMs");
  EventImpl& b = recordedEvent(end.impl_, "elapsedMs");
  if (start.device_ != end.device_)
    throw UsageError("Event::elapsedMs: the events belong to '" + start.device_->name() + "' and '" +
                     end.device_->name() + "'; both must be of one device");
  return start.device_->elapsedMs(a, b);
}

Stream Device::createStream() const { return Stream(impl_, impl_->createStream()); }

Stream Device::defaultStream() const { return Stream(impl_, impl_->defaultStream()); }

Stream Device::wrapStream(void* native) const {
  if (!native)
    throw DeviceError(impl_->name() +
                      ": Device::wrapStream: the handle is null (the legacy default stream); use "
                      "Device::defaultStream, or pass a stream the driver created");
  return Stream(impl_, impl_->wrapStream(native));
}

Event Device::createEvent() const { return Event(impl_, impl_->createEvent()); }
void Device::makeCurrent() const { impl_->makeCurrent(); }

}  // namespace tessera::rt

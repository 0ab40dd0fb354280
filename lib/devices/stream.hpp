// Streams: ordered queues of work on one device. Backends subclass Stream; the
// CPU has an inline stream whose work is complete when the call returns.
#pragma once

#include <memory>
#include <vector>

#include "arraybridge/arraybridge.h"
#include "lib/platform/fork_guard.hpp"
#include "lib/tensor/storage.hpp"

namespace abr {

// A point in a stream's order: complete once the work submitted before it is.
class Event {
 public:
  virtual ~Event() = default;
  // Never blocks. A failed command also counts as complete: nothing uses its memory any more.
  virtual bool complete() noexcept = 0;
  // Blocks until the work is complete; throws abr::Error when it failed.
  virtual void wait() = 0;
  // Never blocks: false while the work runs, true once it is complete, and throws
  // abr::Error when it failed (what complete() does not tell). A complete event's
  // wait() returns at once with its failure; backends that can ask once override this.
  virtual bool query() {
    if (!complete()) return false;
    wait();
    return true;
  }
  // Made before this process forked: the parent's, unusable here (every call refuses it, and its release leaks it).
  bool inherited() const noexcept { return born_.inherited(); }

 private:
  ForkStamp born_;
};

// Storage kept alive until the work that uses it completes: what a stream let go
// of hands over (Stream::let_go).
struct Retained {
  std::unique_ptr<Event> done;  // nullptr: that work is already complete
  std::unique_ptr<Storage> storage;
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual DLDevice device() const = 0;
  // Blocks until all submitted work has completed.
  virtual void synchronize() = 0;
  // Keeps `storage` alive until the work submitted so far has completed. Never
  // throws: if it cannot track the work it waits for it instead.
  virtual void retain(std::unique_ptr<Storage> storage) noexcept = 0;
  // Work submitted to this stream from now on runs after the work submitted to
  // `other` so far (abr_stream_wait).
  virtual void wait_for(Stream& other) = 0;
  // Work submitted from now on runs after `event`'s work (abr_stream_wait_event):
  // ordered on the device where the backend can, otherwise waited for here.
  virtual void wait_for_event(Event& event) { event.wait(); }
  // Hands over the storage this stream keeps alive, each with the event that frees
  // it, and stops the destructor from waiting for the queued work, which goes on
  // (abr_stream_release). A backend that cannot track its work waits for it here.
  virtual std::vector<Retained> let_go() {
    synchronize();
    return {};
  }
  // Hands over the storage kept alive so far, each with the event that frees it;
  // the stream stays in use (abr_event_record gives it to the runtime's pending
  // releases, so that it goes once an event shows the work done). A backend that
  // does not track its work keeps nothing to hand over.
  virtual std::vector<Retained> take_retained() { return {}; }
  // An event after the work submitted so far; nullptr when that work is already complete.
  virtual std::unique_ptr<Event> record() = 0;
  // A driver's queue made before this process forked: the parent's, unusable here
  // (every call refuses it, and its release leaks it).
  virtual bool inherited() const noexcept { return born_.inherited(); }

 private:
  ForkStamp born_;
};

// A stream's or event's driver object made before this process forked is the parent's:
// let go of without a call into the driver (it goes with the process). True if it was.
template <typename DriverObject>
bool leak_if_inherited(std::unique_ptr<DriverObject>& object) noexcept {
  if (!object || !object->inherited()) return false;
  (void)object.release();
  return true;
}

class InlineHostStream final : public Stream {
 public:
  DLDevice device() const override { return {kDLCPU, 0}; }
  void synchronize() override {}
  void retain(std::unique_ptr<Storage>) noexcept override {}  // the work is already complete
  void wait_for(Stream& other) override { other.synchronize(); }
  std::unique_ptr<Event> record() override { return nullptr; }
  bool inherited() const noexcept override { return false; }  // no driver: the CPU's works in a forked child too
};

}  // namespace abr

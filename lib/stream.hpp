// Streams: ordered queues of work on one device. Backends subclass Stream; the
// CPU has an inline stream whose work is complete when the call returns.
#pragma once

#include <memory>

#include "arraybridge/arraybridge.h"
#include "lib/storage.hpp"

namespace abr {

// A point in a stream's order: complete once the work submitted before it is.
class Event {
 public:
  virtual ~Event() = default;
  // Never blocks. A failed command also counts as complete: nothing uses its memory any more.
  virtual bool complete() noexcept = 0;
  virtual void wait() = 0;
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
  // An event after the work submitted so far; nullptr when that work is already complete.
  virtual std::unique_ptr<Event> record() = 0;
};

class InlineHostStream final : public Stream {
 public:
  DLDevice device() const override { return {kDLCPU, 0}; }
  void synchronize() override {}
  void retain(std::unique_ptr<Storage>) noexcept override {}  // the work is already complete
  void wait_for(Stream& other) override { other.synchronize(); }
  std::unique_ptr<Event> record() override { return nullptr; }
};

}  // namespace abr

// Streams: ordered queues of work on one device. Backends subclass Stream; the
// CPU has an inline stream whose work is complete when the call returns.
#pragma once

#include <memory>

#include "arraybridge/arraybridge.h"
#include "storage.hpp"

namespace abr {

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
};

class InlineHostStream final : public Stream {
 public:
  DLDevice device() const override { return {kDLCPU, 0}; }
  void synchronize() override {}
  void retain(std::unique_ptr<Storage>) noexcept override {}  // the work is already complete
  void wait_for(Stream& other) override { other.synchronize(); }
};

}  // namespace abr

// Streams: ordered queues of work on one device. Backends subclass Stream; the
// CPU has an inline stream whose work is complete when the call returns.
#pragma once

#include "arraybridge/arraybridge.h"

namespace abr {

class Stream {
 public:
  virtual ~Stream() = default;
  virtual DLDevice device() const = 0;
  // Blocks until all submitted work has completed.
  virtual void synchronize() = 0;
};

class InlineHostStream final : public Stream {
 public:
  DLDevice device() const override { return {kDLCPU, 0}; }
  void synchronize() override {}
};

}  // namespace abr

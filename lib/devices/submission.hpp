// The primitives a backend gives the library: one Submission is one transfer's
// work on one of the backend's contexts. lib/run/device_moves.cpp composes every move
// between host memory and a backend's memory, and inside one context, from these;
// the backend decides nothing about a transfer, only how its driver does each step.
//
// Where the work goes is the library's rule (submit_routed, lib/run/device_moves.hpp):
// the caller's stream when the backend runs work on it in this context (the call
// returns with the work queued, in the stream's order), otherwise the backend's
// own queue after the caller's stream's earlier work, waited for at finish().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "arraybridge/arraybridge.h"
#include "lib/tensor/layout.hpp"
#include "lib/devices/stream.hpp"

namespace abr {

class HostRegistrar;
class StagingProvider;

class Submission {
 public:
  // Without finish() (an error): waits, never throwing, until nothing submitted still runs.
  virtual ~Submission() = default;

  // n compact bytes between host memory and a device view (`device`: handle +
  // byte_offset), `offset` bytes past its first element. Done when finish()
  // returns on the backend's own queue, in order on the caller's stream.
  virtual void write(const Layout& device, uint64_t offset, const char* host, std::size_t n) = 0;
  virtual void read(const Layout& device, uint64_t offset, char* host, std::size_t n) = 0;
  // The same for a chunk of the pipeline: always queued, and an event after it.
  virtual std::unique_ptr<Event> write_chunk(const Layout& device, uint64_t offset, const char* host,
                                             std::size_t n) = 0;
  virtual std::unique_ptr<Event> read_chunk(const Layout& device, uint64_t offset, char* host, std::size_t n) = 0;
  // n compact bytes from one device view to another of this context.
  virtual void copy(const Layout& from, const Layout& to, std::size_t n) = 0;
  // A device kernel walking src's layout into dst's, converting dtypes, in this context.
  virtual void walk(const Layout& src, const Layout& dst) = 0;
  // A compact device view of like's shape in `dtype`, freed after the work submitted here.
  virtual Layout temporary(const Layout& like, DLDataType dtype) = 0;
  // `bytes` of pinned host memory for this work, given back after it (DMA-only backends).
  virtual char* pinned(std::size_t bytes) = 0;
  // The first element of a device view mapped into host memory, unmapped at finish()
  // (backends whose Capabilities::maps_to_host).
  virtual char* map(const Layout& device, bool write) = 0;
  // Waits until the work so far is done: the host reads what it wrote next.
  virtual void wait() = 0;
  // More moves follow before finish(): no read or write need be waited for on its
  // own. The host leaves their host memory alone until wait() or finish(); on the
  // device the queue runs them in order, so a later write of the same submission
  // reads what an earlier read wrote.
  virtual void defer_waits() {}
  // Done submitting: flushed onto the caller's stream, or waited for.
  virtual void finish() = 0;
  // Whether finish() waits for the work (no caller's stream here): the call
  // returns with it done, so waiting earlier costs the caller nothing. False, the
  // default, keeps every chunk's event.
  virtual bool synchronous() const { return false; }
  // After an error: waits until nothing submitted still runs; never throws.
  virtual void settle() noexcept = 0;

  // For the pipeline: the pinned memory this context's DMA is fastest from, and
  // this driver's page-locking of another's host memory (nullptr without one).
  virtual StagingProvider& staging() = 0;
  virtual HostRegistrar* registrar() { return nullptr; }
};

}  // namespace abr

// What streams let go of without waiting (abr_stream_release), or hand over when
// an event is recorded on them (abr_event_record), keeps its storage (sources the
// queued work still reads) until that work completes. The runtime
// releases what has completed on its later calls and waits for the rest when it
// is destroyed; a stream let go of after that waits for its own work. In a forked
// child what it holds is the parent's: never asked about, never released (it goes
// with the process), since asking its events would call the parent's driver.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

#include "lib/devices/stream.hpp"

namespace abr {

class PendingReleases {
 public:
  // Takes `retained`; each storage is released once its event has completed.
  void add(std::vector<Retained> retained) noexcept;
  // Releases the storage whose work has completed. Every call of the runtime makes
  // it: inline, so that nothing pending costs one load and no call.
  void collect() noexcept {
    if (pending() != 0) collect_completed();
  }
  // Waits for all pending work, releases its storage, and from then on `add` waits at once.
  void close() noexcept;
  std::size_t pending() const { return count_.load(std::memory_order_acquire); }

 private:
  void collect_completed() noexcept;
  ForkStamp born_;
  std::mutex mutex_;
  std::vector<Retained> pending_;
  std::atomic<std::size_t> count_{0};
  bool closed_ = false;
};

}  // namespace abr

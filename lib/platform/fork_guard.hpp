// Forks this process descends from. Device drivers (CUDA's, PoCL's and other OpenCL
// drivers) do not survive fork: their threads stay in the parent, so a child's
// first call into a driver the parent opened hangs or fails. A runtime notes the
// count it was made at, and its backends refuse work in a forked child.
#pragma once

#include <atomic>
#include <cstdint>

namespace abr {

namespace detail {
extern std::atomic<uint32_t> forks;  // counted in each child by a pthread_atfork handler set when the library loads
}

// How many forks separate this process from the one that loaded the library (0 there):
// one relaxed load, asked on every transfer.
inline uint32_t fork_generation() noexcept { return detail::forks.load(std::memory_order_relaxed); }

// getpid(), for messages.
int32_t this_process_id() noexcept;

// When a driver object (a stream, an event) was made among forks: one made before
// this process forked is the parent's, and any call on it here would hang or fail.
class ForkStamp {
 public:
  bool inherited() const noexcept { return fork_generation() != generation_; }

 private:
  uint32_t generation_ = fork_generation();
};

// ABR_ERR_BACKEND_UNAVAILABLE for a call on `what` ("this stream") made before this process forked.
[[noreturn]] void refuse_inherited(const char* what);

// A runtime of this process opened the driver of backend `id` (an abr_backend: cuInit,
// an OpenCL platform's).
void note_driver_opened(int32_t id) noexcept;
// The process that opened backend `id`'s driver and then forked this one (an
// ancestor), or 0 when none did: its state came with the fork and its threads did
// not, so a runtime made here must not open it again.
int32_t driver_opened_before_fork(int32_t id) noexcept;

}  // namespace abr

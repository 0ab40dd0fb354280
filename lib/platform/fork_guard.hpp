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

}  // namespace abr

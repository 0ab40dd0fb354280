// Forks this process descends from. Device drivers (CUDA's, PoCL's and other OpenCL
// drivers) do not survive fork: their threads stay in the parent, so a child's
// first call into a driver the parent opened hangs or fails. A runtime notes the
// count it was made at, and its backends refuse work in a forked child.
#pragma once

#include <cstdint>

namespace abr {

// How many forks separate this process from the one that first called it (0 there).
// Counted from that first call on (pthread_atfork); a relaxed atomic load after it.
uint32_t fork_generation() noexcept;

// getpid(), for messages.
int32_t this_process_id() noexcept;

}  // namespace abr

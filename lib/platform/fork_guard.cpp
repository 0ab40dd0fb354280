#include "lib/platform/fork_guard.hpp"

#include <pthread.h>
#include <unistd.h>

namespace abr {

namespace detail {
std::atomic<uint32_t> forks{0};
}

namespace {

void count_fork_in_child() { detail::forks.fetch_add(1, std::memory_order_relaxed); }

// Set when the library loads, before any runtime exists; glibc forgets it when the library is unloaded (dlclose).
[[maybe_unused]] const bool watching_forks = pthread_atfork(nullptr, nullptr, count_fork_in_child) == 0;

}  // namespace

int32_t this_process_id() noexcept { return static_cast<int32_t>(getpid()); }

}  // namespace abr

#include "lib/platform/fork_guard.hpp"

#include <pthread.h>
#include <unistd.h>

#include "lib/base/error.hpp"

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

void refuse_inherited(const char* what) {
  fail(ABR_ERR_BACKEND_UNAVAILABLE,
       "{} was made before this process ({}) was forked: its driver's threads stayed in the parent, so waiting "
       "for it or queueing on it here would hang or fail. Wait for its work in the parent before forking, or start "
       "this process with multiprocessing's \"spawn\" or \"forkserver\" method",
       what, this_process_id());
}

namespace {
// The process that opened drivers, and its fork generation; 0 and 0 until one does.
std::atomic<int32_t> drivers_opener{0};
std::atomic<uint32_t> drivers_opener_generation{0};
}  // namespace

void note_drivers_opened() noexcept {
  if (drivers_opened_before_fork() != 0) return;  // an ancestor's stay the first (and this one opened none)
  drivers_opener_generation.store(fork_generation(), std::memory_order_relaxed);
  drivers_opener.store(this_process_id(), std::memory_order_relaxed);
}

int32_t drivers_opened_before_fork() noexcept {
  const int32_t opener = drivers_opener.load(std::memory_order_relaxed);
  return opener != 0 && drivers_opener_generation.load(std::memory_order_relaxed) != fork_generation() ? opener : 0;
}

}  // namespace abr

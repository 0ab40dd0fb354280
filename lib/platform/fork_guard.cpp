#include "lib/platform/fork_guard.hpp"

#include <pthread.h>
#include <cstddef>
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
// Per backend (its abr_backend, a small number): the process that opened its driver,
// 0 until one did, and that process's fork generation.
constexpr std::size_t kBackendSlots = 8;
std::atomic<int32_t> driver_opener[kBackendSlots];
std::atomic<uint32_t> driver_opener_generation[kBackendSlots];

std::size_t slot_of(int32_t id) noexcept { return static_cast<std::size_t>(id) % kBackendSlots; }
}  // namespace

void note_driver_opened(int32_t id) noexcept {
  const std::size_t slot = slot_of(id);
  if (driver_opened_before_fork(id) != 0) return;  // an ancestor's: this process opened none (it was refused)
  driver_opener_generation[slot].store(fork_generation(), std::memory_order_relaxed);
  driver_opener[slot].store(this_process_id(), std::memory_order_relaxed);
}

int32_t driver_opened_before_fork(int32_t id) noexcept {
  const std::size_t slot = slot_of(id);
  const int32_t opener = driver_opener[slot].load(std::memory_order_relaxed);
  return opener != 0 && driver_opener_generation[slot].load(std::memory_order_relaxed) != fork_generation() ? opener
                                                                                                            : 0;
}

}  // namespace abr

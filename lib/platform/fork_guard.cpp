#include "lib/platform/fork_guard.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace abr {

namespace {

std::atomic<uint32_t> forks{0};

void count_fork_in_child() { forks.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

uint32_t fork_generation() noexcept {
  // glibc forgets the handler when the library is unloaded (dlclose), as it keeps the handlers' DSO.
  static const bool watching = pthread_atfork(nullptr, nullptr, count_fork_in_child) == 0;
  (void)watching;
  return forks.load(std::memory_order_relaxed);
}

int32_t this_process_id() noexcept { return static_cast<int32_t>(getpid()); }

}  // namespace abr

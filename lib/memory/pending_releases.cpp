#include "lib/memory/pending_releases.hpp"

#include <utility>

#include "lib/base/log.hpp"

namespace abr {
namespace {

// Blocks until the work is done; a failed wait (a lost device) also ends that work.
void wait_quietly(Event& event) noexcept {
  try {
    event.wait();
  } catch (const std::exception& e) {
    log::debug("waiting for released work: {}", e.what());
  }
}

// The parent's work and storage, in a forked child: left as they are.
void leak(std::vector<Retained>& retained) noexcept {
  for (auto& item : retained) {
    (void)item.done.release();
    (void)item.storage.release();
  }
}

}  // namespace

void PendingReleases::add(std::vector<Retained> retained) noexcept {
  if (born_.inherited()) [[unlikely]] {
    leak(retained);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_) {
      try {
        for (auto& item : retained) {
          if (item.done && !item.done->complete()) pending_.push_back(std::move(item));
        }
        count_.store(pending_.size(), std::memory_order_release);
        return;                          // what was already complete is released below, outside the lock
      } catch (const std::bad_alloc&) {  // no room to keep the rest: wait for it below
      }
    }
  }
  for (auto& item : retained)
    if (item.done && item.storage) wait_quietly(*item.done);
  collect();
}

void PendingReleases::collect_completed() noexcept {
  if (born_.inherited()) [[unlikely]]
    return;  // the parent's events: asking them would call its driver
  std::vector<Retained> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto still = pending_.begin();
    for (auto& item : pending_) {
      if (item.done->complete()) {
        try {
          done.push_back(std::move(item));
          continue;
        } catch (const std::bad_alloc&) {  // keep it for the next call
        }
      }
      if (&*still != &item) *still = std::move(item);
      ++still;
    }
    pending_.erase(still, pending_.end());
    count_.store(pending_.size(), std::memory_order_release);
  }
  // `done` releases its storage here, outside the lock: a deleter may call back into the runtime.
}

void PendingReleases::close() noexcept {
  std::vector<Retained> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    left.swap(pending_);
    count_.store(0, std::memory_order_release);
  }
  if (born_.inherited()) [[unlikely]] {
    leak(left);
    return;
  }
  for (auto& item : left) wait_quietly(*item.done);
}

}  // namespace abr

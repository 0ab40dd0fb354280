#include "lib/memory/pinned_pool.hpp"

#include <unistd.h>

#include <algorithm>

#include "lib/base/error.hpp"
#include "lib/base/fault.hpp"
#include "lib/base/log.hpp"

namespace abr {
namespace {

constexpr std::size_t kPage = 4096;

uint64_t default_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 4ull << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4;
}

// Waits until no command uses a block. A failed command no longer uses it either,
// so its error is logged and the wait goes on: the caller frees or reuses the block.
void wait_for_users(const std::vector<std::shared_ptr<Event>>& users) noexcept {
  for (const std::shared_ptr<Event>& event : users) {
    try {
      event->wait();
    } catch (const std::exception& e) {
      log::debug("waiting for a pinned block's user failed: {}", e.what());
    } catch (...) {
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- PinnedBlock

PinnedBlock& PinnedBlock::operator=(PinnedBlock&& other) noexcept {
  if (this != &other) {
    give_back();
    pool_ = std::move(other.pool_);
    block_ = std::move(other.block_);
    domain_ = other.domain_;
    users_ = std::move(other.users_);
  }
  return *this;
}

PinnedBlock::~PinnedBlock() { give_back(); }

void PinnedBlock::used_by(Stream& stream) { used_until(stream.record()); }

void PinnedBlock::used_until(std::unique_ptr<Event> event) {
  if (event) users_.push_back(std::move(event));  // shared now, not under the pool's lock at its return
}

void PinnedBlock::give_back() noexcept {
  if (block_) pool_->give_back(std::move(block_), domain_, std::move(users_));
  pool_.reset();
  users_.clear();
}

// ---------------------------------------------------------------- PinnedPool

std::shared_ptr<PinnedPool> PinnedPool::create(uint64_t limit_bytes) {
  return std::shared_ptr<PinnedPool>(new PinnedPool(limit_bytes ? limit_bytes : default_limit()));
}

PinnedPool::PinnedPool(uint64_t limit_bytes) { stats_.limit_bytes = limit_bytes; }

PinnedPool::~PinnedPool() {
  for (auto& entry : cached_) wait_for_users(entry.second.users);
}

std::size_t PinnedPool::size_class(std::size_t bytes) {
  if (bytes <= kPage) return kPage;
  std::size_t top = std::size_t{1} << (63 - __builtin_clzll(static_cast<unsigned long long>(bytes)));
  const std::size_t step = std::max(kPage, top / 8);
  return (bytes + step - 1) / step * step;
}

bool PinnedPool::idle(Cached& cached) noexcept {
  auto& users = cached.users;
  users.erase(std::remove_if(users.begin(), users.end(), [](auto& e) { return e->complete(); }), users.end());
  return users.empty();
}

uint64_t PinnedPool::release_idle(uint64_t wanted, std::vector<std::unique_ptr<StagingBlock>>& freed, const Key* keep) {
  uint64_t released = 0;
  for (auto it = cached_.begin(); it != cached_.end() && released < wanted;) {
    if ((keep && it->first == *keep) || !idle(it->second)) {
      ++it;
      continue;
    }
    released += it->second.block->size();
    freed.push_back(take_cached(it).block);
  }
  return released;
}

PinnedPool::Cached PinnedPool::take_cached(std::multimap<Key, Cached>::iterator& it) {
  const std::size_t size = it->second.block->size();
  stats_.bytes_pinned -= size;
  stats_.bytes_cached -= size;
  stats_.blocks_pinned -= 1;
  Cached taken = std::move(it->second);
  it = cached_.erase(it);
  return taken;
}

PinnedBlock PinnedPool::acquire(StagingProvider& provider, std::size_t bytes) {
  const Key key{provider.domain(), size_class(bytes)};
  std::unique_ptr<StagingBlock> block = take_idle(key, /*missed=*/false);
  if (!block) block = allocate_within_limit(provider, key);
  return PinnedBlock(shared_from_this(), std::move(block), key.first);
}

std::unique_ptr<StagingBlock> PinnedPool::take_idle(const Key& key, bool missed) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto range = cached_.equal_range(key);
  for (auto it = range.first; it != range.second; ++it) {
    if (!idle(it->second)) continue;
    std::unique_ptr<StagingBlock> block = std::move(it->second.block);
    cached_.erase(it);
    stats_.hits += 1;
    stats_.misses -= missed ? 1 : 0;
    stats_.bytes_cached -= key.second;
    stats_.bytes_in_use += key.second;
    return block;
  }
  stats_.misses += missed ? 0 : 1;
  return nullptr;
}

bool PinnedPool::wait_for_busy_cached(const Key& key) {
  std::vector<std::shared_ptr<Event>> users;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t needed = stats_.bytes_pinned + key.second;
    if (needed <= stats_.limit_bytes) return true;  // room made since the caller looked: look again
    auto range = cached_.equal_range(key);
    auto same = range.second;  // a busy one of the class
    for (auto it = range.first; it != range.second; ++it) {
      if (idle(it->second)) return true;  // finished since the caller looked: take it
      if (same == range.second) same = it;
    }
    if (same != range.second) {
      users = same->second.users;
    } else {  // enough blocks to cover the shortfall (over the limit too, after a lower one was set)
      const uint64_t shortfall = needed - stats_.limit_bytes;
      uint64_t covered = 0;
      for (auto it = cached_.begin(); it != cached_.end() && covered < shortfall; ++it) {
        if (!idle(it->second))  // an idle one is freed when the caller looks again
          users.insert(users.end(), it->second.users.begin(), it->second.users.end());
        covered += it->second.block->size();
      }
      if (covered < shortfall) return false;  // they would not make room: no wait for a certain refusal
    }
  }
  wait_for_users(users);
  return true;
}

std::unique_ptr<StagingBlock> PinnedPool::allocate_within_limit(StagingProvider& provider, const Key& key) {
  const std::size_t size = key.second;
  bool waited = false, trimmed = false;  // each done once, before giving up
  // Cached blocks in use come back as their users finish; another thread may take the
  // one waited for first, so they are waited for again, a bounded number of times.
  constexpr int kBusyWaits = 64;
  int busy_waits = 0;
  for (;;) {
    std::vector<std::unique_ptr<StagingBlock>> freed;  // freed after the lock is dropped
    bool at_limit = false, over_all = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const uint64_t needed = stats_.bytes_pinned + size;
      // An idle block of the class asked is taken, not freed, while waits may still find it.
      if (needed > stats_.limit_bytes)
        release_idle(needed - stats_.limit_bytes, freed, busy_waits < kBusyWaits ? &key : nullptr);
      at_limit = stats_.bytes_pinned + size > stats_.limit_bytes;
      over_all = size > stats_.limit_bytes;
      if (!at_limit) {
        stats_.bytes_pinned += size;  // reserved while the provider works
        stats_.bytes_in_use += size;
        stats_.blocks_pinned += 1;
        stats_.peak_bytes_pinned = std::max(stats_.peak_bytes_pinned, stats_.bytes_pinned);
      }
    }
    freed.clear();
    if (at_limit) {
      // Cached blocks a stream still reads (a pipeline's, before ours on one stream),
      // and released ones waiting for their device's work (deleted cuda_host tensors),
      // are on their way back: wait for them, without the lock, and look again.
      // Nothing coming back makes room for more than the whole limit.
      if (!over_all) {
        const bool busy = busy_waits < kBusyWaits && wait_for_busy_cached(key);
        busy_waits += busy ? 1 : 0;
        bool returned = false;  // the reclaimer's wait synchronizes every device: only when nothing else helps
        if (!busy && !waited) {
          waited = true;
          returned = wait_for_returning();
        }
        if (busy || returned) {
          if (std::unique_ptr<StagingBlock> block = take_idle(key, /*missed=*/true)) return block;
          continue;
        }
      }
      std::lock_guard<std::mutex> lock(mutex_);
      fail(ABR_ERR_OUT_OF_MEMORY,
           "the pinned pool's limit of {} bytes is reached: {} more needed, {} pinned, {} of them in use "
           "(raise it with abr_pool_set_limit)",
           stats_.limit_bytes, size, stats_.bytes_pinned, stats_.bytes_in_use);
    }
    auto unreserve = [&] {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.bytes_pinned -= size;
      stats_.bytes_in_use -= size;
      stats_.blocks_pinned -= 1;
    };
    try {
      fault::point(ABR_ERR_OUT_OF_MEMORY, "pinned allocation");
      return provider.allocate(size);
    } catch (const Error& e) {
      unreserve();
      // Out of memory: give up the cached blocks (with those on their way back) and try once more.
      if (e.status() != ABR_ERR_OUT_OF_MEMORY || trimmed) throw;
      trimmed = true;
      if (!waited) wait_for_returning();
      waited = true;
      if (trim() == 0) throw;
      log::debug("pinned pool: {} failed for {} bytes, retrying after a trim", provider.name(), size);
    } catch (...) {
      unreserve();
      throw;
    }
  }
}

void PinnedPool::add_returning(std::weak_ptr<ReturningBlocks> returning) {
  std::lock_guard<std::mutex> lock(mutex_);
  returning_.erase(std::remove_if(returning_.begin(), returning_.end(),
                                  [](const std::weak_ptr<ReturningBlocks>& r) { return r.expired(); }),
                   returning_.end());
  returning_.push_back(std::move(returning));
}

bool PinnedPool::wait_for_returning() {
  std::vector<std::shared_ptr<ReturningBlocks>> live;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::weak_ptr<ReturningBlocks>& weak : returning_)
      if (std::shared_ptr<ReturningBlocks> r = weak.lock()) live.push_back(std::move(r));
  }
  bool waited = false;
  for (const std::shared_ptr<ReturningBlocks>& r : live)
    if (r->returning()) {
      r->wait_for_returning();  // unlocked: the blocks it returns take the lock
      waited = true;
    }
  return waited;
}

void PinnedPool::give_back(std::unique_ptr<StagingBlock> block, const void* domain,
                           std::vector<std::shared_ptr<Event>> users) noexcept {
  const std::size_t size = block->size();
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_in_use -= size;
  Cached entry{std::move(block), std::move(users)};
  try {
    cached_.emplace(Key{domain, size}, std::move(entry));  // moved only once allocated
    stats_.bytes_cached += size;
  } catch (...) {  // no memory to cache it: free it, after its users
    wait_for_users(entry.users);
    stats_.bytes_pinned -= size;
    stats_.blocks_pinned -= 1;
    entry.block.reset();
  }
}

uint64_t PinnedPool::trim() {
  std::vector<std::unique_ptr<StagingBlock>> freed;
  std::lock_guard<std::mutex> lock(mutex_);
  return release_idle(UINT64_MAX, freed);
}

void PinnedPool::release_domain(const void* domain) {
  std::vector<Cached> taken;  // waited for and freed after the lock is dropped
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = cached_.begin(); it != cached_.end();) {
      if (it->first.first != domain) {
        ++it;
        continue;
      }
      taken.push_back(take_cached(it));
    }
  }
  for (Cached& cached : taken) wait_for_users(cached.users);
}

void PinnedPool::set_limit(uint64_t limit_bytes) {
  std::vector<std::unique_ptr<StagingBlock>> freed;
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.limit_bytes = limit_bytes = limit_bytes ? limit_bytes : default_limit();
  if (stats_.bytes_pinned > limit_bytes) release_idle(stats_.bytes_pinned - limit_bytes, freed);
}

PoolStats PinnedPool::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  PoolStats out = stats_;
  for (auto& entry : cached_)
    if (!idle(entry.second)) out.bytes_waiting += entry.second.block->size();
  return out;
}

}  // namespace abr

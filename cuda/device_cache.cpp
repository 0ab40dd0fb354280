#include "cuda/device_cache.hpp"

#include <vector>

#include "lib/base/log.hpp"

namespace abr::cuda {

// A lent block: back to its cache when destroyed (by the reclaimer, after the
// devices' queued work), or freed when the cache no longer wants it.
class CachedBlock final : public Storage {
 public:
  CachedBlock(std::shared_ptr<DeviceCache> cache, std::unique_ptr<DeviceAllocation> block, uint64_t size)
      : cache_(std::move(cache)), block_(std::move(block)), size_(size) {}
  ~CachedBlock() override { cache_->give_back(std::move(block_), size_); }

 private:
  std::shared_ptr<DeviceCache> cache_;
  std::unique_ptr<DeviceAllocation> block_;
  uint64_t size_;
};

std::unique_ptr<DeviceAllocation> DeviceCache::take(const Device* device, uint64_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = cached_.find(Key{device, size});
  if (found == cached_.end()) {
    stats_.misses += 1;
    return nullptr;
  }
  std::unique_ptr<DeviceAllocation> block = std::move(found->second);
  cached_.erase(found);
  stats_.hits += 1;
  stats_.bytes_cached -= size;
  stats_.bytes_in_use += size;
  return block;
}

std::unique_ptr<DeviceAllocation> DeviceCache::allocate(const std::shared_ptr<Device>& device, uint64_t size) {
  auto block = std::make_unique<DeviceAllocation>(device, size);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_pinned += size;
  stats_.bytes_in_use += size;
  stats_.blocks_pinned += 1;
  stats_.peak_bytes_pinned = std::max(stats_.peak_bytes_pinned, stats_.bytes_pinned);
  return block;
}

std::unique_ptr<Storage> DeviceCache::lend(std::unique_ptr<DeviceAllocation> block, uint64_t size, CUdeviceptr* out) {
  *out = block->get();
  try {
    return std::make_unique<CachedBlock>(shared_from_this(), std::move(block), size);
  } catch (...) {
    if (block) give_back(std::move(block), size);
    throw;
  }
}

void DeviceCache::give_back(std::unique_ptr<DeviceAllocation> block, uint64_t size) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.bytes_in_use -= size;
    const bool keep = !closed_ && !block->device().lost() && stats_.bytes_cached + size <= stats_.limit_bytes;
    if (keep) {
      try {
        cached_.emplace(Key{&block->device(), size}, std::move(block));
        stats_.bytes_cached += size;
        return;
      } catch (...) {  // no memory to cache it: free it below
      }
    }
    stats_.bytes_pinned -= size;
    stats_.blocks_pinned -= 1;
  }
  block.reset();  // cuMemFree, outside the lock
}

uint64_t DeviceCache::free_cached(const Device* device) {
  std::vector<std::unique_ptr<DeviceAllocation>> freed;  // freed after the lock is dropped
  uint64_t bytes = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = cached_.begin(); it != cached_.end();) {
    if (device && it->first.first != device) {
      ++it;
      continue;
    }
    bytes += it->first.second;
    stats_.bytes_cached -= it->first.second;
    stats_.bytes_pinned -= it->first.second;
    stats_.blocks_pinned -= 1;
    freed.push_back(std::move(it->second));
    it = cached_.erase(it);
  }
  if (bytes) log::debug("device cache: freed {} cached bytes", bytes);
  return bytes;
}

uint64_t DeviceCache::trim() { return free_cached(nullptr); }

void DeviceCache::set_limit(uint64_t limit_bytes) {
  std::vector<std::unique_ptr<DeviceAllocation>> freed;
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.limit_bytes = limit_bytes ? limit_bytes : kDefaultLimit;
  // From the end of the map (each device's largest blocks first): few frees bring it under.
  for (auto it = cached_.end(); it != cached_.begin() && stats_.bytes_cached > stats_.limit_bytes;) {
    --it;
    stats_.bytes_cached -= it->first.second;
    stats_.bytes_pinned -= it->first.second;
    stats_.blocks_pinned -= 1;
    freed.push_back(std::move(it->second));
    it = cached_.erase(it);
  }
}

PoolStats DeviceCache::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void DeviceCache::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  free_cached(nullptr);
}

}  // namespace abr::cuda

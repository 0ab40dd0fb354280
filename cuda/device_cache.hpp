// The device memory cache: CUDA memory the runtime hands to consumers (the
// results of to_device, exports) comes from here, and returns here instead of
// to the driver. cuMemAlloc and cuMemFree cost microseconds to milliseconds and
// synchronize the device; a tensor of a size seen before costs neither.
//
// Reuse is gated by the reclaimer (reclaimer.hpp): a consumer's work may still
// read a deleted tensor's memory on streams we never see, so a block comes back
// only after every device has finished the work queued before its deletion.
// Blocks are whole cuMemAlloc allocations rounded to the pinned pool's size
// classes, so an IPC export of one is its allocation's handle at offset 0.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "lib/memory/pinned_pool.hpp"
#include "lib/tensor/storage.hpp"
#include "cuda/memory.hpp"

namespace abr::cuda {

class DeviceCache : public std::enable_shared_from_this<DeviceCache> {
 public:
  static constexpr uint64_t kDefaultLimit = uint64_t{1} << 30;  // cached bytes, all devices together
  static std::shared_ptr<DeviceCache> create() { return std::shared_ptr<DeviceCache>(new DeviceCache()); }

  // At least `bytes` (0 allowed) on `device`, as a storage that gives the block back
  // to the cache when destroyed. `retry` runs once when the driver is out of memory
  // (the reclaimer returning deleted tensors' blocks), after which the device's cached
  // blocks are freed and the allocation tried again.
  template <class Retry>
  std::unique_ptr<Storage> acquire(const std::shared_ptr<Device>& device, uint64_t bytes, CUdeviceptr* out,
                                   Retry&& retry);

  uint64_t trim();                       // frees every cached block; returns the bytes freed
  void set_limit(uint64_t limit_bytes);  // of cached bytes; 0: the default. A lower one frees at once.
  // bytes_pinned: held from the driver (lent + cached). A deleted tensor's block counts
  // as in use until the reclaimer's barrier, so bytes_waiting is always 0 here.
  PoolStats stats();
  // The runtime is going away: cached blocks are freed now, blocks still lent are freed when they come back.
  void close();

 private:
  DeviceCache() { stats_.limit_bytes = kDefaultLimit; }
  friend class CachedBlock;
  using Key = std::pair<const Device*, uint64_t>;  // (device, size class)

  std::unique_ptr<DeviceAllocation> take(const Device* device, uint64_t size);  // a cached block, or null
  std::unique_ptr<DeviceAllocation> allocate(const std::shared_ptr<Device>& device, uint64_t size);
  uint64_t free_cached(const Device* device);  // nullptr: every device
  void give_back(std::unique_ptr<DeviceAllocation> block, uint64_t size) noexcept;
  std::unique_ptr<Storage> lend(std::unique_ptr<DeviceAllocation> block, uint64_t size, CUdeviceptr* out);

  std::mutex mutex_;
  std::multimap<Key, std::unique_ptr<DeviceAllocation>> cached_;
  PoolStats stats_;
  bool closed_ = false;
};

template <class Retry>
std::unique_ptr<Storage> DeviceCache::acquire(const std::shared_ptr<Device>& device, uint64_t bytes, CUdeviceptr* out,
                                              Retry&& retry) {
  const uint64_t size = PinnedPool::size_class(static_cast<std::size_t>(bytes));
  if (std::unique_ptr<DeviceAllocation> cached = take(device.get(), size)) return lend(std::move(cached), size, out);
  try {
    return lend(allocate(device, size), size, out);
  } catch (const Error& e) {
    if (e.status() != ABR_ERR_OUT_OF_MEMORY) throw;
  }
  retry();  // deleted tensors' memory on its way back: it may now be cached
  if (std::unique_ptr<DeviceAllocation> cached = take(device.get(), size)) return lend(std::move(cached), size, out);
  free_cached(device.get());
  return lend(allocate(device, size), size, out);
}

}  // namespace abr::cuda

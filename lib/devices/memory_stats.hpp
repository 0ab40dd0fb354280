// What a cache of memory reports: the pinned pool's (lib/memory/pinned_pool.hpp) and a
// backend's device cache (DeviceBackend::device_cache_stats), in abr_pool_stats' terms.
#pragma once

#include <cstdint>

namespace abr {

struct PoolStats {
  uint64_t bytes_pinned = 0;   // held from providers (or the driver) now
  uint64_t bytes_in_use = 0;   // handed out and not yet returned
  uint64_t bytes_cached = 0;   // returned, kept for reuse
  uint64_t bytes_waiting = 0;  // of the cached bytes, those a stream may still be using
  uint64_t peak_bytes_pinned = 0;
  uint64_t limit_bytes = 0;
  uint64_t blocks_pinned = 0;
  uint64_t hits = 0;    // served from the cache
  uint64_t misses = 0;  // needed a new block
};

}  // namespace abr

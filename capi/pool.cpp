// Pinned pool entry points: statistics, trim and limit.
#include <cstring>

#include "handles.hpp"

using abr::capi::guarded;
using abr::capi::require_pointer;
using abr::capi::runtime_of;

extern "C" {

abr_status abr_pool_get_stats(abr_runtime* runtime, abr_pool_stats* stats) {
  return guarded(__func__, [&] {
    require_pointer(stats, "stats");
    if (stats->version > ABR_POOL_STATS_VERSION)
      abr::fail(ABR_ERR_INVALID_ARGUMENT, "abr_pool_stats version {} is newer than this library's ({})",
                stats->version, ABR_POOL_STATS_VERSION);
    const abr::PoolStats s = runtime_of(runtime).pool().stats();
    std::memset(stats, 0, sizeof *stats);
    stats->version = ABR_POOL_STATS_VERSION;
    stats->bytes_pinned = s.bytes_pinned;
    stats->bytes_in_use = s.bytes_in_use;
    stats->bytes_cached = s.bytes_cached;
    stats->bytes_waiting = s.bytes_waiting;
    stats->peak_bytes_pinned = s.peak_bytes_pinned;
    stats->limit_bytes = s.limit_bytes;
    stats->blocks_pinned = s.blocks_pinned;
    stats->hits = s.hits;
    stats->misses = s.misses;
  });
}

abr_status abr_pool_trim(abr_runtime* runtime, uint64_t* released_bytes) {
  return guarded(__func__, [&] {
    const uint64_t released = runtime_of(runtime).trim_pool();
    if (released_bytes) *released_bytes = released;
  });
}

abr_status abr_pool_set_limit(abr_runtime* runtime, uint64_t limit_bytes) {
  return guarded(__func__, [&] { runtime_of(runtime).pool().set_limit(limit_bytes); });
}

}  // extern "C"

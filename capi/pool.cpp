// Pinned pool and device cache entry points: statistics, trim and limit.
#include <cstring>

#include "capi/handles.hpp"
#include "capi/struct_versions.hpp"

using abr::capi::guarded;
using abr::capi::kPoolStats;
using abr::capi::require_pointer;
using abr::capi::runtime_of;

namespace {

void write_pool_stats(abr_pool_stats* stats, const abr::PoolStats& s) {
  abr_pool_stats full{};
  full.version = ABR_POOL_STATS_VERSION;
  full.bytes_pinned = s.bytes_pinned;
  full.bytes_in_use = s.bytes_in_use;
  full.bytes_cached = s.bytes_cached;
  full.bytes_waiting = s.bytes_waiting;
  full.peak_bytes_pinned = s.peak_bytes_pinned;
  full.limit_bytes = s.limit_bytes;
  full.blocks_pinned = s.blocks_pinned;
  full.hits = s.hits;
  full.misses = s.misses;
  abr::capi::write_versioned(stats, full, kPoolStats);
}

}  // namespace

extern "C" {

abr_status abr_pool_stats_init(abr_pool_stats* stats, unsigned int version) {
  return guarded(__func__, [&] { abr::capi::init_versioned(stats, version, kPoolStats); });
}

abr_status abr_pool_get_stats(abr_runtime* runtime, abr_pool_stats* stats) {
  return guarded(__func__, [&] {
    abr::capi::caller_size(require_pointer(stats, "stats")->version, kPoolStats);
    write_pool_stats(stats, runtime_of(runtime).pool_stats());
  });
}

abr_status abr_device_cache_get_stats(abr_runtime* runtime, abr_pool_stats* stats) {
  return guarded(__func__, [&] {
    abr::capi::caller_size(require_pointer(stats, "stats")->version, kPoolStats);
    write_pool_stats(stats, runtime_of(runtime).device_cache_stats());
  });
}

abr_status abr_device_cache_set_limit(abr_runtime* runtime, uint64_t limit_bytes) {
  return guarded(__func__, [&] { runtime_of(runtime).set_device_cache_limit(limit_bytes); });
}

abr_status abr_pool_trim(abr_runtime* runtime, uint64_t* released_bytes) {
  return guarded(__func__, [&] {
    const uint64_t released = runtime_of(runtime).trim_pool();
    if (released_bytes) *released_bytes = released;
  });
}

abr_status abr_pool_set_limit(abr_runtime* runtime, uint64_t limit_bytes) {
  return guarded(__func__, [&] { runtime_of(runtime).set_pool_limit(limit_bytes); });
}

}  // extern "C"

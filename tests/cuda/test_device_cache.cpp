// The device memory cache (cuda/device_cache.hpp) on the fake driver: a deleted
// tensor's memory serves the next tensor of its size class without cuMemAlloc,
// but only after the work a consumer queued on it has run; out of memory frees
// the cache and tries again; trim and the limit free it; an IPC export of a
// reused block still names its allocation; a runtime destroyed with blocks cached
// or lent frees every one. And what each transfer path costs in driver calls.
#include <map>
#include <string>
#include <vector>

#include "tests/cuda/cuda_helpers.hpp"

using namespace test;

namespace {

abr_pool_stats cache_stats(abr_runtime* rt) {
  abr_pool_stats stats = ABR_POOL_STATS_INIT;
  REQUIRE(abr_device_cache_get_stats(rt, &stats) == ABR_OK);
  return stats;
}

// Deleted tensors' blocks come back on the reclaimer's thread, after its barrier:
// waits until `bytes` are cached (or fails after 5 s).
void wait_cached(abr_runtime* rt, uint64_t bytes) {
  REQUIRE(wait_until([&] { return cache_stats(rt).bytes_cached >= bytes; }));
}

DLManagedTensorVersioned* to_cuda0(abr_runtime* rt, std::vector<int32_t>& host) {
  Managed source(host.data(), i32, {static_cast<int64_t>(host.size())});
  return move_to(rt, &source.managed, cuda0);
}

long long calls(const Fake& fake, const char* name) { return fake.stat((std::string("calls:") + name).c_str()); }

}  // namespace

TEST_CASE_FIXTURE(NoDriverFindings, "device cache: a new tensor of a size seen before costs no cuMemAlloc") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  std::vector<int32_t> host = iota(1024);  // 4 KiB
  { Owned first(to_cuda0(rt, host)); }
  wait_cached(rt, 4096);
  const abr_pool_stats start = cache_stats(rt);
  const long long allocs = calls(fake, "cuMemAlloc_v2");
  for (int i = 0; i < 20; ++i) {
    std::vector<int32_t> values = iota(1024, 100 * i);
    Owned t(to_cuda0(rt, values));
    CHECK(read_back(rt, **&t) == values);  // the reused block holds this call's values
    t.reset();
    wait_cached(rt, 4096);
  }
  CHECK(calls(fake, "cuMemAlloc_v2") == allocs);
  const abr_pool_stats after = cache_stats(rt);
  CHECK(after.hits == start.hits + 20);
  CHECK(after.misses == start.misses);
  CHECK(after.blocks_pinned == 1);
  CHECK(after.bytes_pinned == 4096);
  CHECK(after.bytes_in_use == 0);
  CHECK(after.bytes_waiting == 0);
}

TEST_CASE_FIXTURE(NoDriverFindings, "device cache: a block comes back only after the work a consumer queued on it") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  RawDriver cu;
  CUstream consumer = cu.stream();
  std::vector<int32_t> host = iota(1024);
  Owned kept(to_cuda0(rt, host));  // the consumer's copy lands here
  std::vector<int32_t> zeros(1024, 0);
  Owned read(to_cuda0(rt, zeros));
  {
    Lag lag(300000);  // each stream operation of the fake runs 0.3 s late
    Owned source(to_cuda0(rt, host));
    const CUdeviceptr from = reinterpret_cast<CUdeviceptr>(source->data);
    REQUIRE(cu.device_copy(reinterpret_cast<CUdeviceptr>(read->data), from, 4096, consumer) == CUDA_SUCCESS);
    source.reset();  // DLPack lets a consumer delete a tensor once its work is queued
    // A new tensor of the same size now: the deleted one's block must not be it
    // while the consumer's copy still has to read it.
    std::vector<int32_t> other = iota(1024, 5000);
    Owned next(to_cuda0(rt, other));
    CHECK(next->data != reinterpret_cast<void*>(from));
    REQUIRE(cu.stream_sync(consumer) == CUDA_SUCCESS);
    CHECK(read_back(rt, **&read) == host);  // the consumer read what the deleted tensor held
  }
  cu.stream_destroy(consumer);
}

TEST_CASE_FIXTURE(NoDriverFindings, "device cache: out of memory frees the cached blocks and tries again") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  std::vector<int32_t> small = iota(1024), large = iota(64 * 1024);
  { Owned cached(to_cuda0(rt, small)); }
  wait_cached(rt, 4096);
  const long long live = fake.stat("device_allocations");
  fake.control("fail_alloc", 1);  // the next cuMemAlloc runs out of memory
  Owned t(to_cuda0(rt, large));   // another size class: a miss, refused, the cache freed, allocated
  fake.control("reset", 0);
  CHECK(read_back(rt, **&t) == large);
  const abr_pool_stats stats = cache_stats(rt);
  CHECK(stats.bytes_cached == 0);
  CHECK(stats.bytes_in_use == 256 * 1024);
  CHECK(fake.stat("device_allocations") == live);  // one freed, one allocated
}

TEST_CASE_FIXTURE(NoDriverFindings, "device cache: trim frees it, a limit bounds it, 0 restores the default") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  std::vector<int32_t> host = iota(1024);
  const long long live = fake.stat("device_allocations");
  {
    Owned a(to_cuda0(rt, host)), b(to_cuda0(rt, host)), c(to_cuda0(rt, host));
    CHECK(cache_stats(rt).bytes_in_use == 3 * 4096);
  }
  wait_cached(rt, 3 * 4096);
  CHECK(fake.stat("device_allocations") == live + 3);
  REQUIRE(abr_device_cache_set_limit(rt, 8192) == ABR_OK);  // lower than what is cached: freed at once
  CHECK(cache_stats(rt).bytes_cached == 8192);
  CHECK(cache_stats(rt).limit_bytes == 8192);
  CHECK(fake.stat("device_allocations") == live + 2);
  uint64_t released = 0;
  REQUIRE(abr_pool_trim(rt, &released) == ABR_OK);
  CHECK(released >= 8192);
  CHECK(cache_stats(rt).bytes_cached == 0);
  CHECK(cache_stats(rt).blocks_pinned == 0);
  CHECK(fake.stat("device_allocations") == live);
  // At the limit a returned block is freed, not kept.
  REQUIRE(abr_device_cache_set_limit(rt, 4096) == ABR_OK);
  { Owned a(to_cuda0(rt, host)), b(to_cuda0(rt, host)); }
  wait_cached(rt, 4096);
  REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);  // waits for the reclaimer: both are back (one freed) by now
  CHECK(fake.stat("device_allocations") == live);
  REQUIRE(abr_device_cache_set_limit(rt, 0) == ABR_OK);
  CHECK(cache_stats(rt).limit_bytes == uint64_t{1} << 30);
  abr_pool_stats old_struct = ABR_POOL_STATS_INIT;
  old_struct.version = 99;
  CHECK(abr_device_cache_get_stats(rt, &old_struct) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(abr_device_cache_get_stats(rt, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(abr_device_cache_set_limit(nullptr, 0) == ABR_ERR_INVALID_ARGUMENT);
}

TEST_CASE_FIXTURE(NoDriverFindings, "device cache: an IPC export of a reused block names its allocation") {
  Runtime rt;
  Fake fake;
  if (cuda_devices(rt) == 0 || !fake) return;
  std::vector<int32_t> host = iota(1000);
  void* first = nullptr;
  {
    Owned t(to_cuda0(rt, host));
    first = t->data;
  }
  wait_cached(rt, 4096);
  std::vector<int32_t> values = iota(1000, 77);
  Owned reused(to_cuda0(rt, values));
  REQUIRE(reused->data == first);
  abr_ipc_handle handle = ABR_IPC_HANDLE_INIT;
  REQUIRE(abr_ipc_export(rt, &reused.t->dl_tensor, nullptr, &handle) == ABR_OK);
  DLManagedTensorVersioned* imported = nullptr;
  REQUIRE(abr_ipc_import(rt, &handle, nullptr, &imported) == ABR_OK);
  Owned view(imported);
  CHECK(view->data == reused->data);
  CHECK(read_back(rt, **&view) == values);
}

TEST_CASE_FIXTURE(NoDriverFindings, "device cache: a runtime destroyed with blocks cached and lent frees them all") {
  Fake fake;
  std::vector<int32_t> host = iota(2048);
  long long live = 0;
  DLManagedTensorVersioned* outliving = nullptr;
  {
    Runtime rt;
    if (cuda_devices(rt) == 0 || !fake) return;
    live = fake.stat("device_allocations");
    { Owned cached(to_cuda0(rt, host)); }
    wait_cached(rt, 8192);
    outliving = to_cuda0(rt, host);   // the cached block, lent
    Owned other(to_cuda0(rt, host));  // a new one, deleted before the runtime
    CHECK(fake.stat("device_allocations") == live + 2);
  }
  CHECK(fake.stat("device_allocations") == live + 1);  // the cache's block went with the runtime
  outliving->deleter(outliving);                       // after its runtime: freed, not cached
  CHECK(fake.stat("device_allocations") == live);
}

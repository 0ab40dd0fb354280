// The pinned pool's cases of PERFORMANCE.md, measured on the pool itself with
// the OpenCL provider of one device: a hit (a cached block lent and returned)
// beside malloc + free of the same size, and a miss beside the provider's raw
// cost (clCreateBuffer(CL_MEM_ALLOC_HOST_PTR) + map, then unmap + release).
#include <cstdio>
#include <cstdlib>

#include "../../lib/pinned_pool.hpp"
#include "../../opencl/staging.hpp"
#include "bench.hpp"

namespace bench {

void run_pool_cases(const Options& options, const Report& report, const std::string& device_label, DLDevice device,
                    void* cl_context_handle, void* cl_device_handle) {
  const abr::opencl::Api* cl = abr::opencl::api(nullptr);
  if (!cl) return;
  auto context = std::make_shared<abr::opencl::Context>(*cl, static_cast<cl_context>(cl_context_handle),
                                                        static_cast<cl_device_id>(cl_device_handle), device);
  abr::opencl::MappedStagingProvider provider(context);
  auto pool = abr::PinnedPool::create();
  constexpr int kCalls = 10000;

  for (uint64_t bytes : options.sizes) {
    progress(device_label, bytes);
    char size_text[48];
    if (bytes >= (1ull << 20)) std::snprintf(size_text, sizeof size_text, "%.0f MiB block", bytes / double(1ull << 20));
    else std::snprintf(size_text, sizeof size_text, "%.0f KiB block", bytes / 1024.0);
    if (selected(options, "pinned pool hit")) {
      { abr::PinnedBlock warm = pool->acquire(provider, bytes); }
      Result r{"pinned pool hit (acquire + return)", device_label, 0};
      r.unit = "ns";
      r.shape = size_text;
      r.seconds = time_it(options, [&] {
                    for (int i = 0; i < kCalls; ++i) {
                      abr::PinnedBlock block = pool->acquire(provider, bytes);
                      keep(block.data());
                    }
                  }).median_s / kCalls;
      r.baselines.push_back({"malloc + free", time_it(options, [&] {
                                                for (int i = 0; i < kCalls; ++i) {
                                                  void* p = std::malloc(bytes);
                                                  keep(p);
                                                  std::free(p);
                                                }
                                              }).median_s / kCalls,
                             ""});
      report(r);
    }
    if (selected(options, "pinned pool miss")) {
      Result r{"pinned pool miss (pin a new block)", device_label, 0};
      r.unit = "ns";
      r.shape = size_text;
      r.seconds = time_it(options, [&] {
                    pool->trim();
                    abr::PinnedBlock block = pool->acquire(provider, bytes);
                    keep(block.data());
                  }).median_s;
      const std::size_t size = abr::PinnedPool::size_class(bytes);
      r.baselines.push_back({"raw CL_MEM_ALLOC_HOST_PTR buffer + map", time_it(options, [&] {
                                provider.allocate(size).reset();
                              }).median_s,
                             ""});
      report(r);
    }
  }
}

}  // namespace bench

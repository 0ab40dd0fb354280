// The pinned pool's cases of the catalog (catalog.cpp), measured on the pool itself with
// the OpenCL provider of one device: a hit (a cached block lent and returned)
// beside malloc + free of the same size, and a miss beside the provider's raw
// cost (clCreateBuffer(CL_MEM_ALLOC_HOST_PTR) + map, then unmap + release).
#include <cstdio>
#include <cstdlib>

#include "lib/memory/pinned_pool.hpp"
#include "opencl/staging.hpp"
#include "bench/bench.hpp"

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
    if (selected(options, "pool hit")) {
      { abr::PinnedBlock warm = pool->acquire(provider, bytes); }
      Result r{"pool hit", device_label, 0};
      r.unit = "ns";
      r.size_bytes = bytes;
      r.seconds = time_it(options,
                          [&] {
                            for (int i = 0; i < kCalls; ++i) {
                              abr::PinnedBlock block = pool->acquire(provider, bytes);
                              keep(block.data());
                            }
                          })
                      .median_s /
          kCalls;
      r.baselines.push_back(baseline("malloc",
                                     time_it(
                                         options,
                                         [&] {
                                           for (int i = 0; i < kCalls; ++i) {
                                             void* p = std::malloc(bytes);
                                             keep(p);
                                             std::free(p);
                                           }
                                         }).median_s /
                                         kCalls));
      report(r);
    }
    if (selected(options, "pool miss")) {
      Result r{"pool miss", device_label, 0};
      r.unit = "ns";
      r.size_bytes = bytes;
      r.seconds = time_it(options, [&] {
                    pool->trim();
                    abr::PinnedBlock block = pool->acquire(provider, bytes);
                    keep(block.data());
                  }).median_s;
      const std::size_t size = abr::PinnedPool::size_class(bytes);
      r.baselines.push_back(baseline("clPin", time_it(options, [&] { provider.allocate(size).reset(); }).median_s));
      report(r);
    }
  }
}

}  // namespace bench

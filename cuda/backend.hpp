// The CUDA backend: devices found through the driver loaded at run time, each
// used through its primary context; pointers from other libraries are checked
// with the driver's pointer attributes and used in place.
#pragma once

#include <memory>
#include <vector>

#include "lib/devices/backend.hpp"
#include "cuda/device.hpp"
#include "cuda/device_cache.hpp"
#include "cuda/memory.hpp"
#include "cuda/reclaimer.hpp"

namespace abr::cuda {

class Backend final : public DeviceBackend {
 public:
  Backend(const abr_runtime_options& options, std::shared_ptr<PinnedPool> pool);
  // Gives back this backend's pinned blocks (cached in the pool) while the
  // devices' contexts live; memory still lent to tensors goes when they do.
  ~Backend() override;

  const BackendReport& report() const override { return report_; }
  const Capabilities& capabilities() const override;
  DeviceTraits traits(DLDevice device) override;
  void* memory_context(const Layout& tensor, AllocationRange* allocation) override;
  DeviceMemory allocate(DLDevice device, uint64_t bytes, Stream* stream) override;
  DeviceMemory wrap_host(DLDevice device, void* base, uint64_t bytes, bool read_only,
                         std::unique_ptr<Storage>& owner) override;
  bool runs_on(const Stream& stream, DLDevice device, void* context) override;
  std::unique_ptr<Submission> submit(DLDevice device, void* context, Stream* stream) override;
  void peer_copy(const Layout& src, const Layout& dst, Stream* stream, PeerSteps steps) override;
  std::unique_ptr<Stream> create_stream(DLDevice device) override;
  std::unique_ptr<Stream> wrap_stream(DLDevice device, void* native) override;
  bool host_pinned(const void* begin, uint64_t bytes) override;
  bool device_lost(DLDevice device) override;
  void finish_deferred_releases() override;
  PoolStats device_cache_stats() override;
  uint64_t trim_device_cache() override;
  void set_device_cache_limit(uint64_t limit_bytes) override;
  uint32_t ipc_export(const Layout& tensor, Stream* stream, unsigned char* out,
                      std::size_t capacity) override;  // cuda/ipc.cpp, as is ipc_import
  DLManagedTensorVersioned* ipc_import(const unsigned char* handle, std::size_t size, Stream* stream) override;

 private:
  std::shared_ptr<Device> device(DLDevice device) const;  // throws for a device this backend lacks

  const Driver* cu_ = nullptr;
  std::shared_ptr<PinnedPool> pool_;
  BackendReport report_;
  std::vector<std::shared_ptr<Device>> devices_;
  std::unique_ptr<PinnedProvider> pinned_;
  std::shared_ptr<Reclaimer> reclaimer_;  // shared with the memory it hands out, which may outlive us
  std::shared_ptr<DeviceCache> cache_ = DeviceCache::create();  // likewise
};

}  // namespace abr::cuda

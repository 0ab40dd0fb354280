// The OpenCL backend: devices found through the ICD loader, the runtime's own
// context per device (created on first use), and the contexts of callers'
// buffers and queues, adopted as they come in.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "lib/devices/backend.hpp"
#include "opencl/context.hpp"
#include "opencl/discovery.hpp"

namespace abr::opencl {

class Backend final : public DeviceBackend {
 public:
  Backend(const abr_runtime_options& options, std::shared_ptr<PinnedPool> pool);

  const BackendReport& report() const override { return found_.report; }
  const Capabilities& capabilities() const override;
  DeviceTraits traits(DLDevice device) override;
  void* memory_context(const Layout& tensor, AllocationRange* allocation) override;
  DeviceMemory allocate(DLDevice device, uint64_t bytes, Stream* stream) override;
  DeviceMemory wrap_host(DLDevice device, void* base, uint64_t bytes, bool read_only,
                         std::unique_ptr<Storage>& owner) override;
  bool runs_on(const Stream& stream, DLDevice device, void* context) override;
  std::unique_ptr<Submission> submit(DLDevice device, void* context, Stream* stream) override;
  std::unique_ptr<Stream> create_stream(DLDevice device) override;
  std::unique_ptr<Stream> wrap_stream(DLDevice device, void* native) override;

  // The runtime's own context on opencl:N, created on first use.
  std::shared_ptr<Context> own_context(DLDevice device);
  // The context `handle` as seen from opencl:N: the runtime's own, or adopted.
  std::shared_ptr<Context> context_for(cl_context handle, DLDevice device);

 private:
  cl_device_id device_id(DLDevice device) const;  // throws for a device this backend lacks
  // The one of `candidates` that is opencl:N (ours, or another driver copy's pointer
  // to it); null when none is.
  cl_device_id match_device(const std::vector<cl_device_id>& candidates, DLDevice device) const;

  const Api* cl_ = nullptr;
  std::shared_ptr<PinnedPool> pool_;
  Discovery found_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<Context>> own_;  // by device index, null until first use
  std::map<std::pair<cl_context, int32_t>, std::shared_ptr<Context>> adopted_;
};

}  // namespace abr::opencl

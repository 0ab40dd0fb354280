// CUDA memory the runtime owns: device buffers (stream-ordered: allocated on
// the transfer's stream, freed in order on the device's own stream), and
// page-locked host memory for the pinned pool.
#pragma once

#include <memory>

#include "../lib/staging.hpp"
#include "../lib/storage.hpp"
#include "device.hpp"

namespace abr::cuda {

// `bytes` of device memory allocated in `stream`'s order (cuMemAllocAsync), and
// freed in `free_stream`'s order when destroyed: the same stream for a
// transfer's temporaries, the device's own stream (nullptr) for exported
// memory, whose consumer has finished with it when the deleter runs (DLPack's
// rule). Never freed after the device is lost (the context is gone).
class DeviceBuffer final : public Storage {
 public:
  DeviceBuffer(std::shared_ptr<Device> device, uint64_t bytes, CUstream stream, CUstream free_stream);
  ~DeviceBuffer() override;
  CUdeviceptr get() const { return ptr_; }

 private:
  std::shared_ptr<Device> device_;
  CUstream free_stream_;
  CUdeviceptr ptr_ = 0;
};

// Portable page-locked host memory (cuMemHostAlloc), usable by every context:
// the pinned pool's provider for CUDA staging and cuda_host tensors.
class PinnedProvider final : public StagingProvider {
 public:
  explicit PinnedProvider(std::shared_ptr<Device> any_device) : device_(std::move(any_device)) {}
  const char* name() const override { return "CUDA page-locked host memory"; }
  const void* domain() const override { return &device_->cu(); }
  std::unique_ptr<StagingBlock> allocate(std::size_t bytes) override;

 private:
  std::shared_ptr<Device> device_;
};

}  // namespace abr::cuda

// CUDA memory the runtime owns, in two kinds by who uses it:
//  - a transfer's temporaries are stream-ordered (cuMemAllocAsync): allocated,
//    used and freed on the one stream the transfer runs on, so every use is
//    ordered after the allocation and the free after every use;
//  - memory handed to a consumer (an exported tensor) is used on streams we
//    never see, so it is not stream-ordered (cuMemAlloc: valid on every stream
//    at once) and is freed through the Reclaimer, after the devices' queued work.
// And page-locked host memory for the pinned pool, its own or another driver's
// registered with CUDA.
#pragma once

#include <memory>

#include "lib/memory/shared_staging.hpp"
#include "lib/memory/staging.hpp"
#include "lib/tensor/storage.hpp"
#include "cuda/device.hpp"

namespace abr::cuda {

// What the driver knows of an address, asked so that memory it does not know
// (pageable host memory) is no error: cuPointerGetAttributes reads zeros there,
// where cuPointerGetAttribute fails and fills sanitizer logs and driver traces.
// Needs the device's context current (Scope).
struct PointerFacts {
  unsigned int type = 0;  // CU_MEMORYTYPE_*, 0: unknown to the driver
  int ordinal = -1;
  CUdeviceptr start = 0;  // the allocation holding the address
  size_t size = 0;
};
PointerFacts pointer_facts(Device& device, CUdeviceptr address);

// `bytes` of device memory allocated, used and freed in `stream`'s order.
// Work on another stream must be ordered after the allocation, and the buffer
// destroyed only once the stream is ordered after that work (events).
// Never freed after the device is lost (the context is gone).
class StreamBuffer final {
 public:
  StreamBuffer(std::shared_ptr<Device> device, uint64_t bytes, CUstream stream);
  ~StreamBuffer();
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  CUdeviceptr get() const { return ptr_; }

 private:
  std::shared_ptr<Device> device_;
  CUstream stream_;
  CUdeviceptr ptr_ = 0;
};

// `bytes` of device memory usable on every stream at once (cuMemAlloc), freed
// with cuMemFree when destroyed: wrap it in ReleasedAfterDeviceWork when a
// consumer may still have work queued on it.
class DeviceAllocation final : public Storage {
 public:
  DeviceAllocation(std::shared_ptr<Device> device, uint64_t bytes);
  ~DeviceAllocation() override;
  CUdeviceptr get() const { return ptr_; }
  Device& device() const { return *device_; }

 private:
  std::shared_ptr<Device> device_;
  CUdeviceptr ptr_ = 0;
};

// Portable page-locked host memory (cuMemHostAlloc), usable by every context:
// the pinned pool's provider for CUDA staging and cuda_host tensors. Its blocks
// keep the device whose context allocated them, and are freed in that context
// while it lives (a block freed after the context is gone fails and leaks).
class PinnedProvider final : public StagingProvider {
 public:
  explicit PinnedProvider(std::shared_ptr<Device> any_device) : device_(std::move(any_device)) {}
  const char* name() const override { return "CUDA page-locked host memory"; }
  const void* domain() const override { return &device_->cu(); }
  std::unique_ptr<StagingBlock> allocate(std::size_t bytes) override;

 private:
  std::shared_ptr<Device> device_;
};

// Page-locks host memory another driver allocated (cuMemHostRegister, portable to
// every context), so that CUDA's DMA reaches it at full speed. A registration keeps
// the device whose context made it, and is undone in that context while it lives.
class HostRegistrar final : public abr::HostRegistrar {
 public:
  explicit HostRegistrar(std::shared_ptr<Device> device) : device_(std::move(device)) {}
  std::unique_ptr<HostRegistration> register_host(char* data, std::size_t bytes) override;

 private:
  std::shared_ptr<Device> device_;
};

}  // namespace abr::cuda

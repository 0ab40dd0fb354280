#include "cuda/memory.hpp"

#include "lib/base/fault.hpp"
#include "lib/base/log.hpp"

namespace abr::cuda {

PointerFacts pointer_facts(Device& device, CUdeviceptr address) {
  PointerFacts facts;
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* values[] = {&facts.type, &facts.ordinal, &facts.start, &facts.size};
  device.check(device.cu().cuPointerGetAttributes(4, which, values, address), "cuPointerGetAttributes");
  return facts;
}
namespace {

class PinnedBlock final : public StagingBlock {
 public:
  PinnedBlock(std::shared_ptr<Device> device, char* data, std::size_t size)
      : device_(std::move(device)), data_(data), size_(size) {}
  ~PinnedBlock() override {
    if (device_->lost()) return;  // the context is unusable: the memory goes with the process
    try {
      Scope scope(*device_);  // cuMemFreeHost needs the context that allocated the block
      const CUresult status = device_->cu().cuMemFreeHost(data_);
      if (status != CUDA_SUCCESS) log::warn("cuMemFreeHost failed: {}", error_text(device_->cu(), status));
    } catch (const std::exception& e) {  // a destructor: report, never throw
      log::warn("freeing CUDA pinned memory failed: {}", e.what());
    }
  }
  char* data() const override { return data_; }
  std::size_t size() const override { return size_; }

 private:
  std::shared_ptr<Device> device_;  // keeps the context retained while the block lives
  char* data_;
  std::size_t size_;
};

class Registration final : public HostRegistration {
 public:
  Registration(std::shared_ptr<Device> device, char* data) : device_(std::move(device)), data_(data) {}
  ~Registration() override {
    if (device_->lost()) return;  // the context is unusable: the registration goes with the process
    try {
      Scope scope(*device_);
      const CUresult status = device_->cu().cuMemHostUnregister(data_);
      if (status != CUDA_SUCCESS) log::warn("cuMemHostUnregister failed: {}", error_text(device_->cu(), status));
    } catch (const std::exception& e) {  // a destructor: report, never throw
      log::warn("unregistering host memory from CUDA failed: {}", e.what());
    }
  }

 private:
  std::shared_ptr<Device> device_;
  char* data_;
};

}  // namespace

StreamBuffer::StreamBuffer(std::shared_ptr<Device> device, uint64_t bytes, CUstream stream)
    : device_(std::move(device)), stream_(stream) {
  if (bytes == 0) return;  // nothing to allocate: data stays 0
  Scope scope(*device_);
  fault::point(ABR_ERR_OUT_OF_MEMORY, "CUDA device buffer");
  device_->check(device_->cu().cuMemAllocAsync(&ptr_, bytes, stream), "cuMemAllocAsync");
}

StreamBuffer::~StreamBuffer() {
  if (!ptr_ || device_->lost()) return;
  try {
    Scope scope(*device_);
    const CUresult status = device_->cu().cuMemFreeAsync(ptr_, stream_);
    if (status != CUDA_SUCCESS) log::warn("cuMemFreeAsync failed: {}", error_text(device_->cu(), status));
  } catch (const std::exception& e) {  // a destructor: report, never throw
    log::warn("freeing CUDA memory failed: {}", e.what());
  }
}

DeviceAllocation::DeviceAllocation(std::shared_ptr<Device> device, uint64_t bytes) : device_(std::move(device)) {
  if (bytes == 0) return;
  Scope scope(*device_);
  fault::point(ABR_ERR_OUT_OF_MEMORY, "CUDA device buffer");
  device_->check(device_->cu().cuMemAlloc(&ptr_, bytes), "cuMemAlloc");
}

DeviceAllocation::~DeviceAllocation() {
  if (!ptr_ || device_->lost()) return;
  try {
    Scope scope(*device_);
    const CUresult status = device_->cu().cuMemFree(ptr_);
    if (status != CUDA_SUCCESS) log::warn("cuMemFree failed: {}", error_text(device_->cu(), status));
  } catch (const std::exception& e) {
    log::warn("freeing CUDA memory failed: {}", e.what());
  }
}

std::unique_ptr<StagingBlock> PinnedProvider::allocate(std::size_t bytes) {
  Scope scope(*device_);
  fault::point(ABR_ERR_OUT_OF_MEMORY, "CUDA pinned allocation");
  void* data = nullptr;
  device_->check(device_->cu().cuMemHostAlloc(&data, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
  try {
    return std::make_unique<PinnedBlock>(device_, static_cast<char*>(data), bytes);
  } catch (...) {
    device_->cu().cuMemFreeHost(data);
    throw;
  }
}

std::unique_ptr<HostRegistration> HostRegistrar::register_host(char* data, std::size_t bytes) {
  Scope scope(*device_);
  const CUresult status = device_->cu().cuMemHostRegister(data, bytes, CU_MEMHOSTREGISTER_PORTABLE);
  if (status == CUDA_SUCCESS) return std::make_unique<Registration>(device_, data);
  // Not fatal: CUDA still copies the memory, as pageable, at a fraction of the speed.
  log::warn("cuMemHostRegister of a {}-byte staging block failed ({}): CUDA copies it as pageable memory", bytes,
            error_text(device_->cu(), status));
  return nullptr;
}

}  // namespace abr::cuda

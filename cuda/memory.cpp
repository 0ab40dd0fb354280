#include "memory.hpp"

#include "../lib/fault.hpp"
#include "../lib/log.hpp"

namespace abr::cuda {
namespace {

class PinnedBlock final : public StagingBlock {
 public:
  PinnedBlock(const Driver& cu, char* data, std::size_t size) : cu_(cu), data_(data), size_(size) {}
  ~PinnedBlock() override {
    const CUresult status = cu_.cuMemFreeHost(data_);
    if (status != CUDA_SUCCESS) log::warn("cuMemFreeHost failed: {}", error_text(cu_, status));
  }
  char* data() const override { return data_; }
  std::size_t size() const override { return size_; }

 private:
  const Driver& cu_;
  char* data_;
  std::size_t size_;
};

}  // namespace

DeviceBuffer::DeviceBuffer(std::shared_ptr<Device> device, uint64_t bytes, CUstream stream, CUstream free_stream)
    : device_(std::move(device)), free_stream_(free_stream) {
  if (bytes == 0) return;  // nothing to allocate: data stays 0
  Scope scope(*device_);
  fault::point(ABR_ERR_OUT_OF_MEMORY, "CUDA device buffer");
  device_->check(device_->cu().cuMemAllocAsync(&ptr_, bytes, stream), "cuMemAllocAsync");
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_ || device_->lost()) return;
  try {
    Scope scope(*device_);
    const CUresult status = device_->cu().cuMemFreeAsync(ptr_, free_stream_ ? free_stream_ : device_->own_stream());
    if (status != CUDA_SUCCESS) log::warn("cuMemFreeAsync failed: {}", error_text(device_->cu(), status));
  } catch (const std::exception& e) {  // a destructor: report, never throw
    log::warn("freeing CUDA memory failed: {}", e.what());
  }
}

std::unique_ptr<StagingBlock> PinnedProvider::allocate(std::size_t bytes) {
  Scope scope(*device_);
  fault::point(ABR_ERR_OUT_OF_MEMORY, "CUDA pinned allocation");
  void* data = nullptr;
  device_->check(device_->cu().cuMemHostAlloc(&data, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
  try {
    return std::make_unique<PinnedBlock>(device_->cu(), static_cast<char*>(data), bytes);
  } catch (...) {
    device_->cu().cuMemFreeHost(data);
    throw;
  }
}

}  // namespace abr::cuda

#include "opencl/staging.hpp"

#include "lib/base/log.hpp"

namespace abr::opencl {
namespace {

class MappedBlock final : public StagingBlock {
 public:
  MappedBlock(std::shared_ptr<Context> context, std::size_t bytes)
      : context_(std::move(context)),
        mem_(context_->create_buffer(CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, bytes)),
        size_(bytes) {
    cl_int status = CL_SUCCESS;
    data_ = static_cast<char*>(context_->api().EnqueueMapBuffer(context_->queue(), mem_.get(), CL_TRUE,
                                                                CL_MAP_READ | CL_MAP_WRITE, 0, bytes ? bytes : 1, 0,
                                                                nullptr, nullptr, &status));
    check(status, "clEnqueueMapBuffer");
  }
  ~MappedBlock() override {
    const Api& cl = context_->api();
    cl_int status = cl.EnqueueUnmapMemObject(context_->queue(), mem_.get(), data_, 0, nullptr, nullptr);
    if (status == CL_SUCCESS) status = cl.Finish(context_->queue());
    if (status != CL_SUCCESS) log::warn("unmapping a staging block failed: {} ({})", error_name(status), status);
  }
  char* data() const override { return data_; }
  std::size_t size() const override { return size_; }

 private:
  std::shared_ptr<Context> context_;
  MemRef mem_;
  std::size_t size_;
  char* data_ = nullptr;
};

}  // namespace

std::unique_ptr<StagingBlock> MappedStagingProvider::allocate(std::size_t bytes) {
  return std::make_unique<MappedBlock>(context_, bytes);
}

}  // namespace abr::opencl

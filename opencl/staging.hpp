// Host staging memory from OpenCL: CL_MEM_ALLOC_HOST_PTR buffers kept mapped, the
// memory a driver moves to and from its device fastest. The pinned pool's
// OpenCL provider, whose blocks carry the chunks of staged transfers into a context.
#pragma once

#include <memory>

#include "lib/memory/staging.hpp"
#include "opencl/context.hpp"

namespace abr::opencl {

class MappedStagingProvider final : public StagingProvider {
 public:
  explicit MappedStagingProvider(std::shared_ptr<Context> context) : context_(std::move(context)) {}
  const char* name() const override { return "OpenCL CL_MEM_ALLOC_HOST_PTR"; }
  const void* domain() const override { return context_.get(); }
  std::unique_ptr<StagingBlock> allocate(std::size_t bytes) override;

 private:
  std::shared_ptr<Context> context_;
};

}  // namespace abr::opencl

// Staging blocks that one backend allocates and a second backend's driver
// page-locks too, for transfers between the two. NVIDIA's OpenCL moves only its
// own mapped memory at full speed and CUDA only memory it has page-locked, so a
// block must be both: through either alone CUDA <-> OpenCL runs at a fraction of
// the speed of an OpenCL mapped block registered with CUDA.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "lib/memory/staging.hpp"

namespace abr {

// Host memory page-locked by a second driver; unlocked when destroyed.
class HostRegistration {
 public:
  virtual ~HostRegistration() = default;
};

// A driver that page-locks host memory it did not allocate (CUDA's cuMemHostRegister).
class HostRegistrar {
 public:
  virtual ~HostRegistrar() = default;
  // [data, data + bytes) page-locked until the result is destroyed; nullptr when
  // the driver refused (the memory still works, at pageable speed, and a warning says so).
  virtual std::unique_ptr<HostRegistration> register_host(char* data, std::size_t bytes) = 0;
};

// `blocks`' memory, each block also registered with `registrar`. `domain` keys
// these blocks in the pool apart from `blocks`' own unregistered ones.
class SharedStagingProvider final : public StagingProvider {
 public:
  SharedStagingProvider(StagingProvider& blocks, HostRegistrar& registrar, const void* domain)
      : blocks_(blocks), registrar_(registrar), domain_(domain), name_(std::string(blocks.name()) + ", registered") {}
  const char* name() const override { return name_.c_str(); }
  const void* domain() const override { return domain_; }
  std::unique_ptr<StagingBlock> allocate(std::size_t bytes) override;

 private:
  StagingProvider& blocks_;
  HostRegistrar& registrar_;
  const void* domain_;
  std::string name_;
};

}  // namespace abr

// Host memory that a device reaches at full speed (page-locked or device-mapped):
// what staged transfers and the pinned pool are made of. Each backend provides it.
#pragma once

#include <cstddef>
#include <memory>

namespace abr {

class StagingBlock {
 public:
  virtual ~StagingBlock() = default;
  virtual char* data() const = 0;
  virtual std::size_t size() const = 0;
};

class StagingProvider {
 public:
  virtual ~StagingProvider() = default;
  virtual const char* name() const = 0;
  // Blocks of providers with the same domain (a device context) are interchangeable.
  virtual const void* domain() const = 0;
  // Throws ABR_ERR_OUT_OF_MEMORY (or the backend's error) when it cannot.
  virtual std::unique_ptr<StagingBlock> allocate(std::size_t bytes) = 0;
};

// What gives the pool's blocks back only later: released, they wait for device work
// queued before their release (CUDA's reclaimer, for deleted cuda_host tensors). At
// its limit the pool waits for them before it refuses, whichever provider asks
// (PinnedPool::add_returning).
class ReturningBlocks {
 public:
  virtual ~ReturningBlocks() = default;
  // Whether any of the pool's blocks are on their way back now.
  virtual bool returning() noexcept = 0;
  // Waits until they are back.
  virtual void wait_for_returning() noexcept = 0;
};

}  // namespace abr

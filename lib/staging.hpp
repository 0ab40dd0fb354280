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
  // Waits for blocks lent out and released, but still on their way back to the pool
  // (after the device work queued before their release): the pool asks at its limit
  // before it refuses. Nothing to wait for unless a provider lends blocks so.
  virtual void wait_for_returning() noexcept {}
};

}  // namespace abr

// Host memory the runtime allocates for a new tensor or a temporary.
#pragma once

#include <cstddef>

#include "lib/storage.hpp"

namespace abr {

// Host memory from the runtime, aligned to 256 bytes as DLPack recommends; from
// kHugePageThreshold up, to 2 MiB and backed by huge pages where the kernel can.
class HostBuffer final : public Storage {
 public:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kHugePageThreshold = std::size_t{4} << 20;
  explicit HostBuffer(std::size_t bytes);  // throws ABR_ERR_OUT_OF_MEMORY
  ~HostBuffer() override;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  char* data() const { return data_; }

 private:
  void* allocation_ = nullptr;  // what malloc returned; data_ is it rounded up to the alignment
  char* data_ = nullptr;
};

}  // namespace abr

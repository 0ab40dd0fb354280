// Host memory the runtime allocates for a new tensor or a temporary.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/tensor/storage.hpp"

namespace abr {

// Host memory from the runtime, aligned to 256 bytes as DLPack recommends; from
// kHugePageThreshold up, to 2 MiB and backed by huge pages where the kernel can.
// Buffers up to kKeptMax go back to a small process-wide cache when freed, for the
// next buffer of their size (see host_buffer.cpp).
class HostBuffer final : public Storage {
 public:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kHugePageThreshold = std::size_t{4} << 20;
  static constexpr std::size_t kKeptMax = std::size_t{8} << 10;
  explicit HostBuffer(std::size_t bytes);  // throws ABR_ERR_OUT_OF_MEMORY
  ~HostBuffer() override;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  char* data() const { return data_; }

  // Frees the small buffers kept for reuse (abr_pool_trim); returns their bytes.
  static uint64_t trim_kept();
  // Whether small buffers are kept at all: not under AddressSanitizer, nor with
  // ARRAYBRIDGE_KEEP_HOST_BUFFERS=0 (memory checkers must see every free).
  static bool keeps_small_buffers();

 private:
  void* allocation_ = nullptr;  // what malloc returned; data_ is it rounded up to the alignment
  char* data_ = nullptr;
  std::size_t rounded_ = 0;  // the usable bytes from data_: a kept buffer's size class
};

}  // namespace abr

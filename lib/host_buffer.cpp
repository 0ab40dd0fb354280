#include "lib/host_buffer.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

#include "lib/error.hpp"
#include "lib/fault.hpp"

namespace abr {

HostBuffer::HostBuffer(std::size_t bytes) {
  // Large buffers are aligned to 2 MiB and asked to be backed by huge pages where the
  // kernel offers them (transparent huge pages): a new buffer's first touch then
  // takes one fault per 2 MiB instead of per 4 KiB, which bounds copies into new
  // host memory (8 GB/s into a new 1 GiB array on an H100 machine, 45 into an old one).
  const std::size_t alignment = bytes >= kHugePageThreshold ? kHugePage : 256;
  const std::size_t rounded = ((bytes ? bytes : 1) + alignment - 1) / alignment * alignment;  // never NULL
  fault::point(ABR_ERR_OUT_OF_MEMORY, "host allocation");
  // malloc and round up by hand: glibc's aligned_alloc gives a freed buffer's pages
  // back and faults them in again on the next call (110 faults per new 4 MiB tensor,
  // 2.3x malloc + memcpy), where malloc keeps them for the next buffer of its size.
  if (rounded > SIZE_MAX - alignment || !(allocation_ = std::malloc(rounded + alignment - 1)))
    fail(ABR_ERR_OUT_OF_MEMORY, "cannot allocate {} bytes of host memory", bytes);
  data_ =
      reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(allocation_) + alignment - 1) & ~uintptr_t{alignment - 1});
#ifdef MADV_HUGEPAGE
  if (alignment == kHugePage) madvise(data_, rounded, MADV_HUGEPAGE);  // a hint: ignored where unsupported
#endif
}

HostBuffer::~HostBuffer() { std::free(allocation_); }

}  // namespace abr

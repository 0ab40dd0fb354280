#include "lib/memory/host_buffer.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "lib/base/error.hpp"
#include "lib/base/settings.hpp"
#include "lib/base/fault.hpp"

namespace abr {
namespace {

constexpr std::size_t kSmallAlignment = 256;

// Small buffers kept for the next one of their size: a 256-byte aligned buffer needs
// malloc(bytes + 255), which from 1 KiB of data misses glibc's per-thread cache and
// takes its slow path in malloc and free, a real share of a small copy's cost.
// Up to kKeptPerClass buffers per 256-byte class up to kKeptMax (at most about
// 1 MiB in all). One flag guards it, and a thread that finds it taken goes to malloc
// (or a trim frees nothing) instead of waiting: nothing blocks, and a fork child
// whose parent held the flag only loses the cache. Memory checkers must see every
// free to catch a use after it: under AddressSanitizer nothing is kept, and
// ARRAYBRIDGE_KEEP_HOST_BUFFERS=0 (valgrind's runs) turns the cache off.
class KeptBuffers {
 public:
  static constexpr std::size_t kClasses = HostBuffer::kKeptMax / kSmallAlignment;
  static constexpr unsigned kKeptPerClass = 8;

  // A kept allocation of `rounded` usable bytes, or nullptr.
  void* take(std::size_t rounded) {
    if (busy_.test_and_set(std::memory_order_acquire)) return nullptr;
    Class& c = classes_[rounded / kSmallAlignment - 1];
    void* kept = c.count ? c.blocks[--c.count] : nullptr;
    busy_.clear(std::memory_order_release);
    return kept;
  }
  // Keeps the allocation, or says no (the caller frees it).
  bool keep(void* allocation, std::size_t rounded) {
    if (busy_.test_and_set(std::memory_order_acquire)) return false;
    Class& c = classes_[rounded / kSmallAlignment - 1];
    const bool kept = c.count < kKeptPerClass;
    if (kept) c.blocks[c.count++] = allocation;
    busy_.clear(std::memory_order_release);
    return kept;
  }
  uint64_t free_all() {
    if (busy_.test_and_set(std::memory_order_acquire)) return 0;
    uint64_t released = 0;
    for (std::size_t i = 0; i < kClasses; ++i) {
      for (unsigned j = 0; j < classes_[i].count; ++j) std::free(classes_[i].blocks[j]);
      released += uint64_t{classes_[i].count} * (i + 1) * kSmallAlignment;
      classes_[i].count = 0;
    }
    busy_.clear(std::memory_order_release);
    return released;
  }

 private:
  struct Class {
    void* blocks[kKeptPerClass] = {};
    unsigned count = 0;
  };
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  Class classes_[kClasses] = {};
};

#if defined(__SANITIZE_ADDRESS__)  // GCC
#define ABR_ADDRESS_SANITIZER 1
#elif defined(__has_feature)  // Clang (the fuzzers)
#if __has_feature(address_sanitizer)
#define ABR_ADDRESS_SANITIZER 1
#endif
#endif
#ifdef ABR_ADDRESS_SANITIZER
constexpr bool kCanKeep = false;
#else
constexpr bool kCanKeep = true;
#endif

bool keeping() {
  static const bool keep = [] { return kCanKeep && settings::keep_host_buffers(); }();
  return keep;
}

// Initialised before any code runs and trivially destructible, so a tensor deleted
// during the process's static destruction still finds it. Not on the heap: a leak
// checker that runs after the library is unmapped would call that block lost.
KeptBuffers kept_buffers;

}  // namespace

HostBuffer::HostBuffer(std::size_t bytes) {
  // Large buffers are aligned to 2 MiB and asked to be backed by huge pages where the
  // kernel offers them (transparent huge pages): a new buffer's first touch then
  // takes one fault per 2 MiB instead of per 4 KiB: the faults, not the copy, bound
  // copies into new host memory.
  const std::size_t alignment = bytes >= kHugePageThreshold ? kHugePage : kSmallAlignment;
  const std::size_t rounded = ((bytes ? bytes : 1) + alignment - 1) / alignment * alignment;  // never NULL
  fault::point(ABR_ERR_OUT_OF_MEMORY, "host allocation");
  if (rounded <= kKeptMax && keeping()) allocation_ = kept_buffers.take(rounded);
  // malloc and round up by hand: glibc's aligned_alloc gives a freed buffer's pages
  // back and faults them in again on the next call (a fault per page of every new
  // tensor, costing more than the copy), where malloc keeps them for the next buffer of its size.
  if (!allocation_ && (rounded > SIZE_MAX - alignment || !(allocation_ = std::malloc(rounded + alignment - 1))))
    fail(ABR_ERR_OUT_OF_MEMORY, "cannot allocate {} bytes of host memory", bytes);
  rounded_ = rounded;
  data_ =
      reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(allocation_) + alignment - 1) & ~uintptr_t{alignment - 1});
#ifdef MADV_HUGEPAGE
  if (alignment == kHugePage) madvise(data_, rounded, MADV_HUGEPAGE);  // a hint: ignored where unsupported
#endif
}

HostBuffer::~HostBuffer() {
  if (rounded_ <= kKeptMax && keeping() && kept_buffers.keep(allocation_, rounded_)) return;
  std::free(allocation_);
}

uint64_t HostBuffer::trim_kept() { return kept_buffers.free_all(); }

bool HostBuffer::keeps_small_buffers() { return keeping(); }

}  // namespace abr

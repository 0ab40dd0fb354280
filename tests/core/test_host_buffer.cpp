// The runtime's own host memory (new CPU tensors): aligned for DLPack, and for
// huge pages when large.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "lib/memory/host_buffer.hpp"

TEST_CASE("HostBuffer: small buffers 256-byte aligned, large ones 2 MiB aligned (for huge pages), all writable") {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{100}, abr::HostBuffer::kHugePageThreshold - 1,
                            abr::HostBuffer::kHugePageThreshold, (std::size_t{9} << 20) + 5}) {
    CAPTURE(bytes);
    abr::HostBuffer buffer(bytes);
    const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
    CHECK(address % (bytes >= abr::HostBuffer::kHugePageThreshold ? abr::HostBuffer::kHugePage : 256) == 0);
    std::memset(buffer.data(), 0x5a, bytes);
    if (bytes) CHECK(static_cast<unsigned char>(buffer.data()[bytes - 1]) == 0x5a);
  }
}

TEST_CASE("HostBuffer: a small buffer freed is the next one of its size class, eight kept per class at most") {
  using abr::HostBuffer;
  if (!HostBuffer::keeps_small_buffers()) {
    MESSAGE("skipped: every buffer is freed here (AddressSanitizer, or ARRAYBRIDGE_KEEP_HOST_BUFFERS=0)");
    return;
  }
  HostBuffer::trim_kept();  // what earlier tests left kept
  char* first = nullptr;
  {
    HostBuffer buffer(1000);  // the 1 KiB class
    first = buffer.data();
    std::memset(first, 1, 1000);
  }
  {
    HostBuffer again(1024);  // the same class: the kept buffer
    CHECK(again.data() == first);
    HostBuffer other(1000);  // while the first is lent: another one
    CHECK(other.data() != first);
    HostBuffer larger(1025);  // the next class (1280 bytes) keeps nothing yet: a new one
    CHECK(larger.data() != first);
  }
  CHECK(HostBuffer::trim_kept() == 2 * 1024 + 1280);
  CHECK(HostBuffer::trim_kept() == 0);
  {
    std::vector<std::unique_ptr<HostBuffer>> many;
    for (int i = 0; i < 10; ++i) many.push_back(std::make_unique<HostBuffer>(4096));
  }
  CHECK(HostBuffer::trim_kept() == 8 * 4096);  // the other two went back to malloc
  {
    HostBuffer large(HostBuffer::kKeptMax + 1);  // above the kept sizes: never kept
  }
  CHECK(HostBuffer::trim_kept() == 0);
}

// The runtime's own host memory (new CPU tensors): aligned for DLPack, and for
// huge pages when large.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "lib/host_buffer.hpp"

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

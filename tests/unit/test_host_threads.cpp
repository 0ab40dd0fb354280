// The host thread pool of staged transfers: every task runs once, jobs from
// several callers at once share the workers, and copies are exact at every size.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "../../lib/host_threads.hpp"

TEST_CASE("HostThreads runs every task exactly once, on up to the threads asked for") {
  abr::HostThreads pool(4);
  CHECK(pool.size() == 4);
  for (unsigned threads : {1u, 2u, 4u, 9u}) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1000}}) {
      std::vector<std::atomic<int>> runs(n);
      pool.parallel_for(n, threads, [&](std::size_t i) { runs[i].fetch_add(1); });
      for (std::size_t i = 0; i < n; ++i) CHECK(runs[i].load() == 1);
    }
  }
}

TEST_CASE("HostThreads serves several callers at once without losing or repeating a task") {
  abr::HostThreads pool(3);
  std::vector<std::thread> callers;
  std::atomic<long> total{0};
  for (int c = 0; c < 6; ++c)
    callers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        std::atomic<long> sum{0};
        pool.parallel_for(64, 3, [&](std::size_t i) { sum.fetch_add(static_cast<long>(i)); });
        CHECK(sum.load() == 64 * 63 / 2);
        total.fetch_add(sum.load());
      }
    });
  for (std::thread& t : callers) t.join();
  CHECK(total.load() == 6L * 200 * (64 * 63 / 2));
}

TEST_CASE("HostThreads::copy is memcpy at every size, split or not") {
  abr::HostThreads pool(4);
  // 2 MiB + 3 on 4 threads: the pieces' floor is a whole number of pages and 3 bytes
  // remain (on an H100, 16 threads left the last 12 bytes of a 20 MiB + 12 chunk out).
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{512} << 10,
                            (std::size_t{2} << 20) + 3, (std::size_t{3} << 20) + 7, std::size_t{9} << 20}) {
    CAPTURE(bytes);
    std::vector<unsigned char> src(bytes), dst(bytes, 0xee);
    for (std::size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
    pool.copy(dst.data(), src.data(), bytes, 4);
    CHECK(dst == src);
  }
}

TEST_CASE("staging_shape: chunks grow with the threads within 8 to 64 MiB, and never pass the bytes") {
  const abr::StagingShape big = abr::staging_shape(std::uint64_t{1} << 30);
  CHECK(big.threads >= 1);
  CHECK(big.chunk >= (std::size_t{8} << 20));
  CHECK(big.chunk <= (std::size_t{64} << 20));
  CHECK(abr::staging_shape(1000).chunk == 1000);
  CHECK(&abr::host_threads() == &abr::host_threads());
}

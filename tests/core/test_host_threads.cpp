// The host thread pool of staged transfers: every task runs once, jobs from
// several callers at once share the workers, and copies are exact at every size.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lib/host/host_copy.hpp"
#include "lib/host/host_threads.hpp"
#include "lib/plan/staging_shape.hpp"
#include "lib/tensor/layout.hpp"

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

TEST_CASE("HostThreads: a task that throws ends only itself, and the caller gets its exception") {
  abr::HostThreads pool(4);
  // The first task a worker runs throws (a worker's exception used to end the process);
  // tasks take 1 ms so that workers join in.
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> thrown_once{false};
  std::vector<std::atomic<int>> runs(64);
  std::string caught;
  try {
    pool.parallel_for(runs.size(), 4, [&](std::size_t i) {
      runs[i].fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (std::this_thread::get_id() != caller && !thrown_once.exchange(true))
        throw std::runtime_error("task " + std::to_string(i));
    });
  } catch (const std::runtime_error& e) {
    caught = e.what();
  }
  REQUIRE(thrown_once.load());  // a worker ran a task
  CHECK(caught.rfind("task ", 0) == 0);
  for (std::size_t i = 0; i < runs.size(); ++i) CHECK(runs[i].load() == 1);  // the others still ran
  // In line (one thread) the exception simply leaves at the task that threw.
  CHECK_THROWS_AS(pool.parallel_for(3, 1, [](std::size_t) { throw std::runtime_error("in line"); }),
                  std::runtime_error);
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

TEST_CASE(
    "copy_layout_in_parallel writes what the one-thread engine writes: packs, scatters, casts, negative strides") {
  // Views large enough to be cut (>= 512 KiB per box), each walked once on one
  // thread and once on up to 4: the destinations must be identical byte for byte.
  const int64_t rows = 1000, cols = 700;
  std::vector<float> source(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<float>(i % 100003) * 0.5f - 7.0f;
  struct View {
    const char* name;
    std::vector<int64_t> shape, strides;
    int64_t first;  // element index of the first element
  };
  const View views[] = {
      {"contiguous", {rows, cols}, {cols, 1}, 0},
      {"transposed", {cols, rows}, {1, cols}, 0},
      {"negative rows", {rows, cols}, {-cols, 1}, (rows - 1) * cols},
      {"every other column, reversed", {rows, cols / 2}, {cols, -2}, cols - 1},
      {"one long row", {1, rows * cols}, {rows * cols, 1}, 0},
  };
  const DLDataType f32{kDLFloat, 32, 1}, f64{kDLFloat, 64, 1}, i16{kDLInt, 16, 1};
  for (const View& v : views) {
    for (DLDataType to : {f32, f64, i16}) {
      INFO(std::string(v.name) << " to " << int(to.code) << "/" << int(to.bits));
      DLTensor t{};
      t.data = source.data() + v.first;
      t.device = {kDLCPU, 0};
      t.ndim = static_cast<int32_t>(v.shape.size());
      t.dtype = f32;
      t.shape = const_cast<int64_t*>(v.shape.data());
      t.strides = const_cast<int64_t*>(v.strides.data());
      const abr::Layout layout = abr::validate_tensor(t, abr::Role::Source, "source");
      // A destination in column-major order, so every walk scatters.
      const int64_t n0 = v.shape[0], n1 = v.shape[1];
      const int64_t dst_strides[2] = {1, n0};
      const std::size_t bytes = static_cast<std::size_t>(n0 * n1) * (to.bits / 8);
      std::vector<char> one(bytes, 0x5a), many(bytes, 0x5a);
      abr::host_copy_layout(layout, static_cast<const char*>(t.data), to, one.data(), dst_strides);
      abr::copy_layout_in_parallel(layout, static_cast<const char*>(t.data), to, many.data(), dst_strides, 4);
      CHECK(one == many);
    }
  }
}

// What the H100 found that CI could not see (shared/gpu/h100-2026-11-22): memory
// freed while a consumer's stream still reads it, pinned blocks outliving their
// context, and one thread's staging block reused under another thread's DMA.
// Against the fake driver each fails today's mistakes; on a GPU the same cases
// check values (ARRAYBRIDGE_CUDA_LIBRARY=libcuda.so.1).
#include <sys/resource.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/cuda/cuda_helpers.hpp"
#include "tests/support/process.hpp"

using namespace test;

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA an exported buffer deleted while the consumer's own stream still reads it: values intact") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  const std::size_t n = 1 << 16;
  std::vector<int32_t> data = iota(n, 11);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  DLManagedTensorVersioned* exported = move_to(rt, &source.managed, cuda0);

  // The consumer: its own stream, its own memory, a copy out of ours queued behind a lag.
  RawDriver consumer;
  CUstream stream = consumer.stream();
  CUdeviceptr mine = 0;
  REQUIRE(consumer.alloc(&mine, n * 4) == CUDA_SUCCESS);
  if (consumer.fake) consumer.fake.control("delay_us", 20000);
  REQUIRE(consumer.device_copy(mine, reinterpret_cast<CUdeviceptr>(exported->dl_tensor.data), n * 4, stream) ==
          CUDA_SUCCESS);
  exported->deleter(exported);  // DLPack allows it now: the consumer is done *submitting* work
  REQUIRE(consumer.stream_sync(stream) == CUDA_SUCCESS);  // fails if the copy read freed memory (sticky)
  if (consumer.fake) consumer.fake.control("delay_us", 0);

  std::vector<int32_t> seen(n);
  auto download = consumer.fake.driver<decltype(cuMemcpyDtoHAsync)>(ABR_TEST_CUDA_SYMBOL(cuMemcpyDtoHAsync));
  REQUIRE(download(seen.data(), mine, n * 4, stream) == CUDA_SUCCESS);
  REQUIRE(consumer.stream_sync(stream) == CUDA_SUCCESS);
  CHECK(seen == data);
  CHECK(consumer.free(mine) == CUDA_SUCCESS);
  consumer.stream_destroy(stream);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA runtime teardown gives back every pinned block while its context lives; no warning at exit") {
  Fake fake;
  CollectedWarnings warnings;
  const std::size_t n = (std::size_t{20} << 20) / 4 + 3;  // three staging chunks
  std::vector<int32_t> data = iota(n, -9);
  std::vector<double> small{1.5, 2.5, 3.5};
  Owned pinned(nullptr);
  {
    Runtime rt;
    if (!cuda_devices(rt)) return;
    Managed source(data.data(), i32, {static_cast<int64_t>(n)});
    Owned device(move_to(rt, &source.managed, cuda0));  // staged: the pool now caches pinned blocks
    Owned home(move_to(rt, take(device), cpu));
    CHECK(std::memcmp(home->data, data.data(), n * 4) == 0);
    Managed tiny(small.data(), f64, {3});
    pinned.t = move_to(rt, &tiny.managed, cuda_host);  // a block lent to a tensor that outlives the runtime
    const abr_pool_stats stats = pool_stats(rt);
    CHECK(stats.bytes_cached > 0);
  }
  if (fake) CHECK(fake.stat("pinned_allocations") == 1);  // only the live tensor's block
  CHECK(std::memcmp(pinned->data, small.data(), sizeof(double) * 3) == 0);
  pinned.reset();
  if (fake) {
    CHECK(fake.stat("pinned_allocations") == 0);
    CHECK(fake.stat("retained:0") == 0);  // and the context was released after the last block
  }
  CHECK(warnings.count() == 0);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA 8 threads after a large staged transfer: every thread gets its own values back") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  {  // as on the H100: a large pageable round trip, deleted, leaves cached blocks in the pool
    const std::size_t n = (std::size_t{24} << 20) / 4;
    std::vector<int32_t> big = iota(n);
    Managed source(big.data(), i32, {static_cast<int64_t>(n)});
    Owned device(move_to(rt, &source.managed, cuda0));
    Owned home(move_to(rt, take(device), cpu));
  }
  if (fake) fake.control("delay_us", 300);  // every DMA lags the host: a block reused too early shows
  constexpr int kThreads = 8, kRounds = 6;
  std::atomic<int> wrong{0}, failed{0}, ready{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      // A transposed 65x64 int64 array holding the thread's own value: packed by the host engine into a pinned block.
      std::vector<int64_t> values(65 * 64, (k + 1) * 1000);
      ++ready;
      while (ready < kThreads) std::this_thread::yield();
      for (int round = 0; round < kRounds; ++round) {
        Managed source(values.data(), dt(kDLInt, 64), {64, 65}, {1, 64});
        DLManagedTensorVersioned* device = nullptr;
        if (abr_to_device(rt, &source.managed, cuda0, nullptr, nullptr, &device) != ABR_OK) {
          ++failed;
          return;
        }
        DLManagedTensorVersioned* home = nullptr;
        if (abr_to_device(rt, device, cpu, nullptr, nullptr, &home) != ABR_OK) {
          device->deleter(device);
          ++failed;
          return;
        }
        const auto* got = static_cast<const int64_t*>(home->dl_tensor.data);
        for (int i = 0; i < 65 * 64; ++i)
          if (got[i] != (k + 1) * 1000) {
            ++wrong;
            break;
          }
        home->deleter(home);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (fake) fake.control("delay_us", 0);
  CHECK(failed.load() == 0);
  CHECK(wrong.load() == 0);
}

namespace {

// Lowers the soft descriptor limit while it lives.
struct DescriptorLimit {
  rlimit before{};
  explicit DescriptorLimit(rlim_t soft) {
    REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
    rlimit lowered = before;
    lowered.rlim_cur = soft;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  }
  ~DescriptorLimit() { setrlimit(RLIMIT_NOFILE, &before); }
};

}  // namespace

// Device memory is no descriptor of the process (the fake once made a memfd per
// allocation): a program holds more buffers than its descriptor limit.
TEST_CASE_FIXTURE(NoDriverFindings, "CUDA more live buffers than the descriptor limit allows: every value intact") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  const long long allocations_before = fake ? fake.stat("device_allocations") : 0;
  const int limit = std::max(256, open_descriptors() + 32);  // room for what the runtime opens itself
  const int buffers = limit + 100;
  std::vector<std::unique_ptr<Owned>> held;
  {
    DescriptorLimit lowered(static_cast<rlim_t>(limit));
    for (int i = 0; i < buffers; ++i) {
      std::vector<int32_t> data = iota(256, i * 1000);
      Managed source(data.data(), i32, {256});
      DLManagedTensorVersioned* device = nullptr;
      abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
      options.copy = ABR_COPY_ALWAYS;
      const abr_status status = abr_to_device(rt, &source.managed, cuda0, &options, nullptr, &device);
      const std::string error = status == ABR_OK ? "" : abr_last_error();
      INFO("buffer " << i << " of " << buffers << " under a limit of " << limit << ": " << error);
      REQUIRE(status == ABR_OK);
      held.push_back(std::make_unique<Owned>(device));
    }
    if (fake) CHECK(fake.stat("device_allocations") - allocations_before >= buffers);
    for (int i = 0; i < buffers; ++i) {
      const std::vector<int32_t> back = read_back(rt, **held[static_cast<std::size_t>(i)]);
      REQUIRE(back == iota(256, i * 1000));
    }
    held.clear();
    REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);  // the device cache kept them for reuse: back to the driver
  }
  if (fake) CHECK(fake.stat("device_allocations") == allocations_before);
}

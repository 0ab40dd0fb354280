// The transfer pipeline (lib/run/pipeline.hpp) with sides that behave like DMA
// queues: every move runs later, on a worker thread, in order, and its event
// completes only then. A block reused before its chunk has left it shows as
// wrong data; a failure at any read or write must leave nothing running, both
// sides settled, every block back in the pool, and the error with the caller.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/run/host_sides.hpp"
#include "lib/run/pipeline.hpp"

namespace {

struct HeapProvider final : abr::StagingProvider {
  struct Block final : abr::StagingBlock {
    std::vector<char> bytes;
    explicit Block(std::size_t n) : bytes(n) {}
    char* data() const override { return const_cast<char*>(bytes.data()); }
    std::size_t size() const override { return bytes.size(); }
  };
  int tag = 0;
  const char* name() const override { return "heap"; }
  const void* domain() const override { return &tag; }
  std::unique_ptr<abr::StagingBlock> allocate(std::size_t n) override { return std::make_unique<Block>(n); }
};

// An in-order queue on its own thread, each task after `lag`.
class LaggingQueue {
 public:
  explicit LaggingQueue(std::chrono::microseconds lag) : lag_(lag), worker_([this] { run(); }) {}
  ~LaggingQueue() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }
  // Returns the task's sequence number; complete(n) says whether it has run.
  uint64_t push(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    changed_.notify_all();
    return ++pushed_;
  }
  bool complete(uint64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_ >= n;
  }
  void wait(uint64_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return done_ >= n; });
  }
  void drain() { wait(pushed()); }
  uint64_t pushed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return pushed_;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      std::this_thread::sleep_for(lag_);
      task();
      lock.lock();
      ++done_;
      changed_.notify_all();
    }
  }

  std::chrono::microseconds lag_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  uint64_t pushed_ = 0, done_ = 0;
  bool stopping_ = false;
  std::thread worker_;  // last: starts after the rest is built
};

// Holds its queue, as a real event holds its context: the pool may keep it after the side is gone.
struct QueueEvent final : abr::Event {
  std::shared_ptr<LaggingQueue> queue;
  uint64_t n;
  QueueEvent(std::shared_ptr<LaggingQueue> q, uint64_t task) : queue(std::move(q)), n(task) {}
  bool complete() noexcept override { return queue->complete(n); }
  void wait() override { queue->wait(n); }
};

// Device memory behind a lagging queue. The `fail_at`-th read or write (1-based) throws.
class LaggingSide final : public abr::ChunkSide {
 public:
  LaggingSide(std::vector<char>& memory, std::chrono::microseconds lag)
      : memory_(memory), queue_(std::make_shared<LaggingQueue>(lag)) {}
  bool asynchronous() const override { return true; }
  std::unique_ptr<abr::Event> read(uint64_t offset, char* block, std::size_t n) override {
    maybe_fail();
    char* from = memory_.data() + offset;
    return std::make_unique<QueueEvent>(queue_, queue_->push([=] { std::memcpy(block, from, n); }));
  }
  std::unique_ptr<abr::Event> write(uint64_t offset, const char* block, std::size_t n) override {
    maybe_fail();
    char* to = memory_.data() + offset;
    return std::make_unique<QueueEvent>(queue_, queue_->push([=] { std::memcpy(to, block, n); }));
  }
  void settle() noexcept override {
    ++settled;
    queue_->drain();
  }
  void drain() { queue_->drain(); }
  bool idle() { return queue_->complete(queue_->pushed()); }

  int calls = 0, fail_at = 0, settled = 0;

 private:
  void maybe_fail() {
    if (++calls == fail_at) abr::fail(ABR_ERR_BACKEND, "lagging side: move {} fails", calls);
  }
  std::vector<char>& memory_;
  std::shared_ptr<LaggingQueue> queue_;
};

std::vector<char> pattern(std::size_t n, int seed) {
  std::vector<char> bytes(n);
  uint64_t x = static_cast<uint64_t>(seed) + 1;
  for (std::size_t i = 0; i < n; ++i) {  // xorshift: no two chunks alike
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    bytes[i] = static_cast<char>(x);
  }
  return bytes;
}

constexpr std::size_t kChunk = 64 << 10;
const abr::StagingShape kShape{kChunk, 2};
const std::size_t kSizes[] = {1, kChunk - 1, kChunk, 3 * kChunk, 7 * kChunk + 4093};

}  // namespace

TEST_CASE("the pipeline moves every byte between any two kinds of side, blocks reused only once free") {
  HeapProvider provider;
  auto pool = abr::PinnedPool::create();
  for (std::size_t bytes : kSizes) {
    CAPTURE(bytes);
    const std::vector<char> data = pattern(bytes, static_cast<int>(bytes));
    const uint64_t blocks_before = pool->stats().misses;
    SUBCASE("host -> lagging device") {
      std::vector<char> device(bytes);
      abr::HostMemorySide from(data.data(), 2);
      LaggingSide to(device, std::chrono::microseconds(300));
      abr::run_pipeline(from, to, bytes, kShape, *pool, provider);
      to.drain();
      CHECK(device == data);
    }
    SUBCASE("lagging device -> host") {
      std::vector<char> device = data, host(bytes);
      LaggingSide from(device, std::chrono::microseconds(300));
      abr::HostMemorySide to(host.data(), 2);
      abr::run_pipeline(from, to, bytes, kShape, *pool, provider);
      CHECK(host == data);  // a synchronous destination: complete on return
    }
    SUBCASE("lagging device -> lagging device") {
      std::vector<char> a = data, b(bytes);
      LaggingSide from(a, std::chrono::microseconds(200));
      LaggingSide to(b, std::chrono::microseconds(500));  // the slower side: blocks wait for it
      abr::run_pipeline(from, to, bytes, kShape, *pool, provider);
      to.drain();
      CHECK(b == data);
    }
    CHECK(pool->stats().misses - blocks_before <= abr::kBlocksInFlight);  // three blocks at most, each reused
    CHECK(pool->stats().bytes_in_use == 0);
  }
}

TEST_CASE("an asynchronous destination's last writes keep their blocks from reuse until they have run") {
  HeapProvider provider;
  auto pool = abr::PinnedPool::create();
  const std::size_t bytes = 2 * kChunk;
  const std::vector<char> first = pattern(bytes, 1), second = pattern(bytes, 2);
  std::vector<char> device_a(bytes), device_b(bytes);
  LaggingSide to_a(device_a, std::chrono::milliseconds(20)), to_b(device_b, std::chrono::microseconds(0));
  abr::HostMemorySide from_first(first.data(), 1), from_second(second.data(), 1);
  abr::run_pipeline(from_first, to_a, bytes, kShape, *pool, provider);
  CHECK(pool->stats().bytes_waiting > 0);                                // returned, but still being written from
  abr::run_pipeline(from_second, to_b, bytes, kShape, *pool, provider);  // must not refill those blocks
  to_a.drain();
  to_b.drain();
  CHECK(device_a == first);
  CHECK(device_b == second);
}

TEST_CASE("a failure at any read or write of a multi-chunk pipeline: error out, both sides settled, blocks back") {
  HeapProvider provider;
  auto pool = abr::PinnedPool::create();
  const std::size_t bytes = 5 * kChunk + 17;  // six chunks
  const std::vector<char> data = pattern(bytes, 7);
  for (bool failing_source : {true, false}) {
    for (int fail_at = 1; fail_at <= 6; ++fail_at) {
      CAPTURE(failing_source);
      CAPTURE(fail_at);
      std::vector<char> a = data, b(bytes);
      LaggingSide from(a, std::chrono::microseconds(200)), to(b, std::chrono::microseconds(400));
      (failing_source ? from : to).fail_at = fail_at;
      bool failed = false;
      try {
        abr::run_pipeline(from, to, bytes, kShape, *pool, provider);
      } catch (const abr::Error& e) {
        failed = true;
        CHECK(e.status() == ABR_ERR_BACKEND);
        CHECK(std::string(e.what()).find("lagging side") != std::string::npos);
      }
      CHECK(failed);
      CHECK(from.settled == 1);
      CHECK(to.settled == 1);
      CHECK(from.idle());  // nothing still runs that could touch a block
      CHECK(to.idle());
      const abr::PoolStats stats = pool->stats();
      CHECK(stats.bytes_in_use == 0);
      CHECK(stats.bytes_waiting == 0);
    }
  }
}

TEST_CASE("an empty transfer touches neither side nor the pool") {
  HeapProvider provider;
  auto pool = abr::PinnedPool::create();
  std::vector<char> memory(1);
  LaggingSide from(memory, std::chrono::microseconds(0)), to(memory, std::chrono::microseconds(0));
  abr::run_pipeline(from, to, 0, kShape, *pool, provider);
  CHECK(from.calls + to.calls == 0);
  CHECK(pool->stats().blocks_pinned == 0);
}

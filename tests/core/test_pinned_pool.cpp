// The pinned pool: size classes, reuse gated by events, the limit, trim and
// statistics. A fake provider and fake events show the logic; OpenCL streams on
// PoCL show the same with real events; the C API shows it under a real transfer.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/memory/pinned_pool.hpp"
#include "opencl/queue_stream.hpp"
#include "opencl/staging.hpp"
#include "tests/support/opencl_helpers.hpp"

using namespace test;
using abr::PinnedBlock;
using abr::PinnedPool;

namespace {

// Host memory that counts what it hands out; fails on request.
struct FakeProvider final : abr::StagingProvider {
  struct Block final : abr::StagingBlock {
    FakeProvider& owner;
    std::vector<char> bytes;
    Block(FakeProvider& o, std::size_t n) : owner(o), bytes(n) { owner.live++; }
    ~Block() override { owner.live--; }
    char* data() const override { return const_cast<char*>(bytes.data()); }
    std::size_t size() const override { return bytes.size(); }
  };
  int domain_tag = 0;
  std::atomic<int> live{0}, allocations{0}, failures_left{0};
  const char* name() const override { return "fake"; }
  const void* domain() const override { return &domain_tag; }
  std::unique_ptr<abr::StagingBlock> allocate(std::size_t bytes) override {
    if (failures_left > 0) {
      failures_left--;
      abr::fail(ABR_ERR_OUT_OF_MEMORY, "fake provider: no memory for {} bytes", bytes);
    }
    allocations++;
    return std::make_unique<Block>(*this, bytes);
  }
};

// Blocks on their way back to the pool (a reclaimer): `on_wait` brings them back.
struct FakeReturning final : abr::ReturningBlocks {
  bool pending = false;
  int asked = 0, waits = 0;
  std::function<void()> on_wait;
  bool returning() noexcept override {
    ++asked;
    return pending;
  }
  void wait_for_returning() noexcept override {
    ++waits;
    if (on_wait) on_wait();
    pending = false;
  }
};

// A stream whose work completes when the test says so.
struct FakeStream final : abr::Stream {
  struct Marker final : abr::Event {
    std::shared_ptr<std::atomic<bool>> done;
    int* waits;
    bool complete() noexcept override { return *done; }
    void wait() override {
      ++*waits;
      *done = true;
    }
  };
  std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
  int waits = 0;
  DLDevice device() const override { return {kDLCPU, 0}; }
  void synchronize() override { *done = true; }
  void retain(std::unique_ptr<abr::Storage>) noexcept override {}
  void wait_for(abr::Stream&) override {}
  std::unique_ptr<abr::Event> record() override {
    auto marker = std::make_unique<Marker>();
    marker->done = done;
    marker->waits = &waits;
    return marker;
  }
};

}  // namespace

TEST_CASE("size classes are whole pages and waste at most an eighth beyond the request") {
  CHECK(PinnedPool::size_class(1) == 4096);
  CHECK(PinnedPool::size_class(4096) == 4096);
  CHECK(PinnedPool::size_class(4097) == 8192);
  CHECK(PinnedPool::size_class(1 << 20) == 1 << 20);
  CHECK(PinnedPool::size_class((1 << 20) + 1) == (1 << 20) + (1 << 17));
  const std::size_t big = static_cast<std::size_t>(20.4 * (1ull << 30));  // PyTorch pins 32 GiB for this
  CHECK(PinnedPool::size_class(big) == 22ull << 30);
  std::size_t previous = 0;
  for (std::size_t bytes = 1; bytes < (1ull << 34); bytes = bytes * 3 / 2 + 7) {
    const std::size_t size = PinnedPool::size_class(bytes);
    CHECK(size >= bytes);
    CHECK(size % 4096 == 0);
    CHECK(size >= previous);
    if (bytes > 32768) CHECK(size - bytes <= bytes / 8);
    previous = size;
  }
}

TEST_CASE("returned blocks are reused by size class and domain, with statistics to match") {
  FakeProvider a, b;
  {
    auto pool = PinnedPool::create(1ull << 30);
    char* first = nullptr;
    {
      PinnedBlock block = pool->acquire(a, 5000);
      CHECK(block.size() == 8192);
      first = block.data();
      abr::PoolStats s = pool->stats();
      CHECK(s.bytes_in_use == 8192);
      CHECK(s.bytes_pinned == 8192);
      CHECK(s.misses == 1);
    }
    abr::PoolStats s = pool->stats();
    CHECK(s.bytes_in_use == 0);
    CHECK(s.bytes_cached == 8192);
    {
      PinnedBlock again = pool->acquire(a, 7000);  // same class: the same memory
      CHECK(again.data() == first);
      PinnedBlock other_domain = pool->acquire(b, 7000);  // another context: never mixed
      CHECK(other_domain.data() != first);
      PinnedBlock other_class = pool->acquire(a, 100000);
      CHECK(other_class.size() == PinnedPool::size_class(100000));
    }
    s = pool->stats();
    CHECK(s.hits == 1);
    CHECK(s.misses == 3);
    CHECK(s.blocks_pinned == 3);
    CHECK(a.allocations == 2);
    CHECK(b.allocations == 1);
    CHECK(s.peak_bytes_pinned == s.bytes_pinned);
    CHECK(pool->trim() == 8192 + 8192 + PinnedPool::size_class(100000));
    CHECK(a.live == 0);
    CHECK(b.live == 0);
    s = pool->stats();
    CHECK(s.bytes_pinned == 0);
    CHECK(s.blocks_pinned == 0);
    CHECK(s.peak_bytes_pinned == 8192 + 8192 + PinnedPool::size_class(100000));
    PinnedBlock kept = pool->acquire(a, 10);
    CHECK(a.live == 1);
  }  // a block outliving nothing: the pool frees what it cached when it goes
  CHECK(a.live == 0);
}

TEST_CASE("a block a stream may still be reading is not given out again until its event completes") {
  FakeProvider provider;
  FakeStream stream;
  auto pool = PinnedPool::create(1ull << 30);
  char* first = nullptr;
  {
    PinnedBlock block = pool->acquire(provider, 1 << 20);
    first = block.data();
    block.used_by(stream);  // an async copy reads it
  }
  CHECK(pool->stats().bytes_waiting == 1 << 20);
  CHECK(pool->trim() == 0);  // trim never frees memory in flight
  {
    PinnedBlock second = pool->acquire(provider, 1 << 20);
    CHECK(second.data() != first);  // a fresh block, not the one in flight
  }
  *stream.done = true;
  CHECK(pool->stats().bytes_waiting == 0);
  PinnedBlock third = pool->acquire(provider, 1 << 20);
  PinnedBlock fourth = pool->acquire(provider, 1 << 20);
  CHECK((third.data() == first || fourth.data() == first));
  CHECK(pool->stats().hits == 2);
  CHECK(provider.allocations == 2);
}

TEST_CASE("destroying the pool waits for the streams still using cached blocks") {
  FakeProvider provider;
  FakeStream stream;
  {
    auto pool = PinnedPool::create(1ull << 30);
    PinnedBlock block = pool->acquire(provider, 4096);
    block.used_by(stream);
  }
  CHECK(stream.waits == 1);
  CHECK(provider.live == 0);
}

TEST_CASE("the limit refuses new blocks with a clear error, frees idle ones first, and the pool keeps working") {
  FakeProvider provider;
  auto pool = PinnedPool::create(3 << 20);
  {
    PinnedBlock a = pool->acquire(provider, 1 << 20), b = pool->acquire(provider, 1 << 20);
    PinnedBlock c = pool->acquire(provider, 1 << 20);
    try {
      pool->acquire(provider, 1 << 20);
      FAIL("acquire over the limit succeeded");
    } catch (const abr::Error& e) {
      CHECK(e.status() == ABR_ERR_OUT_OF_MEMORY);
      CHECK(std::strstr(e.what(), "limit of 3145728 bytes") != nullptr);
      CHECK(std::strstr(e.what(), "abr_pool_set_limit") != nullptr);
    }
    abr::PoolStats s = pool->stats();
    CHECK(s.bytes_pinned == 3 << 20);
    CHECK(s.bytes_in_use == 3 << 20);
    CHECK(s.blocks_pinned == 3);
  }
  // All three cached; a bigger request fits by freeing idle blocks of another class.
  PinnedBlock big = pool->acquire(provider, 2 << 20);
  abr::PoolStats s = pool->stats();
  CHECK(s.bytes_pinned <= 3 << 20);
  CHECK(s.bytes_in_use == 2 << 20);
  CHECK(provider.live == 2);
  pool->set_limit(1 << 20);  // lower than what is in use: the cached block goes, the one in use stays
  s = pool->stats();
  CHECK(s.bytes_pinned == 2 << 20);
  CHECK(s.limit_bytes == 1 << 20);
  pool->set_limit(0);
  CHECK(pool->stats().limit_bytes > (1 << 20));  // the default: a quarter of physical memory
}

// Released blocks may come back only after their device's work (deleted cuda_host
// tensors, through CUDA's reclaimer): at the limit the pool waits for them once,
// without its lock (the block's return takes it), before it refuses, whichever
// provider asks; and only when some are on their way (a reclaimer's wait
// synchronizes every device).
TEST_CASE("at the limit the pool waits once for blocks on their way back, then refuses") {
  FakeProvider provider, other;  // CUDA's and OpenCL's staging: one limit, one way back
  other.domain_tag = 1;
  auto returning = std::make_shared<FakeReturning>();
  auto pool = PinnedPool::create(2 << 20);
  pool->add_returning(returning);
  PinnedBlock released = pool->acquire(provider, 1 << 20);
  PinnedBlock held = pool->acquire(provider, 1 << 20);
  returning->pending = true;
  returning->on_wait = [&] { released = PinnedBlock(); };  // back in the pool, idle
  PinnedBlock again = pool->acquire(other, 1 << 20);       // another provider asks
  CHECK(returning->waits == 1);
  CHECK(again.size() == 1 << 20);
  CHECK(pool->stats().bytes_pinned == 2 << 20);
  CHECK(provider.live + other.live == 2);

  // Nothing on its way back: no wait, the limit's refusal.
  returning->on_wait = nullptr;
  try {
    pool->acquire(provider, 1 << 20);
    FAIL("acquire over the limit succeeded");
  } catch (const abr::Error& e) {
    CHECK(e.status() == ABR_ERR_OUT_OF_MEMORY);
  }
  CHECK(returning->waits == 1);
  CHECK(returning->asked == 2);
  // Some on their way, but none making room: one wait, then the refusal.
  returning->pending = true;
  CHECK_THROWS_AS(pool->acquire(provider, 1 << 20), abr::Error);
  CHECK(returning->waits == 2);
  returning->pending = true;
  CHECK_THROWS_AS(pool->acquire(provider, 4 << 20), abr::Error);  // more than the limit: no wait can help
  CHECK(returning->waits == 2);
  abr::PoolStats s = pool->stats();
  CHECK(s.bytes_pinned == 2 << 20);
  CHECK(s.bytes_in_use == 2 << 20);
}

// A pipeline's blocks go back to the cache while the caller's stream still reads
// them; the next pipeline on that stream, at the limit, waited for nothing and was
// refused (a batch then moved its tensors one by one). They are on their way back:
// the pool waits for a block of the class it wants, or else for enough others.
TEST_CASE("at the limit the pool waits for cached blocks a stream still reads, and reuses one of the class asked") {
  FakeProvider provider;
  FakeStream stream;
  auto pool = PinnedPool::create(2 << 20);
  char *first = nullptr, *second = nullptr;
  {
    PinnedBlock a = pool->acquire(provider, 1 << 20), b = pool->acquire(provider, 1 << 20);
    first = a.data(), second = b.data();
    a.used_by(stream);
    b.used_by(stream);
  }
  CHECK(pool->stats().bytes_waiting == 2 << 20);
  PinnedBlock again = pool->acquire(provider, 1 << 20);
  CHECK(stream.waits == 1);  // one block's users: the class asked for
  CHECK((again.data() == first || again.data() == second));
  CHECK(provider.allocations == 2);
  abr::PoolStats s = pool->stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 2);
  CHECK(s.bytes_pinned == 2 << 20);
  CHECK(s.bytes_in_use == 1 << 20);
}

TEST_CASE("at the limit a busy cached block of another class is waited for and freed to make room") {
  FakeProvider provider;
  FakeStream stream;
  auto pool = PinnedPool::create(2 << 20);
  pool->acquire(provider, 2 << 20).used_by(stream);
  PinnedBlock small = pool->acquire(provider, 1 << 20);
  CHECK(stream.waits == 1);
  CHECK(provider.allocations == 2);
  CHECK(provider.live == 1);
  CHECK(pool->stats().bytes_pinned == 1 << 20);
}

TEST_CASE("at the limit busy cached blocks too small to make room are not waited for: the limit refuses at once") {
  FakeProvider provider;
  FakeStream stream;
  auto pool = PinnedPool::create(2 << 20);
  PinnedBlock held = pool->acquire(provider, 1 << 20);
  pool->acquire(provider, 1 << 20).used_by(stream);
  try {
    pool->acquire(provider, 2 << 20);
    FAIL("acquire over the limit succeeded");
  } catch (const abr::Error& e) {
    CHECK(e.status() == ABR_ERR_OUT_OF_MEMORY);
    CHECK(std::strstr(e.what(), "limit of 2097152 bytes") != nullptr);
  }
  CHECK(stream.waits == 0);  // 1 MiB coming back could not make room for 2 beside the 1 held
  abr::PoolStats s = pool->stats();
  CHECK(s.bytes_pinned == 2 << 20);
  CHECK(s.bytes_in_use == 1 << 20);
  CHECK(s.bytes_waiting == 1 << 20);
}

// A user that finishes while the pool looks (another thread waited for it) leaves an
// idle block of the class at the limit: the pool takes it, whichever look first sees
// the block idle, and never refuses while one is there.
TEST_CASE("at the limit a cached block that became idle while the pool looked is taken, not refused") {
  struct DoneOnLook final : abr::Event {
    int looks_left;  // complete from this many looks on
    explicit DoneOnLook(int n) : looks_left(n) {}
    bool complete() noexcept override { return --looks_left <= 0; }
    void wait() override { looks_left = 0; }
  };
  for (int looks = 1; looks <= 6; ++looks) {
    CAPTURE(looks);
    FakeProvider provider;
    auto pool = PinnedPool::create(1 << 20);
    char* data = nullptr;
    {
      PinnedBlock block = pool->acquire(provider, 1 << 20);
      data = block.data();
      block.used_until(std::make_unique<DoneOnLook>(looks));
    }
    try {
      PinnedBlock again = pool->acquire(provider, 1 << 20);
      CHECK(again.data() == data);
    } catch (const abr::Error& e) {
      FAIL("refused with an idle block of the class cached: " << std::string(e.what()));
    }
    CHECK(provider.allocations == 1);
  }
}

// A limit set below what is pinned leaves the busy cached blocks pinned: the pool is
// over its limit, and still waits for them to make room (the shortfall counted from
// the limit, not wrapped around it).
TEST_CASE("over a lowered limit the pool waits for busy cached blocks to make room") {
  FakeProvider provider;
  FakeStream stream;
  auto pool = PinnedPool::create(4 << 20);
  {
    PinnedBlock a = pool->acquire(provider, 1 << 20), b = pool->acquire(provider, 1 << 20);
    a.used_by(stream);
    b.used_by(stream);
  }
  pool->set_limit(1 << 20);
  CHECK(pool->stats().bytes_pinned == 2 << 20);  // in use by the stream: not freed
  PinnedBlock small = pool->acquire(provider, 512 << 10);
  CHECK(stream.waits == 2);  // both blocks' users: 1.5 MiB short
  abr::PoolStats s = pool->stats();
  CHECK(s.bytes_pinned == 512 << 10);  // both freed once their users were done
  CHECK(provider.live == 1);
}

TEST_CASE("a provider that fails leaves the pool consistent; cached blocks are given up and the request retried") {
  FakeProvider provider;
  auto returning = std::make_shared<FakeReturning>();
  auto pool = PinnedPool::create(1ull << 30);
  pool->add_returning(returning);
  provider.failures_left = 1;
  CHECK_THROWS_AS(pool->acquire(provider, 4096), abr::Error);  // nothing cached to give up
  CHECK(returning->asked == 1);                                // nor on its way back
  abr::PoolStats s = pool->stats();
  CHECK(s.bytes_pinned == 0);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.blocks_pinned == 0);

  { PinnedBlock cached = pool->acquire(provider, 8192); }
  provider.failures_left = 1;
  PinnedBlock block = pool->acquire(provider, 4096);  // fails once, trims the 8 KiB block, succeeds
  CHECK(block.size() == 4096);
  s = pool->stats();
  CHECK(s.bytes_pinned == 4096);
  CHECK(s.bytes_cached == 0);
  CHECK(provider.live == 1);
}

TEST_CASE("many threads share one pool and the statistics add up afterwards") {
  FakeProvider provider;
  auto pool = PinnedPool::create(1ull << 30);
  constexpr int kThreads = 8, kIterations = 500;
  std::vector<std::thread> threads;
  std::atomic<int> corrupt{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        PinnedBlock block = pool->acquire(provider, static_cast<std::size_t>(4096 * (1 + (i + t) % 4)));
        std::memset(block.data(), t, 64);  // nobody else may hold this block now
        for (int k = 0; k < 64; ++k)
          if (block.data()[k] != static_cast<char>(t)) corrupt++;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(corrupt == 0);
  const abr::PoolStats s = pool->stats();
  CHECK(s.hits + s.misses == kThreads * kIterations);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.blocks_pinned == static_cast<uint64_t>(provider.live.load()));
  CHECK(s.misses <= kThreads * 4);  // at most one block per thread and class
}

// At the limit every thread waits for others' busy cached blocks (whose users here
// finish only when waited for): events shared between the cache and the waiting
// thread, waited for without the lock while others check them. A block is never
// handed out before its last user is done.
TEST_CASE("threads at the limit wait for each other's busy blocks, and never get one still in use") {
  struct Use final : abr::Event {
    std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
    bool complete() noexcept override { return *done; }
    void wait() override { *done = true; }
  };
  FakeProvider provider;
  constexpr int kThreads = 8, kIterations = 300;
  auto pool = PinnedPool::create(kThreads * 4096);  // every thread's block at once, and no more
  std::mutex mutex;
  std::map<const char*, std::shared_ptr<std::atomic<bool>>> last_use;  // each block's last user
  std::atomic<int> early{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIterations; ++i) {
        try {
          PinnedBlock block = pool->acquire(provider, 4096);
          auto use = std::make_unique<Use>();
          std::lock_guard<std::mutex> lock(mutex);
          auto& last = last_use[block.data()];
          if (last && !*last) early++;
          last = use->done;
          block.used_until(std::move(use));
        } catch (const abr::Error& e) {
          (e.status() == ABR_ERR_OUT_OF_MEMORY ? refused : other)++;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(early == 0);
  CHECK(other == 0);
  const abr::PoolStats s = pool->stats();
  MESSAGE("refused at the limit: " << refused.load() << " of " << kThreads * kIterations);
  CHECK(s.hits + s.misses == kThreads * kIterations);
  // Each thread waits again when another takes the block it waited for: with one wait
  // each, 3-7% were refused here; without any, all but the first few (2392 of 2400).
  // A block another thread's wait made idle while this one looked was refused too
  // (rare here; the test above makes it certain); it is taken now.
  CHECK(refused <= kThreads * kIterations / 100);
  CHECK(s.hits > kThreads * kIterations / 2);  // reused after a wait: no user finishes otherwise
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_pinned <= kThreads * 4096);
  CHECK(s.blocks_pinned == static_cast<uint64_t>(provider.live.load()));
}

namespace {

std::shared_ptr<abr::opencl::Context> context_over(const ClEnv& env) {
  const abr::opencl::Api* cl = abr::opencl::api(nullptr);
  REQUIRE(cl != nullptr);
  return std::make_shared<abr::opencl::Context>(*cl, env.context, env.device, ocl0);
}

}  // namespace

TEST_CASE("the OpenCL provider hands out mapped host memory in its context's domain") {
  ClEnv env;
  auto context = context_over(env);
  abr::opencl::MappedStagingProvider provider(context);
  CHECK(std::string(provider.name()) == "OpenCL CL_MEM_ALLOC_HOST_PTR");
  CHECK(provider.domain() == context.get());
  std::unique_ptr<abr::StagingBlock> block = provider.allocate(1 << 20);
  REQUIRE(block->data() != nullptr);
  CHECK(block->size() == (1u << 20));
  std::memset(block->data(), 0x5A, block->size());  // writable through the whole size
  CHECK(static_cast<unsigned char>(block->data()[block->size() - 1]) == 0x5A);
  block.reset();
  try {
    provider.allocate(std::size_t{1} << 50);
    FAIL("a 1 PiB staging block was allocated");
  } catch (const abr::Error& e) {
    CHECK(e.status() == ABR_ERR_OUT_OF_MEMORY);
  }
}

TEST_CASE("with real OpenCL events, a block read by a gated queue is reused only after the queue ran") {
  ClEnv env;
  auto context = context_over(env);
  abr::opencl::MappedStagingProvider provider(context);
  const abr::opencl::Api* cl = &context->api();
  GatedQueue gated(env);
  clRetainCommandQueue(env.queue);
  abr::opencl::QueueStream stream(context, abr::opencl::Ref<cl_command_queue>(env.queue, cl->ReleaseCommandQueue));
  auto pool = PinnedPool::create(1ull << 30);

  cl_mem target = env.buffer(4096);
  char* first = nullptr;
  {
    PinnedBlock block = pool->acquire(provider, 4096);
    first = block.data();
    std::memset(block.data(), 7, 4096);
    REQUIRE(clEnqueueWriteBuffer(env.queue, target, CL_FALSE, 0, 4096, block.data(), 0, nullptr, nullptr) ==
            CL_SUCCESS);
    block.used_by(stream);
  }
  CHECK(pool->stats().bytes_waiting == 4096);
  {
    PinnedBlock while_gated = pool->acquire(provider, 4096);
    CHECK(while_gated.data() != first);
  }
  gated.open();
  stream.synchronize();
  CHECK(pool->stats().bytes_waiting == 0);
  PinnedBlock a = pool->acquire(provider, 4096), b = pool->acquire(provider, 4096);
  CHECK((a.data() == first || b.data() == first));
  CHECK(read_mem(target, 0, 4096) == std::vector<char>(4096, 7));
  clReleaseMemObject(target);
}

TEST_CASE("the C API reports the pool that staged transfers reuse, trims it and enforces its limit") {
  Runtime rt;
  ClEnv env;
  constexpr std::size_t n = 1 << 18;  // 1 MiB of float32
  std::vector<float> data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i);
  cl_mem theirs = env.buffer(n * 4, data.data());
  const std::vector<int64_t> shape{static_cast<int64_t>(n)};

  abr_pool_stats stats = pool_stats(rt);
  CHECK(stats.version == ABR_POOL_STATS_VERSION);
  CHECK(stats.bytes_pinned == 0);
  CHECK(stats.limit_bytes > 0);

  for (int round = 0; round < 3; ++round) {  // from the test's context into the runtime's: staged
    Managed src(theirs, f32, shape, {}, 0, ocl0);
    Owned out(move_to(rt, &src.managed, ocl0, ABR_COPY_ALWAYS, ABR_PATH_STAGED));
    CHECK(read_mem(static_cast<cl_mem>(out->data), 0, n * 4) == read_mem(theirs, 0, n * 4));
  }
  stats = pool_stats(rt);
  CHECK(stats.misses == 1);  // one 1 MiB chunk: pinned once, then reused
  CHECK(stats.hits == 2);
  CHECK(stats.bytes_in_use == 0);
  CHECK(stats.bytes_cached == 1 << 20);

  uint64_t released = 0;
  REQUIRE(abr_pool_trim(rt, &released) == ABR_OK);
  CHECK(released == 1 << 20);

  REQUIRE(abr_pool_set_limit(rt, 4096) == ABR_OK);
  {
    Managed src(theirs, f32, shape, {}, 0, ocl0);
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.copy = ABR_COPY_ALWAYS;
    DLManagedTensorVersioned* out = nullptr;
    CHECK(abr_to_device(rt, &src.managed, ocl0, &options, nullptr, &out) == ABR_ERR_OUT_OF_MEMORY);
    CHECK(error_mentions("pinned pool's limit of 4096 bytes"));
    CHECK(out == nullptr);
    CHECK(src.deleted == 0);  // still the caller's
  }
  REQUIRE(abr_pool_set_limit(rt, 0) == ABR_OK);
  {
    Managed src(theirs, f32, shape, {}, 0, ocl0);
    Owned out(move_to(rt, &src.managed, ocl0, ABR_COPY_ALWAYS, ABR_PATH_STAGED));
  }

  stats.version = ABR_POOL_STATS_VERSION + 1;
  CHECK(abr_pool_get_stats(rt, &stats) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_pool_stats version"));
  CHECK(abr_pool_get_stats(rt, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(abr_pool_trim(nullptr, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  clReleaseMemObject(theirs);
}

// Many threads convert through one runtime and one pinned pool at once, on every
// path this build has (host view, pack, cast, OpenCL up and down, staged from a
// foreign context through the pool), while one other thread deletes every result.
// Each source's deleter must run exactly once, every copy must hold the right
// values, and the pool must end with nothing in use. Also built with
// ThreadSanitizer (make test runs it there too).
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tests/support/helpers.hpp"
#include "tests/support/opencl_helpers.hpp"

using namespace test;

namespace {

constexpr int kRows = 16, kCols = 24, kThreads = 8, kIterations = 150;

// A source whose deleter may fire on any thread.
struct Source {
  DLManagedTensorVersioned managed{};
  int64_t shape[2], strides[2];
  std::atomic<int> deleted{0};
  static void count(DLManagedTensorVersioned* self) { static_cast<Source*>(self->manager_ctx)->deleted++; }
  Source(void* data, DLDevice device, bool transposed) {
    shape[0] = transposed ? kCols : kRows;
    shape[1] = transposed ? kRows : kCols;
    strides[0] = transposed ? 1 : kCols;
    strides[1] = transposed ? kCols : 1;
    managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    managed.manager_ctx = this;
    managed.deleter = count;
    managed.dl_tensor = {data, device, 2, i32, shape, strides, 0};
  }
};

// Deletes whatever it is handed, on its own thread.
class Reaper {
 public:
  Reaper() : thread_([this] { run(); }) {}
  ~Reaper() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    ready_.notify_one();
    thread_.join();
  }
  void give(DLManagedTensorVersioned* t) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(t);
    }
    ready_.notify_one();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ready_.wait(lock, [&] { return done_ || !queue_.empty(); });
      if (queue_.empty() && done_) return;
      DLManagedTensorVersioned* t = queue_.front();
      queue_.pop_front();
      lock.unlock();
      t->deleter(t);
      lock.lock();
    }
  }
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<DLManagedTensorVersioned*> queue_;
  bool done_ = false;
  std::thread thread_;
};

// Element (r, c) of the row-major reference, read through any result's layout.
template <class T>
bool matches(const DLTensor& t, const std::vector<int32_t>& reference, bool transposed) {
  const char* base = static_cast<const char*>(t.data) + t.byte_offset;
  for (int64_t i = 0; i < t.shape[0]; ++i)
    for (int64_t j = 0; j < t.shape[1]; ++j) {
      const int64_t s0 = t.strides ? t.strides[0] : t.shape[1], s1 = t.strides ? t.strides[1] : 1;
      T value;
      std::memcpy(&value, base + (i * s0 + j * s1) * int64_t(sizeof(T)), sizeof(T));
      const int32_t want = transposed ? reference[j * kCols + i] : reference[i * kCols + j];
      if (value != static_cast<T>(want)) return false;
    }
  return true;
}

}  // namespace

TEST_CASE("threads convert through one runtime and one pool while another thread deletes the results") {
  Runtime rt;
  ClEnv env;
  std::vector<int32_t> host(kRows * kCols);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int32_t>(i * 7 - 300);
  cl_mem theirs = env.buffer(host.size() * 4, host.data());  // another library's context

  std::vector<std::unique_ptr<Source>> sources[kThreads];
  std::mutex failures_lock;
  std::vector<std::string> failures;
  std::atomic<int> staged{0};
  {
    Reaper reaper;
    auto fail = [&](const std::string& what) {
      std::lock_guard<std::mutex> lock(failures_lock);
      failures.push_back(what);
    };
    auto move = [&](DLManagedTensorVersioned* src, DLDevice dst, abr_copy_mode copy, DLDataType dtype,
                    const char* what) -> DLManagedTensorVersioned* {
      abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
      abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
      options.copy = copy;
      options.dtype = dtype;
      DLManagedTensorVersioned* out = nullptr;
      if (abr_to_device(rt, src, dst, &options, nullptr, &out) != ABR_OK) {
        fail(std::string(what) + ": " + abr_last_error());
        src->deleter(src);  // still ours after an error
        return nullptr;
      }
      return out;
    };
    auto work = [&](int id) {
      for (int i = 0; i < kIterations; ++i) {
        const int kind = (id + i) % 5;
        const bool transposed = kind == 1 || kind == 3;
        Source* s = sources[id]
                        .emplace_back(std::make_unique<Source>(kind == 4 ? static_cast<void*>(theirs) : host.data(),
                                                               kind == 4 ? ocl0 : cpu, transposed))
                        .get();
        DLManagedTensorVersioned* out = nullptr;
        bool ok = true;
        switch (kind) {
          case 0:  // zero-copy view
            out = move(&s->managed, cpu, ABR_COPY_IF_NEEDED, {}, "view");
            ok = !out || out->dl_tensor.data == host.data();
            break;
          case 1:  // pack a transposed view
            out = move(&s->managed, cpu, ABR_COPY_ALWAYS, {}, "pack");
            ok = !out || matches<int32_t>(out->dl_tensor, host, true);
            break;
          case 2:  // cast
            out = move(&s->managed, cpu, ABR_COPY_ALWAYS, f64, "cast");
            ok = !out || matches<double>(out->dl_tensor, host, false);
            break;
          case 3:  // up to OpenCL and back
            out = move(&s->managed, ocl0, ABR_COPY_ALWAYS, {}, "host to device");
            if (out) out = move(out, cpu, ABR_COPY_ALWAYS, {}, "device to host");
            ok = !out || matches<int32_t>(out->dl_tensor, host, true);
            break;
          default:  // from another context: staged through the pinned pool, then down
            out = move(&s->managed, ocl0, ABR_COPY_ALWAYS, {}, "staged");
            staged++;
            if (out) out = move(out, cpu, ABR_COPY_ALWAYS, {}, "device to host");
            ok = !out || matches<int32_t>(out->dl_tensor, host, false);
            break;
        }
        if (!ok) fail("wrong values on path " + std::to_string(kind));
        if (out) reaper.give(out);
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
    for (std::thread& t : threads) t.join();
  }  // the reaper has deleted everything

  CHECK(failures.empty());
  for (const std::string& f : failures) MESSAGE(f);
  int wrong = 0, total = 0;
  for (auto& list : sources)
    for (auto& s : list) {
      total++;
      if (s->deleted.load() != 1) wrong++;
    }
  CHECK(total == kThreads * kIterations);
  CHECK(wrong == 0);
  const abr_pool_stats stats = pool_stats(rt);
  CHECK(stats.bytes_in_use == 0);
  CHECK(stats.bytes_cached == stats.bytes_pinned);
  CHECK(stats.hits + stats.misses >= uint64_t(staged.load()));
  CHECK(stats.misses <= uint64_t(2 * kThreads));  // blocks were reused, not pinned per transfer
  clReleaseMemObject(theirs);
}

#include "lib/host/host_threads.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "lib/base/settings.hpp"
#include "lib/tensor/dtype.hpp"
#include "lib/host/host_copy.hpp"

namespace abr {
namespace {

// Counted once: hardware_concurrency() reads /sys/devices/system/cpu/online on every
// call (glibc), three syscalls that cost more than a small host copy itself.
unsigned core_threads() {
  static const unsigned cores = std::min(std::max(1u, std::thread::hardware_concurrency()), 16u);
  return cores;
}

}  // namespace

unsigned default_threads() {
  if (const unsigned long n = settings::staging_threads()) return static_cast<unsigned>(n);
  return core_threads();
}

struct HostThreads::Job {
  const std::function<void(std::size_t)>* task = nullptr;
  std::size_t count = 0;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::atomic<unsigned> helpers{0};  // workers that may still join (threads - 1 at the start)
  std::mutex failure_mutex;
  std::exception_ptr failure;  // the first task's exception, the caller's once all are done
};

HostThreads::HostThreads(unsigned threads) {
  for (unsigned i = 1; i < std::max(threads, 1u); ++i) workers_.emplace_back([this] { work(); });
}

HostThreads::~HostThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void HostThreads::run_tasks(Job& job) {
  for (std::size_t i = job.next.fetch_add(1); i < job.count; i = job.next.fetch_add(1)) {
    try {
      (*job.task)(i);
    } catch (...) {  // a worker's exception would end the process
      std::lock_guard<std::mutex> lock(job.failure_mutex);
      if (!job.failure) job.failure = std::current_exception();
    }
    job.done.fetch_add(1, std::memory_order_acq_rel);
  }
}

void HostThreads::work() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      job = jobs_.front();
      // A job takes as many workers as its caller asked for; then it leaves the queue.
      if (job->helpers.fetch_sub(1) <= 1) jobs_.pop_front();
    }
    run_tasks(*job);
    std::lock_guard<std::mutex> lock(mutex_);
    if (job->done.load() == job->count) finished_.notify_all();
  }
}

void HostThreads::parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& task) {
  const unsigned helpers =
      std::min<std::size_t>({static_cast<std::size_t>(std::max(threads, 1u)) - 1, workers_.size(), n > 0 ? n - 1 : 0});
  if (helpers == 0) {
    for (std::size_t i = 0; i < n; ++i) task(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->task = &task;
  job->count = n;
  job->helpers = helpers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(job);
  }
  if (helpers == 1)
    wake_.notify_one();
  else
    wake_.notify_all();
  run_tasks(*job);
  std::unique_lock<std::mutex> lock(mutex_);
  // Workers that never came (all busy with other jobs) must not find it later.
  const auto queued = std::find(jobs_.begin(), jobs_.end(), job);
  if (queued != jobs_.end()) jobs_.erase(queued);
  finished_.wait(lock, [&] { return job->done.load() == job->count; });
  lock.unlock();
  // The exception becomes the caller's alone: left in the job, a worker dropping the
  // job last would free it while the caller still reads it (ThreadSanitizer saw that
  // once: the exception's own count is in libstdc++, where TSan sees no order).
  std::exception_ptr failure;
  {
    std::lock_guard<std::mutex> failure_lock(job->failure_mutex);
    failure.swap(job->failure);
  }
  if (failure) std::rethrow_exception(failure);
}

void HostThreads::copy(void* dst, const void* src, std::size_t bytes, unsigned threads) {
  if (bytes == 0) return;  // memcpy's pointers must be valid even for 0 bytes (UBSan)
  const std::size_t pieces = std::max<std::size_t>(1, std::min<std::size_t>(threads, bytes / kSplitPiece));
  if (pieces == 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const std::size_t piece = ((bytes + pieces - 1) / pieces + 4095) & ~std::size_t{4095};  // whole pages, covering all
  parallel_for(pieces, threads, [&](std::size_t i) {
    const std::size_t begin = std::min(bytes, i * piece), end = std::min(bytes, begin + piece);
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin);
  });
}

HostThreads& host_threads() {
  static std::mutex mutex;
  static HostThreads* pool = nullptr;  // never deleted: in use until exit, and a fork child's copy is not joinable
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (!pool || owner != getpid()) {
    // Never fewer than the cores: the variable may change later (a thread sweep), the pool does not.
    pool = new HostThreads(std::max(default_threads(), core_threads()));
    owner = getpid();
  }
  return *pool;
}

void copy_in_parallel(void* dst, const void* src, std::size_t bytes, unsigned threads) {
  if (threads > 1 && bytes >= 2 * kParallelPiece) return host_threads().copy(dst, src, bytes, threads);
  if (bytes) std::memcpy(dst, src, bytes);  // memcpy's pointers must be valid even for 0 bytes (UBSan)
}

void copy_layout_in_parallel(const Layout& src, const char* src_first, DLDataType dst_dtype, char* dst_first,
                             const int64_t* dst_strides, unsigned threads) {
  const std::size_t bytes = static_cast<std::size_t>(src.numel * std::max(src.itemsize, itemsize(dst_dtype)));
  int longest = 0;
  for (int d = 1; d < src.ndim(); ++d)
    if (src.shape[d] > src.shape[longest]) longest = d;
  const int64_t extent = src.ndim() ? src.shape[longest] : 0;
  const std::size_t parts =
      std::min<std::size_t>({threads, bytes / kWalkPiece, static_cast<std::size_t>(std::max<int64_t>(extent, 0))});
  if (parts <= 1) return host_copy_layout(src, src_first, dst_dtype, dst_first, dst_strides);
  const std::ptrdiff_t src_step = src.strides[longest] * static_cast<std::ptrdiff_t>(src.itemsize);  // may be negative
  const std::ptrdiff_t dst_step = dst_strides[longest] * static_cast<std::ptrdiff_t>(itemsize(dst_dtype));
  host_threads().parallel_for(parts, threads, [&](std::size_t i) {
    const int64_t begin = extent * static_cast<int64_t>(i) / static_cast<int64_t>(parts);
    const int64_t end = extent * static_cast<int64_t>(i + 1) / static_cast<int64_t>(parts);
    Layout box = src;
    box.shape[longest] = end - begin;
    host_copy_layout(box, src_first + src_step * begin, dst_dtype, dst_first + dst_step * begin, dst_strides);
  });
}

}  // namespace abr

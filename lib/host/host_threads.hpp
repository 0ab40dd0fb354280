// The host side of staged transfers, in parallel: one thread copies far slower
// than a PCIe 5 link or the host's memory can take, so chunks are
// copied into and out of pinned blocks by several threads at once. One pool per
// process (like KvikIO's), shared by every runtime and transfer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lib/tensor/layout.hpp"

namespace abr {

// The least bytes worth handing to another thread: below it the hand-off (a wake-up,
// a cache line bounced between cores) costs more than the work it saves. A memcpy
// does many times the bytes per second of the host engine's walks (pack, scatter,
// cast), so a hand-off pays for itself only on larger pieces of it.
constexpr std::size_t kParallelPiece = std::size_t{1} << 20;  // memcpy
constexpr std::size_t kWalkPiece = std::size_t{512} << 10;    // a walk of a view
// A memcpy worth splitting at all (two kParallelPiece) is split into pieces of at least
// this: a staged transfer's 8 MiB chunk then keeps 16 threads busy, not 8, so a
// large pageable copy to a device has more threads to keep up with the link.
constexpr std::size_t kSplitPiece = std::size_t{512} << 10;

class HostThreads {
 public:
  explicit HostThreads(unsigned threads);  // threads - 1 workers: the caller is the last
  ~HostThreads();
  HostThreads(const HostThreads&) = delete;
  HostThreads& operator=(const HostThreads&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }
  // Runs task(i) for every i in [0, n) on up to `threads` threads (the caller's
  // included) and returns when all have run. A task that throws (a copy of a layout
  // allocates) ends only itself: the first exception is rethrown here once the rest
  // are done. Run in line (one thread, or one task) the first throw leaves at once and
  // the tasks after it do not run. Several callers may run jobs at once; their tasks
  // share the workers.
  void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& task);
  // memcpy in pieces of at least kSplitPiece on up to `threads` threads: the pages of
  // a new destination are first touched by several threads too.
  void copy(void* dst, const void* src, std::size_t bytes, unsigned threads);

 private:
  struct Job;
  void work();
  static void run_tasks(Job& job);

  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// The process's pool: one thread per core up to 16, or ARRAYBRIDGE_STAGING_THREADS
// when that is more (read at first use; each transfer uses the number it says at
// planning). A child of fork() gets a pool of its own (the parent's threads are not in it).
HostThreads& host_threads();

// memcpy on up to `threads` threads (HostThreads::copy); a copy of one piece runs
// here, without asking for the pool (a getpid() and a lock, 4 KiB's copy time).
void copy_in_parallel(void* dst, const void* src, std::size_t bytes, unsigned threads);

// The host engine's copy of a view (host_copy_layout: pack, scatter, cast) on up to
// `threads` threads: the view is cut along its longest dimension into boxes of at
// least kWalkPiece, one task each. Smaller views run on the calling thread.
void copy_layout_in_parallel(const Layout& src, const char* src_first, DLDataType dst_dtype, char* dst_first,
                             const int64_t* dst_strides, unsigned threads);

// The threads a large copy may use unless a runtime chooses: ARRAYBRIDGE_STAGING_THREADS,
// else the cores (at most 16). lib/plan/staging_shape decides how many a transfer uses.
unsigned default_threads();

}  // namespace abr

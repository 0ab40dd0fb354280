// A stand-in for libcuda.so.1 that runs on the CPU, so the CUDA backend's host
// logic (discovery, pointer checks, stream ordering, events, the staged
// pipelines, pool reuse, kernel launches, out-of-memory and sticky errors) is
// exercised in CI without a GPU. Loaded through ARRAYBRIDGE_CUDA_LIBRARY.
//
// It is deliberately unforgiving where the real driver is:
//  - device pointers are host addresses with bit 62 flipped: the runtime can
//    never dereference one by mistake (non-canonical address: it faults);
//  - every stream is a worker thread, and FAKE_CUDA_DELAY_US (or the "delay_us"
//    control) sleeps before each operation, so missing waits show as wrong data;
//  - copies and kernels check every byte they touch lies in a live allocation,
//    and otherwise raise CUDA_ERROR_ILLEGAL_ADDRESS, which is sticky, like a
//    real memory fault;
//  - cuModuleLoadData accepts only a fatbin (its magic number).
// And it is as strict as the real driver under compute-sanitizer on what the
// H100 taught us (shared/gpu/h100-2026-11-22). Each of these is a *finding*:
// counted, kept as text, and failing the test that caused it:
//  - stream-ordered memory (cuMemAllocAsync): a copy, kernel or free on a stream
//    that is not ordered after the allocation by events (cuStreamWaitEvent), a
//    free not ordered after every use, any use after a free. As memcheck's
//    --track-stream-ordered-races does on the H100, a host synchronize is no
//    ordering: only stream order counts;
//  - a synchronous cuMemFree while queued work on any stream still uses the memory;
//  - cuMemFree/cuMemFreeHost without a current context, or after the primary
//    context that owned the memory was released (the driver freed it then);
//  - cuPointerGetAttribute on memory the driver does not know (pageable host
//    memory): the real driver returns CUDA_ERROR_INVALID_VALUE, which fills
//    every sanitizer log and driver trace; cuPointerGetAttributes answers it;
//  - cuMemHostRegister'd memory unregistered while a queued copy still uses it,
//    without a current context, or after the context that registered it was
//    released. Registering memory cuMemHostAlloc made is CUDA_ERROR_INVALID_VALUE,
//    as on the H100; async copies from memory neither allocated page-locked nor
//    registered are counted ("pageable_async_copies": the real driver runs them
//    synchronously, through its own staging, at a fraction of the link's speed).
//  - CUDA IPC as the driver documents it: cuMemAlloc memory is shareable (carved
//    from a few large sparse memfds here, not one descriptor per allocation, and
//    mapped by the importer through /proc/<pid>/fd), cuMemAllocAsync pool
//    memory and any pointer that is not an allocation's base are refused;
//    opening a handle in its own process is CUDA_ERROR_INVALID_CONTEXT, opening
//    it again in one process counts references, cuMemFree of an imported mapping
//    is a finding, and an exporter that has exited (or freed the memory) makes
//    cuIpcOpenMemHandle fail with CUDA_ERROR_INVALID_HANDLE. Interprocess events
//    keep their record and completion counts in shared memory, so a stream of the
//    importer waits for the exporter's queued work.
// At exit it reports what was never freed (device and pinned) or never unregistered.
// Kernels are emulated on the host with the library's own host cast.
#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <future>
#include <thread>
#include <vector>

#include "cuda/kernel_params.hpp"
#include "lib/host/host_cast.hpp"

// What a stream has been ordered after: for each stream id, the last of its
// operations (by sequence number) that is guaranteed to run before.
using Clock = std::map<int, uint64_t>;

struct CUctx_st {
  int device;
};
struct CUmod_st {
  int unused;
};
struct CUfunc_st {
  int kernel;
};  // 0..3: abr_copy_{1,2,4,8}; 4: abr_cast
// An interprocess event's counts, in a shared page (a memfd) both processes map.
struct SharedEventCounts {
  std::atomic<uint64_t> recorded;
  std::atomic<uint64_t> completed;
};
struct EventState {
  std::mutex mutex;
  std::condition_variable done;
  uint64_t recorded = 0;   // generation of the last record
  uint64_t completed = 0;  // generation the stream has reached
  Clock clock;             // the recording stream's order at the last record
  // CU_EVENT_INTERPROCESS: the counts are also in shared memory (fd >= 0 here);
  // opened from another process's handle: only there (remote_pid names the owner).
  SharedEventCounts* shared = nullptr;
  int fd = -1;
  pid_t remote_pid = 0;
  ~EventState() {
    if (shared) munmap(shared, sizeof *shared);
    if (fd >= 0) close(fd);
  }
};
// Queued records and waits share the state, so an event may be destroyed while
// work still refers to it, as the driver allows.
struct CUevent_st {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

namespace {

constexpr uint64_t kDeviceTag = uint64_t{1} << 62;
constexpr int kMaxDevices = 8;

std::atomic<CUresult> g_sticky{CUDA_SUCCESS};
std::atomic<int64_t> g_delay_us{0};
std::atomic<int64_t> g_delayed{0};         // operations waiting out their delay now, taken off their streams
std::atomic<int64_t> g_dtoh_async_run{0};  // cuMemcpyDtoHAsync copies that have run on their streams
std::atomic<int64_t> g_fail_alloc_in{0};   // the n-th allocation from now fails; 0: none
std::atomic<int64_t> g_launches{0};
std::atomic<int64_t> g_fail_launch_in{0};    // the n-th launch from now faults (sticky)
std::atomic<int64_t> g_fail_register_in{0};  // the n-th cuMemHostRegister from now fails
std::atomic<int64_t> g_pageable_async{0};    // async copies from or to memory not page-locked
int g_device_count = 2;
CUctx_st g_contexts[kMaxDevices];
std::atomic<int> g_retained[kMaxDevices];

// ---------------------------------------------------------------- findings

std::mutex g_findings_mutex;
std::deque<std::string>& g_findings = *new std::deque<std::string>;  // a deque: texts handed out never move
std::string& g_label = *new std::string;                             // what the test harness is running

void finding(const char* format, ...) __attribute__((format(printf, 1, 2)));
void finding(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(g_findings_mutex);
  g_findings.push_back(g_label.empty() ? std::string(text) : g_label + ": " + text);
}

// ---------------------------------------------------------------- memory

struct Use {
  int stream;
  uint64_t seq;  // the operation that uses the memory
};

struct SharedRegion;

struct Range {
  uint64_t size;
  int device;   // -1: page-locked host memory
  int context;  // the device whose primary context owns it
  char* real;
  bool stream_ordered = false;  // cuMemAllocAsync
  int alloc_stream = -1;
  uint64_t alloc_seq = 0;
  bool freed = false;      // a free is queued: no use may follow
  bool abandoned = false;  // allocated when a sticky error struck: left to the driver, as libraries must
  std::vector<Use> uses;
  SharedRegion* region = nullptr;  // cuMemAlloc memory: the region it was carved from
  uint64_t offset = 0;             // ... and where in it (its header page precedes it)
  uint64_t mapped = 0;             // imported: bytes mmapped from `real - kPage`
  int imported_refs = 0;           // a mapping cuIpcOpenMemHandle made: its open count
  std::string ipc_key;             // of an imported mapping: its handle (pid, fd, inode, offset, generation)
};
std::mutex g_memory_mutex;
// By start address (device addresses tagged). Never destroyed: what a lost device
// leaves allocated stays reachable, as the real driver keeps it until exit.
std::map<uint64_t, Range>& g_ranges = *new std::map<uint64_t, Range>;
// Memory the driver freed with its context: freeing it again is a finding.
std::set<uint64_t>& g_freed_with_context = *new std::set<uint64_t>;
// Host memory registered with cuMemHostRegister, by start address: its size, the
// context that registered it, and the queued copies that use it.
struct Registered {
  uint64_t size;
  int context;
  std::vector<Use> uses;
};
std::map<uint64_t, Registered>& g_registered = *new std::map<uint64_t, Registered>;
// Registrations the driver ended with their context: unregistering again is a finding.
std::set<uint64_t>& g_unregistered_with_context = *new std::set<uint64_t>;
// Device ranges already released (start -> size) until an allocation reuses them:
// a use submitted after the free has run is still told from a wild pointer.
std::map<uint64_t, uint64_t>& g_released = *new std::map<uint64_t, uint64_t>;

// Each thread's stack of current contexts, found as the real driver finds its own:
// through a pthread key. glibc numbers keys per libc but keeps their values in one
// array per thread, so a library in another link-map namespace (its own libc) that
// sets a key of the same number overwrites the driver's: on an H100 machine PoCL
// opened in a namespace of its own crashed libcuda so (2026-11-26). The fake refuses
// a slot it did not fill: a finding, and CUDA_ERROR_INVALID_CONTEXT.
thread_local std::vector<CUcontext> t_context_stack;
std::vector<CUcontext>* context_stack() {
  static const pthread_key_t key = [] {
    pthread_key_t made{};
    if (pthread_key_create(&made, nullptr) != 0) std::abort();
    return made;
  }();
  void* held = pthread_getspecific(key);
  if (held == &t_context_stack) return &t_context_stack;
  if (!held) {
    pthread_setspecific(key, &t_context_stack);
    return &t_context_stack;
  }
  finding(
      "this thread's context stack (pthread key %u) holds %p, which the driver did not put there: a library "
      "in another link-map namespace set a key of the same number",
      static_cast<unsigned>(key), held);
  return nullptr;
}
// Whether a context is current on this thread (false where its stack cannot be found).
bool has_current() {
  const std::vector<CUcontext>* stack = context_stack();
  return stack && !stack->empty();
}

// ---------------------------------------------------------------- shared regions

// cuMemAlloc memory is carved from a few shared regions (sparse memfds of a
// GiB or more, each mapped once), not a memfd per allocation: a process holds
// more allocations than its descriptor limit, and another process still maps an
// allocation through /proc/<pid>/fd/<region fd> at its offset (CUDA IPC). Each
// allocation follows a header page holding its generation, zeroed on free, so a
// handle to freed or reused memory is refused. Freed pages go back to the
// kernel (a hole punched), so a long run's memory stays flat.
constexpr uint64_t kPage = 4096;
constexpr uint64_t kRegionBytes = uint64_t{1} << 30;

struct SharedRegion {
  int fd;
  char* base;
  uint64_t bytes;
  pid_t owner;                              // a forked child leaves its parent's regions alone
  std::map<uint64_t, uint64_t> free_spans;  // offset -> bytes, coalesced
};
struct AllocationHeader {
  uint64_t generation;  // 0: freed
  uint64_t bytes;
};
std::vector<SharedRegion*>& g_regions = *new std::vector<SharedRegion*>;  // never unmapped: lives until exit
uint64_t g_generation = 0;

uint64_t pages_for(uint64_t bytes) { return (std::max<uint64_t>(bytes, 1) + kPage - 1) / kPage * kPage; }

SharedRegion* new_region(uint64_t bytes) {
  const int fd = memfd_create("fake-cuda-memory", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void* base = ftruncate(fd, static_cast<off_t>(bytes)) == 0
      ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0)
      : MAP_FAILED;
  if (base == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  auto* region = new SharedRegion{fd, static_cast<char*>(base), bytes, getpid(), {{0, bytes}}};
  g_regions.push_back(region);
  return region;
}

// First fit of `bytes` (page multiple) in `region`, or false.
bool carve(SharedRegion* region, uint64_t bytes, uint64_t* offset) {
  for (auto it = region->free_spans.begin(); it != region->free_spans.end(); ++it) {
    if (it->second < bytes) continue;
    *offset = it->first;
    if (it->second > bytes) region->free_spans[it->first + bytes] = it->second - bytes;
    region->free_spans.erase(it);
    return true;
  }
  return false;
}

// Room for `bytes` behind a header page, from this process's regions (caller
// holds g_memory_mutex); the data's address, or nullptr.
char* region_allocate(uint64_t bytes, SharedRegion** region, uint64_t* offset) {
  const uint64_t span = kPage + pages_for(bytes);
  uint64_t start = 0;
  *region = nullptr;
  for (SharedRegion* candidate : g_regions)
    if (candidate->owner == getpid() && carve(candidate, span, &start)) {
      *region = candidate;
      break;
    }
  if (!*region) {
    *region = new_region(std::max(kRegionBytes, span));
    if (!*region || !carve(*region, span, &start)) return nullptr;
  }
  *offset = start + kPage;
  auto* header = reinterpret_cast<AllocationHeader*>((*region)->base + start);
  *header = {++g_generation, bytes};
  return (*region)->base + *offset;
}

// Gives an allocation's pages back to the kernel and its span to the region.
void region_free(SharedRegion* region, uint64_t offset, uint64_t bytes) {
  if (region->owner != getpid()) return;  // inherited through fork: the parent's memory
  uint64_t start = offset - kPage, span = kPage + pages_for(bytes);
  fallocate(region->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(start),
            static_cast<off_t>(span));  // the header's generation reads 0 from now on
  auto next = region->free_spans.lower_bound(start);
  if (next != region->free_spans.end() && next->first == start + span) {
    span += next->second;
    next = region->free_spans.erase(next);
  }
  if (next != region->free_spans.begin() && std::prev(next)->first + std::prev(next)->second == start) {
    std::prev(next)->second += span;
    return;
  }
  region->free_spans[start] = span;
}

// Device memory's bytes; managed memory's address is its own (untagged: the host's too).
char* real_of(CUdeviceptr address) {
  return reinterpret_cast<char*>(address & kDeviceTag ? address ^ kDeviceTag : address);
}

// The range holding [address, address + bytes) (caller holds g_memory_mutex), or nullptr.
Range* find_locked(uint64_t address, uint64_t bytes, uint64_t* start = nullptr) {
  auto it = g_ranges.upper_bound(address);
  if (it == g_ranges.begin()) return nullptr;
  --it;
  if (address + bytes > it->first + it->second.size || address < it->first) return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

// The live range holding [address, address + bytes), or nullptr.
const Range* find_range(uint64_t address, uint64_t bytes, uint64_t* start = nullptr) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  const Range* range = find_locked(address, bytes, start);
  return range && !range->freed ? range : nullptr;
}

bool checked_device(CUdeviceptr address, uint64_t bytes) {
  if (bytes == 0) return true;
  const Range* range = find_range(address, bytes);
  return range && range->device >= 0;
}

// The same check when queued work runs: a free queued behind the work has not
// happened yet, so only memory already released faults.
bool present_device(CUdeviceptr address, uint64_t bytes) {
  if (bytes == 0) return true;
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  const Range* range = find_locked(address, bytes);
  return range && range->device >= 0;
}

bool fail_allocation() {
  int64_t n = g_fail_alloc_in.load();
  while (n > 0 && !g_fail_alloc_in.compare_exchange_weak(n, n - 1)) {
  }
  return n == 1;
}

int current_device() {
  const std::vector<CUcontext>* stack = context_stack();
  return stack && !stack->empty() ? stack->back()->device : -1;
}

// ---------------------------------------------------------------- streams

// A stream: a worker thread running operations in order, with the order it
// has been given against other streams (its clock).
class FakeStream {
 public:
  explicit FakeStream(int device);
  ~FakeStream();
  int device() const { return device_; }
  int id() const { return id_; }
  // Queues `op`; returns its sequence number in this stream.
  uint64_t submit(std::function<void()> op) {
    uint64_t seq;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ops_.push_back(std::move(op));
      seq = ++submitted_;
    }
    wake_.notify_all();
    return seq;
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = submitted_;
    idle_.wait(lock, [&] { return finished_ >= target; });
  }
  bool finished(uint64_t seq) {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_ >= seq;
  }
  // This stream's order now, its own operations included.
  Clock clock() {
    std::lock_guard<std::mutex> lock(mutex_);
    Clock now = clock_;
    now[id_] = submitted_;
    return now;
  }
  // Later operations run after everything `other` covers (cuStreamWaitEvent).
  void order_after(const Clock& other) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& entry : other) clock_[entry.first] = std::max(clock_[entry.first], entry.second);
  }
  // Whether operations submitted from now on run after operation `seq` of stream `stream`.
  bool ordered_after(int stream, uint64_t seq) {
    if (stream == id_) return true;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = clock_.find(stream);
    return it != clock_.end() && it->second >= seq;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !ops_.empty(); });
      if (ops_.empty()) return;
      std::function<void()> op = std::move(ops_.front());
      ops_.pop_front();
      lock.unlock();
      if (const int64_t delay = g_delay_us.load()) {
        ++g_delayed;
        std::this_thread::sleep_for(std::chrono::microseconds(delay));
        --g_delayed;
      }
      if (g_sticky.load() == CUDA_SUCCESS) op();  // after a fault nothing runs any more
      lock.lock();
      ++finished_;
      idle_.notify_all();
    }
  }

  int device_;
  int id_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> ops_;
  uint64_t submitted_ = 0, finished_ = 0;
  Clock clock_;
  bool stop_ = false;
  std::thread worker_;
};

std::mutex g_stream_mutex;
std::map<int, FakeStream*>& g_streams = *new std::map<int, FakeStream*>;  // live streams by id
// cuCtxSynchronize calls waiting on streams they listed: a stream is not deleted under them.
int g_context_syncs = 0;
std::condition_variable& g_context_syncs_done = *new std::condition_variable;  // never freed: waited on until exit
int g_next_stream_id = 1;
FakeStream* g_default[kMaxDevices];  // the legacy / per-thread stream of each device

FakeStream::FakeStream(int device) : device_(device) {
  {
    std::lock_guard<std::mutex> lock(g_stream_mutex);
    id_ = g_next_stream_id++;
    g_streams[id_] = this;
  }
  worker_ = std::thread([this] { run(); });
}

FakeStream::~FakeStream() {
  {
    std::unique_lock<std::mutex> lock(g_stream_mutex);
    g_context_syncs_done.wait(lock, [] { return g_context_syncs == 0; });
    g_streams.erase(id_);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

FakeStream* default_stream(int device) {
  {
    std::lock_guard<std::mutex> lock(g_stream_mutex);
    if (g_default[device]) return g_default[device];
  }
  auto* made = new FakeStream(device);  // lives until exit
  std::lock_guard<std::mutex> lock(g_stream_mutex);
  if (!g_default[device])
    g_default[device] = made;
  else
    made = nullptr;  // another thread won: ours is never used (leaked, harmless)
  return g_default[device];
}

FakeStream* stream_of(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
    return default_stream(current_device() < 0 ? 0 : current_device());
  return reinterpret_cast<FakeStream*>(stream);
}

// Whether operation `seq` of stream `id` has run (a destroyed stream ran everything).
bool use_finished(const Use& use) {
  std::lock_guard<std::mutex> lock(g_stream_mutex);
  auto it = g_streams.find(use.stream);
  return it == g_streams.end() || it->second->finished(use.seq);
}

// Keeps of a long-lived allocation's uses (the runtime's device cache reuses one
// for ever) only those a check can still need: the last of each live stream (a
// stream runs in order, so ordering after it orders after the earlier ones; a
// destroyed stream ran everything). Caller holds g_memory_mutex.
void forget_covered_uses(std::vector<Use>& uses) {
  std::map<int, uint64_t> last;
  {
    std::lock_guard<std::mutex> lock(g_stream_mutex);
    for (const Use& use : uses)
      if (g_streams.count(use.stream)) last[use.stream] = std::max(last[use.stream], use.seq);
  }
  uses.clear();
  for (const auto& entry : last) uses.push_back({entry.first, entry.second});
}

// Stream-ordered rules for an operation `seq` on `stream` that touches the
// allocation holding `address`: it must be ordered after the allocation. The
// use is recorded so that the free can be checked against it.
void note_use(CUdeviceptr address, FakeStream* stream, uint64_t seq, const char* call) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  uint64_t start = 0;
  Range* range = find_locked(address, 1, &start);
  if (!range || range->device < 0) return;
  if (range->stream_ordered && !stream->ordered_after(range->alloc_stream, range->alloc_seq))
    finding(
        "use-before-alloc: %s on stream %d uses the allocation at %#llx made by cuMemAllocAsync on stream %d, "
        "with no event ordering it after the allocation",
        call, stream->id(), static_cast<unsigned long long>(start), range->alloc_stream);
  if (range->uses.size() >= 32) forget_covered_uses(range->uses);
  range->uses.push_back({stream->id(), seq});
}

// The stream's next operation would use `address`: report a use of freed memory.
bool used_after_free(CUdeviceptr address, uint64_t bytes, const char* call) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  uint64_t start = 0;
  Range* range = find_locked(address, bytes, &start);
  if (!range) {
    auto it = g_released.upper_bound(address);
    if (it == g_released.begin() || address >= std::prev(it)->first + std::prev(it)->second) return false;
    start = std::prev(it)->first;
  } else if (!range->freed) {
    return false;
  }
  finding("use-after-free: %s uses the allocation at %#llx after it was freed", call,
          static_cast<unsigned long long>(start));
  return true;
}

void fault() {
  g_sticky.store(CUDA_ERROR_ILLEGAL_ADDRESS);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  for (auto& entry : g_ranges) entry.second.abandoned = true;
}

#define FAKE_GUARD()                                             \
  do {                                                           \
    if (g_sticky.load() != CUDA_SUCCESS) return g_sticky.load(); \
  } while (0)
#define FAKE_NEED_CONTEXT()                                \
  do {                                                     \
    FAKE_GUARD();                                          \
    if (!has_current()) return CUDA_ERROR_INVALID_CONTEXT; \
  } while (0)

DLDataType dtype_of(int32_t kind) {
  using namespace abr::cuda;
  switch (kind) {
    case kBool8: return {kDLBool, 8, 1};
    case kInt8: return {kDLInt, 8, 1};
    case kInt16: return {kDLInt, 16, 1};
    case kInt32: return {kDLInt, 32, 1};
    case kInt64: return {kDLInt, 64, 1};
    case kUInt8: return {kDLUInt, 8, 1};
    case kUInt16: return {kDLUInt, 16, 1};
    case kUInt32: return {kDLUInt, 32, 1};
    case kUInt64: return {kDLUInt, 64, 1};
    case kFloat16: return {kDLFloat, 16, 1};
    case kBFloat16: return {kDLBfloat, 16, 1};
    case kFloat32: return {kDLFloat, 32, 1};
    case kFloat64: return {kDLFloat, 64, 1};
    case kComplex64: return {kDLComplex, 64, 1};
    default: return {kDLComplex, 128, 1};
  }
}

// The byte offset of element i of a walk on one side (as run_kernel steps it).
int64_t walk_offset(const abr::cuda::WalkParams& w, int64_t first, const int64_t* stride, uint64_t i) {
  int64_t at = first;
  for (int k = w.ndim - 1; k >= 0; --k) {
    at += static_cast<int64_t>(i % static_cast<uint64_t>(w.extent[k])) * stride[k];
    i /= static_cast<uint64_t>(w.extent[k]);
  }
  return at;
}

// Whether a kernel's walk reads a byte it writes, element by element (interleaved
// walks, x[0::2] into x[1::2], share none though their bounding boxes meet).
bool walk_reads_what_it_writes(CUdeviceptr src, CUdeviceptr dst, const abr::cuda::WalkParams& w, std::size_t src_item,
                               std::size_t dst_item) {
  auto box = [&](CUdeviceptr base, int64_t first, const int64_t* stride, std::size_t item) {  // [low, end)
    int64_t low = first, high = first;
    for (int k = 0; k < w.ndim; ++k) (stride[k] < 0 ? low : high) += stride[k] * (w.extent[k] - 1);
    return std::pair<int64_t, int64_t>{static_cast<int64_t>(base) + low,
                                       static_cast<int64_t>(base) + high + static_cast<int64_t>(item)};
  };
  const auto read_box = box(src, w.src_first, w.src_stride, src_item);
  const auto write_box = box(dst, w.dst_first, w.dst_stride, dst_item);
  if (read_box.first >= write_box.second || write_box.first >= read_box.second) return false;  // most launches
  std::vector<int64_t> reads(w.count);
  for (uint64_t i = 0; i < w.count; ++i)
    reads[i] = static_cast<int64_t>(src) + walk_offset(w, w.src_first, w.src_stride, i);
  std::sort(reads.begin(), reads.end());
  for (uint64_t i = 0; i < w.count; ++i) {
    const int64_t written = static_cast<int64_t>(dst) + walk_offset(w, w.dst_first, w.dst_stride, i);
    // A read [r, r + src_item) meets [written, written + dst_item) when written - src_item < r < written + dst_item.
    const auto read = std::upper_bound(reads.begin(), reads.end(), written - static_cast<int64_t>(src_item));
    if (read != reads.end() && *read < written + static_cast<int64_t>(dst_item)) return true;
  }
  return false;
}

// The kernels of cuda/kernels.cu, element by element, with every access checked.
void run_kernel(int kernel, CUdeviceptr src, CUdeviceptr dst, const abr::cuda::WalkParams& w, int32_t from,
                int32_t to) {
  const std::size_t src_size = kernel < 4 ? (std::size_t{1} << kernel) * w.units : (dtype_of(from).bits + 7) / 8;
  const std::size_t dst_size = kernel < 4 ? src_size : (dtype_of(to).bits + 7) / 8;
  abr::CastRowFn cast = kernel == 4 ? abr::cast_row_for(dtype_of(from), dtype_of(to)) : nullptr;
  for (uint64_t i = 0; i < w.count; ++i) {
    int64_t s = w.src_first, d = w.dst_first;
    uint64_t rest = i;
    for (int k = w.ndim - 1; k >= 0; --k) {
      const int64_t idx = static_cast<int64_t>(rest % static_cast<uint64_t>(w.extent[k]));
      rest /= static_cast<uint64_t>(w.extent[k]);
      s += idx * w.src_stride[k];
      d += idx * w.dst_stride[k];
    }
    if (!present_device(src + s, src_size) || !present_device(dst + d, dst_size)) return fault();
    if (cast)
      cast(real_of(src + s), 0, real_of(dst + d), 0, 1);
    else
      std::memcpy(real_of(dst + d), real_of(src + s), src_size);
  }
}

// Frees a range the driver still knows (caller holds g_memory_mutex).
void release_locked(std::map<uint64_t, Range>::iterator it) {
  if (it->second.device >= 0) g_released[it->first] = it->second.size;
  if (it->second.region)
    region_free(it->second.region, it->second.offset, it->second.size);
  else if (it->second.mapped)
    munmap(it->second.real - kPage, it->second.mapped);
  else
    std::free(it->second.real);
  g_ranges.erase(it);
}

// The primary context of `device` is gone: the driver frees what it owned and
// ends the registrations it made.
void destroy_context(int device) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  for (auto it = g_registered.begin(); it != g_registered.end();) {
    if (it->second.context != device) {
      ++it;
      continue;
    }
    g_unregistered_with_context.insert(it->first);
    it = g_registered.erase(it);
  }
  for (auto it = g_ranges.begin(); it != g_ranges.end();) {
    if (it->second.context != device) {
      ++it;
      continue;
    }
    g_freed_with_context.insert(it->first);
    auto next = std::next(it);
    release_locked(it);
    it = next;
  }
}

// The at-exit report of memory never freed, by the process that loaded the driver
// only: a child forked while a parent's thread held g_memory_mutex inherits it
// locked, and waited on it at exit for ever (the process hunt of 11-30); what its
// parent allocated is not its to report.
const pid_t g_loaded_by = getpid();

struct ExitReport {
  ~ExitReport() {
    if (getpid() != g_loaded_by) return;
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    uint64_t device_bytes = 0, pinned_bytes = 0, devices = 0, pinned = 0;
    for (const auto& entry : g_ranges) {
      if (entry.second.freed || entry.second.abandoned) continue;
      (entry.second.device >= 0 ? device_bytes : pinned_bytes) += entry.second.size;
      ++(entry.second.device >= 0 ? devices : pinned);
    }
    if (devices || pinned)
      std::fprintf(stderr,
                   "fake libcuda at exit: %llu device allocation(s) (%llu bytes) and %llu pinned (%llu bytes) "
                   "were never freed\n",
                   static_cast<unsigned long long>(devices), static_cast<unsigned long long>(device_bytes),
                   static_cast<unsigned long long>(pinned), static_cast<unsigned long long>(pinned_bytes));
    if (!g_registered.empty() && g_sticky.load() == CUDA_SUCCESS)
      std::fprintf(stderr, "fake libcuda at exit: %zu cuMemHostRegister range(s) were never unregistered\n",
                   g_registered.size());
  }
} g_exit_report;

}  // namespace

// Every driver call by name, so a test can count what one transfer costs
// (docs/architecture/backends.md, "Driver calls per transfer", lists the counts per path).
namespace {
std::mutex g_calls_mutex;
// Never freed, as the other tables here: a runtime alive at exit still calls the driver.
std::map<std::string, long long, std::less<>>& g_calls = *new std::map<std::string, long long, std::less<>>;

// Allocates only for a name not seen before, as a driver call never does: a test
// that makes the program's allocations fail (tests/support/failing_new.cpp) would
// otherwise see them fail inside the driver, under a destructor's cuCtxPopCurrent.
void count_call(const char* name) {
  std::lock_guard<std::mutex> lock(g_calls_mutex);
  auto known = g_calls.find(std::string_view(name));
  if (known == g_calls.end()) known = g_calls.emplace(name, 0).first;
  ++known->second;
}
}  // namespace

extern "C" {

// ---------------------------------------------------------------- test controls

// "delay_us" (per stream operation), "fail_alloc" (the n-th allocation from
// now fails with CUDA_ERROR_OUT_OF_MEMORY), "fault_launch" (the n-th kernel
// launch from now faults: a sticky CUDA_ERROR_ILLEGAL_ADDRESS), "fail_register"
// (the n-th cuMemHostRegister from now fails with CUDA_ERROR_OUT_OF_MEMORY),
// "reset" (clears a sticky error and the armed failures), "clear_findings",
// "hold_memory_lock_ms" (a thread holds the allocations' lock that long, from before
// the call returns: a fork then leaves it locked in the child).
__attribute__((visibility("default"))) int fake_cuda_control(const char* what, long long value) {
  const std::string name = what;
  if (name == "delay_us")
    g_delay_us = value;
  else if (name == "fail_alloc")
    g_fail_alloc_in = value;
  else if (name == "fault_launch")
    g_fail_launch_in = value;
  else if (name == "fail_register")
    g_fail_register_in = value;
  else if (name == "reset")
    g_sticky = CUDA_SUCCESS, g_fail_alloc_in = 0, g_fail_launch_in = 0, g_fail_register_in = 0, g_delay_us = 0;
  else if (name == "clear_findings") {
    std::lock_guard<std::mutex> lock(g_findings_mutex);
    g_findings.clear();
  } else if (name == "hold_memory_lock_ms") {  // returns once the lock is held
    std::promise<void> held;
    std::future<void> holding = held.get_future();
    std::thread([value, held = std::move(held)]() mutable {
      std::lock_guard<std::mutex> lock(g_memory_mutex);
      held.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(value));
    }).detach();
    holding.wait();
  } else
    return -1;
  return 0;
}

// Names what runs now; findings carry it (a test case's name).
__attribute__((visibility("default"))) void fake_cuda_label(const char* label) {
  std::lock_guard<std::mutex> lock(g_findings_mutex);
  g_label = label ? label : "";
}

// The n-th finding so far, or nullptr; the text stays valid until "clear_findings".
__attribute__((visibility("default"))) const char* fake_cuda_finding(long long n) {
  std::lock_guard<std::mutex> lock(g_findings_mutex);
  return n >= 0 && n < static_cast<long long>(g_findings.size()) ? g_findings[static_cast<std::size_t>(n)].c_str()
                                                                 : nullptr;
}

// "device_allocations", "pinned_allocations", "registered_ranges" (live now),
// "launches", "pageable_async_copies", "findings" (so far), "delayed_ops" (taken
// by their stream and waiting out "delay_us" now: the delay they read holds), "retained:N"
// (references to cuda:N's primary context), "calls:NAME" (calls of the driver
// function NAME so far, "calls:" all of them).
__attribute__((visibility("default"))) long long fake_cuda_stat(const char* what) {
  const std::string name = what;
  if (name == "launches") return g_launches.load();
  if (name == "pageable_async_copies") return g_pageable_async.load();
  if (name == "delayed_ops") return g_delayed.load();
  if (name == "dtoh_async_run") return g_dtoh_async_run.load();
  if (name == "findings") {
    std::lock_guard<std::mutex> lock(g_findings_mutex);
    return static_cast<long long>(g_findings.size());
  }
  if (name.rfind("retained:", 0) == 0) return g_retained[std::atoi(name.c_str() + 9) % kMaxDevices].load();
  if (name.rfind("calls:", 0) == 0) {
    std::lock_guard<std::mutex> lock(g_calls_mutex);
    if (name.size() > 6) return g_calls.count(name.substr(6)) ? g_calls[name.substr(6)] : 0;
    long long all = 0;
    for (const auto& entry : g_calls) all += entry.second;
    return all;
  }
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  if (name == "registered_ranges") return static_cast<long long>(g_registered.size());
  long long n = 0;
  for (const auto& entry : g_ranges)
    if (!entry.second.freed && (entry.second.device >= 0) == (name == "device_allocations")) ++n;
  return n;
}

// ---------------------------------------------------------------- driver API

CUresult cuInit(unsigned int) {
  count_call(__func__);
  if (const char* code = std::getenv("FAKE_CUDA_INIT_ERROR")) return static_cast<CUresult>(std::atoi(code));
  if (const char* count = std::getenv("FAKE_CUDA_DEVICES")) g_device_count = std::atoi(count);
  if (g_device_count > kMaxDevices) g_device_count = kMaxDevices;
  if (const char* delay = std::getenv("FAKE_CUDA_DELAY_US")) g_delay_us = std::atoll(delay);
  for (int i = 0; i < kMaxDevices; ++i) g_contexts[i].device = i;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  count_call(__func__);
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** text) {
  switch (error) {
    case CUDA_SUCCESS: *text = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NO_DEVICE: *text = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *text = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *text = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_READY: *text = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *text = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: *text = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"; break;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: *text = "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"; break;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: *text = "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"; break;
    default: *text = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  switch (error) {
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *text = "an illegal memory access was encountered"; break;
    case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      *text = "system has unsupported display driver / cuda driver combination";
      break;
    default: *text = "fake driver error"; break;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  count_call(__func__);
  *count = g_device_count;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  count_call(__func__);
  if (ordinal < 0 || ordinal >= g_device_count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  count_call(__func__);
  std::snprintf(name, static_cast<std::size_t>(len), "Fake CUDA device %d", device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t* bytes, CUdevice) {
  count_call(__func__);
  *bytes = std::size_t{1} << 30;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  count_call(__func__);
  *value = attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int* can, CUdevice, CUdevice) {
  count_call(__func__);
  *can = 1;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  count_call(__func__);
  FAKE_GUARD();
  ++g_retained[device];
  *context = &g_contexts[device];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  count_call(__func__);
  // The last reference destroys the context, and the driver frees its memory.
  if (--g_retained[device] == 0) destroy_context(device);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  count_call(__func__);
  if (!context) return CUDA_ERROR_INVALID_VALUE;
  const std::vector<CUcontext>* stack = context_stack();
  if (!stack) return CUDA_ERROR_INVALID_CONTEXT;
  *context = stack->empty() ? nullptr : stack->back();
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext context) {
  count_call(__func__);
  std::vector<CUcontext>* stack = context_stack();
  if (!stack) return CUDA_ERROR_INVALID_CONTEXT;
  stack->push_back(context);
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext* context) {
  count_call(__func__);
  std::vector<CUcontext>* stack = context_stack();
  if (!stack || stack->empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (context) *context = stack->back();
  stack->pop_back();
  return CUDA_SUCCESS;
}

CUresult cuCtxEnablePeerAccess(CUcontext, unsigned int) {
  count_call(__func__);
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  const int device = current_device();
  std::vector<FakeStream*> streams;
  {
    std::lock_guard<std::mutex> lock(g_stream_mutex);
    for (const auto& entry : g_streams)
      if (entry.second->device() == device) streams.push_back(entry.second);
    ++g_context_syncs;  // another thread's cuStreamDestroy waits until we are done with them
  }
  for (FakeStream* stream : streams) stream->synchronize();
  {
    std::lock_guard<std::mutex> lock(g_stream_mutex);
    --g_context_syncs;
  }
  g_context_syncs_done.notify_all();
  return g_sticky.load();
}

// A page of its own another process can map through /proc/<pid>/fd/<fd> (an
// interprocess event's counts); nullptr when none.
static char* shared_memory(uint64_t bytes, int* fd, uint64_t* mapped) {
  *mapped = (std::max<uint64_t>(bytes, 1) + 4095) / 4096 * 4096;
  *fd = memfd_create("fake-cuda", MFD_CLOEXEC);
  if (*fd < 0) return nullptr;
  void* real = ftruncate(*fd, static_cast<off_t>(*mapped)) == 0
      ? mmap(nullptr, *mapped, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0)
      : MAP_FAILED;
  if (real != MAP_FAILED) return static_cast<char*>(real);
  close(*fd);
  *fd = -1;
  return nullptr;
}

static CUresult allocate(CUdeviceptr* ptr, size_t bytes, FakeStream* ordered_on) {
  FAKE_NEED_CONTEXT();
  if (fail_allocation()) return CUDA_ERROR_OUT_OF_MEMORY;
  // cuMemAlloc memory can be shared with other processes (IPC); a stream-ordered
  // pool's cannot, as with the driver's default pool.
  SharedRegion* region = nullptr;
  uint64_t offset = 0;
  char* real = nullptr;
  if (ordered_on) {
    real = static_cast<char*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
  } else {
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    real = region_allocate(bytes, &region, &offset);
  }
  if (!real) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = reinterpret_cast<CUdeviceptr>(real) ^ kDeviceTag;
  Range range{bytes, current_device(), current_device(), real};
  range.region = region;
  range.offset = offset;
  if (ordered_on) {  // the allocation is a point in the stream's order
    range.stream_ordered = true;
    range.alloc_stream = ordered_on->id();
    range.alloc_seq = ordered_on->submit([] {});
  }
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  g_freed_with_context.erase(*ptr);
  g_released.erase(g_released.lower_bound(*ptr), g_released.lower_bound(*ptr + bytes));  // reused
  auto before = g_released.lower_bound(*ptr);
  if (before != g_released.begin() && std::prev(before)->first + std::prev(before)->second > *ptr)
    g_released.erase(std::prev(before));
  g_ranges[*ptr] = range;
  return CUDA_SUCCESS;
}

// Managed memory: one address for the host and the device, as under a GPU's unified
// addressing. No library call makes it; a test makes it, as a framework would, and
// views it both ways (kDLCUDAManaged and kDLCUDA).
CUresult cuMemAllocManaged(CUdeviceptr* ptr, size_t bytes, unsigned int) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  char* real = static_cast<char*>(std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256));
  if (!real) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = reinterpret_cast<CUdeviceptr>(real);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  g_ranges[*ptr] = Range{bytes, current_device(), current_device(), real};
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
  count_call(__func__);
  return allocate(ptr, bytes, nullptr);
}

CUresult cuMemAllocAsync(CUdeviceptr* ptr, size_t bytes, CUstream stream) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  return allocate(ptr, bytes, stream_of(stream));
}

// A free: with a context current, of memory the driver still has.
static CUresult check_free(uint64_t address, bool device, const char* call) {
  FAKE_GUARD();
  if (!has_current()) {
    finding("%s(%#llx) with no current context (CUDA_ERROR_INVALID_CONTEXT)", call,
            static_cast<unsigned long long>(address));
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  if (g_freed_with_context.count(address)) {
    finding("%s(%#llx) after the primary context that owned it was released (the driver had freed it)", call,
            static_cast<unsigned long long>(address));
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto it = g_ranges.find(address);
  if (it == g_ranges.end() || (it->second.device >= 0) != device) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.imported_refs) {
    finding("%s(%#llx) of memory opened with cuIpcOpenMemHandle (cuIpcCloseMemHandle closes it)", call,
            static_cast<unsigned long long>(address));
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (it->second.freed) {
    finding("%s(%#llx): freed twice", call, static_cast<unsigned long long>(address));
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr ptr) {
  count_call(__func__);
  if (const CUresult status = check_free(ptr, true, "cuMemFree")) return status;
  std::vector<Use> uses;
  {
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    uses = g_ranges[ptr].uses;
  }
  // The driver does not promise to wait for queued work (stream-ordered memory: never).
  for (const Use& use : uses)
    if (!use_finished(use))
      finding("use-after-free: cuMemFree(%#llx) while operation %llu of stream %d, which uses it, is still queued",
              static_cast<unsigned long long>(ptr), static_cast<unsigned long long>(use.seq), use.stream);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  release_locked(g_ranges.find(ptr));
  return CUDA_SUCCESS;
}

CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
  count_call(__func__);
  if (const CUresult status = check_free(ptr, true, "cuMemFreeAsync")) return status;
  FakeStream* s = stream_of(stream);
  {
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    Range& range = g_ranges[ptr];
    if (range.stream_ordered && !s->ordered_after(range.alloc_stream, range.alloc_seq))
      finding("free-before-alloc: cuMemFreeAsync(%#llx) on stream %d is not ordered after its allocation on stream %d",
              static_cast<unsigned long long>(ptr), s->id(), range.alloc_stream);
    for (const Use& use : range.uses)
      if (!s->ordered_after(use.stream, use.seq))
        finding(
            "use-after-free: cuMemFreeAsync(%#llx) on stream %d is not ordered after its use by operation %llu "
            "of stream %d",
            static_cast<unsigned long long>(ptr), s->id(), static_cast<unsigned long long>(use.seq), use.stream);
    range.freed = true;
  }
  s->submit([ptr] {
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    auto it = g_ranges.find(ptr);
    if (it != g_ranges.end()) release_locked(it);
  });
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** pointer, size_t bytes, unsigned int) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  if (fail_allocation()) return CUDA_ERROR_OUT_OF_MEMORY;
  char* real = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  if (!real) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = real;
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  g_freed_with_context.erase(reinterpret_cast<uint64_t>(real));
  g_ranges[reinterpret_cast<uint64_t>(real)] = Range{bytes, -1, current_device(), real};
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* pointer) {
  count_call(__func__);
  const auto address = reinterpret_cast<uint64_t>(pointer);
  if (const CUresult status = check_free(address, false, "cuMemFreeHost")) return status;
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  release_locked(g_ranges.find(address));
  return CUDA_SUCCESS;
}

static CUresult pointer_attribute(void* data, CUpointer_attribute attribute, const Range* range, uint64_t start) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) =
          !range ? 0u : static_cast<unsigned int>(range->device >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = !range ? 0 : range->device < 0 ? range->context : range->device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = range ? start : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = range ? range->size : 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:  // the default pool's, for cuMemAllocAsync memory
      *static_cast<CUmemoryPool*>(data) =
          range && range->stream_ordered ? reinterpret_cast<CUmemoryPool>(&g_ranges) : nullptr;
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  count_call(__func__);
  FAKE_GUARD();
  uint64_t start = 0;
  const Range* range = find_range(ptr, 1, &start);
  if (!range) {  // as the driver answers for pageable memory: an error in every trace
    finding(
        "cuPointerGetAttribute(%#llx) on memory the driver does not know: CUDA_ERROR_INVALID_VALUE "
        "(cuPointerGetAttributes answers without an error)",
        static_cast<unsigned long long>(ptr));
    return CUDA_ERROR_INVALID_VALUE;
  }
  return pointer_attribute(data, attribute, range, start);
}

// Unknown memory is no error: every attribute reads as zero, as the driver documents.
CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr) {
  count_call(__func__);
  FAKE_GUARD();
  uint64_t start = 0;
  const Range* range = find_range(ptr, 1, &start);
  for (unsigned int i = 0; i < count; ++i)
    if (const CUresult status = pointer_attribute(data[i], attributes[i], range, start)) return status;
  return CUDA_SUCCESS;
}

// The registration holding [address, address + bytes) (caller holds g_memory_mutex), or nullptr.
static Registered* find_registered_locked(uint64_t address, uint64_t bytes) {
  auto it = g_registered.upper_bound(address);
  if (it == g_registered.begin()) return nullptr;
  --it;
  return address + bytes <= it->first + it->second.size ? &it->second : nullptr;
}

// Host memory that is not page-locked (allocated so, or registered) makes the real
// driver copy synchronously, through its own staging: counted, and waited for.
// A registered range records the copy, for cuMemHostUnregister's check.
static bool pinned_host(const void* pointer, size_t bytes, FakeStream* stream, uint64_t seq) {
  const Range* range = find_range(reinterpret_cast<uint64_t>(pointer), bytes);
  if (range && range->device < 0) return true;
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  if (Registered* registered = find_registered_locked(reinterpret_cast<uint64_t>(pointer), bytes)) {
    std::vector<Use>& uses = registered->uses;
    if (uses.size() >= 64)  // a reused staging block: forget the copies that ran
      uses.erase(std::remove_if(uses.begin(), uses.end(), use_finished), uses.end());
    uses.push_back({stream->id(), seq});
    return true;
  }
  if (bytes) ++g_pageable_async;
  return false;
}

CUresult cuMemHostRegister(void* pointer, size_t bytes, unsigned int) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  if (!pointer || !bytes) return CUDA_ERROR_INVALID_VALUE;
  int64_t n = g_fail_register_in.load();
  while (n > 0 && !g_fail_register_in.compare_exchange_weak(n, n - 1)) {
  }
  if (n == 1) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto start = reinterpret_cast<uint64_t>(pointer);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  auto overlaps = [&](uint64_t begin, uint64_t size) { return begin < start + bytes && start < begin + size; };
  for (const auto& entry : g_ranges)  // already page-locked by cuMemHostAlloc: refused, as on the H100
    if (entry.second.device < 0 && !entry.second.freed && overlaps(entry.first, entry.second.size))
      return CUDA_ERROR_INVALID_VALUE;
  for (const auto& entry : g_registered)
    if (overlaps(entry.first, entry.second.size)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  g_registered[start] = Registered{bytes, current_device(), {}};
  g_unregistered_with_context.erase(start);
  return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void* pointer) {
  count_call(__func__);
  FAKE_GUARD();
  const auto start = reinterpret_cast<uint64_t>(pointer);
  if (!has_current()) {
    finding("cuMemHostUnregister(%#llx) with no current context (CUDA_ERROR_INVALID_CONTEXT)",
            static_cast<unsigned long long>(start));
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  std::vector<Use> uses;
  {
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    if (g_unregistered_with_context.count(start)) {
      finding("cuMemHostUnregister(%#llx) after the primary context that registered it was released",
              static_cast<unsigned long long>(start));
      return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    auto it = g_registered.find(start);
    if (it == g_registered.end()) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    uses = std::move(it->second.uses);
    g_registered.erase(it);
  }
  for (const Use& use : uses)
    if (!use_finished(use))
      finding("cuMemHostUnregister(%#llx) while a copy queued on stream %d still uses the memory",
              static_cast<unsigned long long>(start), use.stream);
  return CUDA_SUCCESS;
}

// A copy between host bytes and device bytes that are the same memory (managed memory
// seen both ways): the DMA may run in any order, as an overlapping DtoD's.
static void same_bytes_both_ways(const char* call, const void* host, CUdeviceptr device, size_t bytes) {
  const char* at = static_cast<const char*>(host);
  const char* real = real_of(device);
  if (bytes && at < real + bytes && real < at + bytes)
    finding("%s: the host bytes [%p, +%zu) and the device bytes [%#llx, +%zu) are the same memory", call, host, bytes,
            static_cast<unsigned long long>(device), bytes);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  if (used_after_free(dst, bytes, "cuMemcpyHtoDAsync") || !checked_device(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
  same_bytes_both_ways("cuMemcpyHtoDAsync", src, dst, bytes);
  FakeStream* s = stream_of(stream);
  const uint64_t seq = s->submit([=] {
    if (!present_device(dst, bytes)) return fault();  // freed before the copy ran: a GPU faults
    std::memcpy(real_of(dst), src, bytes);
  });
  if (bytes) note_use(dst, s, seq, "cuMemcpyHtoDAsync");
  if (!pinned_host(src, bytes, s, seq)) s->synchronize();
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  if (used_after_free(src, bytes, "cuMemcpyDtoHAsync") || !checked_device(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  same_bytes_both_ways("cuMemcpyDtoHAsync", dst, src, bytes);
  FakeStream* s = stream_of(stream);
  const uint64_t seq = s->submit([=] {
    ++g_dtoh_async_run;
    if (!present_device(src, bytes)) return fault();
    std::memcpy(dst, real_of(src), bytes);
  });
  if (bytes) note_use(src, s, seq, "cuMemcpyDtoHAsync");
  if (!pinned_host(dst, bytes, s, seq)) s->synchronize();
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  if (used_after_free(dst, bytes, "cuMemcpyDtoDAsync") || used_after_free(src, bytes, "cuMemcpyDtoDAsync") ||
      !checked_device(dst, bytes) || !checked_device(src, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  if (dst != src && dst < src + bytes && src < dst + bytes)  // the driver's copy may run in any order
    finding("cuMemcpyDtoDAsync: the source [%#llx, +%zu) and destination [%#llx, +%zu) overlap",
            static_cast<unsigned long long>(src), bytes, static_cast<unsigned long long>(dst), bytes);
  FakeStream* s = stream_of(stream);
  const uint64_t seq = s->submit([=] {
    if (!present_device(dst, bytes) || !present_device(src, bytes)) return fault();
    std::memmove(real_of(dst), real_of(src), bytes);
  });
  if (bytes) {
    note_use(dst, s, seq, "cuMemcpyDtoDAsync");
    note_use(src, s, seq, "cuMemcpyDtoDAsync");
  }
  return CUDA_SUCCESS;
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, size_t bytes, CUstream stream) {
  count_call(__func__);
  return cuMemcpyDtoDAsync(dst, src, bytes, stream);
}

CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  *stream = reinterpret_cast<CUstream>(new FakeStream(current_device()));
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream stream) {
  count_call(__func__);
  FakeStream* s = stream_of(stream);
  s->synchronize();
  if (s != default_stream(s->device())) delete s;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  count_call(__func__);
  FAKE_GUARD();
  stream_of(stream)->synchronize();
  return g_sticky.load();
}

CUresult cuStreamGetCtx(CUstream stream, CUcontext* context) {
  count_call(__func__);
  FAKE_GUARD();
  // Anything the fake did not create is not a stream (the real driver may crash instead).
  if (reinterpret_cast<uintptr_t>(stream) < 4096) return CUDA_ERROR_INVALID_HANDLE;
  *context = &g_contexts[stream_of(stream)->device()];
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
  auto made = std::make_unique<CUevent_st>();
  if (flags & CU_EVENT_INTERPROCESS) {
    uint64_t mapped = 0;
    char* page = shared_memory(sizeof(SharedEventCounts), &made->state->fd, &mapped);
    made->state->shared = reinterpret_cast<SharedEventCounts*>(page);
    if (!made->state->shared) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *event = made.release();
  return CUDA_SUCCESS;
}

// Whether an interprocess event's record `target` has completed; an event whose
// exporting process has exited counts as complete (its work is gone).
static bool shared_event_done(const EventState& state, uint64_t target) {
  if (state.shared->completed.load() >= target) return true;
  return state.remote_pid && kill(state.remote_pid, 0) != 0 && errno == ESRCH;
}

static void wait_shared_event(const EventState& state, uint64_t target) {
  while (!shared_event_done(state, target) && g_sticky.load() == CUDA_SUCCESS)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

// Waits, with `lock` on state.mutex, until record `target` has completed or a
// sticky error struck. After a fault the streams run nothing more, so that record
// never completes and no one notifies the waiter: as the driver returns the sticky
// error from a wait, the waiter looks at it again every millisecond.
static void wait_for_record(EventState& state, std::unique_lock<std::mutex>& lock, uint64_t target) {
  while (!state.done.wait_for(lock, std::chrono::milliseconds(1),
                              [&] { return state.completed >= target || g_sticky.load() != CUDA_SUCCESS; })) {
  }
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  FakeStream* s = stream_of(stream);
  std::shared_ptr<EventState> state = event->state;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    generation = state->shared ? (state->recorded = state->shared->recorded.fetch_add(1) + 1) : ++state->recorded;
    state->clock = s->clock();
  }
  s->submit([state, generation] {
    std::lock_guard<std::mutex> lock(state->mutex);
    if (state->completed < generation) state->completed = generation;
    if (state->shared) {
      uint64_t seen = state->shared->completed.load();
      while (seen < generation && !state->shared->completed.compare_exchange_weak(seen, generation)) {
      }
    }
    state->done.notify_all();
  });
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event) {
  count_call(__func__);
  FAKE_GUARD();
  EventState& state = *event->state;
  if (state.shared)
    return shared_event_done(state, state.shared->recorded.load()) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.completed >= state.recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent event) {
  count_call(__func__);
  FAKE_GUARD();
  EventState& state = *event->state;
  if (state.shared) {
    wait_shared_event(state, state.shared->recorded.load());
    return g_sticky.load();
  }
  std::unique_lock<std::mutex> lock(state.mutex);
  wait_for_record(state, lock, state.recorded);
  return g_sticky.load();
}

CUresult cuEventDestroy(CUevent event) {
  count_call(__func__);
  delete event;  // queued records and waits keep the state alive
  return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  std::shared_ptr<EventState> state = event->state;
  if (state->shared && state->remote_pid) {  // another process's event: only its counts are shared
    const uint64_t target = state->shared->recorded.load();
    stream_of(stream)->submit([state, target] { wait_shared_event(*state, target); });
    return CUDA_SUCCESS;
  }
  uint64_t target;
  Clock clock;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    target = state->recorded;
    clock = state->clock;
  }
  FakeStream* s = stream_of(stream);
  s->order_after(clock);
  s->submit([state, target] {
    std::unique_lock<std::mutex> lock(state->mutex);
    wait_for_record(*state, lock, target);
  });
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- IPC

// What a fake IPC handle holds (CU_IPC_HANDLE_SIZE bytes): the exporting process,
// the memfd behind the memory or event there and its inode (so a closed fd whose
// number was reused is never mistaken for it); for memory, where the allocation
// lies in that region and its generation (so freed or reused memory is refused).
struct FakeIpcHandle {
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t inode;
  uint64_t bytes;
  uint64_t offset;
  uint64_t generation;
};
static_assert(sizeof(FakeIpcHandle) <= CU_IPC_HANDLE_SIZE, "a fake IPC handle must fit the driver's");
constexpr char kIpcMagic[8] = "fakeipc";

static bool fill_ipc_handle(char* out, int fd, uint64_t bytes, uint64_t offset = 0, uint64_t generation = 0) {
  struct stat facts {};
  if (fstat(fd, &facts) != 0) return false;
  FakeIpcHandle handle{};
  std::memcpy(handle.magic, kIpcMagic, sizeof kIpcMagic);
  handle.pid = getpid();
  handle.fd = fd;
  handle.inode = facts.st_ino;
  handle.bytes = bytes;
  handle.offset = offset;
  handle.generation = generation;
  std::memset(out, 0, CU_IPC_HANDLE_SIZE);
  std::memcpy(out, &handle, sizeof handle);
  return true;
}

// The exporter's memfd opened here: CUDA_ERROR_INVALID_VALUE for bytes that are no
// handle, CUDA_ERROR_INVALID_CONTEXT in the exporting process itself (a finding:
// the driver refuses it), CUDA_ERROR_INVALID_HANDLE when the exporter has exited
// or closed it.
static CUresult open_ipc_handle(const char* bytes, const char* call, FakeIpcHandle* handle, int* fd) {
  std::memcpy(handle, bytes, sizeof *handle);
  if (std::memcmp(handle->magic, kIpcMagic, sizeof kIpcMagic) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (handle->pid == getpid()) {
    finding("%s of a handle exported by this same process (the driver refuses it: CUDA_ERROR_INVALID_CONTEXT)", call);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  const std::string path = "/proc/" + std::to_string(handle->pid) + "/fd/" + std::to_string(handle->fd);
  *fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  struct stat facts {};
  if (*fd >= 0 && fstat(*fd, &facts) == 0 && facts.st_ino == handle->inode) return CUDA_SUCCESS;
  if (*fd >= 0) close(*fd);
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  auto it = g_ranges.find(ptr);
  if (it == g_ranges.end()) {
    if (find_locked(ptr, 1))
      finding("cuIpcGetMemHandle(%#llx): not the base of an allocation (the driver exports whole allocations)",
              static_cast<unsigned long long>(ptr));
    return CUDA_ERROR_INVALID_VALUE;
  }
  const Range& range = it->second;
  // On the H100 (driver 580) this returns CUDA_ERROR_INVALID_VALUE, and compute-sanitizer
  // counts the failed call as an error: callers ask CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE first.
  if (range.stream_ordered)
    finding(
        "cuIpcGetMemHandle(%#llx): memory from a stream-ordered pool has no IPC handle (the driver refuses it "
        "and compute-sanitizer reports the call); check CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE first",
        static_cast<unsigned long long>(ptr));
  // Pool memory (cuMemAllocAsync), imported mappings and host memory cannot be exported.
  if (range.device < 0 || range.freed || !range.region) return CUDA_ERROR_INVALID_VALUE;
  const auto* header = reinterpret_cast<const AllocationHeader*>(range.real - kPage);
  return fill_ipc_handle(handle->reserved, range.region->fd, range.size, range.offset, header->generation)
      ? CUDA_SUCCESS
      : CUDA_ERROR_MAP_FAILED;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr* ptr, CUipcMemHandle bytes, unsigned int flags) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  if (flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) return CUDA_ERROR_INVALID_VALUE;
  FakeIpcHandle handle;
  int fd = -1;
  if (const CUresult status = open_ipc_handle(bytes.reserved, "cuIpcOpenMemHandle", &handle, &fd)) return status;
  const std::string key = std::to_string(handle.pid) + ":" + std::to_string(handle.fd) + ":" +
      std::to_string(handle.inode) + ":" + std::to_string(handle.offset) + ":" + std::to_string(handle.generation);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  for (auto& entry : g_ranges)  // opened before in this context: one more reference, the same pointer
    if (entry.second.imported_refs && entry.second.ipc_key == key && entry.second.context == current_device()) {
      close(fd);
      ++entry.second.imported_refs;
      *ptr = entry.first;
      return CUDA_SUCCESS;
    }
  // The allocation and its header page, which must still hold the handle's generation.
  const uint64_t mapped = kPage + pages_for(handle.bytes);
  struct stat facts {};
  if (handle.offset < kPage || handle.offset % kPage || handle.generation == 0 || fstat(fd, &facts) != 0 ||
      handle.offset - kPage + mapped > static_cast<uint64_t>(facts.st_size)) {
    close(fd);
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* window =
      mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(handle.offset - kPage));
  close(fd);  // the mapping keeps the memory
  if (window == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  const auto* header = static_cast<const AllocationHeader*>(window);
  if (header->generation != handle.generation || header->bytes != handle.bytes) {
    munmap(window, mapped);
    return CUDA_ERROR_INVALID_HANDLE;  // the exporter freed it (and may have reused the place)
  }
  char* real = static_cast<char*>(window) + kPage;
  *ptr = reinterpret_cast<CUdeviceptr>(real) ^ kDeviceTag;
  Range range{handle.bytes, current_device(), current_device(), real};
  range.mapped = mapped;
  range.imported_refs = 1;
  range.ipc_key = key;
  g_released.erase(g_released.lower_bound(*ptr), g_released.lower_bound(*ptr + handle.bytes));
  g_ranges[*ptr] = range;
  return CUDA_SUCCESS;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr ptr) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  std::vector<Use> uses;
  {
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    auto it = g_ranges.find(ptr);
    if (it == g_ranges.end() || it->second.imported_refs == 0) {
      finding(
          "cuIpcCloseMemHandle(%#llx) of memory cuIpcOpenMemHandle did not return (or closed more often than "
          "opened)",
          static_cast<unsigned long long>(ptr));
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (--it->second.imported_refs > 0) return CUDA_SUCCESS;
    uses = it->second.uses;
  }
  for (const Use& use : uses)
    if (!use_finished(use))
      finding(
          "use-after-close: cuIpcCloseMemHandle(%#llx) while operation %llu of stream %d, which uses it, is "
          "still queued",
          static_cast<unsigned long long>(ptr), static_cast<unsigned long long>(use.seq), use.stream);
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  release_locked(g_ranges.find(ptr));
  return CUDA_SUCCESS;
}

CUresult cuIpcGetEventHandle(CUipcEventHandle* handle, CUevent event) {
  count_call(__func__);
  FAKE_GUARD();
  const EventState& state = *event->state;
  if (!state.shared || state.remote_pid) return CUDA_ERROR_INVALID_VALUE;  // not CU_EVENT_INTERPROCESS
  return fill_ipc_handle(handle->reserved, state.fd, sizeof(SharedEventCounts)) ? CUDA_SUCCESS : CUDA_ERROR_MAP_FAILED;
}

CUresult cuIpcOpenEventHandle(CUevent* event, CUipcEventHandle bytes) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  FakeIpcHandle handle;
  int fd = -1;
  if (const CUresult status = open_ipc_handle(bytes.reserved, "cuIpcOpenEventHandle", &handle, &fd)) return status;
  void* counts = mmap(nullptr, sizeof(SharedEventCounts), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (counts == MAP_FAILED) {
    close(fd);
    return CUDA_ERROR_MAP_FAILED;
  }
  auto opened = std::make_unique<CUevent_st>();
  opened->state->shared = static_cast<SharedEventCounts*>(counts);
  opened->state->fd = fd;
  opened->state->remote_pid = handle.pid;
  *event = opened.release();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {
  count_call(__func__);
  if (device < 0 || device >= g_device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::memset(uuid->bytes, 0, sizeof uuid->bytes);
  std::memcpy(uuid->bytes, "fake-gpu-", 9);
  uuid->bytes[9] = static_cast<char>('0' + device % kMaxDevices);  // one digit: kMaxDevices is 8
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  uint32_t magic = 0;
  std::memcpy(&magic, image, sizeof magic);
  if (magic != 0xBA55ED50u) return CUDA_ERROR_INVALID_IMAGE;  // not a fatbin
  static CUmod_st modules[kMaxDevices];
  *module = &modules[current_device()];
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule) {
  count_call(__func__);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule, const char* name) {
  count_call(__func__);
  static CUfunc_st kernels[5] = {{0}, {1}, {2}, {3}, {4}};
  for (int k = 0; k < 4; ++k)
    if (std::strcmp(name, abr::cuda::kCopyKernelNames[k]) == 0) return *function = &kernels[k], CUDA_SUCCESS;
  if (std::strcmp(name, abr::cuda::kCastKernelName) == 0) return *function = &kernels[4], CUDA_SUCCESS;
  return CUDA_ERROR_NOT_FOUND;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int, unsigned int, unsigned int, unsigned int block_x,
                        unsigned int, unsigned int, unsigned int, CUstream stream, void** params, void**) {
  count_call(__func__);
  FAKE_NEED_CONTEXT();
  if (block_x == 0 || block_x > 1024) return CUDA_ERROR_INVALID_VALUE;
  ++g_launches;
  // Parameters are copied at launch, as the driver does.
  const CUdeviceptr src = *static_cast<CUdeviceptr*>(params[0]);
  const CUdeviceptr dst = *static_cast<CUdeviceptr*>(params[1]);
  const abr::cuda::WalkParams walk = *static_cast<abr::cuda::WalkParams*>(params[2]);
  const int kernel = function->kernel;
  const int32_t from = kernel == 4 ? *static_cast<int32_t*>(params[3]) : 0;
  const int32_t to = kernel == 4 ? *static_cast<int32_t*>(params[4]) : 0;
  int64_t n = g_fail_launch_in.load();
  while (n > 0 && !g_fail_launch_in.compare_exchange_weak(n, n - 1)) {
  }
  const bool faults = n == 1;
  if (walk.count > 0 && !faults) {
    used_after_free(src + walk.src_first, 1, "cuLaunchKernel (source)");
    used_after_free(dst + walk.dst_first, 1, "cuLaunchKernel (destination)");
    // A GPU's threads read and write at once: where the two sides share bytes the result is
    // a race, where this element-by-element loop would look right.
    const std::size_t src_item = kernel < 4 ? (std::size_t{1} << kernel) * walk.units : (dtype_of(from).bits + 7) / 8;
    const std::size_t dst_item = kernel < 4 ? src_item : (dtype_of(to).bits + 7) / 8;
    if (walk_reads_what_it_writes(src, dst, walk, src_item, dst_item))
      finding("cuLaunchKernel: the walk from %#llx reads bytes it writes from %#llx: the threads race",
              static_cast<unsigned long long>(src), static_cast<unsigned long long>(dst));
  }
  FakeStream* s = stream_of(stream);
  const uint64_t seq = s->submit([=] {
    if (faults) return fault();
    run_kernel(kernel, src, dst, walk, from, to);
  });
  if (walk.count > 0 && !faults) {  // the allocations the walk starts in
    note_use(src + walk.src_first, s, seq, "cuLaunchKernel (source)");
    note_use(dst + walk.dst_first, s, seq, "cuLaunchKernel (destination)");
  }
  return CUDA_SUCCESS;
}

}  // extern "C"

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
// Kernels are emulated on the host with the library's own host cast.
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../cuda/kernel_params.hpp"
#include "../../lib/host_cast.hpp"

struct CUctx_st { int device; };
struct CUmod_st { int unused; };
struct CUfunc_st { int kernel; };  // 0..3: abr_copy_{1,2,4,8}; 4: abr_cast
struct CUevent_st {
  std::mutex mutex;
  std::condition_variable done;
  uint64_t recorded = 0;   // generation of the last record
  uint64_t completed = 0;  // generation the stream has reached
};

namespace {

constexpr uint64_t kDeviceTag = uint64_t{1} << 62;
constexpr int kMaxDevices = 8;

std::atomic<CUresult> g_sticky{CUDA_SUCCESS};
std::atomic<int64_t> g_delay_us{0};
std::atomic<int64_t> g_fail_alloc_in{0};  // the n-th allocation from now fails; 0: none
std::atomic<int64_t> g_launches{0};
std::atomic<int64_t> g_fail_launch_in{0};  // the n-th launch from now faults (sticky)
int g_device_count = 2;
CUctx_st g_contexts[kMaxDevices];
int g_retained[kMaxDevices];

struct Range {
  uint64_t size;
  int device;  // -1: page-locked host memory
  char* real;
};
std::mutex g_memory_mutex;
// By start address (device addresses tagged). Never destroyed: what a lost device
// leaves allocated stays reachable, as the real driver keeps it until exit.
std::map<uint64_t, Range>& g_ranges = *new std::map<uint64_t, Range>;

thread_local std::vector<CUcontext> t_current;

char* real_of(CUdeviceptr address) { return reinterpret_cast<char*>(address ^ kDeviceTag); }

// The live range holding [address, address + bytes), or nullptr.
const Range* find_range(uint64_t address, uint64_t bytes, uint64_t* start = nullptr) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  auto it = g_ranges.upper_bound(address);
  if (it == g_ranges.begin()) return nullptr;
  --it;
  if (address + bytes > it->first + it->second.size || address < it->first) return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

bool checked_device(CUdeviceptr address, uint64_t bytes) {
  if (bytes == 0) return true;
  const Range* range = find_range(address, bytes);
  return range && range->device >= 0;
}

bool fail_allocation() {
  int64_t n = g_fail_alloc_in.load();
  while (n > 0 && !g_fail_alloc_in.compare_exchange_weak(n, n - 1)) {
  }
  return n == 1;
}

int current_device() { return t_current.empty() ? -1 : t_current.back()->device; }

// A stream: a worker thread running operations in order.
class FakeStream {
 public:
  explicit FakeStream(int device) : device_(device), worker_([this] { run(); }) {}
  ~FakeStream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }
  int device() const { return device_; }
  void submit(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ops_.push_back(std::move(op));
      ++submitted_;
    }
    wake_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = submitted_;
    idle_.wait(lock, [&] { return finished_ >= target; });
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
      if (const int64_t delay = g_delay_us.load()) std::this_thread::sleep_for(std::chrono::microseconds(delay));
      if (g_sticky.load() == CUDA_SUCCESS) op();  // after a fault nothing runs any more
      lock.lock();
      ++finished_;
      idle_.notify_all();
    }
  }

  int device_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> ops_;
  uint64_t submitted_ = 0, finished_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

std::mutex g_stream_mutex;
FakeStream* g_default[kMaxDevices];  // the legacy / per-thread stream of each device

FakeStream* default_stream(int device) {
  std::lock_guard<std::mutex> lock(g_stream_mutex);
  if (!g_default[device]) g_default[device] = new FakeStream(device);  // lives until exit
  return g_default[device];
}

FakeStream* stream_of(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
    return default_stream(current_device() < 0 ? 0 : current_device());
  return reinterpret_cast<FakeStream*>(stream);
}

void fault() { g_sticky.store(CUDA_ERROR_ILLEGAL_ADDRESS); }

#define FAKE_GUARD()                                            \
  do {                                                          \
    if (g_sticky.load() != CUDA_SUCCESS) return g_sticky.load(); \
  } while (0)
#define FAKE_NEED_CONTEXT()                                 \
  do {                                                      \
    FAKE_GUARD();                                           \
    if (t_current.empty()) return CUDA_ERROR_INVALID_CONTEXT; \
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
    if (!checked_device(src + s, src_size) || !checked_device(dst + d, dst_size)) return fault();
    if (cast) cast(real_of(src + s), 0, real_of(dst + d), 0, 1);
    else std::memcpy(real_of(dst + d), real_of(src + s), src_size);
  }
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------- test controls

// "delay_us" (per stream operation), "fail_alloc" (the n-th allocation from
// now fails with CUDA_ERROR_OUT_OF_MEMORY), "fault_launch" (the n-th kernel
// launch from now faults: a sticky CUDA_ERROR_ILLEGAL_ADDRESS), "reset" (clears
// a sticky error and the armed failures).
__attribute__((visibility("default"))) int fake_cuda_control(const char* what, long long value) {
  const std::string name = what;
  if (name == "delay_us") g_delay_us = value;
  else if (name == "fail_alloc") g_fail_alloc_in = value;
  else if (name == "fault_launch") g_fail_launch_in = value;
  else if (name == "reset") g_sticky = CUDA_SUCCESS, g_fail_alloc_in = 0, g_fail_launch_in = 0, g_delay_us = 0;
  else return -1;
  return 0;
}

// "device_allocations", "pinned_allocations" (live now), "launches" (so far).
__attribute__((visibility("default"))) long long fake_cuda_stat(const char* what) {
  const std::string name = what;
  if (name == "launches") return g_launches.load();
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  long long n = 0;
  for (const auto& entry : g_ranges)
    if ((entry.second.device >= 0) == (name == "device_allocations")) ++n;
  return n;
}

// ---------------------------------------------------------------- driver API

CUresult cuInit(unsigned int) {
  if (const char* code = std::getenv("FAKE_CUDA_INIT_ERROR")) return static_cast<CUresult>(std::atoi(code));
  if (const char* count = std::getenv("FAKE_CUDA_DEVICES")) g_device_count = std::atoi(count);
  if (g_device_count > kMaxDevices) g_device_count = kMaxDevices;
  if (const char* delay = std::getenv("FAKE_CUDA_DELAY_US")) g_delay_us = std::atoll(delay);
  for (int i = 0; i < kMaxDevices; ++i) g_contexts[i].device = i;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
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
  *count = g_device_count;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= g_device_count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  std::snprintf(name, static_cast<std::size_t>(len), "Fake CUDA device %d", device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = std::size_t{1} << 30;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  *value = attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int* can, CUdevice, CUdevice) {
  *can = 1;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  FAKE_GUARD();
  ++g_retained[device];
  *context = &g_contexts[device];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  --g_retained[device];
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext context) {
  t_current.push_back(context);
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext* context) {
  if (t_current.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (context) *context = t_current.back();
  t_current.pop_back();
  return CUDA_SUCCESS;
}

CUresult cuCtxEnablePeerAccess(CUcontext, unsigned int) { return CUDA_SUCCESS; }

CUresult cuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
  FAKE_NEED_CONTEXT();
  if (fail_allocation()) return CUDA_ERROR_OUT_OF_MEMORY;
  char* real = static_cast<char*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
  if (!real) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = reinterpret_cast<CUdeviceptr>(real) ^ kDeviceTag;
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  g_ranges[*ptr] = Range{bytes, current_device(), real};
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr ptr) {
  FAKE_GUARD();
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  auto it = g_ranges.find(ptr);
  if (it == g_ranges.end() || it->second.device < 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(it->second.real);
  g_ranges.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocAsync(CUdeviceptr* ptr, size_t bytes, CUstream) { return cuMemAlloc(ptr, bytes); }

CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
  FAKE_NEED_CONTEXT();
  if (!find_range(ptr, 1)) return CUDA_ERROR_INVALID_VALUE;
  stream_of(stream)->submit([ptr] { cuMemFree(ptr); });
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** pointer, size_t bytes, unsigned int) {
  FAKE_NEED_CONTEXT();
  if (fail_allocation()) return CUDA_ERROR_OUT_OF_MEMORY;
  char* real = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  if (!real) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = real;
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  g_ranges[reinterpret_cast<uint64_t>(real)] = Range{bytes, -1, real};
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* pointer) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  auto it = g_ranges.find(reinterpret_cast<uint64_t>(pointer));
  if (it == g_ranges.end() || it->second.device >= 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(it->second.real);
  g_ranges.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  FAKE_GUARD();
  uint64_t start = 0;
  const Range* range = find_range(ptr, 1, &start);
  if (!range) return CUDA_ERROR_INVALID_VALUE;  // as the driver answers for pageable memory
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = range->device >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = range->device < 0 ? 0 : range->device; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = start; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = range->size; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

// Host memory that is not page-locked makes the real driver copy synchronously.
static bool pinned_host(const void* pointer, size_t bytes) {
  const Range* range = find_range(reinterpret_cast<uint64_t>(pointer), bytes);
  return range && range->device < 0;
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  FAKE_NEED_CONTEXT();
  if (!checked_device(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
  FakeStream* s = stream_of(stream);
  s->submit([=] { std::memcpy(real_of(dst), src, bytes); });
  if (!pinned_host(src, bytes)) s->synchronize();
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  FAKE_NEED_CONTEXT();
  if (!checked_device(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  FakeStream* s = stream_of(stream);
  s->submit([=] { std::memcpy(dst, real_of(src), bytes); });
  if (!pinned_host(dst, bytes)) s->synchronize();
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  FAKE_NEED_CONTEXT();
  if (!checked_device(dst, bytes) || !checked_device(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  stream_of(stream)->submit([=] { std::memmove(real_of(dst), real_of(src), bytes); });
  return CUDA_SUCCESS;
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, size_t bytes, CUstream stream) {
  return cuMemcpyDtoDAsync(dst, src, bytes, stream);
}

CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  FAKE_NEED_CONTEXT();
  *stream = reinterpret_cast<CUstream>(new FakeStream(current_device()));
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream stream) {
  FakeStream* s = stream_of(stream);
  s->synchronize();
  if (s != default_stream(s->device())) delete s;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  FAKE_GUARD();
  stream_of(stream)->synchronize();
  return g_sticky.load();
}

CUresult cuStreamGetCtx(CUstream stream, CUcontext* context) {
  FAKE_GUARD();
  // Anything the fake did not create is not a stream (the real driver may crash instead).
  if (reinterpret_cast<uintptr_t>(stream) < 4096) return CUDA_ERROR_INVALID_HANDLE;
  *context = &g_contexts[stream_of(stream)->device()];
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* event, unsigned int) {
  FAKE_NEED_CONTEXT();
  *event = new CUevent_st;
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  FAKE_NEED_CONTEXT();
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    generation = ++event->recorded;
  }
  stream_of(stream)->submit([event, generation] {
    std::lock_guard<std::mutex> lock(event->mutex);
    if (event->completed < generation) event->completed = generation;
    event->done.notify_all();
  });
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event) {
  FAKE_GUARD();
  std::lock_guard<std::mutex> lock(event->mutex);
  return event->completed >= event->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent event) {
  FAKE_GUARD();
  std::unique_lock<std::mutex> lock(event->mutex);
  const uint64_t target = event->recorded;
  event->done.wait(lock, [&] { return event->completed >= target || g_sticky.load() != CUDA_SUCCESS; });
  return g_sticky.load();
}

CUresult cuEventDestroy(CUevent event) {
  // Work still waiting to complete the event holds it: destroy only once it has.
  {
    std::unique_lock<std::mutex> lock(event->mutex);
    event->done.wait_for(lock, std::chrono::seconds(10), [&] { return event->completed >= event->recorded; });
  }
  delete event;
  return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  FAKE_NEED_CONTEXT();
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    target = event->recorded;
  }
  stream_of(stream)->submit([event, target] {
    std::unique_lock<std::mutex> lock(event->mutex);
    event->done.wait(lock, [&] { return event->completed >= target || g_sticky.load() != CUDA_SUCCESS; });
  });
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  FAKE_NEED_CONTEXT();
  uint32_t magic = 0;
  std::memcpy(&magic, image, sizeof magic);
  if (magic != 0xBA55ED50u) return CUDA_ERROR_INVALID_IMAGE;  // not a fatbin
  static CUmod_st modules[kMaxDevices];
  *module = &modules[current_device()];
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }

CUresult cuModuleGetFunction(CUfunction* function, CUmodule, const char* name) {
  static CUfunc_st kernels[5] = {{0}, {1}, {2}, {3}, {4}};
  for (int k = 0; k < 4; ++k)
    if (std::strcmp(name, abr::cuda::kCopyKernelNames[k]) == 0) return *function = &kernels[k], CUDA_SUCCESS;
  if (std::strcmp(name, abr::cuda::kCastKernelName) == 0) return *function = &kernels[4], CUDA_SUCCESS;
  return CUDA_ERROR_NOT_FOUND;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int, unsigned int, unsigned int, unsigned int block_x,
                        unsigned int, unsigned int, unsigned int, CUstream stream, void** params, void**) {
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
  stream_of(stream)->submit([=] {
    if (faults) return fault();
    run_kernel(kernel, src, dst, walk, from, to);
  });
  return CUDA_SUCCESS;
}

}  // extern "C"

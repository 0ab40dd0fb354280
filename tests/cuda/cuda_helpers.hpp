// Helpers for the CUDA tests: the fake driver's controls when it is the one
// loaded, and host <-> device round trips through the C API.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/failing_new.hpp"
#include "tests/support/helpers.hpp"

// A driver entry point's exported name: cuda.h maps names to their ABI version
// (cuMemAlloc -> cuMemAlloc_v2), so the name is expanded before it is quoted.
#define ABR_TEST_CUDA_SYMBOL_NAME(name) #name
#define ABR_TEST_CUDA_SYMBOL(name) ABR_TEST_CUDA_SYMBOL_NAME(name)

namespace test {

constexpr DLDevice cuda0{kDLCUDA, 0}, cuda1{kDLCUDA, 1}, cuda_host{kDLCUDAHost, 0};

// The fake driver's test controls, or nulls for a real driver (or before any
// runtime has loaded the fake).
struct Fake {
  int (*control)(const char*, long long) = nullptr;
  long long (*stat)(const char*) = nullptr;
  const char* (*finding)(long long) = nullptr;
  void* handle = nullptr;
  Fake() {
    const char* path = std::getenv("ARRAYBRIDGE_CUDA_LIBRARY");
    handle = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    if (!handle) return;
    control = reinterpret_cast<int (*)(const char*, long long)>(dlsym(handle, "fake_cuda_control"));
    stat = reinterpret_cast<long long (*)(const char*)>(dlsym(handle, "fake_cuda_stat"));
    finding = reinterpret_cast<const char* (*)(long long)>(dlsym(handle, "fake_cuda_finding"));
    dlclose(handle);  // RTLD_NOLOAD took a reference: give it back, the runtime keeps its own
  }
  explicit operator bool() const { return control && stat && finding; }
  // A driver entry point, to act as another library would (a consumer's own stream).
  template <class F>
  F* driver(const char* name) const {
    return reinterpret_cast<F*>(dlsym(handle, name));
  }
};

// The counts of the OpenCL library tests/cuda/opencl_counter, when OpenCL was opened
// through it (main.cpp sets ARRAYBRIDGE_OPENCL_LIBRARY): calls of `name` so far.
struct OpenClCounter {
  long long (*count)(const char*) = nullptr;
  OpenClCounter() {
    const char* path = std::getenv("ARRAYBRIDGE_OPENCL_LIBRARY");
    void* handle = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    if (!handle) return;
    count = reinterpret_cast<long long (*)(const char*)>(dlsym(handle, "opencl_counter"));
    dlclose(handle);
  }
  explicit operator bool() const { return count != nullptr; }
  long long operator()(const char* name) const { return count(name); }
};

// Every stream operation of the fake driver lags by `us` while this lives (nothing
// on a real driver); reset even when a REQUIRE ends the test early.
struct Lag {
  Fake fake;
  explicit Lag(long long us) {
    if (fake) fake.control("delay_us", us);
  }
  ~Lag() {
    if (fake) fake.control("delay_us", 0);
  }
  Lag(const Lag&) = delete;
  Lag& operator=(const Lag&) = delete;
};

// Fixture of every CUDA test: what the fake driver found wrong while the test
// ran (stream-ordered races, frees without a context, failing pointer queries)
// fails it, one CHECK per finding with the finding's text.
struct NoDriverFindings {
  long long before = 0;
  NoDriverFindings() {
    Fake fake;
    if (fake) before = fake.stat("findings");
  }
  ~NoDriverFindings() {
    Fake fake;
    if (!fake) return;
    for (long long n = fake.stat("findings"); before < n; ++before)
      CHECK_MESSAGE(false, "the fake CUDA driver found: " << std::string(fake.finding(before)));
  }
};

// The loaded driver's entry points (the fake's, or a real one's) and a device's
// primary context made current: what another library does with the driver.
struct RawDriver {
  Fake fake;
  decltype(&cuDevicePrimaryCtxRetain) retain =
      fake.driver<decltype(cuDevicePrimaryCtxRetain)>(ABR_TEST_CUDA_SYMBOL(cuDevicePrimaryCtxRetain));
  decltype(&cuDevicePrimaryCtxRelease) release =
      fake.driver<decltype(cuDevicePrimaryCtxRelease)>(ABR_TEST_CUDA_SYMBOL(cuDevicePrimaryCtxRelease));
  decltype(&cuCtxPushCurrent) push = fake.driver<decltype(cuCtxPushCurrent)>(ABR_TEST_CUDA_SYMBOL(cuCtxPushCurrent));
  decltype(&cuCtxPopCurrent) pop = fake.driver<decltype(cuCtxPopCurrent)>(ABR_TEST_CUDA_SYMBOL(cuCtxPopCurrent));
  decltype(&cuCtxSynchronize) sync_context =
      fake.driver<decltype(cuCtxSynchronize)>(ABR_TEST_CUDA_SYMBOL(cuCtxSynchronize));
  decltype(&cuStreamCreate) stream_create = fake.driver<decltype(cuStreamCreate)>(ABR_TEST_CUDA_SYMBOL(cuStreamCreate));
  decltype(&cuStreamDestroy) stream_destroy =
      fake.driver<decltype(cuStreamDestroy)>(ABR_TEST_CUDA_SYMBOL(cuStreamDestroy));
  decltype(&cuStreamSynchronize) stream_sync =
      fake.driver<decltype(cuStreamSynchronize)>(ABR_TEST_CUDA_SYMBOL(cuStreamSynchronize));
  decltype(&cuStreamWaitEvent) wait_event =
      fake.driver<decltype(cuStreamWaitEvent)>(ABR_TEST_CUDA_SYMBOL(cuStreamWaitEvent));
  decltype(&cuEventCreate) event_create = fake.driver<decltype(cuEventCreate)>(ABR_TEST_CUDA_SYMBOL(cuEventCreate));
  decltype(&cuEventRecord) event_record = fake.driver<decltype(cuEventRecord)>(ABR_TEST_CUDA_SYMBOL(cuEventRecord));
  decltype(&cuEventDestroy) event_destroy = fake.driver<decltype(cuEventDestroy)>(ABR_TEST_CUDA_SYMBOL(cuEventDestroy));
  decltype(&cuMemAlloc) alloc = fake.driver<decltype(cuMemAlloc)>(ABR_TEST_CUDA_SYMBOL(cuMemAlloc));
  decltype(&cuMemAllocManaged) alloc_managed =
      fake.driver<decltype(cuMemAllocManaged)>(ABR_TEST_CUDA_SYMBOL(cuMemAllocManaged));
  decltype(&cuMemAllocAsync) alloc_async =
      fake.driver<decltype(cuMemAllocAsync)>(ABR_TEST_CUDA_SYMBOL(cuMemAllocAsync));
  decltype(&cuMemFree) free = fake.driver<decltype(cuMemFree)>(ABR_TEST_CUDA_SYMBOL(cuMemFree));
  decltype(&cuMemFreeAsync) free_async = fake.driver<decltype(cuMemFreeAsync)>(ABR_TEST_CUDA_SYMBOL(cuMemFreeAsync));
  decltype(&cuMemHostAlloc) host_alloc = fake.driver<decltype(cuMemHostAlloc)>(ABR_TEST_CUDA_SYMBOL(cuMemHostAlloc));
  decltype(&cuMemFreeHost) free_host = fake.driver<decltype(cuMemFreeHost)>(ABR_TEST_CUDA_SYMBOL(cuMemFreeHost));
  decltype(&cuMemHostRegister) host_register =
      fake.driver<decltype(cuMemHostRegister)>(ABR_TEST_CUDA_SYMBOL(cuMemHostRegister));
  decltype(&cuMemHostUnregister) host_unregister =
      fake.driver<decltype(cuMemHostUnregister)>(ABR_TEST_CUDA_SYMBOL(cuMemHostUnregister));
  decltype(&cuMemcpyHtoDAsync) upload =
      fake.driver<decltype(cuMemcpyHtoDAsync)>(ABR_TEST_CUDA_SYMBOL(cuMemcpyHtoDAsync));
  decltype(&cuMemcpyDtoDAsync) device_copy =
      fake.driver<decltype(cuMemcpyDtoDAsync)>(ABR_TEST_CUDA_SYMBOL(cuMemcpyDtoDAsync));
  decltype(&cuPointerGetAttribute) attribute =
      fake.driver<decltype(cuPointerGetAttribute)>(ABR_TEST_CUDA_SYMBOL(cuPointerGetAttribute));
  decltype(&cuPointerGetAttributes) attributes =
      fake.driver<decltype(cuPointerGetAttributes)>(ABR_TEST_CUDA_SYMBOL(cuPointerGetAttributes));
  decltype(&cuIpcGetMemHandle) ipc_get =
      fake.driver<decltype(cuIpcGetMemHandle)>(ABR_TEST_CUDA_SYMBOL(cuIpcGetMemHandle));
  decltype(&cuIpcOpenMemHandle) ipc_open =
      fake.driver<decltype(cuIpcOpenMemHandle)>(ABR_TEST_CUDA_SYMBOL(cuIpcOpenMemHandle));
  CUcontext context = nullptr;
  int device_;

  explicit RawDriver(int device = 0) : device_(device) {
    REQUIRE(fake.handle);
    REQUIRE(retain(&context, device) == CUDA_SUCCESS);
    REQUIRE(push(context) == CUDA_SUCCESS);
  }
  ~RawDriver() {
    pop(nullptr);
    release(device_);
  }
  CUstream stream() {
    CUstream s = nullptr;
    REQUIRE(stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    return s;
  }
  // Orders `later` after the work queued on `earlier` so far.
  void order(CUstream earlier, CUstream later) {
    CUevent event = nullptr;
    REQUIRE(event_create(&event, 0) == CUDA_SUCCESS);
    REQUIRE(event_record(event, earlier) == CUDA_SUCCESS);
    REQUIRE(wait_event(later, event, 0) == CUDA_SUCCESS);
    event_destroy(event);
  }
  // The findings since `before`, joined, and clears them all (they are this test's on purpose).
  std::string take_findings(long long before) {
    std::string text;
    for (long long n = before; n < fake.stat("findings"); ++n) text += std::string(fake.finding(n)) + "\n";
    fake.control("clear_findings", 0);
    return text;
  }
};

// The library's warnings while it lives, collected instead of printed: a test checks
// the ones it provokes on purpose (a device lost) or that there are none, and the
// test log shows no unexplained "[arraybridge warning]" lines.
struct CollectedWarnings {
  std::mutex mutex;
  std::vector<std::string> lines;
  CollectedWarnings() { abr_log_set_callback(collect, this); }
  ~CollectedWarnings() { abr_log_set_callback(nullptr, nullptr); }
  static void collect(abr_log_level level, const char* message, void* self) {
    if (level < ABR_LOG_WARN) return;
    auto* w = static_cast<CollectedWarnings*>(self);
    std::lock_guard<std::mutex> lock(w->mutex);
    w->lines.emplace_back(message);
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines.size();
  }
  bool seen(const char* text) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const std::string& line : lines)
      if (line.find(text) != std::string::npos) return true;
    return false;
  }
};

// Number of CUDA devices the runtime found (0 when CUDA is unavailable).
inline int cuda_devices(abr_runtime* rt) {
  struct abr_backend_info info = ABR_BACKEND_INFO_INIT;
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_CUDA, &info) == ABR_OK);
  if (!info.available) MESSAGE("CUDA tests skipped: " << info.detail);
  return info.available ? info.device_count : 0;
}

// start, start + 1, ...: values that show a misplaced element.
inline std::vector<int32_t> iota(std::size_t n, int32_t start = 0) {
  std::vector<int32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<int32_t>(i);
  return v;
}

// Hands an owned tensor on (to a transfer that consumes it).
inline DLManagedTensorVersioned* take(Owned& owned) {
  DLManagedTensorVersioned* t = owned.t;
  owned.t = nullptr;
  return t;
}

// The int32 elements of a 1-D tensor on any device, copied to the host.
inline std::vector<int32_t> read_back(abr_runtime* rt, const DLTensor& tensor) {
  std::vector<int32_t> out(static_cast<std::size_t>(tensor.shape[0]));
  Managed dst(out.data(), i32, {tensor.shape[0]});
  REQUIRE(abr_copy(rt, &tensor, &dst.tensor(), nullptr, nullptr) == ABR_OK);
  return out;
}

// Transfers `src` (consumed on success) to `dst`, requiring success.
inline DLManagedTensorVersioned* move_to(abr_runtime* rt, DLManagedTensorVersioned* src, DLDevice dst,
                                         abr_transfer_report* report = nullptr, abr_stream* stream = nullptr,
                                         DLDataType dtype = {}) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.report = report;
  options.dtype = dtype;
  DLManagedTensorVersioned* out = nullptr;
  const abr_status status = abr_to_device(rt, src, dst, &options, stream, &out);
  INFO(std::string(abr_last_error()));
  REQUIRE(status == ABR_OK);
  return out;
}

}  // namespace test

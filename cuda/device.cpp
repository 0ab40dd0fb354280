#include "cuda/device.hpp"

#include "lib/devices/devices.hpp"
#include "lib/base/fault.hpp"
#include "lib/base/log.hpp"

// The kernels' fatbin, embedded by cuda/fatbin.S.
extern "C" const unsigned char abr_cuda_fatbin[];

namespace abr::cuda {

Device::Device(const Driver& cu, CUdevice handle, int32_t ordinal) : cu_(cu), handle_(handle), ordinal_(ordinal) {}

Device::~Device() {
  const CUcontext context = context_.load();
  if (!context) return;
  // After a sticky error the context is unusable: leave it to process exit
  // rather than risk a hang or an abort in teardown.
  if (!lost()) {
    cu_.cuCtxPushCurrent(context);
    if (const CUstream stream = stream_.load()) cu_.cuStreamDestroy(stream);
    if (ipc_event_) cu_.cuEventDestroy(ipc_event_);
    if (module_) cu_.cuModuleUnload(module_);
    CUcontext popped = nullptr;
    cu_.cuCtxPopCurrent(&popped);
  }
  cu_.cuDevicePrimaryCtxRelease(handle_);
}

CUcontext Device::context() {
  require_alive();
  if (const CUcontext made = context_.load(std::memory_order_acquire)) return made;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!context_.load(std::memory_order_relaxed)) {
    fault::point(ABR_ERR_BACKEND, "CUDA context");
    CUcontext context = nullptr;
    check(cu_.cuDevicePrimaryCtxRetain(&context, handle_), "cuDevicePrimaryCtxRetain");
    context_.store(context, std::memory_order_release);
  }
  return context_.load(std::memory_order_relaxed);
}

CUstream Device::own_stream() {
  if (const CUstream made = stream_.load(std::memory_order_acquire)) return made;
  CUcontext own = context();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!stream_.load(std::memory_order_relaxed)) {
    fault::point(ABR_ERR_BACKEND, "CUDA stream");
    check(cu_.cuCtxPushCurrent(own), "cuCtxPushCurrent");
    CUstream stream = nullptr;
    const CUresult created = cu_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    CUcontext popped = nullptr;
    cu_.cuCtxPopCurrent(&popped);
    check(created, "cuStreamCreate");
    stream_.store(stream, std::memory_order_release);
  }
  return stream_.load(std::memory_order_relaxed);
}

CUevent Device::ipc_event() {
  CUcontext own = context();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ipc_event_) {
    check(cu_.cuCtxPushCurrent(own), "cuCtxPushCurrent");
    CUevent event = nullptr;
    const CUresult created = cu_.cuEventCreate(&event, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
    CUcontext popped = nullptr;
    cu_.cuCtxPopCurrent(&popped);
    check(created, "cuEventCreate (interprocess)");
    ipc_event_ = event;
  }
  return ipc_event_;
}

CUuuid Device::uuid() const {
  CUuuid id{};
  cu_.cuDeviceGetUuid(&id, handle_);  // fails only for a bad device handle: then all zeros, which matches no GPU
  return id;
}

bool Device::has_context() { return context_.load(std::memory_order_acquire) != nullptr; }

CUfunction Device::kernel(const char* name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!module_) {
    CUmodule module = nullptr;
    check(cu_.cuModuleLoadData(&module, abr_cuda_fatbin), "cuModuleLoadData (the embedded sm_80/sm_90/PTX kernels)");
    module_ = module;
    log::debug("loaded the CUDA kernels into {}", device_string(dl_device()));
  }
  CUfunction function = nullptr;
  check(cu_.cuModuleGetFunction(&function, module_, name), name);
  return function;
}

void Device::fail_call(CUresult code, const char* call) {
  const std::string text = error_text(cu_, code);
  if (code == CUDA_ERROR_OUT_OF_MEMORY)
    fail_backend(ABR_ERR_OUT_OF_MEMORY, code, "{} on {} failed: {}", call, device_string(dl_device()), text);
  if (is_sticky(code)) {
    bool expected = false;
    if (!lost_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(lost_mutex_);
      if (lost_reason_.empty()) lost_reason_ = fmt::format("{} failed: {}", call, text);
      lost_.compare_exchange_strong(expected, true, std::memory_order_acq_rel);
      log::warn("{} is lost: {} failed: {}", device_string(dl_device()), call, text);
    }
    fail_backend(ABR_ERR_DEVICE_LOST, code, "{} is lost ({} failed: {}); it stays unusable until the process exits",
                 device_string(dl_device()), call, text);
  }
  fail_backend(ABR_ERR_BACKEND, code, "{} on {} failed: {}", call, device_string(dl_device()), text);
}

void Device::require_alive() const {
  if (lost())
    fail(ABR_ERR_DEVICE_LOST,
         "{} is lost after an earlier sticky error ({}); it stays unusable until the process exits",
         device_string(dl_device()), lost_reason_);
}

Scope::Scope(Device& device) : device_(device) {
  const CUcontext context = device.context();
  CUcontext current = nullptr;
  if (device.cu().cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == context) return;
  device.check(device.cu().cuCtxPushCurrent(context), "cuCtxPushCurrent");
  pushed_ = true;
}

Scope::~Scope() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  device_.cu().cuCtxPopCurrent(&popped);
}

}  // namespace abr::cuda

// One CUDA device as the runtime uses it: its primary context (shared with
// PyTorch, CuPy and JAX, so their pointers are valid here), the kernels loaded
// into it, a stream for work that has none, and its health. A sticky error marks
// the device lost: every later call on it fails fast with ABR_ERR_DEVICE_LOST.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "lib/base/error.hpp"
#include "arraybridge/arraybridge.h"
#include "cuda/driver.hpp"

namespace abr::cuda {

class Device : public std::enable_shared_from_this<Device> {
 public:
  Device(const Driver& cu, CUdevice handle, int32_t ordinal);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Driver& cu() const { return cu_; }
  CUdevice handle() const { return handle_; }
  DLDevice dl_device() const { return {kDLCUDA, ordinal_}; }

  // The primary context, retained on first use (throws when that fails).
  CUcontext context();
  // A non-blocking stream of the runtime's, for transfers given no stream
  // (created in the device's context, whatever context is current).
  CUstream own_stream();
  // A kernel of the embedded fatbin, loaded into the context on first use.
  CUfunction kernel(const char* name);
  // The interprocess event CUDA IPC exports are recorded on (CU_EVENT_INTERPROCESS),
  // made on first use and destroyed with the device: importers open it while the
  // exporting runtime lives. Re-recording it only makes later importers wait longer.
  CUevent ipc_event();
  // The GPU's UUID: the same in every process, whatever its ordinal there.
  CUuuid uuid() const;
  // Whether the primary context was retained (without retaining it).
  bool has_context();

  // Throws for a failed call: ABR_ERR_OUT_OF_MEMORY, ABR_ERR_DEVICE_LOST (and
  // marks the device lost) for a sticky error, ABR_ERR_BACKEND otherwise.
  void check(CUresult code, const char* call) {
    if (code != CUDA_SUCCESS) fail_call(code, call);  // inline: every transfer checks several successes
  }
  // Throws ABR_ERR_DEVICE_LOST when an earlier call hit a sticky error.
  void require_alive() const;
  bool lost() const { return lost_.load(std::memory_order_acquire); }

 private:
  const Driver& cu_;
  CUdevice handle_;
  int32_t ordinal_;
  [[noreturn]] void fail_call(CUresult code, const char* call);

  std::mutex mutex_;  // makes the lazy context, stream and module; check() runs under it
  // Read without the lock once made: every transfer asks for both.
  std::atomic<CUcontext> context_{nullptr};
  std::atomic<CUstream> stream_{nullptr};
  CUmodule module_ = nullptr;
  CUevent ipc_event_ = nullptr;
  std::atomic<bool> lost_{false};
  std::mutex lost_mutex_;    // its own: a sticky error may come from a call made under mutex_
  std::string lost_reason_;  // written once, before lost_ is set
};

// Makes a device's context current on this thread for the scope's lifetime
// (every driver call needs one), and checks the device is not lost. Where it is
// current already (PyTorch, CuPy and JAX leave the primary context current on
// their threads), nothing is pushed: one cheap query instead of a push and a pop.
class Scope {
 public:
  explicit Scope(Device& device);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Device& device_;
  bool pushed_ = false;
};

}  // namespace abr::cuda

// One cl_context the backend works in: its own (one per device, created on first
// use) or a caller's, adopted when a cl_mem or queue from it comes in. Each has an
// in-order queue for synchronous work and caches the programs built for it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "arraybridge/arraybridge.h"
#include "opencl/ref.hpp"

namespace abr::opencl {

class Context : public std::enable_shared_from_this<Context> {
 public:
  // Takes its own reference to `context`; creates an in-order queue on `device`.
  Context(const Api& cl, cl_context context, cl_device_id device, DLDevice dl_device);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Api& api() const { return cl_; }
  cl_context handle() const { return context_.get(); }
  cl_device_id device() const { return device_; }
  DLDevice dl_device() const { return dl_device_; }
  cl_command_queue queue() const { return queue_.get(); }
  bool has_fp64() const { return fp64_; }

  // A new buffer in this context; zero bytes allocate a minimal one (OpenCL has
  // no empty buffers). Throws ABR_ERR_OUT_OF_MEMORY (more than the device's
  // CL_DEVICE_MAX_MEM_ALLOC_SIZE, or the allocation failed) or ABR_ERR_BACKEND.
  MemRef create_buffer(cl_mem_flags flags, std::size_t bytes, void* host = nullptr) const;

  // The program built from source() under `key`: built once, then cached.
  // A build failure throws ABR_ERR_BACKEND with the start of the build log.
  cl_program program(const std::string& key, const std::function<std::string()>& source);

 private:
  const Api& cl_;
  Ref<cl_context> context_;
  cl_device_id device_;
  DLDevice dl_device_;
  Ref<cl_command_queue> queue_;
  bool fp64_ = false;
  cl_ulong max_alloc_ = 0;  // CL_DEVICE_MAX_MEM_ALLOC_SIZE; 0 when the driver does not say
  std::mutex programs_mutex_;
  std::map<std::string, Ref<cl_program>> programs_;
};

// Enqueues a marker and waits for it: everything enqueued on `queue` before has
// completed. Throws ABR_ERR_BACKEND when a command failed.
void drain(const Api& cl, cl_command_queue queue);

}  // namespace abr::opencl

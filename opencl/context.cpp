#include "opencl/context.hpp"

#include <string>

#include "lib/devices/devices.hpp"
#include "lib/base/error.hpp"
#include "lib/base/fault.hpp"
#include "lib/platform/link_namespaces.hpp"
#include "lib/base/log.hpp"
#include "lib/base/text.hpp"
#include "opencl/loader.hpp"

namespace abr::opencl {

Context::Context(const Api& cl, cl_context context, cl_device_id device, DLDevice dl_device)
    : cl_(cl), device_(device), dl_device_(dl_device) {
  check(cl.RetainContext(context), "clRetainContext");
  context_ = Ref<cl_context>(context, cl.ReleaseContext);
  fault::point(ABR_ERR_BACKEND, "OpenCL queue");
  cl_int status = CL_SUCCESS;
  cl_command_queue queue = cl.CreateCommandQueueWithProperties(context, device, nullptr, &status);
  check(status, "clCreateCommandQueueWithProperties");
  queue_ = Ref<cl_command_queue>(queue, cl.ReleaseCommandQueue);
  cl_device_fp_config fp64 = 0;
  fp64_ = cl.GetDeviceInfo(device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, nullptr) == CL_SUCCESS && fp64;
  if (cl.GetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc_, &max_alloc_, nullptr) != CL_SUCCESS)
    max_alloc_ = 0;
}

MemRef Context::create_buffer(cl_mem_flags flags, std::size_t bytes, void* host) const {
  fault::point(ABR_ERR_OUT_OF_MEMORY, "OpenCL buffer");
  // Checked first: drivers answer CL_INVALID_BUFFER_SIZE (PoCL) or fail later, at
  // first use (NVIDIA), and neither names the limit.
  if (max_alloc_ && bytes > max_alloc_)
    fail(ABR_ERR_OUT_OF_MEMORY,
         "cannot allocate {} bytes on {}: one buffer may hold at most {} bytes there "
         "(CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
         bytes, device_string(dl_device_), max_alloc_);
  cl_int status = CL_SUCCESS;
  cl_mem mem = cl_.CreateBuffer(context_.get(), flags, bytes ? bytes : 1, host, &status);
  if (status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES || status == CL_OUT_OF_HOST_MEMORY ||
      status == CL_INVALID_BUFFER_SIZE)
    fail_backend(ABR_ERR_OUT_OF_MEMORY, status, "cannot allocate {} bytes on {}: clCreateBuffer failed: {} ({})", bytes,
                 device_string(dl_device_), error_name(status), status);
  check(status, "clCreateBuffer");
  return MemRef(mem, cl_.ReleaseMemObject);
}

cl_program Context::program(const std::string& key, const std::function<std::string()>& source) {
  std::lock_guard<std::mutex> lock(programs_mutex_);
  auto found = programs_.find(key);
  if (found != programs_.end()) return found->second.get();

  const std::string text = source();
  const char* text_ptr = text.c_str();
  cl_int status = CL_SUCCESS;
  cl_program program = cl_.CreateProgramWithSource(context_.get(), 1, &text_ptr, nullptr, &status);
  check(status, "clCreateProgramWithSource");
  Ref<cl_program> owned(program, cl_.ReleaseProgram);
  status = cl_.BuildProgram(program, 1, &device_, "", nullptr, nullptr);
  if (status != CL_SUCCESS) {
    std::string log(4096, '\0');
    std::size_t size = 0;
    cl_.GetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, log.size(), log.data(), &size);
    log.resize(size ? size - 1 : 0);
    // Another LLVM loaded after a driver built on LLVM in the shared namespace takes
    // over its LLVM (opencl/loader.hpp): PoCL then knows no target CPU. Say which, and
    // the ways out (the loader stays where it was opened for the life of the process).
    std::string late_llvm =
        cl_.private_namespace || log.find("unknown target") == std::string::npos ? "" : foreign_llvm();
    if (!late_llvm.empty())
      late_llvm = fmt::format(
          " ({}'s LLVM, loaded after OpenCL was opened in the shared namespace, breaks the driver's: load it "
          "before arraybridge first opens OpenCL, in a new process{})",
          base_name(late_llvm), cuda_driver_loaded() ? "" : ", or set ARRAYBRIDGE_OPENCL_NAMESPACE=private there");
    fail_backend(ABR_ERR_BACKEND, status, "building the {} kernels for {} failed: {} ({}): {}{}", key,
                 device_string(dl_device_), error_name(status), status, log.substr(0, 400), late_llvm);
  }
  log::debug("built the {} kernels for {}", key, device_string(dl_device_));
  return programs_.emplace(key, std::move(owned)).first->second.get();
}

void drain(const Api& cl, cl_command_queue queue) {
  cl_event marker = nullptr;
  fault::point(ABR_ERR_BACKEND, "OpenCL event");
  check(cl.EnqueueMarkerWithWaitList(queue, 0, nullptr, &marker), "clEnqueueMarkerWithWaitList");
  EventRef owned(marker, cl.ReleaseEvent);
  const cl_int status = cl.WaitForEvents(1, &marker);
  if (status == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) {
    cl_int failed = CL_SUCCESS;
    cl.GetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof failed, &failed, nullptr);
    fail_cl(failed < 0 ? failed : status, "an enqueued OpenCL command");
  }
  check(status, "clWaitForEvents");
}

}  // namespace abr::opencl

// OpenCL helpers for tests: a context and queue of the test's own (a "foreign"
// library as far as the runtime is concerned), buffers with known contents, and
// reads that do not go through libarraybridge.
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <string>
#include <vector>

#include "tests/support/helpers.hpp"

namespace test {

constexpr DLDevice ocl0{kDLOpenCL, 0};

struct ClEnv {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;

  ClEnv() {
    REQUIRE(clGetPlatformIDs(1, &platform, nullptr) == CL_SUCCESS);
    REQUIRE(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr) == CL_SUCCESS);  // opencl:0
    cl_int status = CL_SUCCESS;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &status);
    REQUIRE(status == CL_SUCCESS);
    queue = clCreateCommandQueueWithProperties(context, device, nullptr, &status);
    REQUIRE(status == CL_SUCCESS);
  }
  ~ClEnv() {
    clFinish(queue);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
  }
  ClEnv(const ClEnv&) = delete;

  cl_mem buffer(std::size_t bytes, const void* init = nullptr) const {
    cl_int status = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(context, CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                                const_cast<void*>(init), &status);
    REQUIRE(status == CL_SUCCESS);
    return mem;
  }
};

// A queue of the test's that cannot run anything until open() is called: the
// deterministic way to show that work waits for what it must.
struct GatedQueue {
  cl_event gate = nullptr;
  explicit GatedQueue(const ClEnv& env) {
    cl_int status = CL_SUCCESS;
    gate = clCreateUserEvent(env.context, &status);
    REQUIRE(status == CL_SUCCESS);
    REQUIRE(clEnqueueBarrierWithWaitList(env.queue, 1, &gate, nullptr) == CL_SUCCESS);
  }
  void open() {
    if (gate) clSetUserEventStatus(gate, CL_COMPLETE);
  }
  ~GatedQueue() {
    open();
    clReleaseEvent(gate);
  }
};

// A queue of the runtime's own context on opencl:0 (found from a buffer of its), held
// shut by a user event: work queued on it stays queued until open(), and a stream
// wrapping it keeps what that work reads.
struct RuntimeGatedQueue {
  std::vector<float> seed = std::vector<float>(16, 0.0f);
  Managed seed_src{seed.data(), f32, {16}};
  Owned probe;
  cl_command_queue queue = nullptr;
  cl_event gate = nullptr;
  explicit RuntimeGatedQueue(abr_runtime* rt) : probe(copy_to(rt, &seed_src.managed, ocl0, nullptr)) {
    cl_context context = nullptr;
    REQUIRE(clGetMemObjectInfo(static_cast<cl_mem>(probe->data), CL_MEM_CONTEXT, sizeof context, &context, nullptr) ==
            CL_SUCCESS);
    cl_device_id device_id = nullptr;
    REQUIRE(clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof device_id, &device_id, nullptr) == CL_SUCCESS);
    cl_int status = CL_SUCCESS;
    queue = clCreateCommandQueueWithProperties(context, device_id, nullptr, &status);
    REQUIRE(status == CL_SUCCESS);
    gate = clCreateUserEvent(context, &status);
    REQUIRE(status == CL_SUCCESS);
    REQUIRE(clEnqueueBarrierWithWaitList(queue, 1, &gate, nullptr) == CL_SUCCESS);
  }
  void open() { clSetUserEventStatus(gate, CL_COMPLETE); }
  ~RuntimeGatedQueue() {  // before the runtime goes: the probe is its memory
    open();
    clReleaseEvent(gate);
    clReleaseCommandQueue(queue);
  }
  RuntimeGatedQueue(const RuntimeGatedQueue&) = delete;
  RuntimeGatedQueue& operator=(const RuntimeGatedQueue&) = delete;
};

// Reads bytes of any buffer (the runtime's or the test's) with a queue of its own context.
inline std::vector<char> read_mem(cl_mem mem, std::size_t offset, std::size_t bytes) {
  cl_context context = nullptr;
  REQUIRE(clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof context, &context, nullptr) == CL_SUCCESS);
  cl_device_id device = nullptr;
  REQUIRE(clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof device, &device, nullptr) == CL_SUCCESS);
  cl_int status = CL_SUCCESS;
  cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, nullptr, &status);
  REQUIRE(status == CL_SUCCESS);
  std::vector<char> out(bytes);
  if (bytes)
    REQUIRE(clEnqueueReadBuffer(queue, mem, CL_TRUE, offset, bytes, out.data(), 0, nullptr, nullptr) == CL_SUCCESS);
  clReleaseCommandQueue(queue);
  return out;
}

inline std::size_t mem_size(cl_mem mem) {
  std::size_t size = 0;
  clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, nullptr);
  return size;
}

// The runtime's OpenCL devices, with what tests choose them by: opencl:0 is
// whatever platform the ICD loader lists first (NVIDIA's on a GPU machine, PoCL here).
struct OclDevice {
  DLDevice device;
  bool shares_host_memory;
  std::string platform, name;
  abr_backend backend;
  uint64_t memory_bytes;
};
inline std::vector<OclDevice> opencl_devices(abr_runtime* rt) {
  std::vector<OclDevice> found;
  int32_t count = 0;
  REQUIRE(abr_device_count(rt, &count) == ABR_OK);
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    REQUIRE(abr_device_info(rt, i, &info) == ABR_OK);
    if (info.device.device_type == kDLOpenCL)
      found.push_back({info.device, (info.flags & ABR_DEVICE_SHARES_HOST_MEMORY) != 0, info.platform, info.name,
                       info.backend, info.memory_bytes});
  }
  return found;
}

// The first OpenCL device that shares host memory (PoCL, which the test set-up
// installs), or nothing with a message saying why its test part is skipped.
inline bool opencl_sharing_host_memory(abr_runtime* rt, DLDevice* out) {
  for (const OclDevice& d : opencl_devices(rt))
    if (d.shares_host_memory) return *out = d.device, true;
  MESSAGE("no OpenCL device shares host memory here: the in-place cases are skipped");
  return false;
}

// Moves a tensor to `device`, expecting success; checks the report's path (and
// hands its detail line back when asked).
inline DLManagedTensorVersioned* move_to(abr_runtime* rt, DLManagedTensorVersioned* src, DLDevice device,
                                         abr_copy_mode copy, abr_path expected, DLDataType dtype = {},
                                         std::string* detail = nullptr) {
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = copy;
  options.dtype = dtype;
  options.report = &report;
  DLManagedTensorVersioned* out = nullptr;
  const abr_status status = abr_to_device(rt, src, device, &options, nullptr, &out);
  REQUIRE_MESSAGE(status == ABR_OK, std::string(abr_last_error()));
  CHECK_MESSAGE(report.path == expected, report.detail);
  if (detail) *detail = report.detail;
  return out;
}

}  // namespace test

// Raw OpenCL for the bench's baselines: a failed call ends the bench with its code,
// and a queue of the bench's own in the context of a buffer the runtime made.
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <cstdio>
#include <cstdlib>

#include "bench/bench.hpp"

namespace bench {

inline void check_cl(cl_int status, const char* what) {
  if (status != CL_SUCCESS) {
    progress_clear();
    std::fprintf(stderr, "arraybridge-bench: %s failed: %d\n", what, status);
    std::exit(1);
  }
}

// A queue in the context of a buffer the runtime made, for the raw baselines.
struct RawQueue {
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  explicit RawQueue(cl_mem mem) {
    check_cl(clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof context, &context, nullptr), "clGetMemObjectInfo");
    cl_device_id device = nullptr;
    check_cl(clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof device, &device, nullptr), "clGetContextInfo");
    cl_int status = CL_SUCCESS;
    queue = clCreateCommandQueueWithProperties(context, device, nullptr, &status);
    check_cl(status, "clCreateCommandQueueWithProperties");
  }
  ~RawQueue() { clReleaseCommandQueue(queue); }
  cl_device_id device() const {
    cl_device_id id = nullptr;
    check_cl(clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof id, &id, nullptr), "clGetCommandQueueInfo");
    return id;
  }
};

}  // namespace bench

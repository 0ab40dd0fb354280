// An OpenCL library that counts how the runtime waits, opened where the ICD loader
// would be (ARRAYBRIDGE_OPENCL_LIBRARY; tests/cuda/main.cpp sets it). It defines the
// calls it counts and forwards them to the real loader, which it needs (DT_NEEDED):
// every other entry point the runtime asks this library for is found there.
// On an H100 a one-chunk OpenCL -> CUDA copy of 4-16 KiB took about 300 us,
// against 25 us at 64 KiB and 18 us for the naive blocking read plus a CUDA copy: its
// read was queued without blocking and waited for through its event.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>

#include <atomic>
#include <cstring>

namespace {

enum Counter { kBlockingReads, kQueuedReads, kBlockingWrites, kQueuedWrites, kEventWaits, kMarkers, kCounters };
const char* const kNames[kCounters] = {"blocking_reads", "queued_reads", "blocking_writes",
                                       "queued_writes",  "event_waits",  "markers"};
std::atomic<long long> counts[kCounters];

// The loader's own entry point of that name.
template <class F>
F real(const char* name) {
  static void* loader = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  return loader ? reinterpret_cast<F>(dlsym(loader, name)) : nullptr;
}

}  // namespace

extern "C" {

// How many calls of `name` (one of kNames) so far; -1 for a name not counted.
long long opencl_counter(const char* name) {
  for (int c = 0; c < kCounters; ++c)
    if (std::strcmp(name, kNames[c]) == 0) return counts[c].load();
  return -1;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue queue, cl_mem buffer, cl_bool blocking,
                                                    size_t offset, size_t size, void* ptr, cl_uint waits,
                                                    const cl_event* wait_list, cl_event* event) {
  static const auto forward = real<decltype(&clEnqueueReadBuffer)>("clEnqueueReadBuffer");
  ++counts[blocking ? kBlockingReads : kQueuedReads];
  return forward(queue, buffer, blocking, offset, size, ptr, waits, wait_list, event);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue queue, cl_mem buffer, cl_bool blocking,
                                                     size_t offset, size_t size, const void* ptr, cl_uint waits,
                                                     const cl_event* wait_list, cl_event* event) {
  static const auto forward = real<decltype(&clEnqueueWriteBuffer)>("clEnqueueWriteBuffer");
  ++counts[blocking ? kBlockingWrites : kQueuedWrites];
  return forward(queue, buffer, blocking, offset, size, ptr, waits, wait_list, event);
}

CL_API_ENTRY cl_int CL_API_CALL clWaitForEvents(cl_uint n, const cl_event* events) {
  static const auto forward = real<decltype(&clWaitForEvents)>("clWaitForEvents");
  ++counts[kEventWaits];
  return forward(n, events);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueMarkerWithWaitList(cl_command_queue queue, cl_uint waits,
                                                            const cl_event* wait_list, cl_event* event) {
  static const auto forward = real<decltype(&clEnqueueMarkerWithWaitList)>("clEnqueueMarkerWithWaitList");
  ++counts[kMarkers];
  return forward(queue, waits, wait_list, event);
}

}  // extern "C"

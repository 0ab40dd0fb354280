// The OpenCL API, reached through the ICD loader opened at run time (never linked),
// so libarraybridge loads and works on machines without OpenCL.
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <memory>
#include <string>

#include "opencl/loader.hpp"

// X-macro of every entry point the backend uses (OpenCL 2.0 names: the ICD
// loader exports them even when a platform is older).
// The entry points grouped as the driver's headers group them, kept as written.
// clang-format off
#define ABR_OPENCL_ENTRY_POINTS(X) \
  X(GetPlatformIDs) X(GetPlatformInfo) X(GetDeviceIDs) X(GetDeviceInfo) \
  X(CreateContext) X(RetainContext) X(ReleaseContext) X(GetContextInfo) \
  X(CreateCommandQueueWithProperties) X(RetainCommandQueue) X(ReleaseCommandQueue) X(GetCommandQueueInfo) X(Flush) X(Finish) \
  X(CreateBuffer) X(RetainMemObject) X(ReleaseMemObject) X(GetMemObjectInfo) X(SetMemObjectDestructorCallback) \
  X(EnqueueReadBuffer) X(EnqueueWriteBuffer) X(EnqueueCopyBuffer) X(EnqueueMapBuffer) X(EnqueueUnmapMemObject) \
  X(EnqueueMarkerWithWaitList) X(EnqueueBarrierWithWaitList) X(WaitForEvents) X(GetEventInfo) X(ReleaseEvent) \
  X(CreateProgramWithSource) X(BuildProgram) X(GetProgramBuildInfo) X(ReleaseProgram) \
  X(CreateKernel) X(ReleaseKernel) X(SetKernelArg) X(EnqueueNDRangeKernel)
// clang-format on

namespace abr::opencl {

// The entry points the backend uses, resolved from the loader by name.
struct Api {
#define ABR_OPENCL_MEMBER(name) decltype(&::cl##name) name;
  ABR_OPENCL_ENTRY_POINTS(ABR_OPENCL_MEMBER)
#undef ABR_OPENCL_MEMBER
  std::string library;             // what was opened, for messages
  bool private_namespace = false;  // in a link-map namespace of its own (opencl/loader.hpp)
  std::string where;               // which namespace and why, for the backend's detail
};

// Opens `path` where `policy` says (opencl/loader.hpp) and resolves every entry
// point; nullptr with `reason` on failure.
std::unique_ptr<Api> load_api(const char* path, NamespacePolicy policy, std::string* reason);

// The process-wide API from $ARRAYBRIDGE_OPENCL_LIBRARY or libOpenCL.so.1, opened
// where $ARRAYBRIDGE_OPENCL_NAMESPACE says, once and kept for the life of the process (deleters may run at exit).
const Api* api(std::string* reason);

// "CL_INVALID_MEM_OBJECT" for -38; "CL_UNKNOWN_ERROR" otherwise.
const char* error_name(cl_int code);

// Throws ABR_ERR_BACKEND: "<call> failed: CL_INVALID_MEM_OBJECT (-38)".
[[noreturn]] void fail_cl(cl_int code, const char* call);

// fail_cl unless `code` is CL_SUCCESS.
inline void check(cl_int code, const char* call) {
  if (code != CL_SUCCESS) fail_cl(code, call);
}

}  // namespace abr::opencl

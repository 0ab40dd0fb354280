// The OpenCL API, reached through the ICD loader opened at run time (never linked),
// so libarraybridge loads and works on machines without OpenCL.
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <memory>
#include <string>

namespace abr::opencl {

// The entry points the backend uses, resolved from the loader by name.
struct Api {
  decltype(&::clGetPlatformIDs) GetPlatformIDs;
  decltype(&::clGetPlatformInfo) GetPlatformInfo;
  decltype(&::clGetDeviceIDs) GetDeviceIDs;
  decltype(&::clGetDeviceInfo) GetDeviceInfo;
  std::string library;  // what was opened, for messages
};

// Opens `path` and resolves every entry point; nullptr with `reason` on failure.
std::unique_ptr<Api> load_api(const char* path, std::string* reason);

// The process-wide API from $ARRAYBRIDGE_OPENCL_LIBRARY or libOpenCL.so.1, opened
// once and kept for the life of the process (deleters may run at exit).
const Api* api(std::string* reason);

// "CL_INVALID_MEM_OBJECT" for -38; "CL_UNKNOWN_ERROR" otherwise.
const char* error_name(cl_int code);

// Throws ABR_ERR_BACKEND: "<call> failed: CL_INVALID_MEM_OBJECT (-38)".
[[noreturn]] void fail_cl(cl_int code, const char* call);

}  // namespace abr::opencl

// An OpenCL library whose devices say they have no double precision, as many
// integrated and mobile GPUs (Intel Xe and Arc, Apple, Mali) say: opened where the
// ICD loader would be (ARRAYBRIDGE_OPENCL_LIBRARY), it answers clGetDeviceInfo's
// CL_DEVICE_DOUBLE_FP_CONFIG with 0 and leaves cl_khr_fp64 out of the extensions,
// and forwards everything else to the real loader, which it needs (DT_NEEDED).
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>

#include <cstring>
#include <string>

extern "C" CL_API_ENTRY cl_int CL_API_CALL clGetDeviceInfo(cl_device_id device, cl_device_info what, size_t size,
                                                           void* value, size_t* size_ret) {
  static void* loader = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  static const auto forward =
      loader ? reinterpret_cast<decltype(&clGetDeviceInfo)>(dlsym(loader, "clGetDeviceInfo")) : nullptr;
  if (!forward) return CL_INVALID_DEVICE;
  if (what == CL_DEVICE_DOUBLE_FP_CONFIG) {
    if (size_ret) *size_ret = sizeof(cl_device_fp_config);
    if (!value) return CL_SUCCESS;
    if (size < sizeof(cl_device_fp_config)) return CL_INVALID_VALUE;
    const cl_device_fp_config none = 0;
    std::memcpy(value, &none, sizeof none);
    return CL_SUCCESS;
  }
  if (what != CL_DEVICE_EXTENSIONS) return forward(device, what, size, value, size_ret);
  size_t length = 0;
  cl_int status = forward(device, what, 0, nullptr, &length);
  if (status != CL_SUCCESS) return status;
  std::string text(length, '\0');
  status = forward(device, what, length, text.data(), nullptr);
  if (status != CL_SUCCESS) return status;
  text.resize(std::strlen(text.c_str()));
  for (std::size_t at; (at = text.find("cl_khr_fp64")) != std::string::npos;) text.erase(at, 11);
  if (size_ret) *size_ret = text.size() + 1;
  if (!value) return CL_SUCCESS;
  if (size < text.size() + 1) return CL_INVALID_VALUE;
  std::memcpy(value, text.c_str(), text.size() + 1);
  return CL_SUCCESS;
}

#include "opencl/api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "lib/base/error.hpp"
#include "lib/base/settings.hpp"
#include "opencl/loader.hpp"

namespace abr::opencl {

std::unique_ptr<Api> load_api(const char* path, NamespacePolicy policy, std::string* reason) {
  OpenedLoader opened = open_loader(path, policy, reason);
  if (!opened.handle) return nullptr;
  void* handle = opened.handle;
  auto api = std::make_unique<Api>();
  api->library = path;
  api->private_namespace = opened.private_namespace;
  api->where = std::move(opened.where);
  bool complete = true;
  auto resolve = [&](auto& entry, const char* name) {
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(dlsym(handle, name));
    if (!entry && complete) {
      *reason = fmt::format("{} has no {}", path, name);
      complete = false;
    }
  };
#define ABR_OPENCL_RESOLVE(name) resolve(api->name, "cl" #name);
  ABR_OPENCL_ENTRY_POINTS(ABR_OPENCL_RESOLVE)
#undef ABR_OPENCL_RESOLVE
  if (!complete) {
    dlclose(handle);
    return nullptr;
  }
  return api;  // the handle stays open on purpose: the API is used until exit
}

const Api* api(std::string* reason) {
  static std::once_flag once;
  // Never freed, as the CUDA driver's table (cuda/driver.cpp): a runtime alive at exit
  // may still call OpenCL while exit frees the statics.
  static const Api* loaded = nullptr;
  static const std::string* failure = nullptr;
  std::call_once(once, [] {
    std::string why;
    NamespacePolicy policy = NamespacePolicy::Auto;
    if (namespace_policy(&policy, &why)) {
      const char* path = settings::opencl_library();
      loaded = load_api(path && *path ? path : "libOpenCL.so.1", policy, &why).release();
    }
    failure = new std::string(std::move(why));
  });
  if (!loaded && reason) *reason = *failure;
  return loaded;
}

const char* error_name(cl_int code) {
  switch (code) {
#define ABR_CL_ERROR(name) \
  case name: return #name;
    ABR_CL_ERROR(CL_SUCCESS)
    ABR_CL_ERROR(CL_DEVICE_NOT_FOUND)
    ABR_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    ABR_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    ABR_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    ABR_CL_ERROR(CL_OUT_OF_RESOURCES)
    ABR_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
    ABR_CL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE)
    ABR_CL_ERROR(CL_MEM_COPY_OVERLAP)
    ABR_CL_ERROR(CL_IMAGE_FORMAT_MISMATCH)
    ABR_CL_ERROR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    ABR_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    ABR_CL_ERROR(CL_MAP_FAILURE)
    ABR_CL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    ABR_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    ABR_CL_ERROR(CL_COMPILE_PROGRAM_FAILURE)
    ABR_CL_ERROR(CL_LINKER_NOT_AVAILABLE)
    ABR_CL_ERROR(CL_LINK_PROGRAM_FAILURE)
    ABR_CL_ERROR(CL_DEVICE_PARTITION_FAILED)
    ABR_CL_ERROR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    ABR_CL_ERROR(CL_INVALID_VALUE)
    ABR_CL_ERROR(CL_INVALID_DEVICE_TYPE)
    ABR_CL_ERROR(CL_INVALID_PLATFORM)
    ABR_CL_ERROR(CL_INVALID_DEVICE)
    ABR_CL_ERROR(CL_INVALID_CONTEXT)
    ABR_CL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
    ABR_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
    ABR_CL_ERROR(CL_INVALID_HOST_PTR)
    ABR_CL_ERROR(CL_INVALID_MEM_OBJECT)
    ABR_CL_ERROR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    ABR_CL_ERROR(CL_INVALID_IMAGE_SIZE)
    ABR_CL_ERROR(CL_INVALID_SAMPLER)
    ABR_CL_ERROR(CL_INVALID_BINARY)
    ABR_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
    ABR_CL_ERROR(CL_INVALID_PROGRAM)
    ABR_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    ABR_CL_ERROR(CL_INVALID_KERNEL_NAME)
    ABR_CL_ERROR(CL_INVALID_KERNEL_DEFINITION)
    ABR_CL_ERROR(CL_INVALID_KERNEL)
    ABR_CL_ERROR(CL_INVALID_ARG_INDEX)
    ABR_CL_ERROR(CL_INVALID_ARG_VALUE)
    ABR_CL_ERROR(CL_INVALID_ARG_SIZE)
    ABR_CL_ERROR(CL_INVALID_KERNEL_ARGS)
    ABR_CL_ERROR(CL_INVALID_WORK_DIMENSION)
    ABR_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    ABR_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    ABR_CL_ERROR(CL_INVALID_GLOBAL_OFFSET)
    ABR_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
    ABR_CL_ERROR(CL_INVALID_EVENT)
    ABR_CL_ERROR(CL_INVALID_OPERATION)
    ABR_CL_ERROR(CL_INVALID_GL_OBJECT)
    ABR_CL_ERROR(CL_INVALID_BUFFER_SIZE)
    ABR_CL_ERROR(CL_INVALID_MIP_LEVEL)
    ABR_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
    ABR_CL_ERROR(CL_INVALID_PROPERTY)
    ABR_CL_ERROR(CL_INVALID_IMAGE_DESCRIPTOR)
    ABR_CL_ERROR(CL_INVALID_COMPILER_OPTIONS)
    ABR_CL_ERROR(CL_INVALID_LINKER_OPTIONS)
    ABR_CL_ERROR(CL_INVALID_DEVICE_PARTITION_COUNT)
    ABR_CL_ERROR(CL_INVALID_PIPE_SIZE)
    ABR_CL_ERROR(CL_INVALID_DEVICE_QUEUE)
    ABR_CL_ERROR(CL_INVALID_SPEC_ID)
    ABR_CL_ERROR(CL_MAX_SIZE_RESTRICTION_EXCEEDED)
#undef ABR_CL_ERROR
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL_UNKNOWN_ERROR";
  }
}

void fail_cl(cl_int code, const char* call) {
  fail_backend(code == CL_OUT_OF_HOST_MEMORY ? ABR_ERR_OUT_OF_MEMORY : ABR_ERR_BACKEND, code, "{} failed: {} ({})",
               call, error_name(code), code);
}

}  // namespace abr::opencl

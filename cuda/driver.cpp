#include "cuda/driver.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "lib/base/settings.hpp"
#include "lib/platform/link_namespaces.hpp"

namespace abr::cuda {

// Two steps so that cuda.h's version macros expand before the name is quoted.
#define ABR_CUDA_SYMBOL_NAME(name) #name
#define ABR_CUDA_SYMBOL(name) ABR_CUDA_SYMBOL_NAME(name)

std::unique_ptr<Driver> load_driver(const char* path, const std::string& namespace_taken, std::string* reason) {
  if (!namespace_taken
           .empty()) {  // its libc would overwrite the driver's pthread keys (lib/platform/link_namespaces.hpp)
    *reason = fmt::format(
        "the CUDA driver is not loaded beside {}: that namespace's own libc would overwrite the driver's pthread "
        "keys, which crashes it",
        namespace_taken);
    return nullptr;
  }
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    *reason = fmt::format("cannot load the CUDA driver {} ({})", path, why ? why : "unknown error");
    return nullptr;
  }
  auto cu = std::make_unique<Driver>();
  cu->library = path;
  bool complete = true;
  auto resolve = [&](auto& entry, const char* name) {
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(dlsym(handle, name));
    if (!entry && complete) {
      // Every CUDA driver there was has cuInit: a library without it is no CUDA driver.
      *reason = std::strcmp(name, "cuInit") == 0
          ? fmt::format("{} is no CUDA driver (it has no cuInit)", path)
          : fmt::format("the CUDA driver {} has no {} (too old: this library needs CUDA 11.2 or newer)", path, name);
      complete = false;
    }
  };
#define ABR_CUDA_RESOLVE(name) resolve(cu->name, ABR_CUDA_SYMBOL(name));
  ABR_CUDA_ENTRY_POINTS(ABR_CUDA_RESOLVE)
#undef ABR_CUDA_RESOLVE
  if (!complete) {
    dlclose(handle);
    return nullptr;
  }
  // cuInit fails without a device or with a driver/kernel-module mismatch: its
  // code and text are the reason users need to see.
  const CUresult init = cu->cuInit(0);
  if (init != CUDA_SUCCESS) {
    *reason = fmt::format("cuInit failed: {}", error_text(*cu, init));
    return nullptr;  // the handle stays open: unloading a half-initialised driver is not safe
  }
  cu->cuDriverGetVersion(&cu->version);
  return cu;  // the handle stays open on purpose: the driver is used until exit
}

const Driver* driver(std::string* reason) {
  static std::once_flag once;
  // Never freed, as the library it points into is never closed: a runtime the process
  // never destroys (Python's) has threads that call the driver while exit frees the
  // statics (tests/cuda/test_exit.cpp).
  static const Driver* loaded = nullptr;
  static const std::string* failure = nullptr;
  std::call_once(once, [] {
    const char* path = settings::cuda_library();
    std::string why;
    loaded = load_driver(path && *path ? path : "libcuda.so.1", private_namespace(), &why).release();
    failure = new std::string(std::move(why));
  });
  if (!loaded && reason) *reason = *failure;
  return loaded;
}

std::string error_text(const Driver& cu, CUresult code) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cu.cuGetErrorName(code, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_UNKNOWN_CODE";
  if (cu.cuGetErrorString(code, &text) != CUDA_SUCCESS || !text) text = "no description";
  return fmt::format("{} ({}): {}", name, static_cast<int>(code), text);
}

bool is_sticky(CUresult code) {
  switch (code) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return true;
    default: return false;
  }
}

}  // namespace abr::cuda

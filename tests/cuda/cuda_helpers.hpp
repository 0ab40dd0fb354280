// Helpers for the CUDA tests: the fake driver's controls when it is the one
// loaded, and host <-> device round trips through the C API.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "../unit/helpers.hpp"

namespace test {

constexpr DLDevice cuda0{kDLCUDA, 0}, cuda1{kDLCUDA, 1}, cuda_host{kDLCUDAHost, 0};

// The fake driver's test controls, or nulls for a real driver.
struct Fake {
  int (*control)(const char*, long long) = nullptr;
  long long (*stat)(const char*) = nullptr;
  Fake() {
    const char* path = std::getenv("ARRAYBRIDGE_CUDA_LIBRARY");
    void* handle = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    if (!handle) return;
    control = reinterpret_cast<int (*)(const char*, long long)>(dlsym(handle, "fake_cuda_control"));
    stat = reinterpret_cast<long long (*)(const char*)>(dlsym(handle, "fake_cuda_stat"));
    dlclose(handle);  // RTLD_NOLOAD took a reference: give it back, the runtime keeps its own
  }
  explicit operator bool() const { return control && stat; }
};

// Number of CUDA devices the runtime found (0 when CUDA is unavailable).
inline int cuda_devices(abr_runtime* rt) {
  struct abr_backend_info info{};
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_CUDA, &info) == ABR_OK);
  if (!info.available) MESSAGE("CUDA tests skipped: " << info.detail);
  return info.available ? info.device_count : 0;
}

// Transfers `src` (consumed on success) to `dst`, requiring success.
inline DLManagedTensorVersioned* move_to(abr_runtime* rt, DLManagedTensorVersioned* src, DLDevice dst,
                                         abr_transfer_report* report = nullptr, abr_stream* stream = nullptr,
                                         DLDataType dtype = {}) {
  abr_transfer_options options;
  abr_transfer_options_init(&options);
  options.report = report;
  options.dtype = dtype;
  DLManagedTensorVersioned* out = nullptr;
  const abr_status status = abr_to_device(rt, src, dst, &options, stream, &out);
  INFO(abr_last_error());
  REQUIRE(status == ABR_OK);
  return out;
}

}  // namespace test

// Runtime and device entry points.
#include <cstring>

#include "capi/handles.hpp"
#include "capi/struct_versions.hpp"
#include "lib/base/enum_value.hpp"

using abr::capi::guarded;
using abr::capi::kBackendInfo;
using abr::capi::kDeviceInfo;
using abr::capi::kRuntimeOptions;
using abr::capi::require_pointer;
using abr::capi::runtime_of;

extern "C" {

abr_status abr_runtime_options_init(abr_runtime_options* options, unsigned int version) {
  return guarded(__func__, [&] { abr::capi::init_versioned(options, version, kRuntimeOptions); });
}

abr_status abr_runtime_create(const abr_runtime_options* options, abr_runtime** out) {
  return guarded(__func__, [&] {
    require_pointer(out, "out");
    *out = nullptr;
    abr_runtime_options current{};
    if (options) current = abr::capi::read_versioned(options, kRuntimeOptions);
    *out = new abr_runtime(options ? &current : nullptr);
  });
}

void abr_runtime_destroy(abr_runtime* runtime) {
  if (runtime && runtime->magic == abr_runtime::kAlive) delete runtime;
}

abr_status abr_runtime_set_staging(abr_runtime* runtime, uint32_t threads, uint64_t chunk_bytes) {
  return guarded(__func__, [&] { runtime_of(runtime).set_staging({threads, chunk_bytes}); });
}

abr_status abr_device_count(abr_runtime* runtime, int32_t* count) {
  return guarded(__func__, [&] { *require_pointer(count, "count") = runtime_of(runtime).devices().count(); });
}

abr_status abr_device_info_init(struct abr_device_info* info, unsigned int version) {
  return guarded(__func__, [&] { abr::capi::init_versioned(info, version, kDeviceInfo); });
}

abr_status abr_backend_info_init(struct abr_backend_info* info, unsigned int version) {
  return guarded(__func__, [&] { abr::capi::init_versioned(info, version, kBackendInfo); });
}

abr_status abr_device_info(abr_runtime* runtime, int32_t index, struct abr_device_info* info) {
  return guarded(__func__, [&] {
    abr::Runtime& rt = runtime_of(runtime);
    abr::capi::caller_size(require_pointer(info, "info")->version, kDeviceInfo);
    struct abr_device_info found = rt.devices().at(index);
    if (rt.device_lost(found.device)) found.flags |= ABR_DEVICE_LOST_FLAG;
    abr::capi::write_versioned(info, found, kDeviceInfo);
  });
}

abr_status abr_backend_info(abr_runtime* runtime, abr_backend backend, struct abr_backend_info* info) {
  return guarded(__func__, [&] {
    abr::capi::caller_size(require_pointer(info, "info")->version, kBackendInfo);
    abr::capi::write_versioned(info, runtime_of(runtime).devices().backend(abr::enum_value(backend)), kBackendInfo);
  });
}

}  // extern "C"

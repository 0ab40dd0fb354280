// Runtime and device entry points.
#include <cstring>

#include "handles.hpp"

using abr::capi::guarded;
using abr::capi::require_pointer;
using abr::capi::runtime_of;

extern "C" {

abr_status abr_runtime_options_init(abr_runtime_options* options) {
  return guarded(__func__, [&] {
    std::memset(require_pointer(options, "options"), 0, sizeof *options);
    options->version = ABR_RUNTIME_OPTIONS_VERSION;
  });
}

abr_status abr_runtime_create(const abr_runtime_options* options, abr_runtime** out) {
  return guarded(__func__, [&] {
    require_pointer(out, "out");
    *out = nullptr;
    *out = new abr_runtime(options);
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

abr_status abr_device_info(abr_runtime* runtime, int32_t index, struct abr_device_info* info) {
  return guarded(__func__, [&] {
    abr::Runtime& rt = runtime_of(runtime);
    struct abr_device_info& out = *require_pointer(info, "info");
    out = rt.devices().at(index);
    if (rt.device_lost(out.device)) out.flags |= ABR_DEVICE_LOST_FLAG;
  });
}

abr_status abr_backend_info(abr_runtime* runtime, abr_backend backend, struct abr_backend_info* info) {
  return guarded(__func__, [&] { *require_pointer(info, "info") = runtime_of(runtime).devices().backend(backend); });
}

}  // extern "C"

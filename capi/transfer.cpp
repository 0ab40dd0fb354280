// Transfer entry points: abr_to_device, abr_copy and their variants.
#include <cstring>

#include "../lib/planner.hpp"
#include "handles.hpp"

using abr::capi::guarded;
using abr::capi::require_pointer;
using abr::capi::runtime_of;
using abr::capi::stream_of;


extern "C" {

abr_status abr_transfer_options_init(abr_transfer_options* options) {
  return guarded(__func__, [&] {
    std::memset(require_pointer(options, "options"), 0, sizeof *options);
    options->version = ABR_TRANSFER_OPTIONS_VERSION;
  });
}

const char* abr_path_string(abr_path path) { return abr::path_name(path); }

abr_status abr_to_device(abr_runtime* runtime, DLManagedTensorVersioned* src, DLDevice dst,
                         const abr_transfer_options* options, abr_stream* stream, DLManagedTensorVersioned** out) {
  return guarded(__func__, [&] {
    *require_pointer(out, "out") = nullptr;
    *out = runtime_of(runtime).to_device(src, dst, options, stream_of(stream));
  });
}

abr_status abr_to_device_legacy(abr_runtime* runtime, DLManagedTensor* src, DLDevice dst,
                                const abr_transfer_options* options, abr_stream* stream,
                                DLManagedTensorVersioned** out) {
  return guarded(__func__, [&] {
    *require_pointer(out, "out") = nullptr;
    *out = runtime_of(runtime).to_device(src, dst, options, stream_of(stream));
  });
}

abr_status abr_copy(abr_runtime* runtime, const DLTensor* src, const DLTensor* dst, abr_stream* stream) {
  return guarded(__func__, [&] {
    runtime_of(runtime).copy(*require_pointer(src, "src"), *require_pointer(dst, "dst"), stream_of(stream));
  });
}

abr_status abr_copy_versioned(abr_runtime* runtime, const DLManagedTensorVersioned* src,
                              const DLManagedTensorVersioned* dst, abr_stream* stream) {
  return guarded(__func__, [&] {
    runtime_of(runtime).copy(*require_pointer(src, "src"), *require_pointer(dst, "dst"), stream_of(stream));
  });
}

abr_status abr_tensor_to_legacy(DLManagedTensorVersioned* src, DLManagedTensor** out) {
  return guarded(__func__, [&] {
    require_pointer(out, "out");
    *out = nullptr;
    *out = abr::wrap_as_legacy(require_pointer(src, "src"));
  });
}

}  // extern "C"

// Device and dtype names, and the device kinds: the one vocabulary the bindings use
// instead of their own copies.
#include <cstring>
#include <string>

#include "capi/guard.hpp"
#include "capi/struct_versions.hpp"
#include "lib/base/text.hpp"
#include "lib/tensor/device_kinds.hpp"
#include "lib/tensor/dtype.hpp"

namespace {

void write_name(const std::string& name, char* out, size_t size) {
  abr::capi::require_pointer(out, "out");
  if (name.size() + 1 > size)
    abr::fail(ABR_ERR_INVALID_ARGUMENT, "'{}' needs {} bytes, out has {}", name, name.size() + 1, size);
  std::memcpy(out, name.c_str(), name.size() + 1);
}

}  // namespace

extern "C" {

abr_status abr_device_parse(const char* text, DLDevice* out) {
  return abr::capi::guarded(__func__, [&] {
    const DLDevice device = abr::parse_device(abr::capi::require_pointer(text, "text"));
    *abr::capi::require_pointer(out, "out") = device;
  });
}

abr_status abr_device_format(DLDevice device, char* out, size_t size) {
  return abr::capi::guarded(__func__, [&] {
    abr::check_nameable(device);  // only names abr_device_parse reads back: "opencl:-3" is no name
    write_name(abr::device_string(device), out, size);
  });
}

abr_status abr_dtype_parse(const char* text, DLDataType* out) {
  return abr::capi::guarded(__func__, [&] {
    const DLDataType dtype = abr::parse_dtype(abr::capi::require_pointer(text, "text"));
    *abr::capi::require_pointer(out, "out") = dtype;
  });
}

abr_status abr_dtype_format(DLDataType dtype, char* out, size_t size) {
  return abr::capi::guarded(__func__, [&] {
    abr::check_nameable(dtype);  // only names abr_dtype_parse reads back: "float32x0" is no name
    write_name(abr::dtype_name(dtype), out, size);
  });
}

abr_status abr_device_kind_init(abr_device_kind* kind, unsigned int version) {
  return abr::capi::guarded(__func__, [&] { abr::capi::init_versioned(kind, version, abr::capi::kDeviceKind); });
}

abr_status abr_device_kind_count(int32_t* count) {
  return abr::capi::guarded(
      __func__, [&] { *abr::capi::require_pointer(count, "count") = static_cast<int32_t>(abr::known_kinds().size()); });
}

abr_status abr_device_kind_get(int32_t index, abr_device_kind* kind) {
  return abr::capi::guarded(__func__, [&] {
    abr::capi::caller_size(abr::capi::require_pointer(kind, "kind")->version, abr::capi::kDeviceKind);
    const std::vector<const abr::DeviceKind*> kinds = abr::known_kinds();
    if (index < 0 || static_cast<std::size_t>(index) >= kinds.size())
      abr::fail(ABR_ERR_INVALID_ARGUMENT, "kind index {} is out of range (this library knows {} device kinds)", index,
                kinds.size());
    const abr::DeviceKind& row = *kinds[static_cast<std::size_t>(index)];
    const abr::BackendDescriptor* backend = abr::find_backend_descriptor(row.backend);
    abr_device_kind out{};
    out.type = row.type;
    out.backend = row.backend;
    out.flags = (row.numbered ? ABR_KIND_NUMBERED : 0u) | (row.host_memory ? ABR_KIND_HOST_MEMORY : 0u) |
        (row.new_tensors ? ABR_KIND_NEW_TENSORS : 0u) | (row.address ? ABR_KIND_ADDRESSES : 0u) |
        (row.queued ? ABR_KIND_QUEUED : 0u) | (row.dlpack_streams ? ABR_KIND_DLPACK_STREAMS : 0u);
    out.default_stream = row.default_stream;
    out.disable_flag = backend ? backend->disable_flag : 0;
    abr::copy_text(out.name, row.name);
    abr::copy_text(out.backend_name, backend ? backend->key : "host");
    abr::copy_text(out.disable_env, backend && backend->disable_env ? backend->disable_env : "");
    abr::capi::write_versioned(kind, out, abr::capi::kDeviceKind);
  });
}

}  // extern "C"

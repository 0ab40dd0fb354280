// Device and dtype names: the one vocabulary the bindings use instead of their own copies.
#include <cstring>
#include <string>

#include "capi/guard.hpp"
#include "lib/device_kinds.hpp"
#include "lib/dtype.hpp"

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
  return abr::capi::guarded(__func__, [&] { write_name(abr::dtype_name(dtype), out, size); });
}

}  // extern "C"

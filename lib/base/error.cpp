#include "lib/base/error.hpp"

namespace abr {
namespace {

struct LastError {
  abr_status status = ABR_OK;
  int64_t backend_code = 0;
  std::string message;
};

LastError& last_error() noexcept {
  thread_local LastError error;
  return error;
}

}  // namespace

void set_last_error(abr_status status, const char* message, int64_t backend_code) noexcept {
  LastError& error = last_error();
  error.status = status;
  error.backend_code = backend_code;
  try {
    error.message = message ? message : "";
  } catch (...) {
    error.message.clear();  // out of memory while reporting: keep the status at least
  }
}

const char* last_error_message() noexcept { return last_error().message.c_str(); }
abr_status last_error_status() noexcept { return last_error().status; }
int64_t last_error_backend_code() noexcept { return last_error().backend_code; }
void clear_last_error() noexcept { set_last_error(ABR_OK, ""); }

const char* status_name(abr_status status) noexcept {
  switch (status) {
    case ABR_OK: return "ABR_OK";
    case ABR_NOT_READY: return "ABR_NOT_READY";
    case ABR_ERR_INVALID_ARGUMENT: return "ABR_ERR_INVALID_ARGUMENT";
    case ABR_ERR_UNSUPPORTED: return "ABR_ERR_UNSUPPORTED";
    case ABR_ERR_INTERNAL: return "ABR_ERR_INTERNAL";
    case ABR_ERR_OUT_OF_MEMORY: return "ABR_ERR_OUT_OF_MEMORY";
    case ABR_ERR_NO_DEVICE: return "ABR_ERR_NO_DEVICE";
    case ABR_ERR_DEVICE_LOST: return "ABR_ERR_DEVICE_LOST";
    case ABR_ERR_BACKEND: return "ABR_ERR_BACKEND";
    case ABR_ERR_BACKEND_UNAVAILABLE: return "ABR_ERR_BACKEND_UNAVAILABLE";
    case ABR_ERR_COPY_REQUIRED: return "ABR_ERR_COPY_REQUIRED";
    case ABR_ERR_READ_ONLY: return "ABR_ERR_READ_ONLY";
    case ABR_ERR_SHAPE_MISMATCH: return "ABR_ERR_SHAPE_MISMATCH";
    case ABR_ERR_CASTING: return "ABR_ERR_CASTING";
    case ABR_ERR_DLPACK_VERSION: return "ABR_ERR_DLPACK_VERSION";
    case ABR_ERR_DLPACK_NDIM: return "ABR_ERR_DLPACK_NDIM";
    case ABR_ERR_DLPACK_SHAPE: return "ABR_ERR_DLPACK_SHAPE";
    case ABR_ERR_DLPACK_STRIDES: return "ABR_ERR_DLPACK_STRIDES";
    case ABR_ERR_DLPACK_OVERFLOW: return "ABR_ERR_DLPACK_OVERFLOW";
    case ABR_ERR_DLPACK_DATA: return "ABR_ERR_DLPACK_DATA";
    case ABR_ERR_DLPACK_DTYPE: return "ABR_ERR_DLPACK_DTYPE";
    case ABR_ERR_DLPACK_DEVICE: return "ABR_ERR_DLPACK_DEVICE";
    case ABR_ERR_DLPACK_FLAGS: return "ABR_ERR_DLPACK_FLAGS";
    default: return "ABR_UNKNOWN_STATUS";
  }
}

}  // namespace abr

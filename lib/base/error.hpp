// Errors inside the runtime are C++ exceptions carrying an abr_status; capi/
// turns them into a status and the thread's last-error text at the boundary.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "arraybridge/arraybridge.h"

namespace abr {

class Error : public std::runtime_error {
 public:
  Error(abr_status status, const std::string& message, int64_t backend_code = 0)
      : std::runtime_error(message), status_(status), backend_code_(backend_code) {}
  abr_status status() const noexcept { return status_; }
  // The CUresult or cl_int behind it when a backend call failed, else 0.
  int64_t backend_code() const noexcept { return backend_code_; }

 private:
  abr_status status_;
  int64_t backend_code_;
};

template <class... Args>
[[noreturn]] void fail(abr_status status, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(status, fmt::format(format, std::forward<Args>(args)...));
}

// A backend call returned `backend_code` (a CUresult or cl_int), kept beside the message.
template <class... Args>
[[noreturn]] void fail_backend(abr_status status, int64_t backend_code, fmt::format_string<Args...> format,
                               Args&&... args) {
  throw Error(status, fmt::format(format, std::forward<Args>(args)...), backend_code);
}

// Thread-local record of the last failed C call.
void set_last_error(abr_status status, const char* message, int64_t backend_code = 0) noexcept;
const char* last_error_message() noexcept;
abr_status last_error_status() noexcept;
int64_t last_error_backend_code() noexcept;
void clear_last_error() noexcept;

const char* status_name(abr_status status) noexcept;

}  // namespace abr

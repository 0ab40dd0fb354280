// Errors inside the runtime are C++ exceptions carrying an abr_status; capi/
// turns them into a status and the thread's last-error text at the boundary.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "arraybridge/arraybridge.h"

namespace abr {

class Error : public std::runtime_error {
 public:
  Error(abr_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  abr_status status() const noexcept { return status_; }

 private:
  abr_status status_;
};

template <class... Args>
[[noreturn]] void fail(abr_status status, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(status, fmt::format(format, std::forward<Args>(args)...));
}

// Thread-local record of the last failed C call.
void set_last_error(abr_status status, const char* message) noexcept;
const char* last_error_message() noexcept;
abr_status last_error_status() noexcept;
void clear_last_error() noexcept;

const char* status_name(abr_status status) noexcept;

}  // namespace abr

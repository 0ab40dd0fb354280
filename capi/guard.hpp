// The C boundary: every entry point runs its body through guarded(), which turns
// any C++ exception into a status and the thread's last-error text. Nothing else
// lives here; the logic is in lib/.
#pragma once

#include <new>

#include "lib/base/error.hpp"
#include "lib/base/log.hpp"

namespace abr::capi {

// "<entry point>: <problem>": the one place an entry point's name enters a message
// (lib/ never writes one). Falls back to the bare problem when formatting fails.
inline void record_error(const char* function, abr_status status, const char* problem,
                         int64_t backend_code = 0) noexcept {
  std::string message;
  try {
    message = fmt::format("{}: {}", function, problem);
  } catch (...) {
  }
  set_last_error(status, message.empty() ? problem : message.c_str(), backend_code);
  if (!message.empty()) log::debug("{}", message);
}

template <class Body>
abr_status guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return ABR_OK;
  } catch (const Error& e) {
    record_error(function, e.status(), e.what(), e.backend_code());
    return e.status();
  } catch (const std::bad_alloc&) {
    record_error(function, ABR_ERR_OUT_OF_MEMORY, "out of host memory");
    return ABR_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    record_error(function, ABR_ERR_INTERNAL, e.what());
    return ABR_ERR_INTERNAL;
  } catch (...) {
    record_error(function, ABR_ERR_INTERNAL, "unknown C++ exception inside libarraybridge");
    return ABR_ERR_INTERNAL;
  }
}

template <class T>
T* require_pointer(T* pointer, const char* name) {
  if (!pointer) fail(ABR_ERR_INVALID_ARGUMENT, "{} is NULL", name);
  return pointer;
}

}  // namespace abr::capi

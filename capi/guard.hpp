// The C boundary: every entry point runs its body through guarded(), which turns
// any C++ exception into a status and the thread's last-error text. Nothing else
// lives here; the logic is in lib/.
#pragma once

#include <new>

#include "lib/error.hpp"
#include "lib/log.hpp"

namespace abr::capi {

template <class Body>
abr_status guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return ABR_OK;
  } catch (const Error& e) {
    std::string message;
    try {
      message = fmt::format("{}: {}", function, e.what());
    } catch (...) {
    }
    set_last_error(e.status(), message.empty() ? e.what() : message.c_str(), e.backend_code());
    log::debug("{}", message);
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error(ABR_ERR_OUT_OF_MEMORY, "out of host memory");
    return ABR_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(ABR_ERR_INTERNAL, e.what());
    return ABR_ERR_INTERNAL;
  } catch (...) {
    set_last_error(ABR_ERR_INTERNAL, "unknown C++ exception inside libarraybridge");
    return ABR_ERR_INTERNAL;
  }
}

template <class T>
T* require_pointer(T* pointer, const char* name) {
  if (!pointer) fail(ABR_ERR_INVALID_ARGUMENT, "{} is NULL", name);
  return pointer;
}

}  // namespace abr::capi

// Version, status, last error and logging entry points.
#include "capi/guard.hpp"
#include "lib/base/enum_value.hpp"

#define ABR_STRINGIFY2(x) #x
#define ABR_STRINGIFY(x) ABR_STRINGIFY2(x)

extern "C" {

uint32_t abr_version_number(void) { return ABR_VERSION_NUMBER; }

const char* abr_version_string(void) {
  return ABR_STRINGIFY(ABR_VERSION_MAJOR) "." ABR_STRINGIFY(ABR_VERSION_MINOR) "." ABR_STRINGIFY(ABR_VERSION_PATCH);
}

const char* abr_status_string(abr_status status) { return abr::status_name(status); }
const char* abr_last_error(void) { return abr::last_error_message(); }
abr_status abr_last_error_status(void) { return abr::last_error_status(); }
int64_t abr_last_error_backend_code(void) { return abr::last_error_backend_code(); }
void abr_clear_error(void) { abr::clear_last_error(); }

abr_status abr_log_set_level(abr_log_level level) {
  return abr::capi::guarded(__func__, [&] { abr::log::set_level(abr::enum_value(level)); });
}

abr_log_level abr_log_get_level(void) { return abr::log::level(); }

abr_status abr_log_set_callback(abr_log_callback callback, void* user_data) {
  return abr::capi::guarded(__func__, [&] { abr::log::set_callback(callback, user_data); });
}

}  // extern "C"

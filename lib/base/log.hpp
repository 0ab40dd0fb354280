// Logging: spdlog behind a tiny interface, so only log.cpp pays for its headers.
// Records go to stderr (never stdout) or to the embedder's callback.
#pragma once

#include <atomic>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "arraybridge/arraybridge.h"

namespace abr::log {

namespace detail {
// The logger's level, mirrored here so that every transfer's check is one load and no
// call (it runs on every path); -1 until the logger is made, which enabled_slow does.
extern std::atomic<int> threshold;
bool enabled_slow(abr_log_level level) noexcept;
}  // namespace detail

inline bool enabled(abr_log_level level) noexcept {
  const int threshold = detail::threshold.load(std::memory_order_relaxed);
  return threshold < 0 ? detail::enabled_slow(level) : static_cast<int>(level) >= threshold;
}
void write(abr_log_level level, const std::string& message) noexcept;
// An abr_log_level as the caller's int (capi reads it with enum_value); throws ABR_ERR_INVALID_ARGUMENT for an
// unknown level.
void set_level(int32_t level);
abr_log_level level() noexcept;
void set_callback(abr_log_callback callback, void* user_data);

template <class... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(ABR_LOG_DEBUG)) write(ABR_LOG_DEBUG, fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(ABR_LOG_INFO)) write(ABR_LOG_INFO, fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(ABR_LOG_WARN)) write(ABR_LOG_WARN, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace abr::log

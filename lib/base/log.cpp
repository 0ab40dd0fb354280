#include "lib/base/log.hpp"

#include "lib/base/error.hpp"
#include "lib/base/settings.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

namespace abr::log {
namespace {

// One sink: the embedder's callback when set, otherwise stderr.
class CallbackOrStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set_callback(abr_log_callback callback, void* user_data) {
    std::lock_guard<std::mutex> lock(mutex_);
    callback_ = callback;
    user_data_ = user_data;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (callback_) {
      std::string text(msg.payload.data(), msg.payload.size());
      callback_(static_cast<abr_log_level>(msg.level), text.c_str(), user_data_);
      return;
    }
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    std::fwrite(formatted.data(), 1, formatted.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  abr_log_callback callback_ = nullptr;
  void* user_data_ = nullptr;
};

abr_log_level level_from_environment() {
  const char* value = settings::log_level();
  if (!value) return ABR_LOG_WARN;
  static const struct {
    const char* name;
    abr_log_level level;
  } names[] = {{"trace", ABR_LOG_TRACE},  {"debug", ABR_LOG_DEBUG}, {"info", ABR_LOG_INFO}, {"warn", ABR_LOG_WARN},
               {"warning", ABR_LOG_WARN}, {"error", ABR_LOG_ERROR}, {"off", ABR_LOG_OFF}};
  for (const auto& entry : names)
    if (strcasecmp(value, entry.name) == 0) return entry.level;
  std::fprintf(stderr, "arraybridge: ignoring ARRAYBRIDGE_LOG_LEVEL=%s (use trace, debug, info, warn, error or off)\n",
               value);
  return ABR_LOG_WARN;
}

struct Logging {
  std::shared_ptr<CallbackOrStderrSink> sink = std::make_shared<CallbackOrStderrSink>();
  spdlog::logger logger{"arraybridge", sink};
  Logging() {
    logger.set_pattern("[arraybridge %l] %v");
    const abr_log_level level = level_from_environment();
    logger.set_level(static_cast<spdlog::level::level_enum>(level));
    detail::threshold.store(level, std::memory_order_relaxed);
  }
};

Logging& logging() {
  static Logging* instance = new Logging();  // never destroyed: deleters may log at exit
  return *instance;
}

}  // namespace

std::atomic<int> detail::threshold{-1};

bool detail::enabled_slow(abr_log_level level) noexcept {
  return logging().logger.should_log(static_cast<spdlog::level::level_enum>(level));
}

void write(abr_log_level level, const std::string& message) noexcept {
  try {
    logging().logger.log(static_cast<spdlog::level::level_enum>(level), message);
  } catch (...) {
    // a failing callback or stderr must not take the caller down
  }
}

void set_level(int32_t value) {
  if (value < ABR_LOG_TRACE || value > ABR_LOG_OFF || value == 5)  // 5 is spdlog's "critical": not ours
    fail(ABR_ERR_INVALID_ARGUMENT, "log level {} is not an abr_log_level", value);
  const auto level = static_cast<abr_log_level>(value);
  logging().logger.set_level(static_cast<spdlog::level::level_enum>(level));
  detail::threshold.store(level, std::memory_order_relaxed);
}

abr_log_level level() noexcept { return static_cast<abr_log_level>(logging().logger.level()); }

void set_callback(abr_log_callback callback, void* user_data) { logging().sink->set_callback(callback, user_data); }

}  // namespace abr::log

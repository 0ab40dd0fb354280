// The progress line on stderr (only when it is a terminal): rows done of those
// planned, what runs now, and the time left, estimated from the rows' sizes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "bench/bench.hpp"

namespace bench {

namespace {

struct ProgressState {
  bool terminal = isatty(STDERR_FILENO) == 1;
  bool shown = false;  // a progress line is on the screen
  int rows = 0, rows_done = 0;
  uint64_t weight = 0, weight_done = 0;
  std::string what;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

ProgressState& state() {
  static ProgressState s;
  return s;
}

void show() {
  ProgressState& s = state();
  if (!s.terminal || s.rows == 0) return;
  char eta[32] = "";
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
  if (s.weight_done > 0 && s.weight > s.weight_done) {
    const int left = static_cast<int>(
        elapsed * static_cast<double>(s.weight - s.weight_done) / static_cast<double>(s.weight_done) + 0.5);
    if (left >= 60)
      std::snprintf(eta, sizeof eta, ", about %d min %02d s left", left / 60, left % 60);
    else
      std::snprintf(eta, sizeof eta, ", about %d s left", left);
  }
  // \r, the line, then clear to the end of the line (ESC [ K): no stale characters.
  std::fprintf(stderr, "\r  [%d of %d] %s%s\033[K", std::min(s.rows_done + 1, s.rows), s.rows, s.what.c_str(), eta);
  std::fflush(stderr);
  s.shown = true;
}

}  // namespace

uint64_t row_weight(uint64_t size_bytes) { return size_bytes + (4ull << 20); }

void progress_plan(int rows, uint64_t weight) {
  ProgressState& s = state();
  s.rows = rows;
  s.weight = weight;
  s.start = std::chrono::steady_clock::now();
}

void progress(const std::string& device, uint64_t bytes) {
  char text[96];
  if (bytes >= (1ull << 20))
    std::snprintf(text, sizeof text, "%s at %.0f MiB", device.c_str(), bytes / double(1ull << 20));
  else
    std::snprintf(text, sizeof text, "%s at %.0f KiB", device.c_str(), bytes / 1024.0);
  state().what = bytes ? text : device;
  show();
}

void progress_row_done(uint64_t weight) {
  ProgressState& s = state();
  ++s.rows_done;
  s.weight_done += weight;
}

void progress_clear() {
  ProgressState& s = state();
  if (!s.shown) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  s.shown = false;
}

void progress_resume() { show(); }

}  // namespace bench

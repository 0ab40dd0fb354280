// Helpers shared by the benchmark cases.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench.hpp"

namespace bench {

namespace {
std::vector<std::string>& note_list() {
  static std::vector<std::string> list;
  return list;
}
}  // namespace

void note(const std::string& text) {
  for (const std::string& n : note_list())
    if (n == text) return;
  note_list().push_back(text);
}

const std::vector<std::string>& notes() { return note_list(); }

void check(abr_status status, const char* what) {
  if (status != ABR_OK) {
    progress_clear();
    std::fprintf(stderr, "arraybridge-bench: %s failed: %s\n", what, abr_last_error());
    std::exit(1);
  }
}

Buffer::Buffer(uint64_t elements)
    : memory(static_cast<float*>(std::aligned_alloc(4096, (elements * 4 + 4095) / 4096 * 4096)), &std::free),
      size(elements) {
  if (!memory) {
    std::fprintf(stderr, "arraybridge-bench: out of memory for %llu floats\n", static_cast<unsigned long long>(elements));
    std::exit(1);
  }
  for (uint64_t i = 0; i < elements; ++i) memory.get()[i] = static_cast<float>(i % 1024);
}

DLTensor view(float* data, int ndim, int64_t* shape, int64_t* strides, uint64_t byte_offset) {
  return DLTensor{data, {kDLCPU, 0}, ndim, {kDLFloat, 32, 1}, shape, strides, byte_offset};
}

DLManagedTensorVersioned borrowed(const DLTensor& tensor) {
  DLManagedTensorVersioned m{};
  m.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  m.dl_tensor = tensor;
  return m;
}

std::string device_name(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU: return "cpu";
    case kDLOpenCL: return "opencl:" + std::to_string(device.device_id);
    case kDLCUDA: return "cuda:" + std::to_string(device.device_id);
    default: return "device(" + std::to_string(device.device_type) + "," + std::to_string(device.device_id) + ")";
  }
}

bool device_selected(const Options& options, DLDevice device) {
  return options.device_filter.empty() || device_name(device).find(options.device_filter) != std::string::npos;
}

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
    if (left >= 60) std::snprintf(eta, sizeof eta, ", about %d min %02d s left", left / 60, left % 60);
    else std::snprintf(eta, sizeof eta, ", about %d s left", left);
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
  if (bytes >= (1ull << 20)) std::snprintf(text, sizeof text, "%s at %.0f MiB", device.c_str(), bytes / double(1ull << 20));
  else std::snprintf(text, sizeof text, "%s at %.0f KiB", device.c_str(), bytes / 1024.0);
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

Options settled_for_new_buffers(const Options& options, uint64_t bytes) {
  Options settled = options;
  if (bytes < (32ull << 20)) settled.warmup = std::max(options.warmup, 30);
  return settled;
}

Baseline memcpy_baseline(const Options& options, void* dst, const void* src, uint64_t bytes) {
  return baseline("memcpy", time_it(options, [&] { std::memcpy(dst, src, bytes); }).median_s);
}

}  // namespace bench

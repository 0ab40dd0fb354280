// Helpers shared by the benchmark cases.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/bench.hpp"

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

Options settled_for_new_buffers(const Options& options, uint64_t bytes) {
  Options settled = options;
  if (bytes < (32ull << 20)) settled.warmup = std::max(options.warmup, 30);
  return settled;
}

Baseline memcpy_baseline(const Options& options, void* dst, const void* src, uint64_t bytes) {
  return baseline("memcpy", time_it(options, [&] { std::memcpy(dst, src, bytes); }).median_s);
}

}  // namespace bench

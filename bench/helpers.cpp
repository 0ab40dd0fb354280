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
    std::fprintf(stderr, "arraybridge-bench: out of memory for %llu floats\n",
                 static_cast<unsigned long long>(elements));
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
    case kDLCUDAHost: return "cuda_host";
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

namespace {

// 256 float32 host tensors side by side in one buffer, as borrowed managed tensors.
struct HostBatch {
  static constexpr std::size_t kTensors = 256;
  uint64_t elements;
  Buffer src;
  int64_t shape[1];
  std::vector<DLManagedTensorVersioned> sources{kTensors};
  std::vector<DLManagedTensorVersioned*> pointers{kTensors};
  explicit HostBatch(uint64_t tensor_bytes)
      : elements(tensor_bytes / 4), src(elements * kTensors), shape{static_cast<int64_t>(elements)} {
    refresh();
  }
  DLTensor view_of(std::size_t i) { return view(src.data() + i * elements, 1, shape, nullptr); }
  void refresh() {  // new headers: a transfer consumed the last ones
    for (std::size_t i = 0; i < kTensors; ++i) {
      sources[i] = borrowed(view_of(i));
      pointers[i] = &sources[i];
    }
  }
};

abr_transfer_options always_copy() {
  abr_transfer_options copy = ABR_TRANSFER_OPTIONS_INIT;
  copy.copy = ABR_COPY_ALWAYS;
  return copy;
}

}  // namespace

Result batch_result(abr_runtime* rt, const Options& options, const char* name, DLDevice device, uint64_t tensor_bytes) {
  constexpr std::size_t kTensors = HostBatch::kTensors;
  HostBatch batch(tensor_bytes);
  std::vector<DLManagedTensorVersioned*> out(kTensors);
  const abr_transfer_options copy = always_copy();
  const Options settled = settled_for_new_buffers(options, tensor_bytes * kTensors);
  Result r{name, device_name(device), tensor_bytes * kTensors};
  r.size_bytes = tensor_bytes;
  r.shape = std::to_string(kTensors) + " tensors";
  r.seconds =
      time_it(settled, [&] {
        batch.refresh();
        check(abr_to_device_many(rt, batch.pointers.data(), kTensors, device, &copy, nullptr, out.data(), nullptr),
              "abr_to_device_many");
        for (DLManagedTensorVersioned* t : out) t->deleter(t);
      }).median_s;
  // The loop keeps its results until all are made, as the batch's caller does (a
  // loop that freed each at once would reuse one warm buffer that no program keeps).
  r.baselines.push_back(baseline(
      "loop", time_it(settled, [&] {
                batch.refresh();
                for (std::size_t i = 0; i < kTensors; ++i)
                  check(abr_to_device(rt, batch.pointers[i], device, &copy, nullptr, &out[i]), "abr_to_device");
                for (DLManagedTensorVersioned* t : out) t->deleter(t);
              }).median_s));
  return r;
}

Result batch_d2h_result(abr_runtime* rt, const Options& options, const char* name, DLDevice device,
                        uint64_t tensor_bytes) {
  constexpr std::size_t kTensors = HostBatch::kTensors;
  HostBatch batch(tensor_bytes);
  const abr_transfer_options copy = always_copy();
  std::vector<DLManagedTensorVersioned*> on_device(kTensors), out(kTensors);
  check(abr_to_device_many(rt, batch.pointers.data(), kTensors, device, &copy, nullptr, on_device.data(), nullptr),
        "abr_to_device_many");
  // Borrowed headers over the device tensors: each call consumes its own.
  std::vector<DLManagedTensorVersioned> sources(kTensors);
  std::vector<DLManagedTensorVersioned*> pointers(kTensors);
  const auto refresh = [&] {
    for (std::size_t i = 0; i < kTensors; ++i) {
      sources[i] = borrowed(on_device[i]->dl_tensor);
      pointers[i] = &sources[i];
    }
  };
  const DLDevice cpu{kDLCPU, 0};
  const Options settled = settled_for_new_buffers(options, tensor_bytes * kTensors);
  Result r{name, device_name(device), tensor_bytes * kTensors};
  r.size_bytes = tensor_bytes;
  r.shape = std::to_string(kTensors) + " tensors";
  r.seconds = time_it(settled, [&] {
                refresh();
                check(abr_to_device_many(rt, pointers.data(), kTensors, cpu, &copy, nullptr, out.data(), nullptr),
                      "abr_to_device_many");
                for (DLManagedTensorVersioned* t : out) t->deleter(t);
              }).median_s;
  r.baselines.push_back(baseline("loop", time_it(settled, [&] {
                                           refresh();
                                           for (std::size_t i = 0; i < kTensors; ++i)
                                             check(abr_to_device(rt, pointers[i], cpu, &copy, nullptr, &out[i]),
                                                   "abr_to_device");
                                           for (DLManagedTensorVersioned* t : out) t->deleter(t);
                                         }).median_s));
  for (DLManagedTensorVersioned* t : on_device) t->deleter(t);
  return r;
}

Result copy_batch_result(abr_runtime* rt, const Options& options, const char* name, DLDevice device,
                         uint64_t tensor_bytes) {
  constexpr std::size_t kTensors = HostBatch::kTensors;
  HostBatch batch(tensor_bytes);
  // The destinations: one device tensor per source, made by one batch.
  std::vector<DLManagedTensorVersioned*> targets(kTensors);
  const abr_transfer_options copy = always_copy();
  check(abr_to_device_many(rt, batch.pointers.data(), kTensors, device, &copy, nullptr, targets.data(), nullptr),
        "abr_to_device_many");
  std::vector<DLTensor> views(kTensors);
  std::vector<const DLTensor*> from(kTensors), into(kTensors);
  for (std::size_t i = 0; i < kTensors; ++i) {
    views[i] = batch.view_of(i);
    from[i] = &views[i];
    into[i] = &targets[i]->dl_tensor;
  }
  Result r{name, device_name(device), tensor_bytes * kTensors};
  r.size_bytes = tensor_bytes;
  r.shape = std::to_string(kTensors) + " tensors";
  r.seconds =
      time_it(options, [&] {
        check(abr_copy_many(rt, from.data(), into.data(), kTensors, nullptr, nullptr, nullptr), "abr_copy_many");
      }).median_s;
  r.baselines.push_back(baseline("copy loop", time_it(options, [&] {
                                                for (std::size_t i = 0; i < kTensors; ++i)
                                                  check(abr_copy(rt, from[i], into[i], nullptr, nullptr), "abr_copy");
                                              }).median_s));
  for (DLManagedTensorVersioned* t : targets) t->deleter(t);
  return r;
}

}  // namespace bench

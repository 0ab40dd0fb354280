#include "tests/soak/workload.hpp"

#include <cstring>
#include <memory>
#include <utility>

namespace soak {
namespace {

constexpr DLDataType kF32{kDLFloat, 32, 1}, kF64{kDLFloat, 64, 1}, kI32{kDLInt, 32, 1};
constexpr DLDevice kCpu{kDLCPU, 0};

// A host tensor over memory of its own, borrowed by the runtime (no deleter).
struct HostArray {
  std::vector<double> storage;  // doubles: aligned for every dtype used here
  std::vector<int64_t> shape, strides;
  DLManagedTensorVersioned managed{};

  HostArray(DLDataType dtype, std::vector<int64_t> shape_, std::vector<int64_t> strides_ = {})
      : shape(std::move(shape_)), strides(std::move(strides_)) {
    int64_t count = 1;
    for (int64_t extent : shape) count *= extent;
    storage.assign(static_cast<std::size_t>(count * dtype.bits / 8 + 7) / 8, 0.0);
    managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    DLTensor& t = managed.dl_tensor;
    t.data = storage.data();
    t.device = kCpu;
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
  HostArray(const HostArray&) = delete;
  DLTensor& tensor() { return managed.dl_tensor; }
  template <class T>
  T* at() {
    return reinterpret_cast<T*>(storage.data());
  }
};

// A result the runtime made, deleted at the end of a scope.
struct Result {
  DLManagedTensorVersioned* t = nullptr;
  ~Result() {
    if (t && t->deleter) t->deleter(t);
  }
};

// Fails the step with what the library said.
struct Failed {
  std::string text;
};
void check(abr_status status, const char* what) {
  if (status != ABR_OK) throw Failed{std::string(what) + ": " + abr_last_error()};
}
template <class T>
void expect_values(const T* got, const T* want, std::size_t n, const char* what) {
  for (std::size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) throw Failed{std::string(what) + ": element " + std::to_string(i) + " is wrong"};
}

// Sizes from 256 B to 256 KiB (float32): several size classes of the pool and the
// device cache, few enough that both reach a steady state.
int64_t elements_for(int thread, uint64_t n) {
  static const int64_t kSizes[] = {64, 1024, 16384, 65536};  // multiples of 16 (strided)
  return kSizes[(n * 7 + static_cast<uint64_t>(thread)) % 4];
}

void fill(HostArray& a, int64_t count, float first) {
  for (int64_t i = 0; i < count; ++i) a.at<float>()[i] = first + static_cast<float>(i % 4096);
}

abr_transfer_options options_with(abr_copy_mode copy, DLDataType dtype = {}) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = copy;
  options.dtype = dtype;
  return options;
}

// A copy to the device, a view of it there, and a copy back: 3 transfers.
uint64_t copy_and_view(abr_runtime* rt, DLDevice device, int64_t count, float first) {
  HostArray src(kF32, {count}), back(kF32, {count});
  fill(src, count, first);
  const abr_transfer_options always = options_with(ABR_COPY_ALWAYS), view = options_with(ABR_COPY_IF_NEEDED);
  Result copied, viewed;
  check(abr_to_device(rt, &src.managed, device, &always, nullptr, &copied.t), "copy to the device");
  check(abr_to_device(rt, copied.t, device, &view, nullptr, &viewed.t), "view on the device");
  copied.t = nullptr;  // consumed by the view
  check(abr_copy(rt, &viewed.t->dl_tensor, &back.tensor(), nullptr, nullptr), "copy back");
  expect_values(back.at<float>(), src.at<float>(), static_cast<std::size_t>(count), "copy and view");
  return 3;
}

// int32 cast to float64 on the way to the device, and read back: 2 transfers.
uint64_t cast(abr_runtime* rt, DLDevice device, int64_t count, float first) {
  HostArray src(kI32, {count}), back(kF64, {count});
  std::vector<double> want(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    src.at<int32_t>()[i] = static_cast<int32_t>(first) - static_cast<int32_t>(i);
    want[static_cast<std::size_t>(i)] = src.at<int32_t>()[i];
  }
  const abr_transfer_options to_f64 = options_with(ABR_COPY_IF_NEEDED, kF64);
  Result moved;
  check(abr_to_device(rt, &src.managed, device, &to_f64, nullptr, &moved.t), "cast to the device");
  check(abr_copy(rt, &moved.t->dl_tensor, &back.tensor(), nullptr, nullptr), "copy back");
  expect_values(back.at<double>(), want.data(), want.size(), "cast");
  return 2;
}

// A transposed view packed on the way, and read back: 2 transfers.
uint64_t strided(abr_runtime* rt, DLDevice device, int64_t count, float first) {
  const int64_t rows = 16, cols = count / 16;
  HostArray src(kF32, {cols, rows}, {1, cols}), back(kF32, {cols, rows});  // src's memory is rows x cols
  fill(src, rows * cols, first);
  Result moved;
  check(abr_to_device(rt, &src.managed, device, nullptr, nullptr, &moved.t), "strided to the device");
  check(abr_copy(rt, &moved.t->dl_tensor, &back.tensor(), nullptr, nullptr), "copy back");
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i)
      if (back.at<float>()[j * rows + i] != src.at<float>()[i * cols + j]) throw Failed{"strided: a wrong element"};
  return 2;
}

// Both ways on a stream of its own, waited for through an event; the stream is
// destroyed or let go: 2 transfers.
uint64_t on_a_stream(abr_runtime* rt, DLDevice device, int64_t count, float first, bool let_go) {
  HostArray src(kF32, {count}), back(kF32, {count});
  fill(src, count, first);
  abr_stream* stream = nullptr;
  check(abr_stream_create(rt, device, &stream), "stream");
  abr_event* event = nullptr;
  abr_status status;
  {
    Result moved;
    status = abr_to_device(rt, &src.managed, device, nullptr, stream, &moved.t);
    if (status == ABR_OK) status = abr_copy(rt, &moved.t->dl_tensor, &back.tensor(), nullptr, stream);
    if (status == ABR_OK) status = abr_event_record(stream, &event);
    if (status == ABR_OK) status = abr_event_synchronize(event);
    if (status != ABR_OK) abr_stream_synchronize(stream);  // nothing queued may outlive src
  }
  const std::string error = status == ABR_OK ? "" : abr_last_error();
  abr_event_destroy(event);
  let_go ? abr_stream_release(stream) : abr_stream_destroy(stream);
  if (status != ABR_OK) throw Failed{"stream: " + error};
  expect_values(back.at<float>(), src.at<float>(), static_cast<std::size_t>(count), "stream");
  return 2;
}

// Four small tensors to the device in one batch (coalesced), and back with
// abr_copy_many: 8 transfers.
// The sources are handed over: each frees itself in its deleter, which the runtime
// calls when it is done with it. For a view of host memory that a device uses in
// place (PoCL) that is after the result is deleted, on the driver's own thread, so
// the caller may not free a source itself (the soak did: a deleter read from freed
// memory, 1 run in about 10).
uint64_t batch(abr_runtime* rt, DLDevice device, float first) {
  constexpr int kCount = 4;
  std::vector<std::unique_ptr<HostArray>> expected, backs;
  DLManagedTensorVersioned* src_list[kCount];
  for (int i = 0; i < kCount; ++i) {
    const int64_t count = 64 << (2 * i);  // 256 B to 16 KiB
    expected.push_back(std::make_unique<HostArray>(kF32, std::vector<int64_t>{count}));
    backs.push_back(std::make_unique<HostArray>(kF32, std::vector<int64_t>{count}));
    fill(*expected.back(), count, first + static_cast<float>(i));
    auto* source = new HostArray(kF32, std::vector<int64_t>{count});
    fill(*source, count, first + static_cast<float>(i));
    source->managed.manager_ctx = source;
    source->managed.deleter = [](DLManagedTensorVersioned* self) { delete static_cast<HostArray*>(self->manager_ctx); };
    src_list[i] = &source->managed;
  }
  DLManagedTensorVersioned* out[kCount] = {};
  const abr_status status = abr_to_device_many(rt, src_list, kCount, device, nullptr, nullptr, out, nullptr);
  if (status != ABR_OK)  // a failed batch leaves every source the caller's
    for (DLManagedTensorVersioned* source : src_list) source->deleter(source);
  check(status, "batch to the device");
  Result results[kCount];
  const DLTensor* from[kCount];
  const DLTensor* to[kCount];
  for (int i = 0; i < kCount; ++i) {
    results[i].t = out[i];
    from[i] = &out[i]->dl_tensor;
    to[i] = &backs[static_cast<std::size_t>(i)]->tensor();
  }
  check(abr_copy_many(rt, from, to, kCount, nullptr, nullptr, nullptr), "batch back");
  for (int i = 0; i < kCount; ++i)
    expect_values(backs[static_cast<std::size_t>(i)]->at<float>(), expected[static_cast<std::size_t>(i)]->at<float>(),
                  static_cast<std::size_t>(64 << (2 * i)), "batch");
  return 2 * kCount;
}

// To the device, on to another (CUDA <-> OpenCL, or a device and the CPU), and
// back: 3 transfers.
uint64_t across(abr_runtime* rt, DLDevice device, DLDevice other, int64_t count, float first) {
  HostArray src(kF32, {count}), back(kF32, {count});
  fill(src, count, first);
  Result here, there;
  check(abr_to_device(rt, &src.managed, device, nullptr, nullptr, &here.t), "to the first device");
  const abr_transfer_options always = options_with(ABR_COPY_ALWAYS);
  check(abr_to_device(rt, here.t, other, &always, nullptr, &there.t), "to the second device");
  here.t = nullptr;  // consumed
  check(abr_copy(rt, &there.t->dl_tensor, &back.tensor(), nullptr, nullptr), "copy back");
  expect_values(back.at<float>(), src.at<float>(), static_cast<std::size_t>(count), "across devices");
  return 3;
}

const char* const kKinds[] = {"copy+view", "cast", "strided", "stream", "batch", "across"};

}  // namespace

int kinds() { return static_cast<int>(sizeof kKinds / sizeof kKinds[0]); }
const char* kind_name(int kind) { return kKinds[kind]; }

StepResult run_step(const Workload& work, int thread, uint64_t n) {
  const int kind = static_cast<int>(n % static_cast<uint64_t>(kinds()));
  const std::size_t d = (n / static_cast<uint64_t>(kinds())) % work.devices.size();
  const DLDevice device = work.devices[d], other = work.devices[(d + 1) % work.devices.size()];
  const int64_t count = elements_for(thread, n);
  const float first = static_cast<float>((thread * 131 + static_cast<int>(n % 997)) * 16);
  StepResult result;
  try {
    switch (kind) {
      case 0: result.transfers = copy_and_view(work.rt, device, count, first); break;
      case 1: result.transfers = cast(work.rt, device, count, first); break;
      case 2: result.transfers = strided(work.rt, device, count, first); break;
      case 3: result.transfers = on_a_stream(work.rt, device, count, first, n % 2 == 1); break;
      case 4: result.transfers = batch(work.rt, device, first); break;
      default: result.transfers = across(work.rt, device, other, count, first); break;
    }
  } catch (const Failed& failed) {
    char name[ABR_NAME_MAX];
    abr_device_format(device, name, sizeof name);
    result.error = std::string(kind_name(kind)) + " on " + name + ": " + failed.text;
  }
  return result;
}

}  // namespace soak

// A third backend that lives only here: a descriptor and the primitives
// (lib/devices/submission.hpp), nothing in lib/ names it. Its devices ("ext_dev:0", "ext_dev:1", DLPack's kDLExtDev)
// keep their memory in host blocks behind opaque handles, as OpenCL keeps cl_mem: the runtime must route every transfer
// through the backend, never dereference a handle. Its work is queued, as a GPU's is: each stream (and each device's
// own queue) runs its copies in order on a thread of its own, and an event is a point in that order, so a transfer
// that forgot to wait would read what is not written yet. The core transfers run through the C API on a runtime opened
// with this backend alone: new tensors each way, strided, converted, views, copies into existing tensors, staged
// between its two contexts, batches, work on its streams with events, and the errors that name it. Registering it makes
// "ext_dev" a known kind for the rest of the process.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "capi/handles.hpp"
#include "lib/devices/backend.hpp"
#include "lib/tensor/device_kinds.hpp"
#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"
#include "lib/host/host_copy.hpp"
#include "lib/host/host_threads.hpp"
#include "lib/plan/planner.hpp"
#include "lib/base/text.hpp"
#include "tests/support/helpers.hpp"

using namespace test;

namespace {

constexpr auto kFakeId = static_cast<abr_backend>(77);
constexpr int kFakeDevices = 2;

// Device memory: bytes behind a handle, checked on every use.
struct Buffer {
  std::vector<char> bytes;
  int device = 0;
};

class Buffers {
 public:
  Buffer* add(int device, uint64_t size) {
    auto* buffer = new Buffer{std::vector<char>(size), device};
    std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(buffer);
    return buffer;
  }
  void remove(Buffer* buffer) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.erase(buffer);
    }
    delete buffer;
  }
  Buffer& of(const abr::Layout& tensor) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto* buffer = static_cast<Buffer*>(tensor.data);
    if (!live_.count(buffer)) abr::fail(ABR_ERR_DLPACK_DEVICE, "{} is not a live ext_dev buffer", tensor.data);
    const int64_t begin = static_cast<int64_t>(tensor.byte_offset) + tensor.min_byte;
    const int64_t end = static_cast<int64_t>(tensor.byte_offset) + tensor.max_byte_end;
    if (tensor.numel > 0 && (begin < 0 || end > static_cast<int64_t>(buffer->bytes.size())))
      abr::fail(ABR_ERR_DLPACK_DATA, "the view [{}, {}) lies outside its {} byte buffer", begin, end,
                buffer->bytes.size());
    return *buffer;
  }
  std::size_t live() {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.size();
  }

 private:
  std::mutex mutex_;
  std::set<Buffer*> live_;
};

Buffers buffers;

class BufferStorage final : public abr::Storage {
 public:
  explicit BufferStorage(Buffer* buffer) : buffer_(buffer) {}
  ~BufferStorage() override { buffers.remove(buffer_); }

 private:
  Buffer* buffer_;
};

// Staging blocks: plain host memory (a real driver page-locks its own).
class Block final : public abr::StagingBlock {
 public:
  explicit Block(std::size_t size) : bytes_(size) {}
  char* data() const override { return const_cast<char*>(bytes_.data()); }
  std::size_t size() const override { return bytes_.size(); }

 private:
  std::vector<char> bytes_;
};

class Blocks final : public abr::StagingProvider {
 public:
  const char* name() const override { return "ext_dev blocks"; }
  const void* domain() const override { return this; }
  std::unique_ptr<abr::StagingBlock> allocate(std::size_t bytes) override { return std::make_unique<Block>(bytes); }
};

// The first element of a side: an ext_dev handle resolved, or host memory as it is.
char* first_of(const abr::Layout& tensor) {
  if (tensor.device.device_type == kDLExtDev) return buffers.of(tensor).bytes.data() + tensor.byte_offset;
  return static_cast<char*>(tensor.data) + tensor.byte_offset;
}

// A device's engine: jobs run in order on a thread of its own. A ticket is a job's
// place in that order; the work up to it is done once done_ reaches it.
class Queue {
 public:
  Queue() : thread_([this] { run(); }) {}
  ~Queue() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    more_.notify_all();
    thread_.join();  // after the jobs still queued
  }
  uint64_t push(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    more_.notify_all();
    return ++pushed_;
  }
  uint64_t last() {
    std::lock_guard<std::mutex> lock(mutex_);
    return pushed_;
  }
  bool done(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_ >= ticket;
  }
  void wait(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return done_ >= ticket; });
  }
  void drain() { wait(last()); }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      more_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      job = nullptr;  // what it held goes before the work counts as done
      lock.lock();
      ++done_;
      finished_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable more_, finished_;
  std::deque<std::function<void()>> jobs_;
  uint64_t pushed_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is made
};

class Event final : public abr::Event {
 public:
  Event(std::shared_ptr<Queue> queue, uint64_t ticket) : queue_(std::move(queue)), ticket_(ticket) {}
  bool complete() noexcept override { return queue_->done(ticket_); }
  void wait() override { queue_->wait(ticket_); }

 private:
  std::shared_ptr<Queue> queue_;
  uint64_t ticket_;
};

// Host memory of one transfer (pinned, temporaries), kept until its work is done.
class HostBytes final : public abr::Storage {
 public:
  explicit HostBytes(std::size_t size) : bytes(size) {}
  std::vector<char> bytes;
};

// Frees `storage` once the work queued before it is done.
void release_after(Queue& queue, std::unique_ptr<abr::Storage> storage) {
  queue.push([held = std::shared_ptr<abr::Storage>(std::move(storage))]() mutable { held.reset(); });
}

class Stream final : public abr::Stream {
 public:
  explicit Stream(DLDevice device) : device_(device), queue_(std::make_shared<Queue>()) {}
  ~Stream() override { queue_->drain(); }
  DLDevice device() const override { return device_; }
  void synchronize() override { queue_->drain(); }
  void retain(std::unique_ptr<abr::Storage> storage) noexcept override { release_after(*queue_, std::move(storage)); }
  void wait_for(abr::Stream& other) override {
    auto* ours = dynamic_cast<Stream*>(&other);
    if (!ours) return other.synchronize();
    queue_->push([queue = ours->queue_, ticket = ours->queue_->last()] { queue->wait(ticket); });
  }
  std::unique_ptr<abr::Event> record() override { return std::make_unique<Event>(queue_, queue_->last()); }
  const std::shared_ptr<Queue>& queue() const { return queue_; }

 private:
  DLDevice device_;
  std::shared_ptr<Queue> queue_;
};

// The primitives. Handles are resolved (and refused) when the work is submitted; the
// bytes move later, on the queue: the caller's stream, else the device's own queue,
// waited for at finish().
class Work final : public abr::Submission {
 public:
  Work(Blocks& blocks, std::shared_ptr<Queue> queue, bool on_callers_stream)
      : blocks_(blocks), queue_(std::move(queue)), on_callers_stream_(on_callers_stream) {}
  ~Work() override {
    if (!finished_) settle();  // an error stopped the transfer: nothing of it may still run
  }
  void write(const abr::Layout& device, uint64_t offset, const char* host, std::size_t n) override {
    queue_->push([to = first_of(device) + offset, host, n] { std::memcpy(to, host, n); });
  }
  void read(const abr::Layout& device, uint64_t offset, char* host, std::size_t n) override {
    queue_->push([from = first_of(device) + offset, host, n] { std::memcpy(host, from, n); });
  }
  std::unique_ptr<abr::Event> write_chunk(const abr::Layout& device, uint64_t offset, const char* host,
                                          std::size_t n) override {
    write(device, offset, host, n);
    return std::make_unique<Event>(queue_, queue_->last());
  }
  std::unique_ptr<abr::Event> read_chunk(const abr::Layout& device, uint64_t offset, char* host,
                                         std::size_t n) override {
    read(device, offset, host, n);
    return std::make_unique<Event>(queue_, queue_->last());
  }
  void copy(const abr::Layout& from, const abr::Layout& to, std::size_t n) override {
    queue_->push([src = first_of(from), dst = first_of(to), n] { std::memmove(dst, src, n); });
  }
  void walk(const abr::Layout& src, const abr::Layout& dst) override {
    queue_->push([src, dst, from = first_of(src), to = first_of(dst)] {
      abr::host_copy_layout(src, from, dst.dtype, to, dst.strides.data());
    });
  }
  abr::Layout temporary(const abr::Layout& like, DLDataType dtype) override {
    Buffer* buffer = buffers.add(like.device.device_id, static_cast<uint64_t>(like.numel) * abr::itemsize(dtype));
    kept_.push_back(std::make_unique<BufferStorage>(buffer));
    return abr::compact_layout(like.device, dtype, like.shape, buffer);
  }
  char* pinned(std::size_t bytes) override {
    auto block = std::make_unique<HostBytes>(bytes);
    char* data = block->bytes.data();
    kept_.push_back(std::move(block));
    return data;
  }
  char* map(const abr::Layout& device, bool) override {
    queue_->drain();  // as a blocking map does: the queued work on it first
    return first_of(device);
  }
  void wait() override { queue_->drain(); }
  void finish() override {
    finished_ = true;
    if (on_callers_stream_) {
      for (auto& storage : kept_) release_after(*queue_, std::move(storage));
    } else {
      // Waited for: the temporaries go now, as a driver frees them after a synchronize.
      // (Queued behind the wait they were freed a moment after the call returned, and a
      // count of live buffers taken then saw one: 1 run in 33.)
      queue_->drain();
    }
    kept_.clear();
  }
  bool synchronous() const override { return !on_callers_stream_; }
  void settle() noexcept override {
    queue_->drain();
    kept_.clear();
  }
  abr::StagingProvider& staging() override { return blocks_; }

 private:
  Blocks& blocks_;
  std::shared_ptr<Queue> queue_;
  bool on_callers_stream_, finished_ = false;
  std::vector<std::unique_ptr<abr::Storage>> kept_;
};

// Whether a runtime opened from now on maps the backend's memory (a test of DMA-only sets it false).
bool g_maps_to_host = true;

// Its work is queued: on a caller's stream of its own, else on the device's own queue.
class FakeBackend final : public abr::DeviceBackend {
 public:
  FakeBackend() {
    report_.info.backend = kFakeId;
    report_.info.available = 1;
    report_.info.device_count = kFakeDevices;
    abr::copy_text(report_.info.detail, "fake: 2 devices in host memory behind handles");
    for (int id = 0; id < kFakeDevices; ++id) {
      struct abr_device_info info {};
      info.device = {kDLExtDev, id};
      info.backend = kFakeId;
      abr::copy_text(info.name, "fake device");
      abr::copy_text(info.platform, "tests/core");
      report_.devices.push_back(info);
    }
    // The host engine walks its memory once a handle is resolved (as OpenCL's mapping);
    // without it, only DMA and its own kernels reach it (as CUDA).
    can_.maps_to_host = g_maps_to_host;
  }
  const abr::BackendReport& report() const override { return report_; }
  const abr::Capabilities& capabilities() const override { return can_; }
  abr::DeviceTraits traits(DLDevice device) override { return {0, &contexts_[device.device_id]}; }
  void* memory_context(const abr::Layout& tensor, abr::AllocationRange* allocation) override {
    if (allocation) *allocation = {};
    return &contexts_[buffers.of(tensor).device];
  }
  abr::DeviceMemory allocate(DLDevice device, uint64_t bytes, abr::Stream*) override {
    Buffer* buffer = buffers.add(device.device_id, bytes);
    return {buffer, std::make_unique<BufferStorage>(buffer)};
  }
  abr::DeviceMemory wrap_host(DLDevice, void*, uint64_t, bool, std::unique_ptr<abr::Storage>&) override {
    abr::fail(ABR_ERR_INTERNAL, "ext_dev does not share host memory");
  }
  bool runs_on(const abr::Stream& stream, DLDevice device, void*) override {
    return dynamic_cast<const Stream*>(&stream) && abr::same_device(stream.device(), device);
  }
  std::unique_ptr<abr::Submission> submit(DLDevice device, void*, abr::Stream* stream) override {
    if (auto* ours = dynamic_cast<Stream*>(stream)) return std::make_unique<Work>(blocks_, ours->queue(), true);
    return std::make_unique<Work>(blocks_, queues_[device.device_id], false);
  }
  std::unique_ptr<abr::Stream> create_stream(DLDevice device) override { return std::make_unique<Stream>(device); }
  std::unique_ptr<abr::Stream> wrap_stream(DLDevice, void*) override {
    abr::fail(ABR_ERR_UNSUPPORTED, "ext_dev has no native streams");
  }

 private:
  abr::BackendReport report_;
  abr::Capabilities can_;
  char contexts_[kFakeDevices] = {};  // one context per device: their addresses are the contexts
  Blocks blocks_;
  std::shared_ptr<Queue> queues_[kFakeDevices] = {std::make_shared<Queue>(), std::make_shared<Queue>()};
};

std::unique_ptr<abr::DeviceBackend> make_fake(const abr_runtime_options&, std::shared_ptr<abr::PinnedPool>) {
  return std::make_unique<FakeBackend>();
}

//                                    type       name       backend  numbered host   address locked new   queued
constexpr abr::DeviceKind kFakeKinds[] = {{kDLExtDev, "ext_dev", kFakeId, true, false, false, false, true, true}};
const abr::BackendDescriptor kFakeBackend{kFakeId, "Fake",    "fake",  kFakeKinds,   1, 0, nullptr,
                                          nullptr, make_fake, nullptr, /*ipc=*/false};

struct FakeRuntime {
  abr_runtime* rt = new abr_runtime(nullptr, {&kFakeBackend});
  ~FakeRuntime() { abr_runtime_destroy(rt); }
  operator abr_runtime*() const { return rt; }
};

constexpr DLDevice fake0{kDLExtDev, 0}, fake1{kDLExtDev, 1};

DLManagedTensorVersioned* move(abr_runtime* rt, Managed& src, DLDevice to, abr_copy_mode copy = ABR_COPY_IF_NEEDED,
                               DLDataType dtype = {}, abr_transfer_report* report = nullptr) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = copy;
  options.dtype = dtype;
  options.report = report;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE_MESSAGE(abr_to_device(rt, &src.managed, to, &options, nullptr, &out) == ABR_OK,
                  std::string(abr_last_error()));
  return out;
}

// A tensor's values, read back to the host through the runtime.
template <class T>
std::vector<T> values_of(abr_runtime* rt, const DLTensor& tensor) {
  int64_t count = 1;
  for (int32_t d = 0; d < tensor.ndim; ++d) count *= tensor.shape[d];
  std::vector<T> out(static_cast<std::size_t>(count));
  std::vector<int64_t> shape(tensor.shape, tensor.shape + tensor.ndim);
  Managed landing(out.data(), tensor.dtype, shape);
  REQUIRE_MESSAGE(abr_copy(rt, &tensor, &landing.tensor(), nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
  return out;
}

}  // namespace

TEST_CASE("plug-in backend: its devices are listed, named and parsed from its descriptor alone") {
  FakeRuntime rt;
  int32_t count = 0;
  REQUIRE(abr_device_count(rt, &count) == ABR_OK);
  CHECK(count == 1 + kFakeDevices);  // the CPU, then its devices
  struct abr_device_info info = ABR_DEVICE_INFO_INIT;
  REQUIRE(abr_device_info(rt, 2, &info) == ABR_OK);
  CHECK((info.device.device_type == kDLExtDev && info.device.device_id == 1 && info.backend == kFakeId));
  struct abr_backend_info backend = ABR_BACKEND_INFO_INIT;
  REQUIRE(abr_backend_info(rt, kFakeId, &backend) == ABR_OK);
  CHECK(std::string(backend.detail) == "fake: 2 devices in host memory behind handles");
  DLDevice parsed{};
  REQUIRE(abr_device_parse("ext_dev:1", &parsed) == ABR_OK);
  CHECK((parsed.device_type == kDLExtDev && parsed.device_id == 1));
  char name[ABR_NAME_MAX];
  REQUIRE(abr_device_format(fake0, name, sizeof name) == ABR_OK);
  CHECK(std::string(name) == "ext_dev:0");
  int32_t kinds = 0;
  REQUIRE(abr_device_kind_count(&kinds) == ABR_OK);
  abr_device_kind last = ABR_DEVICE_KIND_INIT;
  REQUIRE(abr_device_kind_get(kinds - 1, &last) == ABR_OK);
  CHECK(std::string(last.name) == "ext_dev");
  CHECK(std::string(last.backend_name) == "fake");
  CHECK(last.flags == (ABR_KIND_NUMBERED | ABR_KIND_NEW_TENSORS | ABR_KIND_QUEUED));

  // The runtime has no CUDA or OpenCL: they are not in its list.
  Managed src(nullptr, f32, {0});
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, &src.managed, {kDLExtDev, 5}, &options, nullptr, &out) == ABR_ERR_NO_DEVICE);
  CHECK(std::string(abr_last_error()) ==
        "abr_to_device: destination: no device ext_dev:5 (the Fake backend has 2 device(s))");
  CHECK(abr_to_device(rt, &src.managed, {kDLOpenCL, 0}, &options, nullptr, &out) == ABR_ERR_NO_DEVICE);
  CHECK(std::string(abr_last_error()) ==
        "abr_to_device: destination: no device opencl:0: this runtime has no OpenCL backend");
  CHECK(abr_to_device(rt, &src.managed, {kDLVulkan, 0}, &options, nullptr, &out) == ABR_ERR_NO_DEVICE);
  CHECK(std::string(abr_last_error()) ==
        "abr_to_device: destination: dlpack_device_7:0 is not supported by libarraybridge (host and Fake are)");
  CHECK(src.deleted == 0);
}

TEST_CASE("plug-in backend: the core transfers, every value and ownership counted") {
  FakeRuntime rt;
  std::vector<float> host(6 * 5);
  std::iota(host.begin(), host.end(), 1.0f);
  const std::size_t before = buffers.live();
  {
    // Host -> ext_dev: a copy (the device does not share host memory), then back.
    Managed src(host.data(), f32, {6, 5});
    abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
    Owned on0(move(rt, src, fake0, ABR_COPY_IF_NEEDED, {}, &report));
    CHECK(src.deleted == 1);
    CHECK(report.path == ABR_PATH_HOST_TO_DEVICE);
    CHECK(on0->data != host.data());
    CHECK(buffers.live() == before + 1);
    CHECK(values_of<float>(rt, on0.t->dl_tensor) == host);

    // A view of it on its own device is the tensor itself; a forced copy is a new buffer.
    Managed again(on0->data, f32, {6, 5}, {}, 0, fake0);
    Owned view(move(rt, again, fake0, ABR_COPY_IF_NEEDED, {}, &report));
    CHECK(report.path == ABR_PATH_ZERO_COPY);
    CHECK(view->data == on0->data);
    Managed forced(on0->data, f32, {6, 5}, {}, 0, fake0);
    Owned copied(move(rt, forced, fake0, ABR_COPY_ALWAYS, {}, &report));
    CHECK(report.path == ABR_PATH_DEVICE_COPY);
    CHECK(copied->data != on0->data);
    CHECK(values_of<float>(rt, copied.t->dl_tensor) == host);

    // Strided and converted on the way down: the transposed view as float64.
    Managed transposed(on0->data, f32, {5, 6}, {1, 5}, 0, fake0);
    Owned down(move(rt, transposed, cpu, ABR_COPY_IF_NEEDED, f64, &report));
    CHECK(report.path == ABR_PATH_DEVICE_TO_HOST);
    CHECK((report.flags & ABR_REPORT_PACKED) != 0);
    CHECK((report.flags & ABR_REPORT_CAST) != 0);
    const auto* values = static_cast<const double*>(down->data);
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 6; ++c) CHECK(values[r * 6 + c] == host[static_cast<std::size_t>(c * 5 + r)]);

    // Across its two devices (two contexts): staged, strided source packed on its side.
    Managed across(on0->data, f32, {5, 6}, {1, 5}, 0, fake0);
    Owned on1(move(rt, across, fake1, ABR_COPY_IF_NEEDED, {}, &report));
    CHECK(report.path == ABR_PATH_STAGED);
    const std::vector<float> moved = values_of<float>(rt, on1.t->dl_tensor);
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 6; ++c)
        CHECK(moved[static_cast<std::size_t>(r * 6 + c)] == host[static_cast<std::size_t>(c * 5 + r)]);

    // Into an existing strided tensor on the device: every other element of a 6 x 10 buffer.
    Managed wide_src(host.data(), f32, {6, 10 / 2});
    std::vector<float> zeros(60, 0.0f);
    Managed zero_src(zeros.data(), f32, {60});
    Owned wide(move(rt, zero_src, fake1, ABR_COPY_ALWAYS));
    Managed every_other(wide->data, f32, {6, 5}, {10, 2}, 0, fake1);
    REQUIRE_MESSAGE(abr_copy(rt, &wide_src.tensor(), &every_other.tensor(), nullptr, nullptr) == ABR_OK,
                    abr_last_error());
    const std::vector<float> landed = values_of<float>(rt, *wide);
    for (std::size_t i = 0; i < 60; ++i) CHECK(landed[i] == (i % 2 ? 0.0f : host[i / 2]));
  }
  CHECK(buffers.live() == before);  // every buffer freed with its tensor
}

TEST_CASE("plug-in backend: a bad handle or a view outside its buffer is refused, and the source kept") {
  FakeRuntime rt;
  int not_a_buffer = 0;
  Managed bogus(&not_a_buffer, f32, {4}, {}, 0, fake0);
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, &bogus.managed, cpu, &options, nullptr, &out) == ABR_ERR_DLPACK_DEVICE);
  CHECK(error_mentions("is not a live ext_dev buffer"));
  CHECK(bogus.deleted == 0);

  std::vector<float> host(4, 2.0f);
  Managed src(host.data(), f32, {4});
  Owned on0(move(rt, src, fake0, ABR_COPY_ALWAYS));
  Managed past_end(on0->data, f32, {4}, {}, 8, fake0);
  CHECK(abr_to_device(rt, &past_end.managed, cpu, &options, nullptr, &out) == ABR_ERR_DLPACK_DATA);
  CHECK(error_mentions("lies outside its 16 byte buffer"));
  CHECK(past_end.deleted == 0);
}

// A closed gate in a stream's order: the work queued after it waits until it opens.
// It opens by itself after two seconds, so a runtime that waits for that work
// inside its call fails the test instead of hanging it.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool open = false, timed_out = false;
  explicit Gate(abr_stream* stream) {
    static_cast<Stream*>(stream->impl.get())->queue()->push([this] {
      std::unique_lock<std::mutex> lock(mutex);
      if (!changed.wait_for(lock, std::chrono::seconds(2), [&] { return open; })) timed_out = open = true;
    });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      open = true;
    }
    changed.notify_all();
  }
  bool closed() {
    std::lock_guard<std::mutex> lock(mutex);
    return !open;
  }
};

// The bytes of an ext_dev tensor as they are now, queued work or not.
std::vector<float> bytes_now(const DLTensor& tensor) {
  const auto& bytes = static_cast<Buffer*>(tensor.data)->bytes;
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

TEST_CASE("plug-in backend: work queued on its streams, one tensor or a batch, is done when its event says") {
  // DMA only, as CUDA: a mapping waits for the queue (as OpenCL's blocking map does), DMA does not.
  g_maps_to_host = false;
  FakeRuntime rt;
  g_maps_to_host = true;
  const std::size_t before = buffers.live();
  abr_stream* stream = nullptr;
  REQUIRE_MESSAGE(abr_stream_create(rt, fake0, &stream) == ABR_OK, std::string(abr_last_error()));
  std::vector<float> host(64 * 64);
  std::iota(host.begin(), host.end(), 1.0f);
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  {
    // One tensor: the call returns with the copy queued behind the gate, the device memory not yet written.
    Gate gate(stream);
    Managed src(host.data(), f32, {64, 64});
    DLManagedTensorVersioned* raw = nullptr;
    REQUIRE_MESSAGE(abr_to_device(rt, &src.managed, fake0, &options, stream, &raw) == ABR_OK,
                    std::string(abr_last_error()));
    Owned on0(raw);
    CHECK(gate.closed());
    CHECK(bytes_now(*on0) == std::vector<float>(host.size(), 0.0f));
    abr_event* done = nullptr;
    REQUIRE(abr_event_record(stream, &done) == ABR_OK);
    CHECK(abr_event_query(done) == ABR_NOT_READY);
    gate.release();
    CHECK(abr_event_synchronize(done) == ABR_OK);
    CHECK(abr_event_query(done) == ABR_OK);
    abr_event_destroy(done);
    CHECK_FALSE(gate.timed_out);
    CHECK(bytes_now(*on0) == host);

    // And back, strided, on the stream: the host tensor is filled once the event is done.
    Managed transposed(on0->data, f32, {64, 64}, {1, 64}, 0, fake0);
    REQUIRE_MESSAGE(abr_to_device(rt, &transposed.managed, cpu, &options, stream, &raw) == ABR_OK,
                    std::string(abr_last_error()));
    Owned back(raw);
    REQUIRE(abr_event_record(stream, &done) == ABR_OK);
    CHECK(abr_event_synchronize(done) == ABR_OK);
    abr_event_destroy(done);
    const auto* values = static_cast<const float*>(back->data);
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) CHECK(values[r * 64 + c] == host[static_cast<std::size_t>(c * 64 + r)]);
  }
  {
    // A batch of 100 small tensors, and one large, in one call on the stream: all queued behind the gate.
    Gate gate(stream);
    std::vector<std::unique_ptr<Managed>> sources;
    std::vector<DLManagedTensorVersioned*> srcs;
    for (int i = 0; i < 100; ++i) {
      sources.push_back(std::make_unique<Managed>(host.data() + i, f32, std::vector<int64_t>{7}));
      srcs.push_back(&sources.back()->managed);
    }
    sources.push_back(std::make_unique<Managed>(host.data(), f32, std::vector<int64_t>{64, 64}));
    srcs.push_back(&sources.back()->managed);
    std::vector<DLManagedTensorVersioned*> outs(srcs.size());
    abr_batch_report report = ABR_BATCH_REPORT_INIT;
    REQUIRE_MESSAGE(
        abr_to_device_many(rt, srcs.data(), srcs.size(), fake0, &options, stream, outs.data(), &report) == ABR_OK,
        abr_last_error());
    std::vector<Owned> results(outs.begin(), outs.end());
    CHECK(gate.closed());
    CHECK(report.tensors == srcs.size());
    CHECK(report.coalesced == srcs.size());  // through one block, in one copy (64 x 64 floats are small too)
    abr_event* done = nullptr;
    REQUIRE(abr_event_record(stream, &done) == ABR_OK);
    CHECK(abr_event_query(done) == ABR_NOT_READY);
    gate.release();
    CHECK(abr_event_synchronize(done) == ABR_OK);
    abr_event_destroy(done);
    CHECK_FALSE(gate.timed_out);
    for (std::size_t i = 0; i < 100; ++i)
      CHECK(values_of<float>(rt, *results[i]) ==
            std::vector<float>(host.begin() + static_cast<long>(i), host.begin() + static_cast<long>(i) + 7));
    CHECK(values_of<float>(rt, *results[100]) == host);
    for (const auto& source : sources) CHECK(source->deleted == 1);  // the batch took every source
  }
  abr_stream_destroy(stream);
  CHECK(buffers.live() == before);  // every buffer freed with its tensor, temporaries after their work
}

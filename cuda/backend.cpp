#include "cuda/backend.hpp"

#include <cstdio>

#include "lib/devices/devices.hpp"
#include "lib/tensor/layout.hpp"
#include "lib/base/log.hpp"
#include "lib/base/text.hpp"
#include "cuda/stream.hpp"
#include "cuda/peer_copy.hpp"
#include "cuda/submission.hpp"

namespace abr {

std::unique_ptr<DeviceBackend> make_cuda_backend(const abr_runtime_options& options, std::shared_ptr<PinnedPool> pool) {
  return std::make_unique<cuda::Backend>(options, std::move(pool));
}

namespace cuda {
namespace {

// A block of the pool lent to a cuda_host tensor: back to the pool when the tensor is deleted.
class PooledHostMemory final : public Storage {
 public:
  explicit PooledHostMemory(PinnedBlock block) : block_(std::move(block)) {}
  char* data() const { return block_.data(); }
  std::size_t size() const { return block_.size(); }

 private:
  PinnedBlock block_;
};

}  // namespace

Backend::Backend(const abr_runtime_options&, std::shared_ptr<PinnedPool> pool) : pool_(std::move(pool)) {
  report_.info.backend = ABR_BACKEND_CUDA;
  std::string reason;
  cu_ = driver(&reason);
  int count = 0;
  CUresult status = cu_ ? cu_->cuDeviceGetCount(&count) : CUDA_SUCCESS;
  if (cu_ && status != CUDA_SUCCESS) reason = "cuDeviceGetCount failed: " + error_text(*cu_, status);
  if (cu_ && status == CUDA_SUCCESS && count == 0) reason = "the driver found no CUDA device";
  if (!cu_ || count <= 0 || status != CUDA_SUCCESS) {
    copy_text(report_.info.detail, "CUDA unavailable: " + reason);
    log::debug("{}", report_.info.detail);
    cu_ = nullptr;
    return;
  }
  const std::string version = fmt::format("CUDA driver {}.{}", cu_->version / 1000, cu_->version % 1000 / 10);
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice handle = 0;
    if (cu_->cuDeviceGet(&handle, ordinal) != CUDA_SUCCESS) break;
    DeviceInfo info{};
    info.device = {kDLCUDA, ordinal};
    info.backend = ABR_BACKEND_CUDA;
    char name[128] = {};
    if (cu_->cuDeviceGetName(name, sizeof name, handle) != CUDA_SUCCESS)
      std::snprintf(name, sizeof name, "CUDA device");
    size_t memory = 0;
    cu_->cuDeviceTotalMem(&memory, handle);
    int major = 0, minor = 0;
    cu_->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle);
    cu_->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle);
    info.memory_bytes = memory;
    copy_text(info.name, fmt::format("{} (sm_{}{})", name, major, minor));
    copy_text(info.platform, version);
    report_.devices.push_back(info);
    devices_.push_back(std::make_shared<Device>(*cu_, handle, ordinal));
  }
  // Page-locked host memory, reachable by every device: one entry for all of them.
  DeviceInfo host{};
  host.device = {kDLCUDAHost, 0};
  host.backend = ABR_BACKEND_CUDA;
  host.flags = ABR_DEVICE_SHARES_HOST_MEMORY;
  copy_text(host.name, "CUDA page-locked host memory");
  copy_text(host.platform, version);
  report_.devices.push_back(host);
  report_.info.available = 1;
  report_.info.device_count = static_cast<int32_t>(devices_.size());
  copy_text(report_.info.detail, fmt::format("{} ({}), {} device(s)", version, cu_->library, devices_.size()));
  reclaimer_ = std::make_shared<Reclaimer>(devices_);
  pinned_ = std::make_unique<PinnedProvider>(devices_.front());
  pool_->add_returning(reclaimer_);  // deleted cuda_host tensors' blocks come back through it
}

Backend::~Backend() {
  if (!pinned_) return;
  finish_deferred_releases();  // tensors deleted so far: their blocks are back in the pool and the cache
  pool_->release_domain(pinned_->domain());
  cache_->close();  // freed while the contexts live; blocks still lent are freed when they come back
}

PoolStats Backend::device_cache_stats() { return cache_->stats(); }

uint64_t Backend::trim_device_cache() { return cache_->trim(); }

void Backend::set_device_cache_limit(uint64_t limit_bytes) { cache_->set_limit(limit_bytes); }

std::shared_ptr<Device> Backend::device(DLDevice device) const {
  if (device.device_type != kDLCUDA || device.device_id < 0 ||
      device.device_id >= static_cast<int32_t>(devices_.size()))
    fail(ABR_ERR_NO_DEVICE, "no device {} (the CUDA backend has {} device(s))", device_string(device), devices_.size());
  return devices_[static_cast<std::size_t>(device.device_id)];
}

void Backend::finish_deferred_releases() {
  if (reclaimer_) reclaimer_->drain();
}

bool Backend::device_lost(DLDevice dl) {
  return dl.device_type == kDLCUDA && dl.device_id >= 0 && dl.device_id < static_cast<int32_t>(devices_.size()) &&
      devices_[static_cast<std::size_t>(dl.device_id)]->lost();
}

const Capabilities& Backend::capabilities() const {
  static const Capabilities can = [] {
    Capabilities c;
    c.page_locks_foreign_host = true;  // cuMemHostRegister (HostRegistrar)
    c.locked_host = kDLCUDAHost;
    c.host_addresses = true;       // unified addressing: managed memory has one address, the host's and the device's
    static const char domain = 0;  // every CUDA device reaches every other: cuMemcpyPeerAsync
    c.peer_domain = &domain;
    c.peer_copy_words = "one cuMemcpyPeerAsync";
    return c;
  }();
  return can;
}

DeviceTraits Backend::traits(DLDevice dl) {
  DeviceTraits traits;
  if (dl.device_type == kDLCUDAHost) return traits;  // page-locked host memory: no context of its own
  std::shared_ptr<Device> target = device(dl);
  target->require_alive();
  traits.context = target.get();
  return traits;
}

void* Backend::memory_context(const Layout& tensor, AllocationRange* allocation) {
  if (allocation) *allocation = {};
  std::shared_ptr<Device> owner = device(tensor.device);
  owner->require_alive();
  if (tensor.numel == 0) return owner.get();  // nothing is read: any pointer will do
  Scope scope(*owner);
  const CUdeviceptr first = reinterpret_cast<CUdeviceptr>(tensor.data) + tensor.byte_offset;
  const CUdeviceptr lowest = first + static_cast<uint64_t>(tensor.min_byte);  // min_byte <= 0
  const PointerFacts facts = pointer_facts(*owner, lowest);
  if (facts.type != CU_MEMORYTYPE_DEVICE)
    fail(ABR_ERR_DLPACK_DATA, "the data pointer {:#x} of a {} tensor is not CUDA device memory", lowest,
         device_string(tensor.device));
  if (facts.ordinal != tensor.device.device_id)
    fail(ABR_ERR_DLPACK_DEVICE, "the tensor says {} but its memory is on cuda:{}", device_string(tensor.device),
         facts.ordinal);
  const CUdeviceptr end = first + static_cast<uint64_t>(tensor.max_byte_end);
  if (end > facts.start + facts.size)
    fail(ABR_ERR_DLPACK_DATA, "the view needs bytes up to {:#x}, but its allocation [{:#x}, {:#x}) ends before", end,
         facts.start, facts.start + facts.size);
  if (allocation) *allocation = {static_cast<uintptr_t>(facts.start), static_cast<uintptr_t>(facts.start + facts.size)};
  return owner.get();
}

bool Backend::host_pinned(const void* begin, uint64_t bytes) {
  if (!cu_ || !begin || devices_.front()->lost()) return false;  // unknown: treated as pageable (staged)
  Scope scope(*devices_.front());
  const auto address = reinterpret_cast<CUdeviceptr>(begin);
  const PointerFacts facts = pointer_facts(*devices_.front(), address);
  return facts.type == CU_MEMORYTYPE_HOST && address + bytes <= facts.start + facts.size;  // pageable: type 0
}

DeviceMemory Backend::allocate(DLDevice dl, uint64_t bytes, Stream*) {
  // Memory for a consumer: valid on every stream, released after the devices' queued work (reclaimer.hpp).
  DeviceMemory memory;
  if (dl.device_type == kDLCUDAHost) {
    if (!pinned_) fail(ABR_ERR_NO_DEVICE, "cuda_host needs a CUDA device: {}", report_.info.detail);
    // At the pool's limit the pool waits for deleted cuda_host tensors' blocks (add_returning).
    auto host = std::make_unique<PooledHostMemory>(
        pool_->acquire(*pinned_, static_cast<std::size_t>(std::max<uint64_t>(bytes, 1))));
    memory.handle = host->data();
    const uint64_t pooled = host->size();
    memory.storage = std::make_unique<ReleasedAfterDeviceWork>(std::move(host), reclaimer_, pooled);
    return memory;
  }
  std::shared_ptr<Device> target = device(dl);
  target->require_alive();
  CUdeviceptr address = 0;
  // Out of memory: deleted tensors' memory may still be on its way back, so wait for it and try again.
  std::unique_ptr<Storage> block = cache_->acquire(target, bytes, &address, [this] { reclaimer_->drain(); });
  memory.handle = reinterpret_cast<void*>(address);
  memory.storage = std::make_unique<ReleasedAfterDeviceWork>(std::move(block), reclaimer_);
  return memory;
}

DeviceMemory Backend::wrap_host(DLDevice device, void*, uint64_t, bool, std::unique_ptr<Storage>&) {
  fail(ABR_ERR_UNSUPPORTED, "{} cannot use host memory in place", device_string(device));
}

bool Backend::runs_on(const Stream& stream, DLDevice dl, void*) {
  const auto* cuda_stream = dynamic_cast<const CudaStream*>(&stream);
  return cuda_stream && &cuda_stream->cuda_device() == device(dl).get();
}

std::unique_ptr<Submission> Backend::submit(DLDevice dl, void*, Stream* stream) {
  return cuda::submit(device(dl), stream, *pool_, *pinned_);
}

void Backend::peer_copy(const Layout& src, const Layout& dst, Stream* stream, PeerSteps steps) {
  cuda::peer_copy(src, dst, stream, steps, device(src.device), device(dst.device));
}

std::unique_ptr<Stream> Backend::create_stream(DLDevice dl) {
  std::shared_ptr<Device> target = device(dl);
  Scope scope(*target);
  CUstream stream = nullptr;
  target->check(cu_->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  try {
    return std::make_unique<CudaStream>(target, stream, /*owned=*/true);
  } catch (...) {
    cu_->cuStreamDestroy(stream);
    throw;
  }
}

std::unique_ptr<Stream> Backend::wrap_stream(DLDevice dl, void* native) {
  std::shared_ptr<Device> target = device(dl);
  Scope scope(*target);
  auto stream = static_cast<CUstream>(native);
  // The special handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) belong to every
  // context; a real stream must belong to this device's.
  if (stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD) {
    CUcontext context = nullptr;
    const CUresult status = cu_->cuStreamGetCtx(stream, &context);
    if (status == CUDA_ERROR_INVALID_HANDLE || status == CUDA_ERROR_INVALID_VALUE)
      fail(ABR_ERR_INVALID_ARGUMENT, "{} is not a CUDA stream", native);
    target->check(status, "cuStreamGetCtx");
    if (context != target->context())
      fail(ABR_ERR_INVALID_ARGUMENT, "the CUDA stream {} belongs to another context than {}'s", native,
           device_string(dl));
  }
  return std::make_unique<CudaStream>(target, stream, /*owned=*/false);
}

}  // namespace cuda
}  // namespace abr

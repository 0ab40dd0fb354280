#include "opencl/backend.hpp"

#include <algorithm>

#include "lib/devices/devices.hpp"
#include "lib/base/error.hpp"
#include "lib/base/fault.hpp"
#include "lib/tensor/layout.hpp"
#include "lib/base/log.hpp"
#include "opencl/memory.hpp"
#include "opencl/queue_stream.hpp"
#include "opencl/submission.hpp"

namespace abr {

std::unique_ptr<DeviceBackend> make_opencl_backend(const abr_runtime_options& options,
                                                   std::shared_ptr<PinnedPool> pool) {
  return std::make_unique<opencl::Backend>(options, std::move(pool));
}

namespace opencl {
namespace {

const char* mem_type_name(cl_mem_object_type type) {
  switch (type) {
    case CL_MEM_OBJECT_BUFFER: return "a buffer";
    case CL_MEM_OBJECT_PIPE: return "a pipe";
    default: return "an image";
  }
}

}  // namespace

Backend::Backend(const abr_runtime_options&, std::shared_ptr<PinnedPool> pool)
    : pool_(std::move(pool)), found_(discover()) {
  if (!found_.devices.empty()) cl_ = api(nullptr);
  own_.resize(found_.devices.size());
}

cl_device_id Backend::device_id(DLDevice device) const {
  if (device.device_type != kDLOpenCL || device.device_id < 0 ||
      device.device_id >= static_cast<int32_t>(found_.devices.size()))
    fail(ABR_ERR_NO_DEVICE, "no device {} (the OpenCL backend has {} device(s))", device_string(device),
         found_.devices.size());
  return found_.devices[static_cast<std::size_t>(device.device_id)];
}

cl_device_id Backend::match_device(const std::vector<cl_device_id>& candidates, DLDevice device) const {
  const cl_device_id id = device_id(device);
  if (std::find(candidates.begin(), candidates.end(), id) != candidates.end()) return id;
  // Another library's objects come from another copy of the driver when ours is in a
  // namespace of its own: the same device, another pointer.
  const std::string& key = found_.keys[static_cast<std::size_t>(device.device_id)];
  if (!cl_->private_namespace || key.empty()) return nullptr;
  for (cl_device_id candidate : candidates)
    if (device_key(*cl_, candidate) == key) return candidate;
  return nullptr;
}

std::shared_ptr<Context> Backend::own_context(DLDevice device) {
  cl_device_id id = device_id(device);
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<Context>& slot = own_[static_cast<std::size_t>(device.device_id)];
  if (!slot) {
    cl_int status = CL_SUCCESS;
    Ref<cl_context> context(cl_->CreateContext(nullptr, 1, &id, nullptr, nullptr, &status), cl_->ReleaseContext);
    check(status, "clCreateContext");
    slot = std::make_shared<Context>(*cl_, context.get(), id, device);
    log::debug("created the OpenCL context for {}", device_string(device));
  }
  return slot;
}

std::shared_ptr<Context> Backend::context_for(cl_context handle, DLDevice device) {
  cl_device_id id = device_id(device);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::shared_ptr<Context>& own : own_) {
    if (!own || own->handle() != handle) continue;
    if (own->device() != id)
      fail(ABR_ERR_DLPACK_DEVICE, "the cl_mem belongs to the runtime's context of {}, not {}",
           device_string(own->dl_device()), device_string(device));
    return own;
  }
  std::shared_ptr<Context>& adopted = adopted_[{handle, device.device_id}];
  if (adopted) return adopted;
  cl_uint count = 0;
  check(cl_->GetContextInfo(handle, CL_CONTEXT_NUM_DEVICES, sizeof count, &count, nullptr), "clGetContextInfo");
  std::vector<cl_device_id> members(count);
  check(cl_->GetContextInfo(handle, CL_CONTEXT_DEVICES, count * sizeof(cl_device_id), members.data(), nullptr),
        "clGetContextInfo");
  const cl_device_id member = match_device(members, device);
  if (!member) {
    adopted_.erase({handle, device.device_id});
    fail(ABR_ERR_DLPACK_DEVICE, "the caller's cl_context does not include {}", device_string(device));
  }
  adopted = std::make_shared<Context>(*cl_, handle, member, device);
  log::debug("adopted a caller's OpenCL context for {}", device_string(device));
  return adopted;
}

const Capabilities& Backend::capabilities() const {
  static const Capabilities can = [] {
    Capabilities c;
    c.maps_to_host = true;          // clEnqueueMapBuffer: the host engine walks mapped memory
    c.casts_whole_elements = true;  // the cast kernels' typed global pointers
    c.host_wrap_words = "uses the host memory in place (CL_MEM_USE_HOST_PTR)";
    return c;
  }();
  return can;
}

DeviceTraits Backend::traits(DLDevice device) {
  device_id(device);  // throws for a device this backend lacks
  const std::size_t index = static_cast<std::size_t>(device.device_id);
  DeviceTraits traits;
  traits.host_wrap_alignment = found_.wrap_alignment[index];
  traits.context = own_context(device).get();
  return traits;
}

void* Backend::memory_context(const Layout& tensor, AllocationRange* allocation) {
  if (allocation) *allocation = {};                           // a cl_mem handle, not an address
  if (!tensor.data) return own_context(tensor.device).get();  // empty tensor without memory
  cl_mem mem = static_cast<cl_mem>(tensor.data);
  device_id(tensor.device);
  cl_mem_object_type type = 0;
  check(cl_->GetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, nullptr), "clGetMemObjectInfo(CL_MEM_TYPE)");
  if (type != CL_MEM_OBJECT_BUFFER)
    fail(ABR_ERR_DLPACK_DATA, "the cl_mem on {} is {}, not a buffer", device_string(tensor.device),
         mem_type_name(type));
  std::size_t size = 0;
  check(cl_->GetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, nullptr), "clGetMemObjectInfo(CL_MEM_SIZE)");
  if (tensor.numel > 0) {
    // 128 bits: a byte_offset near 2^63 plus the view's extent would wrap (and print negative).
    const __int128 start = static_cast<__int128>(tensor.byte_offset) + tensor.min_byte;
    const __int128 end = static_cast<__int128>(tensor.byte_offset) + tensor.max_byte_end;
    if (start < 0 || end > static_cast<__int128>(size))
      fail(ABR_ERR_DLPACK_DATA, "the view needs bytes [{}, {}) of the cl_mem, which holds {} bytes", start, end, size);
  }
  cl_context context = nullptr;
  check(cl_->GetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof context, &context, nullptr),
        "clGetMemObjectInfo(CL_MEM_CONTEXT)");
  if (allocation) {  // a buffer made over host memory (CL_MEM_USE_HOST_PTR): which host bytes it uses
    void* host = nullptr;
    check(cl_->GetMemObjectInfo(mem, CL_MEM_HOST_PTR, sizeof host, &host, nullptr),
          "clGetMemObjectInfo(CL_MEM_HOST_PTR)");
    allocation->host_base = reinterpret_cast<uintptr_t>(host);
    // A sub-buffer shares its parent's bytes (OpenCL has no sub-buffer of a sub-buffer).
    cl_mem parent = nullptr;
    std::size_t origin = 0;
    check(cl_->GetMemObjectInfo(mem, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, nullptr),
          "clGetMemObjectInfo(CL_MEM_ASSOCIATED_MEMOBJECT)");
    if (parent)
      check(cl_->GetMemObjectInfo(mem, CL_MEM_OFFSET, sizeof origin, &origin, nullptr),
            "clGetMemObjectInfo(CL_MEM_OFFSET)");
    allocation->root = reinterpret_cast<uintptr_t>(parent ? parent : mem);
    allocation->root_offset = origin;
  }
  return context_for(context, tensor.device).get();
}

DeviceMemory Backend::allocate(DLDevice device, uint64_t bytes, Stream*) {
  MemRef mem = own_context(device)->create_buffer(CL_MEM_READ_WRITE, static_cast<std::size_t>(bytes));
  cl_mem handle = mem.get();
  return {handle, std::make_unique<BufferStorage>(std::move(mem))};
}

DeviceMemory Backend::wrap_host(DLDevice device, void* base, uint64_t bytes, bool read_only,
                                std::unique_ptr<Storage>& owner) {
  std::unique_ptr<HostWrapStorage> wrap =
      wrap_host_memory(*own_context(device), base, static_cast<std::size_t>(bytes), read_only, owner);
  cl_mem handle = wrap->get();
  return {handle, std::move(wrap)};
}

bool Backend::runs_on(const Stream& stream, DLDevice, void* context) {
  const auto* queue_stream = dynamic_cast<const QueueStream*>(&stream);
  return queue_stream && queue_stream->context().handle() == static_cast<Context*>(context)->handle();
}

std::unique_ptr<Submission> Backend::submit(DLDevice, void* context, Stream* stream) {
  return opencl::submit(static_cast<Context*>(context)->shared_from_this(), stream);
}

std::unique_ptr<Stream> Backend::create_stream(DLDevice device) {
  std::shared_ptr<Context> context = own_context(device);
  cl_int status = CL_SUCCESS;
  fault::point(ABR_ERR_BACKEND, "OpenCL queue");
  cl_command_queue queue =
      cl_->CreateCommandQueueWithProperties(context->handle(), context->device(), nullptr, &status);
  check(status, "clCreateCommandQueueWithProperties");
  return std::make_unique<QueueStream>(std::move(context), Ref<cl_command_queue>(queue, cl_->ReleaseCommandQueue));
}

std::unique_ptr<Stream> Backend::wrap_stream(DLDevice device, void* native) {
  cl_command_queue queue = static_cast<cl_command_queue>(native);
  cl_device_id queue_device = nullptr;
  check(cl_->GetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof queue_device, &queue_device, nullptr),
        "clGetCommandQueueInfo(CL_QUEUE_DEVICE)");
  if (!match_device({queue_device}, device))
    fail(ABR_ERR_INVALID_ARGUMENT, "the cl_command_queue belongs to another device than {}", device_string(device));
  cl_command_queue_properties properties = 0;
  check(cl_->GetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof properties, &properties, nullptr),
        "clGetCommandQueueInfo(CL_QUEUE_PROPERTIES)");
  if (properties & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    fail(ABR_ERR_UNSUPPORTED, "out-of-order command queues cannot order transfers; wrap an in-order queue");
  cl_context context = nullptr;
  check(cl_->GetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof context, &context, nullptr),
        "clGetCommandQueueInfo(CL_QUEUE_CONTEXT)");
  std::shared_ptr<Context> owner = context_for(context, device);
  check(cl_->RetainCommandQueue(queue), "clRetainCommandQueue");  // held while wrapped
  return std::make_unique<QueueStream>(std::move(owner), Ref<cl_command_queue>(queue, cl_->ReleaseCommandQueue));
}

}  // namespace opencl
}  // namespace abr

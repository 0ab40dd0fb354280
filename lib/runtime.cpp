#include "runtime.hpp"

#include <cstring>

#include "dtype.hpp"
#include "error.hpp"
#include "host_copy.hpp"
#include "layout.hpp"
#include "log.hpp"
#include "planner.hpp"

namespace abr {
namespace {

constexpr uint32_t kKnownRuntimeFlags = ABR_RUNTIME_DISABLE_CUDA | ABR_RUNTIME_DISABLE_OPENCL;

// Integer arithmetic: validation proves data + byte_offset stays in the address
// space only for tensors with elements; an empty one may carry any byte_offset
// (found by the fuzzer: UBSan "pointer overflow") and is never dereferenced.
const char* first_element(const Layout& layout) {
  return reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(layout.data) + layout.byte_offset);
}

void fill_report(abr_transfer_report* report, const Plan& plan, uint64_t bytes) {
  if (!report) return;
  std::memset(report, 0, sizeof *report);
  report->path = plan.path;
  report->flags = (plan.pack ? ABR_REPORT_PACKED : 0u) | (plan.cast ? ABR_REPORT_CAST : 0u);
  report->bytes_moved = bytes;
  std::snprintf(report->detail, sizeof report->detail, "%s", plan.detail.c_str());
}

}  // namespace

abr_runtime_options resolve_runtime_options(const abr_runtime_options* options) {
  abr_runtime_options out{};
  if (!options) return out;
  if (options->version > ABR_RUNTIME_OPTIONS_VERSION)
    fail(ABR_ERR_INVALID_ARGUMENT, "abr_runtime_options version {} is newer than this library's ({})",
         options->version, ABR_RUNTIME_OPTIONS_VERSION);
  if (options->flags & ~kKnownRuntimeFlags)
    fail(ABR_ERR_INVALID_ARGUMENT, "abr_runtime_options.flags has unknown bits {:#x}",
         options->flags & ~kKnownRuntimeFlags);
  out = *options;
  out.version = ABR_RUNTIME_OPTIONS_VERSION;
  return out;
}

Runtime::Runtime(const abr_runtime_options* options) : Runtime(resolve_runtime_options(options)) {}

Runtime::Runtime(const abr_runtime_options& resolved)
    : pool_(PinnedPool::create()), opencl_(make_opencl_backend(resolved, pool_)), devices_(resolved, opencl_->report()) {
  log::debug("runtime created with {} device(s)", devices_.count());
}

const void* Runtime::memory_context(const Layout& tensor, const char* what) {
  if (is_host_accessible(tensor.device.device_type)) return nullptr;
  devices_.require(tensor.device, what);
  if (tensor.device.device_type == kDLOpenCL) return opencl_->memory_context(tensor);
  return nullptr;  // a backend without data paths yet: the planner says so
}

DeviceTraits Runtime::traits_of(DLDevice device) {
  DeviceTraits traits;
  traits.shares_host_memory = true;  // the CPU
  if (device.device_type == kDLCPU) return traits;
  devices_.require(device, "destination");
  if (device.device_type == kDLOpenCL) return opencl_->traits(device);
  return DeviceTraits{};
}

void Runtime::check_stream(const Stream* stream, DLDevice a, DLDevice b) const {
  if (!stream) return;
  const DLDevice s = stream->device();
  if (!same_device(s, a) && !same_device(s, b))
    fail(ABR_ERR_INVALID_ARGUMENT, "the stream belongs to {}, which is neither {} nor {}", device_string(s),
         device_string(a), device_string(b));
}

template <class Managed>
DLManagedTensorVersioned* Runtime::take_and_transfer(Managed* src, DLDevice dst, const abr_transfer_options* options,
                                                     Stream* stream) {
  if (!src) fail(ABR_ERR_INVALID_ARGUMENT, "src is NULL");
  SourceTensor source(src);
  try {
    return transfer(source, dst, options, stream);
  } catch (...) {
    source.relinquish();  // on any error the caller keeps the source
    throw;
  }
}

DLManagedTensorVersioned* Runtime::to_device(DLManagedTensorVersioned* src, DLDevice dst,
                                             const abr_transfer_options* options, Stream* stream) {
  return take_and_transfer(src, dst, options, stream);
}

DLManagedTensorVersioned* Runtime::to_device(DLManagedTensor* src, DLDevice dst, const abr_transfer_options* options,
                                             Stream* stream) {
  return take_and_transfer(src, dst, options, stream);
}

DLManagedTensorVersioned* Runtime::transfer(SourceTensor& source, DLDevice dst, const abr_transfer_options* options,
                                            Stream* stream) {
  if (source.versioned()) validate_header(*source.versioned(), "source");
  const TransferOptions opts = resolve_options(options);
  const Layout src = validate_tensor(source.tensor(), Role::Source, "source");
  const void* src_context = memory_context(src, "source");
  const Plan plan = plan_transfer(devices_, src, src_context, dst, traits_of(dst), opts);
  check_stream(stream, src.device, dst);
  log::debug("to_device {} {} {} -> {}: {} ({})", dtype_name(src.dtype), shape_string(src.shape),
             device_string(src.device), device_string(dst), path_name(plan.path), plan.detail);

  DLManagedTensorVersioned* out =
      plan.view ? export_view(source, src, dst, plan) : export_copy(source, src, dst, plan, stream);
  fill_report(opts.report, plan, plan.view ? 0 : src.numel * itemsize(plan.dtype));
  return out;
}

DLManagedTensorVersioned* Runtime::export_view(SourceTensor& source, const Layout& src, DLDevice dst,
                                               const Plan& plan) {
  const uint64_t read_only = source.flags() & DLPACK_FLAG_BITMASK_READ_ONLY;
  auto keep = std::make_unique<SourceTensor>(std::move(source));
  SourceTensor* held = keep.get();
  std::unique_ptr<Storage> owner = std::move(keep);  // the view keeps the source alive
  try {
    if (plan.path == ABR_PATH_HOST_WRAP) {
      // The device buffer starts at the lowest byte the view touches.
      char* base = const_cast<char*>(first_element(src)) + src.min_byte;
      PendingExport pending({nullptr, dst, src.dtype, src.shape, src.strides, static_cast<uint64_t>(-src.min_byte),
                             read_only});
      DeviceMemory memory = opencl_->wrap_host(dst, base, static_cast<uint64_t>(src.max_byte_end - src.min_byte),
                                               read_only != 0, owner);
      pending.set_data(memory.handle);
      return pending.finish(std::move(memory.storage));
    }
    // Host memory is handed on as a pointer to the first element, device memory as handle + byte_offset.
    const bool direct = is_direct_address(src.device.device_type);
    const ExportSpec spec{direct ? const_cast<char*>(first_element(src)) : src.data, dst, src.dtype, src.shape,
                          src.strides, direct ? 0 : src.byte_offset, read_only};
    return export_tensor(spec, std::move(owner));
  } catch (...) {
    if (owner) held->relinquish();  // not handed on: still the caller's
    throw;
  }
}

DLManagedTensorVersioned* Runtime::export_copy(SourceTensor& source, const Layout& src, DLDevice dst,
                                               const Plan& plan, Stream* stream) {
  auto keep = std::make_unique<SourceTensor>(std::move(source));
  try {
    const std::size_t bytes = static_cast<std::size_t>(src.numel * itemsize(plan.dtype));
    std::shared_ptr<Storage> memory;
    void* data = nullptr;
    if (dst.device_type == kDLCPU) {
      auto buffer = std::make_shared<HostBuffer>(bytes);
      data = buffer->data();
      memory = std::move(buffer);
    } else {
      DeviceMemory device_memory = opencl_->allocate(dst, bytes);
      data = device_memory.handle;
      memory = std::move(device_memory.storage);
    }
    // Everything that can run out of memory happens before the copy starts.
    PendingExport pending({data, dst, plan.dtype, src.shape, compact_strides(src.shape), 0,
                           DLPACK_FLAG_BITMASK_IS_COPIED});
    auto exported_memory = std::make_unique<SharedStorage>(memory);
    auto stream_memory = std::make_unique<SharedStorage>(memory);

    execute(plan, src, compact_layout(dst, plan.dtype, src.shape, data), stream);
    if (stream) {  // the work may still be running: the stream holds the source and the memory until it is done
      stream->retain(std::move(keep));
      stream->retain(std::move(stream_memory));
    } else {
      keep->release();  // the copy is complete: the source is no longer needed
    }
    return pending.finish(std::move(exported_memory));
  } catch (...) {
    keep->relinquish();
    throw;
  }
}

void Runtime::execute(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream) {
  if (plan.path != ABR_PATH_HOST_COPY) return opencl_->execute(plan, src, dst, stream);
  char* target = const_cast<char*>(first_element(dst));
  if (!plan.overlap) return host_copy_layout(src, first_element(src), dst.dtype, target, dst.strides.data());
  // Overlapping memory: pack the source first, then scatter it.
  HostBuffer staging(static_cast<std::size_t>(src.nbytes));
  const Layout packed = compact_layout(src.device, src.dtype, src.shape, staging.data());
  host_copy_layout(src, first_element(src), src.dtype, staging.data(), packed.strides.data());
  host_copy_layout(packed, staging.data(), dst.dtype, target, dst.strides.data());
}

void Runtime::copy(const DLTensor& src_tensor, const DLTensor& dst_tensor, Stream* stream) {
  const Layout src = validate_tensor(src_tensor, Role::Source, "source");
  const Layout dst = validate_tensor(dst_tensor, Role::Destination, "destination");
  const void* src_context = memory_context(src, "source");
  const void* dst_context = memory_context(dst, "destination");
  const Plan plan = plan_copy(devices_, src, src_context, dst, dst_context);
  check_stream(stream, src.device, dst.device);
  log::debug("copy {} {} -> {} {}: {} ({})", dtype_name(src.dtype), device_string(src.device), dtype_name(dst.dtype),
             device_string(dst.device), path_name(plan.path), plan.detail);
  execute(plan, src, dst, stream);
}

void Runtime::copy(const DLManagedTensorVersioned& src, const DLManagedTensorVersioned& dst, Stream* stream) {
  validate_header(src, "source");
  validate_header(dst, "destination");
  if (dst.flags & DLPACK_FLAG_BITMASK_READ_ONLY) fail(ABR_ERR_READ_ONLY, "destination is marked READ_ONLY");
  copy(src.dl_tensor, dst.dl_tensor, stream);
}

std::unique_ptr<Stream> Runtime::create_stream(DLDevice device) {
  devices_.require(device, "stream device");
  if (device.device_type == kDLCPU) return std::make_unique<InlineHostStream>();
  if (device.device_type == kDLOpenCL) return opencl_->create_stream(device);
  fail(ABR_ERR_UNSUPPORTED, "streams on {} are not supported in this build", device_string(device));
}

std::unique_ptr<Stream> Runtime::wrap_stream(DLDevice device, void* native) {
  devices_.require(device, "stream device");
  if (!native) fail(ABR_ERR_INVALID_ARGUMENT, "abr_stream_wrap: native stream is NULL");
  if (device.device_type == kDLCPU)
    fail(ABR_ERR_INVALID_ARGUMENT, "the CPU has no native streams to wrap; use abr_stream_create");
  if (device.device_type == kDLOpenCL) return opencl_->wrap_stream(device, native);
  fail(ABR_ERR_UNSUPPORTED, "wrapping streams on {} is not supported in this build", device_string(device));
}

}  // namespace abr

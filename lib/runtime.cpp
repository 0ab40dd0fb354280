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

const char* first_element(const Layout& layout) {
  return static_cast<const char*>(layout.data) + layout.byte_offset;
}

// Copies (and converts) a host view into `dst`, compact or strided.
void run_host_copy(const Layout& src, DLDataType dst_dtype, char* dst, const int64_t* dst_strides) {
  const HostSide from{first_element(src), src.strides.data()};
  if (same_dtype(src.dtype, dst_dtype))
    host_copy(from, dst, dst_strides, src.shape.data(), src.ndim(), src.itemsize);
  else
    host_cast_copy(from, src.dtype, dst, dst_strides, dst_dtype, src.shape.data(), src.ndim());
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

Runtime::Runtime(const abr_runtime_options* options) : devices_(resolve_runtime_options(options)) {
  log::debug("runtime created with {} device(s)", devices_.count());
}

void Runtime::check_stream(const Stream* stream, DLDevice a, DLDevice b) const {
  if (!stream) return;
  const DLDevice s = stream->device();
  auto same = [](DLDevice x, DLDevice y) { return x.device_type == y.device_type && x.device_id == y.device_id; };
  if (!same(s, a) && !same(s, b))
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
  const Plan plan = plan_transfer(devices_, src, dst, opts);
  check_stream(stream, src.device, dst);
  log::debug("to_device {} {} {} -> {}: {} ({})", dtype_name(src.dtype), shape_string(src.shape),
             device_string(src.device), device_string(dst), path_name(plan.path), plan.detail);

  DLManagedTensorVersioned* out = nullptr;
  if (plan.view) {
    // The view keeps the source alive: its deleter runs when the view is deleted.
    ExportSpec spec{const_cast<char*>(first_element(src)), dst, src.dtype, src.shape, src.strides, 0,
                    source.flags() & DLPACK_FLAG_BITMASK_READ_ONLY};
    auto keep = std::make_unique<SourceTensor>(std::move(source));
    try {
      out = export_tensor(spec, std::move(keep));
    } catch (...) {
      keep->relinquish();  // export failed and `keep` still holds it: still the caller's
      throw;
    }
    fill_report(opts.report, plan, 0);
    return out;
  }

  auto buffer = std::make_unique<HostBuffer>(static_cast<std::size_t>(src.numel * itemsize(plan.dtype)));
  const std::vector<int64_t> strides = compact_strides(src.shape);
  run_host_copy(src, plan.dtype, buffer->data(), strides.data());
  ExportSpec spec{buffer->data(), dst, plan.dtype, src.shape, strides, 0, DLPACK_FLAG_BITMASK_IS_COPIED};
  std::unique_ptr<Storage> storage = std::move(buffer);
  out = export_tensor(spec, std::move(storage));
  fill_report(opts.report, plan, src.numel * itemsize(plan.dtype));
  source.release();  // the copy is complete: the source is no longer needed
  return out;
}

void Runtime::copy(const DLTensor& src_tensor, const DLTensor& dst_tensor, Stream* stream) {
  const Layout src = validate_tensor(src_tensor, Role::Source, "source");
  const Layout dst = validate_tensor(dst_tensor, Role::Destination, "destination");
  const Plan plan = plan_copy(devices_, src, dst);
  check_stream(stream, src.device, dst.device);
  log::debug("copy {} {} -> {} {}: {}", dtype_name(src.dtype), device_string(src.device), dtype_name(dst.dtype),
             device_string(dst.device), plan.detail);

  char* target = const_cast<char*>(first_element(dst));
  if (!plan.overlap) {
    run_host_copy(src, dst.dtype, target, dst.strides.data());
    return;
  }
  // Overlapping memory: pack the source first, then scatter it.
  HostBuffer staging(static_cast<std::size_t>(src.nbytes));
  const std::vector<int64_t> compact = compact_strides(src.shape);
  host_copy({first_element(src), src.strides.data()}, staging.data(), compact.data(), src.shape.data(), src.ndim(),
            src.itemsize);
  Layout packed = src;
  packed.data = staging.data();
  packed.byte_offset = 0;
  packed.strides = compact;
  run_host_copy(packed, dst.dtype, target, dst.strides.data());
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
  fail(ABR_ERR_UNSUPPORTED, "streams on {} are not supported in this build", device_string(device));
}

std::unique_ptr<Stream> Runtime::wrap_stream(DLDevice device, void* native) {
  devices_.require(device, "stream device");
  if (!native) fail(ABR_ERR_INVALID_ARGUMENT, "abr_stream_wrap: native stream is NULL");
  if (device.device_type == kDLCPU)
    fail(ABR_ERR_INVALID_ARGUMENT, "the CPU has no native streams to wrap; use abr_stream_create");
  fail(ABR_ERR_UNSUPPORTED, "wrapping streams on {} is not supported in this build", device_string(device));
}

}  // namespace abr

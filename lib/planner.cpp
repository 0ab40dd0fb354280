#include "planner.hpp"

#include <fmt/format.h>

#include "dtype.hpp"
#include "error.hpp"
#include "host_copy.hpp"

namespace abr {
namespace {

constexpr uint32_t kKnownTransferFlags = ABR_TRANSFER_NO_HOST_STAGING | ABR_TRANSFER_REQUIRE_CONTIGUOUS;

void require_cast(DLDataType from, DLDataType to) {
  if (!same_dtype(from, to) && !can_cast(from, to))
    fail(ABR_ERR_UNSUPPORTED, "no conversion from {} to {}", dtype_name(from), dtype_name(to));
}

// Device memory has data paths only on backends that move data (OpenCL so far).
void require_data_path(DLDevice src, bool src_host, DLDevice dst, bool dst_host) {
  if ((!src_host && src.device_type != kDLOpenCL) || (!dst_host && dst.device_type != kDLOpenCL))
    fail(ABR_ERR_UNSUPPORTED, "{} -> {}: no path between these devices in this build", device_string(src),
         device_string(dst));
}

// Two device views: one device-side copy in a shared context, otherwise staged
// through host memory in chunks (a device cannot read another context's buffers).
void plan_between_contexts(Plan& plan, const TransferOptions& options, bool reshape, const std::string& reason) {
  if (plan.src_context == plan.dst_context) {
    plan.path = ABR_PATH_DEVICE_COPY;
    plan.engine = reshape ? Engine::Device : Engine::Bytes;
    plan.detail = fmt::format("device copy ({}){}", reason,
                              plan.overlap  ? ": packed into a temporary first because the two overlap"
                              : reshape ? ": packed/converted by a device kernel"
                                        : ": one buffer copy");
    return;
  }
  if (options.flags & ABR_TRANSFER_NO_HOST_STAGING)
    fail(ABR_ERR_UNSUPPORTED,
         "the source and destination are in different OpenCL contexts, which only host staging can bridge, and "
         "ABR_TRANSFER_NO_HOST_STAGING forbids it");
  plan.path = ABR_PATH_STAGED;
  plan.engine = reshape ? Engine::Device : Engine::Bytes;
  plan.detail = fmt::format("staged between contexts ({}): chunks bounced through mapped host memory{}", reason,
                            reshape ? ", packed/converted by device kernels" : "");
}

bool ranges_overlap(const Layout& a, const Layout& b) {
  if (a.numel == 0 || b.numel == 0) return false;
  const intptr_t a0 = reinterpret_cast<intptr_t>(a.data) + static_cast<intptr_t>(a.byte_offset);
  const intptr_t b0 = reinterpret_cast<intptr_t>(b.data) + static_cast<intptr_t>(b.byte_offset);
  return a0 + a.min_byte < b0 + b.max_byte_end && b0 + b.min_byte < a0 + a.max_byte_end;
}

}  // namespace

const char* path_name(abr_path path) noexcept {
  switch (path) {
    case ABR_PATH_NONE: return "none";
    case ABR_PATH_ZERO_COPY: return "zero_copy";
    case ABR_PATH_HOST_COPY: return "host_copy";
    case ABR_PATH_DEVICE_COPY: return "device_copy";
    case ABR_PATH_HOST_TO_DEVICE: return "host_to_device";
    case ABR_PATH_DEVICE_TO_HOST: return "device_to_host";
    case ABR_PATH_STAGED: return "staged";
    case ABR_PATH_PEER: return "peer";
    case ABR_PATH_HOST_WRAP: return "host_wrap";
    default: return "unknown";
  }
}

TransferOptions resolve_options(const abr_transfer_options* options) {
  TransferOptions out;
  if (!options) return out;
  if (options->version > ABR_TRANSFER_OPTIONS_VERSION)
    fail(ABR_ERR_INVALID_ARGUMENT, "abr_transfer_options version {} is newer than this library's ({})",
         options->version, ABR_TRANSFER_OPTIONS_VERSION);
  if (options->copy != ABR_COPY_IF_NEEDED && options->copy != ABR_COPY_ALWAYS && options->copy != ABR_COPY_NEVER)
    fail(ABR_ERR_INVALID_ARGUMENT, "abr_transfer_options.copy = {} is not an abr_copy_mode",
         static_cast<int>(options->copy));
  if (options->flags & ~kKnownTransferFlags)
    fail(ABR_ERR_INVALID_ARGUMENT, "abr_transfer_options.flags has unknown bits {:#x}",
         options->flags & ~kKnownTransferFlags);
  if (!is_zero_dtype(options->dtype)) validate_dtype(options->dtype, "target dtype");
  out.copy = options->copy;
  out.flags = options->flags;
  out.dtype = options->dtype;
  out.report = options->report;
  return out;
}

Plan plan_transfer(const DeviceRegistry& devices, const Layout& src, const void* src_context, DLDevice dst,
                   const DeviceTraits& dst_traits, const TransferOptions& options) {
  Plan plan;
  plan.dtype = is_zero_dtype(options.dtype) ? src.dtype : options.dtype;
  plan.cast = !same_dtype(plan.dtype, src.dtype);
  plan.src_context = src_context;
  plan.dst_context = dst_traits.context;
  require_cast(src.dtype, plan.dtype);
  devices.require(dst, "destination");
  const bool src_host = is_host_accessible(src.device.device_type);
  if (!src_host) devices.require(src.device, "source");
  const bool dst_host = dst.device_type == kDLCPU;
  require_data_path(src.device, src_host, dst, dst_host);

  // Reasons that rule out sharing the source's memory.
  std::string reason;
  if (options.copy == ABR_COPY_ALWAYS) reason = "ABR_COPY_ALWAYS";
  else if (plan.cast) reason = fmt::format("{} -> {} needs a conversion", dtype_name(src.dtype), dtype_name(plan.dtype));
  else if ((options.flags & ABR_TRANSFER_REQUIRE_CONTIGUOUS) && !src.compact)
    reason = "ABR_TRANSFER_REQUIRE_CONTIGUOUS and the source is strided";
  else if (src_host && !dst_host && !dst_traits.shares_host_memory)
    reason = fmt::format("{} does not share host memory", device_string(dst));
  else if (src_host && !dst_host && dst_traits.host_wrap_alignment &&
           (reinterpret_cast<uintptr_t>(src.data) + src.byte_offset + src.min_byte) % dst_traits.host_wrap_alignment)
    reason = fmt::format("the host data is not aligned to the {} bytes {} needs to use it in place",
                         dst_traits.host_wrap_alignment, device_string(dst));
  else if (!src_host && dst_host)
    reason = fmt::format("{} memory is not addressable from the host", device_string(src.device));
  else if (!src_host && !dst_host && !same_device(src.device, dst))
    reason = fmt::format("the data lives on {}", device_string(src.device));

  if (reason.empty()) {
    plan.view = true;
    if (src_host && !dst_host) {
      plan.path = ABR_PATH_HOST_WRAP;
      plan.detail = fmt::format("{} uses the host memory in place (CL_MEM_USE_HOST_PTR), no copy", device_string(dst));
    } else {
      plan.path = ABR_PATH_ZERO_COPY;
      plan.detail = fmt::format("view of {} memory, layout kept", device_string(src.device));
    }
    return plan;
  }
  if (options.copy == ABR_COPY_NEVER)
    fail(ABR_ERR_COPY_REQUIRED, "ABR_COPY_NEVER, but a copy is required: {}", reason);
  plan.pack = !src.compact;
  const bool reshape = plan.pack || plan.cast;
  if (src_host && dst_host) {
    plan.path = ABR_PATH_HOST_COPY;
    plan.engine = Engine::Host;
    plan.detail = fmt::format("host copy ({}){}{}", reason, plan.pack ? ", strided source packed" : "",
                              plan.cast ? ", converted on the host" : "");
  } else if (src_host || dst_host) {
    plan.path = src_host ? ABR_PATH_HOST_TO_DEVICE : ABR_PATH_DEVICE_TO_HOST;
    plan.engine = reshape ? Engine::Host : Engine::Bytes;
    plan.detail = fmt::format("{} ({}): {}", src_host ? "host to device" : "device to host", reason,
                              reshape ? "packed/converted by the host engine through mapped device memory"
                                      : "one direct copy of the bytes");
  } else {
    plan_between_contexts(plan, options, reshape, reason);
  }
  return plan;
}

Plan plan_copy(const DeviceRegistry& devices, const Layout& src, const void* src_context, const Layout& dst,
               const void* dst_context) {
  if (src.shape != dst.shape)
    fail(ABR_ERR_SHAPE_MISMATCH, "source shape {} differs from destination shape {}", shape_string(src.shape),
         shape_string(dst.shape));
  Plan plan;
  plan.dtype = dst.dtype;
  plan.cast = !same_dtype(src.dtype, dst.dtype);
  plan.src_context = src_context;
  plan.dst_context = dst_context;
  require_cast(src.dtype, dst.dtype);
  const bool src_host = is_host_accessible(src.device.device_type);
  const bool dst_host = is_host_accessible(dst.device.device_type);
  if (!src_host) devices.require(src.device, "source");
  if (!dst_host) devices.require(dst.device, "destination");
  require_data_path(src.device, src_host, dst.device, dst_host);

  plan.pack = !src.compact;
  const bool reshape = plan.pack || !dst.compact || plan.cast;
  if (src_host && dst_host) {
    plan.path = ABR_PATH_HOST_COPY;
    plan.engine = Engine::Host;
    plan.overlap = ranges_overlap(src, dst);
    plan.detail = fmt::format("host copy into an existing tensor{}{}", plan.cast ? ", converted" : "",
                              plan.overlap ? ", staged through a temporary because the two overlap" : "");
  } else if (src_host || dst_host) {
    plan.path = src_host ? ABR_PATH_HOST_TO_DEVICE : ABR_PATH_DEVICE_TO_HOST;
    plan.engine = reshape ? Engine::Host : Engine::Bytes;
    plan.detail = fmt::format("{} into an existing tensor: {}", src_host ? "host to device" : "device to host",
                              reshape ? "packed/converted by the host engine through mapped device memory"
                                      : "one direct copy of the bytes");
  } else {
    plan.overlap = src.data == dst.data && ranges_overlap(src, dst);
    plan_between_contexts(plan, TransferOptions{}, reshape || plan.overlap, "copy into an existing tensor");
  }
  return plan;
}

}  // namespace abr

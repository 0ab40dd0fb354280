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

// A source the host can read: plain, pinned or managed host memory.
void require_host_source(const DeviceRegistry& devices, const Layout& src) {
  if (is_host_accessible(src.device.device_type)) return;
  devices.require(src.device, "source");  // names the missing backend
  fail(ABR_ERR_UNSUPPORTED, "source on {}: no path from this device in this build", device_string(src.device));
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

Plan plan_transfer(const DeviceRegistry& devices, const Layout& src, DLDevice dst, const TransferOptions& options) {
  Plan plan;
  plan.dtype = is_zero_dtype(options.dtype) ? src.dtype : options.dtype;
  plan.cast = !same_dtype(plan.dtype, src.dtype);
  require_cast(src.dtype, plan.dtype);
  devices.require(dst, "destination");
  require_host_source(devices, src);
  if (dst.device_type != kDLCPU)
    fail(ABR_ERR_UNSUPPORTED, "{} -> {}: transfers to this device are not implemented yet", device_string(src.device),
         device_string(dst));

  // Host memory to the CPU: a view unless something forces a copy.
  std::string reason;
  if (options.copy == ABR_COPY_ALWAYS) reason = "ABR_COPY_ALWAYS";
  else if (plan.cast) reason = fmt::format("{} -> {} needs a conversion", dtype_name(src.dtype), dtype_name(plan.dtype));
  else if ((options.flags & ABR_TRANSFER_REQUIRE_CONTIGUOUS) && !src.compact)
    reason = "ABR_TRANSFER_REQUIRE_CONTIGUOUS and the source is strided";

  if (reason.empty()) {
    plan.path = ABR_PATH_ZERO_COPY;
    plan.view = true;
    plan.detail = fmt::format("view of {} memory, layout kept", device_string(src.device));
    return plan;
  }
  if (options.copy == ABR_COPY_NEVER)
    fail(ABR_ERR_COPY_REQUIRED, "ABR_COPY_NEVER, but a copy is required: {}", reason);
  plan.path = ABR_PATH_HOST_COPY;
  plan.pack = !src.compact;
  plan.detail = fmt::format("host copy ({}){}{}", reason, plan.pack ? ", strided source packed" : "",
                            plan.cast ? ", converted on the host" : "");
  return plan;
}

Plan plan_copy(const DeviceRegistry& devices, const Layout& src, const Layout& dst) {
  if (src.shape != dst.shape)
    fail(ABR_ERR_SHAPE_MISMATCH, "source shape {} differs from destination shape {}", shape_string(src.shape),
         shape_string(dst.shape));
  Plan plan;
  plan.dtype = dst.dtype;
  plan.cast = !same_dtype(src.dtype, dst.dtype);
  require_cast(src.dtype, dst.dtype);
  require_host_source(devices, src);
  if (!is_host_accessible(dst.device.device_type)) {
    devices.require(dst.device, "destination");
    fail(ABR_ERR_UNSUPPORTED, "destination on {}: no path to this device in this build", device_string(dst.device));
  }
  plan.path = ABR_PATH_HOST_COPY;
  plan.pack = !src.compact;
  plan.overlap = ranges_overlap(src, dst);
  plan.detail = fmt::format("host copy into an existing tensor{}{}", plan.cast ? ", converted" : "",
                            plan.overlap ? ", staged through a temporary because the two overlap" : "");
  return plan;
}

}  // namespace abr

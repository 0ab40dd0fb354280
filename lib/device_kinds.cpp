#include "lib/device_kinds.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "lib/error.hpp"
#include "lib/text.hpp"

namespace abr {
namespace {

//                 type            name            backend             numbered host   address locked new
constexpr DeviceKind kKinds[] = {
    {kDLCPU,         "cpu",          ABR_BACKEND_HOST,   false,   true,  true,   false, true},
    {kDLCUDA,        "cuda",         ABR_BACKEND_CUDA,   true,    false, true,   false, true},
    {kDLCUDAHost,    "cuda_host",    ABR_BACKEND_CUDA,   false,   true,  true,   true,  true},
    {kDLCUDAManaged, "cuda_managed", ABR_BACKEND_CUDA,   false,   true,  true,   false, false},
    {kDLOpenCL,      "opencl",       ABR_BACKEND_OPENCL, true,    false, false,  false, true},
};

}  // namespace

const DeviceKind* find_kind(DLDeviceType type) {
  for (const DeviceKind& kind : kKinds)
    if (kind.type == type) return &kind;
  return nullptr;
}

const char* backend_name(abr_backend backend) {
  switch (backend) {
    case ABR_BACKEND_HOST: return "host";
    case ABR_BACKEND_CUDA: return "CUDA";
    case ABR_BACKEND_OPENCL: return "OpenCL";
    default: return "unknown";
  }
}

std::string device_string(DLDevice device) {
  const DeviceKind* kind = find_kind(device.device_type);
  if (!kind) return fmt::format("dlpack_device_{}:{}", static_cast<int32_t>(device.device_type), device.device_id);
  if (!kind->numbered && device.device_id == 0) return kind->name;
  return fmt::format("{}:{}", kind->name, device.device_id);
}

DLDevice parse_device(std::string_view text) {
  const std::string clean = normalized_name(text);
  const std::size_t colon = clean.find(':');
  const std::string name = clean.substr(0, colon);
  const DeviceKind* kind = nullptr;
  for (const DeviceKind& row : kKinds)
    if (name == row.name) kind = &row;
  if (!kind)
    fail(ABR_ERR_INVALID_ARGUMENT, "unknown device '{}'; expected 'cpu', 'cuda:N', 'cuda_host', 'cuda_managed' or "
         "'opencl:N'", text);
  if (colon == std::string::npos) return {kind->type, 0};
  uint64_t id = 0;
  if (!parse_decimal(std::string_view(clean).substr(colon + 1), INT32_MAX, &id))
    fail(ABR_ERR_INVALID_ARGUMENT, "bad device index in '{}'; expected a number from 0 to {} after ':'", text,
         INT32_MAX);
  if (!kind->numbered && id != 0)
    fail(ABR_ERR_INVALID_ARGUMENT, "device '{}': {} is one memory kind, its only index is 0", text, kind->name);
  return {kind->type, static_cast<int32_t>(id)};
}

}  // namespace abr

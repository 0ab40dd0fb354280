#include "lib/device_kinds.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "lib/error.hpp"
#include "lib/text.hpp"

namespace abr {

const char* backend_name(abr_backend backend) {
  switch (backend) {
    case ABR_BACKEND_HOST: return "host";
    case ABR_BACKEND_CUDA: return "CUDA";
    case ABR_BACKEND_OPENCL: return "OpenCL";
    default: return "unknown";
  }
}

namespace {

void append(DeviceText& out, std::string_view part) {
  const std::size_t take = std::min(part.size(), sizeof out.text - out.size);
  std::memcpy(out.text + out.size, part.data(), take);
  out.size += take;
}

void append_decimal(DeviceText& out, int64_t value) {
  char digits[24];
  std::size_t n = 0;
  uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  do digits[sizeof digits - ++n] = static_cast<char>('0' + magnitude % 10);
  while ((magnitude /= 10) != 0);
  if (value < 0) digits[sizeof digits - ++n] = '-';
  append(out, {digits + sizeof digits - n, n});
}

}  // namespace

DeviceText device_text(DLDevice device) {
  DeviceText out;
  const DeviceKind* kind = find_kind(device.device_type);
  if (kind) {
    append(out, kind->name);
    if (kind->numbered || device.device_id != 0) {
      append(out, ":");
      append_decimal(out, device.device_id);
    }
    return out;
  }
  append(out, "dlpack_device_");
  append_decimal(out, static_cast<int32_t>(device.device_type));
  append(out, ":");
  append_decimal(out, device.device_id);
  return out;
}

std::string device_string(DLDevice device) { return std::string(device_text(device).view()); }

void check_nameable(DLDevice device) {
  if (static_cast<int32_t>(device.device_type) < 0)
    fail(ABR_ERR_INVALID_ARGUMENT, "device type {} is negative", static_cast<int32_t>(device.device_type));
  if (device.device_id < 0)
    fail(ABR_ERR_INVALID_ARGUMENT, "device id {} is negative; device ids are 0 to {}", device.device_id, INT32_MAX);
  const DeviceKind* kind = find_kind(device.device_type);
  if (kind && !kind->numbered && device.device_id != 0)
    fail(ABR_ERR_INVALID_ARGUMENT, "{} is one memory kind, its only index is 0; got device id {}", kind->name,
         device.device_id);
}

DLDevice parse_device(std::string_view text) {
  constexpr std::string_view kByNumber = "dlpack_device_";  // device_string's name for a type without a row
  const std::string clean = normalized_name(text);
  const std::size_t colon = clean.find(':');
  const std::string name = clean.substr(0, colon);
  const DeviceKind* kind = nullptr;
  DLDeviceType type{};
  uint64_t number = 0;
  if (name.compare(0, kByNumber.size(), kByNumber) == 0 &&
      parse_decimal(std::string_view(name).substr(kByNumber.size()), INT32_MAX, &number)) {
    type = static_cast<DLDeviceType>(number);
    kind = find_kind(type);
  } else {
    for (const DeviceKind& row : kKinds)
      if (name == row.name) kind = &row;
    if (!kind)
      fail(ABR_ERR_INVALID_ARGUMENT, "unknown device '{}'; expected 'cpu', 'cuda:N', 'cuda_host', 'cuda_managed', "
           "'opencl:N' or 'dlpack_device_T:N'", text);
    type = kind->type;
  }
  if (colon == std::string::npos) return {type, 0};
  uint64_t id = 0;
  if (!parse_decimal(std::string_view(clean).substr(colon + 1), INT32_MAX, &id))
    fail(ABR_ERR_INVALID_ARGUMENT, "bad device index in '{}'; expected a number from 0 to {} after ':'", text,
         INT32_MAX);
  if (kind && !kind->numbered && id != 0)
    fail(ABR_ERR_INVALID_ARGUMENT, "device '{}': {} is one memory kind, its only index is 0", text, kind->name);
  return {type, static_cast<int32_t>(id)};
}

}  // namespace abr

#include "lib/tensor/device_kinds.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <mutex>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/text.hpp"

namespace abr {

std::atomic<const DeviceKind*> g_kind_by_type[kKindSlots];

namespace {

// Registration is rare (the library's load, a plug-in's first runtime) and
// lookups are lock-free: the mutex orders writers only.
struct Registered {
  std::mutex mutex;
  std::vector<const DeviceKind*> kinds{&kCpuKind};
  std::vector<const BackendDescriptor*> backends;
};

Registered& registered() {
  static Registered* table = new Registered;  // never destroyed: runtimes may outlive static destructors
  return *table;
}

void add_backend(Registered& table, const BackendDescriptor& backend) {
  for (const BackendDescriptor* known : table.backends) {
    if (known == &backend) return;
    if (known->id == backend.id)
      fail(ABR_ERR_INVALID_ARGUMENT, "backend {} ({}) has the id {} of backend {}", backend.name, backend.key,
           static_cast<int>(backend.id), known->name);
  }
  for (std::size_t i = 0; i < backend.kind_count; ++i) {
    const DeviceKind& kind = backend.kinds[i];
    const auto type = static_cast<uint32_t>(kind.type);
    if (type >= kKindSlots)
      fail(ABR_ERR_INVALID_ARGUMENT, "backend {}: device type {} of kind {} is past the kind table ({} types)",
           backend.name, type, kind.name, kKindSlots);
    if (const DeviceKind* taken = g_kind_by_type[type].load(std::memory_order_relaxed))
      fail(ABR_ERR_INVALID_ARGUMENT, "backend {}: device type {} is already served as {}", backend.name, type,
           taken->name);
    if (kind.backend != backend.id)
      fail(ABR_ERR_INVALID_ARGUMENT, "backend {}: its kind {} names backend {}", backend.name, kind.name,
           static_cast<int>(kind.backend));
  }
  for (std::size_t i = 0; i < backend.kind_count; ++i) {
    g_kind_by_type[static_cast<uint32_t>(backend.kinds[i].type)].store(&backend.kinds[i], std::memory_order_release);
    table.kinds.push_back(&backend.kinds[i]);
  }
  table.backends.push_back(&backend);
}

// The CPU and the built-in backends, before anything in the library runs.
const bool kBuiltinsLoaded = [] {
  Registered& table = registered();
  g_kind_by_type[kDLCPU].store(&kCpuKind, std::memory_order_release);
  for (const BackendDescriptor* backend : builtin_backends()) add_backend(table, *backend);
  return true;
}();

}  // namespace

void register_backend(const BackendDescriptor& backend) {
  Registered& table = registered();
  std::lock_guard<std::mutex> lock(table.mutex);
  add_backend(table, backend);
}

std::vector<const DeviceKind*> known_kinds() {
  Registered& table = registered();
  std::lock_guard<std::mutex> lock(table.mutex);
  return table.kinds;
}

const BackendDescriptor* find_backend_descriptor(abr_backend id) {
  Registered& table = registered();
  std::lock_guard<std::mutex> lock(table.mutex);
  for (const BackendDescriptor* backend : table.backends)
    if (backend->id == id) return backend;
  return nullptr;
}

const char* backend_name(abr_backend backend) {
  if (backend == ABR_BACKEND_HOST) return "host";
  const BackendDescriptor* descriptor = find_backend_descriptor(backend);
  return descriptor ? descriptor->name : "unknown";
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
    const std::vector<const DeviceKind*> kinds = known_kinds();
    for (const DeviceKind* row : kinds)
      if (name == row->name) kind = row;
    if (!kind) {
      std::string expected;
      for (const DeviceKind* row : kinds) expected += fmt::format("'{}{}', ", row->name, row->numbered ? ":N" : "");
      expected.resize(expected.size() - 2);  // the last ", "
      fail(ABR_ERR_INVALID_ARGUMENT, "unknown device '{}'; expected {} or 'dlpack_device_T:N'", text, expected);
    }
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

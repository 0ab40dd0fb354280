// The devices and backends a runtime found when it was created. Immutable after
// construction, so lookups need no locks.
#pragma once

#include <string>
#include <vector>

#include "arraybridge/arraybridge.h"
#include "lib/devices/backend_report.hpp"
#include "lib/tensor/device_kinds.hpp"

namespace abr {

// The C structs share their names with the functions that fill them.
using DeviceInfo = struct ::abr_device_info;
using BackendInfo = struct ::abr_backend_info;

class DeviceRegistry {
 public:
  // The CPU, then each backend's devices in the order given.
  explicit DeviceRegistry(const std::vector<const BackendReport*>& backends);

  int32_t count() const { return static_cast<int32_t>(devices_.size()); }
  const DeviceInfo& at(int32_t index) const;  // throws for a bad index
  // nullptr when absent. Inline, as require() is: every transfer looks up both sides.
  const DeviceInfo* find(DLDevice device) const {
    ++lookups_;
    for (const DeviceInfo& info : devices_)
      if (info.device.device_type == device.device_type && info.device.device_id == device.device_id) return &info;
    return nullptr;
  }
  // find() calls made on this thread so far: a test counts them per transfer.
  static uint64_t lookups_on_this_thread() { return lookups_; }
  const BackendInfo& backend(int32_t backend) const;  // an abr_backend, as the caller's int (enum_value)

  // Throws ABR_ERR_NO_DEVICE (or ABR_ERR_DLPACK_DEVICE for a malformed id) naming
  // the device and, when its backend is missing, why.
  const DeviceInfo& require(DLDevice device, const char* what) const {
    if (const DeviceInfo* info = find(device)) return *info;
    refuse_missing(device, what);
  }

 private:
  [[noreturn]] void refuse_missing(DLDevice device, const char* what) const;  // why require() found none

  static inline thread_local uint64_t lookups_ = 0;
  std::vector<DeviceInfo> devices_;
  std::vector<BackendInfo> backends_;  // the host's first
};

}  // namespace abr

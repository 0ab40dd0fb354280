// One side of a transfer, resolved once at the top of abr_to_device and abr_copy:
// its kind, registry entry, backend and what that backend says about it. The
// planner decides from two endpoints and asks nothing else about either side.
#pragma once

#include <cstdint>

#include "arraybridge/arraybridge.h"
#include "lib/devices/backend.hpp"
#include "lib/devices/devices.hpp"

namespace abr {

struct Endpoint {
  DLDevice device{};
  const DeviceKind* kind = nullptr;  // its row of the kind table (never null once described)
  const DeviceInfo* info = nullptr;  // its registry entry; null for host memory the registry does not list
  DeviceBackend* backend = nullptr;  // the backend serving its kind; null for the CPU's memory
  bool host = false;                 // host memory the host engine reaches in place
  bool pinned = false;               // host memory page-locked for the other side's DMA
  bool shares_host_memory = false;   // a device that uses host memory in place (wrap_host)
  bool no_double_precision = false;  // a device whose kernels have no float64 (ABR_DEVICE_NO_DOUBLE_PRECISION)
  uint64_t host_wrap_alignment = 0;  // what host memory must be aligned to for that
  void* context = nullptr;           // device memory: the backend context it lives in, or will
  AllocationRange allocation;        // an existing tensor's device memory: its allocation, where known
  Capabilities can;                  // device memory: its backend's
};

// The kind table's and the registry's part of an endpoint, in one registry lookup.
// A device that must exist (device memory, every new tensor's device) and is not in
// the registry fails with ABR_ERR_NO_DEVICE naming `what` and why.
Endpoint describe_endpoint(const DeviceRegistry& devices, DLDevice device, const char* what, bool must_exist);

}  // namespace abr

// OpenCL discovery: every device of every platform, numbered opencl:0, opencl:1, ...
// in platform order, then device order (stable for a given machine).
#pragma once

#include <string>
#include <vector>

#include "lib/devices/backend_report.hpp"
#include "opencl/api.hpp"

namespace abr::opencl {

struct Discovery {
  BackendReport report;
  std::vector<cl_device_id> devices;     // devices[i] is opencl:i
  std::vector<uint64_t> wrap_alignment;  // bytes a host pointer needs for CL_MEM_USE_HOST_PTR, per device
  std::vector<std::string> keys;         // device_key of each device
};

// What names one device to every copy of its driver: the platform, the device's
// place in it, its name and UUID where the driver has one. A cl_device_id from
// another library's loader in another link-map namespace is another pointer to the
// same device; this is how the two are matched. Empty when the driver does not answer.
std::string device_key(const Api& cl, cl_device_id device);

// Never throws; an absent loader, platform or device is described in info.detail.
Discovery discover();

// The same over a given API table (tests use it to simulate a missing loader).
Discovery discover_with(const Api* api, const std::string& unavailable_reason);

}  // namespace abr::opencl

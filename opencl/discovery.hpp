// OpenCL discovery: every device of every platform, numbered opencl:0, opencl:1, ...
// in platform order, then device order (stable for a given machine).
#pragma once

#include <string>
#include <vector>

#include "lib/backend_report.hpp"
#include "opencl/api.hpp"

namespace abr::opencl {

struct Discovery {
  BackendReport report;
  std::vector<cl_device_id> devices;  // devices[i] is opencl:i
  std::vector<uint64_t> wrap_alignment;  // bytes a host pointer needs for CL_MEM_USE_HOST_PTR, per device
};

// Never throws; an absent loader, platform or device is described in info.detail.
Discovery discover(const abr_runtime_options& options);

// The same over a given API table (tests use it to simulate a missing loader).
Discovery discover_with(const Api* api, const std::string& unavailable_reason);

}  // namespace abr::opencl

// OpenCL discovery: every device of every platform, numbered opencl:0, opencl:1, ...
// in platform order, then device order (stable for a given machine).
#pragma once

#include <string>

#include "../lib/backend_report.hpp"

namespace abr::opencl {

struct Api;

// Never throws; an absent loader, platform or device is described in info.detail.
BackendReport discover(const abr_runtime_options& options);

// The same over a given API table (tests use it to simulate a missing loader).
BackendReport discover_with(const Api* api, const std::string& unavailable_reason);

}  // namespace abr::opencl

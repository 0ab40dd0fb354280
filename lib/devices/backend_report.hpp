// What a backend found when the runtime was created: its status line and devices.
// Discovery never throws: a missing driver is a report, not an error.
#pragma once

#include <vector>

#include "arraybridge/arraybridge.h"

namespace abr {

struct BackendReport {
  struct abr_backend_info info {};
  std::vector<struct abr_device_info> devices;
};

}  // namespace abr

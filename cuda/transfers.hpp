// Carrying out the planner's CUDA paths. Nothing here chooses a path: each
// function runs the one it is given, the way the plan's engine says.
#pragma once

#include <memory>

#include "../lib/layout.hpp"
#include "../lib/pinned_pool.hpp"
#include "../lib/planner.hpp"
#include "../lib/stream.hpp"
#include "device.hpp"

namespace abr::cuda {

// What a transfer needs from the backend besides the plan.
struct Resources {
  std::shared_ptr<Device> src_device;  // null for host memory
  std::shared_ptr<Device> dst_device;
  PinnedPool& pool;
  StagingProvider& pinned;
};

// Dispatches on plan.path: HOST_TO_DEVICE, DEVICE_TO_HOST, STAGED (pageable
// host memory through pinned chunks), DEVICE_COPY and PEER.
void execute_plan(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, Resources& with);

}  // namespace abr::cuda

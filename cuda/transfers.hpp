// Carrying out the planner's CUDA paths. Nothing here chooses a path: each
// function runs the steps the plan names.
#pragma once

#include <memory>

#include "lib/layout.hpp"
#include "lib/pinned_pool.hpp"
#include "lib/pipeline.hpp"
#include "lib/planner.hpp"
#include "lib/stream.hpp"
#include "cuda/device.hpp"

namespace abr::cuda {

// What a transfer needs from the backend besides the plan.
struct Resources {
  std::shared_ptr<Device> src_device;  // null for host memory
  std::shared_ptr<Device> dst_device;
  PinnedPool& pool;
  StagingProvider& pinned;
};

// Dispatches on plan.path: HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_COPY and PEER.
void execute_plan(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, Resources& with);

// The CUDA side of a staged transfer (DeviceBackend::staging_side) over `tensor` on `device`.
std::unique_ptr<ChunkSide> open_staging_side(const Plan& plan, const Layout& tensor, bool source, Stream* stream,
                                             std::shared_ptr<Device> device, StagingProvider& pinned);

}  // namespace abr::cuda

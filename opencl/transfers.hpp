// Carrying out the planner's OpenCL paths. Nothing here chooses a path: each
// function runs the steps the plan names.
#pragma once

#include <memory>

#include "lib/layout.hpp"
#include "lib/pipeline.hpp"
#include "lib/planner.hpp"
#include "lib/stream.hpp"

namespace abr::opencl {

// Dispatches on plan.path: HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_COPY.
void execute_plan(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream);

// The OpenCL side of a staged transfer (DeviceBackend::staging_side).
std::unique_ptr<ChunkSide> open_staging_side(const Plan& plan, const Layout& tensor, bool source, Stream* stream);

}  // namespace abr::opencl

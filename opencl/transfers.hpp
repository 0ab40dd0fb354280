// Carrying out the planner's OpenCL paths. Nothing here chooses a path: each
// function runs the one it is given, the way the plan's engine says.
#pragma once

#include "../lib/layout.hpp"
#include "../lib/pinned_pool.hpp"
#include "../lib/planner.hpp"
#include "../lib/stream.hpp"

namespace abr::opencl {

// Dispatches on plan.path: HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_COPY, STAGED
// (whose bounce blocks come from `pool`).
void execute_plan(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream, PinnedPool& pool);

}  // namespace abr::opencl

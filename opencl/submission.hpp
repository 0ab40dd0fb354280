// OpenCL's primitives (lib/devices/submission.hpp): one transfer's work in one context,
// on the caller's command queue of that context or on the context's own.
#pragma once

#include <memory>

#include "lib/devices/submission.hpp"
#include "opencl/context.hpp"

namespace abr::opencl {

std::unique_ptr<Submission> submit(std::shared_ptr<Context> context, Stream* stream);

}  // namespace abr::opencl

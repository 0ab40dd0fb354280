// CUDA's primitives (lib/devices/submission.hpp): one transfer's work on one device, on
// the caller's CUDA stream of that device or on the device's own stream.
#pragma once

#include <memory>

#include "lib/memory/pinned_pool.hpp"
#include "lib/devices/submission.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"

namespace abr::cuda {

std::unique_ptr<Submission> submit(std::shared_ptr<Device> device, Stream* stream, PinnedPool& pool,
                                   StagingProvider& pinned);

}  // namespace abr::cuda

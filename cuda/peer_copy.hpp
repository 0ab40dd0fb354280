// CUDA's peer copy primitive (DeviceBackend::peer_copy): Move::Peer between two
// CUDA devices, with the pack and scatter the plan asks for on either side.
#pragma once

#include <memory>

#include "lib/tensor/layout.hpp"
#include "lib/devices/backend.hpp"
#include "lib/devices/stream.hpp"
#include "cuda/device.hpp"

namespace abr::cuda {

void peer_copy(const Layout& src, const Layout& dst, Stream* stream, PeerSteps steps,
               const std::shared_ptr<Device>& src_device, const std::shared_ptr<Device>& dst_device);

}  // namespace abr::cuda

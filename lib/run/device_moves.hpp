// Every move between host memory and a backend's memory, and inside one of its
// contexts, composed from the backend's primitives (lib/devices/submission.hpp): the one
// place that turns a plan's path and steps into work. The runtime hands these the
// submission of the side the plan's executor names.
#pragma once

#include <memory>
#include <vector>

#include "lib/devices/backend.hpp"
#include "lib/tensor/layout.hpp"
#include "lib/run/pipeline.hpp"
#include "lib/plan/planner.hpp"
#include "lib/tensor/segments.hpp"
#include "lib/devices/submission.hpp"

namespace abr {

// Executor::Source or Destination: the plan's move on `device`, in `context` of its
// `backend`: a peer copy (the backend's own), or the moves below on submit_routed's
// work, finished.
void run_on_device(const Plan& plan, const Layout& src, const Layout& dst, DeviceBackend& backend, DLDevice device,
                   void* context, Stream* stream);
// ABR_PATH_HOST_TO_DEVICE, ABR_PATH_DEVICE_TO_HOST and ABR_PATH_DEVICE_COPY on
// `work`, not finished: more moves may follow on it (abr_copy_many).
void submit_device_move(const Plan& plan, const Layout& src, const Layout& dst, Submission& work);

// Where a transfer's work on `device` in `context` goes: `stream` when the
// backend runs work on it there (the call then returns with the work queued in
// the stream's order); otherwise the backend's own queue, after `stream`'s earlier
// work (waited for here), and waited for when the work is done.
std::unique_ptr<Submission> submit_routed(DeviceBackend& backend, DLDevice device, void* context, Stream* stream);

// One side of a staged transfer (Move::Staged, lib/run/pipeline.hpp) over `tensor` in
// a backend's memory: a source the plan packs on the device is walked into a
// temporary first; a destination it scatters lands in one, walked into place at finish().
std::unique_ptr<ChunkSide> device_side(const Plan& plan, const Layout& tensor, bool source,
                                       std::unique_ptr<Submission> work);

// Several compact device views of one context end to end (a batch's one
// pipeline, `map` their sizes): each chunk is one queued read or write per view it
// crosses, on `work`'s one in-order queue, so the event after its last also follows the others.
std::unique_ptr<ChunkSide> device_segments_side(std::vector<Layout> tensors, SegmentMap map,
                                                std::unique_ptr<Submission> work);

}  // namespace abr

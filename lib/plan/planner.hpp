// The transfer planner: the one place that decides how a transfer runs. It looks
// at validated layouts, devices and options, never at data, and its Plan says
// what to do and why (the report's detail line).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "arraybridge/arraybridge.h"
#include "lib/devices/backend.hpp"
#include "lib/devices/devices.hpp"
#include "lib/devices/endpoint.hpp"
#include "lib/host/host_threads.hpp"
#include "lib/plan/staging_shape.hpp"
#include "lib/tensor/layout.hpp"
#include "lib/base/text.hpp"

namespace abr {

// abr_transfer_options after version checks and defaults.
struct TransferOptions {
  abr_copy_mode copy = ABR_COPY_IF_NEEDED;
  uint32_t flags = 0;
  DLDataType dtype{};  // all zero: keep the source's
  abr_casting casting = ABR_CASTING_DEFAULT;
  abr_transfer_report* report = nullptr;
  StagingChoice staging;  // the runtime's (abr_runtime_set_staging), not the call's
  // The source is a versioned tensor that already reads as the runtime's views do
  // (the runtime looks at its header; the planner decides whether to hand it back).
  bool source_reads_as_view = false;
  // Whether the plan's detail is read (a report, the debug log): formatting it is a
  // tenth of a small batch item's cost, so unread it is not written.
  bool describe = true;
  // Page-locked memory a new host result may take (the runtime's room in the pinned
  // pool, where the call's stream runs on the source's device); 0: none.
  uint64_t locked_result_budget = 0;
  // Whether pageable host <-> device moves may go through the pinned pool's blocks
  // (the pipeline, a batch's streamed or gathered moves). False once the pool has
  // refused a new result's page-locked memory: it would most likely refuse the
  // blocks too, so the driver copies the bytes itself (after_locked_result_refused).
  bool pinned_blocks = true;
};

// Throws ABR_ERR_INVALID_ARGUMENT for an unknown copy mode or flag. The struct is
// the library's current version (the C boundary converts the caller's).
TransferOptions resolve_options(const abr_transfer_options* options);

// The page-locked host memory (its device type: the source backend's locked_host) a new
// host result copied from `from` on `stream` may be made in, 0 for none: the stream
// orders the source's work (a DMA fills the result there) and that backend has such
// memory. Inline: every transfer asks.
inline DLDeviceType lockable_result_type(const Endpoint& from, DLDevice dst, Stream* stream) {
  const bool may = stream && dst.device_type == kDLCPU && !from.host && from.backend && from.can.locked_host &&
      from.backend->runs_on(*stream, from.device, from.context);
  return may ? from.can.locked_host : static_cast<DLDeviceType>(0);
}
// How much page-locked memory new results may still take of a pool of `limit` bytes
// with `in_use` lent (TransferOptions::locked_result_budget): at most half of it, since
// the other half stays for staging, which every transfer through pinned memory needs
// while the results are held.
uint64_t locked_result_room(uint64_t limit, uint64_t in_use);
// The options to plan again with once the pool refused a new result the page-locked
// memory the budget allowed (another thread took the room since, or the driver has
// none): plain host memory, and no pool blocks either, which the pool would most likely
// refuse too; the driver then copies the bytes itself.
TransferOptions after_locked_result_refused(TransferOptions options);

// Who reshapes the elements on one side of a move: packs or converts the source
// into compact bytes of the result's dtype (the source side), or scatters compact
// bytes into a strided destination (the destination side).
enum class Step : uint8_t {
  None,
  Host,    // the host engine, in pinned memory
  Device,  // a device kernel, into or out of a temporary in the side's own context
};

// Who carries out a move (Runtime::execute follows it, nothing else chooses).
enum class Executor : uint8_t {
  None,         // a view: nothing moves
  Host,         // the host engine, between two sides in host memory
  Source,       // the backend of the source's device memory
  Destination,  // the backend of the destination's device memory
  Pipeline,     // lib/run/pipeline.hpp, between a side for each (Move::Staged)
};

// How the bytes travel.
enum class Move : uint8_t {
  View,        // they do not: the result aliases the source (or wraps its host memory)
  HostWalk,    // the host engine walks both layouts in one pass (host memory, or OpenCL memory mapped to it)
  DeviceWalk,  // a device kernel walks both layouts in one pass, inside one context
  Bytes,       // one copy of compact bytes: a DMA, clEnqueue{Read,Write,Copy}Buffer, cuMemcpyDtoDAsync
  Peer,        // cuMemcpyPeerAsync between two CUDA devices
  Staged,      // the transfer pipeline: chunks through pinned host blocks (lib/run/pipeline.hpp)
};

// The report's one-line explanation, formatted into a fixed buffer the size of
// abr_transfer_report.detail: planning allocates nothing. The wording is kept short
// enough to fit on every path (a test checks each); text that still does not fit
// ends with "…" at a word boundary (fit_text).
class PlanDetail {
 public:
  PlanDetail() { text_[0] = '\0'; }
  // Nothing is written from here on: no one reads this plan's text.
  void leave_out() { wanted_ = false; }
  bool wanted() const { return wanted_; }
  template <class... Args>
  void format(fmt::format_string<Args...> format, Args&&... args) {
    if (!wanted_) return;
    fmt::basic_memory_buffer<char, 2 * sizeof text_> buffer;  // on the stack; format_to_n is slower
    fmt::format_to(std::back_inserter(buffer), format, std::forward<Args>(args)...);
    size_ = fit_text(text_, sizeof text_, {buffer.data(), buffer.size()});
  }
  // Plain concatenation: a fraction of format()'s cost, for the zero-copy paths.
  void join(std::initializer_list<std::string_view> parts) {
    if (!wanted_) return;
    std::size_t total = 0;
    for (std::string_view part : parts) total += part.size();
    if (total < sizeof text_) {  // the usual case: no cut, so no staging buffer and no fit_text
      char* end = text_;
      for (std::string_view part : parts) end = std::copy(part.begin(), part.end(), end);
      *end = '\0';
      size_ = total;
      return;
    }
    char joined[2 * sizeof text_];
    std::size_t n = 0;
    for (std::string_view part : parts) {
      const std::size_t take = std::min(part.size(), sizeof joined - n);
      std::copy_n(part.data(), take, joined + n);
      n += take;
    }
    size_ = fit_text(text_, sizeof text_, {joined, n});
  }
  std::string_view view() const { return {text_, size_}; }

 private:
  char text_[sizeof(abr_transfer_report::detail)];  // text_[size_] ends it; nothing past it is read
  std::size_t size_ = 0;
  bool wanted_ = true;
};

// What a transfer does, step by step, as the executors carry it out: pack on the
// source side, move, scatter on the destination side.
struct Plan {
  abr_path path = ABR_PATH_NONE;
  Step pack = Step::None;
  Move move = Move::View;  // Move::View: the result aliases the source
  Executor executor = Executor::None;
  Step scatter = Step::None;
  void* src_context =
      nullptr;  // backend contexts (opaque, the backend's own type) of the two sides (nullptr: host memory)
  void* dst_context = nullptr;
  DLDataType dtype{};  // the result's dtype
  // A view on the source's own device of a source that already reads as one: the
  // result is the source itself, handed back as it is (no allocation, which would be
  // a large share of a zero-copy to_device from Python).
  bool hand_back = false;
  bool strided_source = false;  // the source is packed (the report's PACKED)
  bool cast = false;            // elements are converted
  bool overlap = false;         // abr_copy only: source and destination memory overlap
  // The threads of every host-side step (the host engine's walks, a staged
  // transfer's host side); for Move::Staged also the chunk size, and whose pinned
  // blocks carry the chunks: the source side's or the destination's (the device
  // side's between host and device; the destination context's between OpenCL
  // contexts; the OpenCL side's between CUDA and OpenCL, where staging_shared
  // has the other side's driver page-lock them too).
  StagingShape staging;
  bool staging_at_source = false;
  bool staging_shared = false;
  // A new host tensor made in the source backend's page-locked memory of this type
  // (Capabilities::locked_host), 0 for plain host memory: a device -> host move on
  // the source device's stream, which one DMA then fills without the host waiting.
  DLDeviceType locked_result = static_cast<DLDeviceType>(0);
  // The bytes go as they lie between pageable host memory and a device reached by
  // DMA only (one driver copy, or the pipeline), and may use the pinned pool's blocks:
  // a batch streams such moves to or from one context through one pipeline, and
  // gathers small reads into pinned blocks (plan_batch, lib/plan/batch_plan.hpp).
  bool pageable_bytes = false;
  PlanDetail detail;
  // What a report says of it: ABR_REPORT_PACKED, ABR_REPORT_CAST.
  uint32_t report_flags() const { return (strided_source ? ABR_REPORT_PACKED : 0u) | (cast ? ABR_REPORT_CAST : 0u); }
};

// The one plan for abr_to_device and abr_copy: `src` (described by `from`) to a
// new compact tensor on `to`'s device when `dst` is null, or into the existing
// tensor `dst` (same shape; its dtype and layout decide). Throws
// ABR_ERR_COPY_REQUIRED or ABR_ERR_UNSUPPORTED with the reason, ABR_ERR_CASTING for a
// cast the options' casting refuses (by default a copy's casting is same_kind), and for abr_copy
// ABR_ERR_SHAPE_MISMATCH, or ABR_ERR_INVALID_ARGUMENT for a copy mode or dtype in
// `options` (the destination decides both) or a strided destination with
// ABR_TRANSFER_REQUIRE_CONTIGUOUS.
Plan plan(const Layout& src, const Endpoint& from, const Layout* dst, const Endpoint& to,
          const TransferOptions& options);

// The same plan, named for its entry point.
inline Plan plan_transfer(const Layout& src, const Endpoint& from, const Endpoint& to, const TransferOptions& options) {
  return plan(src, from, nullptr, to, options);
}
inline Plan plan_copy(const Layout& src, const Endpoint& from, const Layout& dst, const Endpoint& to,
                      const TransferOptions& options = {}) {
  return plan(src, from, &dst, to, options);
}

// Static name of a path ("zero_copy", ...).
const char* path_name(abr_path path) noexcept;

}  // namespace abr

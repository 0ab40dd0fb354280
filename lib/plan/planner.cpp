#include "lib/plan/planner.hpp"

#include <cstring>

#include <fmt/format.h>

#include "lib/tensor/device_kinds.hpp"
#include "lib/tensor/dtype.hpp"
#include "lib/tensor/shared_bytes.hpp"
#include "lib/base/enum_value.hpp"
#include "lib/base/error.hpp"
#include "lib/host/host_copy.hpp"
#include "lib/base/log.hpp"

namespace abr {
namespace {

// A device's name, written only when the text it goes into is (StackText): the words
// of the reasons below weigh on a batch's small tensors, whose texts no one reads.
struct DeviceName {
  DLDevice device;
};

}  // namespace
}  // namespace abr

template <>
struct fmt::formatter<abr::DeviceName> : fmt::formatter<std::string_view> {
  auto format(const abr::DeviceName& name, fmt::format_context& context) const {
    return fmt::formatter<std::string_view>::format(abr::device_text(name.device).view(), context);
  }
};

namespace abr {
namespace {

// Below this a new host tensor from a DMA-only device is plain memory, even on a stream.
constexpr uint64_t kLockedResultMin = uint64_t{64} << 10;

constexpr uint32_t kKnownTransferFlags =
    ABR_TRANSFER_NO_HOST_STAGING | ABR_TRANSFER_REQUIRE_CONTIGUOUS | ABR_TRANSFER_NO_NEGATIVE_STRIDES;

const char* casting_name(abr_casting casting) {
  switch (casting) {
    case ABR_CASTING_NO: return "no";
    case ABR_CASTING_SAFE: return "safe";
    case ABR_CASTING_SAME_KIND: return "same_kind";
    default: return "unsafe";
  }
}

// A cast the runtime has and the call's casting rule allows. By default a copy into an
// existing tensor casts as NumPy's copyto does (same_kind: the destination's dtype was
// not chosen for this data), and a new tensor of an asked-for dtype as astype does.
// A new tensor's bytes in the new dtype must fit too, as validate_tensor proved the
// source's do: 2**62 broadcast bytes cast to float32 wrapped to 0, and the cast wrote
// past them. Out of line, and asked only for a cast: inlined, its messages weighed on
// every plan (a 4 KiB copy from Python took 45 ns more).
[[gnu::noinline]] void require_cast(const Layout& src, DLDataType to, abr_casting casting, bool into) {
  const DLDataType from = src.dtype;
  if (!can_cast(from, to)) fail(ABR_ERR_UNSUPPORTED, "no conversion from {} to {}", dtype_name(from), dtype_name(to));
  uint64_t result_bytes = 0;
  if (!into && (__builtin_mul_overflow(src.numel, uint64_t{itemsize(to)}, &result_bytes) || result_bytes > INT64_MAX))
    fail(ABR_ERR_DLPACK_OVERFLOW, "a {} result of shape {} ({} x {} bytes) overflows 64 bits", dtype_name(to),
         shape_string(src.shape), src.numel, itemsize(to));
  const bool by_default = casting == ABR_CASTING_DEFAULT;
  if (by_default) casting = into ? ABR_CASTING_SAME_KIND : ABR_CASTING_UNSAFE;
  if (casting_allows(casting, from, to)) return;
  const abr_casting enough = casting_allows(ABR_CASTING_SAFE, from, to) ? ABR_CASTING_SAFE
      : casting_allows(ABR_CASTING_SAME_KIND, from, to)                 ? ABR_CASTING_SAME_KIND
                                                                        : ABR_CASTING_UNSAFE;
  fail(ABR_ERR_CASTING, "casting \"{}\"{} refuses {} -> {} ({}); ask for casting \"{}\" to convert anyway",
       casting_name(casting), by_default ? " (a copy's default, as NumPy's copyto)" : "", dtype_name(from),
       dtype_name(to), casting == ABR_CASTING_NO ? "the dtypes differ" : cast_loses(from, to), casting_name(enough));
}

// A cast a device kernel does (a walk inside one context, or packing on the source's
// device before a read, a staged or a peer copy) that the source's device cannot do: refused
// here, before anything moves, not by the kernel once a batch's earlier pairs are
// written. Out of line, as require_cast.
[[gnu::noinline]] void require_device_cast(const Plan& plan, const Layout& src, const Endpoint& from,
                                           const Layout* dst) {
  if (plan.move != Move::DeviceWalk && plan.pack != Step::Device) return;  // the host engine converts
  if (from.no_double_precision && (needs_double_precision(src.dtype) || needs_double_precision(plan.dtype)))
    fail(ABR_ERR_UNSUPPORTED,
         "{} has no double precision (cl_khr_fp64) to convert {} -> {} in its memory; convert on the host (through "
         "the CPU) instead",
         device_string(from.device), dtype_name(src.dtype), dtype_name(plan.dtype));
  if (!from.can.casts_whole_elements) return;
  // The kernel reads the source itself, unless it overlaps the destination (then an aligned
  // temporary of it), and writes the destination, or a new compact tensor.
  const auto whole = [](const Layout& t) { return t.itemsize == 0 || t.byte_offset % t.itemsize == 0; };
  const bool src_whole = plan.overlap || whole(src);
  const bool dst_whole = plan.move != Move::DeviceWalk || !dst || whole(*dst);
  if (!src_whole || !dst_whole)
    fail(ABR_ERR_UNSUPPORTED,
         "{} -> {} on {}: its kernels convert whole elements only, and the {}'s byte_offset {} is not a multiple of "
         "its {}-byte items; convert on the host (through the CPU) instead",
         dtype_name(src.dtype), dtype_name(plan.dtype), device_string(from.device),
         src_whole ? "destination" : "source", src_whole ? dst->byte_offset : src.byte_offset,
         src_whole ? dst->itemsize : src.itemsize);
}

// Every side is host memory the host engine reaches, or device memory a backend moves.
void require_data_path(const Endpoint& src, bool src_host, const Endpoint& dst, bool dst_host) {
  if ((!src_host && src.kind->host_memory) || (!dst_host && dst.kind->host_memory))
    fail(ABR_ERR_UNSUPPORTED, "{} -> {}: no path between these devices in this build", device_string(src.device),
         device_string(dst.device));
}

// Host memory a new tensor can be made in: the CPU's, or page-locked memory (cuda_host).
bool is_host_destination(const Endpoint& dst) { return dst.kind->host_memory && dst.kind->new_tensors; }

// The words for each step, in the order the steps run.
const char* pack_words(Step step) {
  return step == Step::Host  ? "packed/converted on the host into pinned memory"
      : step == Step::Device ? "packed/converted by a device kernel"
                             : nullptr;
}
const char* scatter_words(Step step) {
  return step == Step::Host  ? "scattered on the host out of pinned memory"
      : step == Step::Device ? "scattered by a device kernel"
                             : nullptr;
}

// "N MiB chunks through <blocks>, T copy threads": the staged move in words.
std::string staged_words(const Plan& plan, bool host_side) {
  const std::size_t chunk = plan.staging.chunk;
  const bool mib = chunk >= (std::size_t{1} << 20);
  std::string words =
      fmt::format("staged in {} {} chunks through {}", mib ? chunk >> 20 : (chunk + 1023) >> 10, mib ? "MiB" : "KiB",
                  plan.staging_shared ? "memory pinned for both drivers" : "pinned host memory");
  if (host_side) words += fmt::format(", {} copy thread{}", plan.staging.threads, plan.staging.threads == 1 ? "" : "s");
  return words;
}

// ", on N threads" where the host engine's walk is cut between threads; nothing for one.
struct ThreadsWords {
  char text[24] = "";
  std::size_t size = 0;
  std::string_view view() const { return {text, size}; }
};
ThreadsWords host_threads_words(unsigned threads) {
  ThreadsWords words;
  if (threads > 1)
    words.size = std::min(sizeof words.text - 1,
                          fmt::format_to_n(words.text, sizeof words.text - 1, ", on {} threads", threads).size);
  return words;
}

// Text of the plan's own on the stack (std::string allocates past 15 characters,
// and every abr_copy has a reason: that allocation weighed on a small host copy).
// Unwanted (no one reads it), a text is only marked not empty.
class StackText {
 public:
  explicit StackText(bool wanted = true) : wanted_(wanted) {}
  void assign(std::string_view text) {
    buffer_.clear();
    if (!wanted_) return buffer_.push_back('-');
    buffer_.append(text.data(), text.data() + text.size());
  }
  void append(std::string_view text) { buffer_.append(text.data(), text.data() + text.size()); }
  // Plain concatenation, for the words every small transfer's report reads: a
  // fraction of format()'s cost.
  void join(std::initializer_list<std::string_view> parts) {
    buffer_.clear();
    if (!wanted_) return buffer_.push_back('-');
    for (std::string_view part : parts) append(part);
  }
  // before + the device's name + after, the name looked up only for a text that is
  // read (a batch's tensor reads none).
  void join_device(std::string_view before, DLDevice device, std::string_view after) {
    if (!wanted_) return assign({});
    join({before, device_text(device).view(), after});
  }
  template <class... Args>
  void format(fmt::format_string<Args...> format, Args&&... args) {
    buffer_.clear();
    if (!wanted_) return buffer_.push_back('-');
    fmt::format_to(std::back_inserter(buffer_), format, std::forward<Args>(args)...);
  }
  bool empty() const { return buffer_.size() == 0; }
  std::string_view view() const { return {buffer_.data(), buffer_.size()}; }

 private:
  fmt::basic_memory_buffer<char, 160> buffer_;
  bool wanted_;
};

// "<what> (<reason>): step, step, step".
void describe(Plan& plan, std::string_view what, std::string_view reason, const char* move_words) {
  if (!plan.detail.wanted()) return;  // no one reads the text: a batch's small tensors skip its words
  StackText how;
  for (const char* step : {pack_words(plan.pack), move_words, scatter_words(plan.scatter)})
    if (step) {
      if (!how.empty()) how.append(", ");
      how.append(step);
    }
  plan.detail.join({what, " (", reason, "): ", how.view()});
}

// Chunks through pinned blocks: the same move whichever sides it joins.
void plan_staged(Plan& plan, bool staging_at_source) {
  plan.path = ABR_PATH_STAGED;
  plan.move = Move::Staged;
  plan.executor = Executor::Pipeline;
  plan.staging_at_source = staging_at_source;
}

// What a move between the host and a device reshapes, and how much.
struct Reshaping {
  bool src = false;  // the source is packed or converted
  bool dst = false;  // the destination is strided
  uint64_t bytes = 0;
  uint64_t host_row_bytes = 0;  // a row of the host side's view (row_bytes); 0: none
  bool host_in_wrap = false;    // the host side lies in the host memory the device's buffer uses (host_in_wrap)
};

// One side on the host, the other in device memory.
void plan_host_device(Plan& plan, bool src_host, const Endpoint& device, bool host_pinned, const Reshaping& r,
                      bool pinned_blocks, std::string_view reason) {
  plan.path = src_host ? ABR_PATH_HOST_TO_DEVICE : ABR_PATH_DEVICE_TO_HOST;
  plan.executor = src_host ? Executor::Destination : Executor::Source;  // the device side's backend
  const char* direction = src_host ? "host to device" : "device to host";
  const bool mapped = device.can.maps_to_host;
  if (mapped && r.host_in_wrap) {
    plan.move = Move::HostWalk;
    return describe(plan, direction, reason,
                    "the host engine copies through mapped memory: the host side lies in the memory the buffer wraps");
  }
  if (mapped && (r.src || r.dst)) {
    plan.move = Move::HostWalk;
    return describe(plan, direction, reason, "the host engine packs/converts through mapped memory");
  }
  // Reached by DMA only: the host engine reshapes on the host side (in pinned memory), a kernel on the device side.
  const bool host_side_reshape = src_host ? r.src : r.dst;
  const bool device_side_reshape = src_host ? r.dst : r.src;
  const Step host_step = host_side_reshape ? Step::Host : Step::None;
  const Step device_step = device_side_reshape ? Step::Device : Step::None;
  plan.pack = src_host ? host_step : device_step;
  plan.scatter = src_host ? device_step : host_step;
  plan.move = Move::Bytes;
  // The host engine packs or scatters whole rows of the view per chunk, on the host
  // threads, while earlier chunks are on the link: from two chunks up, where a row fits in one.
  const std::size_t chunk = plan.staging.chunk;
  if (host_side_reshape && r.host_row_bytes && r.host_row_bytes <= chunk && r.bytes >= 2 * uint64_t{chunk}) {
    plan.staging.chunk = static_cast<std::size_t>(chunk - chunk % r.host_row_bytes);
    plan_staged(plan, /*staging_at_source=*/!src_host);
    return describe(plan, direction, reason, staged_words(plan, /*host_side=*/true).c_str());
  }
  if (host_pinned || host_side_reshape)
    return describe(plan, direction, reason,
                    src_host ? "one DMA from page-locked memory" : "one DMA into page-locked memory");
  // Pageable memory. A device that works in host memory copies it best itself, and
  // so does every driver when the bytes make fewer than two chunks: a pipeline of
  // one chunk overlaps nothing, so it is slower than the driver's own copy.
  plan.pageable_bytes = !mapped && !device.shares_host_memory && device_step == Step::None && pinned_blocks;
  if (device.shares_host_memory || r.bytes < 2 * uint64_t{chunk} || !pinned_blocks)
    return describe(plan, direction, reason,
                    mapped               ? "one direct copy of the bytes"
                        : !pinned_blocks ? "one driver copy, the pinned pool having refused"
                        : src_host       ? "one driver copy from pageable memory (under two chunks)"
                                         : "one driver copy into pageable memory (under two chunks)");
  plan_staged(plan, /*staging_at_source=*/!src_host);  // the device side's pinned blocks
  describe(plan, direction, reason, staged_words(plan, /*host_side=*/true).c_str());
}

// Two device views: one device-side copy in a shared context, a peer copy
// inside one peer domain, otherwise staged through host memory in chunks.
void plan_between_devices(Plan& plan, const Endpoint& from, const Endpoint& to, const TransferOptions& options,
                          bool pack, bool scatter, std::string_view reason) {
  const DLDevice src = from.device, dst = to.device;
  const Capabilities &src_can = from.can, &dst_can = to.can;
  plan.executor = Executor::Source;  // one context, or a peer copy: the source's backend
  if (plan.src_context == plan.dst_context) {
    plan.path = ABR_PATH_DEVICE_COPY;
    plan.move = pack || scatter || plan.overlap ? Move::DeviceWalk : Move::Bytes;
    plan.detail.join({"device copy (", reason, ")",
                      plan.overlap                        ? ": packed into a temporary first because the two overlap"
                          : plan.move == Move::DeviceWalk ? ": packed/converted by a device kernel"
                                                          : ": one buffer copy"});
    return;
  }
  if (plan.overlap)  // two contexts' buffers over the same host bytes: no temporary on these paths
    fail(ABR_ERR_UNSUPPORTED,
         "the source and destination share host bytes (buffers of two contexts over one host memory): a copy "
         "between them is not staged through a temporary; copy the source into a new tensor first, then copy that");
  plan.pack = pack ? Step::Device : Step::None;
  plan.scatter = scatter ? Step::Device : Step::None;
  if (src_can.peer_domain && src_can.peer_domain == dst_can.peer_domain) {
    plan.path = ABR_PATH_PEER;
    plan.move = Move::Peer;
    return describe(plan, fmt::format("peer copy {} -> {}", device_string(src), device_string(dst)), reason,
                    src_can.peer_copy_words);
  }
  const abr_backend src_backend = from.kind->backend, dst_backend = to.kind->backend;
  const bool one_backend = src_backend == dst_backend;
  if (options.flags & ABR_TRANSFER_NO_HOST_STAGING)
    fail(ABR_ERR_UNSUPPORTED,
         "{} and {} are in different {}, which only host staging can bridge, and ABR_TRANSFER_NO_HOST_STAGING "
         "forbids it",
         device_string(src), device_string(dst),
         one_backend ? fmt::format("{} contexts", backend_name(src_backend)) : std::string("backends"));
  // The destination's blocks, unless only the destination's driver can page-lock
  // the other's memory: then the source's, page-locked by both. Each driver reaches
  // only memory it page-locked at full speed (CUDA <-> NVIDIA's OpenCL: either side's
  // blocks alone run at a fraction of the speed of blocks page-locked by both).
  plan_staged(plan, /*staging_at_source=*/!src_can.page_locks_foreign_host && dst_can.page_locks_foreign_host);
  const Capabilities& other = plan.staging_at_source ? dst_can : src_can;
  plan.staging_shared = !one_backend && other.page_locks_foreign_host;
  describe(plan, one_backend ? "staged between contexts" : "staged between backends", reason,
           staged_words(plan, /*host_side=*/false).c_str());
}

// Where a side's bytes lie among host addresses: host memory itself, device memory made
// over it (a host wrap), or device memory of a backend whose addresses are the host's
// (CUDA: managed memory viewed as cuda:0 and as cuda_managed is one set of bytes); 0
// for device memory of its own, apart from host memory.
uintptr_t host_bytes_at(const Layout& side, const Endpoint& end, bool host) {
  if (host || (end.can.host_addresses && !end.allocation.host_base)) return reinterpret_cast<uintptr_t>(side.data);
  return end.allocation.host_base;
}

// The host side of a copy holds the first byte of the host memory the device side's
// buffer uses in place (a host wrap, or its parent's for a sub-buffer, whose host pointer
// is the parent's plus the origin), the bytes the copy touches there apart (those are
// refused as overlapping). PoCL's read and write of such a buffer skip the copy when the
// host pointer is the (parent) buffer's first byte, whatever the offset (a copy of x[:n]
// into the wrap's x[n:] wrote nothing and returned success), so such a copy goes through
// the mapping, which OpenCL defines for memory a buffer uses in place. (The buffer's size
// is not asked: two more words in every endpoint cost a 1 KiB host copy 18 ns.)
bool host_in_wrap(const Layout& host, const Endpoint& device) {
  const AllocationRange& wrap = device.allocation;
  if (!wrap.host_base) return false;
  const uintptr_t first = wrap.host_base - wrap.root_offset;
  const uintptr_t at = reinterpret_cast<uintptr_t>(host.data) + host.byte_offset;
  const uintptr_t begin = at + static_cast<uintptr_t>(host.min_byte),
                  end = at + static_cast<uintptr_t>(host.max_byte_end);
  return begin <= first && first < end;
}

// abr_copy's source and destination share bytes: among host addresses (either side may
// be a device's view of host memory, each wrap a handle of its own; CUDA's x[:-1] and
// x[1:] are two pointers into one allocation), or in two handles over one root (OpenCL
// sub-buffers of one buffer), or at two addresses of another backend's one address space.
bool copy_overlaps(const Layout& src, const Endpoint& from, bool src_host, const Layout& dst, const Endpoint& to,
                   bool dst_host) {
  const uintptr_t src_at = host_bytes_at(src, from, src_host), dst_at = host_bytes_at(dst, to, dst_host);
  if (src_at && dst_at) return views_share_bytes(src, src_at, dst, dst_at);
  if (src_host || dst_host) return false;  // host memory, and device memory of its own
  const AllocationRange &a = from.allocation, &b = to.allocation;
  if (a.root || b.root) {  // OpenCL: two sub-buffers whose memory overlaps may not be used at once at all
    if (a.root != b.root) return false;
    return src.data == dst.data ? views_share_bytes(src, a.root_offset, dst, b.root_offset)
                                : boxes_meet(src, a.root_offset, dst, b.root_offset);
  }
  const bool addresses = from.backend == to.backend && a.begin < a.end && b.begin < b.end;  // one address space
  return (addresses || src.data == dst.data) &&
      views_share_bytes(src, reinterpret_cast<uintptr_t>(src.data), dst, reinterpret_cast<uintptr_t>(dst.data));
}

// Two device views (dst: an existing destination, else a new compact tensor): their
// overlap, then plan_between_devices, and a cast a device kernel does checked last.
void plan_device_views(Plan& plan, const Layout& src, const Endpoint& from, const Layout* dst, const Endpoint& to,
                       const TransferOptions& options, bool src_reshape, bool dst_strided, std::string_view reason) {
  plan.overlap = dst && copy_overlaps(src, from, false, *dst, to, false);
  plan_between_devices(plan, from, to, options, src_reshape, dst_strided, reason);
  if (plan.cast) require_device_cast(plan, src, from, dst);
}

// One side in host memory, the other a device's (dst: an existing destination, else a
// new compact tensor): their overlap refused, then plan_host_device, and a cast a
// device kernel does checked last.
void plan_host_and_device(Plan& plan, const Layout& src, const Endpoint& from, const Layout* dst, const Endpoint& to,
                          const TransferOptions& options, bool host_pinned, Reshaping r, std::string_view reason) {
  const bool src_host = from.host;
  if (dst && copy_overlaps(src, from, src_host, *dst, to, !src_host)) [[unlikely]]
    fail(ABR_ERR_UNSUPPORTED,
         "the source and destination share host bytes ({} uses that host memory in place, or addresses it as "
         "managed memory): a copy between host memory and a device's view of it is not staged through a temporary; "
         "copy the source into a new tensor first, then copy that",
         device_string(src_host ? to.device : from.device));
  // The host side's rows, when the host engine reshapes it in chunks; a new destination is compact.
  r.host_row_bytes = src_host ? row_bytes(src, plan.dtype) : dst ? row_bytes(*dst, plan.dtype) : 0;
  r.host_in_wrap = dst && host_in_wrap(src_host ? src : *dst, src_host ? to : from);
  plan_host_device(plan, src_host, src_host ? to : from, host_pinned, r, options.pinned_blocks, reason);
  if (plan.cast) require_device_cast(plan, src, from, dst);  // a device's kernel packs a read it converts
}

// abr_copy's arguments: an existing destination of the source's shape, and options
// that ask nothing of a new tensor.
void check_copy_into(const Layout& src, const Layout& dst, const TransferOptions& options) {
  if (src.shape != dst.shape)
    fail(ABR_ERR_SHAPE_MISMATCH, "source shape {} differs from destination shape {}", shape_string(src.shape),
         shape_string(dst.shape));
  if (options.copy != ABR_COPY_IF_NEEDED || !is_zero_dtype(options.dtype))
    fail(ABR_ERR_INVALID_ARGUMENT,
         "abr_copy takes no copy mode or dtype in its options: the destination is the copy, in its own dtype");
  if ((options.flags & ABR_TRANSFER_REQUIRE_CONTIGUOUS) && !dst.compact)
    fail(ABR_ERR_INVALID_ARGUMENT,
         "the destination is not compact row-major (strides {}), and ABR_TRANSFER_REQUIRE_CONTIGUOUS asks for one",
         shape_string(dst.strides));
}

}  // namespace

const char* path_name(abr_path path) noexcept {
  switch (path) {
    case ABR_PATH_NONE: return "none";
    case ABR_PATH_ZERO_COPY: return "zero_copy";
    case ABR_PATH_HOST_COPY: return "host_copy";
    case ABR_PATH_DEVICE_COPY: return "device_copy";
    case ABR_PATH_HOST_TO_DEVICE: return "host_to_device";
    case ABR_PATH_DEVICE_TO_HOST: return "device_to_host";
    case ABR_PATH_STAGED: return "staged";
    case ABR_PATH_PEER: return "peer";
    case ABR_PATH_HOST_WRAP: return "host_wrap";
    default: return "unknown";
  }
}

uint64_t locked_result_room(uint64_t limit, uint64_t in_use) {
  const uint64_t half = limit / 2;
  return in_use < half ? half - in_use : 0;
}

TransferOptions after_locked_result_refused(TransferOptions options) {
  options.locked_result_budget = 0;
  options.pinned_blocks = false;
  return options;
}

TransferOptions resolve_options(const abr_transfer_options* options) {
  TransferOptions out;
  out.describe = log::enabled(ABR_LOG_DEBUG);
  if (!options) return out;
  const int32_t copy = enum_value(options->copy);
  if (copy < ABR_COPY_IF_NEEDED || copy > ABR_COPY_NEVER)
    fail(ABR_ERR_INVALID_ARGUMENT, "abr_transfer_options.copy = {} is not an abr_copy_mode", copy);
  if (options->flags & ~kKnownTransferFlags)
    fail(ABR_ERR_INVALID_ARGUMENT, "abr_transfer_options.flags has unknown bits {:#x}",
         options->flags & ~kKnownTransferFlags);
  if (!is_zero_dtype(options->dtype)) validate_dtype(options->dtype, "target dtype");
  const int32_t casting = enum_value(options->casting);
  if (casting < ABR_CASTING_DEFAULT || casting > ABR_CASTING_UNSAFE)
    fail(ABR_ERR_INVALID_ARGUMENT, "abr_transfer_options.casting = {} is not an abr_casting", casting);
  out.copy = static_cast<abr_copy_mode>(copy);
  out.casting = static_cast<abr_casting>(casting);
  out.flags = options->flags;
  out.dtype = options->dtype;
  out.report = options->report;
  out.describe = out.describe || out.report;
  return out;
}

Plan plan(const Layout& src, const Endpoint& from, const Layout* dst, const Endpoint& to,
          const TransferOptions& options) {
  const bool into = dst != nullptr;  // abr_copy: into an existing tensor; abr_to_device: a new compact one
  if (into) check_copy_into(src, *dst, options);
  Plan plan;
  if (!options.describe) plan.detail.leave_out();
  plan.dtype = into ? dst->dtype : is_zero_dtype(options.dtype) ? src.dtype : options.dtype;
  plan.cast = !same_dtype(plan.dtype, src.dtype);
  plan.src_context = from.context;
  plan.dst_context = to.context;
  if (plan.cast) require_cast(src, plan.dtype, options.casting, into);
  const bool src_host = from.host;
  const bool dst_host = into ? to.host : is_host_destination(to);
  // Host memory on the destination side is page-locked when it says so, or a new tensor in page-locked memory
  // (cuda_host), or a new host tensor over 64 KiB filled by a DMA on the source's stream: made in the source
  // backend's page-locked memory, within the budget (smaller ones cost little to copy at once, and a batch
  // gathers them into one read).
  const uint64_t bytes = src.numel * itemsize(plan.dtype);
  if (!into && dst_host && !to.kind->page_locked && !src_host && from.backend && !from.can.maps_to_host &&
      !from.shares_host_memory && from.can.locked_host && bytes > kLockedResultMin &&
      bytes <= options.locked_result_budget)
    plan.locked_result = from.can.locked_host;
  const bool dst_pinned = into ? to.pinned : to.kind->page_locked || plan.locked_result;
  require_data_path(from, src_host, to, dst_host);

  // Reasons that rule out sharing the source's memory (an existing destination always
  // does), in words where a report or an error reads them.
  StackText reason(options.describe || options.copy == ABR_COPY_NEVER);
  if (into)
    reason.assign("into an existing tensor");
  else if (options.copy == ABR_COPY_ALWAYS)
    reason.assign("ABR_COPY_ALWAYS");
  else if (plan.cast)
    reason.format("converting {} -> {}", dtype_name(src.dtype), dtype_name(plan.dtype));
  else if ((options.flags & ABR_TRANSFER_REQUIRE_CONTIGUOUS) && !src.compact)
    reason.assign("ABR_TRANSFER_REQUIRE_CONTIGUOUS, source strided");
  else if ((options.flags & ABR_TRANSFER_NO_NEGATIVE_STRIDES) && src.has_negative_stride)
    reason.format(
        "the source has negative strides {} (a flipped view), which PyTorch cannot hold "
        "(ABR_TRANSFER_NO_NEGATIVE_STRIDES)",
        shape_string(src.strides));
  else if (src_host && !dst_host && !to.shares_host_memory)
    reason.join_device("", to.device, " does not share host memory");
  else if (src_host && !dst_host && to.host_wrap_alignment &&
           (reinterpret_cast<uintptr_t>(src.data) + src.byte_offset + src.min_byte) % to.host_wrap_alignment)
    reason.format("host data not aligned to the {} bytes {} needs", to.host_wrap_alignment, DeviceName{to.device});
  else if (!src_host && dst_host)
    reason.join_device("", src.device, " memory is not addressable from the host");
  else if (dst_pinned && !from.pinned)
    reason.join_device("the host memory is not page-locked, which ", to.device, " promises");
  else if (!src_host && !dst_host && !same_device(src.device, to.device))
    reason.join_device("the data lives on ", src.device, "");

  if (reason.empty()) {
    if (src_host && !dst_host) {
      plan.path = ABR_PATH_HOST_WRAP;
      plan.detail.format("{} {}, no copy", device_string(to.device), to.can.host_wrap_words);
    } else {
      plan.path = ABR_PATH_ZERO_COPY;
      plan.hand_back = options.source_reads_as_view && same_device(src.device, to.device);
      if (plan.detail.wanted()) plan.detail.join({"view of ", device_text(src.device).view(), " memory, layout kept"});
    }
    return plan;
  }
  if (options.copy == ABR_COPY_NEVER)
    fail(ABR_ERR_COPY_REQUIRED, "ABR_COPY_NEVER, but a copy is required: {}", reason.view());
  plan.strided_source = !src.compact;
  const bool src_reshape = plan.strided_source || plan.cast;
  const bool dst_strided = into && !dst->compact;
  // The host threads of every path, the chunks of a staged one.
  plan.staging = staging_shape(bytes, options.staging, src_reshape || dst_strided);
  if (src_host && dst_host) {
    plan.path = ABR_PATH_HOST_COPY;
    plan.move = Move::HostWalk;
    plan.executor = Executor::Host;
    plan.overlap = into && copy_overlaps(src, from, true, *dst, to, true);
    const ThreadsWords threads = host_threads_words(plan.staging.threads);
    if (into)
      plan.detail.join({"host copy into an existing tensor", plan.cast ? ", converted" : "",
                        plan.overlap ? ", staged through a temporary because the two overlap" : "", threads.view()});
    else
      plan.detail.join({"host copy (", reason.view(), ")", plan.strided_source ? ", strided source packed" : "",
                        plan.cast ? ", converted on the host" : "", threads.view()});
  } else if (src_host || dst_host) {
    plan_host_and_device(plan, src, from, dst, to, options, src_host ? from.pinned : dst_pinned,
                         Reshaping{src_reshape, dst_strided, bytes}, reason.view());
  } else {
    plan_device_views(plan, src, from, dst, to, options, src_reshape, dst_strided, reason.view());
  }
  return plan;
}

}  // namespace abr

#include "lib/run/runtime.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "lib/run/device_moves.hpp"
#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"
#include "lib/memory/host_buffer.hpp"
#include "lib/host/host_copy.hpp"
#include "lib/run/host_sides.hpp"
#include "lib/tensor/layout.hpp"
#include "lib/base/log.hpp"
#include "lib/plan/planner.hpp"
#include "lib/run/pipeline.hpp"
#include "lib/memory/shared_staging.hpp"
#include "lib/base/text.hpp"

namespace abr {
namespace {

// Each descriptor's backend, opened unless the build left it out or the options
// disable it; those get a report saying why, in `unopened`.
std::vector<std::unique_ptr<DeviceBackend>> open_backends(const abr_runtime_options& options,
                                                          const std::shared_ptr<PinnedPool>& pool,
                                                          const std::vector<const BackendDescriptor*>& descriptors,
                                                          std::vector<BackendReport>& unopened) {
  std::vector<std::unique_ptr<DeviceBackend>> backends;
  for (const BackendDescriptor* descriptor : descriptors) {
    const int32_t opener = driver_opened_before_fork(descriptor->id);
    register_backend(*descriptor);
    std::string why;
    if (!descriptor->make)
      why = fmt::format("left out of this build ({})", descriptor->left_out_because);
    else if (descriptor->disable_flag & options.flags)
      why = fmt::format("disabled by {}", descriptor->disable_flag_name);
    else if (opener != 0)
      why = fmt::format(
          "its driver was opened in process {}, which forked this one ({}), and drivers do not "
          "survive fork: create runtimes in the parent, or start this process with \"spawn\" or "
          "\"forkserver\"",
          opener, this_process_id());
    if (why.empty()) {
      backends.push_back(descriptor->make(options, pool));
      if (backends.back()->report().info.available) note_driver_opened(descriptor->id);
      continue;
    }
    BackendReport& report = unopened.emplace_back();
    report.info.backend = descriptor->id;
    copy_text(report.info.detail, fmt::format("{} unavailable: {}", descriptor->name, why));
    log::debug("{}", report.info.detail);
  }
  return backends;
}

// The reports in the descriptors' order, which is the order devices are listed in.
std::vector<const BackendReport*> reports_of(const std::vector<const BackendDescriptor*>& descriptors,
                                             const std::vector<std::unique_ptr<DeviceBackend>>& backends,
                                             const std::vector<BackendReport>& unopened) {
  std::vector<const BackendReport*> reports;
  for (const BackendDescriptor* descriptor : descriptors) {
    for (const auto& backend : backends)
      if (backend->report().info.backend == descriptor->id) reports.push_back(&backend->report());
    for (const BackendReport& report : unopened)
      if (report.info.backend == descriptor->id) reports.push_back(&report);
  }
  return reports;
}

void fill_report(abr_transfer_report* report, const Plan& plan, uint64_t bytes) {
  if (!report) return;
  report->path = plan.path;
  report->flags = plan.report_flags();
  report->bytes_moved = bytes;
  // Only the text and its end are written: clearing all 160 bytes weighs on a zero-copy transfer.
  const std::string_view detail = plan.detail.view();  // shorter than report->detail
  std::memcpy(report->detail, detail.data(), detail.size());
  report->detail[detail.size()] = '\0';
}

}  // namespace

abr_runtime_options resolve_runtime_options(const abr_runtime_options* options,
                                            const std::vector<const BackendDescriptor*>& backends) {
  abr_runtime_options out{};
  if (!options) return out;
  uint32_t known_flags = 0;  // each backend's disable flag
  for (const BackendDescriptor* backend : backends) known_flags |= backend->disable_flag;
  if (options->flags & ~known_flags)
    fail(ABR_ERR_INVALID_ARGUMENT, "abr_runtime_options.flags has unknown bits {:#x}", options->flags & ~known_flags);
  out = *options;
  out.version = ABR_RUNTIME_OPTIONS_VERSION;
  return out;
}

Runtime::Runtime(const abr_runtime_options* options)
    : Runtime(resolve_runtime_options(options, builtin_backends()), builtin_backends()) {}

Runtime::Runtime(const abr_runtime_options* options, const std::vector<const BackendDescriptor*>& backends)
    : Runtime(resolve_runtime_options(options, backends), backends) {}

Runtime::Runtime(const abr_runtime_options& resolved, const std::vector<const BackendDescriptor*>& descriptors)
    : pool_(PinnedPool::create()),
      descriptors_(descriptors),
      backends_(open_backends(resolved, pool_, descriptors_, unopened_)),
      devices_(reports_of(descriptors_, backends_, unopened_)) {
  for (std::size_t type = 0; type < backend_by_type_.size(); ++type)
    backend_by_type_[type] = find_backend(static_cast<DLDeviceType>(type));
  log::debug("runtime created with {} device(s)", devices_.count());
}

Runtime::~Runtime() {
  if (forked()) {  // a forked child's copy: the parent's driver state is left as it is, and goes with the process
    for (auto& backend : backends_) (void)backend.release();
    (void)new std::shared_ptr<PendingReleases>(std::move(releases_));
    (void)new std::shared_ptr<PinnedPool>(std::move(pool_));
    return;
  }
  releases_->close();  // while the backends whose events it waits on are open
  for (auto& domain : shared_domains_) pool_->release_domain(&domain.second);
}

DeviceBackend* Runtime::backend_of(DLDeviceType type) {
  const auto index = static_cast<std::size_t>(type);
  DeviceBackend* backend = index < backend_by_type_.size() ? backend_by_type_[index] : find_backend(type);
  if (backend && forked()) [[unlikely]]
    refuse_forked_memory(type);
  return backend;
}

void Runtime::refuse_forked_memory(DLDeviceType type) const {
  refuse_forked(fmt::format("{} memory", find_kind(type)->name));
}

void Runtime::refuse_forked(const std::string& what) const {
  fail(ABR_ERR_BACKEND_UNAVAILABLE,
       "the driver of {} was opened in process {}, which forked this one ({}): drivers do not survive fork "
       "(their threads stay in the parent), so device work here would hang or fail. Start this process with "
       "multiprocessing's \"spawn\" or \"forkserver\" method (a DataLoader's multiprocessing_context), or create "
       "the runtime (from Python: make the first arraybridge call) after forking; host memory still works here",
       what, opened_by_pid_, this_process_id());
}

DeviceBackend* Runtime::find_backend(DLDeviceType type) {
  const DeviceKind* kind = find_kind(type);
  if (!kind) return nullptr;
  for (const auto& backend : backends_)
    if (backend->report().info.backend == kind->backend) return backend.get();
  return nullptr;  // ABR_BACKEND_HOST
}

DeviceBackend* Runtime::memory_backend_of(DLDeviceType type) {
  return is_host_accessible(type) ? nullptr : backend_of(type);
}

bool Runtime::device_lost(DLDevice device) {
  DeviceBackend* backend = find_backend(device.device_type);  // a device listing works in a forked child too
  return backend && backend->device_lost(device);
}

Endpoint Runtime::endpoint_of(const Layout& tensor, DLDevice other, const char* what, bool ask_pinned) {
  Endpoint side = describe_endpoint(devices_, tensor.device, what, /*must_exist=*/false);
  side.backend = backend_of(tensor.device.device_type);
  if (side.host) {
    side.pinned = side.kind->page_locked;
    DeviceBackend* other_backend = backend_of(other.device_type);
    if (!side.pinned && ask_pinned && other_backend && tensor.numel > 0)
      side.pinned = other_backend->host_pinned(first_element(tensor) + tensor.min_byte,
                                               static_cast<uint64_t>(tensor.max_byte_end - tensor.min_byte));
  } else if (side.backend) {
    side.context = side.backend->memory_context(tensor, &side.allocation);
    side.can = side.backend->capabilities();
  }
  return side;
}

Endpoint Runtime::endpoint_for(DLDevice device) {
  Endpoint side = describe_endpoint(devices_, device, "destination", /*must_exist=*/true);
  side.backend = backend_of(device.device_type);
  if (!side.backend) return side;  // the CPU
  const DeviceTraits traits = side.backend->traits(device);
  side.context = traits.context;
  side.host_wrap_alignment = traits.host_wrap_alignment;
  side.can = side.backend->capabilities();
  return side;
}

void Runtime::set_staging(const StagingChoice& choice) {
  if (choice.threads > 256)
    fail(ABR_ERR_INVALID_ARGUMENT, "staging threads = {}: use 1 to 256, or 0 for the default", choice.threads);
  if (choice.chunk_bytes && (choice.chunk_bytes < (uint64_t{64} << 10) || choice.chunk_bytes > (uint64_t{1} << 30)))
    fail(ABR_ERR_INVALID_ARGUMENT, "staging chunk = {} bytes: use 64 KiB to 1 GiB, or 0 for the default",
         choice.chunk_bytes);
  staging_threads_.store(choice.threads, std::memory_order_relaxed);
  staging_chunk_.store(choice.chunk_bytes, std::memory_order_relaxed);
}

uint64_t Runtime::trim_pool() {
  if (forked()) {  // the pinned blocks and device caches are the parent's drivers'
    HostBuffer::trim_kept();
    return 0;
  }
  uint64_t released = 0;
  for (const auto& backend : backends_) {
    backend->finish_deferred_releases();
    released += backend->trim_device_cache();
  }
  HostBuffer::trim_kept();  // process-wide and at most about 1 MiB: not counted as this runtime's
  return released + pool_->trim();
}

PoolStats Runtime::pool_stats() { return forked() ? PoolStats{} : pool_->stats(); }

void Runtime::set_pool_limit(uint64_t limit_bytes) {
  if (forked()) refuse_forked("the pinned pool");
  pool_->set_limit(limit_bytes);
}

PoolStats Runtime::device_cache_stats() {
  PoolStats total;
  if (forked()) return total;
  for (const auto& backend : backends_) {
    const PoolStats s = backend->device_cache_stats();
    total.bytes_pinned += s.bytes_pinned;
    total.bytes_in_use += s.bytes_in_use;
    total.bytes_cached += s.bytes_cached;
    total.bytes_waiting += s.bytes_waiting;
    total.peak_bytes_pinned += s.peak_bytes_pinned;
    total.limit_bytes += s.limit_bytes;
    total.blocks_pinned += s.blocks_pinned;
    total.hits += s.hits;
    total.misses += s.misses;
  }
  return total;
}

void Runtime::set_device_cache_limit(uint64_t limit_bytes) {
  if (forked()) refuse_forked("the device caches");
  for (const auto& backend : backends_) backend->set_device_cache_limit(limit_bytes);
}

void Runtime::check_stream(const Stream* stream, DLDevice a, DLDevice b) const {
  if (!stream) return;
  const DLDevice s = stream->device();
  if (!same_device(s, a) && !same_device(s, b))
    fail(ABR_ERR_INVALID_ARGUMENT, "the stream belongs to {}, which is {}", device_string(s),
         same_device(a, b) ? fmt::format("not {}", device_string(a))
                           : fmt::format("neither {} nor {}", device_string(a), device_string(b)));
}

template <class Managed>
DLManagedTensorVersioned* Runtime::take_and_transfer(Managed* src, DLDevice dst, const abr_transfer_options* options,
                                                     Stream* stream) {
  if (!src) fail(ABR_ERR_INVALID_ARGUMENT, "src is NULL");
  SourceTensor source(src);
  try {
    return transfer(source, dst, options, stream);
  } catch (...) {
    source.give_back();  // on any error the caller keeps the source
    throw;
  }
}

DLManagedTensorVersioned* Runtime::to_device(DLManagedTensorVersioned* src, DLDevice dst,
                                             const abr_transfer_options* options, Stream* stream) {
  return take_and_transfer(src, dst, options, stream);
}

DLManagedTensorVersioned* Runtime::to_device(DLManagedTensor* src, DLDevice dst, const abr_transfer_options* options,
                                             Stream* stream) {
  return take_and_transfer(src, dst, options, stream);
}

DLManagedTensorVersioned* Runtime::transfer(SourceTensor& source, DLDevice dst, const abr_transfer_options* options,
                                            Stream* stream) {
  collect_releases();
  if (source.versioned()) validate_header(*source.versioned(), "source");
  TransferOptions opts = resolve_options(options);
  opts.staging = staging_choice();
  opts.source_reads_as_view = source.versioned() && reads_as_a_view(*source.versioned());
  const Layout src = validate_tensor(source.tensor(), Role::Source, "source");
  const Endpoint from = endpoint_of(src, dst, "source");
  const Endpoint to = endpoint_for(dst);
  opts.locked_result_budget = lockable_result_type(from, dst, stream) != 0 ? locked_result_room() : 0;
  Plan plan = plan_transfer(src, from, to, opts);
  check_stream(stream, src.device, dst);
  DeviceMemory made = locked_result_or_replan(plan, src, from, to, opts, stream);
  if (log::enabled(ABR_LOG_DEBUG))  // the arguments cost more than a zero-copy transfer: format only when wanted
    log::debug("to_device {} {} {} -> {}: {} ({})", dtype_name(src.dtype), shape_string(src.shape),
               device_string(src.device), device_string(dst), path_name(plan.path), plan.detail.view());

  DLManagedTensorVersioned* out = plan.move == Move::View
      ? export_view(source, src, dst, plan)
      : export_copy(source, src, dst, plan, std::move(made), stream);
  fill_report(opts.report, plan, plan.move == Move::View ? 0 : src.numel * itemsize(plan.dtype));
  return out;
}

DLManagedTensorVersioned* Runtime::export_view(SourceTensor& source, const Layout& src, DLDevice dst,
                                               const Plan& plan) {
  if (plan.hand_back) return source.take_versioned();  // its deleter runs once, when the result is deleted
  const uint64_t read_only = source.flags() & DLPACK_FLAG_BITMASK_READ_ONLY;
  if (plan.path != ABR_PATH_HOST_WRAP) {
    // Host memory is handed on as a pointer to the first element, device memory as handle + byte_offset.
    const bool direct = is_direct_address(src.device.device_type);
    const ExportSpec spec{direct ? const_cast<char*>(first_element(src)) : src.data,
                          dst,
                          src.dtype,
                          src.shape,
                          src.strides,
                          direct ? 0 : src.byte_offset,
                          read_only};
    return export_view_of(spec, source);
  }
  auto keep = std::make_unique<SourceTensor>(std::move(source));
  SourceTensor* held = keep.get();
  std::unique_ptr<Storage> owner = std::move(keep);  // the device buffer keeps the source alive
  try {
    // The device buffer starts at the lowest byte the view touches.
    char* base = const_cast<char*>(first_element(src)) + src.min_byte;
    PendingExport pending(
        {nullptr, dst, src.dtype, src.shape, src.strides, static_cast<uint64_t>(-src.min_byte), read_only});
    DeviceMemory memory =
        backend_of(dst.device_type)
            ->wrap_host(dst, base, static_cast<uint64_t>(src.max_byte_end - src.min_byte), read_only != 0, owner);
    pending.set_data(memory.handle);
    return pending.finish(std::move(memory.storage));
  } catch (...) {
    if (owner) held->give_back();  // not handed on: still the caller's
    throw;
  }
}

DLManagedTensorVersioned* Runtime::export_copy(SourceTensor& source, const Layout& src, DLDevice dst, const Plan& plan,
                                               DeviceMemory made, Stream* stream) {
  std::unique_ptr<SourceTensor> held_source;  // on a stream: the source, until the stream is done with it
  try {
    const std::size_t bytes = static_cast<std::size_t>(src.numel * itemsize(plan.dtype));
    DeviceMemory result = made.storage ? std::move(made) : new_result_memory(dst, bytes, stream);
    void* data = result.handle;
    std::unique_ptr<Storage> memory = std::move(result.storage);
    // Everything that can run out of memory happens before the copy starts: on a
    // stream, the work may still run after the call, so the stream holds the source
    // and a share of the memory until it is done (without one, neither is needed).
    const Layout out = compact_layout(dst, plan.dtype, src.shape, data);
    PendingExport pending({data, dst, plan.dtype, out.shape, out.strides, 0, DLPACK_FLAG_BITMASK_IS_COPIED});
    std::unique_ptr<Storage> stream_memory;
    if (stream) {
      std::shared_ptr<Storage> shared = std::move(memory);
      memory = std::make_unique<SharedStorage>(shared);
      stream_memory = std::make_unique<SharedStorage>(std::move(shared));
      held_source = std::make_unique<SourceTensor>(std::move(source));
    }
    execute(plan, src, out, stream);
    if (stream) {
      stream->retain(std::move(held_source));
      stream->retain(std::move(stream_memory));
    } else {
      source.call_deleter();  // the copy is complete: the source is no longer needed
    }
    return pending.finish(std::move(memory));
  } catch (...) {
    if (held_source) held_source->give_back();  // on any error the caller keeps the source
    source.give_back();
    throw;
  }
}

uint64_t Runtime::locked_result_room() {
  const PoolStats stats = pool_->stats();
  return abr::locked_result_room(stats.limit_bytes, stats.bytes_in_use);
}

DeviceMemory Runtime::locked_result_or_replan(Plan& plan, const Layout& src, const Endpoint& from, const Endpoint& to,
                                              TransferOptions& opts, Stream* stream) {
  if (!plan.locked_result) return {};
  const uint64_t bytes = src.numel * itemsize(plan.dtype);
  try {
    return backend_of(plan.locked_result)->allocate({plan.locked_result, 0}, bytes, stream);
  } catch (const Error& e) {
    if (e.status() != ABR_ERR_OUT_OF_MEMORY) throw;
    log::debug("a new host tensor of {} bytes in pageable memory: {}", bytes, e.what());
  }
  opts = after_locked_result_refused(opts);
  plan = plan_transfer(src, from, to, opts);
  return {};
}

DeviceMemory Runtime::new_result_memory(DLDevice dst, uint64_t bytes, Stream* stream) {
  if (DeviceBackend* backend = backend_of(dst.device_type))  // device memory, or page-locked host memory
    return backend->allocate(dst, bytes, stream);
  auto buffer = std::make_unique<HostBuffer>(static_cast<std::size_t>(bytes));
  DeviceMemory memory;
  memory.handle = buffer->data();
  memory.storage = std::move(buffer);
  return memory;
}

void Runtime::execute(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream) {
  switch (plan.executor) {
    case Executor::Pipeline: return run_staged(plan, src, dst, stream);
    case Executor::Source:
      return run_on_device(plan, src, dst, *backend_of(src.device.device_type), src.device, plan.src_context, stream);
    case Executor::Destination:
      return run_on_device(plan, src, dst, *backend_of(dst.device.device_type), dst.device, plan.dst_context, stream);
    case Executor::Host: return run_on_host(plan, src, dst);
    case Executor::None: break;
  }
  fail(ABR_ERR_INTERNAL, "a plan with nothing to execute reached the executors ({})", path_name(plan.path));
}

void Runtime::run_on_host(const Plan& plan, const Layout& src, const Layout& dst) {
  char* target = const_cast<char*>(first_element(dst));
  if (!plan.overlap && src.compact && dst.compact && !plan.cast)  // bytes for bytes: no layout to walk
    return copy_in_parallel(target, first_element(src), static_cast<std::size_t>(src.nbytes), plan.staging.threads);
  if (!plan.overlap)
    return copy_layout_in_parallel(src, first_element(src), dst.dtype, target, dst.strides.data(),
                                   plan.staging.threads);
  // Overlapping memory: pack the source first, then scatter it.
  HostBuffer staging(static_cast<std::size_t>(src.nbytes));
  const Layout packed = compact_layout(src.device, src.dtype, src.shape, staging.data());
  host_copy_layout(src, first_element(src), src.dtype, staging.data(), packed.strides.data());
  host_copy_layout(packed, staging.data(), dst.dtype, target, dst.strides.data());
}

std::unique_ptr<ChunkSide> Runtime::staging_side(const Plan& plan, const Layout& tensor, bool source, Stream* stream) {
  if (DeviceBackend* backend = memory_backend_of(tensor.device.device_type))
    return device_side(plan, tensor, source,
                       submit_routed(*backend, tensor.device, source ? plan.src_context : plan.dst_context, stream));
  if ((source ? plan.pack : plan.scatter) == Step::Host)  // packed or scattered by the host engine, row by row
    return std::make_unique<HostLayoutSide>(tensor, first_element(tensor), source ? plan.dtype : tensor.dtype,
                                            plan.staging.threads);
  return std::make_unique<HostMemorySide>(first_element(tensor), plan.staging.threads);  // compact bytes
}

const void* Runtime::shared_domain(const void* blocks_domain) {
  std::lock_guard<std::mutex> lock(shared_domains_mutex_);
  return &shared_domains_[blocks_domain];  // a map node: its address stays put while the runtime lives
}

void Runtime::run_staged(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream) {
  std::unique_ptr<ChunkSide> from = staging_side(plan, src, /*source=*/true, stream);
  std::unique_ptr<ChunkSide> to = staging_side(plan, dst, /*source=*/false, stream);
  StagingProvider* blocks = (plan.staging_at_source ? from : to)->staging();
  if (!blocks) fail(ABR_ERR_INTERNAL, "a staged transfer planned through the pinned blocks of host memory");
  std::optional<SharedStagingProvider> shared;
  if (plan.staging_shared) {
    HostRegistrar* registrar = (plan.staging_at_source ? to : from)->registrar();
    if (!registrar)
      fail(ABR_ERR_INTERNAL, "a staged transfer planned through blocks shared with a side that cannot page-lock them");
    blocks = &shared.emplace(*blocks, *registrar, shared_domain(blocks->domain()));
  }
  run_pipeline(*from, *to, src.numel * dst.itemsize, plan.staging, *pool_, *blocks);
  from->finish();
  to->finish();
}

void Runtime::copy(const DLTensor& src_tensor, const DLTensor& dst_tensor, const abr_transfer_options* options,
                   Stream* stream) {
  collect_releases();
  TransferOptions opts = resolve_options(options);
  opts.staging = staging_choice();
  const Layout src = validate_tensor(src_tensor, Role::Source, "source");
  const Layout dst = validate_tensor(dst_tensor, Role::Destination, "destination");
  const Endpoint from = endpoint_of(src, dst.device, "source");
  const Endpoint to = endpoint_of(dst, src.device, "destination");
  const Plan plan = plan_copy(src, from, dst, to, opts);
  check_stream(stream, src.device, dst.device);
  if (log::enabled(ABR_LOG_DEBUG))
    log::debug("copy {} {} -> {} {}: {} ({})", dtype_name(src.dtype), device_string(src.device), dtype_name(dst.dtype),
               device_string(dst.device), path_name(plan.path), plan.detail.view());
  execute(plan, src, dst, stream);
  fill_report(opts.report, plan, src.numel * dst.itemsize);
}

void Runtime::copy(const DLManagedTensorVersioned& src, const DLManagedTensorVersioned& dst,
                   const abr_transfer_options* options, Stream* stream) {
  validate_header(src, "source");
  validate_header(dst, "destination");
  if (dst.flags & DLPACK_FLAG_BITMASK_READ_ONLY) fail(ABR_ERR_READ_ONLY, "destination is marked READ_ONLY");
  copy(src.dl_tensor, dst.dl_tensor, options, stream);
}

std::unique_ptr<Stream> Runtime::create_stream(DLDevice device) {
  devices_.require(device, "stream device");
  if (device.device_type == kDLCPU) return std::make_unique<InlineHostStream>();
  if (DeviceBackend* backend = memory_backend_of(device.device_type)) return backend->create_stream(device);
  fail(ABR_ERR_UNSUPPORTED, "streams on {} are not supported: it is host memory; use the CPU or a device",
       device_string(device));
}

std::unique_ptr<Stream> Runtime::wrap_stream(DLDevice device, void* native) {
  devices_.require(device, "stream device");
  if (!native) fail(ABR_ERR_INVALID_ARGUMENT, "native stream is NULL");
  if (device.device_type == kDLCPU)
    fail(ABR_ERR_INVALID_ARGUMENT, "the CPU has no native streams to wrap; use abr_stream_create");
  if (DeviceBackend* backend = memory_backend_of(device.device_type)) return backend->wrap_stream(device, native);
  fail(ABR_ERR_UNSUPPORTED, "wrapping streams on {} is not supported: it is host memory; wrap a device's stream",
       device_string(device));
}

}  // namespace abr

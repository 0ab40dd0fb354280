// The runtime: validates what comes in, asks the planner for a path, has the
// host engine or a backend carry it out, and exports the result. One per process
// is typical; every method is thread-safe (the registry is immutable, backends
// lock what they share, and transfers share no other state).
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "arraybridge/arraybridge.h"
#include "lib/devices/backend.hpp"
#include "lib/devices/devices.hpp"
#include "lib/tensor/export.hpp"
#include "lib/tensor/layout.hpp"
#include "lib/memory/pending_releases.hpp"
#include "lib/run/pipeline.hpp"
#include "lib/plan/batch_plan.hpp"
#include "lib/plan/planner.hpp"
#include "lib/devices/stream.hpp"
#include "lib/platform/fork_guard.hpp"

namespace abr {

class Runtime {
 public:
  // With the built-in backends (lib/devices/builtin_backends.cpp).
  explicit Runtime(const abr_runtime_options* options);
  // With the backends of a list, in its order: a test's plug-in (tests/core/test_plugin_backend.cpp).
  Runtime(const abr_runtime_options* options, const std::vector<const BackendDescriptor*>& backends);
  ~Runtime();  // frees the shared staging blocks while the backends' contexts live

  const DeviceRegistry& devices() const { return devices_; }
  bool device_lost(DLDevice device);
  // abr_runtime_set_staging: how staged transfers planned from now on are cut.
  // Throws ABR_ERR_INVALID_ARGUMENT for a value out of range.
  void set_staging(const StagingChoice& choice);
  // The pinned pool (abr_pool_*). In a forked child the pool and the device caches are
  // the parent's drivers' state, whose locks a parent thread may have held at the fork:
  // their statistics are zeros and their limits refused there, no lock taken.
  PoolStats pool_stats();
  void set_pool_limit(uint64_t limit_bytes);
  // Frees every idle cached pinned block and every block of the backends' device
  // caches, after the backends' deferred releases (deleted tensors' memory) have
  // come back; returns the bytes freed.
  uint64_t trim_pool();
  // The backends' device memory caches (abr_device_cache_*), summed over backends;
  // the limit applies to each backend's cache.
  PoolStats device_cache_stats();
  void set_device_cache_limit(uint64_t limit_bytes);

  // abr_to_device and abr_to_device_legacy, with the whole ownership contract: on
  // success `src` has been consumed (its deleter ran, or belongs to the result
  // or, until the work completes, to the stream); on a throw it is untouched and
  // still the caller's.
  DLManagedTensorVersioned* to_device(DLManagedTensorVersioned* src, DLDevice dst, const abr_transfer_options* options,
                                      Stream* stream);
  DLManagedTensorVersioned* to_device(DLManagedTensor* src, DLDevice dst, const abr_transfer_options* options,
                                      Stream* stream);

  // A batch call's count: past the most one call takes, ABR_ERR_INVALID_ARGUMENT naming
  // `what` ("tensors", "pairs"), before anything of the caller's arrays is read or written
  // (a garbage count, a negative one made unsigned through an FFI, runs past their ends).
  static void check_batch_count(std::size_t count, const char* what);

  // abr_to_device_many (lib/run/batch.cpp): each source to `dst` as to_device would,
  // small copies from host memory coalesced; all or nothing (on a throw every
  // source is still the caller's and `out` is untouched).
  void to_device_many(DLManagedTensorVersioned* const* srcs, std::size_t count, DLDevice dst,
                      const abr_transfer_options* options, Stream* stream, DLManagedTensorVersioned** out,
                      abr_batch_report& report);

  // abr_copy_many (lib/run/copy_many.cpp): abr_copy of each pair, in order; every pair is
  // planned before anything moves, and device moves on one context wait once.
  void copy_many(const DLTensor* const* srcs, const DLTensor* const* dsts, std::size_t count,
                 const abr_transfer_options* options, Stream* stream, abr_batch_report& report);

  // abr_copy: both tensors borrowed; options may be null.
  void copy(const DLTensor& src, const DLTensor& dst, const abr_transfer_options* options, Stream* stream);
  // abr_copy_versioned: also checks both headers and refuses a READ_ONLY destination.
  void copy(const DLManagedTensorVersioned& src, const DLManagedTensorVersioned& dst,
            const abr_transfer_options* options, Stream* stream);

  std::unique_ptr<Stream> create_stream(DLDevice device);
  std::unique_ptr<Stream> wrap_stream(DLDevice device, void* native);
  // Where streams let go of without waiting leave what their queued work still uses.
  const std::shared_ptr<PendingReleases>& pending_releases() const { return releases_; }

  // abr_ipc_export: a handle for `tensor` written into `out`; returns its size.
  uint32_t ipc_export(const DLTensor& tensor, Stream* stream, unsigned char* out, std::size_t capacity);
  // abr_ipc_import: the tensor a handle names, opened in this process (lib/run/ipc.cpp).
  DLManagedTensorVersioned* ipc_import(const unsigned char* handle, std::size_t size, Stream* stream);

 private:
  Runtime(const abr_runtime_options& resolved, const std::vector<const BackendDescriptor*>& descriptors);

  template <class Managed>
  DLManagedTensorVersioned* take_and_transfer(Managed* src, DLDevice dst, const abr_transfer_options* options,
                                              Stream* stream);
  DLManagedTensorVersioned* transfer(SourceTensor& source, DLDevice dst, const abr_transfer_options* options,
                                     Stream* stream);
  DLManagedTensorVersioned* export_view(SourceTensor& source, const Layout& src, DLDevice dst, const Plan& plan);
  // `made`: the result's memory where the plan made it already (locked_result_or_replan).
  DLManagedTensorVersioned* export_copy(SourceTensor& source, const Layout& src, DLDevice dst, const Plan& plan,
                                        DeviceMemory made, Stream* stream);
  // How much of the pool new results may still take, by the planner's rule.
  uint64_t locked_result_room();
  // The page-locked memory of a new host result, where `plan` wants it (Plan::locked_result).
  // Where the pool refuses it, the transfer is planned again with the planner's
  // after_locked_result_refused options (left in `opts`), so that its path and report
  // say what runs, and nothing (empty) is returned.
  DeviceMemory locked_result_or_replan(Plan& plan, const Layout& src, const Endpoint& from, const Endpoint& to,
                                       TransferOptions& opts, Stream* stream);
  // The memory of a new result of `bytes` on `dst`: the backend's, or plain host memory.
  DeviceMemory new_result_memory(DLDevice dst, uint64_t bytes, Stream* stream);
  struct BatchItem;
  // abr_to_device_many's phases, in this order, on one Batch (lib/run/batch.cpp).
  struct Batch;
  void plan_items(Batch& batch, const abr_transfer_options* options);
  void place_items(Batch& batch);
  void prepare_results(Batch& batch);
  void move_items(Batch& batch);
  void describe_batch(const Batch& batch, abr_batch_report& report);
  void commit_batch(Batch& batch, DLManagedTensorVersioned** out);
  // The coalesced items of a batch packed into `block` on `dst` as `placed` says (its
  // bytes, the host threads that pack, and how the block is filled).
  void move_coalesced(std::vector<BatchItem>& items, DLDevice dst, const Endpoint& to, void* block,
                      const BatchPlan& placed, Stream* stream);
  struct OrderedMove;
  // A batch's pipelines (plan_batch, plan_copy_batch), one after another, each
  // pageable bytes to or from one context as one transfer; `entries` their indices,
  // which a failure names with `entry_name` ("srcs[{}]"). A pipeline the pinned pool
  // refuses moves its entries one by one, as planned alone, and its list is emptied;
  // returns how many moved so.
  std::size_t move_pipelines(const std::vector<std::vector<OrderedMove>>& pipelines,
                             std::vector<StreamedPipeline>& entries, const char* entry_name, Stream* stream);
  // One pipeline's moves, cut as the batch planner decided (`shape`).
  void move_streamed(const std::vector<OrderedMove>& moves, const StagingShape& shape, Stream* stream);
  // A batch's moves in order, consecutive device moves on one context in one submission
  // (lib/run/batch_moves.cpp); `joined` counts the gathered reads that joined another's copy.
  // Reads that land in pinned memory are copied out on `copy_out_threads` host threads.
  uint32_t move_in_order(const std::vector<OrderedMove>& moves, Stream* stream, std::size_t& at, uint32_t& joined,
                         unsigned copy_out_threads = 1);
  // Runs a plan's move with the executor it names.
  void execute(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream);
  // Executor::Host: the host engine between two sides in host memory.
  void run_on_host(const Plan& plan, const Layout& src, const Layout& dst);

  // The backend serving a device type (a device's, or page-locked host memory's
  // like cuda_host); nullptr for plain host memory and types without one. In a
  // child forked after the backends opened, ABR_ERR_BACKEND_UNAVAILABLE instead:
  // every transfer, stream and IPC call asks here (or checks forked()) before a driver.
  DeviceBackend* backend_of(DLDeviceType type);
  DeviceBackend* find_backend(DLDeviceType type);  // backend_of without the table or the fork check
  // The backend of a type's device memory; nullptr for any host memory.
  DeviceBackend* memory_backend_of(DLDeviceType type);
  // The endpoint of an existing tensor's memory: for device memory its backend
  // context (checking the device exists and the handle is valid) and capabilities,
  // for host memory whether it is page-locked for `other`'s backend (unless
  // !ask_pinned: then only a page-locked kind counts, and the driver is not asked).
  Endpoint endpoint_of(const Layout& tensor, DLDevice other, const char* what, bool ask_pinned = true);
  // The endpoint of a new tensor's device (abr_to_device's destination).
  Endpoint endpoint_for(DLDevice device);
  // Move::Staged, whatever the two sides: the pipeline between a side for each.
  void run_staged(const Plan& plan, const Layout& src, const Layout& dst, Stream* stream);
  // Host memory's side, or the side the tensor's backend opens.
  std::unique_ptr<ChunkSide> staging_side(const Plan& plan, const Layout& tensor, bool source, Stream* stream);
  void check_stream(const Stream* stream, DLDevice a, DLDevice b) const;

  StagingChoice staging_choice() const {
    return {staging_threads_.load(std::memory_order_relaxed), staging_chunk_.load(std::memory_order_relaxed)};
  }
  // The pool domain of `blocks_domain`'s blocks when they are also page-locked by a
  // second driver (SharedStagingProvider): one key per domain, apart from the plain blocks.
  const void* shared_domain(const void* blocks_domain);
  std::mutex shared_domains_mutex_;
  std::map<const void*, char> shared_domains_;
  std::atomic<uint32_t> staging_threads_{0};  // abr_runtime_set_staging; 0: the default
  std::atomic<uint64_t> staging_chunk_{0};
  // The process that opened the backends, and its place among forks: a forked child's copy of the runtime
  // refuses device work and leaves the parent's driver state alone (queued releases, caches, its teardown).
  const ForkStamp born_;
  const int32_t opened_by_pid_ = this_process_id();
  bool forked() const noexcept { return born_.inherited(); }
  [[noreturn]] void refuse_forked(const std::string& what) const;
  [[noreturn, gnu::noinline, gnu::cold]] void refuse_forked_memory(DLDeviceType type) const;  // keeps backend_of small
  void collect_releases() noexcept {
    releases_->collect();  // in a forked child it leaves the parent's alone
  }
  std::shared_ptr<PinnedPool> pool_;  // before the backends: it outlives them
  std::shared_ptr<PendingReleases> releases_ = std::make_shared<PendingReleases>();  // closed first
  std::vector<const BackendDescriptor*> descriptors_;
  std::vector<BackendReport> unopened_;                   // left out of the build or disabled: only a report
  std::vector<std::unique_ptr<DeviceBackend>> backends_;  // the opened ones, in descriptors_' order
  // backend_of's answers by device type (DLPack's types are small numbers), found
  // once: every transfer asks two or three times.
  std::array<DeviceBackend*, kKindSlots> backend_by_type_{};
  DeviceRegistry devices_;
};

// The options with their flags checked against the disable flags of `backends`.
abr_runtime_options resolve_runtime_options(const abr_runtime_options* options,
                                            const std::vector<const BackendDescriptor*>& backends);

}  // namespace abr

// What the runtime needs from a device backend (each backend folder). The
// planner decides a transfer's path from the facts a backend reports here; the
// backend only carries the plan out. lib/ never sees a backend's native types:
// contexts are opaque pointers, memory handles are DLTensor::data values.
#pragma once

#include <cstdint>
#include <memory>

#include "arraybridge/arraybridge.h"
#include "lib/tensor/backend_descriptor.hpp"
#include "lib/devices/backend_report.hpp"
#include "lib/devices/memory_stats.hpp"
#include "lib/tensor/storage.hpp"
#include "lib/devices/stream.hpp"
#include "lib/devices/submission.hpp"

namespace abr {

struct Layout;
// What a peer copy does on either side besides the copy (the plan's pack and scatter,
// as the backend needs them: it never reads a Plan).
struct PeerSteps {
  bool pack_on_source = false;          // the source is strided or cast: a kernel packs it into a temporary
  bool scatter_on_destination = false;  // the destination is strided: a kernel scatters the copied bytes
};

// What a backend can do, the same for all its devices. The planner branches on
// these, never on a backend's name: a new backend states its own.
struct Capabilities {
  // The host engine reaches its memory by mapping it, so it packs and converts
  // straight through (OpenCL). Without it the memory is reached only by DMA, and
  // reshaping happens in pinned staging or in a device kernel (CUDA).
  bool maps_to_host = false;
  // It page-locks host memory another driver allocated, for its own DMA
  // (cuMemHostRegister): a staged transfer with that driver's side runs through
  // the other side's blocks, page-locked by both (lib/memory/shared_staging.hpp).
  bool page_locks_foreign_host = false;
  // The device type of this backend's page-locked host memory (cuda_host), where
  // it has one: a new host tensor copied from its device on a stream is made there,
  // so that one DMA fills it without blocking (as torch's non_blocking=True does).
  DLDeviceType locked_host = static_cast<DLDeviceType>(0);
  // Its device addresses and the host's are one address space (CUDA's unified
  // addressing): device memory at a host address is those host bytes (managed memory,
  // viewed as the device's), so a copy's overlap with host memory is told by address.
  bool host_addresses = false;
  // Its conversion kernels read and write whole elements only: a cast in its memory
  // needs each side's byte offset a multiple of its itemsize (OpenCL's typed pointers).
  bool casts_whole_elements = false;
  // Devices of one (non-null) domain copy straight between their contexts.
  const void* peer_domain = nullptr;
  // How a device copy between peers and host memory used in place are done, for the report.
  const char* peer_copy_words = "one peer copy";
  const char* host_wrap_words = "uses the host memory in place";
};

// What a backend says about one of its devices, beyond its registry entry (whose
// ABR_DEVICE_SHARES_HOST_MEMORY flag says whether host memory can back its buffers).
struct DeviceTraits {
  uint64_t host_wrap_alignment = 0;  // what a host pointer must be aligned to for wrap_host
  void* context = nullptr;           // the runtime's own context on this device
};

// Device memory from a backend: the DLTensor::data value and what releases it.
struct DeviceMemory {
  void* handle = nullptr;
  std::unique_ptr<Storage> storage;
};

// Device memory [begin, end) of one allocation; empty (0, 0) where unknown.
struct AllocationRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  // The host address of the memory's first byte where it uses host memory in place (an
  // OpenCL buffer made over host memory: a host wrap), else 0: a copy's overlap is in those bytes.
  uintptr_t host_base = 0;
  // Where the handle's first byte lies in memory other handles may share, where handles are
  // not addresses (an OpenCL sub-buffer: its parent buffer and origin; a buffer: itself, 0);
  // else 0: two handles of one root share bytes at these offsets.
  uintptr_t root = 0;
  uint64_t root_offset = 0;
  bool holds(uintptr_t from, uintptr_t to) const { return begin < end && begin <= from && to <= end; }
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual const BackendReport& report() const = 0;
  virtual const Capabilities& capabilities() const = 0;
  // The device's own facts, for a new tensor on it.
  virtual DeviceTraits traits(DLDevice device) = 0;

  // Checks the memory handle of a tensor on one of this backend's devices (its
  // kind, and that the whole view lies inside it) and returns the context it
  // lives in. A handle from another library is accepted: its context is adopted.
  // `allocation` (may be null) gets the allocation the view lies in, where the
  // backend knows it and addresses are pointers (else empty): any of its bytes may
  // be read in one copy, and another view inside it is on the same device and context.
  virtual void* memory_context(const Layout& tensor, AllocationRange* allocation) = 0;

  // `bytes` of device memory in the runtime's own context (zero is allowed), ready
  // for work that `stream` (may be null) will order.
  virtual DeviceMemory allocate(DLDevice device, uint64_t bytes, Stream* stream) = 0;

  // Host memory [base, base + bytes) used by the device in place. `owner` is kept
  // until the device memory is destroyed; it is moved from only on success.
  virtual DeviceMemory wrap_host(DLDevice device, void* base, uint64_t bytes, bool read_only,
                                 std::unique_ptr<Storage>& owner) = 0;

  // Whether `stream` is this backend's stream of `device` in `context`, so work
  // there can be queued on it (the runtime routes by this, lib/run/device_moves.hpp).
  virtual bool runs_on(const Stream& stream, DLDevice device, void* context) = 0;
  // The primitives of one transfer's work on `device` in `context` (the plan's
  // context of that side), queued on `stream` (one runs_on accepted), or on the
  // backend's own queue and waited for at finish() when it is null
  // (lib/devices/submission.hpp); lib/run/device_moves.cpp composes every move from them.
  virtual std::unique_ptr<Submission> submit(DLDevice device, void* context, Stream* stream) = 0;
  // Move::Peer between two of this backend's devices in different contexts, with the
  // pack and scatter the plan asks for on either side (`steps`); complete on return.
  // Only a backend whose Capabilities name a peer domain overrides it.
  virtual void peer_copy(const Layout& src, const Layout& dst, Stream* stream, PeerSteps steps);

  virtual std::unique_ptr<Stream> create_stream(DLDevice device) = 0;
  virtual std::unique_ptr<Stream> wrap_stream(DLDevice device, void* native) = 0;

  // Whether host memory [begin, begin + bytes) is page-locked for this backend's
  // DMA; false where the backend cannot tell.
  virtual bool host_pinned(const void*, uint64_t) { return false; }
  // Whether a device hit a sticky error (every call on it now fails fast).
  virtual bool device_lost(DLDevice) { return false; }
  // Waits until memory of tensors deleted so far, whose release the backend
  // deferred (CUDA: until the devices' queued work is done), has been released.
  virtual void finish_deferred_releases() {}
  // The cache of device memory the backend hands out (CUDA: cuda/device_cache.hpp);
  // a backend without one reports zeros and frees nothing.
  virtual PoolStats device_cache_stats() { return {}; }
  virtual uint64_t trim_device_cache() { return 0; }
  virtual void set_device_cache_limit(uint64_t) {}

  // Sharing device memory with another process (abr_ipc_export / abr_ipc_import):
  // writes a handle for `tensor` into `out` and returns its size; the importer's
  // work follows the work queued on `stream`. Only a backend whose driver has
  // interprocess handles overrides these.
  virtual uint32_t ipc_export(const Layout& tensor, Stream* stream, unsigned char* out, std::size_t capacity);
  // The tensor a handle from ipc_export names, opened in this process.
  virtual DLManagedTensorVersioned* ipc_import(const unsigned char* handle, std::size_t size, Stream* stream);
};

}  // namespace abr

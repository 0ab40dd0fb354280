// CUDA IPC: a tensor's allocation (cuIpcGetMemHandle) and an interprocess event
// recorded after the exporter's queued work (cuIpcGetEventHandle), packed with
// the view's layout and the GPU's UUID into abr_ipc_handle's bytes. The importer
// finds the same GPU by UUID, opens the memory (cuIpcOpenMemHandle, closed by the
// tensor's deleter after this process's queued work) and orders itself after the
// event. The header's comment on abr_ipc_export states the lifetime rule; the
// bytes and their checks, all made before any driver call, are ipc_handle.cpp's.
#include <unistd.h>

#include <cstring>

#include "lib/tensor/device_kinds.hpp"
#include "lib/tensor/export.hpp"
#include "lib/base/log.hpp"
#include "cuda/backend.hpp"
#include "cuda/ipc_handle.hpp"
#include "cuda/stream.hpp"

namespace abr::cuda {
namespace {

bool same_gpu(const CUuuid& a, const CUuuid& b) { return std::memcmp(a.bytes, b.bytes, sizeof a.bytes) == 0; }

// Memory opened with cuIpcOpenMemHandle, closed in its device's context.
class IpcMapping final : public Storage {
 public:
  IpcMapping(std::shared_ptr<Device> device, CUdeviceptr base) : device_(std::move(device)), base_(base) {}
  ~IpcMapping() override {
    if (device_->lost()) return;  // the context is unusable: the mapping goes with the process
    try {
      Scope scope(*device_);
      const CUresult closed = device_->cu().cuIpcCloseMemHandle(base_);
      if (closed != CUDA_SUCCESS)
        log::warn("cuIpcCloseMemHandle on {} failed: {}", device_string(device_->dl_device()),
                  error_text(device_->cu(), closed));
    } catch (const std::exception& e) {
      log::warn("closing CUDA IPC memory failed: {}", e.what());
    }
  }

 private:
  std::shared_ptr<Device> device_;
  CUdeviceptr base_;
};

// Whether memory came from a stream-ordered pool (cuMemAllocAsync), which has no IPC handle.
bool from_memory_pool(Device& device, CUdeviceptr address) {
  CUmemoryPool pool = nullptr;
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
  void* values[] = {&pool};
  return device.cu().cuPointerGetAttributes(1, which, values, address) == CUDA_SUCCESS && pool != nullptr;
}

CUstream native_stream(Stream* stream) { return stream ? static_cast<CudaStream*>(stream)->get() : CU_STREAM_LEGACY; }

}  // namespace

uint32_t Backend::ipc_export(const Layout& tensor, Stream* stream, unsigned char* out, std::size_t capacity) {
  if (tensor.device.device_type != kDLCUDA)
    fail(ABR_ERR_UNSUPPORTED,
         "{} memory cannot be shared with another process: CUDA IPC shares device memory "
         "(cuda:N) only",
         device_string(tensor.device));
  if (tensor.numel == 0)
    fail(ABR_ERR_UNSUPPORTED,
         "an empty {} tensor has no memory to share with another process: send its shape "
         "instead",
         device_string(tensor.device));
  memory_context(tensor, nullptr);  // the memory is this device's, and the whole view lies in one allocation
  std::shared_ptr<Device> owner = device(tensor.device);
  Scope scope(*owner);
  const CUdeviceptr first = reinterpret_cast<CUdeviceptr>(tensor.data) + tensor.byte_offset;
  const PointerFacts facts = pointer_facts(*owner, first + static_cast<uint64_t>(tensor.min_byte));

  IpcHandleBody body{};
  // Asked first: the driver refuses pool memory too, but sanitizers report the failed call.
  if (from_memory_pool(*owner, facts.start))
    fail(ABR_ERR_UNSUPPORTED,
         "the memory of this {} tensor cannot be shared with another process: it comes from a stream-ordered pool "
         "(cuMemAllocAsync, as asynchronous allocators use), which has no IPC handle; copy the tensor into one of "
         "arraybridge's (to_device(x, \"{}\", copy=True)) and export that",
         device_string(tensor.device), device_string(tensor.device));
  owner->check(cu_->cuIpcGetMemHandle(&body.memory, facts.start), "cuIpcGetMemHandle");
  CUevent event = owner->ipc_event();
  owner->check(cu_->cuEventRecord(event, native_stream(stream)), "cuEventRecord (interprocess)");
  owner->check(cu_->cuIpcGetEventHandle(&body.event, event), "cuIpcGetEventHandle");
  body.exporter_ordinal = tensor.device.device_id;
  body.gpu = owner->uuid();
  body.dtype = tensor.dtype;
  body.ndim = tensor.ndim();
  body.offset = first - facts.start;
  body.allocation_bytes = facts.size;
  body.address = first;
  return write_ipc_handle(body, tensor.shape, tensor.strides, out, capacity);
}

DLManagedTensorVersioned* Backend::ipc_import(const unsigned char* handle, std::size_t size, Stream* stream) {
  const IpcHandleContents handle_read = read_ipc_handle(handle, size);  // no driver call before this passes
  const IpcHandleBody& body = handle_read.body;
  const Dims& shape = handle_read.shape;
  const Dims& strides = handle_read.strides;

  std::shared_ptr<Device> here;
  for (const auto& candidate : devices_)
    if (same_gpu(candidate->uuid(), body.gpu)) here = candidate;
  if (!here)
    fail(ABR_ERR_NO_DEVICE,
         "the IPC handle's memory is on a GPU this process does not see (cuda:{} in process {}; "
         "CUDA_VISIBLE_DEVICES may hide it here)",
         body.exporter_ordinal, body.exporter_pid);
  if (stream && stream->device().device_id != here->dl_device().device_id)
    fail(ABR_ERR_INVALID_ARGUMENT, "the stream belongs to {}, but the IPC handle's memory is on {}",
         device_string(stream->device()), device_string(here->dl_device()));
  Scope scope(*here);
  const ExportSpec spec{nullptr, here->dl_device(), body.dtype, shape, strides, 0, 0};
  PendingExport pending(spec);

  if (body.exporter_pid == static_cast<int32_t>(getpid())) {
    // CUDA opens no handle in its own process: the address is valid here as it is.
    const PointerFacts facts = pointer_facts(*here, static_cast<CUdeviceptr>(body.address));
    if (facts.type != CU_MEMORYTYPE_DEVICE || facts.start + body.offset != body.address)
      fail(ABR_ERR_INVALID_ARGUMENT, "the IPC handle names memory this process has freed since exporting it");
    here->check(cu_->cuCtxSynchronize(), "cuCtxSynchronize");  // the interprocess event cannot be opened here
    pending.set_data(reinterpret_cast<void*>(body.address));
    return pending.finish(std::unique_ptr<Storage>());
  }

  CUdeviceptr base = 0;
  const CUresult opened = cu_->cuIpcOpenMemHandle(&base, body.memory, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (opened != CUDA_SUCCESS && !exporter_alive(body))
    fail_backend(ABR_ERR_INVALID_ARGUMENT, opened,
                 "the process that exported this IPC handle (pid {}) has exited, "
                 "and its memory with it ({})",
                 body.exporter_pid, error_text(*cu_, opened));
  if (opened == CUDA_ERROR_INVALID_HANDLE || opened == CUDA_ERROR_MAP_FAILED)
    fail_backend(ABR_ERR_INVALID_ARGUMENT, opened,
                 "cannot open the IPC handle's memory ({}): process {} has freed "
                 "it since exporting it",
                 error_text(*cu_, opened), body.exporter_pid);
  here->check(opened, "cuIpcOpenMemHandle");
  auto mapping = std::make_unique<ReleasedAfterDeviceWork>(std::make_unique<IpcMapping>(here, base), reclaimer_);

  CUevent event = nullptr;
  const CUresult event_opened = cu_->cuIpcOpenEventHandle(&event, body.event);
  if (event_opened != CUDA_SUCCESS && !exporter_alive(body))
    fail_backend(ABR_ERR_INVALID_ARGUMENT, event_opened,
                 "the process that exported this IPC handle (pid {}) has "
                 "exited ({})",
                 body.exporter_pid, error_text(*cu_, event_opened));
  here->check(event_opened, "cuIpcOpenEventHandle");
  const CUresult waited =
      stream ? cu_->cuStreamWaitEvent(native_stream(stream), event, 0) : cu_->cuEventSynchronize(event);
  cu_->cuEventDestroy(event);  // a queued wait keeps what it needs
  here->check(waited, stream ? "cuStreamWaitEvent" : "cuEventSynchronize");
  pending.set_data(reinterpret_cast<void*>(base + body.offset));
  return pending.finish(std::move(mapping));
}

}  // namespace abr::cuda

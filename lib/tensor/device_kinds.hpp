// The device kinds libarraybridge serves: one row per DLPack device type, naming
// the backend that serves it and what its memory is. Everything in lib/ that
// depends on a device type asks this table (and the backend's Capabilities). The
// CPU's row is here; each backend's rows are in its descriptor
// (lib/tensor/backend_descriptor.hpp), and join the table when the backend is registered.
#pragma once

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "arraybridge/arraybridge.h"
#include "lib/tensor/backend_descriptor.hpp"

namespace abr {

struct DeviceKind {
  DLDeviceType type;
  std::string_view name;  // "cuda" (devices "cuda:0", "cuda:1") or one memory kind ("cuda_host")
  abr_backend backend;    // who serves it; ABR_BACKEND_HOST: plain host memory
  bool numbered;          // devices are told apart by id; otherwise the id is always 0
  bool host_memory;       // the host reads and writes it in place
  bool address;           // DLTensor::data is an address, not a backend handle (cl_mem)
  bool page_locked;       // page-locked by definition (cuda_host)
  bool new_tensors;       // abr_to_device can put a new tensor there
  // Which queue orders work on its devices, for a binding that must pick one:
  bool queued = false;          // abr_stream_create makes a queue there (else its work is synchronous)
  bool dlpack_streams = false;  // DLPack's stream= values are its native streams (a consumer names one)
  uint32_t default_stream = 0;  // with dlpack_streams: the value of its default stream (CUDA's legacy: 1)
};

//                                     type    name   backend           numbered host  address locked new
inline constexpr DeviceKind kCpuKind{kDLCPU, "cpu", ABR_BACKEND_HOST, false, true, true, false, true};

// The rows by device type (DLPack's types are small numbers). Every transfer asks
// several times, so the answer is one load, inlined: a call per question weighed on
// a zero-copy transfer. Filled when the library loads (the CPU and the
// built-in backends) and by register_backend; rows are never removed.
inline constexpr std::size_t kKindSlots = 32;
extern std::atomic<const DeviceKind*> g_kind_by_type[kKindSlots];

// The row for a device type; nullptr for one libarraybridge does not serve.
inline const DeviceKind* find_kind(DLDeviceType type) {
  const auto index = static_cast<uint32_t>(type);
  return index < kKindSlots ? g_kind_by_type[index].load(std::memory_order_acquire) : nullptr;
}

// Whether DLPack defines this device type (served here or not): validation refuses others.
inline bool is_dlpack_device_type(int32_t type) {
  switch (type) {
    case kDLCPU:
    case kDLCUDA:
    case kDLCUDAHost:
    case kDLOpenCL:
    case kDLVulkan:
    case kDLMetal:
    case kDLVPI:
    case kDLROCM:
    case kDLROCMHost:
    case kDLExtDev:
    case kDLCUDAManaged:
    case kDLOneAPI:
    case kDLWebGPU:
    case kDLHexagon:
    case kDLMAIA:
    case kDLTrn: return true;
    default: return false;
  }
}

// True when pointers into this device's memory may be offset and dereferenced on
// the host side of the arithmetic (CPU, CUDA, pinned, managed), false for opaque
// handles such as an OpenCL cl_mem.
inline bool is_direct_address(DLDeviceType type) {
  const DeviceKind* kind = find_kind(type);
  return kind && kind->address;
}

// True when the host can read and write the memory directly.
inline bool is_host_accessible(DLDeviceType type) {
  const DeviceKind* kind = find_kind(type);
  return kind && kind->host_memory;
}

// Makes a backend's kinds and name known to the whole process (a plug-in that
// is not built in: when a runtime first opens it). Registering the same
// descriptor again does nothing; a kind another backend serves, a type past the
// table or a second descriptor with the same id throws ABR_ERR_INVALID_ARGUMENT.
void register_backend(const BackendDescriptor& backend);
// Every known kind, the CPU first, then each backend's in the order registered.
std::vector<const DeviceKind*> known_kinds();
// The descriptor registered for an id; nullptr for the host and unknown ids.
const BackendDescriptor* find_backend_descriptor(abr_backend id);

// "host", "CUDA", "OpenCL": a backend's descriptor name, for messages.
const char* backend_name(abr_backend backend);

// "cpu", "cuda:1", "cuda_host", "opencl:0", or "dlpack_device_9:0" for a type without a row.
std::string device_string(DLDevice device);

// The same text in a fixed buffer, for the zero-copy path's report line, where a
// std::string's construction was a large share of the transfer.
struct DeviceText {
  char text[40];
  std::size_t size = 0;
  std::string_view view() const { return {text, size}; }
};
DeviceText device_text(DLDevice device);

// Whether device_string's text for a device is a name parse_device reads back to it
// (abr_device_format writes only those): a type and an id from 0 up, and only id 0
// for a kind that is one memory kind. Throws ABR_ERR_INVALID_ARGUMENT naming what
// is wrong. device_string itself names anything, for messages about bad tensors.
void check_nameable(DLDevice device);

// The inverse of device_string for the devices check_nameable accepts: "cuda" means
// "cuda:0", "dlpack_device_T:N" a type without a row by number; case and surrounding
// blanks are ignored. Throws ABR_ERR_INVALID_ARGUMENT naming what was wrong.
DLDevice parse_device(std::string_view text);

inline bool same_device(DLDevice a, DLDevice b) { return a.device_type == b.device_type && a.device_id == b.device_id; }

}  // namespace abr

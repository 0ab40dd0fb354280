// The device kinds libarraybridge serves: one row per DLPack device type, naming
// the backend that serves it and what its memory is. Everything in lib/ that
// depends on a device type asks this table (and the backend's Capabilities); a new
// backend is a folder plus rows here.
#pragma once

#include <iterator>
#include <string>
#include <string_view>

#include "arraybridge/arraybridge.h"

namespace abr {

struct DeviceKind {
  DLDeviceType type;
  std::string_view name;  // "cuda" (devices "cuda:0", "cuda:1") or one memory kind ("cuda_host")
  abr_backend backend;  // who serves it; ABR_BACKEND_HOST: plain host memory
  bool numbered;        // devices are told apart by id; otherwise the id is always 0
  bool host_memory;     // the host reads and writes it in place
  bool address;         // DLTensor::data is an address, not a backend handle (cl_mem)
  bool page_locked;     // page-locked by definition (cuda_host)
  bool new_tensors;     // abr_to_device can put a new tensor there
};

//                 type            name            backend             numbered host   address locked new
inline constexpr DeviceKind kKinds[] = {
    {kDLCPU,         "cpu",          ABR_BACKEND_HOST,   false,   true,  true,   false, true},
    {kDLCUDA,        "cuda",         ABR_BACKEND_CUDA,   true,    false, true,   false, true},
    {kDLCUDAHost,    "cuda_host",    ABR_BACKEND_CUDA,   false,   true,  true,   true,  true},
    {kDLCUDAManaged, "cuda_managed", ABR_BACKEND_CUDA,   false,   true,  true,   false, false},
    {kDLOpenCL,      "opencl",       ABR_BACKEND_OPENCL, true,    false, false,  false, true},
};

// The rows by device type (DLPack's types are small numbers). Every transfer asks a
// dozen times, so the answer is one load, inlined: a call per question was about a
// tenth of a zero-copy transfer.
struct KindsByType {
  const DeviceKind* row[32] = {};
  constexpr KindsByType() {
    for (const DeviceKind& kind : kKinds) row[kind.type] = &kind;
  }
};
inline constexpr KindsByType kKindsByType;

// The row for a device type; nullptr for one libarraybridge does not serve.
inline const DeviceKind* find_kind(DLDeviceType type) {
  const auto index = static_cast<uint32_t>(type);
  return index < std::size(kKindsByType.row) ? kKindsByType.row[index] : nullptr;
}

// "host", "CUDA", "OpenCL": for messages.
const char* backend_name(abr_backend backend);

// "cpu", "cuda:1", "cuda_host", "opencl:0", or "dlpack_device_9:0" for a type without a row.
std::string device_string(DLDevice device);

// The same text in a fixed buffer, for the zero-copy path's report line, where a
// std::string's construction was a tenth of the transfer.
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

inline bool same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

}  // namespace abr

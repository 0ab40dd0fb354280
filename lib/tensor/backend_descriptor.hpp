// What a backend folder exports to the rest of the library: one descriptor. The
// runtime opens the backends of its list (builtin_backends() unless a test gives
// its own); the device kinds, the backends' names in messages, the disable flags,
// arraybridge-info and the Python package's device kinds all come from these.
// A new backend is its folder, its descriptor and a line in lib/devices/builtin_backends.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "arraybridge/arraybridge.h"

namespace abr {

class DeviceBackend;
class PinnedPool;
struct DeviceKind;

// Never throws: without a driver a backend reports why and has no devices.
// Staged transfers take their host memory from `pool`.
using BackendFactory = std::unique_ptr<DeviceBackend> (*)(const abr_runtime_options& options,
                                                          std::shared_ptr<PinnedPool> pool);

struct BackendDescriptor {
  abr_backend id;
  const char* name;         // "CUDA": for messages
  const char* key;          // "cuda": arraybridge-info's and the Python package's name for it
  const DeviceKind* kinds;  // the device kinds it serves (its rows of the kind table)
  std::size_t kind_count;
  uint32_t disable_flag;          // the abr_runtime_options.flags bit that leaves it out; 0: none
  const char* disable_flag_name;  // "ABR_RUNTIME_DISABLE_CUDA"
  const char* disable_env;        // "ARRAYBRIDGE_DISABLE_CUDA": what the Python package reads
  BackendFactory make;            // nullptr: left out of this build
  const char* left_out_because;   // why, when make is nullptr
  bool ipc;                       // it has interprocess memory handles (abr_ipc_export/import)
};

// The backends built into this library, in the order their devices are listed.
const std::vector<const BackendDescriptor*>& builtin_backends();

}  // namespace abr

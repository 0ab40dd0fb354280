// The bytes of a CUDA IPC handle (abr_ipc_handle.data) and everything an importer
// checks before it asks the driver anything: the magic, a checksum, the format and
// the library that wrote it, the layout, and that the exporter still runs.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "arraybridge/arraybridge.h"
#include "lib/tensor/dims.hpp"

namespace abr::cuda {

// The format this library writes and reads. Format 1 (arraybridge 0.2.0 and
// before) had neither checksum nor start time.
constexpr uint8_t kIpcFormat = 2;

// The first bytes of every format from 2 on, kept as they are by later formats so
// that any reader can check the checksum and name the writer.
struct IpcPrefix {
  char magic[7];        // "abr-ipc"
  uint8_t format;       // kIpcFormat of the writer (format 1 had this byte too)
  uint16_t library[3];  // the writer's arraybridge version: major, minor, patch
  uint16_t reserved;    // 0
  uint64_t checksum;    // FNV-1a 64 over every byte of the handle but these 8
};

// The handle's fixed part; shape then strides (ndim each) follow it.
struct IpcHandleBody {
  IpcPrefix prefix;
  int32_t exporter_pid;
  int32_t exporter_ordinal;  // for messages: the GPU's number in the exporting process
  uint64_t exporter_start;   // the exporter's start time (lib/platform/process_identity.hpp): its pid may be reused
  CUipcMemHandle memory;     // the whole allocation holding the view
  CUipcEventHandle event;    // after the work queued before the export
  CUuuid gpu;
  DLDataType dtype;
  int32_t ndim;
  uint64_t offset;  // the first element's byte offset in the allocation
  uint64_t allocation_bytes;
  uint64_t address;  // the first element's address in the exporting process
};

// A handle that passed every check.
struct IpcHandleContents {
  IpcHandleBody body;
  Dims shape, strides;
};

// Writes `body` (the prefix filled in here, with this process's pid and start
// time), the shape and strides into `out` and seals it; returns its size.
uint32_t write_ipc_handle(IpcHandleBody body, const Dims& shape, const Dims& strides, unsigned char* out,
                          std::size_t capacity);

// Computes the checksum of `size` bytes of a handle and writes it into their
// prefix (nothing when they are shorter than one).
void seal_ipc_handle(unsigned char* bytes, std::size_t size);

// Every check of `size` bytes, in this order: an abr_ipc_export handle at all, the
// format, the checksum, a newer writer, the layout (the view inside its
// allocation), and an exporter that still runs. Throws ABR_ERR_INVALID_ARGUMENT
// naming what was wrong; calls no driver function.
IpcHandleContents read_ipc_handle(const unsigned char* bytes, std::size_t size);

// Whether the handle's exporter still runs: its pid is alive and started when the
// handle says (a reused pid belongs to another process).
bool exporter_alive(const IpcHandleBody& body);

}  // namespace abr::cuda

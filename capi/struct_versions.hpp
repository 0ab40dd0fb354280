// The versions of every struct of the C ABI, and each version's size. A new
// field adds a version: append its size, bump ABR_X_VERSION in the header.
#pragma once

#include <cstddef>

#include "arraybridge/arraybridge.h"
#include "capi/versioned.hpp"

namespace abr::capi {

// `name` is the struct's tag (abr_device_info is also a function's name, so the
// type is written `struct name`); then each version's size, oldest first, the last
// always sizeof(struct name): an earlier version ends where the field after it begins.
#define ABR_STRUCT_VERSIONS(constant, name, macro, ...)                                                      \
  inline constexpr std::size_t constant##_sizes[] = {__VA_ARGS__};                                           \
  static_assert(sizeof(constant##_sizes) / sizeof(std::size_t) == macro, #macro " and the sizes disagree");  \
  static_assert(constant##_sizes[macro - 1] == sizeof(struct name), "the last version is the whole struct"); \
  inline constexpr StructVersions constant{#name, #name "_init", #macro, constant##_sizes, macro};

ABR_STRUCT_VERSIONS(kRuntimeOptions, abr_runtime_options, ABR_RUNTIME_OPTIONS_VERSION,
                    sizeof(struct abr_runtime_options))
// Version 2 added `casting`.
ABR_STRUCT_VERSIONS(kTransferOptions, abr_transfer_options, ABR_TRANSFER_OPTIONS_VERSION,
                    offsetof(abr_transfer_options, casting), sizeof(struct abr_transfer_options))
ABR_STRUCT_VERSIONS(kTransferReport, abr_transfer_report, ABR_TRANSFER_REPORT_VERSION,
                    sizeof(struct abr_transfer_report))
ABR_STRUCT_VERSIONS(kPoolStats, abr_pool_stats, ABR_POOL_STATS_VERSION, sizeof(struct abr_pool_stats))
ABR_STRUCT_VERSIONS(kDeviceInfo, abr_device_info, ABR_DEVICE_INFO_VERSION, sizeof(struct abr_device_info))
ABR_STRUCT_VERSIONS(kBackendInfo, abr_backend_info, ABR_BACKEND_INFO_VERSION, sizeof(struct abr_backend_info))
ABR_STRUCT_VERSIONS(kIpcHandle, abr_ipc_handle, ABR_IPC_HANDLE_VERSION, sizeof(struct abr_ipc_handle))
ABR_STRUCT_VERSIONS(kDeviceKind, abr_device_kind, ABR_DEVICE_KIND_VERSION, sizeof(struct abr_device_kind))
// Version 2 added `paths`, version 3 `result_flags`.
ABR_STRUCT_VERSIONS(kBatchReport, abr_batch_report, ABR_BATCH_REPORT_VERSION, offsetof(abr_batch_report, paths),
                    offsetof(abr_batch_report, result_flags), sizeof(struct abr_batch_report))

#undef ABR_STRUCT_VERSIONS

}  // namespace abr::capi

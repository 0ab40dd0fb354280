// The versions of every struct of the C ABI, and each version's size. A new
// field adds a version: append its size, bump ABR_X_VERSION in the header.
#pragma once

#include <cstddef>

#include "arraybridge/arraybridge.h"
#include "capi/versioned.hpp"

namespace abr::capi {

// `name` is the struct's tag (abr_device_info is also a function's name, so the
// type is written `struct name`).
#define ABR_STRUCT_VERSIONS(constant, name, macro)                                                          \
  inline constexpr std::size_t constant##_sizes[] = {sizeof(struct name)};                                  \
  static_assert(sizeof(constant##_sizes) / sizeof(std::size_t) == macro, #macro " and the sizes disagree"); \
  inline constexpr StructVersions constant{#name, #name "_init", #macro, constant##_sizes, macro};

ABR_STRUCT_VERSIONS(kRuntimeOptions, abr_runtime_options, ABR_RUNTIME_OPTIONS_VERSION)
ABR_STRUCT_VERSIONS(kTransferOptions, abr_transfer_options, ABR_TRANSFER_OPTIONS_VERSION)
ABR_STRUCT_VERSIONS(kTransferReport, abr_transfer_report, ABR_TRANSFER_REPORT_VERSION)
ABR_STRUCT_VERSIONS(kPoolStats, abr_pool_stats, ABR_POOL_STATS_VERSION)
ABR_STRUCT_VERSIONS(kDeviceInfo, abr_device_info, ABR_DEVICE_INFO_VERSION)
ABR_STRUCT_VERSIONS(kBackendInfo, abr_backend_info, ABR_BACKEND_INFO_VERSION)
ABR_STRUCT_VERSIONS(kIpcHandle, abr_ipc_handle, ABR_IPC_HANDLE_VERSION)
ABR_STRUCT_VERSIONS(kDeviceKind, abr_device_kind, ABR_DEVICE_KIND_VERSION)

#undef ABR_STRUCT_VERSIONS

// Version 2 added `paths`. Written out: a macro over ABR_STRUCT_VERSIONS would expand
// the version macro's name before stringifying it (its messages would say "2u").
inline constexpr std::size_t kBatchReport_sizes[] = {offsetof(abr_batch_report, paths), sizeof(abr_batch_report)};
static_assert(sizeof(kBatchReport_sizes) / sizeof(std::size_t) == ABR_BATCH_REPORT_VERSION,
              "ABR_BATCH_REPORT_VERSION and the sizes disagree");
inline constexpr StructVersions kBatchReport{"abr_batch_report", "abr_batch_report_init", "ABR_BATCH_REPORT_VERSION",
                                             kBatchReport_sizes, ABR_BATCH_REPORT_VERSION};

}  // namespace abr::capi

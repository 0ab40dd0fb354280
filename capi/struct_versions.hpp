// The versions of every struct of the C ABI, and each version's size. A new
// field adds a version: append its size, bump ABR_X_VERSION in the header.
#pragma once

#include <cstddef>

#include "arraybridge/arraybridge.h"
#include "capi/versioned.hpp"

namespace abr::capi {

// `name` is the struct's tag (abr_device_info is also a function's name, so the
// type is written `struct name`). A struct of two versions says its first's size.
// (Not one macro calling the other: that would expand `macro` before naming it.)
#define ABR_STRUCT_VERSIONS(constant, name, macro)                                                          \
  inline constexpr std::size_t constant##_sizes[] = {sizeof(struct name)};                                  \
  static_assert(sizeof(constant##_sizes) / sizeof(std::size_t) == macro, #macro " and the sizes disagree"); \
  inline constexpr StructVersions constant{#name, #name "_init", #macro, constant##_sizes, macro};
#define ABR_STRUCT_TWO_VERSIONS(constant, name, macro, first_size)                                          \
  inline constexpr std::size_t constant##_sizes[] = {first_size, sizeof(struct name)};                      \
  static_assert(sizeof(constant##_sizes) / sizeof(std::size_t) == macro, #macro " and the sizes disagree"); \
  inline constexpr StructVersions constant{#name, #name "_init", #macro, constant##_sizes, macro};
#define ABR_STRUCT_THREE_VERSIONS(constant, name, macro, first_size, second_size)                           \
  inline constexpr std::size_t constant##_sizes[] = {first_size, second_size, sizeof(struct name)};         \
  static_assert(sizeof(constant##_sizes) / sizeof(std::size_t) == macro, #macro " and the sizes disagree"); \
  inline constexpr StructVersions constant{#name, #name "_init", #macro, constant##_sizes, macro};

ABR_STRUCT_VERSIONS(kRuntimeOptions, abr_runtime_options, ABR_RUNTIME_OPTIONS_VERSION)
// Version 2 added `casting`.
ABR_STRUCT_TWO_VERSIONS(kTransferOptions, abr_transfer_options, ABR_TRANSFER_OPTIONS_VERSION,
                        offsetof(abr_transfer_options, casting))
ABR_STRUCT_VERSIONS(kTransferReport, abr_transfer_report, ABR_TRANSFER_REPORT_VERSION)
ABR_STRUCT_VERSIONS(kPoolStats, abr_pool_stats, ABR_POOL_STATS_VERSION)
ABR_STRUCT_VERSIONS(kDeviceInfo, abr_device_info, ABR_DEVICE_INFO_VERSION)
ABR_STRUCT_VERSIONS(kBackendInfo, abr_backend_info, ABR_BACKEND_INFO_VERSION)
ABR_STRUCT_VERSIONS(kIpcHandle, abr_ipc_handle, ABR_IPC_HANDLE_VERSION)
ABR_STRUCT_VERSIONS(kDeviceKind, abr_device_kind, ABR_DEVICE_KIND_VERSION)
// Version 2 added `paths`, version 3 `result_flags`.
ABR_STRUCT_THREE_VERSIONS(kBatchReport, abr_batch_report, ABR_BATCH_REPORT_VERSION, offsetof(abr_batch_report, paths),
                          offsetof(abr_batch_report, result_flags))

#undef ABR_STRUCT_VERSIONS
#undef ABR_STRUCT_TWO_VERSIONS
#undef ABR_STRUCT_THREE_VERSIONS

}  // namespace abr::capi

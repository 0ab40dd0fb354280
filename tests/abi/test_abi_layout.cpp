// Compile-time checks that the DLPack declarations match the DLPack 1.3 layout
// (offsets from the specification, x86-64/aarch64 LP64) and that the public
// structs keep their size and field offsets. A change here is an ABI break.
#include <cstddef>

#include "tests/support/helpers.hpp"

static_assert(DLPACK_MAJOR_VERSION == 1, "DLPack 1.x");
static_assert(sizeof(DLPackVersion) == 8, "DLPackVersion");
static_assert(sizeof(DLDevice) == 8 && offsetof(DLDevice, device_id) == 4, "DLDevice");
static_assert(sizeof(DLDataType) == 4 && offsetof(DLDataType, bits) == 1 && offsetof(DLDataType, lanes) == 2,
              "DLDataType");
static_assert(sizeof(DLTensor) == 48, "DLTensor size");
static_assert(offsetof(DLTensor, data) == 0 && offsetof(DLTensor, device) == 8 && offsetof(DLTensor, ndim) == 16 &&
                  offsetof(DLTensor, dtype) == 20 && offsetof(DLTensor, shape) == 24 &&
                  offsetof(DLTensor, strides) == 32 && offsetof(DLTensor, byte_offset) == 40,
              "DLTensor fields");
static_assert(sizeof(DLManagedTensor) == 64 && offsetof(DLManagedTensor, manager_ctx) == 48 &&
                  offsetof(DLManagedTensor, deleter) == 56,
              "DLManagedTensor");
static_assert(sizeof(DLManagedTensorVersioned) == 80 && offsetof(DLManagedTensorVersioned, manager_ctx) == 8 &&
                  offsetof(DLManagedTensorVersioned, deleter) == 16 &&
                  offsetof(DLManagedTensorVersioned, flags) == 24 &&
                  offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
              "DLManagedTensorVersioned");
// The C exchange API's table: the stable header, then five function pointers in
// the specification's order.
static_assert(sizeof(DLPackExchangeAPIHeader) == 16 && offsetof(DLPackExchangeAPIHeader, prev_api) == 8,
              "DLPackExchangeAPIHeader");
static_assert(sizeof(DLPackExchangeAPI) == 56 && offsetof(DLPackExchangeAPI, managed_tensor_allocator) == 16 &&
                  offsetof(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync) == 24 &&
                  offsetof(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync) == 32 &&
                  offsetof(DLPackExchangeAPI, dltensor_from_py_object_no_sync) == 40 &&
                  offsetof(DLPackExchangeAPI, current_work_stream) == 48,
              "DLPackExchangeAPI");
static_assert(kDLOpenCL == 4 && kDLCUDAManaged == 13 && kDLTrn == 18 && kDLBool == 6 && kDLFloat4_e2m1fn == 17,
              "DLPack enum values");
static_assert(DLPACK_FLAG_BITMASK_READ_ONLY == 1 && DLPACK_FLAG_BITMASK_IS_COPIED == 2, "DLPack flags");

// The library's own public structs: each starts with the caller's version.
static_assert(offsetof(abr_runtime_options, version) == 0 && offsetof(abr_transfer_options, version) == 0 &&
                  offsetof(abr_transfer_report, version) == 0 && offsetof(struct abr_device_info, version) == 0 &&
                  offsetof(struct abr_backend_info, version) == 0 && offsetof(abr_pool_stats, version) == 0 &&
                  offsetof(abr_ipc_handle, version) == 0 && offsetof(abr_device_kind, version) == 0 &&
                  offsetof(abr_batch_report, version) == 0,
              "version first");
static_assert(sizeof(abr_device_kind) == 152 && offsetof(abr_device_kind, type) == 4 &&
                  offsetof(abr_device_kind, backend) == 8 && offsetof(abr_device_kind, flags) == 12 &&
                  offsetof(abr_device_kind, disable_flag) == 16 && offsetof(abr_device_kind, name) == 24 &&
                  offsetof(abr_device_kind, backend_name) == 56 && offsetof(abr_device_kind, disable_env) == 88,
              "abr_device_kind");
static_assert(sizeof(abr_batch_report) == 208 && offsetof(abr_batch_report, tensors) == 4 &&
                  offsetof(abr_batch_report, copies) == 16 && offsetof(abr_batch_report, bytes_moved) == 24 &&
                  offsetof(abr_batch_report, detail) == 32 && offsetof(abr_batch_report, paths) == 192 &&
                  offsetof(abr_batch_report, result_flags) == 200,
              "abr_batch_report");
static_assert(sizeof(abr_ipc_handle) == 1536 && offsetof(abr_ipc_handle, size) == 4 &&
                  offsetof(abr_ipc_handle, data) == 8,
              "abr_ipc_handle");
static_assert(sizeof(abr_runtime_options) == 8, "abr_runtime_options");
static_assert(sizeof(abr_transfer_options) == 32 && offsetof(abr_transfer_options, copy) == 4 &&
                  offsetof(abr_transfer_options, flags) == 8 && offsetof(abr_transfer_options, dtype) == 12 &&
                  offsetof(abr_transfer_options, report) == 16 && offsetof(abr_transfer_options, casting) == 24,
              "abr_transfer_options");
static_assert(sizeof(abr_transfer_report) == 184 && offsetof(abr_transfer_report, path) == 4 &&
                  offsetof(abr_transfer_report, bytes_moved) == 16 && offsetof(abr_transfer_report, detail) == 24,
              "abr_transfer_report");
static_assert(sizeof(struct abr_device_info) == 288 && offsetof(struct abr_device_info, backend) == 4 &&
                  offsetof(struct abr_device_info, device) == 8 && offsetof(struct abr_device_info, flags) == 16 &&
                  offsetof(struct abr_device_info, memory_bytes) == 24 &&
                  offsetof(struct abr_device_info, name) == 32 && offsetof(struct abr_device_info, platform) == 160,
              "abr_device_info");
static_assert(sizeof(struct abr_backend_info) == 272 && offsetof(struct abr_backend_info, backend) == 4 &&
                  offsetof(struct abr_backend_info, available) == 8 && offsetof(struct abr_backend_info, detail) == 16,
              "abr_backend_info");
static_assert(sizeof(abr_pool_stats) == 80 && offsetof(abr_pool_stats, bytes_pinned) == 8 &&
                  offsetof(abr_pool_stats, limit_bytes) == 48 && offsetof(abr_pool_stats, misses) == 72,
              "abr_pool_stats");
static_assert(sizeof(abr_status) == 4 && sizeof(abr_copy_mode) == 4 && sizeof(abr_path) == 4 &&
                  sizeof(abr_backend) == 4 && sizeof(abr_log_level) == 4 && sizeof(abr_casting) == 4,
              "enums are 32-bit");

TEST_CASE("ABI layout is pinned at compile time") { CHECK(sizeof(DLManagedTensorVersioned) == 80); }

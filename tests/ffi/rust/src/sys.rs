//! The C ABI of include/arraybridge/arraybridge.h and dlpack.h, declared by hand:
//! what an `arraybridge-sys` crate would hold. Layouts are checked against the C
//! sizes and offsets in `tests/layout.rs`; names follow the header exactly.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

// ---------------------------------------------------------------- DLPack 1.x

pub const DLPACK_MAJOR_VERSION: u32 = 1;
pub const DLPACK_MINOR_VERSION: u32 = 3;
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

pub const kDLCPU: i32 = 1;
pub const kDLCUDA: i32 = 2;
pub const kDLCUDAHost: i32 = 3;
pub const kDLOpenCL: i32 = 4;

pub const kDLInt: u8 = 0;
pub const kDLUInt: u8 = 1;
pub const kDLFloat: u8 = 2;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

// ---------------------------------------------------------------- libarraybridge

pub type abr_status = i32;
pub const ABR_OK: abr_status = 0;
pub const ABR_ERR_INVALID_ARGUMENT: abr_status = -1;
pub const ABR_ERR_UNSUPPORTED: abr_status = -2;
pub const ABR_ERR_OUT_OF_MEMORY: abr_status = -40;
pub const ABR_ERR_NO_DEVICE: abr_status = -60;
pub const ABR_ERR_COPY_REQUIRED: abr_status = -80;
pub const ABR_ERR_DLPACK_NDIM: abr_status = -91;

pub type abr_copy_mode = i32;
pub const ABR_COPY_IF_NEEDED: abr_copy_mode = 0;
pub const ABR_COPY_ALWAYS: abr_copy_mode = 1;
pub const ABR_COPY_NEVER: abr_copy_mode = 2;

pub type abr_path = i32;
pub const ABR_PATH_ZERO_COPY: abr_path = 1;
pub const ABR_PATH_HOST_COPY: abr_path = 2;
pub const ABR_PATH_HOST_TO_DEVICE: abr_path = 4;
pub const ABR_PATH_DEVICE_TO_HOST: abr_path = 5;
pub const ABR_PATH_HOST_WRAP: abr_path = 8;

pub type abr_backend = i32;
pub const ABR_BACKEND_HOST: abr_backend = 1;
pub const ABR_BACKEND_CUDA: abr_backend = 2;
pub const ABR_BACKEND_OPENCL: abr_backend = 3;

pub const ABR_DEVICE_SHARES_HOST_MEMORY: u32 = 1 << 0;
pub const ABR_TRANSFER_OPTIONS_VERSION: u32 = 1;
pub const ABR_POOL_STATS_VERSION: u32 = 1;
pub const ABR_RUNTIME_OPTIONS_VERSION: u32 = 1;
pub const ABR_TRANSFER_REPORT_VERSION: u32 = 1;
pub const ABR_DEVICE_INFO_VERSION: u32 = 1;
pub const ABR_BACKEND_INFO_VERSION: u32 = 1;

#[repr(C)]
pub struct abr_runtime {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct abr_stream {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct abr_runtime_options {
    pub version: u32,
    pub flags: u32,
}

#[repr(C)]
pub struct abr_device_info {
    pub version: u32,
    pub backend: abr_backend,
    pub device: DLDevice,
    pub flags: u32,
    pub reserved_: u32,
    pub memory_bytes: u64,
    pub name: [c_char; 128],
    pub platform: [c_char; 128],
}

#[repr(C)]
pub struct abr_backend_info {
    pub version: u32,
    pub backend: abr_backend,
    pub available: i32,
    pub device_count: i32,
    pub detail: [c_char; 256],
}

#[repr(C)]
pub struct abr_transfer_report {
    pub version: u32,
    pub path: abr_path,
    pub flags: u32,
    pub reserved_: u32,
    pub bytes_moved: u64,
    pub detail: [c_char; 160],
}

#[repr(C)]
pub struct abr_transfer_options {
    pub version: u32,
    pub copy: abr_copy_mode,
    pub flags: u32,
    pub dtype: DLDataType,
    pub report: *mut abr_transfer_report,
}

#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct abr_pool_stats {
    pub version: u32,
    pub reserved_: u32,
    pub bytes_pinned: u64,
    pub bytes_in_use: u64,
    pub bytes_cached: u64,
    pub bytes_waiting: u64,
    pub peak_bytes_pinned: u64,
    pub limit_bytes: u64,
    pub blocks_pinned: u64,
    pub hits: u64,
    pub misses: u64,
}

extern "C" {
    pub fn abr_version_number() -> u32;
    pub fn abr_version_string() -> *const c_char;
    pub fn abr_status_string(status: abr_status) -> *const c_char;
    pub fn abr_last_error() -> *const c_char;
    pub fn abr_runtime_create(options: *const abr_runtime_options, out: *mut *mut abr_runtime) -> abr_status;
    pub fn abr_runtime_destroy(runtime: *mut abr_runtime);
    pub fn abr_device_count(runtime: *mut abr_runtime, count: *mut i32) -> abr_status;
    pub fn abr_device_info(runtime: *mut abr_runtime, index: i32, info: *mut abr_device_info) -> abr_status;
    pub fn abr_backend_info(runtime: *mut abr_runtime, backend: abr_backend, info: *mut abr_backend_info)
        -> abr_status;
    pub fn abr_last_error_backend_code() -> i64;
    pub fn abr_transfer_options_init(options: *mut abr_transfer_options, version: u32) -> abr_status;
    pub fn abr_transfer_report_init(report: *mut abr_transfer_report, version: u32) -> abr_status;
    pub fn abr_path_string(path: abr_path) -> *const c_char;
    pub fn abr_to_device(
        runtime: *mut abr_runtime,
        src: *mut DLManagedTensorVersioned,
        dst: DLDevice,
        options: *const abr_transfer_options,
        stream: *mut abr_stream,
        out: *mut *mut DLManagedTensorVersioned,
    ) -> abr_status;
    pub fn abr_copy(
        runtime: *mut abr_runtime,
        src: *const DLTensor,
        dst: *const DLTensor,
        options: *const abr_transfer_options,
        stream: *mut abr_stream,
    ) -> abr_status;
    pub fn abr_pool_get_stats(runtime: *mut abr_runtime, stats: *mut abr_pool_stats) -> abr_status;
}

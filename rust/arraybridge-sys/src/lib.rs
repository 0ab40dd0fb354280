//! Raw declarations of libarraybridge's C ABI (`include/arraybridge/arraybridge.h`)
//! and of the DLPack 1.x types it uses (`include/arraybridge/dlpack.h`), written by
//! hand. Names follow the headers exactly; every function in `capi/exports.txt` is
//! declared. Layouts are checked against the C sizes and offsets by the
//! `arraybridge` crate's `tests/layout.rs`, and the list of functions against
//! `capi/exports.txt` by its `tests/abi_coverage.rs`.
//!
//! C enums are declared as `i32` type aliases with constants (a Rust enum would be
//! undefined behaviour for a value the library adds later). Each `ABR_X_INIT`
//! macro is a constant of the same name, also returned by the struct's `Default`.
//!
//! Everything here is `unsafe` to call; the `arraybridge` crate is the safe layer.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]
#![no_std]

use core::ffi::{c_char, c_int, c_uint, c_void};

/// The directory of the libarraybridge this crate was linked against.
pub const LIB_DIR: &str = env!("ARRAYBRIDGE_SYS_LIB_DIR");

// ======================================================================== DLPack 1.x

pub const DLPACK_MAJOR_VERSION: u32 = 1;
pub const DLPACK_MINOR_VERSION: u32 = 3;

pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// Version of a managed tensor's layout. A different major means a different layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

/// `DLDeviceType` (a C enum of `int32_t` size).
pub type DLDeviceType = i32;
pub const kDLCPU: DLDeviceType = 1;
pub const kDLCUDA: DLDeviceType = 2;
pub const kDLCUDAHost: DLDeviceType = 3;
pub const kDLOpenCL: DLDeviceType = 4;
pub const kDLVulkan: DLDeviceType = 7;
pub const kDLMetal: DLDeviceType = 8;
pub const kDLVPI: DLDeviceType = 9;
pub const kDLROCM: DLDeviceType = 10;
pub const kDLROCMHost: DLDeviceType = 11;
pub const kDLExtDev: DLDeviceType = 12;
pub const kDLCUDAManaged: DLDeviceType = 13;
pub const kDLOneAPI: DLDeviceType = 14;
pub const kDLWebGPU: DLDeviceType = 15;
pub const kDLHexagon: DLDeviceType = 16;
pub const kDLMAIA: DLDeviceType = 17;
pub const kDLTrn: DLDeviceType = 18;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DLDevice {
    pub device_type: DLDeviceType,
    pub device_id: i32,
}

/// `DLDataTypeCode`: the values `DLDataType::code` takes.
pub type DLDataTypeCode = u8;
pub const kDLInt: DLDataTypeCode = 0;
pub const kDLUInt: DLDataTypeCode = 1;
pub const kDLFloat: DLDataTypeCode = 2;
pub const kDLOpaqueHandle: DLDataTypeCode = 3;
pub const kDLBfloat: DLDataTypeCode = 4;
pub const kDLComplex: DLDataTypeCode = 5;
pub const kDLBool: DLDataTypeCode = 6;
pub const kDLFloat8_e3m4: DLDataTypeCode = 7;
pub const kDLFloat8_e4m3: DLDataTypeCode = 8;
pub const kDLFloat8_e4m3b11fnuz: DLDataTypeCode = 9;
pub const kDLFloat8_e4m3fn: DLDataTypeCode = 10;
pub const kDLFloat8_e4m3fnuz: DLDataTypeCode = 11;
pub const kDLFloat8_e5m2: DLDataTypeCode = 12;
pub const kDLFloat8_e5m2fnuz: DLDataTypeCode = 13;
pub const kDLFloat8_e8m0fnu: DLDataTypeCode = 14;
pub const kDLFloat6_e2m3fn: DLDataTypeCode = 15;
pub const kDLFloat6_e3m2fn: DLDataTypeCode = 16;
pub const kDLFloat4_e2m1fn: DLDataTypeCode = 17;

/// `code` is a `DLDataTypeCode`; bits per lane; lanes per element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// A plain tensor view. Strides count elements; NULL strides means compact row-major.
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

/// Legacy (pre-1.0) managed tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensor)>,
}

/// Versioned managed tensor (DLPack >= 1.0).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

// The C exchange API (DLPack 1.3): declared for completeness; libarraybridge's C
// ABI does not take or return it.
pub type DLPackManagedTensorAllocator = Option<
    unsafe extern "C" fn(
        prototype: *mut DLTensor,
        out: *mut *mut DLManagedTensorVersioned,
        error_ctx: *mut c_void,
        SetError: Option<unsafe extern "C" fn(error_ctx: *mut c_void, kind: *const c_char, message: *const c_char)>,
    ) -> c_int,
>;
pub type DLPackManagedTensorFromPyObjectNoSync =
    Option<unsafe extern "C" fn(py_object: *mut c_void, out: *mut *mut DLManagedTensorVersioned) -> c_int>;
pub type DLPackDLTensorFromPyObjectNoSync = Option<unsafe extern "C" fn(py_object: *mut c_void, out: *mut DLTensor) -> c_int>;
pub type DLPackCurrentWorkStream = Option<
    unsafe extern "C" fn(device_type: DLDeviceType, device_id: i32, out_current_stream: *mut *mut c_void) -> c_int,
>;
pub type DLPackManagedTensorToPyObjectNoSync =
    Option<unsafe extern "C" fn(tensor: *mut DLManagedTensorVersioned, out_py_object: *mut *mut c_void) -> c_int>;

#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPIHeader {
    pub version: DLPackVersion,
    pub prev_api: *mut DLPackExchangeAPIHeader,
}

#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPI {
    pub header: DLPackExchangeAPIHeader,
    pub managed_tensor_allocator: DLPackManagedTensorAllocator,
    pub managed_tensor_from_py_object_no_sync: DLPackManagedTensorFromPyObjectNoSync,
    pub managed_tensor_to_py_object_no_sync: DLPackManagedTensorToPyObjectNoSync,
    pub dltensor_from_py_object_no_sync: DLPackDLTensorFromPyObjectNoSync,
    pub current_work_stream: DLPackCurrentWorkStream,
}

// ======================================================================== version

pub const ABR_VERSION_MAJOR: u32 = 0;
pub const ABR_VERSION_MINOR: u32 = 2;
pub const ABR_VERSION_PATCH: u32 = 0;
/// MAJOR*10000 + MINOR*100 + PATCH, the value `abr_version_number()` returns.
pub const ABR_VERSION_NUMBER: u32 = ABR_VERSION_MAJOR * 10000 + ABR_VERSION_MINOR * 100 + ABR_VERSION_PATCH;

// ======================================================================== status

pub type abr_status = i32;
pub const ABR_OK: abr_status = 0;
pub const ABR_NOT_READY: abr_status = 1;
pub const ABR_ERR_INVALID_ARGUMENT: abr_status = -1;
pub const ABR_ERR_UNSUPPORTED: abr_status = -2;
pub const ABR_ERR_INTERNAL: abr_status = -3;
pub const ABR_ERR_OUT_OF_MEMORY: abr_status = -40;
pub const ABR_ERR_NO_DEVICE: abr_status = -60;
pub const ABR_ERR_DEVICE_LOST: abr_status = -61;
pub const ABR_ERR_BACKEND: abr_status = -62;
pub const ABR_ERR_BACKEND_UNAVAILABLE: abr_status = -63;
pub const ABR_ERR_COPY_REQUIRED: abr_status = -80;
pub const ABR_ERR_READ_ONLY: abr_status = -81;
pub const ABR_ERR_SHAPE_MISMATCH: abr_status = -82;
pub const ABR_ERR_CASTING: abr_status = -83;
pub const ABR_ERR_DLPACK_VERSION: abr_status = -90;
pub const ABR_ERR_DLPACK_NDIM: abr_status = -91;
pub const ABR_ERR_DLPACK_SHAPE: abr_status = -92;
pub const ABR_ERR_DLPACK_STRIDES: abr_status = -93;
pub const ABR_ERR_DLPACK_OVERFLOW: abr_status = -94;
pub const ABR_ERR_DLPACK_DATA: abr_status = -95;
pub const ABR_ERR_DLPACK_DTYPE: abr_status = -96;
pub const ABR_ERR_DLPACK_DEVICE: abr_status = -97;
pub const ABR_ERR_DLPACK_FLAGS: abr_status = -98;

/// Largest ndim accepted (NumPy's limit).
pub const ABR_MAX_NDIM: i32 = 64;

// ======================================================================== logging

pub type abr_log_level = i32;
pub const ABR_LOG_TRACE: abr_log_level = 0;
pub const ABR_LOG_DEBUG: abr_log_level = 1;
pub const ABR_LOG_INFO: abr_log_level = 2;
pub const ABR_LOG_WARN: abr_log_level = 3;
pub const ABR_LOG_ERROR: abr_log_level = 4;
pub const ABR_LOG_OFF: abr_log_level = 6;
pub const ABR_LOG_LEVEL_MAX_ENUM: abr_log_level = 0x7FFF_FFFF;

/// Called for each log record at or above the level, from any thread; must not unwind.
pub type abr_log_callback =
    Option<unsafe extern "C" fn(level: abr_log_level, message: *const c_char, user_data: *mut c_void)>;

// ======================================================================== runtime

#[repr(C)]
pub struct abr_runtime {
    _opaque: [u8; 0],
    _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

#[repr(C)]
pub struct abr_stream {
    _opaque: [u8; 0],
    _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

#[repr(C)]
pub struct abr_event {
    _opaque: [u8; 0],
    _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

pub const ABR_RUNTIME_OPTIONS_VERSION: u32 = 1;
pub const ABR_RUNTIME_DISABLE_CUDA: u32 = 1 << 0;
pub const ABR_RUNTIME_DISABLE_OPENCL: u32 = 1 << 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct abr_runtime_options {
    pub version: u32,
    pub flags: u32,
}
pub const ABR_RUNTIME_OPTIONS_INIT: abr_runtime_options =
    abr_runtime_options { version: ABR_RUNTIME_OPTIONS_VERSION, flags: 0 };

// ======================================================================== devices

pub type abr_backend = i32;
pub const ABR_BACKEND_HOST: abr_backend = 1;
pub const ABR_BACKEND_CUDA: abr_backend = 2;
pub const ABR_BACKEND_OPENCL: abr_backend = 3;
pub const ABR_BACKEND_MAX_ENUM: abr_backend = 0x7FFF_FFFF;

pub const ABR_DEVICE_SHARES_HOST_MEMORY: u32 = 1 << 0;
pub const ABR_DEVICE_LOST_FLAG: u32 = 1 << 1;
pub const ABR_DEVICE_NO_DOUBLE_PRECISION: u32 = 1 << 2;

pub const ABR_DEVICE_INFO_VERSION: u32 = 1;
pub const ABR_BACKEND_INFO_VERSION: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
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
pub const ABR_DEVICE_INFO_INIT: abr_device_info = abr_device_info {
    version: ABR_DEVICE_INFO_VERSION,
    backend: 0,
    device: DLDevice { device_type: 0, device_id: 0 },
    flags: 0,
    reserved_: 0,
    memory_bytes: 0,
    name: [0; 128],
    platform: [0; 128],
};

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct abr_backend_info {
    pub version: u32,
    pub backend: abr_backend,
    pub available: i32,
    pub device_count: i32,
    pub detail: [c_char; 256],
}
pub const ABR_BACKEND_INFO_INIT: abr_backend_info =
    abr_backend_info { version: ABR_BACKEND_INFO_VERSION, backend: 0, available: 0, device_count: 0, detail: [0; 256] };

// ======================================================================== transfers

pub type abr_copy_mode = i32;
pub const ABR_COPY_IF_NEEDED: abr_copy_mode = 0;
pub const ABR_COPY_ALWAYS: abr_copy_mode = 1;
pub const ABR_COPY_NEVER: abr_copy_mode = 2;
pub const ABR_COPY_MODE_MAX_ENUM: abr_copy_mode = 0x7FFF_FFFF;

pub type abr_casting = i32;
pub const ABR_CASTING_DEFAULT: abr_casting = 0;
pub const ABR_CASTING_NO: abr_casting = 1;
pub const ABR_CASTING_SAFE: abr_casting = 2;
pub const ABR_CASTING_SAME_KIND: abr_casting = 3;
pub const ABR_CASTING_UNSAFE: abr_casting = 4;
pub const ABR_CASTING_MAX_ENUM: abr_casting = 0x7FFF_FFFF;

pub const ABR_TRANSFER_NO_HOST_STAGING: u32 = 1 << 0;
pub const ABR_TRANSFER_REQUIRE_CONTIGUOUS: u32 = 1 << 1;
pub const ABR_TRANSFER_NO_NEGATIVE_STRIDES: u32 = 1 << 2;

pub type abr_path = i32;
pub const ABR_PATH_NONE: abr_path = 0;
pub const ABR_PATH_ZERO_COPY: abr_path = 1;
pub const ABR_PATH_HOST_COPY: abr_path = 2;
pub const ABR_PATH_DEVICE_COPY: abr_path = 3;
pub const ABR_PATH_HOST_TO_DEVICE: abr_path = 4;
pub const ABR_PATH_DEVICE_TO_HOST: abr_path = 5;
pub const ABR_PATH_STAGED: abr_path = 6;
pub const ABR_PATH_PEER: abr_path = 7;
pub const ABR_PATH_HOST_WRAP: abr_path = 8;
pub const ABR_PATH_MAX_ENUM: abr_path = 0x7FFF_FFFF;

pub const ABR_REPORT_PACKED: u32 = 1 << 0;
pub const ABR_REPORT_CAST: u32 = 1 << 1;

pub const ABR_TRANSFER_REPORT_VERSION: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct abr_transfer_report {
    pub version: u32,
    pub path: abr_path,
    pub flags: u32,
    pub reserved_: u32,
    pub bytes_moved: u64,
    pub detail: [c_char; 160],
}
pub const ABR_TRANSFER_REPORT_INIT: abr_transfer_report = abr_transfer_report {
    version: ABR_TRANSFER_REPORT_VERSION,
    path: ABR_PATH_NONE,
    flags: 0,
    reserved_: 0,
    bytes_moved: 0,
    detail: [0; 160],
};

pub const ABR_TRANSFER_OPTIONS_VERSION: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct abr_transfer_options {
    pub version: u32,
    pub copy: abr_copy_mode,
    pub flags: u32,
    pub dtype: DLDataType,
    pub report: *mut abr_transfer_report,
    /// Version 2.
    pub casting: abr_casting,
}
pub const ABR_TRANSFER_OPTIONS_INIT: abr_transfer_options = abr_transfer_options {
    version: ABR_TRANSFER_OPTIONS_VERSION,
    copy: ABR_COPY_IF_NEEDED,
    flags: 0,
    dtype: DLDataType { code: 0, bits: 0, lanes: 0 },
    report: core::ptr::null_mut(),
    casting: ABR_CASTING_DEFAULT,
};

/// Longest device or dtype name, NUL included.
pub const ABR_NAME_MAX: usize = 64;

pub const ABR_DEVICE_KIND_VERSION: u32 = 1;
pub const ABR_KIND_NUMBERED: u32 = 1 << 0;
pub const ABR_KIND_HOST_MEMORY: u32 = 1 << 1;
pub const ABR_KIND_NEW_TENSORS: u32 = 1 << 2;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct abr_device_kind {
    pub version: u32,
    pub r#type: DLDeviceType,
    pub backend: abr_backend,
    pub flags: u32,
    pub disable_flag: u32,
    pub reserved_: u32,
    pub name: [c_char; 32],
    pub backend_name: [c_char; 32],
    pub disable_env: [c_char; 64],
}
pub const ABR_DEVICE_KIND_INIT: abr_device_kind = abr_device_kind {
    version: ABR_DEVICE_KIND_VERSION,
    r#type: 0,
    backend: 0,
    flags: 0,
    disable_flag: 0,
    reserved_: 0,
    name: [0; 32],
    backend_name: [0; 32],
    disable_env: [0; 64],
};

pub const ABR_BATCH_REPORT_VERSION: u32 = 3;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct abr_batch_report {
    pub version: u32,
    pub tensors: u32,
    pub coalesced: u32,
    pub views: u32,
    pub copies: u32,
    pub reserved_: u32,
    pub bytes_moved: u64,
    pub detail: [c_char; 160],
    /// Version 2: null, or one entry per source (pair) that a successful call fills.
    pub paths: *mut abr_path,
    /// Version 3: null, or one entry per source (pair), filled as `paths` is with
    /// `ABR_REPORT_PACKED` / `ABR_REPORT_CAST`.
    pub result_flags: *mut u32,
}
pub const ABR_BATCH_REPORT_INIT: abr_batch_report = abr_batch_report {
    version: ABR_BATCH_REPORT_VERSION,
    tensors: 0,
    coalesced: 0,
    views: 0,
    copies: 0,
    reserved_: 0,
    bytes_moved: 0,
    detail: [0; 160],
    paths: core::ptr::null_mut(),
    result_flags: core::ptr::null_mut(),
};

// ======================================================================== pinned pool

pub const ABR_POOL_STATS_VERSION: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
pub const ABR_POOL_STATS_INIT: abr_pool_stats = abr_pool_stats {
    version: ABR_POOL_STATS_VERSION,
    reserved_: 0,
    bytes_pinned: 0,
    bytes_in_use: 0,
    bytes_cached: 0,
    bytes_waiting: 0,
    peak_bytes_pinned: 0,
    limit_bytes: 0,
    blocks_pinned: 0,
    hits: 0,
    misses: 0,
};

// ======================================================================== CUDA IPC

pub const ABR_IPC_HANDLE_VERSION: u32 = 1;
pub const ABR_IPC_HANDLE_BYTES: usize = 1528;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct abr_ipc_handle {
    pub version: u32,
    pub size: u32,
    pub data: [u8; ABR_IPC_HANDLE_BYTES],
}
pub const ABR_IPC_HANDLE_INIT: abr_ipc_handle =
    abr_ipc_handle { version: ABR_IPC_HANDLE_VERSION, size: 0, data: [0; ABR_IPC_HANDLE_BYTES] };

impl core::fmt::Debug for abr_ipc_handle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("abr_ipc_handle").field("version", &self.version).field("size", &self.size).finish_non_exhaustive()
    }
}

// The *_INIT values are also each struct's Default.
macro_rules! default_is_init {
    ($($t:ty = $init:expr;)*) => {
        $(impl Default for $t {
            fn default() -> Self {
                $init
            }
        })*
    };
}
default_is_init! {
    abr_runtime_options = ABR_RUNTIME_OPTIONS_INIT;
    abr_device_info = ABR_DEVICE_INFO_INIT;
    abr_backend_info = ABR_BACKEND_INFO_INIT;
    abr_transfer_report = ABR_TRANSFER_REPORT_INIT;
    abr_transfer_options = ABR_TRANSFER_OPTIONS_INIT;
    abr_device_kind = ABR_DEVICE_KIND_INIT;
    abr_batch_report = ABR_BATCH_REPORT_INIT;
    abr_pool_stats = ABR_POOL_STATS_INIT;
    abr_ipc_handle = ABR_IPC_HANDLE_INIT;
}

// ======================================================================== functions

extern "C" {
    // version
    pub fn abr_version_number() -> u32;
    pub fn abr_version_string() -> *const c_char;

    // status and errors
    pub fn abr_status_string(status: abr_status) -> *const c_char;
    pub fn abr_last_error() -> *const c_char;
    pub fn abr_last_error_status() -> abr_status;
    pub fn abr_last_error_backend_code() -> i64;
    pub fn abr_clear_error();

    // logging
    pub fn abr_log_set_level(level: abr_log_level) -> abr_status;
    pub fn abr_log_get_level() -> abr_log_level;
    pub fn abr_log_set_callback(callback: abr_log_callback, user_data: *mut c_void) -> abr_status;

    // runtime
    pub fn abr_runtime_options_init(options: *mut abr_runtime_options, version: c_uint) -> abr_status;
    pub fn abr_runtime_create(options: *const abr_runtime_options, out: *mut *mut abr_runtime) -> abr_status;
    pub fn abr_runtime_destroy(runtime: *mut abr_runtime);

    // devices
    pub fn abr_device_count(runtime: *mut abr_runtime, count: *mut i32) -> abr_status;
    pub fn abr_device_info(runtime: *mut abr_runtime, index: i32, info: *mut abr_device_info) -> abr_status;
    pub fn abr_backend_info(runtime: *mut abr_runtime, backend: abr_backend, info: *mut abr_backend_info) -> abr_status;
    pub fn abr_device_info_init(info: *mut abr_device_info, version: c_uint) -> abr_status;
    pub fn abr_backend_info_init(info: *mut abr_backend_info, version: c_uint) -> abr_status;

    // transfer options, reports, names
    pub fn abr_transfer_options_init(options: *mut abr_transfer_options, version: c_uint) -> abr_status;
    pub fn abr_transfer_report_init(report: *mut abr_transfer_report, version: c_uint) -> abr_status;
    pub fn abr_path_string(path: abr_path) -> *const c_char;
    pub fn abr_device_parse(text: *const c_char, out: *mut DLDevice) -> abr_status;
    pub fn abr_device_format(device: DLDevice, out: *mut c_char, size: usize) -> abr_status;
    pub fn abr_dtype_parse(text: *const c_char, out: *mut DLDataType) -> abr_status;
    pub fn abr_dtype_format(dtype: DLDataType, out: *mut c_char, size: usize) -> abr_status;

    // device kinds
    pub fn abr_device_kind_init(kind: *mut abr_device_kind, version: c_uint) -> abr_status;
    pub fn abr_device_kind_count(count: *mut i32) -> abr_status;
    pub fn abr_device_kind_get(index: i32, kind: *mut abr_device_kind) -> abr_status;

    // transfers
    pub fn abr_to_device(
        runtime: *mut abr_runtime,
        src: *mut DLManagedTensorVersioned,
        dst: DLDevice,
        options: *const abr_transfer_options,
        stream: *mut abr_stream,
        out: *mut *mut DLManagedTensorVersioned,
    ) -> abr_status;
    pub fn abr_to_device_legacy(
        runtime: *mut abr_runtime,
        src: *mut DLManagedTensor,
        dst: DLDevice,
        options: *const abr_transfer_options,
        stream: *mut abr_stream,
        out: *mut *mut DLManagedTensorVersioned,
    ) -> abr_status;
    pub fn abr_batch_report_init(report: *mut abr_batch_report, version: c_uint) -> abr_status;
    pub fn abr_to_device_many(
        runtime: *mut abr_runtime,
        srcs: *const *mut DLManagedTensorVersioned,
        count: usize,
        dst: DLDevice,
        options: *const abr_transfer_options,
        stream: *mut abr_stream,
        out: *mut *mut DLManagedTensorVersioned,
        report: *mut abr_batch_report,
    ) -> abr_status;
    pub fn abr_copy_many(
        runtime: *mut abr_runtime,
        srcs: *const *const DLTensor,
        dsts: *const *const DLTensor,
        count: usize,
        options: *const abr_transfer_options,
        stream: *mut abr_stream,
        report: *mut abr_batch_report,
    ) -> abr_status;
    pub fn abr_copy(
        runtime: *mut abr_runtime,
        src: *const DLTensor,
        dst: *const DLTensor,
        options: *const abr_transfer_options,
        stream: *mut abr_stream,
    ) -> abr_status;
    pub fn abr_copy_versioned(
        runtime: *mut abr_runtime,
        src: *const DLManagedTensorVersioned,
        dst: *const DLManagedTensorVersioned,
        options: *const abr_transfer_options,
        stream: *mut abr_stream,
    ) -> abr_status;
    pub fn abr_tensor_to_legacy(src: *mut DLManagedTensorVersioned, out: *mut *mut DLManagedTensor) -> abr_status;

    // streams and events
    pub fn abr_stream_create(runtime: *mut abr_runtime, device: DLDevice, out: *mut *mut abr_stream) -> abr_status;
    pub fn abr_stream_wrap(
        runtime: *mut abr_runtime,
        device: DLDevice,
        native: *mut c_void,
        out: *mut *mut abr_stream,
    ) -> abr_status;
    pub fn abr_stream_synchronize(stream: *mut abr_stream) -> abr_status;
    pub fn abr_stream_wait(stream: *mut abr_stream, other: *mut abr_stream) -> abr_status;
    pub fn abr_stream_destroy(stream: *mut abr_stream);
    pub fn abr_stream_release(stream: *mut abr_stream);
    pub fn abr_event_record(stream: *mut abr_stream, out: *mut *mut abr_event) -> abr_status;
    pub fn abr_event_query(event: *mut abr_event) -> abr_status;
    pub fn abr_event_synchronize(event: *mut abr_event) -> abr_status;
    pub fn abr_stream_wait_event(stream: *mut abr_stream, event: *mut abr_event) -> abr_status;
    pub fn abr_event_destroy(event: *mut abr_event);

    // pinned pool and device cache
    pub fn abr_pool_stats_init(stats: *mut abr_pool_stats, version: c_uint) -> abr_status;
    pub fn abr_pool_get_stats(runtime: *mut abr_runtime, stats: *mut abr_pool_stats) -> abr_status;
    pub fn abr_pool_trim(runtime: *mut abr_runtime, released_bytes: *mut u64) -> abr_status;
    pub fn abr_pool_set_limit(runtime: *mut abr_runtime, limit_bytes: u64) -> abr_status;
    pub fn abr_device_cache_get_stats(runtime: *mut abr_runtime, stats: *mut abr_pool_stats) -> abr_status;
    pub fn abr_device_cache_set_limit(runtime: *mut abr_runtime, limit_bytes: u64) -> abr_status;
    pub fn abr_runtime_set_staging(runtime: *mut abr_runtime, threads: u32, chunk_bytes: u64) -> abr_status;

    // CUDA IPC
    pub fn abr_ipc_handle_init(handle: *mut abr_ipc_handle, version: c_uint) -> abr_status;
    pub fn abr_ipc_export(
        runtime: *mut abr_runtime,
        tensor: *const DLTensor,
        stream: *mut abr_stream,
        handle: *mut abr_ipc_handle,
    ) -> abr_status;
    pub fn abr_ipc_import(
        runtime: *mut abr_runtime,
        handle: *const abr_ipc_handle,
        stream: *mut abr_stream,
        out: *mut *mut DLManagedTensorVersioned,
    ) -> abr_status;
}

//! A safe Rust wrapper over libarraybridge's C ABI: the seed of an `arraybridge`
//! crate over an `arraybridge-sys` (the `sys` module). Ownership follows the C
//! contract: a transfer consumes its source on success and hands it back on
//! failure; a `Tensor` calls its DLPack deleter exactly once, when dropped.

#[allow(non_upper_case_globals)]
pub mod sys;

use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A failed call: the status, its name and the runtime's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: sys::abr_status,
    pub name: String,
    pub message: String,
}

impl Error {
    fn last(status: sys::abr_status) -> Error {
        Error { status, name: text(unsafe { sys::abr_status_string(status) }), message: text(unsafe { sys::abr_last_error() }) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.message)
    }
}

impl std::error::Error for Error {}

fn check(status: sys::abr_status) -> Result<(), Error> {
    if status == sys::ABR_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}

pub const CPU: sys::DLDevice = sys::DLDevice { device_type: sys::kDLCPU, device_id: 0 };
pub fn opencl(id: i32) -> sys::DLDevice {
    sys::DLDevice { device_type: sys::kDLOpenCL, device_id: id }
}

/// Element types a `Tensor` can be built from and read back as.
pub trait Element: Copy + 'static {
    const DTYPE: sys::DLDataType;
}
macro_rules! element {
    ($t:ty, $code:expr) => {
        impl Element for $t {
            const DTYPE: sys::DLDataType = sys::DLDataType { code: $code, bits: (8 * std::mem::size_of::<$t>()) as u8, lanes: 1 };
        }
    };
}
element!(f32, sys::kDLFloat);
element!(f64, sys::kDLFloat);
element!(i32, sys::kDLInt);
element!(i64, sys::kDLInt);
element!(u8, sys::kDLUInt);

/// An owned DLPack tensor (versioned). Dropping it calls its deleter once.
pub struct Tensor {
    raw: NonNull<sys::DLManagedTensorVersioned>,
}

// The tensor's memory owner travels with it: DLPack deleters may run on any thread.
unsafe impl Send for Tensor {}

struct VecOwner<T> {
    managed: sys::DLManagedTensorVersioned,
    _data: Vec<T>,
    _shape: Vec<i64>,
}

unsafe extern "C" fn delete_vec_owner<T>(managed: *mut sys::DLManagedTensorVersioned) {
    drop(Box::from_raw((*managed).manager_ctx as *mut VecOwner<T>));
}

impl Tensor {
    /// A compact CPU tensor over `data` (row-major `shape`).
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Tensor {
        let count: i64 = shape.iter().product();
        assert_eq!(count as usize, data.len(), "shape {:?} does not hold {} elements", shape, data.len());
        let mut owner = Box::new(VecOwner::<T> {
            managed: sys::DLManagedTensorVersioned {
                version: sys::DLPackVersion { major: sys::DLPACK_MAJOR_VERSION, minor: sys::DLPACK_MINOR_VERSION },
                manager_ctx: ptr::null_mut(),
                deleter: Some(delete_vec_owner::<T>),
                flags: 0,
                dl_tensor: sys::DLTensor {
                    data: ptr::null_mut(),
                    device: CPU,
                    ndim: shape.len() as i32,
                    dtype: T::DTYPE,
                    shape: ptr::null_mut(),
                    strides: ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            _data: data,
            _shape: shape.to_vec(),
        });
        owner.managed.dl_tensor.data = owner._data.as_mut_ptr() as *mut _;
        owner.managed.dl_tensor.shape = owner._shape.as_mut_ptr();
        let raw = Box::into_raw(owner);
        unsafe {
            (*raw).managed.manager_ctx = raw as *mut _;
            Tensor { raw: NonNull::new_unchecked(ptr::addr_of_mut!((*raw).managed)) }
        }
    }

    /// Takes ownership of a managed tensor from elsewhere (another library, or
    /// one built by hand); its deleter runs when the `Tensor` is dropped.
    ///
    /// # Safety
    /// `raw` must be a valid DLPack 1.x managed tensor that nobody else will delete.
    pub unsafe fn from_raw(raw: *mut sys::DLManagedTensorVersioned) -> Option<Tensor> {
        NonNull::new(raw).map(|raw| Tensor { raw })
    }

    fn dl(&self) -> &sys::DLTensor {
        unsafe { &self.raw.as_ref().dl_tensor }
    }
    pub fn device(&self) -> sys::DLDevice {
        self.dl().device
    }
    pub fn dtype(&self) -> sys::DLDataType {
        self.dl().dtype
    }
    pub fn shape(&self) -> Vec<i64> {
        let t = self.dl();
        if t.ndim == 0 {
            return Vec::new();
        }
        unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }.to_vec()
    }
    pub fn flags(&self) -> u64 {
        unsafe { self.raw.as_ref().flags }
    }
    pub fn data_ptr(&self) -> *const u8 {
        unsafe { (self.dl().data as *const u8).add(self.dl().byte_offset as usize) }
    }

    /// Row-major without gaps: no strides, or the strides of the compact layout.
    pub fn is_compact(&self) -> bool {
        let t = self.dl();
        if t.strides.is_null() {
            return true;
        }
        let shape = self.shape();
        let strides = unsafe { std::slice::from_raw_parts(t.strides, shape.len()) };
        let mut expected = 1;
        for (extent, stride) in shape.iter().zip(strides).rev() {
            if *extent != 1 && *stride != expected {
                return false;
            }
            expected *= extent;
        }
        true
    }

    /// The elements of a compact CPU tensor of type T; None for anything else.
    pub fn to_vec<T: Element>(&self) -> Option<Vec<T>> {
        let t = self.dl();
        if t.device != CPU || t.dtype != T::DTYPE || !self.is_compact() {
            return None;
        }
        let count: i64 = self.shape().iter().product();
        let first = self.data_ptr() as *const T;
        Some(unsafe { std::slice::from_raw_parts(first, count as usize) }.to_vec())
    }

    fn into_raw(self) -> *mut sys::DLManagedTensorVersioned {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        unsafe {
            if let Some(deleter) = self.raw.as_ref().deleter {
                deleter(self.raw.as_ptr());
            }
        }
    }
}

/// Which path the planner took, and how many bytes it moved.
#[derive(Debug, Clone)]
pub struct Report {
    pub path: sys::abr_path,
    pub path_name: String,
    pub bytes_moved: u64,
    pub detail: String,
}

/// A failed transfer hands the source back, untouched.
#[derive(Debug)]
pub struct TransferError {
    pub error: Error,
    pub source: Tensor,
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor(device={:?}, dtype={:?}, shape={:?})", self.device(), self.dtype(), self.shape())
    }
}

#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub device: sys::DLDevice,
    pub backend: sys::abr_backend,
    pub name: String,
    pub shares_host_memory: bool,
}

/// One runtime serves many threads.
pub struct Runtime {
    raw: NonNull<sys::abr_runtime>,
}

unsafe impl Send for Runtime {}
unsafe impl Sync for Runtime {}

impl Runtime {
    pub fn new() -> Result<Runtime, Error> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::abr_runtime_create(ptr::null(), &mut raw) })?;
        Ok(Runtime { raw: NonNull::new(raw).expect("abr_runtime_create returned OK and NULL") })
    }

    pub fn devices(&self) -> Result<Vec<DeviceInfo>, Error> {
        let mut count = 0;
        check(unsafe { sys::abr_device_count(self.raw.as_ptr(), &mut count) })?;
        (0..count)
            .map(|i| {
                let mut info: sys::abr_device_info = unsafe { std::mem::zeroed() };
                info.version = sys::ABR_DEVICE_INFO_VERSION;
                check(unsafe { sys::abr_device_info(self.raw.as_ptr(), i, &mut info) })?;
                Ok(DeviceInfo {
                    device: info.device,
                    backend: info.backend,
                    name: text(info.name.as_ptr()),
                    shares_host_memory: info.flags & sys::ABR_DEVICE_SHARES_HOST_MEMORY != 0,
                })
            })
            .collect()
    }

    /// Moves `source` to `device` (a copy, a view or a wrap, as the planner decides
    /// within `copy`). On failure the source comes back in the error.
    pub fn to_device(&self, source: Tensor, device: sys::DLDevice, copy: sys::abr_copy_mode)
        -> Result<(Tensor, Report), TransferError> {
        let mut report: sys::abr_transfer_report = unsafe { std::mem::zeroed() };
        let mut options: sys::abr_transfer_options = unsafe { std::mem::zeroed() };
        unsafe { sys::abr_transfer_report_init(&mut report, sys::ABR_TRANSFER_REPORT_VERSION) };
        unsafe { sys::abr_transfer_options_init(&mut options, sys::ABR_TRANSFER_OPTIONS_VERSION) };
        options.copy = copy;
        options.report = &mut report;
        let src = source.into_raw();
        let mut out = ptr::null_mut();
        let status = unsafe { sys::abr_to_device(self.raw.as_ptr(), src, device, &options, ptr::null_mut(), &mut out) };
        if status != sys::ABR_OK {
            let error = Error::last(status);
            return Err(TransferError { error, source: unsafe { Tensor::from_raw(src) }.unwrap() });
        }
        let report = Report {
            path: report.path,
            path_name: text(unsafe { sys::abr_path_string(report.path) }),
            bytes_moved: report.bytes_moved,
            detail: text(report.detail.as_ptr()),
        };
        Ok((unsafe { Tensor::from_raw(out) }.expect("abr_to_device returned OK and NULL"), report))
    }

    pub fn pool_stats(&self) -> Result<sys::abr_pool_stats, Error> {
        let mut stats = sys::abr_pool_stats { version: sys::ABR_POOL_STATS_VERSION, ..Default::default() };
        check(unsafe { sys::abr_pool_get_stats(self.raw.as_ptr(), &mut stats) })?;
        Ok(stats)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        unsafe { sys::abr_runtime_destroy(self.raw.as_ptr()) }
    }
}

/// The library's version string, e.g. "0.2.0".
pub fn version() -> String {
    text(unsafe { sys::abr_version_string() })
}

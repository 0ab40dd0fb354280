//! A safe Rust layer over libarraybridge: move DLPack tensors between host memory,
//! CUDA and OpenCL devices through one runtime, with streams, events, batches,
//! the pinned pool and CUDA IPC. The raw C ABI is [`sys`] (the `arraybridge-sys`
//! crate).
//!
//! Ownership follows the C contract: a transfer consumes its source on success and
//! hands it back on failure; a [`Tensor`] calls its DLPack deleter exactly once,
//! when dropped. Every failed call is an [`Error`] carrying the status, its name
//! and the library's message.
//!
//! ```no_run
//! use arraybridge::{Device, Runtime, Tensor, TransferOptions};
//! let rt = Runtime::new()?;
//! let host = Tensor::from_vec((0..12).map(|i| i as f32).collect(), &[3, 4]);
//! let (on_gpu, report) = rt.to_device(host, "opencl:0".parse()?, &TransferOptions::default(), None)?;
//! println!("{} ({} bytes)", report.path_name, report.bytes_moved);
//! let (back, _) = rt.to_device(on_gpu, Device::CPU, &TransferOptions::default(), None)?;
//! assert_eq!(back.to_vec::<f32>().unwrap()[5], 5.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use arraybridge_sys as sys;

use std::cell::OnceCell;
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};
use std::str::FromStr;

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn text_of(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

// ======================================================================== errors

/// A failed call: the status, its name (`abr_status_string`), the calling thread's
/// message (`abr_last_error`) and the native code of a failed backend call, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: sys::abr_status,
    pub name: String,
    pub message: String,
    pub backend_code: i64,
}

impl Error {
    /// The error of the calling thread's last failed call, with `status`.
    fn last(status: sys::abr_status) -> Error {
        unsafe {
            Error {
                status,
                name: text(sys::abr_status_string(status)),
                message: text(sys::abr_last_error()),
                backend_code: sys::abr_last_error_backend_code(),
            }
        }
    }

    /// An error raised on the Rust side (an argument the C API cannot even receive).
    fn invalid(message: impl Into<String>) -> Error {
        Error::of(sys::ABR_ERR_INVALID_ARGUMENT, message)
    }

    /// An error with `status` raised on the Rust side, where the library would say the same.
    fn of(status: sys::abr_status, message: impl Into<String>) -> Error {
        Error { status, name: status_name(status), message: message.into(), backend_code: 0 }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn check(status: sys::abr_status) -> Result<()> {
    if status == sys::ABR_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}

/// The static name of a status ("ABR_ERR_DLPACK_SHAPE").
pub fn status_name(status: sys::abr_status) -> String {
    text(unsafe { sys::abr_status_string(status) })
}

fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{:?} contains a NUL byte", s)))
}

// ======================================================================== version, logging

/// The library's version string, e.g. "0.2.0".
pub fn version() -> String {
    text(unsafe { sys::abr_version_string() })
}

/// MAJOR*10000 + MINOR*100 + PATCH of the loaded library.
pub fn version_number() -> u32 {
    unsafe { sys::abr_version_number() }
}

/// Process-wide log level (`sys::ABR_LOG_*`); records go to stderr.
pub fn set_log_level(level: sys::abr_log_level) -> Result<()> {
    check(unsafe { sys::abr_log_set_level(level) })
}

pub fn log_level() -> sys::abr_log_level {
    unsafe { sys::abr_log_get_level() }
}

// ======================================================================== devices and dtypes

/// A DLPack device, named as libarraybridge names it ("cpu", "cuda:1", "opencl:0").
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Device(pub sys::DLDevice);

impl Device {
    pub const CPU: Device = Device(sys::DLDevice { device_type: sys::kDLCPU, device_id: 0 });
    pub const CUDA_HOST: Device = Device(sys::DLDevice { device_type: sys::kDLCUDAHost, device_id: 0 });

    pub const fn new(device_type: sys::DLDeviceType, device_id: i32) -> Device {
        Device(sys::DLDevice { device_type, device_id })
    }
    pub const fn cuda(id: i32) -> Device {
        Device::new(sys::kDLCUDA, id)
    }
    pub const fn opencl(id: i32) -> Device {
        Device::new(sys::kDLOpenCL, id)
    }
    /// Parses a name (case and blanks ignored); a bad one is an error naming it.
    pub fn parse(text: &str) -> Result<Device> {
        let text = c_string(text)?;
        let mut out = sys::DLDevice::default();
        check(unsafe { sys::abr_device_parse(text.as_ptr(), &mut out) })?;
        Ok(Device(out))
    }
    /// The name that `parse` reads back to the same device.
    pub fn format(&self) -> Result<String> {
        let mut buf = [0 as c_char; sys::ABR_NAME_MAX];
        check(unsafe { sys::abr_device_format(self.0, buf.as_mut_ptr(), buf.len()) })?;
        Ok(text_of(&buf))
    }
    pub fn raw(&self) -> sys::DLDevice {
        self.0
    }
}

impl FromStr for Device {
    type Err = Error;
    fn from_str(s: &str) -> Result<Device> {
        Device::parse(s)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.format() {
            Ok(name) => f.write_str(&name),
            Err(_) => write!(f, "DLDevice({}, {})", self.0.device_type, self.0.device_id),
        }
    }
}

impl From<sys::DLDevice> for Device {
    fn from(d: sys::DLDevice) -> Device {
        Device(d)
    }
}

/// A DLPack data type, named as libarraybridge names it ("float32", "int8", "float32x4").
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DType(pub sys::DLDataType);

impl DType {
    pub const fn new(code: sys::DLDataTypeCode, bits: u8, lanes: u16) -> DType {
        DType(sys::DLDataType { code, bits, lanes })
    }
    pub const BOOL: DType = DType::new(sys::kDLBool, 8, 1);
    pub const I8: DType = DType::new(sys::kDLInt, 8, 1);
    pub const I16: DType = DType::new(sys::kDLInt, 16, 1);
    pub const I32: DType = DType::new(sys::kDLInt, 32, 1);
    pub const I64: DType = DType::new(sys::kDLInt, 64, 1);
    pub const U8: DType = DType::new(sys::kDLUInt, 8, 1);
    pub const U16: DType = DType::new(sys::kDLUInt, 16, 1);
    pub const U32: DType = DType::new(sys::kDLUInt, 32, 1);
    pub const U64: DType = DType::new(sys::kDLUInt, 64, 1);
    pub const F16: DType = DType::new(sys::kDLFloat, 16, 1);
    pub const BF16: DType = DType::new(sys::kDLBfloat, 16, 1);
    pub const F32: DType = DType::new(sys::kDLFloat, 32, 1);
    pub const F64: DType = DType::new(sys::kDLFloat, 64, 1);

    /// Parses a name (case and blanks ignored; spelling only); a bad one is an error naming it.
    pub fn parse(text: &str) -> Result<DType> {
        let text = c_string(text)?;
        let mut out = sys::DLDataType::default();
        check(unsafe { sys::abr_dtype_parse(text.as_ptr(), &mut out) })?;
        Ok(DType(out))
    }
    pub fn format(&self) -> Result<String> {
        let mut buf = [0 as c_char; sys::ABR_NAME_MAX];
        check(unsafe { sys::abr_dtype_format(self.0, buf.as_mut_ptr(), buf.len()) })?;
        Ok(text_of(&buf))
    }
    pub fn raw(&self) -> sys::DLDataType {
        self.0
    }
}

impl FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<DType> {
        DType::parse(s)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.format() {
            Ok(name) => f.write_str(&name),
            Err(_) => write!(f, "DLDataType({}, {}, {})", self.0.code, self.0.bits, self.0.lanes),
        }
    }
}

/// A backend (`sys::ABR_BACKEND_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Backend(pub sys::abr_backend);

impl Backend {
    pub const HOST: Backend = Backend(sys::ABR_BACKEND_HOST);
    pub const CUDA: Backend = Backend(sys::ABR_BACKEND_CUDA);
    pub const OPENCL: Backend = Backend(sys::ABR_BACKEND_OPENCL);
}

#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub device: Device,
    pub backend: Backend,
    pub name: String,
    pub platform: String,
    pub memory_bytes: u64,
    pub shares_host_memory: bool,
    pub lost: bool,
}

#[derive(Debug, Clone)]
pub struct BackendInfo {
    pub backend: Backend,
    pub available: bool,
    pub device_count: i32,
    /// Library and version, or why the backend is unavailable.
    pub detail: String,
}

/// A device kind this library knows, whether or not its backend is usable here.
#[derive(Debug, Clone)]
pub struct DeviceKind {
    pub device_type: sys::DLDeviceType,
    pub backend: Backend,
    pub flags: u32,
    pub disable_flag: u32,
    pub name: String,
    pub backend_name: String,
    pub disable_env: String,
}

/// Every device kind, the CPU first.
pub fn device_kinds() -> Result<Vec<DeviceKind>> {
    let mut count = 0;
    check(unsafe { sys::abr_device_kind_count(&mut count) })?;
    (0..count)
        .map(|i| {
            let mut k = sys::ABR_DEVICE_KIND_INIT;
            check(unsafe { sys::abr_device_kind_get(i, &mut k) })?;
            Ok(DeviceKind {
                device_type: k.r#type,
                backend: Backend(k.backend),
                flags: k.flags,
                disable_flag: k.disable_flag,
                name: text_of(&k.name),
                backend_name: text_of(&k.backend_name),
                disable_env: text_of(&k.disable_env),
            })
        })
        .collect()
}

// ======================================================================== tensors

/// Element types a `Tensor` can be built from and read back as.
///
/// # Safety
/// `DTYPE` must describe `Self` exactly: its bits are `8 * size_of::<Self>()`, and
/// every bit pattern of that dtype is a valid `Self` (`from_vec` hands the library
/// `size_of::<Self>()` bytes an element, and `to_vec` reads the library's bytes as
/// `Self`). A wrong impl reads or writes out of bounds, so safe code cannot make one:
///
/// ```compile_fail,E0200
/// struct Big([u8; 64]);
/// impl arraybridge::Element for Big {
///     const DTYPE: arraybridge::DType = arraybridge::DType::U8;
/// }
/// ```
pub unsafe trait Element: Copy + 'static {
    const DTYPE: DType;
}
macro_rules! element {
    ($($t:ty => $code:expr),*) => {
        $(unsafe impl Element for $t {
            const DTYPE: DType = DType::new($code, (8 * std::mem::size_of::<$t>()) as u8, 1);
        })*
    };
}
element!(f32 => sys::kDLFloat, f64 => sys::kDLFloat, i8 => sys::kDLInt, i16 => sys::kDLInt, i32 => sys::kDLInt,
         i64 => sys::kDLInt, u8 => sys::kDLUInt, u16 => sys::kDLUInt, u32 => sys::kDLUInt, u64 => sys::kDLUInt);

/// An owned DLPack tensor (versioned). Dropping it calls its deleter exactly once.
///
/// A tensor a transfer on a stream returned carries that transfer's event: the
/// host-side readers (`to_vec`, `synchronize`) wait for it first.
pub struct Tensor {
    raw: NonNull<sys::DLManagedTensorVersioned>,
    pending: Option<Event>,
    /// Why the queued transfer that made it failed, once a wait said so: kept, so that
    /// every later reader is told, never handed what the failed work left behind.
    failed: OnceCell<Error>,
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

/// The elements of `shape`, for the constructors: a negative extent, or a count past
/// usize, is the caller's error, said by name.
fn element_count(shape: &[i64]) -> usize {
    let extents: Vec<usize> = shape
        .iter()
        .map(|&extent| usize::try_from(extent).unwrap_or_else(|_| panic!("shape {:?}: extent {} is negative", shape, extent)))
        .collect();
    if extents.contains(&0) {
        return 0; // [1 << 32, 1 << 32, 0] holds nothing, whatever the others multiply to
    }
    extents
        .iter()
        .try_fold(1usize, |count, &extent| count.checked_mul(extent))
        .unwrap_or_else(|| panic!("shape {:?}: its element count overflows usize", shape))
}

impl Tensor {
    /// A compact row-major CPU tensor over `data`.
    ///
    /// # Panics
    /// If `shape` has a negative extent, or does not hold exactly `data.len()` elements.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Tensor {
        let count = element_count(shape);
        assert_eq!(count, data.len(), "shape {:?} does not hold {} elements", shape, data.len());
        let mut owner = Box::new(VecOwner::<T> {
            managed: sys::DLManagedTensorVersioned {
                version: sys::DLPackVersion { major: sys::DLPACK_MAJOR_VERSION, minor: sys::DLPACK_MINOR_VERSION },
                manager_ctx: ptr::null_mut(),
                deleter: Some(delete_vec_owner::<T>),
                flags: 0,
                dl_tensor: sys::DLTensor {
                    data: ptr::null_mut(),
                    device: Device::CPU.0,
                    ndim: shape.len() as i32,
                    dtype: T::DTYPE.0,
                    shape: ptr::null_mut(),
                    strides: ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            _data: data,
            _shape: shape.to_vec(),
        });
        owner.managed.dl_tensor.data = owner._data.as_mut_ptr() as *mut c_void;
        owner.managed.dl_tensor.shape = owner._shape.as_mut_ptr();
        let raw = Box::into_raw(owner);
        unsafe {
            (*raw).managed.manager_ctx = raw as *mut c_void;
            Tensor { raw: NonNull::new_unchecked(ptr::addr_of_mut!((*raw).managed)), pending: None, failed: OnceCell::new() }
        }
    }

    /// A CPU tensor of `shape` filled with `T::default()` (zeros): a copy destination.
    ///
    /// # Panics
    /// If `shape` has a negative extent, or more elements than memory can hold.
    pub fn zeros<T: Element + Default>(shape: &[i64]) -> Tensor {
        Tensor::from_vec(vec![T::default(); element_count(shape)], shape)
    }

    /// Takes ownership of a managed tensor from elsewhere (another library, or one
    /// built by hand); its deleter runs when the `Tensor` is dropped. None for NULL.
    ///
    /// # Safety
    /// `raw` must be a valid DLPack 1.x managed tensor that nobody else will delete,
    /// whose deleter may run on any thread (a `Tensor` is `Send`, and the library may
    /// delete a source on a driver's thread once queued work is done).
    pub unsafe fn from_raw(raw: *mut sys::DLManagedTensorVersioned) -> Option<Tensor> {
        NonNull::new(raw).map(|raw| Tensor { raw, pending: None, failed: OnceCell::new() })
    }

    /// Gives up ownership once a pending transfer has completed: the caller calls the
    /// deleter, or hands the tensor to a consumer that will. If that transfer failed,
    /// the tensor comes back in the error (its memory holds no result).
    pub fn into_raw(mut self) -> std::result::Result<*mut sys::DLManagedTensorVersioned, (Error, Tensor)> {
        match self.wait_pending() {
            Ok(()) => Ok(self.into_raw_now()),
            Err(error) => Err((error, self)),
        }
    }

    fn into_raw_now(mut self) -> *mut sys::DLManagedTensorVersioned {
        self.pending = None;
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }

    /// Ok once the transfer that made it has completed; its failure, every time after
    /// the first wait that saw it.
    fn settled(&self) -> Result<()> {
        if let Some(error) = self.failed.get() {
            return Err(error.clone());
        }
        if let Some(Err(error)) = self.pending.as_ref().map(Event::synchronize) {
            return Err(self.failed.get_or_init(|| error).clone());
        }
        Ok(())
    }

    fn wait_pending(&mut self) -> Result<()> {
        self.settled()?;
        self.pending = None;
        Ok(())
    }

    /// Before a copy writes every element: the transfer still filling it is waited for
    /// (its failure is kept until the copy has written all of it, `overwritten`).
    fn before_overwrite(&mut self) {
        let _ = self.settled();
    }

    /// Every element written by a copy that completed: what a failed transfer left is gone.
    fn overwritten(&mut self) {
        self.pending = None;
        self.failed = OnceCell::new();
    }

    /// Waits until the transfer that produced this tensor on a stream has completed.
    /// Once it has failed, this and every reader of the tensor return that failure.
    pub fn synchronize(&mut self) -> Result<()> {
        self.wait_pending()
    }

    /// The managed tensor, still owned by `self`.
    pub fn as_raw(&self) -> *const sys::DLManagedTensorVersioned {
        self.raw.as_ptr()
    }
    pub fn dl_tensor(&self) -> &sys::DLTensor {
        unsafe { &self.raw.as_ref().dl_tensor }
    }
    pub fn device(&self) -> Device {
        Device(self.dl_tensor().device)
    }
    pub fn dtype(&self) -> DType {
        DType(self.dl_tensor().dtype)
    }
    pub fn ndim(&self) -> usize {
        self.dl_tensor().ndim.max(0) as usize
    }
    pub fn shape(&self) -> Vec<i64> {
        let t = self.dl_tensor();
        if t.ndim <= 0 || t.shape.is_null() {
            return Vec::new();
        }
        unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }.to_vec()
    }
    /// Strides in elements; None means compact row-major.
    pub fn strides(&self) -> Option<Vec<i64>> {
        let t = self.dl_tensor();
        if t.strides.is_null() {
            return None;
        }
        Some(unsafe { std::slice::from_raw_parts(t.strides, self.ndim()) }.to_vec())
    }
    pub fn flags(&self) -> u64 {
        unsafe { self.raw.as_ref().flags }
    }
    pub fn is_read_only(&self) -> bool {
        self.flags() & sys::DLPACK_FLAG_BITMASK_READ_ONLY != 0
    }
    pub fn is_copied(&self) -> bool {
        self.flags() & sys::DLPACK_FLAG_BITMASK_IS_COPIED != 0
    }
    /// Its element count (0 where an extent is 0, whatever the others multiply to; a
    /// count past i64, which no valid tensor has, saturates).
    pub fn numel(&self) -> i64 {
        let shape = self.shape();
        if shape.contains(&0) {
            return 0;
        }
        shape.iter().try_fold(1i64, |count, &extent| count.checked_mul(extent)).unwrap_or(i64::MAX)
    }
    /// The address of the first element (for an OpenCL tensor, `data` is a cl_mem
    /// and this is not an address).
    pub fn data_ptr(&self) -> *const u8 {
        (self.dl_tensor().data as *const u8).wrapping_add(self.dl_tensor().byte_offset as usize)
    }

    /// Row-major without gaps: no strides, or the strides of the compact layout.
    pub fn is_compact(&self) -> bool {
        let Some(strides) = self.strides() else { return true };
        let mut expected = 1;
        for (extent, stride) in self.shape().iter().zip(&strides).rev() {
            if *extent != 1 && *stride != expected {
                return false;
            }
            expected *= extent;
        }
        true
    }

    /// Whether the host can read the memory in place (CPU and CUDA host memory).
    fn host_readable(&self) -> bool {
        matches!(self.device().0.device_type, sys::kDLCPU | sys::kDLCUDAHost | sys::kDLCUDAManaged)
    }

    /// The elements of a compact host tensor of type T, once a pending transfer has
    /// completed. An error says why not: device memory (move it to `Device::CPU`
    /// first), another dtype, strides with gaps, or the failure of the transfer that
    /// made it. Any alignment is read (DLPack allows a `byte_offset` that is not).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if !self.host_readable() {
            return Err(Error::invalid(format!(
                "to_vec: the tensor is in {} memory, which the host does not read in place; move it to Device::CPU first",
                self.device()
            )));
        }
        if self.dtype() != T::DTYPE {
            return Err(Error::invalid(format!("to_vec: the tensor holds {}, not {}", self.dtype(), T::DTYPE)));
        }
        if !self.is_compact() {
            return Err(Error::invalid(format!(
                "to_vec: the tensor's strides {:?} leave gaps in shape {:?}; copy it to a compact one first",
                self.strides().unwrap_or_default(),
                self.shape()
            )));
        }
        self.settled()?;
        let count = usize::try_from(self.numel()).unwrap_or(0);
        if count == 0 {
            return Ok(Vec::new()); // its data may be NULL, which even a copy of 0 bytes may not read
        }
        let mut out = Vec::<T>::with_capacity(count);
        // Bytes, not a &[T]: the library's views may be unaligned for T.
        unsafe {
            ptr::copy_nonoverlapping(self.data_ptr(), out.as_mut_ptr() as *mut u8, count * std::mem::size_of::<T>());
            out.set_len(count);
        }
        Ok(out)
    }

    /// Re-wraps the tensor as a legacy (pre-1.0) one that owns it; a READ_ONLY
    /// tensor is refused (the legacy form cannot say so) and comes back in the error.
    pub fn into_legacy(mut self) -> std::result::Result<LegacyTensor, (Error, Tensor)> {
        if let Err(e) = self.wait_pending() {
            return Err((e, self));
        }
        let mut out = ptr::null_mut();
        let status = unsafe { sys::abr_tensor_to_legacy(self.raw.as_ptr(), &mut out) };
        if status != sys::ABR_OK {
            return Err((Error::last(status), self));
        }
        self.into_raw_now();
        Ok(LegacyTensor { raw: NonNull::new(out).expect("abr_tensor_to_legacy returned OK and NULL") })
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        // The library's deleters wait for queued work themselves; the event only
        // guards host reads, so it is let go without waiting.
        self.pending = None;
        unsafe {
            if let Some(deleter) = self.raw.as_ref().deleter {
                deleter(self.raw.as_ptr());
            }
        }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor(device={}, dtype={}, shape={:?})", self.device(), self.dtype(), self.shape())
    }
}

/// An owned legacy (pre-1.0) DLPack tensor. Dropping it calls its deleter once.
pub struct LegacyTensor {
    raw: NonNull<sys::DLManagedTensor>,
}

unsafe impl Send for LegacyTensor {}

impl LegacyTensor {
    /// # Safety
    /// `raw` must be a valid legacy managed tensor that nobody else will delete.
    pub unsafe fn from_raw(raw: *mut sys::DLManagedTensor) -> Option<LegacyTensor> {
        NonNull::new(raw).map(|raw| LegacyTensor { raw })
    }
    pub fn into_raw(self) -> *mut sys::DLManagedTensor {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }
    pub fn dl_tensor(&self) -> &sys::DLTensor {
        unsafe { &self.raw.as_ref().dl_tensor }
    }
    pub fn device(&self) -> Device {
        Device(self.dl_tensor().device)
    }
}

impl fmt::Debug for LegacyTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LegacyTensor(device={}, dtype={})", self.device(), DType(self.dl_tensor().dtype))
    }
}

impl Drop for LegacyTensor {
    fn drop(&mut self) {
        unsafe {
            if let Some(deleter) = self.raw.as_ref().deleter {
                deleter(self.raw.as_ptr());
            }
        }
    }
}

// ======================================================================== transfers

/// Whether a transfer may, must or must not copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CopyMode {
    /// A view when possible, a copy otherwise.
    #[default]
    IfNeeded,
    /// Always a new, exclusively owned buffer.
    Always,
    /// A view, or `ABR_ERR_COPY_REQUIRED`.
    Never,
}

impl CopyMode {
    fn raw(self) -> sys::abr_copy_mode {
        match self {
            CopyMode::IfNeeded => sys::ABR_COPY_IF_NEEDED,
            CopyMode::Always => sys::ABR_COPY_ALWAYS,
            CopyMode::Never => sys::ABR_COPY_NEVER,
        }
    }
}

/// Which casts a transfer may make (NumPy's `casting=` names). Kinds rank bool <
/// unsigned < signed < float < complex.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Casting {
    /// The call's own: `SameKind` for `copy` and `copy_many` (NumPy's copyto), `Unsafe`
    /// for `to_device`'s `dtype` (NumPy's astype).
    #[default]
    Default,
    /// No cast: the dtypes must be the same.
    No,
    /// Only into a dtype that holds every value of the source's.
    Safe,
    /// `Safe`, and narrowing within a kind or up: never complex to real, float to
    /// integer, signed to unsigned or anything but bool to bool.
    SameKind,
    /// Any cast the runtime has.
    Unsafe,
}

impl Casting {
    fn raw(self) -> sys::abr_casting {
        match self {
            Casting::Default => sys::ABR_CASTING_DEFAULT,
            Casting::No => sys::ABR_CASTING_NO,
            Casting::Safe => sys::ABR_CASTING_SAFE,
            Casting::SameKind => sys::ABR_CASTING_SAME_KIND,
            Casting::Unsafe => sys::ABR_CASTING_UNSAFE,
        }
    }
}

/// `abr_transfer_options`, less the report (every call returns its report).
#[derive(Clone, Copy, Debug, Default)]
pub struct TransferOptions {
    /// `to_device` only.
    pub copy: CopyMode,
    /// `to_device` only: the target dtype; None keeps the source's.
    pub dtype: Option<DType>,
    /// Refuse paths that stage through host memory.
    pub no_host_staging: bool,
    /// A view must be compact row-major, else copy (abr_copy: refuse a destination that is not).
    pub require_contiguous: bool,
    /// Which casts are allowed; a refused one is `ABR_ERR_CASTING`.
    pub casting: Casting,
}

impl TransferOptions {
    pub fn copy(mode: CopyMode) -> TransferOptions {
        TransferOptions { copy: mode, ..Default::default() }
    }
    fn raw(&self, report: *mut sys::abr_transfer_report) -> sys::abr_transfer_options {
        let mut o = sys::ABR_TRANSFER_OPTIONS_INIT;
        o.copy = self.copy.raw();
        o.dtype = self.dtype.map(|d| d.0).unwrap_or_default();
        o.casting = self.casting.raw();
        if self.no_host_staging {
            o.flags |= sys::ABR_TRANSFER_NO_HOST_STAGING;
        }
        if self.require_contiguous {
            o.flags |= sys::ABR_TRANSFER_REQUIRE_CONTIGUOUS;
        }
        o.report = report;
        o
    }
}

/// Which path the planner took, and how many bytes it moved.
#[derive(Debug, Clone)]
pub struct Report {
    pub path: sys::abr_path,
    /// "zero_copy", "host_copy", "host_to_device", ...
    pub path_name: String,
    /// `sys::ABR_REPORT_*`
    pub flags: u32,
    pub bytes_moved: u64,
    pub detail: String,
}

impl Report {
    fn from_raw(r: &sys::abr_transfer_report) -> Report {
        Report {
            path: r.path,
            path_name: path_name(r.path),
            flags: r.flags,
            bytes_moved: r.bytes_moved,
            detail: text_of(&r.detail),
        }
    }
}

/// The static name of a path ("zero_copy").
pub fn path_name(path: sys::abr_path) -> String {
    text(unsafe { sys::abr_path_string(path) })
}

/// What a batch call (`to_device_many`, `copy_many`) did.
#[derive(Debug, Clone)]
pub struct BatchReport {
    pub tensors: u32,
    pub coalesced: u32,
    pub views: u32,
    pub copies: u32,
    pub bytes_moved: u64,
    pub detail: String,
    /// Each result's (pair's) path: `ABR_PATH_ZERO_COPY` and `ABR_PATH_HOST_WRAP`
    /// results are their sources' memory.
    pub paths: Vec<sys::abr_path>,
    /// Each result's (pair's) report flags, as its own `Report` would say them:
    /// `ABR_REPORT_PACKED`, `ABR_REPORT_CAST`.
    pub result_flags: Vec<u32>,
}

impl BatchReport {
    fn from_raw(r: &sys::abr_batch_report, paths: Vec<sys::abr_path>, result_flags: Vec<u32>) -> BatchReport {
        BatchReport {
            tensors: r.tensors,
            coalesced: r.coalesced,
            views: r.views,
            copies: r.copies,
            bytes_moved: r.bytes_moved,
            detail: text_of(&r.detail),
            paths,
            result_flags,
        }
    }
}

/// A failed transfer hands the source back, untouched.
#[derive(Debug)]
pub struct TransferError {
    pub error: Error,
    pub source: Tensor,
}

impl fmt::Display for TransferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for TransferError {}

impl From<TransferError> for Error {
    fn from(e: TransferError) -> Error {
        e.error
    }
}

/// A failed batch hands every source back, untouched, in order.
#[derive(Debug)]
pub struct BatchError {
    pub error: Error,
    pub sources: Vec<Tensor>,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for BatchError {}

impl From<BatchError> for Error {
    fn from(e: BatchError) -> Error {
        e.error
    }
}

// ======================================================================== statistics, IPC

/// `abr_pool_stats`: the pinned pool's, or the CUDA device cache's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
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

impl From<sys::abr_pool_stats> for PoolStats {
    fn from(s: sys::abr_pool_stats) -> PoolStats {
        PoolStats {
            bytes_pinned: s.bytes_pinned,
            bytes_in_use: s.bytes_in_use,
            bytes_cached: s.bytes_cached,
            bytes_waiting: s.bytes_waiting,
            peak_bytes_pinned: s.peak_bytes_pinned,
            limit_bytes: s.limit_bytes,
            blocks_pinned: s.blocks_pinned,
            hits: s.hits,
            misses: s.misses,
        }
    }
}

/// A CUDA IPC handle: plain bytes to send to another process (`as_bytes`) and
/// read back there (`from_bytes`).
#[derive(Clone, Copy, Debug)]
pub struct IpcHandle(pub sys::abr_ipc_handle);

impl IpcHandle {
    /// The bytes in use.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0.data[..(self.0.size as usize).min(sys::ABR_IPC_HANDLE_BYTES)]
    }
    pub fn from_bytes(bytes: &[u8]) -> Result<IpcHandle> {
        if bytes.len() > sys::ABR_IPC_HANDLE_BYTES {
            return Err(Error::invalid(format!(
                "an IPC handle of {} bytes (at most {})",
                bytes.len(),
                sys::ABR_IPC_HANDLE_BYTES
            )));
        }
        let mut h = sys::ABR_IPC_HANDLE_INIT;
        h.data[..bytes.len()].copy_from_slice(bytes);
        h.size = bytes.len() as u32;
        Ok(IpcHandle(h))
    }
}

// ======================================================================== runtime

/// `abr_runtime_options`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RuntimeOptions {
    pub disable_cuda: bool,
    pub disable_opencl: bool,
}

/// A runtime; one serves many threads. Dropping it destroys it; tensors and
/// streams it made stay valid.
pub struct Runtime {
    raw: NonNull<sys::abr_runtime>,
}

unsafe impl Send for Runtime {}
unsafe impl Sync for Runtime {}

fn stream_ptr(stream: Option<&Stream>) -> *mut sys::abr_stream {
    stream.map_or(ptr::null_mut(), |s| s.raw.as_ptr())
}

impl Runtime {
    pub fn new() -> Result<Runtime> {
        Runtime::with_options(&RuntimeOptions::default())
    }

    pub fn with_options(options: &RuntimeOptions) -> Result<Runtime> {
        let mut o = sys::ABR_RUNTIME_OPTIONS_INIT;
        if options.disable_cuda {
            o.flags |= sys::ABR_RUNTIME_DISABLE_CUDA;
        }
        if options.disable_opencl {
            o.flags |= sys::ABR_RUNTIME_DISABLE_OPENCL;
        }
        let mut raw = ptr::null_mut();
        check(unsafe { sys::abr_runtime_create(&o, &mut raw) })?;
        Ok(Runtime { raw: NonNull::new(raw).expect("abr_runtime_create returned OK and NULL") })
    }

    pub fn as_raw(&self) -> *mut sys::abr_runtime {
        self.raw.as_ptr()
    }

    /// Devices of every usable backend, the CPU first, at stable indices.
    pub fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let mut count = 0;
        check(unsafe { sys::abr_device_count(self.raw.as_ptr(), &mut count) })?;
        (0..count)
            .map(|i| {
                let mut info = sys::ABR_DEVICE_INFO_INIT;
                check(unsafe { sys::abr_device_info(self.raw.as_ptr(), i, &mut info) })?;
                Ok(DeviceInfo {
                    device: Device(info.device),
                    backend: Backend(info.backend),
                    name: text_of(&info.name),
                    platform: text_of(&info.platform),
                    memory_bytes: info.memory_bytes,
                    shares_host_memory: info.flags & sys::ABR_DEVICE_SHARES_HOST_MEMORY != 0,
                    lost: info.flags & sys::ABR_DEVICE_LOST_FLAG != 0,
                })
            })
            .collect()
    }

    pub fn backend_info(&self, backend: Backend) -> Result<BackendInfo> {
        let mut info = sys::ABR_BACKEND_INFO_INIT;
        check(unsafe { sys::abr_backend_info(self.raw.as_ptr(), backend.0, &mut info) })?;
        Ok(BackendInfo {
            backend: Backend(info.backend),
            available: info.available != 0,
            device_count: info.device_count,
            detail: text_of(&info.detail),
        })
    }

    /// Moves `source` to `device` (a copy, a view or a wrap, as the planner decides
    /// within the options). With a stream the work is queued on it and the result
    /// carries its event (host reads wait for it). On failure the source comes back
    /// in the error.
    pub fn to_device(
        &self,
        source: Tensor,
        device: Device,
        options: &TransferOptions,
        stream: Option<&Stream>,
    ) -> Result<(Tensor, Report), TransferError> {
        let mut source = source;
        if let Err(error) = source.wait_pending() {
            return Err(TransferError { error, source });
        }
        let mut report = sys::ABR_TRANSFER_REPORT_INIT;
        let options = options.raw(&mut report);
        let src = source.into_raw_now();
        let mut out = ptr::null_mut();
        let status =
            unsafe { sys::abr_to_device(self.raw.as_ptr(), src, device.0, &options, stream_ptr(stream), &mut out) };
        let source_back = || unsafe { Tensor::from_raw(src) }.expect("a source is never NULL");
        if status != sys::ABR_OK {
            return Err(TransferError { error: Error::last(status), source: source_back() });
        }
        let mut result = unsafe { Tensor::from_raw(out) }.expect("abr_to_device returned OK and NULL");
        if let Some(stream) = stream {
            match stream.record() {
                Ok(event) => result.pending = Some(event),
                // The transfer was queued; without an event, wait for it here, and keep
                // its failure on the result as a failed event would be kept.
                Err(_) => {
                    if let Err(error) = stream.synchronize() {
                        let _ = result.failed.set(error);
                    }
                }
            }
        }
        Ok((result, Report::from_raw(&report)))
    }

    /// Moves a legacy tensor to `device`; the result is versioned. On failure the
    /// source comes back in the error.
    pub fn to_device_legacy(
        &self,
        source: LegacyTensor,
        device: Device,
        options: &TransferOptions,
    ) -> Result<(Tensor, Report), (Error, LegacyTensor)> {
        let mut report = sys::ABR_TRANSFER_REPORT_INIT;
        let options = options.raw(&mut report);
        let src = source.into_raw();
        let mut out = ptr::null_mut();
        let status =
            unsafe { sys::abr_to_device_legacy(self.raw.as_ptr(), src, device.0, &options, ptr::null_mut(), &mut out) };
        if status != sys::ABR_OK {
            return Err((Error::last(status), unsafe { LegacyTensor::from_raw(src) }.expect("a source is never NULL")));
        }
        Ok((unsafe { Tensor::from_raw(out) }.expect("OK and NULL"), Report::from_raw(&report)))
    }

    /// Many tensors to one device in one call (small copies from host memory, to a
    /// device or the CPU, are coalesced into one block that the results share). On
    /// failure every source comes back, in order, and the message
    /// names the index of the first that failed.
    pub fn to_device_many(
        &self,
        sources: Vec<Tensor>,
        device: Device,
        options: &TransferOptions,
        stream: Option<&Stream>,
    ) -> Result<(Vec<Tensor>, BatchReport), BatchError> {
        let mut sources = sources;
        for (i, s) in sources.iter_mut().enumerate() {
            if let Err(mut error) = s.wait_pending() {
                error.message = format!("to_device_many: source {}: {}", i, error.message);
                return Err(BatchError { error, sources });
            }
        }
        let srcs: Vec<*mut sys::DLManagedTensorVersioned> = sources.into_iter().map(Tensor::into_raw_now).collect();
        let mut outs = vec![ptr::null_mut(); srcs.len()];
        let mut paths = vec![sys::ABR_PATH_NONE; srcs.len()];
        let mut result_flags = vec![0u32; srcs.len()];
        let mut report = sys::ABR_BATCH_REPORT_INIT;
        report.paths = paths.as_mut_ptr();
        report.result_flags = result_flags.as_mut_ptr();
        let options = options.raw(ptr::null_mut());
        let status = unsafe {
            sys::abr_to_device_many(
                self.raw.as_ptr(),
                srcs.as_ptr(),
                srcs.len(),
                device.0,
                &options,
                stream_ptr(stream),
                outs.as_mut_ptr(),
                &mut report,
            )
        };
        if status != sys::ABR_OK {
            let error = Error::last(status);
            let sources = srcs.into_iter().map(|p| unsafe { Tensor::from_raw(p) }.expect("not NULL")).collect();
            return Err(BatchError { error, sources });
        }
        let mut results: Vec<Tensor> =
            outs.into_iter().map(|p| unsafe { Tensor::from_raw(p) }.expect("abr_to_device_many returned NULL")).collect();
        if let Some(stream) = stream {
            for r in results.iter_mut() {
                match stream.record() {
                    Ok(event) => r.pending = Some(event),
                    Err(_) => {
                        if let Err(error) = stream.synchronize() {
                            let _ = r.failed.set(error);
                        }
                    }
                }
            }
        }
        Ok((results, BatchReport::from_raw(&report, paths, result_flags)))
    }

    /// Copies `src` into `dst` (same shape; a dtype difference is converted as
    /// `options.casting` allows, by default within a kind or up, as NumPy's copyto:
    /// complex into float or float into an integer is `ABR_ERR_CASTING`; any strides). A READ_ONLY destination is refused. With a stream the copy is
    /// ordered after the stream's earlier work; either way it has completed when
    /// this returns (the tensors are borrowed only for the call).
    pub fn copy(&self, src: &Tensor, dst: &mut Tensor, options: &TransferOptions, stream: Option<&Stream>)
        -> Result<Report> {
        src.settled()?;
        dst.before_overwrite();
        let mut report = sys::ABR_TRANSFER_REPORT_INIT;
        let mut o = options.raw(&mut report);
        o.copy = sys::ABR_COPY_IF_NEEDED;
        o.dtype = sys::DLDataType::default();
        check(unsafe { sys::abr_copy_versioned(self.raw.as_ptr(), src.as_raw(), dst.as_raw(), &o, stream_ptr(stream)) })?;
        if let Some(stream) = stream {
            stream.synchronize()?;
        }
        dst.overwritten();
        Ok(Report::from_raw(&report))
    }

    /// `copy` of each pair `(src, dst)`, in order; every pair is validated before
    /// anything moves. Completed when this returns, as `copy`.
    pub fn copy_many(&self, pairs: &mut [(&Tensor, &mut Tensor)], options: &TransferOptions, stream: Option<&Stream>)
        -> Result<BatchReport> {
        for (i, (s, d)) in pairs.iter_mut().enumerate() {
            let pair = |mut error: Error| {
                error.message = format!("copy_many: pair {}: {}", i, error.message);
                error
            };
            s.settled().map_err(pair)?;
            d.before_overwrite();
            if d.is_read_only() {
                // What copy's library call says of one (abr_copy_many takes DLTensors, which carry no flags).
                return Err(Error::of(sys::ABR_ERR_READ_ONLY, format!("copy_many: pair {}: the destination is READ_ONLY", i)));
            }
        }
        let srcs: Vec<*const sys::DLTensor> = pairs.iter().map(|(s, _)| s.dl_tensor() as *const _).collect();
        let dsts: Vec<*const sys::DLTensor> = pairs.iter().map(|(_, d)| d.dl_tensor() as *const _).collect();
        let mut paths = vec![sys::ABR_PATH_NONE; srcs.len()];
        let mut result_flags = vec![0u32; srcs.len()];
        let mut report = sys::ABR_BATCH_REPORT_INIT;
        report.paths = paths.as_mut_ptr();
        report.result_flags = result_flags.as_mut_ptr();
        let mut o = options.raw(ptr::null_mut());
        o.copy = sys::ABR_COPY_IF_NEEDED;
        o.dtype = sys::DLDataType::default();
        check(unsafe {
            sys::abr_copy_many(self.raw.as_ptr(), srcs.as_ptr(), dsts.as_ptr(), srcs.len(), &o, stream_ptr(stream), &mut report)
        })?;
        if let Some(stream) = stream {
            stream.synchronize()?;
        }
        for (_, d) in pairs.iter_mut() {
            d.overwritten();
        }
        Ok(BatchReport::from_raw(&report, paths, result_flags))
    }

    pub fn pool_stats(&self) -> Result<PoolStats> {
        let mut stats = sys::ABR_POOL_STATS_INIT;
        check(unsafe { sys::abr_pool_get_stats(self.raw.as_ptr(), &mut stats) })?;
        Ok(stats.into())
    }
    /// Frees every cached block no stream is using; returns the bytes released.
    pub fn pool_trim(&self) -> Result<u64> {
        let mut released = 0;
        check(unsafe { sys::abr_pool_trim(self.raw.as_ptr(), &mut released) })?;
        Ok(released)
    }
    /// The most the pool will pin; 0 restores the default.
    pub fn set_pool_limit(&self, limit_bytes: u64) -> Result<()> {
        check(unsafe { sys::abr_pool_set_limit(self.raw.as_ptr(), limit_bytes) })
    }
    pub fn device_cache_stats(&self) -> Result<PoolStats> {
        let mut stats = sys::ABR_POOL_STATS_INIT;
        check(unsafe { sys::abr_device_cache_get_stats(self.raw.as_ptr(), &mut stats) })?;
        Ok(stats.into())
    }
    /// The most CUDA memory kept cached; 0 restores the default.
    pub fn set_device_cache_limit(&self, limit_bytes: u64) -> Result<()> {
        check(unsafe { sys::abr_device_cache_set_limit(self.raw.as_ptr(), limit_bytes) })
    }
    /// How staged transfers planned from now on are cut: host threads (1..256) and
    /// chunk bytes (64 KiB..1 GiB); 0 keeps the default for either.
    pub fn set_staging(&self, threads: u32, chunk_bytes: u64) -> Result<()> {
        check(unsafe { sys::abr_runtime_set_staging(self.raw.as_ptr(), threads, chunk_bytes) })
    }

    /// Shares a CUDA tensor with another process. The tensor (and this runtime)
    /// must stay alive until every importer has dropped its tensor. A READ_ONLY
    /// tensor is refused (`ABR_ERR_READ_ONLY`): the importer opens the memory
    /// writable, as a DLTensor carries no flags; export a copy of it instead.
    pub fn ipc_export(&self, tensor: &Tensor, stream: Option<&Stream>) -> Result<IpcHandle> {
        if tensor.is_read_only() {
            return Err(Error::of(
                sys::ABR_ERR_READ_ONLY,
                "ipc_export: the tensor is READ_ONLY (its owner treats it as immutable), and an IPC handle opens its \
                 memory writable in the other process; export a copy (CopyMode::Always)",
            ));
        }
        tensor.settled()?;
        let mut h = sys::ABR_IPC_HANDLE_INIT;
        check(unsafe { sys::abr_ipc_export(self.raw.as_ptr(), tensor.dl_tensor(), stream_ptr(stream), &mut h) })?;
        Ok(IpcHandle(h))
    }
    /// A zero-copy tensor on the memory behind a handle another process exported.
    pub fn ipc_import(&self, handle: &IpcHandle, stream: Option<&Stream>) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::abr_ipc_import(self.raw.as_ptr(), &handle.0, stream_ptr(stream), &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) }.expect("abr_ipc_import returned OK and NULL"))
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        unsafe { sys::abr_runtime_destroy(self.raw.as_ptr()) }
    }
}

// ======================================================================== streams and events

/// An ordered queue of work on one device (a CUDA stream, an OpenCL command queue,
/// or the CPU's inline stream). Dropping it waits for its work and destroys it;
/// `release` lets go without waiting. A stream may outlive its runtime.
pub struct Stream {
    raw: NonNull<sys::abr_stream>,
}

unsafe impl Send for Stream {}

impl Stream {
    pub fn new(runtime: &Runtime, device: Device) -> Result<Stream> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::abr_stream_create(runtime.raw.as_ptr(), device.0, &mut raw) })?;
        Ok(Stream { raw: NonNull::new(raw).expect("abr_stream_create returned OK and NULL") })
    }

    /// Borrows a caller's native stream (a cudaStream_t or an in-order cl_command_queue).
    ///
    /// # Safety
    /// `native` must be a valid native stream of `device`'s backend that outlives
    /// the returned `Stream` and the work queued on it.
    pub unsafe fn wrap(runtime: &Runtime, device: Device, native: *mut c_void) -> Result<Stream> {
        let mut raw = ptr::null_mut();
        check(sys::abr_stream_wrap(runtime.raw.as_ptr(), device.0, native, &mut raw))?;
        Ok(Stream { raw: NonNull::new(raw).expect("abr_stream_wrap returned OK and NULL") })
    }

    pub fn as_raw(&self) -> *mut sys::abr_stream {
        self.raw.as_ptr()
    }
    /// Blocks until all work submitted to the stream has completed.
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { sys::abr_stream_synchronize(self.raw.as_ptr()) })
    }
    /// Work submitted to `self` from now on starts after `other`'s work so far.
    pub fn wait(&self, other: &Stream) -> Result<()> {
        check(unsafe { sys::abr_stream_wait(self.raw.as_ptr(), other.raw.as_ptr()) })
    }
    /// Work submitted to `self` from now on starts after the event's work.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        check(unsafe { sys::abr_stream_wait_event(self.raw.as_ptr(), event.raw.as_ptr()) })
    }
    /// An event complete once the work submitted so far has completed.
    pub fn record(&self) -> Result<Event> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::abr_event_record(self.raw.as_ptr(), &mut raw) })?;
        Ok(Event { raw: NonNull::new(raw).expect("abr_event_record returned OK and NULL") })
    }
    /// Lets go of the stream without waiting: its queued work goes on.
    pub fn release(self) {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        unsafe { sys::abr_stream_release(raw) }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        unsafe { sys::abr_stream_destroy(self.raw.as_ptr()) }
    }
}

/// A point in a stream's order. Outlives its stream; dropping it never waits.
pub struct Event {
    raw: NonNull<sys::abr_event>,
}

unsafe impl Send for Event {}

impl Event {
    pub fn as_raw(&self) -> *mut sys::abr_event {
        self.raw.as_ptr()
    }
    /// Never blocks: true once the work is complete, false while it runs; the work's failure once it failed.
    pub fn query(&self) -> Result<bool> {
        match unsafe { sys::abr_event_query(self.raw.as_ptr()) } {
            sys::ABR_OK => Ok(true),
            sys::ABR_NOT_READY => Ok(false),
            status => Err(Error::last(status)),
        }
    }
    /// Blocks until the work is complete; its failure, if any, is the error.
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { sys::abr_event_synchronize(self.raw.as_ptr()) })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        unsafe { sys::abr_event_destroy(self.raw.as_ptr()) }
    }
}

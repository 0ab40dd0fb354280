// Shared by the integration tests: a managed tensor built by hand, as another
// library would hand one over, whose deleter counts its calls.
#![allow(dead_code)]
use arraybridge::sys;
use arraybridge::{Device, Runtime, Tensor};
use std::os::raw::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Counted {
    pub managed: sys::DLManagedTensorVersioned,
    pub data: Vec<f32>,
    pub shape: Vec<i64>,
    deleted: AtomicUsize,
}

unsafe extern "C" fn count_delete(managed: *mut sys::DLManagedTensorVersioned) {
    let owner = (*managed).manager_ctx as *const Counted;
    (*owner).deleted.fetch_add(1, Ordering::SeqCst);
}

impl Counted {
    /// A 1-D float32 CPU tensor over `data`, with `ndim` as given (so a test can make it invalid).
    pub fn new(data: Vec<f32>, ndim: i32) -> Box<Counted> {
        let n = data.len() as i64;
        let mut c = Box::new(Counted {
            managed: sys::DLManagedTensorVersioned {
                version: sys::DLPackVersion { major: sys::DLPACK_MAJOR_VERSION, minor: sys::DLPACK_MINOR_VERSION },
                manager_ctx: ptr::null_mut(),
                deleter: Some(count_delete),
                flags: 0,
                dl_tensor: sys::DLTensor {
                    data: ptr::null_mut(),
                    device: Device::CPU.0,
                    ndim,
                    dtype: sys::DLDataType { code: sys::kDLFloat, bits: 32, lanes: 1 },
                    shape: ptr::null_mut(),
                    strides: ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            data,
            shape: vec![n],
            deleted: AtomicUsize::new(0),
        });
        c.managed.dl_tensor.data = c.data.as_mut_ptr() as *mut c_void;
        c.managed.dl_tensor.shape = c.shape.as_mut_ptr();
        c.managed.manager_ctx = &*c as *const Counted as *mut c_void;
        c
    }
    /// A `Tensor` owning the managed tensor: the box must outlive it.
    pub fn tensor(&mut self) -> Tensor {
        unsafe { Tensor::from_raw(&mut self.managed) }.unwrap()
    }
    pub fn deleted(&self) -> usize {
        self.deleted.load(Ordering::SeqCst)
    }
}

pub fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.5 - 3.0).collect()
}

/// The first OpenCL device ("opencl:0" is PoCL on the CPU in CI).
pub fn opencl_device(rt: &Runtime) -> Device {
    let device: Device = "opencl:0".parse().unwrap();
    assert!(
        rt.devices().unwrap().iter().any(|d| d.device == device),
        "no opencl:0: these tests need one (PoCL in CI): {}",
        rt.backend_info(arraybridge::Backend::OPENCL).map(|b| b.detail).unwrap_or_default()
    );
    device
}

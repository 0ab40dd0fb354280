// Round trips through the built library from Rust: CPU and OpenCL (PoCL in CI),
// deleters counted, errors read back with their text, sources handed back on failure.
use arraybridge::sys;
use arraybridge::{opencl, Runtime, Tensor, CPU};
use std::os::raw::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A managed tensor built by hand, as another library would hand one over, whose
/// deleter counts its calls.
struct Counted {
    managed: sys::DLManagedTensorVersioned,
    data: Vec<f32>,
    shape: Vec<i64>,
    deleted: AtomicUsize,
}

unsafe extern "C" fn count_delete(managed: *mut sys::DLManagedTensorVersioned) {
    let owner = (*managed).manager_ctx as *const Counted;
    (*owner).deleted.fetch_add(1, Ordering::SeqCst);
}

impl Counted {
    fn new(data: Vec<f32>, ndim: i32) -> Box<Counted> {
        let n = data.len() as i64;
        let mut c = Box::new(Counted {
            managed: sys::DLManagedTensorVersioned {
                version: sys::DLPackVersion { major: sys::DLPACK_MAJOR_VERSION, minor: sys::DLPACK_MINOR_VERSION },
                manager_ctx: ptr::null_mut(),
                deleter: Some(count_delete),
                flags: 0,
                dl_tensor: sys::DLTensor {
                    data: ptr::null_mut(),
                    device: CPU,
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
    fn tensor(&mut self) -> Tensor {
        unsafe { Tensor::from_raw(&mut self.managed) }.unwrap()
    }
    fn deleted(&self) -> usize {
        self.deleted.load(Ordering::SeqCst)
    }
}

fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.5 - 3.0).collect()
}

#[test]
fn the_crate_matches_the_library_version() {
    assert_eq!(arraybridge::version(), env!("CARGO_PKG_VERSION"), "the hand-written declarations may be stale");
}

#[test]
fn cpu_copy_consumes_the_source_once_and_returns_equal_values() {
    let rt = Runtime::new().unwrap();
    let mut src = Counted::new(values(1000), 1);
    let (out, report) = rt.to_device(src.tensor(), CPU, sys::ABR_COPY_ALWAYS).unwrap();
    assert_eq!(src.deleted(), 1, "the runtime deletes the source once the copy is done");
    assert_eq!(report.path, sys::ABR_PATH_HOST_COPY);
    assert_eq!(report.path_name, "host_copy");
    assert_eq!(report.bytes_moved, 4000);
    assert!(out.flags() & sys::DLPACK_FLAG_BITMASK_IS_COPIED != 0);
    assert_eq!(out.to_vec::<f32>().unwrap(), values(1000));
    drop(out);
    assert_eq!(src.deleted(), 1);
}

#[test]
fn a_zero_copy_view_keeps_the_source_until_the_view_is_dropped() {
    let rt = Runtime::new().unwrap();
    let mut src = Counted::new(values(16), 1);
    let source_data = src.data.as_ptr() as *const u8;
    let (view, report) = rt.to_device(src.tensor(), CPU, sys::ABR_COPY_NEVER).unwrap();
    assert_eq!(report.path, sys::ABR_PATH_ZERO_COPY);
    assert_eq!(view.data_ptr(), source_data, "a view shares the source's memory");
    assert_eq!(src.deleted(), 0);
    drop(view);
    assert_eq!(src.deleted(), 1);
}

#[test]
fn opencl_round_trip_on_the_first_opencl_device() {
    let rt = Runtime::new().unwrap();
    let devices = rt.devices().unwrap();
    let device = devices
        .iter()
        .find(|d| d.backend == sys::ABR_BACKEND_OPENCL)
        .expect("no OpenCL device: this test needs one (PoCL in CI)")
        .device;
    let (on_device, up) = rt.to_device(Tensor::from_vec(values(4096), &[64, 64]), device, sys::ABR_COPY_ALWAYS).unwrap();
    assert_eq!(up.path, sys::ABR_PATH_HOST_TO_DEVICE);
    assert_eq!(on_device.device(), device);
    assert_eq!(on_device.shape(), vec![64, 64]);
    let (back, down) = rt.to_device(on_device, CPU, sys::ABR_COPY_ALWAYS).unwrap();
    assert_eq!(down.path, sys::ABR_PATH_DEVICE_TO_HOST);
    assert_eq!(down.bytes_moved, 4096 * 4);
    assert_eq!(back.to_vec::<f32>().unwrap(), values(4096));

    let mut counted = Counted::new(values(256), 1);
    let (copy, _) = rt.to_device(counted.tensor(), device, sys::ABR_COPY_ALWAYS).unwrap();
    assert_eq!(counted.deleted(), 1, "a synchronous upload releases its source at once");
    drop(copy);
    assert_eq!(counted.deleted(), 1);
}

#[test]
fn errors_carry_status_name_and_text_and_hand_the_source_back() {
    let rt = Runtime::new().unwrap();
    let mut bad = Counted::new(values(4), -1);
    let failed = rt.to_device(bad.tensor(), CPU, sys::ABR_COPY_ALWAYS).unwrap_err();
    assert_eq!(failed.error.status, sys::ABR_ERR_DLPACK_NDIM);
    assert_eq!(failed.error.name, "ABR_ERR_DLPACK_NDIM");
    assert!(failed.error.message.contains("ndim = -1"), "message: {}", failed.error.message);
    assert_eq!(bad.deleted(), 0, "a failed transfer leaves the source to its owner");
    drop(failed);
    assert_eq!(bad.deleted(), 1, "and the owner's drop deletes it once");

    let failed = rt.to_device(Tensor::from_vec(values(4), &[4]), opencl(99), sys::ABR_COPY_ALWAYS).unwrap_err();
    assert_eq!(failed.error.status, sys::ABR_ERR_NO_DEVICE);
    assert!(failed.error.message.contains("opencl:99"), "message: {}", failed.error.message);
    assert_eq!(failed.source.to_vec::<f32>().unwrap(), values(4));
}

#[test]
fn pool_statistics_are_readable() {
    let rt = Runtime::new().unwrap();
    let stats = rt.pool_stats().unwrap();
    assert_eq!(stats.version, sys::ABR_POOL_STATS_VERSION);
    assert!(stats.limit_bytes > 0);
    assert_eq!(stats.bytes_in_use, 0);
}

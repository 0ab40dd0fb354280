// CUDA: on a real driver when there is one, and under the fake driver the build
// makes (build/fake-cuda/libcuda.so.1, selected with ARRAYBRIDGE_CUDA_LIBRARY) in
// a child process, since the driver is chosen once per process. Without either,
// each test says it skipped, on stderr (not captured by the test harness).
mod common;
use arraybridge::sys;
use arraybridge::{Backend, CopyMode, Device, Runtime, Stream, Tensor, TransferOptions};
use common::values;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

const CHILD: &str = "ARRAYBRIDGE_RUST_FAKE_CUDA_CHILD";

fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIP {}: {}", test, why);
}

/// The first CUDA device, or why there is none.
fn cuda_device(rt: &Runtime) -> Result<Device, String> {
    let info = rt.backend_info(Backend::CUDA).map_err(|e| e.to_string())?;
    if !info.available || info.device_count < 1 {
        return Err(format!("abr_backend_info(CUDA) says unavailable: {}", info.detail));
    }
    Ok(Device::cuda(0))
}

fn exercise_cuda(rt: &Runtime, device: Device) {
    let always = TransferOptions::copy(CopyMode::Always);
    // Round trip, synchronous and on a stream with an event.
    let (on_gpu, up) = rt.to_device(Tensor::from_vec(values(4096), &[64, 64]), device, &always, None).unwrap();
    assert_eq!(on_gpu.device(), device);
    assert_ne!(up.path, sys::ABR_PATH_NONE);
    let stream = Stream::new(rt, device).unwrap();
    let (again, _) = rt.to_device(Tensor::from_vec(values(1000), &[1000]), device, &always, Some(&stream)).unwrap();
    let event = stream.record().unwrap();
    event.synchronize().unwrap();
    assert!(event.query().unwrap());
    let (back, _) = rt.to_device(again, Device::CPU, &always, Some(&stream)).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), values(1000));

    // A batch of small tensors, coalesced.
    let sources: Vec<Tensor> = (1..=4).map(|n| Tensor::from_vec(values(n * 8), &[n as i64 * 8])).collect();
    let (many, report) = rt.to_device_many(sources, device, &always, None).unwrap();
    assert_eq!((many.len(), report.tensors), (4, 4));
    let (many_back, _) = rt.to_device_many(many, Device::CPU, &always, None).unwrap();
    assert_eq!(many_back[3].to_vec::<f32>().unwrap(), values(32));

    // CUDA IPC: in the exporting process the import is a view of the same memory.
    let handle = rt.ipc_export(&on_gpu, None).unwrap();
    assert!(handle.0.size > 0 && handle.as_bytes().len() == handle.0.size as usize);
    let copied = arraybridge::IpcHandle::from_bytes(handle.as_bytes()).unwrap();
    let imported = rt.ipc_import(&copied, None).unwrap();
    assert_eq!(imported.device(), device);
    assert_eq!(imported.shape(), vec![64, 64]);
    let (imported_back, _) = rt.to_device(imported, Device::CPU, &always, None).unwrap();
    assert_eq!(imported_back.to_vec::<f32>().unwrap(), values(4096));
    // A READ_ONLY tensor is not shared: the importer would open it writable (the Rust
    // hunt of 2026-11-30 wrote -1 into one through its import).
    let mut c = common::Counted::new(values(4096), 1);
    c.managed.dl_tensor.device = device.0;
    c.managed.dl_tensor.data = on_gpu.dl_tensor().data;
    c.managed.dl_tensor.byte_offset = on_gpu.dl_tensor().byte_offset;
    c.managed.flags = sys::DLPACK_FLAG_BITMASK_READ_ONLY;
    let read_only = c.tensor();
    let err = rt.ipc_export(&read_only, None).unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_READ_ONLY, "{}", err);
    assert!(err.message.contains("opens its memory writable"), "{}", err);
    drop(read_only);
    drop(on_gpu);

    // Host memory has no CUDA IPC.
    let err = rt.ipc_export(&Tensor::from_vec(values(4), &[4]), None).unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_UNSUPPORTED, "{}", err);

    let cache = rt.device_cache_stats().unwrap();
    assert!(cache.limit_bytes > 0);
    rt.pool_trim().unwrap();
}

#[test]
fn cuda_on_this_machine_s_driver() {
    if std::env::var_os(CHILD).is_some() {
        return; // the child runs only the fake-driver test
    }
    let rt = Runtime::new().unwrap();
    match cuda_device(&rt) {
        Ok(device) => exercise_cuda(&rt, device),
        Err(why) => skip("cuda_on_this_machine_s_driver", &why),
    }
}

#[test]
fn ipc_without_cuda_is_an_error_not_a_crash() {
    let rt = Runtime::with_options(&arraybridge::RuntimeOptions { disable_cuda: true, ..Default::default() }).unwrap();
    let err = rt.ipc_import(&arraybridge::IpcHandle::from_bytes(&[1, 2, 3]).unwrap(), None).map(|_| ()).unwrap_err();
    assert!(err.status < 0, "{}", err);
    assert!(!err.message.is_empty());
    assert!(arraybridge::IpcHandle::from_bytes(&[0; sys::ABR_IPC_HANDLE_BYTES + 1]).is_err());
}

extern "C" {
    fn dlopen(name: *const std::os::raw::c_char, flags: i32) -> *mut std::os::raw::c_void;
    fn dlsym(handle: *mut std::os::raw::c_void, name: *const std::os::raw::c_char) -> *mut std::os::raw::c_void;
}

/// The fake driver's fake_cuda_control(what, value), in the child the driver was loaded into.
fn fake_control(what: &str, value: i64) {
    let path = std::ffi::CString::new(std::env::var("ARRAYBRIDGE_CUDA_LIBRARY").unwrap()).unwrap();
    let handle = unsafe { dlopen(path.as_ptr(), 1 | 4) }; // RTLD_LAZY | RTLD_NOLOAD: the library's own
    assert!(!handle.is_null(), "the fake driver is not loaded");
    let control = unsafe { dlsym(handle, b"fake_cuda_control\0".as_ptr() as _) };
    assert!(!control.is_null(), "the fake driver has no fake_cuda_control");
    let control: extern "C" fn(*const std::os::raw::c_char, i64) -> i32 = unsafe { std::mem::transmute(control) };
    let what = std::ffi::CString::new(what).unwrap();
    assert_eq!(control(what.as_ptr(), value), 0, "fake_cuda_control({:?})", what);
}

/// The Rust hunt of 2026-11-30: a queued transfer whose work failed was forgotten after
/// the first wait that said so (`wait_pending` dropped the event): `to_vec` then read
/// what the failed work left in the pinned pool, and `copy`, `to_device_many` (retried
/// with the sources its error gave back) and `into_raw` passed it on as a result.
fn a_failed_queued_transfer_stays_failed(rt: &Runtime, device: Device) {
    let n = 100_000;
    let source: Vec<f32> = (0..n).map(|i| i as f32 + 0.25).collect();
    let always = TransferOptions::copy(CopyMode::Always);
    let stream = Stream::new(rt, device).unwrap();
    let (first, _) = rt.to_device(Tensor::from_vec(source.clone(), &[n as i64]), device, &always, None).unwrap();
    let (second, _) = rt.to_device(Tensor::from_vec(source.clone(), &[n as i64]), device, &always, None).unwrap();
    fake_control("delay_us", 50_000);
    fake_control("fault_launch", 1); // the next kernel (the cast below) fails, and the stream with it
    let cast = TransferOptions { copy: CopyMode::Always, dtype: Some(arraybridge::DType::F64), ..Default::default() };
    let (_cast, _) = rt.to_device(first, device, &cast, Some(&stream)).unwrap();
    let (mut back, _) = rt.to_device(second, Device::CPU, &always, Some(&stream)).unwrap();
    let failure = back.synchronize().unwrap_err();
    assert_eq!(back.synchronize().unwrap_err(), failure, "a second wait forgot the failure");
    assert_eq!(back.to_vec::<f32>().unwrap_err(), failure, "to_vec read what the failed work left");
    let mut into = Tensor::zeros::<f32>(&[n as i64]);
    assert_eq!(rt.copy(&back, &mut into, &TransferOptions::default(), None).unwrap_err(), failure);
    assert!(into.to_vec::<f32>().unwrap().iter().all(|v| *v == 0.0), "copy wrote the failed result");
    let sources = vec![Tensor::from_vec(source[..8].to_vec(), &[8]), back];
    let refused = rt.to_device_many(sources, Device::CPU, &always, None).unwrap_err();
    assert!(refused.error.message.starts_with("to_device_many: source 1: "), "{}", refused.error);
    let again = rt.to_device_many(refused.sources, Device::CPU, &always, None).unwrap_err();
    assert_eq!(again.error.status, failure.status, "a retry moved the failed result: {}", again.error);
    let back = again.sources.into_iter().nth(1).unwrap();
    let (error, mut back) = back.into_raw().unwrap_err();
    assert_eq!(error, failure);
    fake_control("delay_us", 0);
    // A copy that writes every element of it leaves nothing of the failed work: the
    // failure goes (on a device still there: the fake's fault was the kernel's alone).
    let fresh = Tensor::from_vec(source.clone(), &[n as i64]);
    if rt.copy(&fresh, &mut back, &TransferOptions::default(), None).is_ok() {
        assert_eq!(back.to_vec::<f32>().unwrap(), source);
    }
}

#[test]
fn cuda_on_the_fake_driver() {
    if std::env::var_os(CHILD).is_some() {
        let rt = Runtime::new().unwrap();
        let device = cuda_device(&rt).expect("the fake driver did not load");
        exercise_cuda(&rt, device);
        a_failed_queued_transfer_stays_failed(&rt, device);
        return;
    }
    let fake = PathBuf::from(sys::LIB_DIR).join("../fake-cuda/libcuda.so.1");
    if std::env::var_os("ARRAYBRIDGE_CUDA_LIBRARY").is_some() {
        return skip("cuda_on_the_fake_driver", "ARRAYBRIDGE_CUDA_LIBRARY is set already (cuda_on_this_machine_s_driver uses it)");
    }
    if !fake.exists() {
        return skip("cuda_on_the_fake_driver", &format!("no fake driver at {}", fake.display()));
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["cuda_on_the_fake_driver", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("ARRAYBRIDGE_CUDA_LIBRARY", &fake)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the child under the fake driver failed:\n{}", text);
    assert!(text.contains("1 passed"), "the child ran no test:\n{}", text);
}

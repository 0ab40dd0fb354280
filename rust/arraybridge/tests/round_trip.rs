// Round trips through the built library from Rust: CPU and OpenCL (PoCL in CI),
// deleters counted, errors read back with their text, sources handed back on failure.
mod common;
use arraybridge::sys;
use arraybridge::{Backend, CopyMode, Device, Runtime, Tensor, TransferOptions};
use common::{values, Counted};

fn always() -> TransferOptions {
    TransferOptions::copy(CopyMode::Always)
}

#[test]
fn the_crate_matches_the_library_version() {
    assert_eq!(arraybridge::version(), env!("CARGO_PKG_VERSION"), "the hand-written declarations may be stale");
    assert_eq!(arraybridge::version_number(), sys::ABR_VERSION_NUMBER);
}

#[test]
fn cpu_copy_consumes_the_source_once_and_returns_equal_values() {
    let rt = Runtime::new().unwrap();
    let mut src = Counted::new(values(1000), 1);
    let (out, report) = rt.to_device(src.tensor(), Device::CPU, &always(), None).unwrap();
    assert_eq!(src.deleted(), 1, "the runtime deletes the source once the copy is done");
    assert_eq!(report.path, sys::ABR_PATH_HOST_COPY);
    assert_eq!(report.path_name, "host_copy");
    assert_eq!(report.bytes_moved, 4000);
    assert!(out.is_copied());
    assert_eq!(out.to_vec::<f32>().unwrap(), values(1000));
    drop(out);
    assert_eq!(src.deleted(), 1);
}

#[test]
fn a_zero_copy_view_keeps_the_source_until_the_view_is_dropped() {
    let rt = Runtime::new().unwrap();
    let mut src = Counted::new(values(16), 1);
    let source_data = src.data.as_ptr() as *const u8;
    let (view, report) = rt.to_device(src.tensor(), Device::CPU, &TransferOptions::copy(CopyMode::Never), None).unwrap();
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
        .find(|d| d.backend == Backend::OPENCL)
        .expect("no OpenCL device: this test needs one (PoCL in CI)")
        .device;
    let (on_device, up) = rt.to_device(Tensor::from_vec(values(4096), &[64, 64]), device, &always(), None).unwrap();
    assert_eq!(up.path, sys::ABR_PATH_HOST_TO_DEVICE);
    assert_eq!(on_device.device(), device);
    assert_eq!(on_device.shape(), vec![64, 64]);
    let err = on_device.to_vec::<f32>().unwrap_err();
    assert!(err.message.contains("which the host does not read in place"), "device memory is not read in place: {}", err);
    let (back, down) = rt.to_device(on_device, Device::CPU, &always(), None).unwrap();
    assert_eq!(down.path, sys::ABR_PATH_DEVICE_TO_HOST);
    assert_eq!(down.bytes_moved, 4096 * 4);
    assert_eq!(back.to_vec::<f32>().unwrap(), values(4096));

    let mut counted = Counted::new(values(256), 1);
    let (copy, _) = rt.to_device(counted.tensor(), device, &always(), None).unwrap();
    assert_eq!(counted.deleted(), 1, "a synchronous upload releases its source at once");
    drop(copy);
    assert_eq!(counted.deleted(), 1);
}

#[test]
fn errors_carry_status_name_and_text_and_hand_the_source_back() {
    let rt = Runtime::new().unwrap();
    let mut bad = Counted::new(values(4), -1);
    let failed = rt.to_device(bad.tensor(), Device::CPU, &always(), None).unwrap_err();
    assert_eq!(failed.error.status, sys::ABR_ERR_DLPACK_NDIM);
    assert_eq!(failed.error.name, "ABR_ERR_DLPACK_NDIM");
    assert!(failed.error.message.contains("ndim = -1"), "message: {}", failed.error.message);
    assert!(failed.to_string().starts_with("ABR_ERR_DLPACK_NDIM: "), "{}", failed);
    assert_eq!(bad.deleted(), 0, "a failed transfer leaves the source to its owner");
    drop(failed);
    assert_eq!(bad.deleted(), 1, "and the owner's drop deletes it once");

    let failed = rt.to_device(Tensor::from_vec(values(4), &[4]), Device::opencl(99), &always(), None).unwrap_err();
    assert_eq!(failed.error.status, sys::ABR_ERR_NO_DEVICE);
    assert!(failed.error.message.contains("opencl:99"), "message: {}", failed.error.message);
    assert_eq!(failed.source.to_vec::<f32>().unwrap(), values(4));
}

/// Eight floats starting `offset_floats` into a buffer aligned to `align` bytes
/// (the buffer's own start placed there by a byte offset), so the test, not
/// the allocator, decides whether the data is aligned.
fn placed(align: usize, offset_floats: usize) -> Box<Counted> {
    let mut counted = Counted::new(vec![0.0; align / 4 + 16], 1);
    let start = counted.data.as_ptr() as usize;
    let skip = (align - start % align) % align / 4 + offset_floats;
    counted.data[skip..skip + 8].copy_from_slice(&values(8));
    counted.shape[0] = 8;
    counted.managed.dl_tensor.byte_offset = (skip * 4) as u64;
    counted
}

#[test]
fn copy_never_refuses_a_transfer_that_needs_a_copy() {
    let rt = Runtime::new().unwrap();
    let device = common::opencl_device(&rt);
    // Four bytes past a page: misaligned for any device's base-address alignment
    // (PoCL wants 128 bytes), so this needs a copy even where host memory is shared.
    // It was a plain Vec once, and failed whenever malloc returned 128-aligned memory.
    let mut misaligned = placed(4096, 1);
    let failed = rt.to_device(misaligned.tensor(), device, &TransferOptions::copy(CopyMode::Never), None)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(failed.error.status, sys::ABR_ERR_COPY_REQUIRED, "{}", failed.error);
    assert!(failed.error.message.contains("aligned"), "message: {}", failed.error.message);
    drop(failed);
    assert_eq!(misaligned.deleted(), 1, "the refused source is deleted once, by its owner's drop");

    // Page-aligned data on a device that shares host memory is used in place.
    let shares = rt.devices().unwrap().iter().any(|d| d.device == device && d.shares_host_memory);
    let mut aligned = placed(4096, 0);
    match rt.to_device(aligned.tensor(), device, &TransferOptions::copy(CopyMode::Never), None) {
        Ok((wrapped, report)) => {
            assert!(shares, "{} does not share host memory, yet nothing was copied", device.format().unwrap());
            assert_eq!(report.path, sys::ABR_PATH_HOST_WRAP);
            assert_eq!(report.bytes_moved, 0);
            assert_eq!(aligned.deleted(), 0, "the wrapped buffer keeps its source");
            let (back, _) = rt.to_device(wrapped, Device::CPU, &always(), None).unwrap();
            assert_eq!(back.to_vec::<f32>().unwrap(), values(8));
            assert_eq!(aligned.deleted(), 1, "and releases it with the buffer");
        }
        Err(failed) => {
            assert!(!shares, "a device that shares host memory refused aligned data: {}", failed.error);
            assert_eq!(failed.error.status, sys::ABR_ERR_COPY_REQUIRED, "{}", failed.error);
        }
    }
}

#[test]
fn a_dtype_cast_on_the_way() {
    let rt = Runtime::new().unwrap();
    let options = TransferOptions { copy: CopyMode::Always, dtype: Some("float64".parse().unwrap()), ..Default::default() };
    let (out, report) = rt.to_device(Tensor::from_vec(values(10), &[2, 5]), Device::CPU, &options, None).unwrap();
    assert!(report.flags & sys::ABR_REPORT_CAST != 0, "{:?}", report);
    let expected: Vec<f64> = values(10).into_iter().map(f64::from).collect();
    assert_eq!(out.to_vec::<f64>().unwrap(), expected);
    assert_eq!(out.dtype().to_string(), "float64");
}

#[test]
fn legacy_tensors_go_both_ways() {
    let rt = Runtime::new().unwrap();
    let (t, _) = rt.to_device(Tensor::from_vec(values(6), &[6]), Device::CPU, &always(), None).unwrap();
    let legacy = t.into_legacy().unwrap();
    assert_eq!(legacy.device(), Device::CPU);
    let (back, _) = rt.to_device_legacy(legacy, Device::CPU, &always()).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), values(6));
}

#[test]
fn device_info_and_backends() {
    let rt = Runtime::new().unwrap();
    let devices = rt.devices().unwrap();
    assert_eq!(devices[0].device, Device::CPU, "the CPU comes first");
    assert_eq!(devices[0].backend, Backend::HOST);
    let host = rt.backend_info(Backend::HOST).unwrap();
    assert!(host.available && host.device_count == 1, "{:?}", host);
    let opencl = rt.backend_info(Backend::OPENCL).unwrap();
    assert!(opencl.available, "{:?}", opencl);
    let kinds = arraybridge::device_kinds().unwrap();
    assert_eq!(kinds[0].name, "cpu");
    assert!(kinds.iter().any(|k| k.name == "opencl" && k.device_type == sys::kDLOpenCL));

    let without = Runtime::with_options(&arraybridge::RuntimeOptions { disable_opencl: true, ..Default::default() }).unwrap();
    assert!(without.devices().unwrap().iter().all(|d| d.backend != Backend::OPENCL));
}

/// The Rust hunt of 2026-11-30: to_vec made a `&[f32]` of an address 2 mod 4 (DLPack
/// allows a byte_offset that is not aligned, and the library's views keep it): a
/// debug build aborted, a release build read it as undefined behaviour.
#[test]
fn to_vec_reads_elements_that_are_not_aligned() {
    let rt = Runtime::new().unwrap();
    let mut c = Counted::new(values(5), 1);
    c.shape[0] = 4;
    c.managed.dl_tensor.byte_offset = 2;
    let bytes: Vec<u8> = c.data.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let expected: Vec<u32> =
        (0..4).map(|i| u32::from_ne_bytes(bytes[2 + 4 * i..6 + 4 * i].try_into().unwrap())).collect();
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<u32>>();
    let tensor = c.tensor();
    assert_eq!(bits(tensor.to_vec::<f32>().unwrap()), expected);
    let (view, report) = rt.to_device(tensor, Device::CPU, &TransferOptions::copy(CopyMode::Never), None).unwrap();
    assert_eq!(report.path, sys::ABR_PATH_ZERO_COPY);
    assert_eq!(bits(view.to_vec::<f32>().unwrap()), expected);
}

#[test]
fn to_vec_says_why_it_cannot_read() {
    let tensor = Tensor::from_vec(values(6), &[2, 3]);
    let err = tensor.to_vec::<i32>().unwrap_err();
    assert_eq!((err.status, err.message.as_str()), (sys::ABR_ERR_INVALID_ARGUMENT, "to_vec: the tensor holds float32, not int32"));
}

#[test]
#[should_panic(expected = "shape [-1, -2]: extent -1 is negative")]
fn from_vec_refuses_a_negative_extent_that_multiplies_to_its_length() {
    // It took [-1, -2] for two elements, a tensor the library then refused.
    Tensor::from_vec(values(2), &[-1, -2]);
}

#[test]
#[should_panic(expected = "its element count overflows usize")]
fn from_vec_refuses_a_shape_whose_count_overflows() {
    // A release build wrapped 2^32 * 2^32 to 0 and took an empty Vec for it.
    Tensor::from_vec(Vec::<f32>::new(), &[1 << 32, 1 << 32]);
}

#[test]
#[should_panic(expected = "shape [-1]: extent -1 is negative")]
fn zeros_refuses_a_negative_extent_by_name() {
    // It panicked with "capacity overflow".
    Tensor::zeros::<f32>(&[-1]);
}

/// The review of 2026-11-30: to_vec of an empty tensor copied 0 bytes from its data,
/// which DLPack lets be NULL (undefined behaviour even at length 0); and a shape with a
/// zero extent panicked as overflowing when its other extents multiplied past usize.
#[test]
fn empty_tensors_read_as_empty() {
    let mut c = Counted::new(Vec::new(), 1);
    c.managed.dl_tensor.data = std::ptr::null_mut();
    assert_eq!(c.tensor().to_vec::<f32>().unwrap(), Vec::<f32>::new());
    assert_eq!(c.deleted(), 1);
    assert_eq!(Tensor::zeros::<f32>(&[1 << 32, 1 << 32, 0]).to_vec::<f32>().unwrap(), Vec::<f32>::new());
}

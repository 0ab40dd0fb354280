// to_device_many and copy_many: batch reports, sources handed back on failure.
mod common;
use arraybridge::sys;
use arraybridge::{Casting, CopyMode, Device, Runtime, Stream, Tensor, TransferOptions};
use common::{values, Counted};

#[test]
fn many_small_tensors_go_to_opencl_and_back() {
    let rt = Runtime::new().unwrap();
    let device = common::opencl_device(&rt);
    let sources: Vec<Tensor> = (1..=5).map(|n| Tensor::from_vec(values(n * 10), &[n as i64 * 10])).collect();
    let options = TransferOptions::copy(CopyMode::Always);
    let (on_device, report) = rt.to_device_many(sources, device, &options, None).unwrap();
    assert_eq!(report.tensors, 5);
    assert_eq!(on_device.len(), 5);
    assert_eq!(report.bytes_moved, (10 + 20 + 30 + 40 + 50) * 4);
    assert!(!report.detail.is_empty());
    let stream = Stream::new(&rt, device).unwrap();
    let (back, report) = rt.to_device_many(on_device, Device::CPU, &options, Some(&stream)).unwrap();
    assert_eq!(report.tensors, 5);
    assert_eq!(report.paths, vec![sys::ABR_PATH_DEVICE_TO_HOST; 5]);
    for (n, t) in (1..=5).zip(&back) {
        assert_eq!(t.to_vec::<f32>().unwrap(), values(n * 10));
    }
}

#[test]
fn a_failed_batch_consumes_nothing_and_names_the_index() {
    let rt = Runtime::new().unwrap();
    let mut good = Counted::new(values(4), 1);
    let mut bad = Counted::new(values(4), -1);
    let failed = rt
        .to_device_many(vec![good.tensor(), bad.tensor()], Device::CPU, &TransferOptions::copy(CopyMode::Always), None)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(failed.error.status, sys::ABR_ERR_DLPACK_NDIM);
    assert!(failed.error.message.contains("srcs[1]"), "{}", failed.error);
    assert_eq!((good.deleted(), bad.deleted()), (0, 0));
    assert_eq!(failed.sources.len(), 2);
    drop(failed);
    assert_eq!((good.deleted(), bad.deleted()), (1, 1));
}

#[test]
fn copy_many_fills_each_destination() {
    let rt = Runtime::new().unwrap();
    let device = common::opencl_device(&rt);
    let (a, _) = rt.to_device(Tensor::from_vec(values(16), &[4, 4]), device, &TransferOptions::copy(CopyMode::Always), None).unwrap();
    let b = Tensor::from_vec(values(8), &[8]);
    let mut da = Tensor::zeros::<f32>(&[4, 4]);
    let mut db = Tensor::zeros::<f64>(&[8]);
    let report = rt.copy_many(&mut [(&a, &mut da), (&b, &mut db)], &TransferOptions::default(), None).unwrap();
    assert_eq!(report.tensors, 2);
    assert_eq!(report.paths, vec![sys::ABR_PATH_DEVICE_TO_HOST, sys::ABR_PATH_HOST_COPY]);
    assert_eq!(report.result_flags, vec![0, sys::ABR_REPORT_CAST], "the f32 -> f64 pair says it was cast");
    assert_eq!(da.to_vec::<f32>().unwrap(), values(16));
    let expected: Vec<f64> = values(8).into_iter().map(f64::from).collect();
    assert_eq!(db.to_vec::<f64>().unwrap(), expected, "a dtype difference is converted");

    let mut wrong = Tensor::zeros::<f32>(&[3]);
    let err = rt.copy_many(&mut [(&b, &mut wrong)], &TransferOptions::default(), None).unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_SHAPE_MISMATCH, "{}", err);
}

#[test]
fn copy_checks_shapes_and_reports() {
    let rt = Runtime::new().unwrap();
    let src = Tensor::from_vec(values(6), &[2, 3]);
    let mut dst = Tensor::zeros::<f32>(&[2, 3]);
    let report = rt.copy(&src, &mut dst, &TransferOptions::default(), None).unwrap();
    assert_eq!(report.path, sys::ABR_PATH_HOST_COPY);
    assert_eq!(report.bytes_moved, 24);
    assert_eq!(dst.to_vec::<f32>().unwrap(), values(6));
    let mut wrong = Tensor::zeros::<f32>(&[3, 2]);
    let err = rt.copy(&src, &mut wrong, &TransferOptions::default(), None).unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_SHAPE_MISMATCH);
    assert_eq!(err.name, "ABR_ERR_SHAPE_MISMATCH");
}

#[test]
fn copy_casts_within_a_kind_by_default_and_across_kinds_when_asked() {
    let rt = Runtime::new().unwrap();
    let src = Tensor::from_vec(vec![1.5f64, -2.5], &[2]);
    let mut narrow = Tensor::zeros::<f32>(&[2]);
    rt.copy(&src, &mut narrow, &TransferOptions::default(), None).unwrap();
    assert_eq!(narrow.to_vec::<f32>().unwrap(), vec![1.5, -2.5]);
    let mut ints = Tensor::zeros::<i32>(&[2]);
    let err = rt.copy(&src, &mut ints, &TransferOptions::default(), None).unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_CASTING, "{}", err);
    assert!(err.message.contains("casting \"same_kind\""), "{}", err);
    assert_eq!(ints.to_vec::<i32>().unwrap(), vec![0, 0]);
    let unsafe_cast = TransferOptions { casting: Casting::Unsafe, ..Default::default() };
    rt.copy(&src, &mut ints, &unsafe_cast, None).unwrap();
    assert_eq!(ints.to_vec::<i32>().unwrap(), vec![1, -2]);
    let safe = TransferOptions { casting: Casting::Safe, ..Default::default() };
    assert_eq!(rt.copy(&src, &mut narrow, &safe, None).unwrap_err().status, sys::ABR_ERR_CASTING);
}

/// The Rust hunt of 2026-11-30: a READ_ONLY destination in copy_many was
/// ABR_ERR_INVALID_ARGUMENT naming no pair, where copy says ABR_ERR_READ_ONLY.
#[test]
fn copy_many_refuses_a_read_only_destination_as_copy_does_naming_its_pair() {
    let rt = Runtime::new().unwrap();
    let src = Tensor::from_vec(values(3), &[3]);
    let mut fine = Tensor::zeros::<f32>(&[3]);
    let mut c = Counted::new(vec![0.0; 3], 1);
    c.managed.flags = sys::DLPACK_FLAG_BITMASK_READ_ONLY;
    let mut read_only = c.tensor();
    let alone = rt.copy(&src, &mut read_only, &TransferOptions::default(), None).unwrap_err();
    let err = rt.copy_many(&mut [(&src, &mut fine), (&src, &mut read_only)], &TransferOptions::default(), None).unwrap_err();
    assert_eq!(err.status, alone.status);
    assert_eq!(err.message, "copy_many: pair 1: the destination is READ_ONLY");
    assert_eq!(fine.to_vec::<f32>().unwrap(), vec![0.0; 3], "a pair was written before the refusal");
    drop(read_only);
    assert_eq!(c.deleted(), 1);
}

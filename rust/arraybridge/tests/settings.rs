// Pool and device-cache statistics, limits, staging, names of devices and dtypes,
// logging, and a Tensor's deleter running exactly once.
mod common;
use arraybridge::sys;
use arraybridge::{CopyMode, DType, Device, Runtime, Tensor, TransferOptions};
use common::{values, Counted};

#[test]
fn pool_statistics_are_readable_and_the_limit_settable() {
    let rt = Runtime::new().unwrap();
    let stats = rt.pool_stats().unwrap();
    assert!(stats.limit_bytes > 0);
    assert_eq!(stats.bytes_in_use, 0);
    rt.set_pool_limit(64 << 20).unwrap();
    assert_eq!(rt.pool_stats().unwrap().limit_bytes, 64 << 20);
    rt.set_pool_limit(0).unwrap();
    assert_eq!(rt.pool_stats().unwrap().limit_bytes, stats.limit_bytes, "0 restores the default");

    // A staged or pinned transfer may draw on the pool; after it, nothing is lent.
    let device = common::opencl_device(&rt);
    let (t, _) = rt.to_device(Tensor::from_vec(values(1 << 16), &[1 << 16]), device, &TransferOptions::copy(CopyMode::Always), None).unwrap();
    drop(t);
    let after = rt.pool_stats().unwrap();
    assert_eq!(after.bytes_in_use, 0);
    assert!(after.bytes_pinned >= after.bytes_cached);
    let released = rt.pool_trim().unwrap();
    assert!(released <= after.bytes_pinned);
    assert_eq!(rt.pool_stats().unwrap().bytes_cached, rt.pool_stats().unwrap().bytes_waiting);
}

#[test]
fn device_cache_statistics_and_limit() {
    let rt = Runtime::new().unwrap();
    let stats = rt.device_cache_stats().unwrap();
    assert_eq!(stats.bytes_waiting, 0);
    rt.set_device_cache_limit(1 << 20).unwrap();
    rt.set_device_cache_limit(0).unwrap();
}

#[test]
fn set_staging_takes_valid_shapes_and_refuses_bad_values_naming_them() {
    let rt = Runtime::new().unwrap();
    rt.set_staging(2, 1 << 20).unwrap();
    rt.set_staging(0, 0).unwrap();
    let err = rt.set_staging(1000, 0).unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_INVALID_ARGUMENT);
    assert_eq!(err.name, "ABR_ERR_INVALID_ARGUMENT");
    assert!(err.message.contains("1000"), "the message names the value: {}", err.message);
    let err = rt.set_staging(0, 1).unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_INVALID_ARGUMENT);
    assert!(err.message.contains("chunk") && err.message.contains('1'), "{}", err.message);
}

#[test]
fn devices_parse_and_format_both_ways() {
    for name in ["cpu", "opencl:0", "cuda:1", "cuda_host", "cuda_managed"] {
        let device: Device = name.parse().unwrap();
        assert_eq!(device.to_string(), name);
    }
    assert_eq!(Device::parse(" CUDA ").unwrap(), Device::cuda(0));
    assert_eq!(Device::parse("opencl:2").unwrap(), Device::opencl(2));
    let err = Device::parse("tpu:0").unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_INVALID_ARGUMENT);
    assert!(err.message.contains("tpu:0"), "the message names the text: {}", err.message);
    assert_eq!(Device::parse("cpu\0").unwrap_err().status, sys::ABR_ERR_INVALID_ARGUMENT);
    assert_eq!(Device::new(sys::kDLCPU, 3).format().unwrap_err().status, sys::ABR_ERR_INVALID_ARGUMENT);
}

#[test]
fn dtypes_parse_and_format_both_ways() {
    for name in ["float32", "int8", "uint64", "bool", "bfloat16", "complex64", "float32x4"] {
        let dtype: DType = name.parse().unwrap();
        assert_eq!(dtype.to_string(), name);
    }
    assert_eq!(DType::parse("Float64").unwrap(), DType::F64);
    let err = "flaot32".parse::<DType>().unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_INVALID_ARGUMENT);
    assert!(err.message.contains("flaot32"), "the message names the text: {}", err.message);
}

#[test]
fn a_tensor_deleter_runs_exactly_once() {
    // Dropped directly.
    let mut c = Counted::new(values(3), 1);
    drop(c.tensor());
    assert_eq!(c.deleted(), 1);
    // Through a copy (the runtime deletes it), then the result dropped.
    let rt = Runtime::new().unwrap();
    let mut c = Counted::new(values(3), 1);
    let (out, _) = rt.to_device(c.tensor(), Device::CPU, &TransferOptions::copy(CopyMode::Always), None).unwrap();
    assert_eq!(c.deleted(), 1);
    drop(out);
    assert_eq!(c.deleted(), 1);
    // Through a view, kept alive by the view until it is dropped, across threads.
    let mut c = Counted::new(values(3), 1);
    let (view, _) = rt.to_device(c.tensor(), Device::CPU, &TransferOptions::copy(CopyMode::Never), None).unwrap();
    assert_eq!(c.deleted(), 0);
    std::thread::spawn(move || drop(view)).join().unwrap();
    assert_eq!(c.deleted(), 1);
    // into_raw gives ownership away: the caller deletes.
    let mut c = Counted::new(values(3), 1);
    let raw = c.tensor().into_raw().map_err(|(e, _)| e).unwrap();
    assert_eq!(c.deleted(), 0);
    unsafe { ((*raw).deleter.unwrap())(raw) };
    assert_eq!(c.deleted(), 1);
}

#[test]
fn the_log_level_round_trips() {
    let before = arraybridge::log_level();
    arraybridge::set_log_level(sys::ABR_LOG_ERROR).unwrap();
    assert_eq!(arraybridge::log_level(), sys::ABR_LOG_ERROR);
    arraybridge::set_log_level(before).unwrap();
    assert!(arraybridge::set_log_level(42).is_err());
}

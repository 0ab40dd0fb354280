// Streams and events on the CPU's inline stream and on opencl:0 (PoCL in CI):
// create, record, query, synchronize, wait on streams and events, release.
mod common;
use arraybridge::sys;
use arraybridge::{CopyMode, Device, Runtime, Stream, Tensor, TransferOptions};
use common::{values, Counted};

fn always() -> TransferOptions {
    TransferOptions::copy(CopyMode::Always)
}

#[test]
fn the_cpu_stream_is_inline_and_its_events_are_complete_when_recorded() {
    let rt = Runtime::new().unwrap();
    let stream = Stream::new(&rt, Device::CPU).unwrap();
    let (out, report) = rt.to_device(Tensor::from_vec(values(64), &[8, 8]), Device::CPU, &always(), Some(&stream)).unwrap();
    assert_eq!(report.path, sys::ABR_PATH_HOST_COPY);
    let event = stream.record().unwrap();
    assert!(event.query().unwrap(), "an event on the inline stream is complete when recorded");
    event.synchronize().unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), values(64));
}

#[test]
fn an_opencl_stream_orders_uploads_and_downloads() {
    let rt = Runtime::new().unwrap();
    let device = common::opencl_device(&rt);
    let stream = Stream::new(&rt, device).unwrap();
    let mut src = Counted::new(values(100_000), 1);
    let (on_device, up) = rt.to_device(src.tensor(), device, &always(), Some(&stream)).unwrap();
    assert_eq!(on_device.device(), device);
    assert_ne!(up.path, sys::ABR_PATH_NONE);
    let (back, _) = rt.to_device(on_device, Device::CPU, &always(), Some(&stream)).unwrap();
    let event = stream.record().unwrap();
    event.synchronize().unwrap();
    assert!(event.query().unwrap(), "complete after synchronize");
    stream.synchronize().unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), values(100_000));
    drop(back);
    drop(stream);
    assert_eq!(src.deleted(), 1, "the source is deleted exactly once, when its work is done");
}

#[test]
fn streams_wait_for_other_streams_and_events() {
    let rt = Runtime::new().unwrap();
    let device = common::opencl_device(&rt);
    let producer = Stream::new(&rt, device).unwrap();
    let consumer = Stream::new(&rt, device).unwrap();
    let (on_device, _) = rt.to_device(Tensor::from_vec(values(4096), &[4096]), device, &always(), Some(&producer)).unwrap();
    let ready = producer.record().unwrap();
    consumer.wait_event(&ready).unwrap();
    consumer.wait(&producer).unwrap();
    let (back, _) = rt.to_device(on_device, Device::CPU, &always(), Some(&consumer)).unwrap();
    consumer.synchronize().unwrap();
    assert!(ready.query().unwrap());
    assert_eq!(back.to_vec::<f32>().unwrap(), values(4096));

    // An event outlives its stream; a CPU stream can wait for an OpenCL event.
    let cpu = Stream::new(&rt, Device::CPU).unwrap();
    drop(producer);
    cpu.wait_event(&ready).unwrap();
    ready.synchronize().unwrap();
}

#[test]
fn a_released_stream_finishes_its_work_and_frees_its_sources_later() {
    let rt = Runtime::new().unwrap();
    let device = common::opencl_device(&rt);
    let mut src = Counted::new(values(50_000), 1);
    let on_device = {
        let stream = Stream::new(&rt, device).unwrap();
        let (t, _) = rt.to_device(src.tensor(), device, &always(), Some(&stream)).unwrap();
        stream.release();
        t
    };
    let (back, _) = rt.to_device(on_device, Device::CPU, &always(), None).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), values(50_000));
    drop(rt); // waits for whatever the released stream still held
    assert_eq!(src.deleted(), 1);
}

#[test]
fn a_copy_on_a_stream_has_completed_when_it_returns() {
    let rt = Runtime::new().unwrap();
    let device = common::opencl_device(&rt);
    let stream = Stream::new(&rt, device).unwrap();
    let (on_device, _) = rt.to_device(Tensor::from_vec(values(512), &[512]), device, &always(), None).unwrap();
    let mut host = Tensor::zeros::<f32>(&[512]);
    let report = rt.copy(&on_device, &mut host, &TransferOptions::default(), Some(&stream)).unwrap();
    assert_eq!(report.path, sys::ABR_PATH_DEVICE_TO_HOST);
    assert_eq!(host.to_vec::<f32>().unwrap(), values(512));
}

#[test]
fn a_stream_on_a_missing_device_is_an_error() {
    let rt = Runtime::new().unwrap();
    let err = Stream::new(&rt, Device::opencl(99)).map(|_| ()).unwrap_err();
    assert_eq!(err.status, sys::ABR_ERR_NO_DEVICE, "{}", err);
    assert!(err.message.contains("opencl:99"), "{}", err);
}

// The README's example: cargo test builds it, `cargo run --example round_trip` runs it.
use arraybridge::{CopyMode, Device, Runtime, Stream, Tensor, TransferOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::new()?;
    let gpu: Device = "opencl:0".parse()?;
    let stream = Stream::new(&rt, gpu)?;
    let host = Tensor::from_vec((0..12).map(|i| i as f32).collect(), &[3, 4]);
    let (on_gpu, report) = rt.to_device(host, gpu, &TransferOptions::copy(CopyMode::Always), Some(&stream))?;
    println!("{} ({} bytes): {}", report.path_name, report.bytes_moved, report.detail);
    let (back, _) = rt.to_device(on_gpu, Device::CPU, &TransferOptions::default(), Some(&stream))?;
    stream.record()?.synchronize()?;
    assert_eq!(back.to_vec::<f32>().unwrap()[5], 5.0);
    Ok(())
}

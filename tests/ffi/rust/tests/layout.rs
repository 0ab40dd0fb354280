// The hand-written declarations must match the C layout byte for byte: the same
// sizes and offsets tests/abi/test_abi_layout.cpp pins on the C side.
use arraybridge::sys::*;
use std::mem::{size_of, MaybeUninit};

macro_rules! offset {
    ($t:ty, $field:ident) => {{
        let value = MaybeUninit::<$t>::uninit();
        let base = value.as_ptr();
        unsafe { (std::ptr::addr_of!((*base).$field) as usize) - (base as usize) }
    }};
}

#[test]
fn dlpack_structs_match_the_c_layout() {
    assert_eq!(size_of::<DLPackVersion>(), 8);
    assert_eq!((size_of::<DLDevice>(), offset!(DLDevice, device_id)), (8, 4));
    assert_eq!((size_of::<DLDataType>(), offset!(DLDataType, bits), offset!(DLDataType, lanes)), (4, 1, 2));
    assert_eq!(size_of::<DLTensor>(), 48);
    assert_eq!(
        [offset!(DLTensor, device), offset!(DLTensor, ndim), offset!(DLTensor, dtype), offset!(DLTensor, shape),
         offset!(DLTensor, strides), offset!(DLTensor, byte_offset)],
        [8, 16, 20, 24, 32, 40]
    );
    assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
    assert_eq!(
        [offset!(DLManagedTensorVersioned, manager_ctx), offset!(DLManagedTensorVersioned, deleter),
         offset!(DLManagedTensorVersioned, flags), offset!(DLManagedTensorVersioned, dl_tensor)],
        [8, 16, 24, 32]
    );
}

#[test]
fn arraybridge_structs_match_the_c_layout() {
    assert_eq!(size_of::<abr_runtime_options>(), 8);
    assert_eq!(size_of::<abr_transfer_options>(), 24);
    assert_eq!(
        [offset!(abr_transfer_options, copy), offset!(abr_transfer_options, flags), offset!(abr_transfer_options, dtype),
         offset!(abr_transfer_options, report)],
        [4, 8, 12, 16]
    );
    assert_eq!(size_of::<abr_transfer_report>(), 184);
    assert_eq!(
        [offset!(abr_transfer_report, path), offset!(abr_transfer_report, bytes_moved), offset!(abr_transfer_report, detail)],
        [4, 16, 24]
    );
    assert_eq!(size_of::<abr_device_info>(), 288);
    assert_eq!(
        [offset!(abr_device_info, backend), offset!(abr_device_info, device), offset!(abr_device_info, memory_bytes),
         offset!(abr_device_info, name), offset!(abr_device_info, platform)],
        [4, 8, 24, 32, 160]
    );
    assert_eq!(
        (size_of::<abr_backend_info>(), offset!(abr_backend_info, available), offset!(abr_backend_info, detail)),
        (272, 8, 16)
    );
    assert_eq!(size_of::<abr_pool_stats>(), 80);
    assert_eq!(
        [offset!(abr_pool_stats, bytes_pinned), offset!(abr_pool_stats, limit_bytes), offset!(abr_pool_stats, misses)],
        [8, 48, 72]
    );
}

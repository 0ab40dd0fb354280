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
        [offset!(DLTensor, data), offset!(DLTensor, device), offset!(DLTensor, ndim), offset!(DLTensor, dtype),
         offset!(DLTensor, shape), offset!(DLTensor, strides), offset!(DLTensor, byte_offset)],
        [0, 8, 16, 20, 24, 32, 40]
    );
    assert_eq!(
        (size_of::<DLManagedTensor>(), offset!(DLManagedTensor, manager_ctx), offset!(DLManagedTensor, deleter)),
        (64, 48, 56)
    );
    assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
    assert_eq!(
        [offset!(DLManagedTensorVersioned, manager_ctx), offset!(DLManagedTensorVersioned, deleter),
         offset!(DLManagedTensorVersioned, flags), offset!(DLManagedTensorVersioned, dl_tensor)],
        [8, 16, 24, 32]
    );
    assert_eq!((size_of::<DLPackExchangeAPIHeader>(), offset!(DLPackExchangeAPIHeader, prev_api)), (16, 8));
    assert_eq!(size_of::<DLPackExchangeAPI>(), 56);
    assert_eq!(
        [offset!(DLPackExchangeAPI, managed_tensor_allocator),
         offset!(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync),
         offset!(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync),
         offset!(DLPackExchangeAPI, dltensor_from_py_object_no_sync), offset!(DLPackExchangeAPI, current_work_stream)],
        [16, 24, 32, 40, 48]
    );
}

#[test]
fn arraybridge_structs_match_the_c_layout() {
    assert_eq!(size_of::<abr_status>(), 4);
    assert_eq!(size_of::<abr_runtime_options>(), 8);
    assert_eq!(size_of::<abr_transfer_options>(), 32);
    assert_eq!(
        [offset!(abr_transfer_options, copy), offset!(abr_transfer_options, flags), offset!(abr_transfer_options, dtype),
         offset!(abr_transfer_options, report), offset!(abr_transfer_options, casting)],
        [4, 8, 12, 16, 24]
    );
    assert_eq!(size_of::<abr_transfer_report>(), 184);
    assert_eq!(
        [offset!(abr_transfer_report, path), offset!(abr_transfer_report, bytes_moved), offset!(abr_transfer_report, detail)],
        [4, 16, 24]
    );
    assert_eq!(size_of::<abr_device_info>(), 288);
    assert_eq!(
        [offset!(abr_device_info, backend), offset!(abr_device_info, device), offset!(abr_device_info, flags),
         offset!(abr_device_info, memory_bytes), offset!(abr_device_info, name), offset!(abr_device_info, platform)],
        [4, 8, 16, 24, 32, 160]
    );
    assert_eq!(
        (size_of::<abr_backend_info>(), offset!(abr_backend_info, backend), offset!(abr_backend_info, available),
         offset!(abr_backend_info, detail)),
        (272, 4, 8, 16)
    );
    assert_eq!(size_of::<abr_pool_stats>(), 80);
    assert_eq!(
        [offset!(abr_pool_stats, bytes_pinned), offset!(abr_pool_stats, limit_bytes), offset!(abr_pool_stats, misses)],
        [8, 48, 72]
    );
    assert_eq!(size_of::<abr_device_kind>(), 152);
    assert_eq!(
        [offset!(abr_device_kind, r#type), offset!(abr_device_kind, backend), offset!(abr_device_kind, flags),
         offset!(abr_device_kind, disable_flag), offset!(abr_device_kind, name), offset!(abr_device_kind, backend_name),
         offset!(abr_device_kind, disable_env)],
        [4, 8, 12, 16, 24, 56, 88]
    );
    assert_eq!(size_of::<abr_batch_report>(), 208);
    assert_eq!(
        [offset!(abr_batch_report, tensors), offset!(abr_batch_report, copies), offset!(abr_batch_report, bytes_moved),
         offset!(abr_batch_report, detail), offset!(abr_batch_report, paths), offset!(abr_batch_report, result_flags)],
        [4, 16, 24, 32, 192, 200]
    );
    assert_eq!(
        (size_of::<abr_ipc_handle>(), offset!(abr_ipc_handle, size), offset!(abr_ipc_handle, data)),
        (1536, 4, 8)
    );
}

#[test]
fn the_init_constants_match_what_the_init_functions_write() {
    // abr_X_init zeroes the fields its version has and sets `version`: the same
    // values as the ABR_X_INIT constants (checked field by field where it matters).
    unsafe {
        let mut o: abr_runtime_options = std::mem::zeroed();
        assert_eq!(abr_runtime_options_init(&mut o, ABR_RUNTIME_OPTIONS_VERSION), ABR_OK);
        assert_eq!(o, ABR_RUNTIME_OPTIONS_INIT);
        let mut t: abr_transfer_options = std::mem::zeroed();
        assert_eq!(abr_transfer_options_init(&mut t, ABR_TRANSFER_OPTIONS_VERSION), ABR_OK);
        assert_eq!(
            (t.version, t.copy, t.flags, t.dtype, t.report, t.casting),
            (ABR_TRANSFER_OPTIONS_VERSION, ABR_COPY_IF_NEEDED, 0, DLDataType::default(), std::ptr::null_mut(), ABR_CASTING_DEFAULT)
        );
        let mut p: abr_pool_stats = std::mem::zeroed();
        assert_eq!(abr_pool_stats_init(&mut p, ABR_POOL_STATS_VERSION), ABR_OK);
        assert_eq!(p, ABR_POOL_STATS_INIT);
        assert_eq!(abr_pool_stats::default(), ABR_POOL_STATS_INIT);
        let mut r: abr_transfer_report = std::mem::zeroed();
        assert_eq!(abr_transfer_report_init(&mut r, ABR_TRANSFER_REPORT_VERSION), ABR_OK);
        assert_eq!((r.version, r.path, r.bytes_moved), (ABR_TRANSFER_REPORT_VERSION, ABR_PATH_NONE, 0));
        let mut b: abr_batch_report = std::mem::zeroed();
        assert_eq!(abr_batch_report_init(&mut b, ABR_BATCH_REPORT_VERSION), ABR_OK);
        assert_eq!(b.version, ABR_BATCH_REPORT_VERSION);
        let mut d: abr_device_info = std::mem::zeroed();
        assert_eq!(abr_device_info_init(&mut d, ABR_DEVICE_INFO_VERSION), ABR_OK);
        assert_eq!(d.version, ABR_DEVICE_INFO_INIT.version);
        let mut bi: abr_backend_info = std::mem::zeroed();
        assert_eq!(abr_backend_info_init(&mut bi, ABR_BACKEND_INFO_VERSION), ABR_OK);
        assert_eq!(bi.version, ABR_BACKEND_INFO_INIT.version);
        let mut k: abr_device_kind = std::mem::zeroed();
        assert_eq!(abr_device_kind_init(&mut k, ABR_DEVICE_KIND_VERSION), ABR_OK);
        assert_eq!(k.version, ABR_DEVICE_KIND_INIT.version);
        let mut h: abr_ipc_handle = std::mem::zeroed();
        assert_eq!(abr_ipc_handle_init(&mut h, ABR_IPC_HANDLE_VERSION), ABR_OK);
        assert_eq!((h.version, h.size), (ABR_IPC_HANDLE_INIT.version, 0));
        // Version 0 is refused, naming the struct.
        assert_eq!(abr_pool_stats_init(&mut p, 0), ABR_ERR_INVALID_ARGUMENT);
        assert_eq!(abr_version_number(), ABR_VERSION_NUMBER);
    }
}

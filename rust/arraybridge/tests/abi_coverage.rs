// Every function the library exports (capi/exports.txt) is declared in
// arraybridge-sys, and every declaration names an exported function.
use std::collections::BTreeSet;

const SYS_SOURCE: &str = include_str!("../../arraybridge-sys/src/lib.rs");

fn declared() -> BTreeSet<String> {
    SYS_SOURCE
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub fn "))
        .map(|rest| rest.split('(').next().unwrap().to_string())
        .collect()
}

#[test]
fn every_exported_function_is_declared() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../capi/exports.txt");
    let exports = std::fs::read_to_string(path).expect("capi/exports.txt next to the crate");
    let exported: BTreeSet<String> =
        exports.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect();
    let declared = declared();
    let missing: Vec<_> = exported.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&exported).collect();
    assert!(missing.is_empty(), "exported but not declared in arraybridge-sys: {:?}", missing);
    assert!(extra.is_empty(), "declared but not exported: {:?}", extra);
    assert!(exported.len() >= 57, "{} exports", exported.len());
}

#[test]
fn every_declaration_links() {
    // Taking each function's address makes the linker resolve it.
    use arraybridge::sys::*;
    let addresses = [
        abr_version_number as *const (), abr_version_string as *const (), abr_status_string as *const (), abr_last_error as *const (),
        abr_last_error_status as *const (), abr_last_error_backend_code as *const (), abr_clear_error as *const (),
        abr_log_set_level as *const (), abr_log_get_level as *const (), abr_log_set_callback as *const (),
        abr_runtime_options_init as *const (), abr_runtime_create as *const (), abr_runtime_destroy as *const (),
        abr_device_count as *const (), abr_device_info as *const (), abr_backend_info as *const (), abr_device_info_init as *const (),
        abr_backend_info_init as *const (), abr_transfer_options_init as *const (), abr_transfer_report_init as *const (),
        abr_path_string as *const (), abr_device_parse as *const (), abr_device_format as *const (), abr_dtype_parse as *const (),
        abr_dtype_format as *const (), abr_device_kind_init as *const (), abr_device_kind_count as *const (),
        abr_device_kind_get as *const (), abr_to_device as *const (), abr_to_device_legacy as *const (),
        abr_batch_report_init as *const (), abr_to_device_many as *const (), abr_copy_many as *const (), abr_copy as *const (),
        abr_copy_versioned as *const (), abr_tensor_to_legacy as *const (), abr_stream_create as *const (),
        abr_stream_wrap as *const (), abr_stream_synchronize as *const (), abr_stream_wait as *const (),
        abr_stream_destroy as *const (), abr_stream_release as *const (), abr_event_record as *const (),
        abr_event_query as *const (), abr_event_synchronize as *const (), abr_stream_wait_event as *const (),
        abr_event_destroy as *const (), abr_pool_stats_init as *const (), abr_pool_get_stats as *const (),
        abr_pool_trim as *const (), abr_pool_set_limit as *const (), abr_device_cache_get_stats as *const (),
        abr_device_cache_set_limit as *const (), abr_runtime_set_staging as *const (), abr_ipc_handle_init as *const (),
        abr_ipc_export as *const (), abr_ipc_import as *const (),
    ];
    assert_eq!(addresses.len(), declared().len());
    assert!(addresses.iter().all(|a| !a.is_null()));
}

// Transfer entry points: abr_to_device, abr_to_device_many, abr_copy and their variants.
#include <algorithm>

#include "lib/plan/planner.hpp"
#include "capi/handles.hpp"
#include "capi/struct_versions.hpp"

using abr::capi::guarded;
using abr::capi::kBatchReport;
using abr::capi::kTransferOptions;
using abr::capi::kTransferReport;
using abr::capi::require_pointer;
using abr::capi::runtime_of;
using abr::capi::stream_of;

namespace {

// The caller's options as the library's current struct. A report of an older
// version is filled in a whole one of ours and handed back in the caller's version
// on success; one of the current version is filled in place, at the end of a
// successful transfer (zeroing and copying the whole struct weighed on a zero-copy one).
class CallerOptions {
 public:
  explicit CallerOptions(const abr_transfer_options* options) {
    if (!options) return;
    options_ = abr::capi::read_versioned(options, kTransferOptions);
    abr_transfer_report* caller = options_.report;
    if (caller) {
      abr::capi::caller_size(caller->version, kTransferReport);  // refused before anything moves
      if (caller->version != ABR_TRANSFER_REPORT_VERSION) {
        older_report_ = caller;
        report_ = abr_transfer_report{};
        report_.version = ABR_TRANSFER_REPORT_VERSION;
        options_.report = &report_;
      }
    }
    given_ = true;
  }
  const abr_transfer_options* get() const { return given_ ? &options_ : nullptr; }
  void deliver_report() const {
    if (older_report_) abr::capi::write_versioned(older_report_, report_, kTransferReport);
  }

 private:
  abr_transfer_options options_{};
  abr_transfer_report report_;  // only for an older caller's report
  abr_transfer_report* older_report_ = nullptr;
  bool given_ = false;
};

// A batch call's options and report: the options without a report of their own (the
// batch has one), and the report the runtime fills, with the caller's arrays (`paths`,
// `result_flags`) handed back as they were; written back in the caller's version.
class BatchArguments {
 public:
  BatchArguments(const abr_transfer_options* options, abr_batch_report* report) : report_(report) {
    if (report) abr::capi::caller_size(report->version, kBatchReport);  // refused before anything moves
    if (options) {
      options_ = abr::capi::read_versioned(options, kTransferOptions);
      options_.report = nullptr;
      given_ = true;
    }
    filled.version = ABR_BATCH_REPORT_VERSION;
    if (report) {
      const abr_batch_report caller = abr::capi::read_versioned(report, kBatchReport);
      filled.paths = caller.paths;
      filled.result_flags = caller.result_flags;
    }
  }
  const abr_transfer_options* options() const { return given_ ? &options_ : nullptr; }
  void deliver_report() const {
    if (report_) abr::capi::write_versioned(report_, filled, kBatchReport);
  }

  abr_batch_report filled{};

 private:
  abr_transfer_options options_{};
  abr_batch_report* report_;
  bool given_ = false;
};

}  // namespace

extern "C" {

abr_status abr_transfer_options_init(abr_transfer_options* options, unsigned int version) {
  return guarded(__func__, [&] { abr::capi::init_versioned(options, version, kTransferOptions); });
}

abr_status abr_transfer_report_init(abr_transfer_report* report, unsigned int version) {
  return guarded(__func__, [&] { abr::capi::init_versioned(report, version, kTransferReport); });
}

const char* abr_path_string(abr_path path) { return abr::path_name(path); }

abr_status abr_to_device(abr_runtime* runtime, DLManagedTensorVersioned* src, DLDevice dst,
                         const abr_transfer_options* options, abr_stream* stream, DLManagedTensorVersioned** out) {
  return guarded(__func__, [&] {
    *require_pointer(out, "out") = nullptr;
    const CallerOptions caller(options);
    *out = runtime_of(runtime).to_device(src, dst, caller.get(), stream_of(stream));
    caller.deliver_report();
  });
}

abr_status abr_to_device_legacy(abr_runtime* runtime, DLManagedTensor* src, DLDevice dst,
                                const abr_transfer_options* options, abr_stream* stream,
                                DLManagedTensorVersioned** out) {
  return guarded(__func__, [&] {
    *require_pointer(out, "out") = nullptr;
    const CallerOptions caller(options);
    *out = runtime_of(runtime).to_device(src, dst, caller.get(), stream_of(stream));
    caller.deliver_report();
  });
}

abr_status abr_batch_report_init(abr_batch_report* report, unsigned int version) {
  return guarded(__func__, [&] { abr::capi::init_versioned(report, version, kBatchReport); });
}

abr_status abr_to_device_many(abr_runtime* runtime, DLManagedTensorVersioned* const* srcs, size_t count, DLDevice dst,
                              const abr_transfer_options* options, abr_stream* stream, DLManagedTensorVersioned** out,
                              abr_batch_report* report) {
  return guarded(__func__, [&] {
    if (count > 0) {
      abr::Runtime::check_batch_count(count, "tensors");         // before out is written: a garbage count runs past it
      std::fill_n(require_pointer(out, "out"), count, nullptr);  // what any failure leaves
      require_pointer(srcs, "srcs");
    }
    BatchArguments batch(options, report);
    runtime_of(runtime).to_device_many(srcs, count, dst, batch.options(), stream_of(stream), out, batch.filled);
    batch.deliver_report();
  });
}

abr_status abr_copy_many(abr_runtime* runtime, const DLTensor* const* srcs, const DLTensor* const* dsts, size_t count,
                         const abr_transfer_options* options, abr_stream* stream, abr_batch_report* report) {
  return guarded(__func__, [&] {
    if (count > 0) {
      require_pointer(srcs, "srcs");
      require_pointer(dsts, "dsts");
    }
    BatchArguments batch(options, report);
    runtime_of(runtime).copy_many(srcs, dsts, count, batch.options(), stream_of(stream), batch.filled);
    batch.deliver_report();
  });
}

abr_status abr_copy(abr_runtime* runtime, const DLTensor* src, const DLTensor* dst, const abr_transfer_options* options,
                    abr_stream* stream) {
  return guarded(__func__, [&] {
    const CallerOptions caller(options);
    runtime_of(runtime).copy(*require_pointer(src, "src"), *require_pointer(dst, "dst"), caller.get(),
                             stream_of(stream));
    caller.deliver_report();
  });
}

abr_status abr_copy_versioned(abr_runtime* runtime, const DLManagedTensorVersioned* src,
                              const DLManagedTensorVersioned* dst, const abr_transfer_options* options,
                              abr_stream* stream) {
  return guarded(__func__, [&] {
    const CallerOptions caller(options);
    runtime_of(runtime).copy(*require_pointer(src, "src"), *require_pointer(dst, "dst"), caller.get(),
                             stream_of(stream));
    caller.deliver_report();
  });
}

abr_status abr_tensor_to_legacy(DLManagedTensorVersioned* src, DLManagedTensor** out) {
  return guarded(__func__, [&] {
    require_pointer(out, "out");
    *out = nullptr;
    *out = abr::wrap_as_legacy(require_pointer(src, "src"));
  });
}

}  // extern "C"

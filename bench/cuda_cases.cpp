// CUDA cases of the catalog (catalog.cpp), for every CUDA device, each beside the raw driver
// call on the same buffers (the driver is the one the runtime opened):
//  - pinned host -> device (target >= 0.95x the raw copy);
//  - pageable host -> device and device -> host, staged through the pool
//    (target >= 1.5x a plain cuMemcpy from pageable memory, and >= 0.8x the
//    pinned copy at >= 64 MiB);
//  - device -> device (target >= 0.9x cuMemcpyDtoD).
//  - the staged copies at each host thread count (1, 2, 4, ... the cores) at the
//    largest size;
//  - CUDA <-> OpenCL on the first OpenCL device that does not use host memory (a
//    GPU's), beside pinned DMA and the naive round trip through pageable memory.
// Without a CUDA device nothing runs and the table says why.
#ifdef ABR_CUDA_LEFT_OUT
#include "bench/bench.hpp"

namespace bench {
// A build without the CUDA toolkit: main.cpp notes the backend's detail, which says so.
void run_cuda_cases(abr_runtime*, const Options&, const Report&) {}
}  // namespace bench
#else
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda/driver.hpp"
#include "bench/bench.hpp"
#include "bench/opencl_raw.hpp"

namespace bench {
namespace {

void check_cu(const abr::cuda::Driver& cu, CUresult status, const char* what) {
  if (status != CUDA_SUCCESS) {
    progress_clear();
    std::fprintf(stderr, "arraybridge-bench: %s failed: %s\n", what, abr::cuda::error_text(cu, status).c_str());
    std::exit(1);
  }
}

// The device's primary context made current, for the raw baselines.
struct RawContext {
  const abr::cuda::Driver& cu;
  CUdevice device = 0;
  RawContext(const abr::cuda::Driver& driver, int ordinal) : cu(driver) {
    CUcontext context = nullptr;
    check_cu(cu, cu.cuDeviceGet(&device, ordinal), "cuDeviceGet");
    check_cu(cu, cu.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    check_cu(cu, cu.cuCtxPushCurrent(context), "cuCtxPushCurrent");
  }
  ~RawContext() {
    CUcontext popped = nullptr;
    cu.cuCtxPopCurrent(&popped);
    cu.cuDevicePrimaryCtxRelease(device);
  }
  // A synchronous copy on the legacy default stream, as cudaMemcpy does.
  void wait() { check_cu(cu, cu.cuStreamSynchronize(nullptr), "cuStreamSynchronize"); }
};

// The first OpenCL device that does not share host memory (a GPU's), if any.
bool discrete_opencl(abr_runtime* rt, DLDevice* found) {
  int32_t count = 0;
  check(abr_device_count(rt, &count), "abr_device_count");
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    check(abr_device_info(rt, i, &info), "abr_device_info");
    if (info.device.device_type == kDLOpenCL && !(info.flags & ABR_DEVICE_SHARES_HOST_MEMORY)) {
      *found = info.device;
      return true;
    }
  }
  return false;
}

// ARRAYBRIDGE_STAGING_THREADS for one measurement, the caller's value back after.
struct StagingThreads {
  std::string saved;
  bool had = false;
  explicit StagingThreads(unsigned threads) {
    if (const char* value = std::getenv("ARRAYBRIDGE_STAGING_THREADS")) saved = value, had = true;
    setenv("ARRAYBRIDGE_STAGING_THREADS", std::to_string(threads).c_str(), 1);
  }
  ~StagingThreads() {
    if (had)
      setenv("ARRAYBRIDGE_STAGING_THREADS", saved.c_str(), 1);
    else
      unsetenv("ARRAYBRIDGE_STAGING_THREADS");
  }
};

// Whether a pageable upload of `source` to `device` runs staged (the planner's
// choice, read from a report): small copies go to the driver's own copy instead.
bool staged(abr_runtime* rt, DLTensor& source, DLDevice device) {
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_ALWAYS;
  options.report = &report;
  DLManagedTensorVersioned upload = borrowed(source);
  DLManagedTensorVersioned* out = nullptr;
  check(abr_to_device(rt, &upload, device, &options, nullptr, &out), "abr_to_device");
  out->deleter(out);
  return report.path == ABR_PATH_STAGED;
}

DLManagedTensorVersioned* make_copy(abr_runtime* rt, DLTensor& source, DLDevice where) {
  abr_transfer_options copy = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&copy, ABR_TRANSFER_OPTIONS_VERSION);
  copy.copy = ABR_COPY_ALWAYS;
  DLManagedTensorVersioned upload = borrowed(source);
  DLManagedTensorVersioned* out = nullptr;
  check(abr_to_device(rt, &upload, where, &copy, nullptr, &out), "abr_to_device");
  return out;
}

void run_device(abr_runtime* rt, const Options& options, const Report& report, const abr::cuda::Driver& cu,
                DLDevice device) {
  const std::string name = device_name(device);
  RawContext raw(cu, device.device_id);
  for (uint64_t size : options.sizes) {
    const uint64_t elements = size / 4;
    if (elements == 0) continue;
    const uint64_t bytes = elements * 4;
    progress(name, bytes);
    Buffer pageable(elements), landing(elements);
    int64_t shape[1] = {static_cast<int64_t>(elements)};
    DLTensor host = view(pageable.data(), 1, shape, nullptr), host_out = view(landing.data(), 1, shape, nullptr);
    DLManagedTensorVersioned* pinned = make_copy(rt, host, {kDLCUDAHost, 0});
    DLManagedTensorVersioned* on_device = make_copy(rt, host, device);
    DLManagedTensorVersioned* other = make_copy(rt, host, device);
    const DLTensor pinned_tensor = pinned->dl_tensor, device_tensor = on_device->dl_tensor,
                   other_tensor = other->dl_tensor;
    const auto dptr = reinterpret_cast<CUdeviceptr>(device_tensor.data);
    const auto dptr2 = reinterpret_cast<CUdeviceptr>(other_tensor.data);
    // The driver's own calls, each waited for as abr_copy waits.
    const auto raw_h2d = [&](const void* from) {
      return [&cu, &raw, dptr, from, bytes] {
        check_cu(cu, cu.cuMemcpyHtoDAsync(dptr, from, bytes, nullptr), "HtoD");
        raw.wait();
      };
    };
    const auto ours = [rt](const DLTensor& from, const DLTensor& to) {
      return [rt, &from, &to] { check(abr_copy(rt, &from, &to, nullptr, nullptr), "abr_copy"); };
    };
    // Ours and the driver's call timed together (time_together): each row's ratio.
    const auto row = [&](const char* which, const std::function<void()>& by_us, const char* label,
                         const std::function<void()>& by_driver) {
      Result r{which, name, bytes};
      const std::vector<Timing> t = time_together(options, {by_us, by_driver});
      r.seconds = t[0].median_s;
      r.baselines.push_back(baseline(label, t[1].median_s));
      return r;
    };
    // The link's ceiling, the second baseline of the rows below: the H2D pinned row's own when it runs.
    Baseline pinned_raw;
    if (selected(options, "H2D pinned")) {
      const Result r = row("H2D pinned", ours(pinned_tensor, device_tensor), "cuPinned", raw_h2d(pinned_tensor.data));
      pinned_raw = r.baselines.front();
      report(r);
    } else {
      pinned_raw = baseline("cuPinned", time_it(options, raw_h2d(pinned_tensor.data)).median_s);
    }
    if (selected(options, "H2D pageable")) {
      Result r = row("H2D pageable", ours(host, device_tensor), "cuPage", raw_h2d(pageable.data()));
      r.baselines.push_back(pinned_raw);
      report(r);
    }
    if (selected(options, "D2H pageable"))
      report(row("D2H pageable", ours(device_tensor, host_out), "cuPage", [&] {
        check_cu(cu, cu.cuMemcpyDtoHAsync(landing.data(), dptr, bytes, nullptr), "DtoH");
        raw.wait();
      }));
    if (selected(options, "D2D"))
      report(row("D2D", ours(device_tensor, other_tensor), "cuD2D", [&] {
        check_cu(cu, cu.cuMemcpyDtoDAsync(dptr2, dptr, bytes, nullptr), "DtoD");
        raw.wait();
      }));
    // Page-locked host tensors made from pageable ones (a data loader's pinning step), once: cuda_host is every GPU's.
    if (selected(options, "batch pinned") && device.device_id == 0 && bytes <= (uint64_t{1} << 20))
      report(batch_result(rt, options, "batch pinned", {kDLCUDAHost, 0}, bytes));
    const bool sweeps = size == largest_size(options) &&
        (selected(options, "H2D pageable sweep") || selected(options, "D2H pageable sweep"));
    const bool sweeping = sweeps && staged(rt, host, device);
    if (sweeps && !sweeping)
      note("no pageable sweeps: at " + std::to_string(bytes >> 10) +
           " KiB a pageable copy is under two staging chunks, one copy by the driver (use larger --sizes)");
    for (const bool up : {true, false}) {
      const char* which = up ? "H2D pageable sweep" : "D2H pageable sweep";
      if (!sweeping || !selected(options, which)) continue;
      const Baseline pageable_raw =
          baseline("cuPage", time_it(options, [&] {
                               check_cu(cu,
                                        up ? cu.cuMemcpyHtoDAsync(dptr, pageable.data(), bytes, nullptr)
                                           : cu.cuMemcpyDtoHAsync(landing.data(), dptr, bytes, nullptr),
                                        "cuMemcpy");
                               raw.wait();
                             }).median_s);
      for (unsigned threads : sweep_threads()) {
        StagingThreads staging(threads);
        Result r{which, name, bytes};
        r.shape = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
        r.seconds = time_it(options, [&] {
                      check(up ? abr_copy(rt, &host, &device_tensor, nullptr, nullptr)
                               : abr_copy(rt, &device_tensor, &host_out, nullptr, nullptr),
                            "abr_copy");
                    }).median_s;
        r.baselines.push_back(pageable_raw);
        r.baselines.push_back(pinned_raw);
        report(r);
      }
    }
    DLDevice opencl{};
    const bool across = selected(options, "CUDA -> OpenCL") || selected(options, "OpenCL -> CUDA");
    if (across && !discrete_opencl(rt, &opencl)) {
      note("no CUDA <-> OpenCL cases: no OpenCL device here that does not use host memory");
    } else if (across) {
      DLManagedTensorVersioned* on_cl = make_copy(rt, host, opencl);
      const DLTensor cl_tensor = on_cl->dl_tensor;
      const auto mem = static_cast<cl_mem>(cl_tensor.data);
      const RawQueue cl(mem);
      for (const bool to_cl : {true, false}) {
        const char* which = to_cl ? "CUDA -> OpenCL" : "OpenCL -> CUDA";
        if (!selected(options, which)) continue;
        Result r = row(which, to_cl ? ours(device_tensor, cl_tensor) : ours(cl_tensor, device_tensor), "naive", [&] {
          if (to_cl) {
            check_cu(cu, cu.cuMemcpyDtoHAsync(landing.data(), dptr, bytes, nullptr), "DtoH");
            raw.wait();
            check_cl(clEnqueueWriteBuffer(cl.queue, mem, CL_TRUE, 0, bytes, landing.data(), 0, nullptr, nullptr),
                     "clEnqueueWriteBuffer");
          } else {
            check_cl(clEnqueueReadBuffer(cl.queue, mem, CL_TRUE, 0, bytes, landing.data(), 0, nullptr, nullptr),
                     "clEnqueueReadBuffer");
            check_cu(cu, cu.cuMemcpyHtoDAsync(dptr, landing.data(), bytes, nullptr), "HtoD");
            raw.wait();
          }
        });
        r.baselines.push_back(pinned_raw);
        report(r);
      }
      on_cl->deleter(on_cl);
    }
    for (DLManagedTensorVersioned* t : {pinned, on_device, other}) t->deleter(t);
  }
}

}  // namespace

void run_cuda_cases(abr_runtime* rt, const Options& options, const Report& report) {
  struct abr_backend_info backend = ABR_BACKEND_INFO_INIT;
  check(abr_backend_info(rt, ABR_BACKEND_CUDA, &backend), "abr_backend_info");
  if (!backend.available) return;  // main's notes say why
  const abr::cuda::Driver* cu = abr::cuda::driver(nullptr);
  int32_t count = 0;
  check(abr_device_count(rt, &count), "abr_device_count");
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    check(abr_device_info(rt, i, &info), "abr_device_info");
    if (info.device.device_type == kDLCUDA && device_selected(options, info.device))
      run_device(rt, options, report, *cu, info.device);
  }
}

}  // namespace bench
#endif  // ABR_CUDA_LEFT_OUT

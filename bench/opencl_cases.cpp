// OpenCL cases of the catalog (catalog.cpp), for every OpenCL device: host <-> device copies
// beside memcpy and raw clEnqueueWriteBuffer/clEnqueueReadBuffer on the same
// buffers, a new device buffer beside clCreateBuffer + write, the zero-copy wrap
// of host memory (whose cost must not grow with the size), a transpose on the
// device beside the driver's contiguous copy, and a copy from another context
// beside the naive read-to-host-then-write.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench.hpp"
#include "bench/opencl_raw.hpp"

namespace bench {
namespace {

// A context of the bench's own on the same device, as another library would have.
struct ForeignContext {
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  explicit ForeignContext(cl_device_id device) {
    cl_int status = CL_SUCCESS;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &status);
    check_cl(status, "clCreateContext");
    queue = clCreateCommandQueueWithProperties(context, device, nullptr, &status);
    check_cl(status, "clCreateCommandQueueWithProperties");
  }
  ~ForeignContext() {
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
  }
  cl_mem buffer(uint64_t bytes, void* init) const {
    cl_int status = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, init, &status);
    check_cl(status, "clCreateBuffer");
    return mem;
  }
};

// `shares_host_memory`: the device can use host memory in place (PoCL, not a GPU),
// the only kind the wrap case is measured on.
void run_device(abr_runtime* rt, const Options& options, const Report& report, DLDevice device,
                bool shares_host_memory) {
  const std::string name = device_name(device);
  abr_transfer_options copy = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&copy, ABR_TRANSFER_OPTIONS_VERSION);
  copy.copy = ABR_COPY_ALWAYS;

  for (uint64_t size : options.sizes) {
    const uint64_t elements = size / 4;
    if (elements == 0) continue;
    const uint64_t bytes = elements * 4;
    progress(name, bytes);
    if (selected(options, "batch H2D") && bytes <= (uint64_t{1} << 20))
      report(batch_result(rt, options, "batch H2D", device, bytes));
    if (selected(options, "batch D2H") && bytes <= (uint64_t{1} << 20))
      report(batch_d2h_result(rt, options, "batch D2H", device, bytes));
    if (selected(options, "copy_many H2D") && bytes <= (uint64_t{1} << 20))
      report(copy_batch_result(rt, options, "copy_many H2D", device, bytes));
    Buffer src(elements), dst(elements);
    int64_t shape[1] = {static_cast<int64_t>(elements)};
    DLTensor host_src = view(src.data(), 1, shape, nullptr), host_dst = view(dst.data(), 1, shape, nullptr);

    // A device buffer in the runtime's context, reused by the copy cases.
    DLManagedTensorVersioned upload = borrowed(host_src);
    DLManagedTensorVersioned* on_device = nullptr;
    check(abr_to_device(rt, &upload, device, &copy, nullptr, &on_device), "abr_to_device");
    const DLTensor device_tensor = on_device->dl_tensor;
    cl_mem mem = static_cast<cl_mem>(device_tensor.data);
    RawQueue raw(mem);

    if (selected(options, "H2D existing buffer")) {
      Result r{"H2D existing buffer", name, bytes};
      r.seconds = time_it(options, [&] {
                    check(abr_copy(rt, &host_src, &device_tensor, nullptr, nullptr), "abr_copy");
                  }).median_s;
      r.baselines.push_back(memcpy_baseline(options, dst.data(), src.data(), bytes));
      r.baselines.push_back(baseline("clWrite", time_it(options, [&] {
                                                  check_cl(clEnqueueWriteBuffer(raw.queue, mem, CL_TRUE, 0, bytes,
                                                                                src.data(), 0, nullptr, nullptr),
                                                           "clEnqueueWriteBuffer");
                                                }).median_s));
      report(r);
    }
    if (selected(options, "D2H existing buffer")) {
      Result r{"D2H existing buffer", name, bytes};
      r.seconds = time_it(options, [&] {
                    check(abr_copy(rt, &device_tensor, &host_dst, nullptr, nullptr), "abr_copy");
                  }).median_s;
      r.baselines.push_back(memcpy_baseline(options, dst.data(), src.data(), bytes));
      r.baselines.push_back(baseline("clRead", time_it(options, [&] {
                                                 check_cl(clEnqueueReadBuffer(raw.queue, mem, CL_TRUE, 0, bytes,
                                                                              dst.data(), 0, nullptr, nullptr),
                                                          "clEnqueueReadBuffer");
                                               }).median_s));
      report(r);
    }
    if (selected(options, "H2D new buffer")) {
      const Options settled = settled_for_new_buffers(options, bytes);
      Result r{"H2D new buffer", name, bytes};
      r.seconds = time_it(settled, [&] {
                    DLManagedTensorVersioned m = borrowed(host_src);
                    DLManagedTensorVersioned* out = nullptr;
                    check(abr_to_device(rt, &m, device, &copy, nullptr, &out), "abr_to_device");
                    out->deleter(out);
                  }).median_s;
      r.baselines.push_back(baseline("clCreate", time_it(settled, [&] {
                                                   cl_int status = CL_SUCCESS;
                                                   cl_mem fresh = clCreateBuffer(raw.context, CL_MEM_READ_WRITE, bytes,
                                                                                 nullptr, &status);
                                                   check_cl(status, "clCreateBuffer");
                                                   check_cl(clEnqueueWriteBuffer(raw.queue, fresh, CL_TRUE, 0, bytes,
                                                                                 src.data(), 0, nullptr, nullptr),
                                                            "clEnqueueWriteBuffer");
                                                   clReleaseMemObject(fresh);
                                                 }).median_s));
      report(r);
    }
    if (shares_host_memory && selected(options, "wrap host memory")) {
      Result r{"wrap host memory", name, 0};
      r.unit = "ns";
      r.size_bytes = bytes;
      abr_transfer_report path = ABR_TRANSFER_REPORT_INIT;
      abr_transfer_options wrap = ABR_TRANSFER_OPTIONS_INIT;
      abr_transfer_options_init(&wrap, ABR_TRANSFER_OPTIONS_VERSION);
      wrap.copy = ABR_COPY_NEVER;  // fails loudly if the device does not use host memory in place after all
      wrap.report = &path;
      DLManagedTensorVersioned probe = borrowed(host_src);
      DLManagedTensorVersioned* out = nullptr;
      if (abr_to_device(rt, &probe, device, &wrap, nullptr, &out) != ABR_OK) {
        note(name + " cannot wrap host memory: " + abr_last_error());
        progress_row_done(row_weight(bytes));
      } else {
        out->deleter(out);
        r.seconds = time_it(options, [&] {
                      DLManagedTensorVersioned m = borrowed(host_src);
                      DLManagedTensorVersioned* view_out = nullptr;
                      check(abr_to_device(rt, &m, device, &wrap, nullptr, &view_out), "abr_to_device");
                      view_out->deleter(view_out);
                    }).median_s;
        r.baselines.push_back(baseline("clUseHost", time_it(options, [&] {
                                                      cl_int status = CL_SUCCESS;
                                                      cl_mem wrapped = clCreateBuffer(raw.context, CL_MEM_USE_HOST_PTR,
                                                                                      bytes, src.data(), &status);
                                                      check_cl(status, "clCreateBuffer");
                                                      clReleaseMemObject(wrapped);
                                                    }).median_s));
        report(r);
      }
    }
    if (selected(options, "transpose kernel")) {
      const int64_t n = static_cast<int64_t>(std::sqrt(static_cast<double>(elements)));
      int64_t square[2] = {n, n}, transposed_strides[2] = {1, n};
      DLTensor transposed = device_tensor;  // the first n*n elements, read column by column
      transposed.ndim = 2;
      transposed.shape = square;
      transposed.strides = transposed_strides;
      DLManagedTensorVersioned second = borrowed(host_src);
      DLManagedTensorVersioned* packed = nullptr;
      check(abr_to_device(rt, &second, device, &copy, nullptr, &packed), "abr_to_device");
      DLTensor packed_tensor = packed->dl_tensor;
      packed_tensor.ndim = 2;
      packed_tensor.shape = square;
      packed_tensor.strides = nullptr;
      const uint64_t square_bytes = static_cast<uint64_t>(n * n) * 4;
      Result r{"transpose kernel", name, square_bytes};
      r.shape = std::to_string(n) + "x" + std::to_string(n);
      r.seconds = time_it(options, [&] {
                    check(abr_copy(rt, &transposed, &packed_tensor, nullptr, nullptr), "abr_copy");
                  }).median_s;
      cl_mem target = static_cast<cl_mem>(packed_tensor.data);
      r.baselines.push_back(baseline("clCopy", time_it(options, [&] {
                                                 check_cl(clEnqueueCopyBuffer(raw.queue, mem, target, 0, 0,
                                                                              square_bytes, 0, nullptr, nullptr),
                                                          "clEnqueueCopyBuffer");
                                                 check_cl(clFinish(raw.queue), "clFinish");
                                               }).median_s));
      report(r);
      packed->deleter(packed);
    }
    if (selected(options, "from another context")) {
      ForeignContext foreign(raw.device());
      cl_mem theirs = foreign.buffer(bytes, src.data());
      DLTensor their_tensor = device_tensor;
      their_tensor.data = theirs;
      Result r{"from another context", name, bytes};
      r.seconds = time_it(options, [&] {
                    check(abr_copy(rt, &their_tensor, &device_tensor, nullptr, nullptr), "abr_copy");
                  }).median_s;
      r.baselines.push_back(baseline(
          "naive", time_it(options, [&] {
                     check_cl(
                         clEnqueueReadBuffer(foreign.queue, theirs, CL_TRUE, 0, bytes, dst.data(), 0, nullptr, nullptr),
                         "clEnqueueReadBuffer");
                     check_cl(clEnqueueWriteBuffer(raw.queue, mem, CL_TRUE, 0, bytes, dst.data(), 0, nullptr, nullptr),
                              "clEnqueueWriteBuffer");
                   }).median_s));
      report(r);
      clReleaseMemObject(theirs);
    }
    on_device->deleter(on_device);
  }
  if (selected(options, "pool hit") || selected(options, "pool miss")) {
    float one = 0;
    int64_t shape[1] = {1};
    DLManagedTensorVersioned probe = borrowed(view(&one, 1, shape, nullptr));
    DLManagedTensorVersioned* on_device = nullptr;
    check(abr_to_device(rt, &probe, device, &copy, nullptr, &on_device), "abr_to_device");
    const cl_device_id id = RawQueue(static_cast<cl_mem>(on_device->dl_tensor.data)).device();
    on_device->deleter(on_device);
    ForeignContext context(id);
    run_pool_cases(options, report, name, device, context.context, id);
  }
}

}  // namespace

void run_opencl_cases(abr_runtime* rt, const Options& options, const Report& report) {
  int32_t count = 0;
  check(abr_device_count(rt, &count), "abr_device_count");
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    check(abr_device_info(rt, i, &info), "abr_device_info");
    if (info.device.device_type == kDLOpenCL && device_selected(options, info.device))
      run_device(rt, options, report, info.device, (info.flags & ABR_DEVICE_SHARES_HOST_MEMORY) != 0);
  }
}

}  // namespace bench

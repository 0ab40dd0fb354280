// arraybridge-bench: each case measures libarraybridge beside baselines run in the
// same process on the same buffers; the table and JSON report the ratios.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arraybridge/arraybridge.h>

namespace bench {

struct Options {
  std::vector<uint64_t> sizes;  // bytes
  int repetitions = 7;
  int warmup = 2;
  std::string case_filter;    // substring of the case name; empty = all
  std::string device_filter;  // substring of the device name ("cpu", "opencl:0"); empty = all
  std::string python = "python3";
};

struct Timing {
  double median_s = 0;
  double min_s = 0;
};

// Median (and minimum) wall time of fn over `repetitions` runs after `warmup` runs.
Timing time_it(const Options& options, const std::function<void()>& fn);

struct Baseline {
  std::string name;
  double seconds = 0;  // median; 0 = unavailable
  std::string note;    // why it is unavailable
};

struct Result {
  std::string name;     // case, e.g. "host transpose (float32)"
  std::string device;   // "cpu", "opencl:0", ...
  uint64_t bytes = 0;   // bytes written to the destination, counted once
  std::string shape;    // for strided cases
  double seconds = 0;   // median time of libarraybridge
  std::vector<Baseline> baselines;
  std::string unit = "GB/s";  // or "ns" for per-call costs
};

using Report = std::function<void(const Result&)>;

// Exits with the runtime's message unless status is ABR_OK.
void check(abr_status status, const char* what);

// Page-aligned, page-touched host memory, so the first timed run does not pay
// for page faults and devices can use it in place.
struct Buffer {
  std::unique_ptr<float, void (*)(void*)> memory;
  uint64_t size;
  explicit Buffer(uint64_t elements);
  float* data() { return memory.get(); }
};

// A float32 view of host memory.
DLTensor view(float* data, int ndim, int64_t* shape, int64_t* strides, uint64_t byte_offset = 0);

// A versioned managed tensor over `tensor` with no deleter (the bench owns the memory).
DLManagedTensorVersioned borrowed(const DLTensor& tensor);

// Stops the compiler from proving a buffer unused and deleting the work.
inline void keep(void* p) { asm volatile("" : : "r"(p) : "memory"); }

Baseline memcpy_baseline(const Options& options, void* dst, const void* src, uint64_t bytes);

// Host-memory cases: contiguous copy, strided packs, zero-copy round trip.
void run_host_cases(abr_runtime* rt, const Options& options, const Report& report);

// OpenCL cases for every OpenCL device: host <-> device copies against memcpy and
// raw clEnqueueWrite/ReadBuffer, new buffers, and the zero-copy wrap.
void run_opencl_cases(abr_runtime* rt, const Options& options, const Report& report);

// CUDA cases for every CUDA device: pinned and pageable (staged) copies both ways
// and device copies, beside the raw driver calls on the same buffers.
void run_cuda_cases(abr_runtime* rt, const Options& options, const Report& report);

// The pinned pool on an OpenCL device (handles are its cl_context and cl_device_id):
// hit beside malloc + free, miss beside the provider's raw allocation.
void run_pool_cases(const Options& options, const Report& report, const std::string& device_label, DLDevice device,
                    void* cl_context_handle, void* cl_device_handle);

// Runs `script` with options.python and the arguments; its stdout and stderr, or ""
// with *error saying why.
std::string run_python(const Options& options, const char* script, const std::string& arguments, std::string* error);

// The Python package's zero-copy round trip beside np.from_dlpack alone.
void run_python_cases(const Options& options, const Report& report);

// NumPy's time for np.ascontiguousarray over the given view, or 0 with a note.
Baseline numpy_pack_baseline(const Options& options, const std::string& kind, uint64_t rows, uint64_t cols);

inline bool selected(const Options& options, const std::string& name) {
  return options.case_filter.empty() || name.find(options.case_filter) != std::string::npos;
}

// "cpu", "opencl:0", ... as the table shows devices.
std::string device_name(DLDevice device);
bool device_selected(const Options& options, DLDevice device);

// Says on stderr what is being measured now (long runs show they are alive).
void progress(const std::string& device, uint64_t bytes);

// The "machine" object of the JSON: host CPU and cores, the commit, the CUDA and
// OpenCL backends as the runtime reports them (driver and CUDA version), the
// NVIDIA kernel driver, and every device, so a result says where it was measured.
std::string machine_json(abr_runtime* rt);

std::string json_escape(const std::string& s);

}  // namespace bench

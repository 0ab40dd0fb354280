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

#include "bench/machine.hpp"

namespace bench {

struct Options {
  std::vector<uint64_t> sizes;  // bytes, each at least one float32
  int repetitions = 7;
  int warmup = 2;
  std::string case_filter;              // --case as given, for messages
  std::vector<std::string> case_parts;  // its comma-separated parts: substrings of case names; none = all
  std::string device_filter;            // substring of the device name ("cpu", "opencl:0"); empty = all
  std::string python = "python3";
};

struct Timing {
  double median_s = 0;
  double min_s = 0;
};

// Median (and minimum) wall time of one call of fn over `repetitions` samples after
// `warmup` calls; calls shorter than 1 ms are repeated within a sample and averaged.
Timing time_it(const Options& options, const std::function<void()>& fn);

// The same for each of `fns`, their samples taken in turn, the order reversed each
// round (ABBA): a drift in the machine while they run (clocks, a device's power
// state, another process) falls on all of them alike, not on whichever ran later.
// For a ratio whose target sits near 1x (ours against the driver's own call).
std::vector<Timing> time_together(const Options& options, const std::vector<std::function<void()>>& fns);

// Where a case runs: on the CPU, on each OpenCL device (or only those that use
// host memory in place), on each CUDA device.
enum class Where { Cpu, OpenCl, OpenClSharing, Cuda };

// One case of the catalog (catalog.cpp).
struct CaseInfo {
  const char* name;  // short: the table's first column, matched by --case
  Where where;
  bool per_size;       // measured at every size (else once)
  const char* target;  // the case's target, "" if none
  bool sweep = false;  // measured at the largest size once per host thread count (sweep_threads)
};

// One baseline of the catalog: the table's short label and what it measures.
struct BaselineInfo {
  const char* label;
  const char* name;
};

const CaseInfo* find_case(const std::string& name);
std::vector<const CaseInfo*> all_cases();
const BaselineInfo& baseline_info(const std::string& label);  // aborts for a label not in the catalog

struct Baseline {
  std::string label;   // the table's column text, e.g. "memcpy"
  std::string name;    // what it measures (the legend and the JSON)
  double seconds = 0;  // median; 0 = unavailable
  std::string note;    // why it is unavailable
};

// A baseline of the catalog, measured (seconds > 0) or unavailable (note says why).
Baseline baseline(const char* label, double seconds, std::string note = "");

struct Result {
  std::string name;         // a case of the catalog
  std::string device;       // "cpu", "opencl:0", ...
  uint64_t bytes = 0;       // bytes written to the destination, counted once (0 for per-call costs)
  uint64_t size_bytes = 0;  // the size the case works at (bytes, or a per-call case's buffer size)
  std::string shape;        // for strided cases
  double seconds = 0;       // median time of libarraybridge
  std::vector<Baseline> baselines;
  std::string unit = "GB/s";  // or "ns" for per-call costs
};

using Report = std::function<void(const Result&)>;

// A line for the notes under the table (printed once however often it is given).
void note(const std::string& text);
const std::vector<std::string>& notes();

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

// Options for cases that allocate a new buffer per call: allocators (malloc, an
// OpenCL driver's) settle into reusing freed memory only after a few dozen rounds,
// so both sides warm up that long; from 32 MiB up each buffer is a fresh mapping
// that no warm-up changes (glibc's largest mmap threshold), so the usual warm-up.
Options settled_for_new_buffers(const Options& options, uint64_t bytes);

Baseline memcpy_baseline(const Options& options, void* dst, const void* src, uint64_t bytes);

// The "batch" rows: 256 host tensors of `tensor_bytes` each to `device` in one
// abr_to_device_many, beside the loop of one abr_to_device per tensor (both copies).
Result batch_result(abr_runtime* rt, const Options& options, const char* name, DLDevice device, uint64_t tensor_bytes);

// The "batch D2H" rows: 256 device tensors of `tensor_bytes` each to the CPU in one
// abr_to_device_many, beside the loop of one abr_to_device per tensor.
Result batch_d2h_result(abr_runtime* rt, const Options& options, const char* name, DLDevice device,
                        uint64_t tensor_bytes);

// The "copy_many H2D" rows: 256 host tensors into existing device tensors in one
// abr_copy_many, beside the loop of one abr_copy per pair.
Result copy_batch_result(abr_runtime* rt, const Options& options, const char* name, DLDevice device,
                         uint64_t tensor_bytes);

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
// with *error saying why; *error also says so when the script stopped part way.
std::string run_python(const Options& options, const char* script, const std::string& arguments, std::string* error);

// The Python package's zero-copy round trip beside np.from_dlpack alone; when it
// cannot run, a note says what is missing (NumPy, or the package for that Python).
void run_python_cases(const Options& options, const Report& report);
void run_python_convert_cases(const Options& options, const Report& report);
void run_python_ray_cases(const Options& options, const Report& report);

// Staged copies between NumPy and cuda:0 from Python (to_device, copy), beside
// torch and CuPy doing the same on the same arrays, where they are installed.
void run_python_staging_cases(const Options& options, const Report& report);
void run_python_gpu_batch_cases(const Options& options, const Report& report);
// Host copies from Python (ab.copy, to_device(copy=True), many small arrays) beside NumPy's own.
void run_python_host_copy_cases(const Options& options, const Report& report);
// Tensors between two arraybridge.nixl peers beside NIXL used directly on NumPy arrays.
void run_python_nixl_cases(const Options& options, const Report& report);

// Cases across processes: CUDA IPC beside torch's own, MPI ping-pong beside mpi4py
// on NumPy arrays (process_cases.cpp).
void run_process_cases(const Options& options, const Report& report);

// A script's output as lines; why a script measured nothing (its error, or its
// "missing: ..." line, with the install advice when the package itself is missing).
std::vector<std::string> lines_of(const std::string& text);
std::string not_measured_reason(const std::string& output, const std::string& error);
// The note for a script's cases: none measured (and why), or some before it stopped.
void note_script_end(const std::string& cases, int rows, const std::string& output, const std::string& error);

// NumPy's time for np.ascontiguousarray over the given view, or 0 with a note.
Baseline numpy_pack_baseline(const Options& options, const std::string& kind, uint64_t rows, uint64_t cols);

// The host thread counts a sweep case runs at: 1, 2, 4, ... and the cores (up to 16).
std::vector<unsigned> sweep_threads();
// The largest of the sizes: where sweeps run.
uint64_t largest_size(const Options& options);

inline bool selected(const Options& options, const std::string& name) {
  for (const std::string& part : options.case_parts)
    if (name.find(part) != std::string::npos) return true;
  return options.case_parts.empty();
}
// For the cases that run only when --case names them (starting a Ray cluster takes a
// minute): by their whole name, or by a case's whole name that begins theirs ("py ray"
// names "py ray torch" too); never by a part of a word, as --case o selects.
inline bool named(const Options& options, const std::string& name) {
  for (const std::string& asked : options.case_parts)
    if (asked == name || (name.rfind(asked + " ", 0) == 0 && find_case(asked) != nullptr)) return true;
  return false;
}

// "cpu", "opencl:0", ... as the table shows devices.
std::string device_name(DLDevice device);
bool device_selected(const Options& options, DLDevice device);

// Progress on stderr, only when it is a terminal: the measurement running now, rows
// done of those planned, and an estimate of the time left (rows weighted by size).
void progress_plan(int rows, uint64_t weight);
void progress(const std::string& device, uint64_t bytes);  // a new group of measurements starts
void progress_row_done(uint64_t weight);
void progress_clear();   // before anything else is printed
void progress_resume();  // after it
uint64_t row_weight(uint64_t size_bytes);

}  // namespace bench

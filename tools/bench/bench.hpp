// arraybridge-bench: each case measures libarraybridge beside baselines run in the
// same process on the same buffers; the table and JSON report the ratios.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <arraybridge/arraybridge.h>

namespace bench {

struct Options {
  std::vector<uint64_t> sizes;  // bytes
  int repetitions = 7;
  int warmup = 2;
  std::string case_filter;  // substring of the case name; empty = all
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

// Host-memory cases: contiguous copy, strided packs, zero-copy round trip.
void run_host_cases(abr_runtime* rt, const Options& options, const Report& report);

// NumPy's time for np.ascontiguousarray over the given view, or 0 with a note.
Baseline numpy_pack_baseline(const Options& options, const std::string& kind, uint64_t rows, uint64_t cols);

inline bool selected(const Options& options, const std::string& name) {
  return options.case_filter.empty() || name.find(options.case_filter) != std::string::npos;
}

}  // namespace bench

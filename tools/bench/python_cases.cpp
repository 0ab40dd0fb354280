// The Python package's cost: numpy -> arraybridge.to_device("cpu") -> np.from_dlpack,
// a zero-copy round trip through the runtime, beside np.from_dlpack alone on the
// same array, both timed by the same Python in one run.
#include <cstdio>
#include <string>

#include "bench.hpp"

namespace bench {
namespace {

// Prints "<round trip seconds> <np.from_dlpack seconds>" per call (medians of
// batches), or "unavailable: <why>".
const char* kScript = R"PY(
import sys, time
try:
    import numpy as np, arraybridge as ab
except ImportError as error:
    print(f"unavailable: {error} (run `make python`)"); sys.exit(0)
reps, warm, calls = int(sys.argv[1]), int(sys.argv[2]), 20000
a = np.ones(1024, dtype=np.float32)
def median(fn):
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); times.append((time.perf_counter() - t) / calls)
    return sorted(times)[len(times) // 2]
def ours():
    for _ in range(calls):
        np.from_dlpack(ab.to_device(a, "cpu"))
def base():
    for _ in range(calls):
        np.from_dlpack(a)
assert ab.to_device(a, "cpu").report.path == "zero_copy"
print(median(ours), median(base))
)PY";

}  // namespace

void run_python_cases(const Options& options, const Report& report) {
  const char* name = "python zero-copy round trip (to_device + np.from_dlpack)";
  if (!selected(options, name) || !device_selected(options, {kDLCPU, 0})) return;
  progress("python", 0);
  Result r{name, "cpu", 0};
  r.unit = "ns";
  Baseline baseline{"np.from_dlpack alone", 0, ""};
  const std::string output =
      run_python(options, kScript, std::to_string(options.repetitions) + " " + std::to_string(options.warmup),
                 &baseline.note);
  if (std::sscanf(output.c_str(), "%lf %lf", &r.seconds, &baseline.seconds) != 2) {
    if (baseline.note.empty()) baseline.note = output.substr(0, output.find('\n'));
    std::fprintf(stderr, "arraybridge-bench: python case unavailable: %s\n", baseline.note.c_str());
    return;
  }
  r.baselines.push_back(baseline);
  report(r);
}

}  // namespace bench

// The Python package's cost: numpy -> arraybridge.to_device("cpu") -> np.from_dlpack,
// a zero-copy round trip through the runtime, beside np.from_dlpack alone on the
// same array, both timed by the same Python in one run.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "bench.hpp"

namespace bench {
namespace {

// Prints "<round trip seconds> <np.from_dlpack seconds>" per call (medians of
// batches), or "missing: <what>" when NumPy or the package cannot be imported.
const char* kScript = R"PY(
import sys, time
try:
    import numpy as np
except ImportError:
    print(f"missing: NumPy is not installed for {sys.executable}"); sys.exit(0)
try:
    import arraybridge as ab
except ImportError as error:
    print(f"missing: the arraybridge package is not installed for {sys.executable} ({error})"); sys.exit(0)
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

// Inside a checkout (run from its root, as `make demo` does) `make python` builds the
// package; elsewhere the advice is the package's own install.
std::string install_hint() {
  if (access("python/arraybridge/__init__.py", R_OK) == 0 && access("Makefile", R_OK) == 0)
    return "; `make python` builds it into .venv";
  return "; install it with `pip install ./python` from a libarraybridge checkout";
}

}  // namespace

void run_python_cases(const Options& options, const Report& report) {
  const char* name = "python round trip";
  if (!selected(options, name) || !device_selected(options, {kDLCPU, 0})) return;
  progress("python", 0);
  Result r{name, "cpu", 0};
  r.unit = "ns";
  Baseline alone = baseline("np.dlpack", 0);
  const std::string output =
      run_python(options, kScript, std::to_string(options.repetitions) + " " + std::to_string(options.warmup),
                 &alone.note);
  if (std::sscanf(output.c_str(), "%lf %lf", &r.seconds, &alone.seconds) != 2) {
    if (alone.note.empty()) alone.note = output.substr(0, output.find('\n'));
    if (alone.note.rfind("missing: ", 0) == 0) alone.note = alone.note.substr(9);
    if (alone.note.find("arraybridge package") != std::string::npos) alone.note += install_hint();
    note("python round trip not measured: " + alone.note);
    progress_row_done(row_weight(0));
    return;
  }
  r.baselines.push_back(alone);
  report(r);
}

}  // namespace bench

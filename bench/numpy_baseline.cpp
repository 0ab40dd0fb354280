// NumPy baselines, run by the Python the user points at (default python3), in
// this same benchmark run, on a view of the same shape and kind.
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench.hpp"

namespace bench {
namespace {

// Prints the median seconds of np.ascontiguousarray over the requested view.
const char* kScript = R"PY(
import sys, time
try:
    import numpy as np
except ImportError:
    print(f"NumPy is not installed for {sys.executable}"); sys.exit(0)
kind, rows, cols, reps, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if kind == "transpose":
    view = np.arange(rows * cols, dtype=np.float32).reshape(cols, rows).T
elif kind == "slice":
    view = np.arange(rows * cols * 2, dtype=np.float32).reshape(rows, cols * 2)[:, ::2]
elif kind == "reverse":
    view = np.arange(rows * cols, dtype=np.float32)[::-1]
else:
    print(f"unknown view kind {kind}"); sys.exit(0)
for _ in range(warm):
    np.ascontiguousarray(view)
times = []
for _ in range(reps):
    t = time.perf_counter(); out = np.ascontiguousarray(view); times.append(time.perf_counter() - t); del out
times.sort()
print(times[len(times) // 2])
)PY";

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string run_python(const Options& options, const char* script, const std::string& arguments, std::string* error) {
  const std::string command = shell_quote(options.python) + " -c " + shell_quote(script) + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    *error = "cannot start " + options.python;
    return "";
  }
  char line[512] = {};
  std::string output;
  while (std::fgets(line, sizeof line, pipe)) output += line;
  const int status = pclose(pipe);
  if (output.empty()) {
    *error = "no output from " + options.python;
  } else if (status != 0) {  // a script that stopped part way: its last words say why
    const std::vector<std::string> lines = lines_of(output);
    const std::string how = WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                              : "signal " + std::to_string(WTERMSIG(status));
    *error = "the script stopped (" + how + ")" + (lines.empty() ? "" : ": " + lines.back());
  }
  return output;
}

Baseline numpy_pack_baseline(const Options& options, const std::string& kind, uint64_t rows, uint64_t cols) {
  Baseline result = baseline("numpy", 0);
  const std::string output = run_python(options, kScript,
                                        kind + " " + std::to_string(rows) + " " + std::to_string(cols) + " " +
                                            std::to_string(options.repetitions) + " " + std::to_string(options.warmup),
                                        &result.note);
  if (output.empty()) return result;
  try {
    result.seconds = std::stod(output);
  } catch (...) {
    result.note = output.substr(0, output.find('\n'));
  }
  return result;
}

}  // namespace bench

// Where a run happened: the facts the benchmark and the soak write beside their
// figures, so results from different machines or commits are never compared by
// mistake. Needs only the C API (the soak links machine.cpp alone).
#pragma once

#include <string>

#include <arraybridge/arraybridge.h>

namespace bench {

// The CPU's model name from /proc/cpuinfo, or "unknown".
std::string cpu_model();

// ARRAYBRIDGE_COMMIT (set by dev/gpu_check.sh for copies without .git), else git's
// HEAD with "+changes" when tracked files differ from it, else "unknown".
std::string checkout_commit();

// The "machine" object of the JSON: host CPU and cores, the commit, the CUDA and
// OpenCL backends as the runtime reports them (driver and CUDA version), the
// NVIDIA kernel driver, and every device, so a result says where it was measured.
std::string machine_json(abr_runtime* rt);

// `s` made safe inside a JSON string: quotes and backslashes escaped, control
// characters turned into spaces.
std::string json_escape(const std::string& s);

}  // namespace bench

// The soak's workload: every transfer path of the public C API on every device
// the runtime found (the CPU, OpenCL, CUDA), each result checked element by
// element. One step runs one kind of work on one device and says how many
// transfers it made; a thread runs steps in turn for as long as it is told.
#pragma once

#include <arraybridge/arraybridge.h>

#include <cstdint>
#include <string>
#include <vector>

namespace soak {

struct Workload {
  abr_runtime* rt = nullptr;
  std::vector<DLDevice> devices;  // the CPU first
};

// What one step did: the transfers it made, and the first wrong thing it saw ("" when none).
struct StepResult {
  uint64_t transfers = 0;
  std::string error;
};

// How many kinds of step there are; step `n` of a thread runs kind n % kinds()
// on device (n / kinds()) % devices, with sizes drawn from `seed` and `n`.
int kinds();
const char* kind_name(int kind);
StepResult run_step(const Workload& work, int thread, uint64_t n);

}  // namespace soak

// The fault-injection walk (lib/base/fault.hpp) shared by the OpenCL and CUDA tests:
// each scenario runs once to count its injection points, then once per point
// with that point failing. Every failure must give a clean error status naming
// the fault, leave the source with its owner (deleter not run), and leave the
// runtime working; LeakSanitizer checks that nothing leaked. ASan build only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lib/base/fault.hpp"
#include "tests/support/helpers.hpp"

namespace test {

struct Scenario {
  const char* name;
  // Runs one transfer from a fresh source; returns its status. `deleted` is the
  // source's deleter count after the call, for the ownership check.
  std::function<abr_status(abr_runtime*, int& deleted)> run;
};

inline abr_status transfer(abr_runtime* rt, Managed& src, DLDevice device, abr_copy_mode copy, DLDataType dtype,
                           abr_stream* stream, int& deleted) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = copy;
  options.dtype = dtype;
  DLManagedTensorVersioned* out = nullptr;
  const abr_status status = abr_to_device(rt, &src.managed, device, &options, stream, &out);
  if (stream) abr_stream_synchronize(stream);
  deleted = src.deleted;
  if (status == ABR_OK) {
    CHECK(out != nullptr);
    out->deleter(out);
  } else {
    CHECK(out == nullptr);
  }
  return status;
}

// The same on a stream made for it and destroyed after; `deleted` is read after
// the destroy, when the stream has released the source. A success that left the
// source unreleased is reported as ABR_ERR_INTERNAL.
inline abr_status transfer_on_new_stream(abr_runtime* rt, Managed& src, DLDevice device, int& deleted) {
  abr_stream* stream = nullptr;
  deleted = 0;
  const abr_status made = abr_stream_create(rt, device, &stream);
  if (made != ABR_OK) return made;
  const abr_status status = transfer(rt, src, device, ABR_COPY_ALWAYS, {}, stream, deleted);
  abr_stream_destroy(stream);
  deleted = src.deleted;
  return status == ABR_OK && deleted != 1 ? ABR_ERR_INTERNAL : status;
}

#ifdef ABR_FAULT_INJECTION
// Returns the number of injected failures walked.
inline uint64_t walk_faults(abr_runtime* rt, const std::vector<Scenario>& scenarios) {
  uint64_t sites_walked = 0;
  // Every run starts with empty caches (the pinned pool, the device cache): a block a
  // run left behind, back or not yet, would make the next run's points differ.
  auto fresh_run = [rt](const Scenario& scenario, int& deleted) {
    REQUIRE(abr_pool_trim(rt, nullptr) == ABR_OK);
    return scenario.run(rt, deleted);
  };
  for (const Scenario& scenario : scenarios) {
    INFO("scenario: " << std::string(scenario.name));
    abr::fault::arm(0);
    int deleted = 0;
    REQUIRE(fresh_run(scenario, deleted) == ABR_OK);
    const uint64_t sites = abr::fault::passed();
    uint64_t failed_here = 0;
    for (uint64_t n = 1; n <= sites; ++n) {
      CAPTURE(n);
      abr::fault::arm(n);
      deleted = -1;
      const abr_status status = fresh_run(scenario, deleted);
      abr::fault::arm(0);
      if (status == ABR_OK) continue;  // the point was on a path this run did not need
      CHECK((status == ABR_ERR_OUT_OF_MEMORY || status == ABR_ERR_BACKEND));
      CHECK(error_mentions("injected fault"));
      CHECK(deleted == 0);                           // the source is still the caller's
      REQUIRE(scenario.run(rt, deleted) == ABR_OK);  // and the runtime still works
      ++failed_here;
    }
    CHECK(failed_here > 0);  // every transfer has points of its own to fail
    MESSAGE(std::string(scenario.name) << ": " << sites << " points, " << failed_here << " injected failures");
    sites_walked += failed_here;
  }
  MESSAGE("fault injection: " << sites_walked << " injected failures across " << scenarios.size() << " transfers");
  return sites_walked;
}
#endif

}  // namespace test

// Each side of a transfer is resolved once (lib/devices/endpoint.hpp): one registry lookup
// per side, counted through the registry's own counter, on every path the CPU and
// PoCL reach: views, copies, host <-> OpenCL both ways, into existing tensors.
#include <vector>

#include "lib/devices/devices.hpp"
#include "tests/support/helpers.hpp"

using namespace test;

namespace {

// Registry lookups made by `call` on this thread.
template <class F>
uint64_t lookups_of(F&& call) {
  const uint64_t before = abr::DeviceRegistry::lookups_on_this_thread();
  call();
  return abr::DeviceRegistry::lookups_on_this_thread() - before;
}

DLManagedTensorVersioned* to(abr_runtime* rt, Managed& src, DLDevice device, abr_copy_mode copy) {
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.copy = copy;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &src.managed, device, &options, nullptr, &out) == ABR_OK);
  return out;
}

}  // namespace

TEST_CASE("endpoints: one registry lookup per side of every transfer and copy") {
  Runtime rt;
  const DLDevice opencl{kDLOpenCL, 0};
  std::vector<float> host(1024, 1.5f), back(1024);
  Managed view_source(host.data(), f32, {1024}), copy_source(host.data(), f32, {1024}),
      upload_source(host.data(), f32, {1024});
  CHECK(lookups_of([&] { Owned view(to(rt, view_source, cpu, ABR_COPY_IF_NEEDED)); }) == 2);
  CHECK(lookups_of([&] { Owned copy(to(rt, copy_source, cpu, ABR_COPY_ALWAYS)); }) == 2);
  DLManagedTensorVersioned* uploaded = nullptr;
  CHECK(lookups_of([&] { uploaded = to(rt, upload_source, opencl, ABR_COPY_ALWAYS); }) == 2);
  REQUIRE(uploaded != nullptr);  // the rest reads it: a failed upload ends the test, not the process
  Owned on_device(uploaded);
  Managed device_source(on_device->data, f32, {1024}, {}, 0, opencl);
  CHECK(lookups_of([&] { Owned download(to(rt, device_source, cpu, ABR_COPY_IF_NEEDED)); }) == 2);
  Managed landing(back.data(), f32, {1024});
  const auto copy = [&](DLTensor& from, DLTensor& into) {
    return lookups_of([&] { REQUIRE(abr_copy(rt, &from, &into, nullptr, nullptr) == ABR_OK); });
  };
  CHECK(copy(on_device.t->dl_tensor, landing.tensor()) == 2);
  CHECK(back == host);
  CHECK(copy(landing.tensor(), on_device.t->dl_tensor) == 2);
}

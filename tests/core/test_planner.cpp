// The planner on its own, with made-up devices and capabilities: no driver, no
// PoCL, no fake CUDA. The same device kinds get different plans when only their
// backend's Capabilities change, which is what lets a new backend be a table row
// plus its own folder: the planner never asks which backend it is talking to.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "lib/tensor/device_kinds.hpp"
#include "lib/base/error.hpp"
#include "lib/plan/planner.hpp"

namespace {

using abr::Capabilities;
using abr::Endpoint;
using abr::Move;
using abr::Plan;
using abr::Step;

const DLDataType f32{kDLFloat, 32, 1};

abr::BackendReport report(abr_backend backend, std::vector<DLDevice> devices, uint32_t flags = 0) {
  abr::BackendReport out;
  out.info.backend = backend;
  out.info.available = 1;
  out.info.device_count = static_cast<uint32_t>(devices.size());
  for (DLDevice device : devices) {
    struct abr_device_info info {};
    info.device = device;
    info.backend = backend;
    info.flags = flags;
    out.devices.push_back(info);
  }
  return out;
}

// Two CUDA devices plus cuda_host, two OpenCL devices: only their descriptions.
struct World {
  abr::BackendReport cuda = report(ABR_BACKEND_CUDA, {{kDLCUDA, 0}, {kDLCUDA, 1}, {kDLCUDAHost, 0}});
  abr::BackendReport opencl = report(ABR_BACKEND_OPENCL, {{kDLOpenCL, 0}, {kDLOpenCL, 1}});
  abr::DeviceRegistry devices{{&cuda, &opencl}};
};

// A tensor's layout; the data pointers are never dereferenced by the planner.
struct Tensor {
  std::vector<int64_t> shape, strides;
  DLTensor t{};
  Tensor(DLDevice device, std::vector<int64_t> shape_, std::vector<int64_t> strides_ = {}, uintptr_t data = 0x100000)
      : shape(std::move(shape_)), strides(std::move(strides_)) {
    t.data = reinterpret_cast<void*>(data);
    t.device = device;
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = f32;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
  abr::Layout layout(abr::Role role = abr::Role::Source) const { return abr::validate_tensor(t, role, "tensor"); }
};

char c0 = 0, c1 = 0;
const char domain = 0;  // contexts and a peer domain: only their addresses matter

// An existing tensor's side: host memory (page-locked or not), or device memory in `context`.
Endpoint host_memory(const World& world, bool pinned = false, DLDevice device = {kDLCPU, 0}) {
  Endpoint side = abr::describe_endpoint(world.devices, device, "source", /*must_exist=*/false);
  side.pinned = pinned;
  return side;
}
Endpoint device_memory(const World& world, DLDevice device, void* context, const Capabilities& can) {
  Endpoint side = abr::describe_endpoint(world.devices, device, "source", /*must_exist=*/false);
  side.context = context;
  side.can = can;
  return side;
}
// A new tensor's device.
Endpoint new_tensor_on(const World& world, DLDevice device, void* context = nullptr, const Capabilities& can = {}) {
  Endpoint side = abr::describe_endpoint(world.devices, device, "destination", /*must_exist=*/true);
  side.context = context;
  side.can = can;
  return side;
}

std::string detail(const Plan& plan) { return std::string(plan.detail.view()); }

}  // namespace

TEST_CASE("planner: maps_to_host decides who reshapes a strided host source, whatever the backend") {
  World world;
  const Tensor strided({kDLCPU, 0}, {256, 256}, {1, 256});  // transposed: packed on the way
  Capabilities mapped, dma_only;
  mapped.maps_to_host = true;
  for (DLDevice device : {DLDevice{kDLCUDA, 0}, DLDevice{kDLOpenCL, 0}}) {
    CAPTURE(device.device_type);
    const Plan walk =
        abr::plan_transfer(strided.layout(), host_memory(world), new_tensor_on(world, device, &c0, mapped), {});
    CHECK(walk.move == Move::HostWalk);
    CHECK(walk.pack == Step::None);
    CHECK(detail(walk).find("through mapped memory") != std::string::npos);

    const Plan dma =
        abr::plan_transfer(strided.layout(), host_memory(world), new_tensor_on(world, device, &c0, dma_only), {});
    CHECK(dma.move != Move::HostWalk);
    CHECK(dma.pack == Step::Host);  // packed on the host, into pinned memory
    CHECK(dma.path == ABR_PATH_HOST_TO_DEVICE);
  }
}

TEST_CASE("planner: a peer copy exactly when both sides share a peer domain") {
  World world;
  Capabilities peer, alone;
  peer.peer_domain = &domain;
  peer.peer_copy_words = "one made-up peer copy";
  for (DLDeviceType type : {kDLCUDA, kDLOpenCL}) {
    CAPTURE(type);
    const Tensor src({type, 0}, {1024});
    const Plan direct = abr::plan_transfer(src.layout(), device_memory(world, {type, 0}, &c0, peer),
                                           new_tensor_on(world, {type, 1}, &c1, peer), {});
    CHECK(direct.path == ABR_PATH_PEER);
    CHECK(direct.move == Move::Peer);
    CHECK(detail(direct).find("one made-up peer copy") != std::string::npos);

    const Plan staged = abr::plan_transfer(src.layout(), device_memory(world, {type, 0}, &c0, alone),
                                           new_tensor_on(world, {type, 1}, &c1, alone), {});
    CHECK(staged.path == ABR_PATH_STAGED);
    CHECK_FALSE(staged.staging_at_source);  // the destination's blocks
    CHECK_FALSE(staged.staging_shared);     // one backend: its own blocks serve both sides
    CHECK(detail(staged).find("staged between contexts") != std::string::npos);
  }
}

TEST_CASE("planner: between backends, blocks are shared with the side that page-locks foreign memory") {
  World world;
  Capabilities locks, cannot;
  locks.page_locks_foreign_host = true;
  const Tensor cuda_src({kDLCUDA, 0}, {1 << 20});
  const Tensor opencl_src({kDLOpenCL, 0}, {1 << 20});
  struct Case {
    const Tensor* src;
    DLDevice dst;
    Capabilities src_can, dst_can;
    bool at_source, shared;
  } cases[] = {
      {&opencl_src, {kDLCUDA, 0}, cannot, locks, true, true},     // the OpenCL side's blocks, locked by CUDA too
      {&cuda_src, {kDLOpenCL, 0}, locks, cannot, false, true},    // the same from the other direction
      {&cuda_src, {kDLOpenCL, 0}, cannot, cannot, false, false},  // nobody can: the destination's, plain
      {&opencl_src, {kDLCUDA, 0}, locks, locks, false, true},     // both can: the destination's, locked by the source
  };
  for (const Case& c : cases) {
    CAPTURE(c.src->t.device.device_type);
    CAPTURE(c.src_can.page_locks_foreign_host);
    CAPTURE(c.dst_can.page_locks_foreign_host);
    const Plan plan = abr::plan_transfer(c.src->layout(), device_memory(world, c.src->t.device, &c0, c.src_can),
                                         new_tensor_on(world, c.dst, &c1, c.dst_can), {});
    CHECK(plan.move == Move::Staged);
    CHECK(plan.staging_at_source == c.at_source);
    CHECK(plan.staging_shared == c.shared);
    CHECK(detail(plan).find(c.shared ? "pinned for both drivers" : "through pinned host memory") != std::string::npos);
  }
}

TEST_CASE("planner: host memory used in place, in the backend's words, only when aligned as it asks") {
  World world;
  Capabilities wraps;
  wraps.host_wrap_words = "borrows the host memory (made-up API)";
  Endpoint opencl = new_tensor_on(world, {kDLOpenCL, 0}, &c0, wraps);
  opencl.shares_host_memory = true;  // a made-up device that works in host memory
  opencl.host_wrap_alignment = 64;
  const Tensor aligned({kDLCPU, 0}, {64}, {}, 0x10000);
  const Plan wrap = abr::plan_transfer(aligned.layout(), host_memory(world), opencl, {});
  CHECK(wrap.path == ABR_PATH_HOST_WRAP);
  CHECK(wrap.move == abr::Move::View);
  CHECK(detail(wrap) == "opencl:0 borrows the host memory (made-up API), no copy");

  const Tensor misaligned({kDLCPU, 0}, {64}, {}, 0x10004);
  const Plan copy = abr::plan_transfer(misaligned.layout(), host_memory(world), opencl, {});
  CHECK(copy.move != abr::Move::View);
  CHECK(detail(copy).find("not aligned to the 64 bytes opencl:0 needs") != std::string::npos);

  opencl.shares_host_memory = false;
  CHECK(abr::plan_transfer(aligned.layout(), host_memory(world), opencl, {}).move != abr::Move::View);
}

TEST_CASE("planner: page-locked host memory (the table's cuda_host row) is a view only of page-locked memory") {
  World world;
  const Tensor host({kDLCPU, 0}, {1024});
  const Endpoint cuda_host = new_tensor_on(world, {kDLCUDAHost, 0});
  const Plan view = abr::plan_transfer(host.layout(), host_memory(world, /*pinned=*/true), cuda_host, {});
  CHECK(view.path == ABR_PATH_ZERO_COPY);
  const Plan copy = abr::plan_transfer(host.layout(), host_memory(world), cuda_host, {});
  CHECK(copy.path == ABR_PATH_HOST_COPY);
  CHECK(detail(copy).find("not page-locked, which cuda_host promises") != std::string::npos);
}

TEST_CASE("endpoints: devices outside the registry or the kind table are refused by name") {
  World world;
  try {
    new_tensor_on(world, {kDLOpenCL, 7});
    FAIL("planned onto a device the registry lacks");
  } catch (const abr::Error& e) {
    CHECK(e.status() == ABR_ERR_NO_DEVICE);
    CHECK(std::string(e.what()).find("no device opencl:7 (the OpenCL backend has 2 device(s))") != std::string::npos);
  }
  try {
    new_tensor_on(world, {kDLVulkan, 0});
    FAIL("planned onto a device type without a row");
  } catch (const abr::Error& e) {
    CHECK(e.status() == ABR_ERR_NO_DEVICE);
    CHECK(std::string(e.what()).find("dlpack_device_7:0 is not supported") != std::string::npos);
  }
}

TEST_CASE("device kinds: strings and parsing are each other's inverse, and bad text is named") {
  for (DLDevice device : {DLDevice{kDLCPU, 0}, DLDevice{kDLCUDA, 3}, DLDevice{kDLCUDAHost, 0},
                          DLDevice{kDLCUDAManaged, 0}, DLDevice{kDLOpenCL, 12}}) {
    const DLDevice back = abr::parse_device(abr::device_string(device));
    CHECK(abr::same_device(back, device));
  }
  CHECK(abr::device_string({kDLCUDA, 0}) == "cuda:0");
  CHECK(abr::device_string({kDLCPU, 0}) == "cpu");
  CHECK(abr::device_string({kDLVulkan, 2}) == "dlpack_device_7:2");
  // The digits are written by hand (no allocation): the extremes and a nonzero id on an unnumbered kind.
  CHECK(abr::device_string({kDLCUDA, INT32_MAX}) == "cuda:2147483647");
  CHECK(abr::device_string({kDLCPU, -5}) == "cpu:-5");
  CHECK(abr::device_string({static_cast<DLDeviceType>(INT32_MIN), INT32_MIN}) ==
        "dlpack_device_-2147483648:-2147483648");
  CHECK(abr::same_device(abr::parse_device("  CUDA "), {kDLCUDA, 0}));
  CHECK(abr::same_device(abr::parse_device("cpu:0"), {kDLCPU, 0}));
  for (const char* bad : {"", "gpu:0", "cuda:", "cuda:-1", "cuda:1x", "cuda_host:1", "opencl:99999999999"}) {
    CAPTURE(bad);
    try {
      abr::parse_device(bad);
      FAIL("parsed");
    } catch (const abr::Error& e) {
      CHECK(e.status() == ABR_ERR_INVALID_ARGUMENT);
    }
  }
}

TEST_CASE("planner: the plan names who executes every move, and views name no one") {
  World world;
  Capabilities peer, alone;
  peer.peer_domain = &domain;
  const Tensor host({kDLCPU, 0}, {1024}), on_cuda({kDLCUDA, 0}, {1024}), on_opencl({kDLOpenCL, 0}, {1024});
  abr::TransferOptions copy;
  copy.copy = ABR_COPY_ALWAYS;
  struct Row {
    const char* what;
    Plan plan;
    abr::Executor executor;
  };
  const Row rows[] = {
      {"view on the CPU", abr::plan_transfer(host.layout(), host_memory(world), new_tensor_on(world, {kDLCPU, 0}), {}),
       abr::Executor::None},
      {"host copy", abr::plan_transfer(host.layout(), host_memory(world), new_tensor_on(world, {kDLCPU, 0}), copy),
       abr::Executor::Host},
      {"host to device",
       abr::plan_transfer(host.layout(), host_memory(world, true), new_tensor_on(world, {kDLCUDA, 0}, &c0, alone), {}),
       abr::Executor::Destination},
      {"device to host",
       abr::plan_transfer(on_cuda.layout(), device_memory(world, {kDLCUDA, 0}, &c0, alone),
                          new_tensor_on(world, {kDLCPU, 0}), {}),
       abr::Executor::Source},
      {"device copy",
       abr::plan_transfer(on_cuda.layout(), device_memory(world, {kDLCUDA, 0}, &c0, alone),
                          new_tensor_on(world, {kDLCUDA, 0}, &c0, alone), copy),
       abr::Executor::Source},
      {"peer copy",
       abr::plan_transfer(on_cuda.layout(), device_memory(world, {kDLCUDA, 0}, &c0, peer),
                          new_tensor_on(world, {kDLCUDA, 1}, &c1, peer), {}),
       abr::Executor::Source},
      {"staged between backends",
       abr::plan_transfer(on_opencl.layout(), device_memory(world, {kDLOpenCL, 0}, &c0, alone),
                          new_tensor_on(world, {kDLCUDA, 0}, &c1, alone), {}),
       abr::Executor::Pipeline},
  };
  for (const Row& row : rows) {
    CAPTURE(row.what);
    CHECK(row.plan.executor == row.executor);
    CHECK((row.plan.move == Move::View) == (row.executor == abr::Executor::None));
  }
}

TEST_CASE("planner: the source is handed back only as a view on its own device of a source that reads as one") {
  World world;
  const Tensor host({kDLCPU, 0}, {64});
  abr::TransferOptions ours, theirs;
  ours.source_reads_as_view = true;
  CHECK(abr::plan_transfer(host.layout(), host_memory(world), new_tensor_on(world, {kDLCPU, 0}), ours).hand_back);
  CHECK_FALSE(
      abr::plan_transfer(host.layout(), host_memory(world), new_tensor_on(world, {kDLCPU, 0}), theirs).hand_back);
  abr::TransferOptions copy = ours;
  copy.copy = ABR_COPY_ALWAYS;
  CHECK_FALSE(abr::plan_transfer(host.layout(), host_memory(world), new_tensor_on(world, {kDLCPU, 0}), copy).hand_back);
  // cuda_host of page-locked memory is a view on another device: a new header says so.
  const Plan other = abr::plan_transfer(host.layout(), host_memory(world, /*pinned=*/true),
                                        new_tensor_on(world, {kDLCUDAHost, 0}), ours);
  CHECK(other.path == ABR_PATH_ZERO_COPY);
  CHECK_FALSE(other.hand_back);
}

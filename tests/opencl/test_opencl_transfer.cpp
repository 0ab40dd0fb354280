// Every OpenCL path, for real on PoCL (installed by dev/bootstrap.sh, so none of
// this ever skips): round trips for every dtype and view, device copies and
// casts, buffers from a context the test made itself, streams, and errors.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "lib/tensor/dtype.hpp"
#include "lib/base/error.hpp"
#include "lib/host/host_cast.hpp"
#include "lib/run/runtime.hpp"
#include "opencl/kernels.hpp"
#include "tests/support/opencl_helpers.hpp"

using namespace test;

namespace {

const std::vector<DLDataType> kAllDtypes = {dt(kDLBool, 8),
                                            dt(kDLInt, 8),
                                            dt(kDLInt, 16),
                                            i32,
                                            dt(kDLInt, 64),
                                            u8,
                                            dt(kDLUInt, 16),
                                            dt(kDLUInt, 32),
                                            dt(kDLUInt, 64),
                                            dt(kDLFloat, 16),
                                            dt(kDLBfloat, 16),
                                            f32,
                                            f64,
                                            dt(kDLComplex, 64),
                                            dt(kDLComplex, 128)};

const std::vector<double> kValues = {0,
                                     1,
                                     -1,
                                     2.5,
                                     -3.75,
                                     100,
                                     300,
                                     -1e6,
                                     4e9,
                                     1e20,
                                     -1e30,
                                     0.1,
                                     std::numeric_limits<double>::infinity(),
                                     -std::numeric_limits<double>::infinity()};

std::size_t size_of(DLDataType t) { return t.bits / 8; }

bool same_dtype_for_test(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// kValues converted to `dtype` by the host engine, as a compact CPU tensor.
DLManagedTensorVersioned* host_values(abr_runtime* rt, DLDataType dtype, std::vector<double> values = kValues) {
  Managed m(values.data(), f64, {static_cast<int64_t>(values.size())});
  return move_to(rt, &m.managed, cpu, ABR_COPY_ALWAYS, ABR_PATH_HOST_COPY, dtype);
}

std::vector<char> host_bytes(const DLTensor& t, std::size_t bytes) {
  const char* p = static_cast<const char*>(t.data) + t.byte_offset;
  return std::vector<char>(p, p + bytes);
}

// The elements of a strided view of host memory, packed row-major (the reference).
std::vector<char> packed(const DLTensor& view, std::size_t itemsize) {
  std::vector<char> out;
  std::vector<int64_t> shape(view.shape, view.shape + view.ndim);
  for_each_index(shape, [&](const std::vector<int64_t>& index) {
    const char* e = element_at(view, index, itemsize);
    out.insert(out.end(), e, e + itemsize);
  });
  return out;
}

struct ViewCase {
  const char* name;
  std::vector<int64_t> shape, strides;
  uint64_t byte_offset;
  bool writable;  // distinct elements: can be a destination
};

// Views of an 8 x 16 float32 buffer.
const std::vector<ViewCase> kViews = {
    {"compact", {8, 16}, {}, 0, true},
    {"transposed", {16, 8}, {1, 16}, 0, true},
    {"step-2 slice", {8, 8}, {16, 2}, 4, true},
    {"negative strides", {8, 16}, {-16, -1}, 127 * 4, true},
    {"offset row", {10}, {1}, 40, true},
    {"0-d", {}, {}, 12, true},
    {"zero-size", {0, 16}, {}, 0, true},
    {"broadcast", {4, 16}, {0, 1}, 0, false},
    // dimensions that interleave, every element apart: offsets 0, 3, 2, 5, 4, 7
    {"interleaved", {3, 2}, {2, 3}, 8, true},
};

std::vector<float> base_values() {
  std::vector<float> base(128);
  for (std::size_t i = 0; i < base.size(); ++i) base[i] = static_cast<float>(i) * 1.5f - 7;
  return base;
}

DLTensor view_of(void* data, const ViewCase& v, DLDevice device, DLDataType dtype = f32) {
  DLTensor t{};
  t.data = data;
  t.device = device;
  t.ndim = static_cast<int32_t>(v.shape.size());
  t.dtype = dtype;
  t.shape = const_cast<int64_t*>(v.shape.data());
  t.strides = v.strides.empty() ? nullptr : const_cast<int64_t*>(v.strides.data());
  t.byte_offset = v.byte_offset;
  return t;
}

uint64_t numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t e : shape) n *= static_cast<uint64_t>(e);
  return n;
}

// A buffer in the runtime's own context of opencl:0 holding `bytes` from the host.
DLManagedTensorVersioned* upload(abr_runtime* rt, void* host, std::size_t bytes) {
  std::vector<int64_t> shape{static_cast<int64_t>(bytes)};
  Managed m(host, u8, shape);
  return move_to(rt, &m.managed, ocl0, ABR_COPY_ALWAYS, ABR_PATH_HOST_TO_DEVICE);
}

}  // namespace

TEST_CASE("every dtype makes the round trip host -> OpenCL -> host, each deleter running once") {
  Runtime rt;
  for (DLDataType dtype : kAllDtypes) {
    CAPTURE(dtype.code);
    CAPTURE(dtype.bits);
    Owned host(host_values(rt, dtype));
    const std::size_t bytes = kValues.size() * size_of(dtype);
    Managed src(host->data, dtype, {static_cast<int64_t>(kValues.size())});
    Owned device(move_to(rt, &src.managed, ocl0, ABR_COPY_ALWAYS, ABR_PATH_HOST_TO_DEVICE));
    CHECK(src.deleted == 1);  // copied: the source is released at once
    CHECK(device->device.device_type == kDLOpenCL);
    CHECK(device->device.device_id == 0);
    CHECK((device.t->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0);
    CHECK(read_mem(static_cast<cl_mem>(device->data), 0, bytes) == host_bytes(*host, bytes));

    Managed on_device(device->data, dtype, {static_cast<int64_t>(kValues.size())}, {}, 0, ocl0);
    Owned back(move_to(rt, &on_device.managed, cpu, ABR_COPY_IF_NEEDED, ABR_PATH_DEVICE_TO_HOST));
    CHECK(on_device.deleted == 1);
    CHECK(host_bytes(*back, bytes) == host_bytes(*host, bytes));
  }
}

TEST_CASE("pageable host memory to and from each OpenCL device: in place where it shares host memory, else staged") {
  // A device that works in host memory (PoCL, integrated GPUs) is given one direct
  // copy; one that does not (a discrete GPU) gets the transfer pipeline from two
  // chunks up, through its own context's mapped blocks. Every device, values checked.
  Runtime rt;
  StagingChunkMib chunks("1");
  const std::size_t n = (std::size_t{3} << 20) / 4 + 5;  // three 1 MiB chunks and a bit
  std::vector<int32_t> data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<int32_t>(i * 2654435761u);
  for (const OclDevice& d : opencl_devices(rt)) {
    INFO(std::string(d.name + " on " + d.platform));
    const abr_path up = d.shares_host_memory ? ABR_PATH_HOST_TO_DEVICE : ABR_PATH_STAGED;
    const abr_path down = d.shares_host_memory ? ABR_PATH_DEVICE_TO_HOST : ABR_PATH_STAGED;
    Managed source(data.data(), dt(kDLInt, 32), {static_cast<int64_t>(n)});
    Owned on_device(move_to(rt, &source.managed, d.device, ABR_COPY_ALWAYS, up));
    CHECK(source.deleted == 1);
    Owned home(move_to(rt, on_device.t, cpu, ABR_COPY_ALWAYS, down));
    on_device.t = nullptr;  // consumed
    CHECK(std::memcmp(home->data, data.data(), n * 4) == 0);
    // Into an existing host array too (abr_copy), and back into the device tensor.
    std::vector<int32_t> landing(n, -1);
    int64_t shape[1] = {static_cast<int64_t>(n)};
    Managed again(data.data(), dt(kDLInt, 32), {static_cast<int64_t>(n)});
    Owned target(move_to(rt, &again.managed, d.device, ABR_COPY_ALWAYS, up));
    DLTensor out{landing.data(), cpu, 1, dt(kDLInt, 32), shape, nullptr, 0};
    REQUIRE_MESSAGE(abr_copy(rt, &*target, &out, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
    CHECK(landing == data);
  }
  const abr_pool_stats stats = pool_stats(rt);
  CHECK(stats.bytes_in_use == 0);
}

TEST_CASE("abr_runtime_set_staging: out-of-range values refused, and the shape it sets is the one transfers use") {
  Runtime rt;
  CHECK(abr_runtime_set_staging(nullptr, 0, 0) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(abr_runtime_set_staging(rt, 257, 0) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("staging threads = 257"));
  CHECK(abr_runtime_set_staging(rt, 0, 1000) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("staging chunk = 1000 bytes"));
  CHECK(abr_runtime_set_staging(rt, 0, (uint64_t{1} << 30) + 1) == ABR_ERR_INVALID_ARGUMENT);

  // A buffer of the test's own context goes to the runtime's context staged, in the chunks set here.
  ClEnv env;
  std::vector<int32_t> data((std::size_t{1} << 20) / 4);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>(i * 7 + 3);
  cl_mem theirs = env.buffer(data.size() * 4, data.data());
  auto staged_detail = [&] {
    Managed src(theirs, dt(kDLInt, 32), {static_cast<int64_t>(data.size())}, {}, 0, ocl0);
    src.managed.deleter = nullptr;  // the test releases the buffer
    std::string detail;
    Owned result(move_to(rt, &src.managed, ocl0, ABR_COPY_ALWAYS, ABR_PATH_STAGED, {}, &detail));
    CHECK(read_mem(static_cast<cl_mem>(result->data), 0, data.size() * 4) ==
          std::vector<char>(reinterpret_cast<char*>(data.data()),
                            reinterpret_cast<char*>(data.data()) + data.size() * 4));
    return detail;
  };
  REQUIRE(abr_runtime_set_staging(rt, 3, 64 << 10) == ABR_OK);
  CHECK(staged_detail().find("in 64 KiB chunks") != std::string::npos);  // sixteen of them
  {
    StagingChunkMib environment("1");  // the runtime's choice wins over the environment's
    CHECK(staged_detail().find("in 64 KiB chunks") != std::string::npos);
    REQUIRE(abr_runtime_set_staging(rt, 0, 0) == ABR_OK);  // back to the default: the environment's now
    CHECK(staged_detail().find("in 1 MiB chunks") != std::string::npos);
  }
  clReleaseMemObject(theirs);
}

TEST_CASE("strided, negative-stride, offset, 0-d, zero-size and broadcast views on every OpenCL path") {
  Runtime rt;
  ClEnv env;
  std::vector<float> base = base_values();
  Owned ours(upload(rt, base.data(), base.size() * 4));      // in the runtime's context
  cl_mem theirs = env.buffer(base.size() * 4, base.data());  // in the test's own context

  for (const ViewCase& v : kViews) {
    INFO("view: " << std::string(v.name));
    const DLTensor host_view = view_of(base.data(), v, cpu);
    const std::vector<char> expected = packed(host_view, 4);
    const std::size_t bytes = expected.size();

    SUBCASE("host view -> OpenCL") {
      Managed src(base.data(), f32, v.shape, v.strides, v.byte_offset);
      Owned out(move_to(rt, &src.managed, ocl0, ABR_COPY_ALWAYS, ABR_PATH_HOST_TO_DEVICE));
      CHECK(src.deleted == 1);
      CHECK(out->ndim == static_cast<int32_t>(v.shape.size()));
      CHECK(read_mem(static_cast<cl_mem>(out->data), 0, bytes) == expected);
    }
    SUBCASE("OpenCL view -> host") {
      Managed src(ours->data, f32, v.shape, v.strides, v.byte_offset, ocl0);
      Owned out(move_to(rt, &src.managed, cpu, ABR_COPY_IF_NEEDED, ABR_PATH_DEVICE_TO_HOST));
      CHECK(src.deleted == 1);
      CHECK(host_bytes(*out, bytes) == expected);
    }
    SUBCASE("OpenCL view -> a new buffer in the same context (device kernel)") {
      Managed src(ours->data, f32, v.shape, v.strides, v.byte_offset, ocl0);
      Owned out(move_to(rt, &src.managed, ocl0, ABR_COPY_ALWAYS, ABR_PATH_DEVICE_COPY));
      CHECK(out->data != ours->data);
      CHECK(read_mem(static_cast<cl_mem>(out->data), 0, bytes) == expected);
    }
    SUBCASE("a view of the test's own buffer -> the runtime's context (staged)") {
      Managed src(theirs, f32, v.shape, v.strides, v.byte_offset, ocl0);
      Owned out(move_to(rt, &src.managed, ocl0, ABR_COPY_ALWAYS, ABR_PATH_STAGED));
      CHECK(src.deleted == 1);
      CHECK(read_mem(static_cast<cl_mem>(out->data), 0, bytes) == expected);
    }
    SUBCASE("abr_copy from a compact host tensor into the view as a destination") {
      if (!v.writable) continue;  // a broadcast view cannot be written
      std::vector<float> fresh(numel(v.shape));
      for (std::size_t i = 0; i < fresh.size(); ++i) fresh[i] = 1000.0f + static_cast<float>(i);
      Owned target(upload(rt, base.data(), base.size() * 4));
      std::vector<float> reference = base;
      DLTensor host_src{
          fresh.data(), cpu, static_cast<int32_t>(v.shape.size()), f32, const_cast<int64_t*>(v.shape.data()),
          nullptr,      0};
      DLTensor device_dst = view_of(target->data, v, ocl0);
      REQUIRE_MESSAGE(abr_copy(rt, &host_src, &device_dst, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
      DLTensor reference_dst = view_of(reference.data(), v, cpu);
      REQUIRE(abr_copy(rt, &host_src, &reference_dst, nullptr, nullptr) == ABR_OK);  // the host engine's result
      CHECK(read_mem(static_cast<cl_mem>(target->data), 0, base.size() * 4) ==
            std::vector<char>(reinterpret_cast<char*>(reference.data()),
                              reinterpret_cast<char*>(reference.data()) + base.size() * 4));
      // and back out of the strided device view into a strided host view
      std::vector<float> out_host(base.size(), -1.0f), out_reference(base.size(), -1.0f);
      DLTensor host_dst = view_of(out_host.data(), v, cpu);
      DLTensor reference_out = view_of(out_reference.data(), v, cpu);
      REQUIRE_MESSAGE(abr_copy(rt, &device_dst, &host_dst, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
      REQUIRE(abr_copy(rt, &reference_dst, &reference_out, nullptr, nullptr) == ABR_OK);
      CHECK(out_host == out_reference);
    }
  }
  clReleaseMemObject(theirs);
}

TEST_CASE("dtype conversion on the device matches the host engine exactly") {
  Runtime rt;
  std::vector<std::pair<DLDataType, DLDataType>> pairs;
  for (DLDataType t : kAllDtypes) {
    if (!same_dtype_for_test(t, f32)) pairs.push_back({t, f32}), pairs.push_back({f32, t});
  }
  for (DLDataType t : {dt(kDLInt, 8), dt(kDLUInt, 16), dt(kDLInt, 64), dt(kDLUInt, 64), dt(kDLBool, 8)})
    pairs.push_back({f64, t});
  pairs.push_back({dt(kDLComplex, 128), dt(kDLComplex, 64)});
  pairs.push_back({dt(kDLFloat, 16), dt(kDLBfloat, 16)});
  pairs.push_back({dt(kDLInt, 64), dt(kDLUInt, 8)});
  pairs.push_back({dt(kDLComplex, 64), dt(kDLBool, 8)});

  for (auto [from, to] : pairs) {
    CAPTURE(from.code);
    CAPTURE(from.bits);
    CAPTURE(to.code);
    CAPTURE(to.bits);
    const std::size_t n = kValues.size();
    Owned source(host_values(rt, from));
    Owned on_device(upload(rt, source->data, n * size_of(from)));
    Managed device_src(on_device->data, from, {static_cast<int64_t>(n)}, {}, 0, ocl0);
    abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.dtype = to;
    options.report = &report;
    DLManagedTensorVersioned* raw = nullptr;
    REQUIRE_MESSAGE(abr_to_device(rt, &device_src.managed, ocl0, &options, nullptr, &raw) == ABR_OK,
                    std::string(abr_last_error()));
    Owned cast(raw);
    CHECK(report.path == ABR_PATH_DEVICE_COPY);
    CHECK((report.flags & ABR_REPORT_CAST) != 0);
    CHECK(cast->dtype.code == to.code);

    Managed host_src(source->data, from, {static_cast<int64_t>(n)});
    Owned expected(move_to(rt, &host_src.managed, cpu, ABR_COPY_ALWAYS, ABR_PATH_HOST_COPY, to));
    CHECK(read_mem(static_cast<cl_mem>(cast->data), 0, n * size_of(to)) == host_bytes(*expected, n * size_of(to)));
  }
}

// A kernel reads whole elements through typed pointers: a cast it cannot do is
// refused while planning, before anything moves. Before, the kernel refused it once
// the pairs before it in abr_copy_many were written (a torch destination's version
// counter was then left alone on a write, or bumped for none).
TEST_CASE("a device cast of elements not at whole-item offsets is refused before any pair is written") {
  Runtime rt;
  std::vector<int32_t> values = {1, 2, 3, 4, 5, 6, 7, 8}, untouched(8, -1);
  std::vector<double> other(4, -1.0);
  const auto bytes = [](const auto& v) {
    const char* p = reinterpret_cast<const char*>(v.data());
    return std::vector<char>(p, p + v.size() * sizeof v[0]);
  };
  Owned ints(upload(rt, values.data(), values.size() * 4));
  Owned first_into(upload(rt, untouched.data(), untouched.size() * 4));
  Owned second_into(upload(rt, other.data(), other.size() * 8));
  Managed first_src(ints->data, dt(kDLInt, 32), {8}, {}, 0, ocl0);
  Managed first_dst(first_into->data, dt(kDLInt, 32), {8}, {}, 0, ocl0);
  Managed odd_src(ints->data, dt(kDLInt, 32), {3}, {}, 2, ocl0);  // int32s at bytes 2, 6 and 10
  Managed odd_dst(second_into->data, f64, {3}, {}, 0, ocl0);
  const DLTensor* srcs[] = {&first_src.tensor(), &odd_src.tensor()};
  const DLTensor* dsts[] = {&first_dst.tensor(), &odd_dst.tensor()};
  CHECK(abr_copy_many(rt, srcs, dsts, 2, nullptr, nullptr, nullptr) == ABR_ERR_UNSUPPORTED);
  CHECK(error_mentions("whole elements only"));
  CHECK(error_mentions("source's byte_offset 2"));
  CHECK(read_mem(static_cast<cl_mem>(first_into->data), 0, 8 * 4) == bytes(untouched));  // pair 0 not written
  CHECK(read_mem(static_cast<cl_mem>(second_into->data), 0, 4 * 8) == bytes(other));
  // Without a cast the same elements copy (in 2-byte units): only the cast kernel needs whole items.
  Managed odd_same(second_into->data, dt(kDLInt, 32), {3}, {}, 0, ocl0);
  REQUIRE_MESSAGE(abr_copy(rt, &odd_src.tensor(), &odd_same.tensor(), nullptr, nullptr) == ABR_OK,
                  std::string(abr_last_error()));
  std::vector<int32_t> expected(3);
  std::memcpy(expected.data(), reinterpret_cast<const char*>(values.data()) + 2, 3 * 4);
  CHECK(read_mem(static_cast<cl_mem>(second_into->data), 0, 3 * 4) == bytes(expected));
}

TEST_CASE("NaN converts to 0 and infinities saturate in float -> int casts, on the device and through the host") {
  Runtime rt;
  float values[4] = {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                     -2.9f};
  const int32_t expected[4] = {0, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), -2};
  Owned on_device(upload(rt, values, sizeof values));

  Managed to_kernel(on_device->data, f32, {4}, {}, 0, ocl0);
  Owned cast(move_to(rt, &to_kernel.managed, ocl0, ABR_COPY_IF_NEEDED, ABR_PATH_DEVICE_COPY, i32));
  const std::vector<char> bytes = read_mem(static_cast<cl_mem>(cast->data), 0, sizeof expected);
  CHECK(std::memcmp(bytes.data(), expected, sizeof expected) == 0);

  Managed to_host(on_device->data, f32, {4}, {}, 0, ocl0);
  Owned out(move_to(rt, &to_host.managed, cpu, ABR_COPY_IF_NEEDED, ABR_PATH_DEVICE_TO_HOST, i32));
  CHECK(std::memcmp(out->data, expected, sizeof expected) == 0);
}

// PoCL already gives 0 for NaN, so the test above cannot fail here; NVIDIA's
// OpenCL gives INT_MIN (the spec only says NaN "should" become 0). What makes the
// result defined on every driver is an explicit isnan in every floating -> integer
// conversion the device compiles: checked in the generated source.
TEST_CASE("every floating -> integer device cast tests isnan itself instead of trusting convert_*_sat") {
  const DLDataType floating[] = {dt(kDLFloat, 16), dt(kDLBfloat, 16), f32, f64, dt(kDLComplex, 64)};
  const DLDataType integral[] = {dt(kDLInt, 8), i32, dt(kDLInt, 64), dt(kDLUInt, 8), dt(kDLUInt, 16), dt(kDLUInt, 64)};
  for (const DLDataType from : floating)
    for (const DLDataType to : integral) {
      const std::string source = abr::opencl::cast_program_source(from, to, /*fp64=*/true);
      INFO(abr::dtype_name(from) << " -> " << abr::dtype_name(to));
      CHECK(source.find("isnan(v) ?") != std::string::npos);
      CHECK(source.find("_sat(v)") != std::string::npos);
    }
  // Integer sources need no guard (and keep C's modular conversion).
  CHECK(abr::opencl::cast_program_source(i32, dt(kDLInt, 8), true).find("isnan") == std::string::npos);
}

// The kernel of cast_program_source(from, to, fp64) run over `count` elements of `src`.
static std::vector<char> run_cast_program(const ClEnv& env, DLDataType from, DLDataType to, bool fp64,
                                          const std::vector<char>& src, std::size_t count) {
  const std::string source = abr::opencl::cast_program_source(from, to, fp64);
  const char* text = source.c_str();
  cl_int status = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(env.context, 1, &text, nullptr, &status);
  REQUIRE(status == CL_SUCCESS);
  REQUIRE(clBuildProgram(program, 1, &env.device, nullptr, nullptr, nullptr) == CL_SUCCESS);
  cl_kernel kernel = clCreateKernel(program, "abr_cast", &status);
  REQUIRE(status == CL_SUCCESS);
  std::vector<char> out(count * size_of(to));
  cl_long geometry[3] = {static_cast<cl_long>(count), static_cast<cl_long>(size_of(from)),
                         static_cast<cl_long>(size_of(to))};
  cl_mem in = env.buffer(src.size(), src.data()), result = env.buffer(out.size()),
         shape = env.buffer(sizeof geometry, geometry);
  const cl_long first = 0;
  const cl_int ndim = 1;
  const cl_ulong n = count;
  clSetKernelArg(kernel, 0, sizeof in, &in);
  clSetKernelArg(kernel, 1, sizeof first, &first);
  clSetKernelArg(kernel, 2, sizeof result, &result);
  clSetKernelArg(kernel, 3, sizeof first, &first);
  clSetKernelArg(kernel, 4, sizeof shape, &shape);
  clSetKernelArg(kernel, 5, sizeof ndim, &ndim);
  clSetKernelArg(kernel, 6, sizeof n, &n);
  REQUIRE(clEnqueueNDRangeKernel(env.queue, kernel, 1, nullptr, &count, nullptr, 0, nullptr, nullptr) == CL_SUCCESS);
  REQUIRE(clEnqueueReadBuffer(env.queue, result, CL_TRUE, 0, out.size(), out.data(), 0, nullptr, nullptr) ==
          CL_SUCCESS);
  for (cl_mem mem : {in, result, shape}) clReleaseMemObject(mem);
  clReleaseKernel(kernel);
  clReleaseProgram(program);
  return out;
}

// A device without cl_khr_fp64 (many integrated and mobile GPUs) compiles its casts with
// `wide` a float; PoCL has fp64, so the program is built here as such a device builds it.
// Through that float an int32 or wider rounded twice on its way to half or bfloat16.
TEST_CASE("a device without fp64 casts integers to half, bfloat16, float and complex64 bit for bit as the host") {
  ClEnv env;
  const DLDataType integers[] = {i32, dt(kDLUInt, 32), dt(kDLInt, 64), dt(kDLUInt, 64)};
  const DLDataType floats[] = {dt(kDLFloat, 16), dt(kDLBfloat, 16), f32, dt(kDLComplex, 64)};
  // Random 64-bit patterns (their low bytes for narrower types) and ties of an 8-bit mantissa.
  std::vector<uint64_t> patterns{0, 1, ~uint64_t{0}, uint64_t{1} << 63, (uint64_t{1} << 31) - 1};
  uint64_t state = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < 200; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    patterns.push_back(state >> (i % 40));
  }
  for (int width = 9; width <= 63; ++width)
    for (const uint64_t nudge : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}})
      patterns.push_back((uint64_t{0x81} << (width - 8)) + (uint64_t{1} << (width - 9)) + nudge);
  for (const DLDataType from : integers) {
    std::vector<char> src(patterns.size() * size_of(from));
    for (std::size_t i = 0; i < patterns.size(); ++i)
      std::memcpy(src.data() + i * size_of(from), &patterns[i], size_of(from));  // little-endian: the low bytes
    for (const DLDataType to : floats) {
      INFO(abr::dtype_name(from) << " -> " << abr::dtype_name(to));
      std::vector<char> expected(patterns.size() * size_of(to));
      abr::cast_row_for(from, to)(src.data(), static_cast<int64_t>(size_of(from)), expected.data(),
                                  static_cast<int64_t>(size_of(to)), static_cast<int64_t>(patterns.size()));
      CHECK(run_cast_program(env, from, to, /*fp64=*/false, src, patterns.size()) == expected);
    }
  }
}

TEST_CASE("a cl_mem from the caller's own context is adopted, not refused") {
  Runtime rt;
  ClEnv env;
  const std::size_t n = (std::size_t{20} << 20) / 4;  // 20 MiB: several staging chunks
  std::vector<float> data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i % 100003) * 0.25f;
  cl_mem theirs = env.buffer(n * 4, data.data());
  const std::vector<int64_t> shape{static_cast<int64_t>(n)};

  SUBCASE("read to the host through the caller's context") {
    Managed src(theirs, f32, shape, {}, 0, ocl0);
    Owned out(move_to(rt, &src.managed, cpu, ABR_COPY_IF_NEEDED, ABR_PATH_DEVICE_TO_HOST));
    CHECK(std::memcmp(out->data, data.data(), n * 4) == 0);
    CHECK(src.deleted == 1);
  }
  SUBCASE("a view on the same device keeps the handle and the offset") {
    Managed src(theirs, f32, {100}, {}, 400, ocl0);
    Owned out(move_to(rt, &src.managed, ocl0, ABR_COPY_IF_NEEDED, ABR_PATH_ZERO_COPY));
    CHECK(out->data == theirs);
    CHECK(out->byte_offset == 400);
    CHECK(src.deleted == 0);  // the view holds the source
    out.reset();
    CHECK(src.deleted == 1);
  }
  SUBCASE("staged into the runtime's context in pipelined chunks, converted on the way") {
    Managed src(theirs, f32, shape, {}, 0, ocl0);
    Owned out(move_to(rt, &src.managed, ocl0, ABR_COPY_ALWAYS, ABR_PATH_STAGED, f64));
    const std::vector<char> got = read_mem(static_cast<cl_mem>(out->data), 0, n * 8);
    const double* values = reinterpret_cast<const double*>(got.data());
    bool same = true;
    for (std::size_t i = 0; i < n; ++i) same = same && values[i] == static_cast<double>(data[i]);
    CHECK(same);
  }
  SUBCASE("ABR_TRANSFER_NO_HOST_STAGING refuses to bridge two contexts and keeps the source") {
    Managed src(theirs, f32, shape, {}, 0, ocl0);
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.copy = ABR_COPY_ALWAYS;
    options.flags = ABR_TRANSFER_NO_HOST_STAGING;
    DLManagedTensorVersioned* out = nullptr;
    CHECK(abr_to_device(rt, &src.managed, ocl0, &options, nullptr, &out) == ABR_ERR_UNSUPPORTED);
    CHECK(error_mentions("different OpenCL contexts"));
    CHECK(out == nullptr);
    CHECK(src.deleted == 0);
  }
  SUBCASE("abr_copy from the runtime's buffer into a strided view of the caller's (staged, then scattered)") {
    std::vector<float> small(64);
    for (int i = 0; i < 64; ++i) small[i] = static_cast<float>(i);
    Owned ours(upload(rt, small.data(), 64 * 4));
    std::vector<int64_t> view_shape{8, 8}, view_strides{1, 8};  // transposed into theirs
    DLTensor src{ours->data, ocl0, 2, f32, view_shape.data(), nullptr, 0};
    DLTensor dst{theirs, ocl0, 2, f32, view_shape.data(), view_strides.data(), 4};
    REQUIRE_MESSAGE(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
    const std::vector<char> got = read_mem(theirs, 0, 66 * 4);
    const float* f = reinterpret_cast<const float*>(got.data());
    CHECK(f[0] == data[0]);  // before the view: untouched
    bool transposed = true;
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) transposed = transposed && f[1 + c * 8 + r] == small[r * 8 + c];
    CHECK(transposed);
    CHECK(f[65] == data[65]);  // after it: untouched
  }
  clReleaseMemObject(theirs);
}

TEST_CASE("host memory is used in place on a device that shares it, and released when the view is") {
  Runtime rt;
  DLDevice shared;  // chosen by capability: opencl:0 may be a GPU
  if (!opencl_sharing_host_memory(rt, &shared)) return;
  void* memory = std::aligned_alloc(4096, 4096);
  float* host = static_cast<float*>(memory);
  for (int i = 0; i < 1024; ++i) host[i] = static_cast<float>(i);

  SUBCASE("aligned: wrapped, READ_ONLY kept, the same memory seen through the device") {
    Managed src(host, f32, {32, 32}, {1, 32});  // a transposed view: the buffer spans it
    src.managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    Owned out(move_to(rt, &src.managed, shared, ABR_COPY_IF_NEEDED, ABR_PATH_HOST_WRAP));
    CHECK((out.t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    CHECK((out.t->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == 0);
    CHECK(out->strides[0] == 1);
    CHECK(out->strides[1] == 32);
    cl_mem mem = static_cast<cl_mem>(out->data);
    void* in_place = nullptr;
    REQUIRE(clGetMemObjectInfo(mem, CL_MEM_HOST_PTR, sizeof in_place, &in_place, nullptr) == CL_SUCCESS);
    CHECK(in_place == memory);
    host[5] = 12345.0f;  // visible through the device buffer: no copy was made
    const std::vector<char> seen = read_mem(mem, 5 * 4, 4);
    CHECK(*reinterpret_cast<const float*>(seen.data()) == 12345.0f);
    CHECK(src.deleted == 0);
    out.reset();
    CHECK(src.deleted == 1);  // exactly once, when OpenCL let go of the buffer
  }
  SUBCASE("a view with a negative stride is wrapped from its lowest byte") {
    Managed src(host, f32, {16}, {-2}, 30 * 4);
    Owned out(move_to(rt, &src.managed, shared, ABR_COPY_IF_NEEDED, ABR_PATH_HOST_WRAP));
    Managed back_src(out->data, f32, {16}, {-2}, out->byte_offset, shared);
    Owned back(move_to(rt, &back_src.managed, cpu, ABR_COPY_IF_NEEDED, ABR_PATH_DEVICE_TO_HOST));
    const float* got = static_cast<const float*>(back->data);
    bool same = true;
    for (int i = 0; i < 16; ++i) same = same && got[i] == static_cast<float>(30 - 2 * i);
    CHECK(same);
  }
  SUBCASE("misaligned: copied, with the reason; ABR_COPY_NEVER refuses and keeps the source") {
    Managed src(host, f32, {100}, {}, 4);
    abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.report = &report;
    DLManagedTensorVersioned* raw = nullptr;
    REQUIRE(abr_to_device(rt, &src.managed, shared, &options, nullptr, &raw) == ABR_OK);
    Owned out(raw);
    CHECK(report.path == ABR_PATH_HOST_TO_DEVICE);
    CHECK(std::string(report.detail).find("not aligned") != std::string::npos);

    Managed again(host, f32, {100}, {}, 4);
    options.copy = ABR_COPY_NEVER;
    raw = nullptr;
    CHECK(abr_to_device(rt, &again.managed, shared, &options, nullptr, &raw) == ABR_ERR_COPY_REQUIRED);
    CHECK(error_mentions("not aligned"));
    CHECK(raw == nullptr);
    CHECK(again.deleted == 0);
  }
  std::free(memory);
}

// The device-generic part of the above, on every OpenCL device present: an
// aligned host view is wrapped exactly where the device shares host memory, and
// reads back right either way.
TEST_CASE("on every OpenCL device, an aligned host view is wrapped if and only if the device shares host memory") {
  Runtime rt;
  void* memory = std::aligned_alloc(4096, 4096);
  float* host = static_cast<float*>(memory);
  for (int i = 0; i < 1024; ++i) host[i] = static_cast<float>(i) * 0.5f;
  for (const OclDevice& d : opencl_devices(rt)) {
    INFO(d.platform << " / " << d.name);
    Managed src(host, f32, {1024});
    Owned out(move_to(rt, &src.managed, d.device, ABR_COPY_IF_NEEDED,
                      d.shares_host_memory ? ABR_PATH_HOST_WRAP : ABR_PATH_HOST_TO_DEVICE));
    const std::vector<char> seen = read_mem(static_cast<cl_mem>(out->data), 0, 4096);
    CHECK(std::memcmp(seen.data(), memory, 4096) == 0);
  }
  std::free(memory);
}

TEST_CASE("abr_copy within one buffer whose ranges overlap behaves like memmove") {
  Runtime rt;
  std::vector<float> base = base_values();
  Owned buffer(upload(rt, base.data(), base.size() * 4));
  std::vector<int64_t> shape{100};
  DLTensor src{buffer->data, ocl0, 1, f32, shape.data(), nullptr, 0};
  DLTensor dst{buffer->data, ocl0, 1, f32, shape.data(), nullptr, 8};  // two elements further on
  abr_clear_error();
  REQUIRE_MESSAGE(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
  std::vector<float> expected = base;
  std::copy(base.begin(), base.begin() + 100, expected.begin() + 2);
  const std::vector<char> got = read_mem(static_cast<cl_mem>(buffer->data), 0, base.size() * 4);
  CHECK(std::memcmp(got.data(), expected.data(), got.size()) == 0);
}

// Each host wrap is a cl_mem of its own over the host bytes: two wraps of one array
// never compared equal, so a transposed self-copy between them ran without the
// temporary and left 2016 of 4096 values wrong (a helper's hunt found it).
TEST_CASE(
    "abr_copy between host wraps of the same memory behaves as through a temporary; host memory into its own "
    "wrap is refused") {
  Runtime rt;
  DLDevice shared;  // chosen by capability: opencl:0 may be a GPU
  if (!opencl_sharing_host_memory(rt, &shared)) return;
  constexpr int n = 64;
  float* m = static_cast<float*>(std::aligned_alloc(4096, n * n * 4));
  for (int i = 0; i < n * n; ++i) m[i] = static_cast<float>(i);
  Managed whole(m, f32, {n, n});
  Managed transposed(m, f32, {n, n}, {1, n});
  Owned a(move_to(rt, &whole.managed, shared, ABR_COPY_NEVER, ABR_PATH_HOST_WRAP));
  Owned a_t(move_to(rt, &transposed.managed, shared, ABR_COPY_NEVER, ABR_PATH_HOST_WRAP));
  REQUIRE(a->data != a_t->data);  // two handles, one set of bytes
  REQUIRE_MESSAGE(abr_copy(rt, &a.t->dl_tensor, &a_t.t->dl_tensor, nullptr, nullptr) == ABR_OK,
                  std::string(abr_last_error()));
  int wrong = 0;  // m.T = m, as NumPy's copyto does it: m[i][j] becomes the old m[j][i]
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) wrong += m[i * n + j] != static_cast<float>(j * n + i);
  CHECK(wrong == 0);

  for (int i = 0; i < n * n; ++i) m[i] = static_cast<float>(i);
  std::vector<int64_t> shape{n, n};
  DLTensor host{m, cpu, 2, f32, shape.data(), nullptr, 0};
  CHECK(abr_copy(rt, &host, &a_t.t->dl_tensor, nullptr, nullptr) == ABR_ERR_UNSUPPORTED);
  CHECK_MESSAGE(error_mentions("share host bytes"), std::string(abr_last_error()));
  CHECK(abr_copy(rt, &a_t.t->dl_tensor, &host, nullptr, nullptr) == ABR_ERR_UNSUPPORTED);
  ClEnv env;  // a caller's buffer over the same bytes, in a context of its own: no temporary between contexts
  cl_int made = CL_SUCCESS;
  cl_mem theirs = clCreateBuffer(env.context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, n * n * 4, m, &made);
  REQUIRE(made == CL_SUCCESS);
  DLTensor caller{theirs, ocl0, 2, f32, shape.data(), nullptr, 0};
  if (shared.device_id == 0) {
    CHECK(abr_copy(rt, &caller, &a_t.t->dl_tensor, nullptr, nullptr) == ABR_ERR_UNSUPPORTED);
    CHECK_MESSAGE(error_mentions("buffers of two contexts over one host memory"), std::string(abr_last_error()));
  }
  clReleaseMemObject(theirs);
  bool untouched = true;
  for (int i = 0; i < n * n; ++i) untouched = untouched && m[i] == static_cast<float>(i);
  CHECK(untouched);
  a.reset();
  a_t.reset();
  std::free(m);
}

// PoCL's read and write of a buffer over host memory skip the copy when the host
// pointer is the buffer's first byte, whatever the offset: a copy of m[:n] into the
// wrap's m[n:] (no byte shared) returned ABR_OK and wrote nothing, as did the copy back
// (the OpenCL hunt of 2026-11-30). Such a copy now goes through the mapping.
TEST_CASE("abr_copy between host memory and another part of its own wrap moves the values, both ways") {
  Runtime rt;
  DLDevice shared;  // chosen by capability: opencl:0 may be a GPU
  if (!opencl_sharing_host_memory(rt, &shared)) return;
  constexpr int n = 1024;  // floats in each half
  float* m = static_cast<float*>(std::aligned_alloc(4096, 2 * n * 4));
  const auto fill = [&] {
    for (int i = 0; i < 2 * n; ++i) m[i] = static_cast<float>(i);
  };
  fill();
  Managed whole(m, f32, {2 * n});
  Owned wrap(move_to(rt, &whole.managed, shared, ABR_COPY_NEVER, ABR_PATH_HOST_WRAP));
  std::vector<int64_t> half{n};
  DLTensor lower{m, cpu, 1, f32, half.data(), nullptr, 0};                  // m[:n], the wrap's first byte
  DLTensor upper{wrap->data, shared, 1, f32, half.data(), nullptr, n * 4};  // the wrap's m[n:]
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.report = &report;
  REQUIRE_MESSAGE(abr_copy(rt, &lower, &upper, &options, nullptr) == ABR_OK, std::string(abr_last_error()));
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += m[n + i] != static_cast<float>(i) || m[i] != static_cast<float>(i);
  CHECK(wrong == 0);
  CHECK_MESSAGE(std::string(report.detail).find("through mapped memory") != std::string::npos, report.detail);
  fill();
  REQUIRE_MESSAGE(abr_copy(rt, &upper, &lower, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
  wrong = 0;
  for (int i = 0; i < n; ++i) wrong += m[i] != static_cast<float>(n + i);
  CHECK(wrong == 0);
  fill();  // in a batch, beside a pair of other memory
  std::vector<float> other(n, -1.0f);
  DLTensor elsewhere{other.data(), cpu, 1, f32, half.data(), nullptr, 0};
  const DLTensor* srcs[] = {&upper, &lower};
  const DLTensor* dsts[] = {&elsewhere, &upper};
  REQUIRE_MESSAGE(abr_copy_many(rt, srcs, dsts, 2, nullptr, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
  wrong = 0;
  for (int i = 0; i < n; ++i) wrong += other[i] != static_cast<float>(n + i) || m[n + i] != static_cast<float>(i);
  CHECK(wrong == 0);
  fill();  // a sub-buffer over m[n:]: PoCL compares the host pointer with its parent's first byte
  cl_buffer_region region{n * 4, n * 4};
  cl_int made = CL_SUCCESS;
  cl_mem sub = clCreateSubBuffer(static_cast<cl_mem>(wrap->data), CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION,
                                 &region, &made);
  REQUIRE(made == CL_SUCCESS);
  DLTensor sub_view{sub, shared, 1, f32, half.data(), nullptr, 0};
  REQUIRE_MESSAGE(abr_copy(rt, &lower, &sub_view, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
  wrong = 0;
  for (int i = 0; i < n; ++i) wrong += m[n + i] != static_cast<float>(i);
  CHECK(wrong == 0);
  clReleaseMemObject(sub);
  wrap.reset();
  std::free(m);
}

// Two sub-buffers of one buffer are two handles over shared bytes: overlap was seen only
// between views of one handle, so a copy between them went without its temporary (a
// kernel's work-items race; clEnqueueCopyBuffer refuses them with CL_MEM_COPY_OVERLAP).
TEST_CASE("abr_copy between overlapping sub-buffers of one buffer behaves as through a temporary") {
  Runtime rt;
  ClEnv env;
  cl_uint align_bits = 0;
  REQUIRE(clGetDeviceInfo(env.device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, nullptr) ==
          CL_SUCCESS);
  const std::size_t origin = align_bits / 8, n = origin;  // n floats each; the second starts `origin` bytes in
  std::vector<float> data(2 * n);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) + 0.5f;
  cl_mem parent = env.buffer(data.size() * 4, data.data());
  auto sub_buffer = [&](std::size_t at) {
    cl_buffer_region region{at, n * 4};
    cl_int status = CL_SUCCESS;
    cl_mem sub = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &status);
    REQUIRE(status == CL_SUCCESS);
    return sub;
  };
  cl_mem low = sub_buffer(0), high = sub_buffer(origin);  // high begins a quarter into low
  std::vector<float> expected = data;
  const std::size_t shift = origin / 4;

  SUBCASE("compact: one buffer copy") {
    std::vector<int64_t> shape{static_cast<int64_t>(n)};
    DLTensor from{low, ocl0, 1, f32, shape.data(), nullptr, 0}, to{high, ocl0, 1, f32, shape.data(), nullptr, 0};
    REQUIRE_MESSAGE(abr_copy(rt, &from, &to, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
    std::memmove(expected.data() + shift, expected.data(), n * 4);
  }
  SUBCASE("a transposed view: a kernel's walk") {
    const int64_t rows = 4, cols = static_cast<int64_t>(n) / 4;
    std::vector<int64_t> shape{cols, rows}, transposed{1, cols};
    DLTensor from{low, ocl0, 2, f32, shape.data(), transposed.data(), 0};
    DLTensor to{high, ocl0, 2, f32, shape.data(), nullptr, 0};
    REQUIRE_MESSAGE(abr_copy(rt, &from, &to, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = 0; r < rows; ++r) expected[shift + static_cast<std::size_t>(c * rows + r)] = data[r * cols + c];
  }
  SUBCASE("the parent into its sub-buffer") {
    std::vector<int64_t> shape{static_cast<int64_t>(n)};
    DLTensor from{parent, ocl0, 1, f32, shape.data(), nullptr, 0}, to{high, ocl0, 1, f32, shape.data(), nullptr, 0};
    REQUIRE_MESSAGE(abr_copy(rt, &from, &to, nullptr, nullptr) == ABR_OK, std::string(abr_last_error()));
    std::memmove(expected.data() + shift, expected.data(), n * 4);
  }
  const std::vector<char> got = read_mem(parent, 0, data.size() * 4);
  CHECK(std::memcmp(got.data(), expected.data(), got.size()) == 0);
  for (cl_mem mem : {low, high, parent}) clReleaseMemObject(mem);
}

TEST_CASE("transfers on a stream run in its order, asynchronously, and keep their sources until done") {
  Runtime rt;
  ClEnv env;
  GatedQueue gated(env);
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_wrap(rt, ocl0, env.queue, &stream) == ABR_OK);

  std::vector<float> a(1000), result(1000, -1.0f);
  for (int i = 0; i < 1000; ++i) a[i] = static_cast<float>(i) / 8;
  cl_mem buffer = env.buffer(a.size() * 4);
  std::vector<int64_t> shape{1000};
  DLTensor host_a{a.data(), cpu, 1, f32, shape.data(), nullptr, 0};
  DLTensor device{buffer, ocl0, 1, f32, shape.data(), nullptr, 0};
  DLTensor host_result{result.data(), cpu, 1, f32, shape.data(), nullptr, 0};
  REQUIRE_MESSAGE(abr_copy(rt, &host_a, &device, nullptr, stream) == ABR_OK,
                  std::string(abr_last_error()));  // write, queued
  Managed source(buffer, f32, shape, {}, 0, ocl0);
  DLManagedTensorVersioned* raw = nullptr;
  REQUIRE_MESSAGE(abr_to_device(rt, &source.managed, cpu, nullptr, stream, &raw) == ABR_OK,
                  std::string(abr_last_error()));
  Owned out(raw);
  REQUIRE(abr_copy(rt, &device, &host_result, nullptr, stream) == ABR_OK);

  // Nothing has run: the queue is held at the gate, and the calls did not block.
  CHECK(result[0] == -1.0f);
  CHECK(source.deleted == 0);  // the stream keeps the source until its read is done
  gated.open();
  REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  CHECK(source.deleted == 1);
  CHECK(std::memcmp(out->data, a.data(), a.size() * 4) == 0);
  CHECK(result == a);
  abr_stream_destroy(stream);
  clReleaseMemObject(buffer);
}

TEST_CASE("abr_stream_wait orders work across two queues with an event, without blocking the host") {
  Runtime rt;
  ClEnv env;
  GatedQueue gated(env);
  cl_int status = CL_SUCCESS;
  cl_command_queue second = clCreateCommandQueueWithProperties(env.context, env.device, nullptr, &status);
  REQUIRE(status == CL_SUCCESS);
  abr_stream *producer = nullptr, *consumer = nullptr;
  REQUIRE(abr_stream_wrap(rt, ocl0, env.queue, &producer) == ABR_OK);
  REQUIRE(abr_stream_wrap(rt, ocl0, second, &consumer) == ABR_OK);

  std::vector<int32_t> data(4096), result(4096, 0);
  for (int i = 0; i < 4096; ++i) data[i] = i * 3 + 1;
  cl_mem buffer = env.buffer(data.size() * 4);
  std::vector<int64_t> shape{4096};
  DLTensor host_data{data.data(), cpu, 1, i32, shape.data(), nullptr, 0};
  DLTensor device{buffer, ocl0, 1, i32, shape.data(), nullptr, 0};
  DLTensor host_result{result.data(), cpu, 1, i32, shape.data(), nullptr, 0};
  REQUIRE(abr_copy(rt, &host_data, &device, nullptr, producer) == ABR_OK);
  REQUIRE(abr_stream_wait(consumer, producer) == ABR_OK);
  REQUIRE(abr_copy(rt, &device, &host_result, nullptr, consumer) == ABR_OK);
  clFlush(second);
  CHECK(result[1] == 0);  // the consumer waits for the gated producer
  gated.open();
  REQUIRE(abr_stream_synchronize(consumer) == ABR_OK);
  CHECK(result == data);

  CHECK(abr_stream_wait(consumer, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("other is NULL"));
  abr_stream_destroy(consumer);
  abr_stream_destroy(producer);
  clReleaseCommandQueue(second);
  clReleaseMemObject(buffer);
}

TEST_CASE("a stream the runtime creates can outlive the runtime, and is destroyed cleanly") {
  abr_runtime* rt = nullptr;
  REQUIRE(abr_runtime_create(nullptr, &rt) == ABR_OK);
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, ocl0, &stream) == ABR_OK);
  std::vector<float> data(256, 2.5f);
  Managed src(data.data(), f32, {256});
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_ALWAYS;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &src.managed, ocl0, &options, stream, &out) == ABR_OK);
  abr_runtime_destroy(rt);
  REQUIRE(abr_stream_synchronize(stream) == ABR_OK);
  CHECK(src.deleted == 1);
  const std::vector<char> got = read_mem(static_cast<cl_mem>(out->dl_tensor.data), 0, 256 * 4);
  CHECK(std::memcmp(got.data(), data.data(), got.size()) == 0);
  out->deleter(out);
  abr_stream_destroy(stream);
}

TEST_CASE("bad OpenCL input gets a clear error and the source stays the caller's") {
  Runtime rt;
  ClEnv env;
  std::vector<float> data(64, 1.0f);
  cl_mem buffer = env.buffer(64 * 4, data.data());
  DLManagedTensorVersioned* out = nullptr;

  SUBCASE("an image is not a buffer") {
    cl_image_format format{CL_R, CL_FLOAT};
    cl_image_desc desc{};
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = 8;
    desc.image_height = 8;
    cl_int status = CL_SUCCESS;
    cl_mem image = clCreateImage(env.context, CL_MEM_READ_WRITE, &format, &desc, nullptr, &status);
    REQUIRE(status == CL_SUCCESS);
    Managed src(image, f32, {8, 8}, {}, 0, ocl0);
    CHECK(abr_to_device(rt, &src.managed, cpu, nullptr, nullptr, &out) == ABR_ERR_DLPACK_DATA);
    CHECK(error_mentions("is an image, not a buffer"));
    CHECK(src.deleted == 0);
    clReleaseMemObject(image);
  }
  SUBCASE("a view that runs past the end of its cl_mem") {
    Managed src(buffer, f32, {60}, {}, 32, ocl0);
    CHECK(abr_to_device(rt, &src.managed, cpu, nullptr, nullptr, &out) == ABR_ERR_DLPACK_DATA);
    CHECK(error_mentions("needs bytes [32, 272) of the cl_mem, which holds 256 bytes"));
    CHECK(src.deleted == 0);
  }
  SUBCASE("a byte_offset whose view would wrap past 64 bits") {  // the end printed negative before
    Managed near_top(buffer, f32, {1}, {}, (uint64_t{1} << 63) - 4, ocl0);
    CHECK(abr_to_device(rt, &near_top.managed, cpu, nullptr, nullptr, &out) == ABR_ERR_DLPACK_DATA);
    CHECK(error_mentions("needs bytes [9223372036854775804, 9223372036854775808) of the cl_mem"));
  }
  SUBCASE("a device index out of range") {
    Managed src(buffer, f32, {64}, {}, 0, DLDevice{kDLOpenCL, 99});
    CHECK(abr_to_device(rt, &src.managed, cpu, nullptr, nullptr, &out) == ABR_ERR_NO_DEVICE);
    CHECK(error_mentions("no device opencl:99"));
    Managed host(data.data(), f32, {64});
    CHECK(abr_to_device(rt, &host.managed, DLDevice{kDLOpenCL, 99}, nullptr, nullptr, &out) == ABR_ERR_NO_DEVICE);
    CHECK(src.deleted + host.deleted == 0);
  }
  SUBCASE("ABR_COPY_NEVER from device memory to the host") {
    Managed src(buffer, f32, {64}, {}, 0, ocl0);
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.copy = ABR_COPY_NEVER;
    CHECK(abr_to_device(rt, &src.managed, cpu, &options, nullptr, &out) == ABR_ERR_COPY_REQUIRED);
    CHECK(error_mentions("opencl:0 memory is not addressable from the host"));
    CHECK(src.deleted == 0);
  }
  SUBCASE("more than one buffer may hold is out of memory, naming the device's limit") {
    std::vector<int64_t> huge{int64_t{1} << 40}, broadcast{0};  // 4 TiB, on every device
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.copy = ABR_COPY_ALWAYS;
    for (const OclDevice& d : opencl_devices(rt)) {
      INFO(d.platform << " / " << d.name);
      Managed src(data.data(), f32, huge, broadcast);
      CHECK(abr_to_device(rt, &src.managed, d.device, &options, nullptr, &out) == ABR_ERR_OUT_OF_MEMORY);
      CHECK(error_mentions("CL_DEVICE_MAX_MEM_ALLOC_SIZE"));
      CHECK(src.deleted == 0);
      CHECK(out == nullptr);
    }
  }
  SUBCASE("an out-of-order queue cannot be wrapped") {
    cl_queue_properties properties[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
    cl_int status = CL_SUCCESS;
    cl_command_queue queue = clCreateCommandQueueWithProperties(env.context, env.device, properties, &status);
    REQUIRE(status == CL_SUCCESS);
    abr_stream* stream = nullptr;
    CHECK(abr_stream_wrap(rt, ocl0, queue, &stream) == ABR_ERR_UNSUPPORTED);
    CHECK(error_mentions("out-of-order"));
    CHECK(stream == nullptr);
    clReleaseCommandQueue(queue);
  }
  CHECK(out == nullptr);
  clReleaseMemObject(buffer);
}

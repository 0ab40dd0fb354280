// abr_to_device on the CPU: the ownership contract, views, copies, flags and the report.
#include "tests/support/helpers.hpp"

using namespace test;

TEST_CASE("a view keeps the source alive until the view is deleted") {
  Runtime rt;
  float data[6] = {1, 2, 3, 4, 5, 6};
  Managed m(data, f32, {2, 3}, {1, 2});  // transposed layout, kept by a view
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.report = &report;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_OK);
  CHECK(report.path == ABR_PATH_ZERO_COPY);
  CHECK(report.bytes_moved == 0);
  CHECK(std::string(abr_path_string(report.path)) == "zero_copy");
  CHECK(out->dl_tensor.data == data);
  CHECK(out->dl_tensor.strides[0] == 1);
  CHECK(out->dl_tensor.strides[1] == 2);
  CHECK(out->version.major == 1);
  CHECK((out->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == 0);
  CHECK(m.deleted == 0);  // still needed by the view
  out->deleter(out);
  CHECK(m.deleted == 1);
}

TEST_CASE("a view folds byte_offset into data and keeps READ_ONLY") {
  Runtime rt;
  float data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  Managed m(data, f32, {3}, {}, 4 * sizeof(float));
  m.managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, nullptr, nullptr, &out) == ABR_OK);
  CHECK(out->dl_tensor.data == data + 4);
  CHECK(out->dl_tensor.byte_offset == 0);
  CHECK((out->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
  CHECK(out->dl_tensor.strides != nullptr);  // always present when ndim > 0
  out->deleter(out);
  CHECK(m.deleted == 1);
}

TEST_CASE("a view of a source already in our form is the source itself; any other is a new tensor") {
  Runtime rt;
  float data[6] = {0, 1, 2, 3, 4, 5};
  Managed plain(data, f32, {2, 3}, {3, 1});  // strides given, no byte_offset: as NumPy exports
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &plain.managed, cpu, nullptr, nullptr, &out) == ABR_OK);
  CHECK(out == &plain.managed);  // no allocation
  CHECK(plain.deleted == 0);
  out->deleter(out);
  CHECK(plain.deleted == 1);  // once, when the result is deleted

  Managed no_strides(data, f32, {2, 3});
  Managed copied_by_producer(data, f32, {2, 3}, {3, 1});
  copied_by_producer.managed.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  Managed offset(data, f32, {2}, {1}, 2 * sizeof(float));
  for (Managed* source : {&no_strides, &copied_by_producer, &offset}) {
    REQUIRE(abr_to_device(rt, &source->managed, cpu, nullptr, nullptr, &out) == ABR_OK);
    CHECK(out != &source->managed);
    CHECK(out->dl_tensor.strides != nullptr);
    CHECK(out->dl_tensor.byte_offset == 0);
    CHECK((out->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == 0);  // a view copies nothing
    out->deleter(out);
    CHECK(source->deleted == 1);
  }
}

TEST_CASE("ABR_COPY_ALWAYS copies, sets IS_COPIED, drops READ_ONLY and frees the source at once") {
  Runtime rt;
  int32_t data[6] = {1, 2, 3, 4, 5, 6};
  Managed m(data, i32, {2, 3}, {1, 2});
  m.managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_ALWAYS;
  options.report = &report;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_OK);
  CHECK(m.deleted == 1);  // the copy is complete: the source is released right away
  CHECK(report.path == ABR_PATH_HOST_COPY);
  CHECK(report.bytes_moved == 24);
  CHECK((report.flags & ABR_REPORT_PACKED) != 0);
  CHECK(out->dl_tensor.data != data);
  CHECK(out->flags == DLPACK_FLAG_BITMASK_IS_COPIED);
  CHECK(reinterpret_cast<uintptr_t>(out->dl_tensor.data) % 256 == 0);
  CHECK(out->dl_tensor.strides[0] == 3);
  CHECK(out->dl_tensor.strides[1] == 1);
  const int32_t* result = static_cast<const int32_t*>(out->dl_tensor.data);
  // Source element (i, j) lives at data[i + 2 j].
  const int32_t expected[6] = {1, 3, 5, 2, 4, 6};
  for (int k = 0; k < 6; ++k) CHECK(result[k] == expected[k]);
  out->deleter(out);
  CHECK(m.deleted == 1);
}

TEST_CASE("ABR_COPY_NEVER fails with ABR_ERR_COPY_REQUIRED when a copy is needed, and keeps the source") {
  Runtime rt;
  float data[4] = {1, 2, 3, 4};
  Managed m(data, f32, {4});
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_NEVER;
  options.dtype = f64;
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_ERR_COPY_REQUIRED);
  CHECK(error_mentions("converting float32 -> float64"));
  Managed strided(data, f32, {2}, {2});
  options.dtype = {};
  options.flags = ABR_TRANSFER_REQUIRE_CONTIGUOUS;
  CHECK(abr_to_device(rt, &strided.managed, cpu, &options, nullptr, &out) == ABR_ERR_COPY_REQUIRED);
  CHECK(error_mentions("source strided"));
  CHECK(m.deleted == 0);
  CHECK(strided.deleted == 0);
  // Without a reason to copy, COPY_NEVER gives a view.
  options.flags = 0;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_OK);
  CHECK(out->dl_tensor.data == data);
  out->deleter(out);
  CHECK(m.deleted == 1);
}

TEST_CASE("REQUIRE_CONTIGUOUS packs a strided source and views a compact one") {
  Runtime rt;
  double data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.flags = ABR_TRANSFER_REQUIRE_CONTIGUOUS;
  Managed step2(data, f64, {4}, {2});
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &step2.managed, cpu, &options, nullptr, &out) == ABR_OK);
  const double* packed = static_cast<const double*>(out->dl_tensor.data);
  CHECK(packed[0] == 0);
  CHECK(packed[3] == 6);
  out->deleter(out);
  // A size-1 dim with an odd stride is still compact (its stride is ignored).
  Managed odd(data, f64, {1, 8}, {77, 1});
  REQUIRE(abr_to_device(rt, &odd.managed, cpu, &options, nullptr, &out) == ABR_OK);
  CHECK(out->dl_tensor.data == data);
  out->deleter(out);
  CHECK(step2.deleted == 1);
  CHECK(odd.deleted == 1);
}

TEST_CASE("dtype conversion on the way") {
  Runtime rt;
  int32_t data[5] = {-2, 0, 7, 1 << 24, 3};
  Managed m(data, i32, {5});
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.dtype = f64;
  options.report = &report;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_OK);
  CHECK((report.flags & ABR_REPORT_CAST) != 0);
  CHECK(out->dl_tensor.dtype.bits == 64);
  const double* result = static_cast<const double*>(out->dl_tensor.data);
  CHECK(result[0] == -2.0);
  CHECK(result[3] == 16777216.0);
  out->deleter(out);
  CHECK(m.deleted == 1);
}

TEST_CASE("float8 tensors move as opaque bytes but cannot be converted") {
  Runtime rt;
  uint8_t data[4] = {1, 2, 3, 4};
  Managed m(data, dt(kDLFloat8_e4m3fn, 8), {4});
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_ALWAYS;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_OK);
  CHECK(std::memcmp(out->dl_tensor.data, data, 4) == 0);
  out->deleter(out);
  Managed again(data, dt(kDLFloat8_e4m3fn, 8), {4});
  options.dtype = f32;
  CHECK(abr_to_device(rt, &again.managed, cpu, &options, nullptr, &out) == ABR_ERR_UNSUPPORTED);
  CHECK(error_mentions("no conversion from float8_e4m3fn to float32"));
  CHECK(again.deleted == 0);
}

TEST_CASE("legacy sources: consumed on success, kept on error, result is versioned") {
  Runtime rt;
  uint8_t data[3] = {9, 8, 7};
  Managed m(data, u8, {3});
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device_legacy(rt, &m.legacy, cpu, nullptr, nullptr, &out) == ABR_OK);
  CHECK(out->version.major == DLPACK_MAJOR_VERSION);
  CHECK(out->dl_tensor.data == data);
  CHECK(m.deleted == 0);
  out->deleter(out);
  CHECK(m.deleted == 1);
  Managed bad(data, u8, {3});
  bad.legacy.dl_tensor.ndim = -3;
  CHECK(abr_to_device_legacy(rt, &bad.legacy, cpu, nullptr, nullptr, &out) == ABR_ERR_DLPACK_NDIM);
  CHECK(bad.deleted == 0);
}

TEST_CASE("a NULL deleter is allowed") {
  Runtime rt;
  float data[2] = {1, 2};
  Managed m(data, f32, {2});
  m.managed.deleter = nullptr;
  DLManagedTensorVersioned* out = nullptr;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_ALWAYS;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, &options, nullptr, &out) == ABR_OK);
  out->deleter(out);
  CHECK(m.deleted == 0);
}

TEST_CASE("abr_tensor_to_legacy wraps a versioned result, and refuses READ_ONLY") {
  Runtime rt;
  float data[2] = {1, 2};
  Managed m(data, f32, {2});
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, nullptr, nullptr, &out) == ABR_OK);
  DLManagedTensor* legacy = nullptr;
  REQUIRE(abr_tensor_to_legacy(out, &legacy) == ABR_OK);
  CHECK(legacy->dl_tensor.data == data);
  legacy->deleter(legacy);
  CHECK(m.deleted == 1);

  Managed ro(data, f32, {2});
  ro.managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  CHECK(abr_tensor_to_legacy(&ro.managed, &legacy) == ABR_ERR_READ_ONLY);
  CHECK(legacy == nullptr);
  CHECK(ro.deleted == 0);
}

TEST_CASE("a CUDA or OpenCL destination without that backend is a clear ABR_ERR_NO_DEVICE") {
  abr_runtime_options ropts = ABR_RUNTIME_OPTIONS_INIT;
  abr_runtime_options_init(&ropts, ABR_RUNTIME_OPTIONS_VERSION);
  ropts.flags = ABR_RUNTIME_DISABLE_CUDA;
  abr_runtime* rt = nullptr;
  REQUIRE(abr_runtime_create(&ropts, &rt) == ABR_OK);
  float data[2] = {1, 2};
  Managed m(data, f32, {2});
  DLManagedTensorVersioned* out = nullptr;
  CHECK(abr_to_device(rt, &m.managed, DLDevice{kDLCUDA, 0}, nullptr, nullptr, &out) == ABR_ERR_NO_DEVICE);
  CHECK(error_mentions("no device cuda:0: CUDA unavailable"));
  CHECK(m.deleted == 0);
  abr_runtime_destroy(rt);
}

TEST_CASE("zero-size and 0-d tensors") {
  Runtime rt;
  float scalar = 4.5f;
  Managed zero_d(&scalar, f32, {});
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.copy = ABR_COPY_ALWAYS;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &zero_d.managed, cpu, &options, nullptr, &out) == ABR_OK);
  CHECK(out->dl_tensor.ndim == 0);
  CHECK(out->dl_tensor.shape == nullptr);
  CHECK(*static_cast<float*>(out->dl_tensor.data) == 4.5f);
  out->deleter(out);

  Managed empty(nullptr, f32, {3, 0}, {5, -7});  // NULL data and any strides are fine with no elements
  REQUIRE(abr_to_device(rt, &empty.managed, cpu, &options, nullptr, &out) == ABR_OK);
  CHECK(out->dl_tensor.shape[1] == 0);
  CHECK(out->dl_tensor.data != nullptr);  // consumers that refuse NULL still accept it
  out->deleter(out);
  CHECK(zero_d.deleted == 1);
  CHECK(empty.deleted == 1);
}

// Dims and exports keep up to 8 dimensions inline and the rest on the heap: both sides of that line.
TEST_CASE("views and copies of 8, 9 and 12 dimensions keep every extent, stride and value") {
  Runtime rt;
  for (std::size_t ndim : {8, 9, 12}) {
    CAPTURE(ndim);
    std::vector<int64_t> shape(ndim, 1), strides(ndim, 0);
    shape[0] = 3;
    shape[ndim - 1] = 2;  // 3 x 1 x ... x 1 x 2, stored transposed: element (i, ..., j) at j * 3 + i
    for (std::size_t d = 0; d < ndim; ++d) strides[d] = d == 0 ? 1 : d == ndim - 1 ? 3 : 7;
    int32_t data[6] = {0, 1, 2, 3, 4, 5};
    Managed view_source(data, i32, shape, strides);
    DLManagedTensorVersioned* view = nullptr;
    REQUIRE(abr_to_device(rt, &view_source.managed, cpu, nullptr, nullptr, &view) == ABR_OK);
    REQUIRE(view->dl_tensor.ndim == static_cast<int32_t>(ndim));
    CHECK(std::vector<int64_t>(view->dl_tensor.shape, view->dl_tensor.shape + ndim) == shape);
    CHECK(std::vector<int64_t>(view->dl_tensor.strides, view->dl_tensor.strides + ndim) == strides);
    view->deleter(view);
    CHECK(view_source.deleted == 1);

    Managed copy_source(data, i32, shape, strides);
    abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
    abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
    options.copy = ABR_COPY_ALWAYS;
    DLManagedTensorVersioned* copy = nullptr;
    REQUIRE(abr_to_device(rt, &copy_source.managed, cpu, &options, nullptr, &copy) == ABR_OK);
    CHECK(std::vector<int64_t>(copy->dl_tensor.shape, copy->dl_tensor.shape + ndim) == shape);
    CHECK(copy->dl_tensor.strides[0] == 2);  // compact row-major
    CHECK(copy->dl_tensor.strides[ndim - 1] == 1);
    const int32_t* packed = static_cast<const int32_t*>(copy->dl_tensor.data);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) CHECK(packed[i * 2 + j] == data[j * 3 + i]);
    copy->deleter(copy);
  }
}

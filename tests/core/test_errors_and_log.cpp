// Status names, the per-thread error text, version and logging.
#include <cstdlib>
#include <cstring>
#include <complex>
#include <functional>
#include <thread>

#include "lib/base/settings.hpp"
#include "tests/support/helpers.hpp"

using namespace test;

TEST_CASE("every status has a static name") {
  const abr_status all[] = {ABR_OK,
                            ABR_ERR_INVALID_ARGUMENT,
                            ABR_ERR_UNSUPPORTED,
                            ABR_ERR_INTERNAL,
                            ABR_ERR_OUT_OF_MEMORY,
                            ABR_ERR_NO_DEVICE,
                            ABR_ERR_DEVICE_LOST,
                            ABR_ERR_BACKEND,
                            ABR_ERR_BACKEND_UNAVAILABLE,
                            ABR_ERR_COPY_REQUIRED,
                            ABR_ERR_READ_ONLY,
                            ABR_ERR_SHAPE_MISMATCH,
                            ABR_ERR_CASTING,
                            ABR_ERR_DLPACK_VERSION,
                            ABR_ERR_DLPACK_NDIM,
                            ABR_ERR_DLPACK_SHAPE,
                            ABR_ERR_DLPACK_STRIDES,
                            ABR_ERR_DLPACK_OVERFLOW,
                            ABR_ERR_DLPACK_DATA,
                            ABR_ERR_DLPACK_DTYPE,
                            ABR_ERR_DLPACK_DEVICE,
                            ABR_ERR_DLPACK_FLAGS};
  for (abr_status s : all) CHECK(std::string(abr_status_string(s)).rfind("ABR_", 0) == 0);
  CHECK(std::string(abr_status_string(ABR_ERR_DLPACK_SHAPE)) == "ABR_ERR_DLPACK_SHAPE");
  CHECK(std::string(abr_status_string(-12345)) == "ABR_UNKNOWN_STATUS");
}

TEST_CASE("the version macros match the library") {
  CHECK(abr_version_number() == ABR_VERSION_NUMBER);
  CHECK(std::string(abr_version_string()) ==
        std::to_string(ABR_VERSION_MAJOR) + "." + std::to_string(ABR_VERSION_MINOR) + "." +
            std::to_string(ABR_VERSION_PATCH));
}

TEST_CASE("error text belongs to the thread whose call failed") {
  Runtime rt;
  abr_clear_error();
  CHECK(std::string(abr_last_error()).empty());
  CHECK(abr_last_error_status() == ABR_OK);
  float data[2] = {};
  Managed m(data, f32, {2});
  m.tensor().ndim = -7;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, nullptr, nullptr, &out) == ABR_ERR_DLPACK_NDIM);
  std::string other_before, other_after;
  std::thread([&] {
    other_before = abr_last_error();
    int32_t count = 0;
    abr_device_count(nullptr, &count);
    other_after = abr_last_error();
  }).join();
  CHECK(other_before.empty());
  CHECK(other_after.find("runtime is NULL") != std::string::npos);
  CHECK(error_mentions("ndim = -7"));  // this thread's message is unchanged
  // A later success does not erase the last failure; abr_clear_error does.
  m.tensor().ndim = 1;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, nullptr, nullptr, &out) == ABR_OK);
  CHECK(error_mentions("ndim = -7"));
  out->deleter(out);
  abr_clear_error();
  CHECK(std::string(abr_last_error()).empty());
}

namespace {
struct Captured {
  std::vector<std::pair<abr_log_level, std::string>> records;
};
void capture(abr_log_level level, const char* message, void* user) {
  static_cast<Captured*>(user)->records.emplace_back(level, message);
}
}  // namespace

TEST_CASE("log records reach the callback at or above the level") {
  Runtime rt;
  Captured captured;
  const abr_log_level before = abr_log_get_level();
  REQUIRE(abr_log_set_callback(capture, &captured) == ABR_OK);
  REQUIRE(abr_log_set_level(ABR_LOG_DEBUG) == ABR_OK);
  float data[2] = {};
  Managed m(data, f32, {2});
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, nullptr, nullptr, &out) == ABR_OK);
  out->deleter(out);
  REQUIRE(!captured.records.empty());
  CHECK(captured.records.back().first == ABR_LOG_DEBUG);
  CHECK(captured.records.back().second.find("zero_copy") != std::string::npos);
  captured.records.clear();
  REQUIRE(abr_log_set_level(ABR_LOG_WARN) == ABR_OK);
  Managed again(data, f32, {2});
  REQUIRE(abr_to_device(rt, &again.managed, cpu, nullptr, nullptr, &out) == ABR_OK);
  out->deleter(out);
  CHECK(captured.records.empty());
  CHECK(abr_log_set_level(static_cast<abr_log_level>(42)) == ABR_ERR_INVALID_ARGUMENT);
  // A C caller passes any int where the header says abr_log_level (undefined for C++ to make here): judged as an int.
  const auto as_c_caller = reinterpret_cast<abr_status (*)(int32_t)>(&abr_log_set_level);
  CHECK(as_c_caller(-286331154) == ABR_ERR_INVALID_ARGUMENT);
  // A refused level changes nothing, the check every transfer makes (inline) included.
  CHECK(abr_log_get_level() == ABR_LOG_WARN);
  Managed third(data, f32, {2});
  REQUIRE(abr_to_device(rt, &third.managed, cpu, nullptr, nullptr, &out) == ABR_OK);
  out->deleter(out);
  CHECK(captured.records.empty());
  REQUIRE(abr_log_set_level(ABR_LOG_DEBUG) == ABR_OK);  // and a later one is seen at once
  Managed fourth(data, f32, {2});
  REQUIRE(abr_to_device(rt, &fourth.managed, cpu, nullptr, nullptr, &out) == ABR_OK);
  out->deleter(out);
  CHECK(captured.records.size() == 1);
  REQUIRE(abr_log_set_callback(nullptr, nullptr) == ABR_OK);
  abr_log_set_level(before);
}

TEST_CASE("a staging setting that is no whole number in range is said on the log and left at the default") {
  // strtoul read "-1" as ULONG_MAX: 256 staging threads on a 2-core machine, and a
  // chunk of -1 MiB a 1 GiB one, which turned staging off; words passed in silence.
  Captured captured;
  const abr_log_level before = abr_log_get_level();
  REQUIRE(abr_log_set_callback(capture, &captured) == ABR_OK);
  REQUIRE(abr_log_set_level(ABR_LOG_WARN) == ABR_OK);
  const char* set = std::getenv("ARRAYBRIDGE_STAGING_THREADS");
  const std::string runners = set ? set : "";  // the suite's own (cuda-fake-16-threads sets it), put back below
  for (const char* bad : {"-1", "abc", "1.5", "300", " 4", "99999999999999999999999"}) {
    setenv("ARRAYBRIDGE_STAGING_THREADS", bad, 1);
    captured.records.clear();
    CHECK_MESSAGE(abr::settings::staging_threads() == 0, bad);
    CHECK_MESSAGE(abr::settings::staging_threads() == 0, bad);  // said once per value
    REQUIRE_MESSAGE(captured.records.size() == 1, bad);
    CHECK(captured.records[0].first == ABR_LOG_WARN);
    CHECK(captured.records[0].second.find(std::string("ignoring ARRAYBRIDGE_STAGING_THREADS=") + bad +
                                          " (a whole number from 1 to 256)") != std::string::npos);
  }
  setenv("ARRAYBRIDGE_STAGING_THREADS", "256", 1);
  CHECK(abr::settings::staging_threads() == 256);
  captured.records.clear();
  setenv("ARRAYBRIDGE_STAGING_THREADS", "0", 1);  // the default, as set_staging's 0: not said
  CHECK(abr::settings::staging_threads() == 0);
  CHECK(captured.records.empty());
  unsetenv("ARRAYBRIDGE_STAGING_THREADS");
  CHECK(abr::settings::staging_threads() == 0);
  if (set) setenv("ARRAYBRIDGE_STAGING_THREADS", runners.c_str(), 1);
  {
    StagingChunkMib chunk("-1");
    CHECK(abr::settings::staging_chunk_mib() == 0);
  }
  {
    StagingChunkMib chunk("1024");
    CHECK(abr::settings::staging_chunk_mib() == 1024);
  }
  REQUIRE(abr_log_set_callback(nullptr, nullptr) == ABR_OK);
  abr_log_set_level(before);
}

TEST_CASE("devices: the CPU first, backends say why they are absent") {
  Runtime rt;
  int32_t count = 0;
  REQUIRE(abr_device_count(rt, &count) == ABR_OK);
  REQUIRE(count >= 1);
  struct abr_device_info info = ABR_DEVICE_INFO_INIT;
  REQUIRE(abr_device_info(rt, 0, &info) == ABR_OK);
  CHECK(info.device.device_type == kDLCPU);
  CHECK(info.backend == ABR_BACKEND_HOST);
  CHECK((info.flags & ABR_DEVICE_SHARES_HOST_MEMORY) != 0);
  CHECK(info.memory_bytes > 0);
  CHECK(abr_device_info(rt, count, &info) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("out of range"));
  struct abr_backend_info backend = ABR_BACKEND_INFO_INIT;
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_HOST, &backend) == ABR_OK);
  CHECK(backend.available == 1);
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_CUDA, &backend) == ABR_OK);
  if (!backend.available) CHECK(std::string(backend.detail).find("CUDA unavailable") == 0);
  CHECK(abr_backend_info(rt, static_cast<abr_backend>(9), &backend) == ABR_ERR_INVALID_ARGUMENT);
  const auto as_c_caller =
      reinterpret_cast<abr_status (*)(abr_runtime*, int32_t, struct abr_backend_info*)>(&abr_backend_info);
  CHECK(as_c_caller(rt, -286331154, &backend) == ABR_ERR_INVALID_ARGUMENT);  // any int, judged as one
}

TEST_CASE("CPU streams: inline, synchronizable, checked against the transfer's devices") {
  Runtime rt;
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cpu, &stream) == ABR_OK);
  CHECK(abr_stream_synchronize(stream) == ABR_OK);
  float data[3] = {1, 2, 3};
  Managed m(data, f32, {3});
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, nullptr, stream, &out) == ABR_OK);
  out->deleter(out);
  abr_stream_destroy(stream);
  abr_stream* wrapped = nullptr;
  int dummy = 0;
  CHECK(abr_stream_wrap(rt, cpu, &dummy, &wrapped) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("no native streams"));
  CHECK(abr_stream_create(rt, DLDevice{kDLOpenCL, 7}, &wrapped) == ABR_ERR_NO_DEVICE);
  CHECK(wrapped == nullptr);
  CHECK(abr_stream_synchronize(nullptr) == ABR_ERR_INVALID_ARGUMENT);
}

// One error rule: "<entry point>: <problem>", the entry point named once (by the
// C boundary), no C++ function name, the bad value in the words the caller used.
TEST_CASE("bad input: the whole message, entry point named once") {
  Runtime rt;
  std::vector<float> six(6), five(5);
  Managed src(six.data(), f32, {6}), dst(five.data(), f32, {5});
  Managed negative(six.data(), f32, {6});
  negative.tensor().ndim = -1;
  char out[3];
  DLDevice device{};
  DLDataType dtype{};
  abr_stream* stream = nullptr;
  abr_transfer_options bad_copy = ABR_TRANSFER_OPTIONS_INIT;
  bad_copy.copy = static_cast<abr_copy_mode>(7);
  abr_transfer_options bad_casting = ABR_TRANSFER_OPTIONS_INIT;
  bad_casting.casting = static_cast<abr_casting>(5);
  // A C caller's garbage, which no enumerator holds: written as bytes, since reading it as the enum is undefined.
  abr_transfer_options garbage = ABR_TRANSFER_OPTIONS_INIT;
  std::memset(&garbage.copy, 0xEE, sizeof garbage.copy);
  abr_transfer_options garbage_casting = ABR_TRANSFER_OPTIONS_INIT;
  std::memset(&garbage_casting.casting, 0xEE, sizeof garbage_casting.casting);
  abr_transfer_options safe = ABR_TRANSFER_OPTIONS_INIT;
  safe.casting = ABR_CASTING_SAFE;
  safe.dtype = f32;
  std::vector<double> wide(6);
  std::vector<std::complex<double>> complex6(6);
  Managed doubles(wide.data(), f64, {6}), complexes(complex6.data(), {kDLComplex, 128, 1}, {6});
  abr_runtime_options bad_flags = ABR_RUNTIME_OPTIONS_INIT;
  bad_flags.flags = 0x80;
  abr_runtime* unused = nullptr;
  DLManagedTensorVersioned* result = nullptr;
  struct Row {
    const char* what;
    std::function<abr_status()> call;
    abr_status status;
    const char* message;  // nullptr: only the rule is checked
  };
  const Row rows[] = {
      {"a name longer than its buffer",
       [&] {
         return abr_device_format({kDLOpenCL, 2}, out, sizeof out);
       },
       ABR_ERR_INVALID_ARGUMENT, "abr_device_format: 'opencl:2' needs 9 bytes, out has 3"},
      {"a dtype name longer than its buffer", [&] { return abr_dtype_format(f32, out, sizeof out); },
       ABR_ERR_INVALID_ARGUMENT, "abr_dtype_format: 'float32' needs 8 bytes, out has 3"},
      {"an unknown device", [&] { return abr_device_parse("gpu:0", &device); }, ABR_ERR_INVALID_ARGUMENT,
       "abr_device_parse: unknown device 'gpu:0'; expected 'cpu', 'cuda:N', 'cuda_host', 'cuda_managed', "
       "'opencl:N' or 'dlpack_device_T:N'"},
      {"an unknown dtype", [&] { return abr_dtype_parse("floaty", &dtype); }, ABR_ERR_INVALID_ARGUMENT, nullptr},
      {"a NULL native stream",
       [&] {
         return abr_stream_wrap(rt, {kDLOpenCL, 0}, nullptr, &stream);
       },
       ABR_ERR_INVALID_ARGUMENT, "abr_stream_wrap: native stream is NULL"},
      {"a NULL source", [&] { return abr_to_device(rt, nullptr, cpu, nullptr, nullptr, &result); },
       ABR_ERR_INVALID_ARGUMENT, "abr_to_device: src is NULL"},
      {"shapes that differ", [&] { return abr_copy(rt, &src.tensor(), &dst.tensor(), nullptr, nullptr); },
       ABR_ERR_SHAPE_MISMATCH, "abr_copy: source shape [6] differs from destination shape [5]"},
      {"a negative ndim", [&] { return abr_copy(rt, &negative.tensor(), &src.tensor(), nullptr, nullptr); },
       ABR_ERR_DLPACK_NDIM, "abr_copy: source: ndim = -1 is negative"},
      {"complex into float32 by a copy's default",
       [&] { return abr_copy(rt, &complexes.tensor(), &src.tensor(), nullptr, nullptr); }, ABR_ERR_CASTING,
       "abr_copy: casting \"same_kind\" (a copy's default, as NumPy's copyto) refuses complex128 -> float32 (the "
       "imaginary part is dropped); ask for casting \"unsafe\" to convert anyway"},
      {"float64 to float32 with casting \"safe\"",
       [&] { return abr_to_device(rt, &doubles.managed, cpu, &safe, nullptr, &result); }, ABR_ERR_CASTING,
       "abr_to_device: casting \"safe\" refuses float64 -> float32 (values round, and those out of range "
       "overflow); ask for casting \"same_kind\" to convert anyway"},
      {"an unknown casting", [&] { return abr_copy(rt, &src.tensor(), &src.tensor(), &bad_casting, nullptr); },
       ABR_ERR_INVALID_ARGUMENT, "abr_copy: abr_transfer_options.casting = 5 is not an abr_casting"},
      {"an unknown copy mode", [&] { return abr_to_device(rt, &src.managed, cpu, &bad_copy, nullptr, &result); },
       ABR_ERR_INVALID_ARGUMENT, "abr_to_device: abr_transfer_options.copy = 7 is not an abr_copy_mode"},
      {"a copy mode of garbage bytes", [&] { return abr_to_device(rt, &src.managed, cpu, &garbage, nullptr, &result); },
       ABR_ERR_INVALID_ARGUMENT, "abr_to_device: abr_transfer_options.copy = -286331154 is not an abr_copy_mode"},
      {"a casting of garbage bytes",
       [&] { return abr_copy(rt, &src.tensor(), &src.tensor(), &garbage_casting, nullptr); }, ABR_ERR_INVALID_ARGUMENT,
       "abr_copy: abr_transfer_options.casting = -286331154 is not an abr_casting"},
      {"unknown runtime flags", [&] { return abr_runtime_create(&bad_flags, &unused); }, ABR_ERR_INVALID_ARGUMENT,
       "abr_runtime_create: abr_runtime_options.flags has unknown bits 0x80"},
  };
  for (const Row& row : rows) {
    const abr_status status = row.call();
    const std::string message = abr_last_error();
    INFO(row.what << ": " << message);
    CHECK(status == row.status);
    if (row.message) CHECK(message == row.message);
    const std::string entry = message.substr(0, message.find(": "));
    CHECK(entry.rfind("abr_", 0) == 0);
    CHECK(message.find(entry + ":", entry.size()) == std::string::npos);  // named once
    CHECK(message.find("operator()") == std::string::npos);
  }
  CHECK(src.deleted == 0);  // a refused source stays the caller's
}

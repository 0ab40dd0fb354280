// abr_transfer_report.detail is a fixed 160 bytes. Every path the planner can
// take, with its longest reason and every step it can name, must fit whole:
// a cut line ends with "…" (lib/base/text.hpp), which this test refuses. CUDA on the
// fake driver and OpenCL on PoCL reach every path in one process.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "lib/base/text.hpp"
#include "tests/cuda/cuda_helpers.hpp"

using namespace test;

namespace {

constexpr DLDataType kF32 = {kDLFloat, 32, 1}, kC128 = {kDLComplex, 128, 1};
constexpr DLDevice kOpenCl{kDLOpenCL, 0};

// Checks the report of one transfer: the expected path, and a detail that fits.
void check_detail(const abr_transfer_report& report, abr_path expected, const char* scenario) {
  const std::string detail = report.detail;
  INFO(std::string(scenario) << ": " << detail);
  CHECK(report.path == expected);
  CHECK(!detail.empty());
  CHECK(detail.find("\xE2\x80\xA6") == std::string::npos);  // not cut
  CHECK(detail.size() < sizeof report.detail - 1);
}

// to_device with a report; the result is deleted at once (its values are tested elsewhere).
void to_device_detail(abr_runtime* rt, Managed& src, DLDevice dst, DLDataType dtype, uint32_t flags, abr_path expected,
                      const char* scenario) {
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.report = &report;
  options.dtype = dtype;
  options.flags = flags;
  DLManagedTensorVersioned* out = nullptr;
  INFO(std::string(scenario));
  REQUIRE_MESSAGE(abr_to_device(rt, &src.managed, dst, &options, nullptr, &out) == ABR_OK,
                  std::string(abr_last_error()));
  Owned result(out);
  check_detail(report, expected, scenario);
}

// abr_copy has no report: its plan's detail is read from the DEBUG log line
// "copy ... -> ...: <path> (<detail>)", which prints the same fixed buffer.
void capture_log(abr_log_level, const char* message, void* user_data) {
  std::string& line = *static_cast<std::string*>(user_data);
  if (std::strncmp(message, "copy ", 5) == 0) line = message;
}

void copy_detail(abr_runtime* rt, const DLTensor& src, const DLTensor& dst, abr_path expected, const char* scenario) {
  std::string line;
  const abr_log_level level = abr_log_get_level();
  abr_log_set_level(ABR_LOG_DEBUG);
  abr_log_set_callback(capture_log, &line);
  abr_transfer_options unsafe = ABR_TRANSFER_OPTIONS_INIT;
  unsafe.casting = ABR_CASTING_UNSAFE;  // complex into float32: a cast across kinds, on purpose
  const abr_status status = abr_copy(rt, &src, &dst, &unsafe, nullptr);
  abr_log_set_callback(nullptr, nullptr);
  abr_log_set_level(level);
  INFO(std::string(scenario) << ": " << line);
  REQUIRE_MESSAGE(status == ABR_OK, std::string(abr_last_error()));
  const std::string marker = std::string(": ") + abr_path_string(expected) + " (";
  const std::size_t at = line.find(marker);
  REQUIRE(at != std::string::npos);
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  report.path = expected;
  const std::string detail = line.substr(at + marker.size(), line.size() - at - marker.size() - 1);
  std::memcpy(report.detail, detail.c_str(), std::min(detail.size() + 1, sizeof report.detail));
  report.detail[sizeof report.detail - 1] = '\0';
  check_detail(report, expected, scenario);
}

// A device tensor of n x n complex128 from a host one, owned by the caller.
DLManagedTensorVersioned* device_square(abr_runtime* rt, std::vector<double>& host, int64_t n, DLDevice where) {
  Managed src(host.data(), kC128, {n, n});
  src.managed.deleter = nullptr;  // the vector owns the memory
  return move_to(rt, &src.managed, where);
}

}  // namespace

TEST_CASE("fit_text cuts at a word boundary and marks the cut with an ellipsis") {
  char field[16];
  CHECK(abr::fit_text(field, sizeof field, "short") == 5);
  CHECK(std::string(field) == "short");
  abr::fit_text(field, sizeof field, "fifteen chars..");  // exactly 15: fits with its NUL
  CHECK(std::string(field) == "fifteen chars..");
  abr::fit_text(field, sizeof field, "the quick brown fox jumps");
  CHECK(std::string(field) == "the quick\xE2\x80\xA6");  // "brown" would not fit before the mark
  abr::fit_text(field, sizeof field, "one, two, three, four");
  CHECK(std::string(field) == "one, two\xE2\x80\xA6");  // the comma before the cut goes too
  abr::fit_text(field, sizeof field, "Portable_Computing_Language");
  CHECK(std::string(field) == "Portable_Com\xE2\x80\xA6");  // one long word: cut where the room ends
  abr::fit_text(field, sizeof field, "ab \xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9 cd");
  CHECK(std::string(field) == "ab\xE2\x80\xA6");  // never inside a UTF-8 character
  abr::fit_text(field, sizeof field, "x\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9");
  CHECK(std::string(field) == "x\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xE2\x80\xA6");
  char tiny[4];
  CHECK(abr::fit_text(tiny, sizeof tiny, "too long") == 0);
  CHECK(tiny[0] == '\0');
}

TEST_CASE_FIXTURE(NoDriverFindings, "every planner path's report detail fits whole in abr_transfer_report.detail") {
  Runtime rt;
  if (cuda_devices(rt) < 2) return;  // the fake driver has two devices; a real one may have one
  const int64_t n = 8;
  std::vector<double> host(static_cast<std::size_t>(2 * n * n), 1.0), landing(host.size());
  std::vector<float> floats(static_cast<std::size_t>(n * n), 1.0f);

  // The longest reasons: a conversion with the longest dtype names, the contiguous flag,
  // an alignment a device cannot use in place, page-locked memory that is not.
  {
    Managed transposed(floats.data(), kF32, {n, n}, {1, n});
    to_device_detail(rt, transposed, cuda0, kC128, 0, ABR_PATH_HOST_TO_DEVICE, "strided cast upload to CUDA");
    to_device_detail(rt, transposed, cuda0, {}, ABR_TRANSFER_REQUIRE_CONTIGUOUS, ABR_PATH_HOST_TO_DEVICE,
                     "strided upload to CUDA, contiguous required");
    to_device_detail(rt, transposed, kOpenCl, kC128, 0, ABR_PATH_HOST_TO_DEVICE, "strided cast upload to OpenCL");
    to_device_detail(rt, transposed, cuda_host, kC128, 0, ABR_PATH_HOST_COPY, "strided cast into cuda_host");
    to_device_detail(rt, transposed, cuda_host, {}, 0, ABR_PATH_HOST_COPY, "pageable into cuda_host");
    to_device_detail(rt, transposed, cpu, kC128, ABR_TRANSFER_REQUIRE_CONTIGUOUS, ABR_PATH_HOST_COPY,
                     "strided cast host copy");
    Managed contiguous(floats.data(), kF32, {n * n});
    to_device_detail(rt, contiguous, cuda0, {}, 0, ABR_PATH_HOST_TO_DEVICE, "small pageable upload to CUDA");
    StagingChunkMib chunks("1");
    std::vector<float> big(std::size_t{3} << 18);  // 3 MiB: three chunks
    Managed large(big.data(), kF32, {static_cast<int64_t>(big.size())});
    to_device_detail(rt, large, cuda0, {}, 0, ABR_PATH_STAGED, "pageable upload to CUDA, staged");
    to_device_detail(rt, contiguous, cpu, {}, 0, ABR_PATH_ZERO_COPY, "host view");
    Managed misaligned(reinterpret_cast<char*>(host.data()) + 4, kF32, {n, n}, {1, n});
    to_device_detail(rt, misaligned, kOpenCl, {}, 0, ABR_PATH_HOST_TO_DEVICE, "misaligned strided upload to OpenCL");
  }

  // Device sources: packed by kernels, downloaded, sent to a peer and to another backend.
  Owned on0(device_square(rt, host, n, cuda0));
  {
    Managed columns(on0->data, kC128, {n, n}, {1, n}, 0, cuda0);
    columns.managed.deleter = nullptr;
    to_device_detail(rt, columns, cpu, kF32, 0, ABR_PATH_DEVICE_TO_HOST, "strided cast download from CUDA");
    to_device_detail(rt, columns, cuda_host, kF32, 0, ABR_PATH_DEVICE_TO_HOST, "strided cast download to cuda_host");
    to_device_detail(rt, columns, cuda1, kF32, 0, ABR_PATH_PEER, "strided cast peer copy");
    to_device_detail(rt, columns, kOpenCl, kF32, 0, ABR_PATH_STAGED, "strided cast CUDA -> OpenCL");
    to_device_detail(rt, columns, cuda0, kF32, 0, ABR_PATH_DEVICE_COPY, "strided cast device copy");
  }

  {  // Large enough for chunks of 1 MiB: the staged download's words.
    StagingChunkMib chunks("1");
    const int64_t m = 1024;  // 16 MiB of complex128, 4 MiB as float32
    std::vector<double> square(static_cast<std::size_t>(2 * m * m), 1.0);
    Owned big(device_square(rt, square, m, cuda0));
    Managed columns(big->data, kC128, {m, m}, {1, m}, 0, cuda0);
    columns.managed.deleter = nullptr;
    to_device_detail(rt, columns, cpu, kF32, 0, ABR_PATH_STAGED, "strided cast download from CUDA, staged");
  }

  // abr_copy into existing tensors, both sides strided: every step named at once.
  Owned on1(device_square(rt, host, n, cuda1));
  int64_t shape[2] = {n, n}, columns[2] = {1, n}, every_other[2] = {2 * n, 2};
  DLTensor host_strided{landing.data(), cpu, 2, kF32, shape, every_other, 0};
  DLTensor device_columns{on0->data, cuda0, 2, kC128, shape, columns, 0};
  DLTensor device_rows{on0->data, cuda0, 2, kC128, shape, nullptr, 0};
  DLTensor peer_columns{on1->data, cuda1, 2, kC128, shape, columns, 0};
  copy_detail(rt, device_columns, host_strided, ABR_PATH_DEVICE_TO_HOST, "strided cast copy to strided host");
  copy_detail(rt, host_strided, device_columns, ABR_PATH_HOST_TO_DEVICE, "strided cast copy to strided device");
  copy_detail(rt, device_columns, device_rows, ABR_PATH_DEVICE_COPY, "overlapping device copy");
  copy_detail(rt, device_columns, peer_columns, ABR_PATH_PEER, "strided peer copy into a strided tensor");
  DLTensor host_rows{host.data(), cpu, 2, kC128, shape, nullptr, 0};
  copy_detail(rt, host_strided, host_rows, ABR_PATH_HOST_COPY, "strided cast host copy into an existing tensor");
}

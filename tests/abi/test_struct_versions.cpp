// Versioned structs across the C ABI (capi/versioned.hpp). A "v2 library" (the
// library's own helpers, given a struct with one field more) and a "v1 caller"
// (a heap block of exactly the v1 size, so ASan sees one byte too many) prove
// that neither side reads or writes past the other's struct; then every public
// struct goes through its real entry points at its own version.
#include <cstdlib>
#include <cstring>
#include <memory>

#include "capi/struct_versions.hpp"
#include "tests/support/helpers.hpp"

using namespace test;

namespace {

struct DemoV1 {
  uint32_t version;
  uint32_t flags;
  uint64_t count;
};
struct DemoV2 {  // version 2 added one field at the end
  uint32_t version;
  uint32_t flags;
  uint64_t count;
  uint64_t added;
};
constexpr std::size_t kDemoSizes[] = {sizeof(DemoV1), sizeof(DemoV2)};
constexpr abr::capi::StructVersions kLibraryV2{"demo", "demo_init", "DEMO_VERSION", kDemoSizes, 2};
constexpr abr::capi::StructVersions kLibraryV1{"demo", "demo_init", "DEMO_VERSION", kDemoSizes, 1};

// A caller's struct of exactly `size` bytes on the heap, so that ASan reports any
// access past it; `fill` marks every byte.
struct CallerBlock {
  std::unique_ptr<unsigned char[]> bytes;
  explicit CallerBlock(std::size_t size, unsigned char fill) : bytes(new unsigned char[size]) {
    std::memset(bytes.get(), fill, size);
  }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(bytes.get());
  }
};

}  // namespace

TEST_CASE("a v2 library writes, reads and initialises only the v1 bytes of a v1 caller's struct") {
  CallerBlock caller(sizeof(DemoV1), 0xAB);
  caller.as<DemoV1>()->version = 1;
  DemoV2 full{2, 7, 99, 12345};
  abr::capi::write_versioned(caller.as<DemoV2>(), full, kLibraryV2);  // ASan: an overrun fails here
  CHECK(caller.as<DemoV1>()->version == 1);                           // the caller's version stays
  CHECK(caller.as<DemoV1>()->flags == 7);
  CHECK(caller.as<DemoV1>()->count == 99);

  const DemoV2 read = abr::capi::read_versioned(caller.as<DemoV2>(), kLibraryV2);
  CHECK(read.count == 99);
  CHECK(read.added == 0);  // a field the caller's version lacks: its default

  CallerBlock fresh(sizeof(DemoV1), 0xCD);
  abr::capi::init_versioned(fresh.as<DemoV2>(), 1, kLibraryV2);
  CHECK(fresh.as<DemoV1>()->version == 1);
  CHECK(fresh.as<DemoV1>()->flags == 0);
  CHECK(fresh.as<DemoV1>()->count == 0);
}

TEST_CASE("a v1 library refuses a v2 caller's struct by name and touches none of it") {
  CallerBlock caller(sizeof(DemoV2), 0x5A);
  caller.as<DemoV2>()->version = 2;
  const DemoV2 before = *caller.as<DemoV2>();
  abr::Error refused(ABR_OK, "");
  try {
    abr::capi::write_versioned(caller.as<DemoV1>(), DemoV1{1, 1, 1}, kLibraryV1);
  } catch (const abr::Error& e) {
    refused = e;
  }
  CHECK(refused.status() == ABR_ERR_INVALID_ARGUMENT);
  CHECK(std::string(refused.what()) == "demo version 2 is newer than this library's (1)");
  CHECK(std::memcmp(caller.as<DemoV2>(), &before, sizeof before) == 0);
  CHECK_THROWS_AS(abr::capi::read_versioned(caller.as<DemoV1>(), kLibraryV1), abr::Error);
  CHECK_THROWS_AS(abr::capi::init_versioned(caller.as<DemoV1>(), 0, kLibraryV1), abr::Error);
}

// Each public struct at exactly its size, through its entry points.
TEST_CASE("every public struct: init at its version, 0 and newer refused by name, filled within its size") {
  Runtime rt;
  CHECK(abr_runtime_options_init(nullptr, ABR_RUNTIME_OPTIONS_VERSION) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_runtime_options_init: the abr_runtime_options pointer is NULL"));

  CallerBlock stats(sizeof(abr_pool_stats), 0xEE);
  CHECK(abr_pool_stats_init(stats.as<abr_pool_stats>(), 0) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(
      error_mentions("abr_pool_stats.version is 0: set it with abr_pool_stats_init(&x, ABR_POOL_STATS_VERSION) "
                     "or ABR_POOL_STATS_INIT"));
  CHECK(abr_pool_stats_init(stats.as<abr_pool_stats>(), ABR_POOL_STATS_VERSION + 1) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_pool_stats version 2 is newer than this library's (1)"));
  REQUIRE(abr_pool_stats_init(stats.as<abr_pool_stats>(), ABR_POOL_STATS_VERSION) == ABR_OK);
  CHECK(stats.as<abr_pool_stats>()->hits == 0);
  REQUIRE(abr_pool_get_stats(rt, stats.as<abr_pool_stats>()) == ABR_OK);
  CHECK(stats.as<abr_pool_stats>()->version == ABR_POOL_STATS_VERSION);
  CHECK(stats.as<abr_pool_stats>()->limit_bytes > 0);

  // abr_ipc_handle: refused before any device is asked (this host tensor would be refused after).
  CallerBlock ipc(sizeof(abr_ipc_handle), 0xEE);
  CHECK(abr_ipc_handle_init(ipc.as<abr_ipc_handle>(), 0) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(
      error_mentions("abr_ipc_handle.version is 0: set it with abr_ipc_handle_init(&x, ABR_IPC_HANDLE_VERSION) "
                     "or ABR_IPC_HANDLE_INIT"));
  ipc.as<abr_ipc_handle>()->version = ABR_IPC_HANDLE_VERSION + 1;
  float value = 1;
  Managed host(&value, f32, {1});
  CHECK(abr_ipc_export(rt, &host.tensor(), nullptr, ipc.as<abr_ipc_handle>()) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_ipc_handle version 2 is newer than this library's (1)"));
  REQUIRE(abr_ipc_handle_init(ipc.as<abr_ipc_handle>(), ABR_IPC_HANDLE_VERSION) == ABR_OK);
  CHECK(ipc.as<abr_ipc_handle>()->size == 0);
  CHECK(abr_ipc_export(rt, &host.tensor(), nullptr, ipc.as<abr_ipc_handle>()) == ABR_ERR_UNSUPPORTED);
  CHECK(error_mentions("cpu is host memory"));

  CallerBlock device(sizeof(struct abr_device_info), 0xEE);
  REQUIRE(abr_device_info_init(device.as<struct abr_device_info>(), ABR_DEVICE_INFO_VERSION) == ABR_OK);
  REQUIRE(abr_device_info(rt, 0, device.as<struct abr_device_info>()) == ABR_OK);
  CHECK(device.as<struct abr_device_info>()->device.device_type == kDLCPU);
  CHECK(device.as<struct abr_device_info>()->backend == ABR_BACKEND_HOST);

  CallerBlock backend(sizeof(struct abr_backend_info), 0xEE);
  REQUIRE(abr_backend_info_init(backend.as<struct abr_backend_info>(), ABR_BACKEND_INFO_VERSION) == ABR_OK);
  REQUIRE(abr_backend_info(rt, ABR_BACKEND_HOST, backend.as<struct abr_backend_info>()) == ABR_OK);
  CHECK(backend.as<struct abr_backend_info>()->available == 1);

  // A transfer's options and report, each at exactly its size.
  CallerBlock options(sizeof(abr_transfer_options), 0xEE);
  CallerBlock report(sizeof(abr_transfer_report), 0xEE);
  REQUIRE(abr_transfer_options_init(options.as<abr_transfer_options>(), ABR_TRANSFER_OPTIONS_VERSION) == ABR_OK);
  REQUIRE(abr_transfer_report_init(report.as<abr_transfer_report>(), ABR_TRANSFER_REPORT_VERSION) == ABR_OK);
  options.as<abr_transfer_options>()->copy = ABR_COPY_ALWAYS;
  options.as<abr_transfer_options>()->report = report.as<abr_transfer_report>();
  float data[6] = {1, 2, 3, 4, 5, 6};
  Managed m(data, f32, {6});
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, options.as<abr_transfer_options>(), nullptr, &out) == ABR_OK);
  Owned result(out);
  CHECK(report.as<abr_transfer_report>()->version == ABR_TRANSFER_REPORT_VERSION);
  CHECK(report.as<abr_transfer_report>()->path == ABR_PATH_HOST_COPY);
  CHECK(report.as<abr_transfer_report>()->bytes_moved == sizeof data);

  // A v2 caller's report (a field more, version 2) against this v1 library: refused,
  // nothing moved, nothing written.
  struct ReportV2 {
    abr_transfer_report v1;
    uint64_t added;
  };
  CallerBlock newer(sizeof(ReportV2), 0x11);
  newer.as<ReportV2>()->v1.version = ABR_TRANSFER_REPORT_VERSION + 1;
  const ReportV2 untouched = *newer.as<ReportV2>();
  options.as<abr_transfer_options>()->report = &newer.as<ReportV2>()->v1;
  Managed second(data, f32, {6});
  CHECK(abr_to_device(rt, &second.managed, cpu, options.as<abr_transfer_options>(), nullptr, &out) ==
        ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_transfer_report version 2 is newer than this library's (1)"));
  CHECK(second.deleted == 0);
  CHECK(std::memcmp(newer.as<ReportV2>(), &untouched, sizeof untouched) == 0);
}

TEST_CASE("abr_copy options: a report, a contiguous destination on request, no copy mode or dtype") {
  Runtime rt;
  std::vector<float> src = {1, 2, 3, 4, 5, 6}, dst(12, 0.0f);
  std::vector<int64_t> shape{6}, every_other{2};
  DLTensor from{src.data(), cpu, 1, f32, shape.data(), nullptr, 0};
  DLTensor into{dst.data(), cpu, 1, f32, shape.data(), every_other.data(), 0};
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.report = &report;
  REQUIRE(abr_copy(rt, &from, &into, &options, nullptr) == ABR_OK);
  CHECK(report.path == ABR_PATH_HOST_COPY);
  CHECK(report.bytes_moved == 6 * sizeof(float));
  CHECK(dst[10] == 6.0f);
  options.flags = ABR_TRANSFER_REQUIRE_CONTIGUOUS;
  CHECK(abr_copy(rt, &from, &into, &options, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("the destination is not compact row-major (strides [2])"));
  options.flags = 0;
  options.copy = ABR_COPY_ALWAYS;
  CHECK(abr_copy(rt, &from, &into, &options, nullptr) == ABR_ERR_INVALID_ARGUMENT);
  CHECK(error_mentions("abr_copy takes no copy mode or dtype"));
  options.copy = ABR_COPY_IF_NEEDED;
  options.dtype = f64;
  CHECK(abr_copy(rt, &from, &into, &options, nullptr) == ABR_ERR_INVALID_ARGUMENT);
}

TEST_CASE("abr_transfer_options version 1 (no casting): read within its 24 bytes, a copy's casting its default") {
  Runtime rt;
  const std::size_t v1_size = offsetof(abr_transfer_options, casting);
  REQUIRE(v1_size == 24);
  CallerBlock v1(v1_size, 0xEE);  // ASan: a read of `casting` fails here
  REQUIRE(abr_transfer_options_init(v1.as<abr_transfer_options>(), 1) == ABR_OK);
  double value = 2.5;
  float narrowed = 0;
  int32_t into = -1;
  std::vector<int64_t> shape{1};
  DLTensor from{&value, cpu, 1, f64, shape.data(), nullptr, 0};
  DLTensor same_kind{&narrowed, cpu, 1, f32, shape.data(), nullptr, 0};
  DLTensor other_kind{&into, cpu, 1, i32, shape.data(), nullptr, 0};
  REQUIRE(abr_copy(rt, &from, &same_kind, v1.as<abr_transfer_options>(), nullptr) == ABR_OK);
  CHECK(narrowed == 2.5f);
  CHECK(abr_copy(rt, &from, &other_kind, v1.as<abr_transfer_options>(), nullptr) == ABR_ERR_CASTING);
  CHECK(into == -1);
  // Without ASan too: a version 1 struct followed by bytes that are no abr_casting is read as version 1.
  CallerBlock padded(sizeof(abr_transfer_options), 0xEE);
  REQUIRE(abr_transfer_options_init(padded.as<abr_transfer_options>(), 1) == ABR_OK);
  uint32_t left = 0;  // as bytes: 0xEEEEEEEE is no abr_casting, and reading it as one is undefined (UBSan)
  std::memcpy(&left, &padded.as<abr_transfer_options>()->casting, sizeof left);
  CHECK(left == 0xEEEEEEEE);  // init left it
  CHECK(abr_copy(rt, &from, &other_kind, padded.as<abr_transfer_options>(), nullptr) == ABR_ERR_CASTING);
  // Its abr_to_device casts as astype does: a dtype asked for is made.
  Managed m(&value, f64, {1});
  m.managed.deleter = nullptr;
  v1.as<abr_transfer_options>()->dtype = i32;
  DLManagedTensorVersioned* out = nullptr;
  REQUIRE(abr_to_device(rt, &m.managed, cpu, v1.as<abr_transfer_options>(), nullptr, &out) == ABR_OK);
  Owned result(out);
  CHECK(*static_cast<const int32_t*>(result->data) == 2);
}

/* A plain C99 program using only the public header and the shared library:
 * a round trip through the CPU with deleter counting and error reporting. */
#include <stdio.h>
#include <string.h>

#include <arraybridge/arraybridge.h>

static int failures = 0;
static int checks = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond)) {                                                             \
      ++failures;                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

static int deleted = 0;
static void count_delete(DLManagedTensorVersioned* self) {
  (void)self;
  ++deleted;
}

int main(void) {
  abr_runtime* rt = NULL;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  DLManagedTensorVersioned src, *out = NULL;
  struct abr_device_info info = ABR_DEVICE_INFO_INIT;
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {1, 2}; /* a transposed view */
  const float* result;
  int32_t count = 0;

  CHECK(abr_version_number() == ABR_VERSION_NUMBER);
  CHECK(abr_runtime_create(NULL, &rt) == ABR_OK);
  CHECK(abr_device_count(rt, &count) == ABR_OK && count >= 1);
  CHECK(abr_device_info(rt, 0, &info) == ABR_OK && info.device.device_type == kDLCPU);

  memset(&src, 0, sizeof src);
  src.version.major = DLPACK_MAJOR_VERSION;
  src.version.minor = DLPACK_MINOR_VERSION;
  src.deleter = count_delete;
  src.dl_tensor.data = data;
  src.dl_tensor.device.device_type = kDLCPU;
  src.dl_tensor.ndim = 2;
  src.dl_tensor.dtype.code = kDLFloat;
  src.dl_tensor.dtype.bits = 32;
  src.dl_tensor.dtype.lanes = 1;
  src.dl_tensor.shape = shape;
  src.dl_tensor.strides = strides;

  CHECK(abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION) == ABR_OK);
  options.copy = ABR_COPY_ALWAYS;
  options.report = &report;
  CHECK(abr_to_device(rt, &src, info.device, &options, NULL, &out) == ABR_OK);
  CHECK(deleted == 1);
  CHECK(report.path == ABR_PATH_HOST_COPY);
  CHECK(report.bytes_moved == sizeof data);
  CHECK(out != NULL && (out->flags & DLPACK_FLAG_BITMASK_IS_COPIED));
  result = (const float*)out->dl_tensor.data;
  CHECK(result[0] == 1 && result[1] == 3 && result[2] == 5 && result[3] == 2);
  out->deleter(out);

  /* An error leaves the source with the caller and says why. */
  src.dl_tensor.ndim = -1;
  deleted = 0;
  CHECK(abr_to_device(rt, &src, info.device, NULL, NULL, &out) == ABR_ERR_DLPACK_NDIM);
  CHECK(out == NULL && deleted == 0);
  CHECK(strstr(abr_last_error(), "ndim = -1") != NULL);
  CHECK(strcmp(abr_status_string(ABR_ERR_DLPACK_NDIM), "ABR_ERR_DLPACK_NDIM") == 0);

  { /* streams from C: two inline CPU streams ordered one after the other */
    abr_stream* first = NULL;
    abr_stream* second = NULL;
    CHECK(abr_stream_create(rt, info.device, &first) == ABR_OK);
    CHECK(abr_stream_create(rt, info.device, &second) == ABR_OK);
    CHECK(abr_stream_wait(second, first) == ABR_OK);
    CHECK(abr_stream_wait(second, NULL) == ABR_ERR_INVALID_ARGUMENT);
    abr_stream_destroy(second);
    abr_stream_destroy(first);
  }

  { /* the pinned pool from C */
    abr_pool_stats stats = ABR_POOL_STATS_INIT;
    uint64_t released = 1;
    memset(&stats, 0, sizeof stats);
    stats.version = ABR_POOL_STATS_VERSION;
    CHECK(abr_pool_get_stats(rt, &stats) == ABR_OK && stats.limit_bytes > 0 && stats.bytes_in_use == 0);
    CHECK(abr_pool_set_limit(rt, 1u << 20) == ABR_OK);
    CHECK(abr_pool_get_stats(rt, &stats) == ABR_OK && stats.limit_bytes == (1u << 20));
    CHECK(abr_pool_trim(rt, &released) == ABR_OK && released == 0);
    CHECK(abr_pool_trim(NULL, NULL) == ABR_ERR_INVALID_ARGUMENT);
  }

  abr_runtime_destroy(rt);
  printf("c-abi-test: %d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}

"""Build-time description of arraybridge's native parts, used by setup.py.

`arraybridge._native` is a cffi module in API mode: compiled against the public
header, so cffi checks every declaration below against the real one, and linked to
libarraybridge with an rpath, so no search happens at import time.
"""
import os
import shlex
import subprocess

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))


class LibraryNotFound(RuntimeError):
    pass


def _pkg_config():
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "arraybridge"], capture_output=True, text=True)
        inc = subprocess.run(["pkg-config", "--variable=includedir", "arraybridge"], capture_output=True, text=True)
    except OSError:
        return None
    if out.returncode or inc.returncode:
        return None
    return inc.stdout.strip(), out.stdout.strip()


def locate():
    """(include_dir, lib_dir) of libarraybridge: $ARRAYBRIDGE_PREFIX, then the
    repository's `make` build, then an installed copy found by pkg-config."""
    tried = []
    candidates = []
    prefix = os.environ.get("ARRAYBRIDGE_PREFIX")
    if prefix:
        candidates.append(("$ARRAYBRIDGE_PREFIX", os.path.join(prefix, "include"), os.path.join(prefix, "lib")))
    root = os.path.dirname(HERE)
    build = os.environ.get("ARRAYBRIDGE_BUILD", os.path.join(root, "build"))
    candidates.append(("the repository's build", os.path.join(root, "include"), os.path.join(build, "lib")))
    found = _pkg_config()
    if found:
        candidates.append(("pkg-config", found[0], found[1]))
    for origin, inc, lib in candidates:
        header = os.path.join(inc, "arraybridge", "arraybridge.h")
        library = os.path.join(lib, "libarraybridge.so")
        if os.path.isfile(header) and os.path.exists(library):
            return inc, lib
        tried.append(f"{origin}: {header} and {library}")
    raise LibraryNotFound(
        "arraybridge: libarraybridge was not found. Run `make` in the repository root "
        "(or `make install`), or set ARRAYBRIDGE_PREFIX to an install prefix. Looked for:\n  "
        + "\n  ".join(tried))


CDEF = r"""
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef enum { kDLCPU, kDLCUDA, kDLCUDAHost, kDLOpenCL, kDLCUDAManaged, ... } DLDeviceType;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data; DLDevice device; int32_t ndim; DLDataType dtype;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor; void* manager_ctx; void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version; void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags; DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DLPACK_FLAG_BITMASK_READ_ONLY ...
#define DLPACK_FLAG_BITMASK_IS_COPIED ...

typedef int32_t abr_status;
uint32_t abr_version_number(void);
const char* abr_version_string(void);
const char* abr_status_string(abr_status status);
const char* abr_last_error(void);

typedef struct abr_runtime abr_runtime;
typedef struct abr_stream abr_stream;
typedef struct abr_runtime_options { uint32_t version; uint32_t flags; } abr_runtime_options;
abr_status abr_runtime_create(const abr_runtime_options* options, abr_runtime** out);
void abr_runtime_destroy(abr_runtime* runtime);

typedef enum { ABR_BACKEND_HOST, ABR_BACKEND_CUDA, ABR_BACKEND_OPENCL, ... } abr_backend;
#define ABR_DEVICE_SHARES_HOST_MEMORY ...
#define ABR_DEVICE_LOST_FLAG ...
struct abr_device_info {
  DLDevice device; abr_backend backend; uint32_t flags; uint64_t memory_bytes;
  char name[128]; char platform[128];
};
struct abr_backend_info {
  abr_backend backend; int32_t available; int32_t device_count; uint32_t reserved_; char detail[256];
};
abr_status abr_device_count(abr_runtime* runtime, int32_t* count);
abr_status abr_device_info(abr_runtime* runtime, int32_t index, struct abr_device_info* info);
abr_status abr_backend_info(abr_runtime* runtime, abr_backend backend, struct abr_backend_info* info);

typedef enum { ABR_COPY_IF_NEEDED, ABR_COPY_ALWAYS, ABR_COPY_NEVER, ... } abr_copy_mode;
#define ABR_TRANSFER_NO_HOST_STAGING ...
#define ABR_TRANSFER_REQUIRE_CONTIGUOUS ...
typedef enum { ABR_PATH_NONE, ABR_PATH_ZERO_COPY, ... } abr_path;
#define ABR_REPORT_PACKED ...
#define ABR_REPORT_CAST ...
typedef struct abr_transfer_report {
  abr_path path; uint32_t flags; uint64_t bytes_moved; char detail[160];
} abr_transfer_report;
typedef struct abr_transfer_options {
  uint32_t version; abr_copy_mode copy; uint32_t flags; DLDataType dtype; abr_transfer_report* report;
} abr_transfer_options;
const char* abr_path_string(abr_path path);
abr_status abr_to_device(abr_runtime* runtime, DLManagedTensorVersioned* src, DLDevice dst,
                         const abr_transfer_options* options, abr_stream* stream,
                         DLManagedTensorVersioned** out);
abr_status abr_stream_wrap(abr_runtime* runtime, DLDevice device, void* native, abr_stream** out);
void abr_stream_destroy(abr_stream* stream);

typedef struct abr_pool_stats {
  uint32_t version; uint32_t reserved_;
  uint64_t bytes_pinned; uint64_t bytes_in_use; uint64_t bytes_cached; uint64_t bytes_waiting;
  uint64_t peak_bytes_pinned; uint64_t limit_bytes; uint64_t blocks_pinned; uint64_t hits; uint64_t misses;
} abr_pool_stats;
abr_status abr_pool_get_stats(abr_runtime* runtime, abr_pool_stats* stats);
abr_status abr_pool_trim(abr_runtime* runtime, uint64_t* released_bytes);

/* Helpers compiled into this module (below): they fold what would be several
   cffi operations per transfer into one call. */
typedef struct abr_py_call {
  abr_transfer_options options;
  abr_transfer_report report;
  uintptr_t result;
} abr_py_call;
abr_status abr_py_transfer(abr_runtime* runtime, abr_py_call* call, uintptr_t source,
                           int32_t dst_type, int32_t dst_id, uintptr_t stream);
uint64_t abr_py_device(uintptr_t tensor);
uint64_t abr_py_flags(uintptr_t tensor);
void abr_py_delete(uintptr_t tensor);
"""

HELPERS = r"""
#include "arraybridge/arraybridge.h"

typedef struct abr_py_call {
  abr_transfer_options options;
  abr_transfer_report report;
  uintptr_t result;
} abr_py_call;

/* Runs one transfer of the owned tensor at `source`. dst_type 0 keeps the source's
 * device. `stream` (0: none) is a CUDA stream handle of the CUDA side: the copy
 * runs in its order, after the work already queued there, and is complete when
 * this returns (destroying the wrapper waits for it). On failure the source's
 * deleter runs here, because the runtime leaves a failed source to its caller;
 * the error stays in abr_last_error. */
static abr_status abr_py_transfer(abr_runtime* runtime, abr_py_call* call, uintptr_t source,
                                  int32_t dst_type, int32_t dst_id, uintptr_t stream) {
  DLManagedTensorVersioned* src = (DLManagedTensorVersioned*)source;
  DLManagedTensorVersioned* out = NULL;
  abr_stream* wrapped = NULL;
  DLDevice dst = src->dl_tensor.device;
  if (dst_type) { dst.device_type = (DLDeviceType)dst_type; dst.device_id = dst_id; }
  call->options.report = &call->report;
  abr_status status = ABR_OK;
  if (stream)
    status = abr_stream_wrap(runtime, dst.device_type == kDLCUDA ? dst : src->dl_tensor.device,
                             (void*)stream, &wrapped);
  if (status == ABR_OK) status = abr_to_device(runtime, src, dst, &call->options, wrapped, &out);
  if (wrapped) abr_stream_destroy(wrapped);
  if (status != ABR_OK && src->deleter) src->deleter(src);
  call->result = (uintptr_t)out;
  return status;
}

/* The device as (type << 32 | id), and the flags, read in one call each. */
static uint64_t abr_py_device(uintptr_t t) {
  const DLDevice* d = &((const DLManagedTensorVersioned*)t)->dl_tensor.device;
  return ((uint64_t)(uint32_t)d->device_type << 32) | (uint32_t)d->device_id;
}
static uint64_t abr_py_flags(uintptr_t t) { return ((const DLManagedTensorVersioned*)t)->flags; }

static void abr_py_delete(uintptr_t address) {
  DLManagedTensorVersioned* t = (DLManagedTensorVersioned*)address;
  if (t && t->deleter) t->deleter(t);
}
"""


def native_builder():
    inc, lib = locate()
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source("arraybridge._native", HELPERS, include_dirs=[inc], library_dirs=[lib],
                   libraries=["arraybridge"], extra_link_args=[f"-Wl,-rpath,{lib}"])
    return ffi


ffibuilder = native_builder()

if __name__ == "__main__":
    print(shlex.join(locate()))

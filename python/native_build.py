"""Build-time description of arraybridge's native part, used by setup.py.

`arraybridge._native` is the package's one native module: a cffi module in API mode,
compiled against the public header (so cffi checks every declaration below against
the real one) and linked to libarraybridge with an rpath, so no search happens at
import time. It also compiles the hot path (transfers, Tensor, capsules: the C files
of arraybridge/_core/), which makes the module `arraybridge._core` when the package
first calls abr_python_core_install (arraybridge/_lib.py).
"""
import glob
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
typedef int... DLDeviceType; /* the library's kind table names the types (abr_device_kind_get) */
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
#define ABR_REPORT_PACKED ...
#define ABR_REPORT_CAST ...

typedef int32_t abr_status;
#define ABR_OK ...
#define ABR_ERR_INVALID_ARGUMENT ...
#define ABR_ERR_UNSUPPORTED ...
#define ABR_ERR_INTERNAL ...
#define ABR_ERR_OUT_OF_MEMORY ...
#define ABR_ERR_NO_DEVICE ...
#define ABR_ERR_DEVICE_LOST ...
#define ABR_ERR_BACKEND ...
#define ABR_ERR_BACKEND_UNAVAILABLE ...
#define ABR_ERR_COPY_REQUIRED ...
#define ABR_ERR_READ_ONLY ...
#define ABR_ERR_SHAPE_MISMATCH ...
#define ABR_ERR_CASTING ...
#define ABR_ERR_DLPACK_VERSION ...
#define ABR_ERR_DLPACK_NDIM ...
#define ABR_ERR_DLPACK_SHAPE ...
#define ABR_ERR_DLPACK_STRIDES ...
#define ABR_ERR_DLPACK_OVERFLOW ...
#define ABR_ERR_DLPACK_DATA ...
#define ABR_ERR_DLPACK_DTYPE ...
#define ABR_ERR_DLPACK_DEVICE ...
#define ABR_ERR_DLPACK_FLAGS ...
#define ABR_NAME_MAX ...
abr_status abr_device_parse(const char* text, DLDevice* out);
abr_status abr_device_format(DLDevice device, char* out, size_t size);
abr_status abr_dtype_parse(const char* text, DLDataType* out);
abr_status abr_dtype_format(DLDataType dtype, char* out, size_t size);
#define ABR_DEVICE_KIND_VERSION ...
#define ABR_KIND_NUMBERED ...
#define ABR_KIND_HOST_MEMORY ...
#define ABR_KIND_NEW_TENSORS ...
#define ABR_KIND_ADDRESSES ...
#define ABR_KIND_QUEUED ...
#define ABR_KIND_DLPACK_STREAMS ...
typedef struct abr_device_kind {
  uint32_t version; DLDeviceType type; int backend; uint32_t flags; uint32_t disable_flag; uint32_t default_stream;
  char name[32]; char backend_name[32]; char disable_env[64];
} abr_device_kind;
abr_status abr_device_kind_init(abr_device_kind* kind, unsigned int version);
abr_status abr_device_kind_count(int32_t* count);
abr_status abr_device_kind_get(int32_t index, abr_device_kind* kind);
uint32_t abr_version_number(void);
const char* abr_version_string(void);
const char* abr_status_string(abr_status status);
const char* abr_last_error(void);

typedef struct abr_runtime abr_runtime;
typedef struct abr_runtime_options { uint32_t version; uint32_t flags; } abr_runtime_options;
#define ABR_RUNTIME_OPTIONS_VERSION ...
#define ABR_DEVICE_INFO_VERSION ...
#define ABR_BACKEND_INFO_VERSION ...
#define ABR_POOL_STATS_VERSION ...
#define ABR_RUNTIME_DISABLE_CUDA ...
#define ABR_RUNTIME_DISABLE_OPENCL ...
abr_status abr_runtime_create(const abr_runtime_options* options, abr_runtime** out);
void abr_runtime_destroy(abr_runtime* runtime);

typedef enum { ABR_BACKEND_HOST, ABR_BACKEND_CUDA, ABR_BACKEND_OPENCL, ... } abr_backend;
#define ABR_DEVICE_SHARES_HOST_MEMORY ...
#define ABR_DEVICE_LOST_FLAG ...
#define ABR_DEVICE_NO_DOUBLE_PRECISION ...
struct abr_device_info {
  uint32_t version; abr_backend backend; DLDevice device; uint32_t flags; uint32_t reserved_; uint64_t memory_bytes;
  char name[128]; char platform[128];
};
struct abr_backend_info {
  uint32_t version; abr_backend backend; int32_t available; int32_t device_count; char detail[256];
};
abr_status abr_device_count(abr_runtime* runtime, int32_t* count);
abr_status abr_device_info(abr_runtime* runtime, int32_t index, struct abr_device_info* info);
abr_status abr_backend_info(abr_runtime* runtime, abr_backend backend, struct abr_backend_info* info);

typedef struct abr_pool_stats {
  uint32_t version; uint32_t reserved_;
  uint64_t bytes_pinned; uint64_t bytes_in_use; uint64_t bytes_cached; uint64_t bytes_waiting;
  uint64_t peak_bytes_pinned; uint64_t limit_bytes; uint64_t blocks_pinned; uint64_t hits; uint64_t misses;
} abr_pool_stats;
abr_status abr_pool_get_stats(abr_runtime* runtime, abr_pool_stats* stats);
abr_status abr_pool_trim(abr_runtime* runtime, uint64_t* released_bytes);
abr_status abr_runtime_set_staging(abr_runtime* runtime, uint32_t threads, uint64_t chunk_bytes);

int abr_python_core_install(char* error, size_t size); /* arraybridge/_core/module.c */
"""


def native_builder():
    inc, lib = locate()
    ffi = FFI()
    ffi.cdef(CDEF)
    # Every C file of _core/: a new file needs no line here. Relative to setup.py's folder.
    core = sorted(os.path.relpath(path, HERE) for path in glob.glob(os.path.join(HERE, "arraybridge", "_core", "*.c")))
    ffi.set_source("arraybridge._native",
                   '#include "arraybridge/arraybridge.h"\nint abr_python_core_install(char* error, size_t size);',
                   sources=core, include_dirs=[inc], library_dirs=[lib], libraries=["arraybridge"],
                   extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers", "-Werror"],
                   extra_link_args=[f"-Wl,-rpath,{lib}"],
                   py_limited_api=False)  # _core uses CPython's full API (vectorcall, fast tuple access)
    return ffi


ffibuilder = native_builder()

if __name__ == "__main__":
    print(shlex.join(locate()))

/*
 * libarraybridge: move and share DLPack tensors between host memory, CUDA and
 * OpenCL devices through one stable C ABI.
 *
 * Conventions (see docs/architecture/c-abi.md):
 * - every function returns abr_status (0 = ABR_OK, errors negative) or void;
 *   handles are opaque and written through out-parameters; destroy functions
 *   accept NULL;
 * - after a failed call, abr_last_error() holds the calling thread's message;
 * - every struct passed in or filled in starts with `uint32_t version`, which the
 *   caller sets (abr_X_init(&x, ABR_X_VERSION), or `abr_X x = ABR_X_INIT;` whose
 *   initializer names every field, so -Wextra stays quiet in C and C++): the
 *   library reads and writes only the fields that version has, refuses version 0
 *   and versions newer than its own with ABR_ERR_INVALID_ARGUMENT naming the
 *   struct, and fields are only ever added at the end, with a new version;
 * - nothing here exists only as a macro or inline function, so FFI can use all of it.
 */
#ifndef ARRAYBRIDGE_ARRAYBRIDGE_H
#define ARRAYBRIDGE_ARRAYBRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include "dlpack.h"

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION != 1
#error "arraybridge needs DLPack 1.x declarations; an older dlpack.h was included first"
#endif

#if defined(_WIN32)
#define ABR_API __declspec(dllimport)
#elif defined(__GNUC__)
#define ABR_API __attribute__((visibility("default")))
#else
#define ABR_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ version */

#define ABR_VERSION_MAJOR 0
#define ABR_VERSION_MINOR 2
#define ABR_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH, the value abr_version_number() returns. */
#define ABR_VERSION_NUMBER (ABR_VERSION_MAJOR * 10000 + ABR_VERSION_MINOR * 100 + ABR_VERSION_PATCH)

/* The library's own version, which may be newer than the header a caller built
 * against: abr_version_number() as ABR_VERSION_NUMBER, abr_version_string() as "0.2.0". */
ABR_API uint32_t abr_version_number(void);
ABR_API const char* abr_version_string(void);

/* ------------------------------------------------------------------- status */

/* Values are never renumbered. Ranges: general -1..-39, memory -40..-59,
 * device/backend -60..-79, transfer -80..-89, DLPack descriptor -90..-119.
 * abr_copy and abr_copy_many return a transfer or descriptor status, or
 * ABR_ERR_UNSUPPORTED (a conversion, overlap or path the call cannot do), before
 * they write anything: a destination is then as it was. */
typedef int32_t abr_status;

#define ABR_OK 0
#define ABR_NOT_READY 1                 /* abr_event_query: the work is still running (not an error) */
#define ABR_ERR_INVALID_ARGUMENT (-1)   /* NULL pointer, bad option, bad handle */
#define ABR_ERR_UNSUPPORTED (-2)        /* valid request this build cannot do */
#define ABR_ERR_INTERNAL (-3)           /* a bug: please report the message */
#define ABR_ERR_OUT_OF_MEMORY (-40)     /* host, pinned or device allocation failed */
#define ABR_ERR_NO_DEVICE (-60)         /* device type known, but absent here */
#define ABR_ERR_DEVICE_LOST (-61)       /* device hit a sticky error; later calls fail fast */
#define ABR_ERR_BACKEND (-62)           /* a CUDA/OpenCL call failed; message has its code */
#define ABR_ERR_BACKEND_UNAVAILABLE (-63) /* the backend library could not be loaded */
#define ABR_ERR_COPY_REQUIRED (-80)     /* ABR_COPY_NEVER, but the transfer needs a copy */
#define ABR_ERR_READ_ONLY (-81)         /* would write through a read-only tensor */
#define ABR_ERR_SHAPE_MISMATCH (-82)    /* abr_copy with different shapes */
#define ABR_ERR_CASTING (-83)           /* the dtypes differ and the call's casting rule refuses the cast */
#define ABR_ERR_DLPACK_VERSION (-90)    /* major version is not 1: only the deleter is safe */
#define ABR_ERR_DLPACK_NDIM (-91)       /* ndim < 0 or > ABR_MAX_NDIM */
#define ABR_ERR_DLPACK_SHAPE (-92)      /* shape NULL with ndim > 0, or a negative extent */
#define ABR_ERR_DLPACK_STRIDES (-93)    /* strides that cannot be honoured (e.g. a zero-stride destination) */
#define ABR_ERR_DLPACK_OVERFLOW (-94)   /* element, byte or address arithmetic overflows 64 bits */
#define ABR_ERR_DLPACK_DATA (-95)       /* NULL data with elements; an OpenCL cl_mem not a buffer or too small */
#define ABR_ERR_DLPACK_DTYPE (-96)      /* unknown code, or bits/lanes that do not fit the code */
#define ABR_ERR_DLPACK_DEVICE (-97)     /* unknown device type, or a bad device id */
#define ABR_ERR_DLPACK_FLAGS (-98)      /* flag bits this library does not understand */

/* Largest ndim accepted (NumPy's limit). */
#define ABR_MAX_NDIM 64

/* Static name of a status ("ABR_ERR_DLPACK_SHAPE"); "ABR_UNKNOWN_STATUS" otherwise. */
ABR_API const char* abr_status_string(abr_status status);
/* Message of the calling thread's last failed call; "" if none. Never NULL. */
ABR_API const char* abr_last_error(void);
/* Status of the calling thread's last failed call; ABR_OK if none. */
ABR_API abr_status abr_last_error_status(void);
/* The native code behind the calling thread's last error when a backend call
 * failed (a CUresult, or an OpenCL cl_int), else 0, so callers can branch on it. */
ABR_API int64_t abr_last_error_backend_code(void);
/* Forget the calling thread's last error. */
ABR_API void abr_clear_error(void);

/* ------------------------------------------------------------------ logging */

typedef enum abr_log_level {
  ABR_LOG_TRACE = 0,
  ABR_LOG_DEBUG = 1,
  ABR_LOG_INFO = 2,
  ABR_LOG_WARN = 3,
  ABR_LOG_ERROR = 4,
  ABR_LOG_OFF = 6,
  ABR_LOG_LEVEL_MAX_ENUM = 0x7FFFFFFF
} abr_log_level;

/* Called for each log record at or above the level, from any thread; must not unwind. */
typedef void (*abr_log_callback)(abr_log_level level, const char* message, void* user_data);

/* Process-wide. The initial level comes from ARRAYBRIDGE_LOG_LEVEL (trace, debug,
 * info, warn, error, off), default warn; records go to stderr, never stdout. */
ABR_API abr_status abr_log_set_level(abr_log_level level);
ABR_API abr_log_level abr_log_get_level(void);
/* Route records to `callback` instead of stderr; NULL restores stderr. */
ABR_API abr_status abr_log_set_callback(abr_log_callback callback, void* user_data);

/* ------------------------------------------------------------------ runtime */

typedef struct abr_runtime abr_runtime;
typedef struct abr_stream abr_stream;
typedef struct abr_event abr_event;

#define ABR_RUNTIME_OPTIONS_VERSION 1u

/* abr_runtime_options.flags */
#define ABR_RUNTIME_DISABLE_CUDA (1u << 0)
#define ABR_RUNTIME_DISABLE_OPENCL (1u << 1)

typedef struct abr_runtime_options {
  uint32_t version; /* the caller's ABR_RUNTIME_OPTIONS_VERSION */
  uint32_t flags;   /* ABR_RUNTIME_DISABLE_* */
} abr_runtime_options;
#define ABR_RUNTIME_OPTIONS_INIT {ABR_RUNTIME_OPTIONS_VERSION, 0}

/* Every abr_X_init zeroes the fields `version` has (defaults) and sets it. */
ABR_API abr_status abr_runtime_options_init(abr_runtime_options* options, unsigned int version);
/* options may be NULL (defaults). Thread-safe: one runtime may serve many threads.
 * Drivers do not survive fork: in a child forked after this call, a transfer, stream
 * or IPC call that would reach a device backend fails with ABR_ERR_BACKEND_UNAVAILABLE
 * (host memory still works), and abr_pool_trim, abr_runtime_destroy and the deleters
 * of inherited CUDA tensors leave the parent's driver state alone: the pool's and the
 * device caches' statistics are zeros there, and setting their limits is refused. A stream or
 * event made before the fork is refused in the child the same way (unless its work
 * was complete when recorded); its destroy or release lets it go without a driver
 * call. A runtime created in a child whose parent opened drivers opens no device
 * backend (abr_backend_info says why): create runtimes in the parent, or spawn. */
ABR_API abr_status abr_runtime_create(const abr_runtime_options* options, abr_runtime** out);
/* Accepts NULL. Tensors it exported stay valid and may be deleted afterwards. */
ABR_API void abr_runtime_destroy(abr_runtime* runtime);

/* ------------------------------------------------------------------ devices */

typedef enum abr_backend {
  ABR_BACKEND_HOST = 1,
  ABR_BACKEND_CUDA = 2,
  ABR_BACKEND_OPENCL = 3,
  ABR_BACKEND_MAX_ENUM = 0x7FFFFFFF
} abr_backend;

/* abr_device_info.flags */
#define ABR_DEVICE_SHARES_HOST_MEMORY (1u << 0) /* host pointers can be used in place */
#define ABR_DEVICE_LOST_FLAG (1u << 1)          /* a sticky error: every call on it fails */
#define ABR_DEVICE_NO_DOUBLE_PRECISION (1u << 2) /* its kernels have no float64 (OpenCL without cl_khr_fp64): a
                                                    cast to or from float64 or complex128 its kernels would do
                                                    (within its memory) is ABR_ERR_UNSUPPORTED */

#define ABR_DEVICE_INFO_VERSION 1u
#define ABR_BACKEND_INFO_VERSION 1u

/* A struct tag with no typedef, so the function can carry the design's fixed name. */
struct abr_device_info {
  uint32_t version;       /* set by the caller: ABR_DEVICE_INFO_VERSION */
  abr_backend backend;
  DLDevice device;        /* what to pass as a transfer's destination */
  uint32_t flags;         /* ABR_DEVICE_* */
  uint32_t reserved_;
  uint64_t memory_bytes;  /* global memory; 0 if unknown */
  char name[128];
  char platform[128];     /* OpenCL platform, CUDA driver version, or "host" */
};
#define ABR_DEVICE_INFO_INIT {ABR_DEVICE_INFO_VERSION, (abr_backend)0, {(DLDeviceType)0, 0}, 0, 0, 0, {0}, {0}}

struct abr_backend_info {
  uint32_t version;       /* set by the caller: ABR_BACKEND_INFO_VERSION */
  abr_backend backend;
  int32_t available;      /* 1 if loaded and usable */
  int32_t device_count;
  char detail[256];       /* library and version, or why it is unavailable */
};
#define ABR_BACKEND_INFO_INIT {ABR_BACKEND_INFO_VERSION, (abr_backend)0, 0, 0, {0}}

/* Devices of every usable backend, the CPU first, at stable indices. */
ABR_API abr_status abr_device_count(abr_runtime* runtime, int32_t* count);
#if defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow" /* the function hides the struct's name, by design */
#endif
/* abr_device_info fills `info` (its version set) for the device at `index` (0 to the
 * count minus 1). abr_backend_info says whether a backend loaded, how many devices
 * it has, and in `detail` its library and version or why it is unavailable (for a
 * backend this build left out or the options disabled too). The _init functions
 * prepare the structs as every abr_X_init does. */
ABR_API abr_status abr_device_info(abr_runtime* runtime, int32_t index, struct abr_device_info* info);
ABR_API abr_status abr_backend_info(abr_runtime* runtime, abr_backend backend, struct abr_backend_info* info);
ABR_API abr_status abr_device_info_init(struct abr_device_info* info, unsigned int version);
ABR_API abr_status abr_backend_info_init(struct abr_backend_info* info, unsigned int version);
#if defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/* ---------------------------------------------------------------- transfers */

typedef enum abr_copy_mode {
  ABR_COPY_IF_NEEDED = 0, /* view when possible, copy otherwise */
  ABR_COPY_ALWAYS = 1,    /* always a new, exclusively owned buffer */
  ABR_COPY_NEVER = 2,     /* a view or ABR_ERR_COPY_REQUIRED */
  ABR_COPY_MODE_MAX_ENUM = 0x7FFFFFFF
} abr_copy_mode;

/* Which casts a transfer may make (abr_transfer_options.casting), named as NumPy's
 * casting= is. Kinds rank bool < unsigned < signed < float (bfloat16 too) < complex. */
typedef enum abr_casting {
  ABR_CASTING_DEFAULT = 0,   /* the call's own: SAME_KIND for abr_copy and abr_copy_many (NumPy's copyto),
                                UNSAFE for abr_to_device's options.dtype (NumPy's astype) */
  ABR_CASTING_NO = 1,        /* no cast: the dtypes must be the same */
  ABR_CASTING_SAFE = 2,      /* only a dtype that holds every value of the source's (int16 to float32, not
                                float64 to float32, nor int64 to float64, which NumPy counts as safe) */
  ABR_CASTING_SAME_KIND = 3, /* SAFE, and to a narrower dtype of the same or a higher kind (float64 to float32,
                                int64 to int8): never complex to real, float to integer, signed to unsigned,
                                or anything but bool to bool */
  ABR_CASTING_UNSAFE = 4,    /* any cast the runtime has */
  ABR_CASTING_MAX_ENUM = 0x7FFFFFFF
} abr_casting;

/* abr_transfer_options.flags */
#define ABR_TRANSFER_NO_HOST_STAGING (1u << 0)     /* refuse paths that stage through host memory */
#define ABR_TRANSFER_REQUIRE_CONTIGUOUS (1u << 1)  /* a view must be compact row-major, else copy */
#define ABR_TRANSFER_NO_NEGATIVE_STRIDES (1u << 2) /* a view must have no negative stride (PyTorch cannot hold one), \
                                                      else compact copy */

/* Which path the planner chose. */
typedef enum abr_path {
  ABR_PATH_NONE = 0,
  ABR_PATH_ZERO_COPY = 1,      /* the result is a view of the source */
  ABR_PATH_HOST_COPY = 2,      /* host to host copy (pack and/or cast) */
  ABR_PATH_DEVICE_COPY = 3,    /* one copy inside a device or context */
  ABR_PATH_HOST_TO_DEVICE = 4,
  ABR_PATH_DEVICE_TO_HOST = 5,
  ABR_PATH_STAGED = 6,         /* in chunks through pinned host blocks (pageable host <-> CUDA,
                                  OpenCL contexts, CUDA <-> OpenCL) */
  ABR_PATH_PEER = 7,           /* device to device across devices */
  ABR_PATH_HOST_WRAP = 8,      /* host memory wrapped for a device that shares it */
  ABR_PATH_MAX_ENUM = 0x7FFFFFFF
} abr_path;

/* abr_transfer_report.flags */
#define ABR_REPORT_PACKED (1u << 0) /* a strided source was packed */
#define ABR_REPORT_CAST (1u << 1)   /* the dtype was converted */

#define ABR_TRANSFER_REPORT_VERSION 1u

typedef struct abr_transfer_report {
  uint32_t version;      /* set by the caller: ABR_TRANSFER_REPORT_VERSION */
  abr_path path;
  uint32_t flags;        /* ABR_REPORT_* */
  uint32_t reserved_;
  uint64_t bytes_moved;  /* bytes written to the destination, counted once */
  char detail[160];      /* one line saying what ran and why */
} abr_transfer_report;
#define ABR_TRANSFER_REPORT_INIT {ABR_TRANSFER_REPORT_VERSION, ABR_PATH_NONE, 0, 0, 0, {0}}

#define ABR_TRANSFER_OPTIONS_VERSION 2u /* 2 added `casting` */

typedef struct abr_transfer_options {
  uint32_t version;            /* the caller's ABR_TRANSFER_OPTIONS_VERSION */
  abr_copy_mode copy;          /* abr_to_device only */
  uint32_t flags;              /* ABR_TRANSFER_* */
  DLDataType dtype;            /* abr_to_device only: target dtype; all zero = keep the source's */
  abr_transfer_report* report; /* optional, its version set: filled on success */
  abr_casting casting;         /* version 2: which casts are allowed; a refused one is ABR_ERR_CASTING */
} abr_transfer_options;
/* A cast (options.dtype, or abr_copy into a destination of another dtype) the casting
 * rule allows converts each element as C and NumPy's astype do, exact only where the new
 * dtype holds every value: integers wrap modulo 2^bits, floats to integers saturate (NaN
 * to 0), complex to real keeps the real part, anything to bool is x != 0. */
#define ABR_TRANSFER_OPTIONS_INIT \
  {ABR_TRANSFER_OPTIONS_VERSION, ABR_COPY_IF_NEEDED, 0, {0, 0, 0}, NULL, ABR_CASTING_DEFAULT}

/* Prepare the structs for a caller built against `version` (as every abr_X_init does). */
ABR_API abr_status abr_transfer_options_init(abr_transfer_options* options, unsigned int version);
ABR_API abr_status abr_transfer_report_init(abr_transfer_report* report, unsigned int version);

/* Static name of a path ("zero_copy", "host_copy", ...). */
ABR_API const char* abr_path_string(abr_path path);

/*
 * The names of devices and dtypes, one vocabulary for every binding. Parsing
 * ignores case and leading and trailing blanks ("CUDA:1 " is cuda:1, "cuda : 1" no
 * name); a bad name is ABR_ERR_INVALID_ARGUMENT naming it.
 * Formatting writes a NUL-terminated name into out[size] (ABR_NAME_MAX always
 * fits) and fails with ABR_ERR_INVALID_ARGUMENT, writing nothing, when it does not fit.
 *   devices: "cpu", "cuda:N", "cuda_host", "cuda_managed", "opencl:N" ("cuda" = "cuda:0");
 *            types without a name format (and parse) as "dlpack_device_T:N". One
 *            grammar both ways: what format writes, parse reads back to the same
 *            DLDevice, so format refuses (ABR_ERR_INVALID_ARGUMENT) a negative type
 *            or id and an id other than 0 on cpu, cuda_host or cuda_managed.
 *   dtypes:  "float32", "int8", "uint64", "bool", "bfloat16", "complex64",
 *            "float8_e4m3fn", ..., with lanes "float32x4"; codes without a name
 *            format (and parse) as "dlpack_dtype_C_B". One grammar both ways too:
 *            format refuses a dtype whose name would not parse back (bits or lanes 0).
 *            Parsing checks only the spelling.
 */
#define ABR_NAME_MAX 64
ABR_API abr_status abr_device_parse(const char* text, DLDevice* out);
ABR_API abr_status abr_device_format(DLDevice device, char* out, size_t size);
ABR_API abr_status abr_dtype_parse(const char* text, DLDataType* out);
ABR_API abr_status abr_dtype_format(DLDataType dtype, char* out, size_t size);

/*
 * The device kinds this library knows, the CPU first, then each backend's, whether
 * or not the backend is usable here (abr_backend_info says that): what a binding
 * needs to name devices and backends without a list of its own. `index` runs from
 * 0 to the count minus 1; another index is ABR_ERR_INVALID_ARGUMENT.
 */
#define ABR_DEVICE_KIND_VERSION 1u
/* abr_device_kind.flags */
#define ABR_KIND_NUMBERED (1u << 0)    /* devices are told apart by id: "cuda:1"; else the id is 0 */
#define ABR_KIND_HOST_MEMORY (1u << 1) /* the host reads and writes its memory in place */
#define ABR_KIND_NEW_TENSORS (1u << 2) /* abr_to_device can put a new tensor there */
#define ABR_KIND_ADDRESSES (1u << 3)   /* DLTensor.data is an address; else a handle (a cl_mem) */
/* Which queue orders its work, for a binding that picks one (non_blocking, stream=):
 * QUEUED: abr_stream_create makes a queue there; without it, work there is synchronous.
 * DLPACK_STREAMS: DLPack's stream= values are its native streams (abr_stream_wrap takes
 * them), default_stream the value of its default one. A transfer's work goes on the
 * side with DLPack streams, else the queued side, the destination when both are alike. */
#define ABR_KIND_QUEUED (1u << 4)
#define ABR_KIND_DLPACK_STREAMS (1u << 5)

typedef struct abr_device_kind {
  uint32_t version;       /* set by the caller: ABR_DEVICE_KIND_VERSION */
  DLDeviceType type;
  abr_backend backend;    /* who serves it; ABR_BACKEND_HOST for the CPU */
  uint32_t flags;         /* ABR_KIND_* */
  uint32_t disable_flag;  /* the abr_runtime_options.flags bit that leaves its backend out; 0: none */
  uint32_t default_stream; /* with ABR_KIND_DLPACK_STREAMS: its default stream's DLPack value (CUDA: 1) */
  char name[32];          /* "cuda": devices are "cuda:N" when NUMBERED */
  char backend_name[32];  /* "cuda"; "host" for the CPU */
  char disable_env[64];   /* "ARRAYBRIDGE_DISABLE_CUDA": the variable the Python package reads; "" for none */
} abr_device_kind;
#define ABR_DEVICE_KIND_INIT {ABR_DEVICE_KIND_VERSION, (DLDeviceType)0, (abr_backend)0, 0, 0, 0, {0}, {0}, {0}}

/* abr_device_kind_count gives how many kinds this library knows (the CPU's and
 * every backend's, built in or plugged in), abr_device_kind_get the one at `index`
 * into `kind` (its version set, or prepared by abr_device_kind_init). */
ABR_API abr_status abr_device_kind_init(abr_device_kind* kind, unsigned int version);
ABR_API abr_status abr_device_kind_count(int32_t* count);
ABR_API abr_status abr_device_kind_get(int32_t index, abr_device_kind* kind);

/*
 * OpenCL tensors (kDLOpenCL), here as in what the library returns: DLTensor.data is
 * a cl_mem, not an address, and must be a buffer (CL_MEM_OBJECT_BUFFER) in a
 * cl_context (the library's or the caller's) that holds the tensor's device;
 * byte_offset counts bytes into that buffer, and the view must lie inside it. A
 * context without that device is ABR_ERR_DLPACK_DEVICE. An image or pipe, or a
 * view past the buffer's end, is refused with ABR_ERR_DLPACK_DATA before anything
 * moves; a handle the driver rejects is ABR_ERR_BACKEND. A pointer that is not a cl_mem at all cannot be told apart: it
 * is handed to the driver's clGetMemObjectInfo, and what happens then (a crash,
 * garbage, an error) is undefined behaviour of the driver.
 */

/*
 * Move `src` to device `dst`.
 * On ABR_OK the runtime owns `src` and calls its deleter exactly once, when it no
 * longer needs it (after the copy completed, or once *out is deleted if *out is a
 * view of src: for OpenCL's view of host memory later, on the driver's thread,
 * when the driver lets go of the buffer). Until then `src` itself must stay valid,
 * even with a NULL deleter. On any error `src` is untouched and still the caller's (for
 * ABR_ERR_DLPACK_VERSION, calling its deleter is the only safe thing left to do).
 * *out is a versioned tensor on `dst`; the caller calls its deleter exactly once.
 * A view on src's own device of a src that already has strides, no byte_offset and
 * no IS_COPIED is src itself (no allocation); any other result is a new tensor. IS_COPIED is set when data was copied; READ_ONLY survives a view. A copy
 * is compact row-major. options may be NULL (defaults). stream NULL: synchronous;
 * otherwise the result is valid in that stream's order (a new CPU tensor over 64 KiB
 * from a CUDA device, on a stream of that device, is then made in page-locked memory
 * from the pinned pool, so that one queued DMA fills it, as torch's non_blocking
 * copies do: an ordinary kDLCPU tensor whose memory goes back to the pool after the
 * device's queued work once it is deleted; such results take at most half the
 * pool's limit, the rest staying for staging). A source in host memory
 * may be read by the host during the call (to pack or convert it), not in the
 * stream's order: work on the stream that still writes it is waited for first, by
 * the caller (abr_event_synchronize). A transfer to the
 * source's own device with ABR_COPY_IF_NEEDED or _NEVER, no dtype and neither
 * ABR_TRANSFER_REQUIRE_CONTIGUOUS nor ABR_TRANSFER_NO_NEGATIVE_STRIDES (for a
 * source that has what they refuse) is always a view: no data moves.
 */
ABR_API abr_status abr_to_device(abr_runtime* runtime, DLManagedTensorVersioned* src, DLDevice dst,
                                 const abr_transfer_options* options, abr_stream* stream,
                                 DLManagedTensorVersioned** out);

/* The same for a legacy source. The result is versioned. */
ABR_API abr_status abr_to_device_legacy(abr_runtime* runtime, DLManagedTensor* src, DLDevice dst,
                                        const abr_transfer_options* options, abr_stream* stream,
                                        DLManagedTensorVersioned** out);

/* Many tensors to one device in one call, with one set of options and one stream
 * (which may be NULL, as for abr_to_device). Each source gets the result
 * abr_to_device would give it, at a fraction of the cost per tensor: the device
 * and options are resolved once, and small copies from host memory to a device or
 * into new CPU memory (up to 64 KiB each, 16 MiB in all) are coalesced: packed into
 * one block (pinned memory for a device reached by DMA) and moved with one copy, their
 * results compact views of one allocation that is freed when the last of them is
 * deleted; small reads from a device reached by DMA into new CPU memory likewise
 * get slots of one host block (on a stream of one CUDA device, a block of the pinned
 * pool's page-locked memory that the queued reads fill directly, within the half of
 * the pool results may take, as single results over 64 KiB are). Larger copies of compact bytes (no cast) between
 * pageable host memory and a device reached by DMA (CUDA) move through one
 * pipeline per device and way as if one tensor, when at least two make two of its
 * chunks ("N streamed through one pipeline" in the report's detail; a failure there
 * names the pipeline's first: "srcs[3] and 4 other(s) streamed through one pipeline:
 * ..."). Where the pinned pool has no room for a pipeline, its tensors move one by
 * one as abr_to_device would move them ("N moved one by one").
 * Other tensors and views go their own way, on the same stream.
 * On ABR_OK every source is consumed as abr_to_device consumes it and out[i] is
 * srcs[i]'s result. On failure no source is consumed, every out[i] is NULL, and
 * the message names the index of the first source that failed ("srcs[3]: ..."). A
 * count over 2^24 is ABR_ERR_INVALID_ARGUMENT, and leaves out as it was.
 * A source listed twice is ABR_ERR_INVALID_ARGUMENT. options->report is not
 * written: `report` (may be NULL) describes the batch. */
#define ABR_BATCH_REPORT_VERSION 3u
typedef struct abr_batch_report {
  uint32_t version;      /* set by the caller: ABR_BATCH_REPORT_VERSION */
  uint32_t tensors;      /* sources in the call */
  uint32_t coalesced;    /* of them, moved together through one block */
  uint32_t views;        /* of them, results that alias their source (nothing moved) */
  uint32_t copies;       /* copies issued: one for the coalesced block, one per other copied tensor (small reads
                            of tensors side by side in one device allocation share one) */
  uint32_t reserved_;
  uint64_t bytes_moved;  /* bytes written to the results, counted once */
  char detail[160];      /* one line: what moved how */
  /* Version 2. NULL, or the caller's array of one entry per source (pair), which a
   * call that succeeds fills with each result's path: a result of ABR_PATH_ZERO_COPY
   * or ABR_PATH_HOST_WRAP is its source's memory (a write into one is a write into
   * the other). Left as it was when the call fails. */
  abr_path* paths;
  /* Version 3. NULL, or the caller's array of one entry per source (pair), filled as
   * `paths` is with the flags each result's own abr_transfer_report would have
   * (ABR_REPORT_PACKED: a strided source packed; ABR_REPORT_CAST: the dtype cast). */
  uint32_t* result_flags;
} abr_batch_report;
#define ABR_BATCH_REPORT_INIT {ABR_BATCH_REPORT_VERSION, 0, 0, 0, 0, 0, 0, {0}, NULL, NULL}
ABR_API abr_status abr_batch_report_init(abr_batch_report* report, unsigned int version);
ABR_API abr_status abr_to_device_many(abr_runtime* runtime, DLManagedTensorVersioned* const* srcs, size_t count,
                                      DLDevice dst, const abr_transfer_options* options, abr_stream* stream,
                                      DLManagedTensorVersioned** out, abr_batch_report* report);

/* abr_copy of each pair srcs[i] -> dsts[i], in order, on one stream, with one set
 * of options (its report is not written: `report`, which may be NULL, describes
 * the call). Every pair is validated and planned before anything moves, so a bad
 * pair moves nothing ("pair 3: ..."). The moves of consecutive pairs on one device
 * context share one submission: without a stream they are waited for once, when
 * the next pair is elsewhere or the call ends (reads and writes are not waited for
 * one by one). Pageable pairs over 64 KiB between host memory and a device, one
 * way, whose memory no other pair reads or writes, move first as one transfer
 * through one pipeline per device and way, as abr_to_device_many's do (the detail
 * says how many). Overlaps are seen by address: memory mapped at two addresses is
 * the caller's to order. Every pair sees the
 * results of the pairs before it. A driver failure mid-way leaves some
 * destinations written: the earlier pairs', and those that moved first. */
ABR_API abr_status abr_copy_many(abr_runtime* runtime, const DLTensor* const* srcs, const DLTensor* const* dsts,
                                 size_t count, const abr_transfer_options* options, abr_stream* stream,
                                 abr_batch_report* report);

/* Copy into an existing tensor. Both are borrowed; any strides; same shape. A dtype
 * difference is converted where options.casting allows it (by default within a kind or
 * up, as NumPy's copyto: complex into float64 is ABR_ERR_CASTING). Overlapping src and dst are handled as if through a
 * temporary, in host memory (OpenCL buffers made over host memory, host wraps, included) and within one device
 * allocation (CUDA pointers into one allocation; OpenCL sub-buffers of one buffer, and the buffer itself); host
 * memory and a device buffer over the same bytes are ABR_ERR_UNSUPPORTED. The destination must not have
 * zero strides on extents > 1.
 * options may be NULL; of them abr_copy uses the flags (ABR_TRANSFER_NO_HOST_STAGING
 * refuses a path through host memory; ABR_TRANSFER_REQUIRE_CONTIGUOUS refuses a
 * destination that is not compact row-major), the casting and the report; `copy` must be
 * ABR_COPY_IF_NEEDED and `dtype` zero (the destination decides). */
ABR_API abr_status abr_copy(abr_runtime* runtime, const DLTensor* src, const DLTensor* dst,
                            const abr_transfer_options* options, abr_stream* stream);

/* Like abr_copy, and refuses a READ_ONLY destination or a major version other than 1. */
ABR_API abr_status abr_copy_versioned(abr_runtime* runtime, const DLManagedTensorVersioned* src,
                                      const DLManagedTensorVersioned* dst, const abr_transfer_options* options,
                                      abr_stream* stream);

/* Re-wrap a versioned tensor as a legacy one for consumers that only speak the old
 * protocol. On ABR_OK *out owns `src` (its deleter deletes src). A READ_ONLY tensor
 * is refused with ABR_ERR_READ_ONLY: the legacy form cannot say it is read-only. */
ABR_API abr_status abr_tensor_to_legacy(DLManagedTensorVersioned* src, DLManagedTensor** out);

/* ------------------------------------------------------------------ streams */

/* An ordered queue of work on one device: a cudaStream_t or cl_command_queue, or
 * an inline stream on the CPU (work there completes before the call returns). */
ABR_API abr_status abr_stream_create(abr_runtime* runtime, DLDevice device, abr_stream** out);
/* Borrow a caller's native stream (cudaStream_t or an in-order cl_command_queue);
 * the caller keeps ownership (the runtime holds a reference while wrapped). An
 * OpenCL queue may belong to the caller's own cl_context; work whose memory lives in
 * another context (a new tensor, made in the runtime's) cannot be queued on it, since
 * OpenCL orders nothing across contexts: the call then waits on the host for the work
 * already queued there, and runs its own after (a queue held by a user event the
 * caller sets later blocks that call: set it first, or pass buffers of its context). */
ABR_API abr_status abr_stream_wrap(abr_runtime* runtime, DLDevice device, void* native, abr_stream** out);
/* Block until all work submitted to the stream has completed. */
ABR_API abr_status abr_stream_synchronize(abr_stream* stream);
/* Work submitted to `stream` after this call starts only after the work submitted
 * to `other` before it has completed: an event wait on the device when both share
 * a context, otherwise `other` is synchronized on the host. The host does not
 * block in the first case. */
ABR_API abr_status abr_stream_wait(abr_stream* stream, abr_stream* other);
/* Accepts NULL. Waits for the stream's pending work first, then releases the
 * sources it kept alive. A stream may outlive its runtime. */
ABR_API void abr_stream_destroy(abr_stream* stream);
/* Accepts NULL. Lets go of the stream without waiting: its queued work goes on,
 * and the sources it keeps alive are released once that work has completed
 * (checked on the runtime's later calls, and by abr_event_query and
 * abr_event_synchronize once an event of that runtime's streams is complete;
 * abr_runtime_destroy waits for the rest).
 * A wrapped native stream stays its owner's, who keeps it alive until that work
 * has completed (abr_event_record before this call says when). After the runtime
 * is destroyed this waits, as abr_stream_destroy does. */
ABR_API void abr_stream_release(abr_stream* stream);

/* A point in a stream's order: complete once the work submitted to the stream
 * before abr_event_record has completed. An event outlives its stream; on the
 * CPU's inline stream it is complete when recorded. */
ABR_API abr_status abr_event_record(abr_stream* stream, abr_event** out);
/* Never blocks: ABR_OK when the work is complete, ABR_NOT_READY while it runs,
 * and the work's failure once it has failed (ABR_ERR_DEVICE_LOST after a CUDA
 * sticky error, ABR_ERR_BACKEND for a failed OpenCL command), as
 * abr_event_synchronize returns it: a failed event never reads as done. Once it is
 * complete, what released streams of the runtime kept for completed work is
 * released here (see abr_stream_release), as it is by abr_event_synchronize. */
ABR_API abr_status abr_event_query(abr_event* event);
/* Blocks until the work is complete; its failure, if any, is the status. */
ABR_API abr_status abr_event_synchronize(abr_event* event);
/* Work submitted to `stream` after this call starts after the event's work: a wait
 * on the device when both are CUDA, or OpenCL in one context; otherwise the host
 * waits for the event here. */
ABR_API abr_status abr_stream_wait_event(abr_stream* stream, abr_event* event);
/* Accepts NULL; never waits. */
ABR_API void abr_event_destroy(abr_event* event);

/* ------------------------------------------------------------- pinned pool */

/* The runtime's cache of pinned (page-locked or device-mapped) host memory,
 * used to stage transfers. Returned blocks are kept for reuse and given out
 * again only once every stream that used them has finished with them. */
#define ABR_POOL_STATS_VERSION 1u

typedef struct abr_pool_stats {
  uint32_t version;           /* set by the caller: ABR_POOL_STATS_VERSION */
  uint32_t reserved_;
  uint64_t bytes_pinned;      /* held from the drivers now */
  uint64_t bytes_in_use;      /* lent to transfers */
  uint64_t bytes_cached;      /* free for reuse */
  uint64_t bytes_waiting;     /* of the cached bytes, those a stream may still be reading */
  uint64_t peak_bytes_pinned;
  uint64_t limit_bytes;       /* the most it will pin (default: a quarter of physical memory) */
  uint64_t blocks_pinned;
  uint64_t hits;              /* requests served from the cache */
  uint64_t misses;            /* requests that pinned a new block */
} abr_pool_stats;
#define ABR_POOL_STATS_INIT {ABR_POOL_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* abr_pool_get_stats fills `stats` (its version set, or prepared by abr_pool_stats_init). */
ABR_API abr_status abr_pool_stats_init(abr_pool_stats* stats, unsigned int version);

ABR_API abr_status abr_pool_get_stats(abr_runtime* runtime, abr_pool_stats* stats);
/* Frees every cached block no stream is using, once the blocks (and device memory)
   of tensors deleted so far are back; released_bytes (may be NULL) counts them.
   The few small host buffers kept process-wide for reuse (at most about 1 MiB)
   are freed too, uncounted. */
ABR_API abr_status abr_pool_trim(abr_runtime* runtime, uint64_t* released_bytes);
/* A limit below what is pinned frees cached blocks at once; blocks in use stay
 * until returned, and new blocks are refused (ABR_ERR_OUT_OF_MEMORY) until the
 * total fits; returned blocks a stream still reads are waited for first. 0
 * restores the default. */
ABR_API abr_status abr_pool_set_limit(abr_runtime* runtime, uint64_t limit_bytes);

/* ------------------------------------------------------------- device cache */

/* CUDA memory the runtime hands out (to_device results, exports) comes from a
 * cache: a deleted tensor's memory, once every device has finished the work
 * queued before the deletion, waits there for the next tensor of its size class
 * (the pinned pool's classes) instead of going back with cuMemFree, so a tensor
 * of a size seen before costs no cuMemAlloc. Its statistics reuse abr_pool_stats:
 * bytes_pinned is the device memory held from the driver (lent + cached),
 * bytes_waiting is 0 (a deleted tensor's memory counts as in use until it is
 * back), limit_bytes the most kept cached (default 1 GiB). abr_pool_trim frees
 * it too, and an allocation the driver refuses frees it and tries again. A
 * backend without a cache (OpenCL) adds zeros. */
ABR_API abr_status abr_device_cache_get_stats(abr_runtime* runtime, abr_pool_stats* stats);
/* A limit below what is cached frees cached blocks at once; 0 restores the default. */
ABR_API abr_status abr_device_cache_set_limit(abr_runtime* runtime, uint64_t limit_bytes);

/* How staged transfers (ABR_PATH_STAGED) planned from now on are cut: host threads
 * per chunk (1..256) and chunk size in bytes (64 KiB..1 GiB); 0 keeps the default
 * for either, which ARRAYBRIDGE_STAGING_THREADS and ARRAYBRIDGE_STAGING_CHUNK_MIB
 * override (default: one thread per core up to 16; 2 MiB of chunk per thread, at
 * least 8 chunks where the bytes allow, 8 to 64 MiB). A value set here wins over
 * the environment. Each transfer's report states the shape it ran with. */
ABR_API abr_status abr_runtime_set_staging(abr_runtime* runtime, uint32_t threads, uint64_t chunk_bytes);

/* ------------------------------------------------------------------ CUDA IPC */

/*
 * A CUDA tensor shared with another process on this machine (CUDA IPC), as a
 * handle of plain bytes: copy it, send its first `size` bytes over a pipe or
 * socket, store it.
 *
 * abr_ipc_export: `tensor` is CUDA device memory allocated with cuMemAlloc, or a
 * view into such an allocation (arraybridge's own tensors are); memory from a
 * stream-ordered pool (cuMemAllocAsync) cannot be shared this way and is refused
 * naming why. The importer waits for the work queued on `stream` before the
 * export (NULL: on the legacy default stream, which follows every blocking
 * stream). Host memory and OpenCL have no CUDA IPC: ABR_ERR_UNSUPPORTED. The
 * handle names the exporter by its pid and its start time, read from
 * /proc/self/stat: without /proc, export fails with ABR_ERR_UNSUPPORTED.
 *
 * abr_ipc_import, in another process: *out is a zero-copy tensor on the same
 * memory, on this process's number for the same GPU, whose deleter closes the
 * mapping once the work this process queued is done. With `stream`, work queued on
 * it runs after the exporter's; with NULL the call waits for that work. Importing
 * a handle twice gives two tensors on one mapping. In the exporting process itself
 * the result is a view of the memory after the device's queued work. The result is
 * writable: a DLTensor carries no READ_ONLY flag to pass on.
 *
 * Before it asks the driver anything, abr_ipc_import checks the handle and refuses
 * it with ABR_ERR_INVALID_ARGUMENT, naming why: bytes that are no handle, or are
 * damaged (cut short or changed on the way: a checksum covers them); a handle
 * written by a newer arraybridge's handle format (both versions named); a view
 * outside its allocation; an exporting process that has exited. The exporter is
 * known by its pid and its start time, so a handle whose exporter exited is refused
 * even when its pid now names another process (an importer that cannot see the
 * exporter in /proc, such as one in another pid namespace, takes it for exited).
 *
 * Lifetime: the exporter keeps the tensor, and the runtime that exported it, alive
 * until every importer has deleted its tensor. CUDA does not count importers, and
 * memory freed while another process maps it is undefined behaviour there.
 */
#define ABR_IPC_HANDLE_VERSION 1u
#define ABR_IPC_HANDLE_BYTES 1528u

typedef struct abr_ipc_handle {
  uint32_t version;  /* set by the caller: ABR_IPC_HANDLE_VERSION */
  uint32_t size;     /* bytes of data in use, written by abr_ipc_export */
  unsigned char data[ABR_IPC_HANDLE_BYTES];
} abr_ipc_handle;
#define ABR_IPC_HANDLE_INIT {ABR_IPC_HANDLE_VERSION, 0, {0}}

/* abr_ipc_handle_init prepares a handle for abr_ipc_export (as every abr_X_init does). */
ABR_API abr_status abr_ipc_handle_init(abr_ipc_handle* handle, unsigned int version);
ABR_API abr_status abr_ipc_export(abr_runtime* runtime, const DLTensor* tensor, abr_stream* stream,
                                  abr_ipc_handle* handle);
ABR_API abr_status abr_ipc_import(abr_runtime* runtime, const abr_ipc_handle* handle, abr_stream* stream,
                                  DLManagedTensorVersioned** out);

#ifdef __cplusplus
}
#endif
#endif /* ARRAYBRIDGE_ARRAYBRIDGE_H */

/*
 * DLPack 1.3 declarations, written from the DLPack specification (dlpack.h v1.3).
 *
 * Debian packages only DLPack 0.6, which lacks the versioned structures, so the
 * project declares 1.x itself. The layout is identical to the upstream header
 * (checked by static asserts in tests/abi), and the include guard is the
 * upstream one, so a program may include either header first.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3

#ifdef _WIN32
#ifdef DLPACK_EXPORTS
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL __declspec(dllimport)
#endif
#else
#define DLPACK_DLL
#endif

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of a managed tensor's layout. A different major means a different layout. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U
} DLDataTypeCode;

/* code is a DLDataTypeCode; bits per lane; lanes per element. */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/* A plain tensor view. strides count elements; NULL strides means compact row-major. */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/* Legacy (pre-1.0) managed tensor. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* Versioned managed tensor (DLPack >= 1.0). Fields up to flags are stable across majors. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* The C exchange API (DLPack 1.3): a framework's tensor type carries
 * __dlpack_c_exchange_api__, a capsule named "dlpack_exchange_api" holding a
 * DLPackExchangeAPI* that lives as long as the process. Every function returns 0
 * on success and -1 with a Python exception set; none synchronizes streams (a
 * consumer asks current_work_stream and orders its work after that stream). The
 * py_object arguments are PyObject* of the type the API came from. */

/* A new tensor like `prototype` (its dtype, ndim, shape and device only). On
 * failure SetError(error_ctx, kind, message) is called and -1 returned. */
typedef int (*DLPackManagedTensorAllocator)(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                                            void (*SetError)(void* error_ctx, const char* kind, const char* message));
/* An owning tensor viewing py_object's data (what __dlpack__ gives, without the call). */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void* py_object, DLManagedTensorVersioned** out);
/* A non-owning view, valid until control returns to the producer. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void* py_object, DLTensor* out);
/* The producer's current work stream on a device (NULL for the CPU). */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id, void** out_current_stream);
/* The producer's Python tensor taking ownership of `tensor`. */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned* tensor, void** out_py_object);

/* The part that stays the same in every version: a consumer checks the major
 * version and may walk prev_api to an older one it knows. */
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  struct DLPackExchangeAPIHeader* prev_api;
} DLPackExchangeAPIHeader;

typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync; /* may be NULL */
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#ifdef __cplusplus
}
#endif
#endif /* DLPACK_DLPACK_H_ */

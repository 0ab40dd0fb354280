/* Host arrays read through the buffer protocol instead of their __dlpack__.
 *
 * A NumPy array (exactly numpy.ndarray, NumPy 2) read through the buffer protocol
 * instead of its __dlpack__: the call, its argument parsing, NumPy's capsule, header
 * and deleter, and our wrapper for a deleter that needs the GIL were about 1200 of
 * the 5200 instructions a small array cost in a batch. The result is the header
 * NumPy 2 would export: the same data pointer, shape, dtype and strides in elements,
 * but for two differences on the safe side. The buffer protocol rewrites the strides
 * of a contiguous array's dims of extent 1 or 0, which are never walked; and an array
 * NumPy will warn about writing (NPY_ARRAY_WARN_ON_WRITE) comes out READ_ONLY, where
 * NumPy's export says writable. Whatever NumPy's export refuses (another byte order,
 * long double, no numbers, strides that are not whole items) is left to __dlpack__,
 * so that NumPy's refusal and words stay the ones users see; but for ml_dtypes'
 * bfloat16 and float8 types, which DLPack has and NumPy's export lacks.
 *
 * A JAX array on the CPU likewise (import_host_buffer): its own __dlpack__ cost 6 us
 * of a 64x64 array's 8 us conversion, its buffer 0.9 us. JAX gives the buffer for
 * one CPU shard only, after its pending work (as its export waits), and refuses it
 * otherwise (a GPU array, bfloat16), which then goes through __dlpack__. The view is
 * held as long as the header: a JAX array's memory can be freed under a reference
 * (x.delete()), never under an exported buffer. */
#include "core.h"

#include <string.h>

typedef struct {
  DLManagedTensorVersioned tensor;
  Release release;
  PyObject* array; /* kept alive until the header is deleted */
  Py_buffer view;  /* held as long (view.obj set) where the array could free its memory under it */
  int64_t dims[];  /* shape, then strides */
} NdarrayHeader;

static void finish_header(Release* node) {
  NdarrayHeader* header = (NdarrayHeader*)((char*)node - offsetof(NdarrayHeader, release));
  if (header->view.obj) PyBuffer_Release(&header->view);
  Py_DECREF(header->array);
  PyMem_Free(header); /* finish runs with the GIL held */
}

static void header_deleter(DLManagedTensorVersioned* self) { release_later(&((NdarrayHeader*)self)->release); }

/* The DLPack dtype of a buffer format NumPy's export accepts: one type character,
 * native byte order ('<' on this little-endian host, or none, '@', '='). */
static int dtype_of_format(const char* format, Py_ssize_t itemsize, DLDataType* out) {
  if (*format == '<' || *format == '@' || *format == '=') ++format;
  uint8_t code;
  if (format[0] == 'Z' && (format[1] == 'f' || format[1] == 'd') && format[2] == 0)
    code = kDLComplex;
  else if (format[0] == 0 || format[1] != 0)
    return 0;
  else if (strchr("bhilq", format[0]))
    code = kDLInt;
  else if (strchr("BHILQ", format[0]))
    code = kDLUInt;
  else if (strchr("efd", format[0]))
    code = kDLFloat;
  else if (format[0] == '?')
    code = kDLBool;
  else
    return 0;
  out->code = code;
  out->bits = (uint8_t)(itemsize * 8);
  out->lanes = 1;
  return 1;
}

/* The DLPack dtype of one of ml_dtypes' types (bfloat16 and the float8 family: the
 * types NumPy holds JAX's arrays of them in), which have no buffer format and which
 * NumPy's __dlpack__ refuses, though DLPack has them under the same names. A type
 * ml_dtypes keeps a byte per element of fewer bits (int4, float4_e2m1fn) is no
 * DLPack element of that size: left to __dlpack__, whose refusal names it. 1 with
 * *out, 0 for any other type. */
static int dtype_of_ml_dtypes(PyObject* descr, DLDataType* out) {
  PyObject* type = PyObject_GetAttrString(descr, "type");
  PyObject* module = type ? PyObject_GetAttrString(type, "__module__") : NULL;
  PyObject* name = module ? PyObject_GetAttrString(type, "__name__") : NULL;
  PyObject* itemsize = name ? PyObject_GetAttrString(descr, "itemsize") : NULL;
  PyObject* native = itemsize ? PyObject_GetAttrString(descr, "isnative") : NULL;
  int found = -1;
  if (native) {
    const long bytes = PyLong_Check(itemsize) ? PyLong_AsLong(itemsize) : 0;
    const char* type_name = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    DLDataType parsed;
    /* Another byte order (newbyteorder('>')) is refused as NumPy's export refuses it */
    found = native == Py_True && PyUnicode_Check(module) &&
        PyUnicode_CompareWithASCIIString(module, "ml_dtypes") == 0 && type_name &&
        abr_dtype_parse(type_name, &parsed) == ABR_OK && parsed.lanes == 1 && parsed.bits == bytes * 8;
    if (found) *out = parsed;
    PyErr_Clear(); /* a name that is no UTF-8, an itemsize past a long: not one of ml_dtypes' */
  } else {
    PyErr_Clear(); /* a descriptor without these: not one of ml_dtypes', left to __dlpack__ */
    found = 0;
  }
  Py_XDECREF(type);
  Py_XDECREF(module);
  Py_XDECREF(name);
  Py_XDECREF(itemsize);
  Py_XDECREF(native);
  return found;
}

/* The DLPack dtypes of the last few array descriptors seen (NumPy's dtype objects,
 * immutable; the common ones are singletons): NumPy writes the buffer's format
 * string afresh on every request, half of what a request costs, so it is asked for
 * only on a descriptor's first array. Each holds its descriptor, so an address is
 * never another's. */
#define KNOWN_DTYPES 8
static struct {
  PyObject* descr;
  DLDataType dtype;
  int usable; /* 0: NumPy's export refuses it (or this does not read it) */
} known[KNOWN_DTYPES];
static unsigned known_next; /* wraps harmlessly */

/* ndarray.dtype's descriptor, looked up once: through the attribute lookup, reading
 * it cost twice as much. */
static PyObject* dtype_getter;

static PyObject* descr_of(PyObject* array) {
  if (!dtype_getter) {
    dtype_getter = PyObject_GetAttrString((PyObject*)Py_TYPE(array), "dtype");
    if (!dtype_getter) return NULL;
    if (!Py_TYPE(dtype_getter)->tp_descr_get) {
      Py_CLEAR(dtype_getter);
      return PyObject_GetAttrString(array, "dtype");
    }
  }
  return Py_TYPE(dtype_getter)->tp_descr_get(dtype_getter, array, (PyObject*)Py_TYPE(array));
}

/* 1 with *out, 0 for a dtype left to __dlpack__, -1 with an exception. */
static int dtype_of(PyObject* array, DLDataType* out) {
  PyObject* descr = descr_of(array);
  if (!descr) return -1;
  for (int i = 0; i < KNOWN_DTYPES; ++i)
    if (known[i].descr == descr) {
      Py_DECREF(descr);
      *out = known[i].dtype;
      return known[i].usable;
    }
  Py_buffer view;
  int usable = 0;
  if (PyObject_GetBuffer(array, &view, PyBUF_RECORDS_RO) == 0) {
    usable = dtype_of_format(view.format, view.itemsize, out);
    PyBuffer_Release(&view);
  } else if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
    Py_DECREF(descr);
    return -1;
  } else {
    PyErr_Clear(); /* datetimes and the like: __dlpack__ refuses them in NumPy's words */
    usable = dtype_of_ml_dtypes(descr, out);
  }
  const unsigned slot = known_next++ % KNOWN_DTYPES;
  PyObject* evicted = known[slot].descr;
  known[slot].descr = descr; /* the reference taken above */
  known[slot].dtype = *out;
  known[slot].usable = usable;
  Py_XDECREF(evicted); /* after the slot is whole: a dealloc may run code that reads it */
  return usable;
}

/* A header of `view` (its data, shape and strides; `dtype` read from its format)
 * holding `array`, and the view itself where `hold_view` (else it is released): 1
 * with *made, 0 for a view whose strides are not whole items, -1 with an exception. */
static int header_of_view(PyObject* array, Py_buffer* view, DLDataType dtype, int hold_view, NdarrayHeader** made) {
  int usable = view->ndim >= 0 && view->ndim <= ABR_MAX_NDIM && view->itemsize * 8 == dtype.bits;
  for (int i = 0; usable && i < view->ndim; ++i) usable = view->strides[i] % view->itemsize == 0;
  /* Python's allocator (the GIL is held here and when finish_header frees it): glibc's malloc cost as much as the
   * rest */
  NdarrayHeader* header =
      usable ? (NdarrayHeader*)PyMem_Malloc(sizeof *header + 2 * (size_t)view->ndim * sizeof(int64_t)) : NULL;
  if (!header) {
    PyBuffer_Release(view);
    if (!usable) return 0;
    PyErr_NoMemory();
    return -1;
  }
  DLManagedTensorVersioned* t = &header->tensor;
  t->version.major = DLPACK_MAJOR_VERSION;
  t->version.minor = DLPACK_MINOR_VERSION;
  t->manager_ctx = header;
  t->deleter = header_deleter;
  t->flags = view->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  t->dl_tensor.data = view->buf;
  t->dl_tensor.device.device_type = kDLCPU;
  t->dl_tensor.device.device_id = 0;
  t->dl_tensor.ndim = view->ndim;
  t->dl_tensor.dtype = dtype;
  t->dl_tensor.shape = view->ndim ? header->dims : NULL;
  t->dl_tensor.strides = view->ndim ? header->dims + view->ndim : NULL;
  t->dl_tensor.byte_offset = 0;
  for (int i = 0; i < view->ndim; ++i) {
    header->dims[i] = view->shape[i];
    header->dims[view->ndim + i] = view->strides[i] / view->itemsize;
  }
  header->release.finish = finish_header;
  header->array = array;
  Py_INCREF(array);
  if (hold_view) {
    header->view = *view; /* released with the header */
  } else {
    header->view.obj = NULL;
    PyBuffer_Release(view);
  }
  *made = header;
  return 1;
}

static int handed_out(NdarrayHeader* header, Imported* out) {
  out->tensor = &header->tensor;
  out->versioned = 1;
  out->any_thread = 1;
  out->work_stream = 0;
  return 1;
}

int import_host_buffer(PyObject* array, Imported* out) {
#if PY_BIG_ENDIAN
  return 0; /* the formats above are read for a little-endian host */
#endif
  Py_buffer view;
  /* JAX refuses one not in host memory, or of a dtype it has no format for */
  if (PyObject_GetBuffer(array, &view, PyBUF_RECORDS_RO) < 0) {
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
    PyErr_Clear();
    return 0;
  }
  DLDataType dtype = {0, 0, 0};
  if (!dtype_of_format(view.format ? view.format : "B", view.itemsize, &dtype)) {
    PyBuffer_Release(&view);
    return 0;
  }
  NdarrayHeader* header = NULL;
  const int made = header_of_view(array, &view, dtype, 1, &header);
  return made <= 0 ? made : handed_out(header, out);
}

int import_ndarray(PyObject* array, Imported* out) {
#if PY_BIG_ENDIAN
  return 0; /* the formats above are read for a little-endian host */
#endif
  DLDataType dtype = {0, 0, 0};
  const int known_dtype = dtype_of(array, &dtype);
  if (known_dtype <= 0) return known_dtype;
  Py_buffer view;
  if (PyObject_GetBuffer(array, &view, PyBUF_STRIDES) < 0) { /* shape and strides; the format is known */
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
    PyErr_Clear();
    return 0;
  }
  /* The header holds the array, as NumPy's own export does: the buffer's export lock
   * is not kept (NumPy cannot resize an array another reference holds anyway). */
  NdarrayHeader* header = NULL;
  const int made = header_of_view(array, &view, dtype, 0, &header);
  if (made <= 0) return made;
  return handed_out(header, out);
}

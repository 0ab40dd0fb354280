/* The process-wide runtime: this module alone holds the abr_runtime*, creates it
 * on first use with the flags the package gave setup(), and answers the calls
 * that need it (devices, backends, the pinned pool), so no pointer crosses into
 * Python as an integer. */
#include <string.h>

#include "core.h"

static abr_runtime* runtime; /* alive until exit: daemon threads may still convert */

abr_runtime* core_runtime(void) {
  abr_runtime* current = __atomic_load_n(&runtime, __ATOMIC_ACQUIRE);
  if (current) return current;
  if (hooks_ready() < 0) return NULL;
  /* Callers hold the GIL, so only one creates it. */
  abr_runtime_options options = ABR_RUNTIME_OPTIONS_INIT;
  options.flags = hooks.runtime_flags;
  const abr_status status = abr_runtime_create(&options, &current);
  if (status != ABR_OK) {
    raise_status(status, "creating the runtime", NULL);
    return NULL;
  }
  __atomic_store_n(&runtime, current, __ATOMIC_RELEASE);
  return current;
}

static PyObject* checked(abr_status status, const char* context, PyObject* result) {
  if (status == ABR_OK) return result;
  Py_XDECREF(result);
  raise_status(status, context, NULL);
  return NULL;
}

static PyObject* text(const char* bytes, size_t size) {
  const char* end = memchr(bytes, 0, size);
  return PyUnicode_DecodeUTF8(bytes, end ? end - bytes : (Py_ssize_t)size, "replace");
}

PyObject* core_devices(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  abr_runtime* rt = core_runtime();
  if (!rt) return NULL;
  int32_t count = 0;
  const abr_status counted = abr_device_count(rt, &count);
  if (counted != ABR_OK) return checked(counted, "counting devices", NULL);
  PyObject* list = PyList_New(0);
  for (int32_t i = 0; list && i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    const abr_status status = abr_device_info(rt, i, &info);
    if (status != ABR_OK) return checked(status, "reading a device", list);
    PyObject* row =
        Py_BuildValue("(iiiNNKI)", (int)info.device.device_type, (int)info.device.device_id, (int)info.backend,
                      text(info.name, sizeof info.name), text(info.platform, sizeof info.platform),
                      (unsigned long long)info.memory_bytes, (unsigned)info.flags);
    if (!row || PyList_Append(list, row) < 0) Py_CLEAR(list);
    Py_XDECREF(row);
  }
  return list;
}

PyObject* core_backend_info(PyObject* module, PyObject* backend) {
  (void)module;
  const long code = PyLong_AsLong(backend);
  if (code == -1 && PyErr_Occurred()) return NULL;
  abr_runtime* rt = core_runtime();
  if (!rt) return NULL;
  struct abr_backend_info info = ABR_BACKEND_INFO_INIT;
  const abr_status status = abr_backend_info(rt, (abr_backend)code, &info);
  if (status != ABR_OK) return checked(status, "reading a backend", NULL);
  return Py_BuildValue("(OiN)", info.available ? Py_True : Py_False, (int)info.device_count,
                       text(info.detail, sizeof info.detail));
}

static PyObject* stats_tuple(abr_status (*get)(abr_runtime*, abr_pool_stats*), const char* what) {
  abr_runtime* rt = core_runtime();
  if (!rt) return NULL;
  abr_pool_stats s = ABR_POOL_STATS_INIT;
  const abr_status status = get(rt, &s);
  if (status != ABR_OK) return checked(status, what, NULL);
  return Py_BuildValue("(KKKKKKKKK)", (unsigned long long)s.bytes_pinned, (unsigned long long)s.bytes_in_use,
                       (unsigned long long)s.bytes_cached, (unsigned long long)s.bytes_waiting,
                       (unsigned long long)s.peak_bytes_pinned, (unsigned long long)s.limit_bytes,
                       (unsigned long long)s.blocks_pinned, (unsigned long long)s.hits, (unsigned long long)s.misses);
}

PyObject* core_pool_stats(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  return stats_tuple(abr_pool_get_stats, "reading pool statistics");
}

PyObject* core_device_cache_stats(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  return stats_tuple(abr_device_cache_get_stats, "reading device cache statistics");
}

PyObject* core_set_device_cache_limit(PyObject* module, PyObject* limit) {
  (void)module;
  const unsigned long long bytes = PyLong_AsUnsignedLongLong(limit);
  if (PyErr_Occurred()) return NULL;
  abr_runtime* rt = core_runtime();
  if (!rt) return NULL;
  Py_INCREF(Py_None);
  return checked(abr_device_cache_set_limit(rt, bytes), "setting the device cache limit", Py_None);
}

PyObject* core_pool_trim(PyObject* module, PyObject* only_if_running) {
  (void)module;
  const int only = PyObject_IsTrue(only_if_running);
  if (only < 0) return NULL;
  if (only && !__atomic_load_n(&runtime, __ATOMIC_ACQUIRE)) return PyLong_FromLong(0);
  abr_runtime* rt = core_runtime();
  if (!rt) return NULL;
  uint64_t released = 0;
  abr_status status;
  Py_BEGIN_ALLOW_THREADS
  status = abr_pool_trim(rt, &released); /* may wait for the devices' queued work */
  Py_END_ALLOW_THREADS
  return checked(status, "trimming the pool", PyLong_FromUnsignedLongLong(released));
}

PyObject* core_set_staging(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "set_staging(threads, chunk_bytes)");
    return NULL;
  }
  const unsigned long threads = PyLong_AsUnsignedLong(args[0]);
  const unsigned long long chunk = PyLong_AsUnsignedLongLong(args[1]);
  if (PyErr_Occurred()) return NULL;
  if (threads > UINT32_MAX) {
    PyErr_Format(PyExc_ValueError, "arraybridge: staging threads = %lu is out of range", threads);
    return NULL;
  }
  abr_runtime* rt = core_runtime();
  if (!rt) return NULL;
  Py_INCREF(Py_None);
  return checked(abr_runtime_set_staging(rt, (uint32_t)threads, chunk), "setting the staging shape", Py_None);
}

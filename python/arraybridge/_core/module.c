/* The arraybridge._core module: its function table and its installation. The
 * files under it depend on each other only downwards: args <- tensor, hooks <-
 * runtime <- exchange <- transfer <- module. */
#include "core.h"

/* export(tensor, versioned, copied) -> a capsule viewing a Tensor, for Tensor._dlpack_slow. */
static PyObject* export(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 3 || !tensor_check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "export(tensor, versioned, copied)");
    return NULL;
  }
  int versioned = PyObject_IsTrue(args[1]), copied = PyObject_IsTrue(args[2]);
  if (versioned < 0 || copied < 0) return NULL;
  return export_capsule(((TensorObject*)args[0])->tensor, args[0], versioned, copied);
}

static PyMethodDef methods[] = {
    {"to_device", (PyCFunction)(void (*)(void))core_to_device, METH_FASTCALL | METH_KEYWORDS, core_to_device_doc},
    {"to_device_many", (PyCFunction)(void (*)(void))core_to_device_many, METH_FASTCALL | METH_KEYWORDS,
     core_to_device_many_doc},
    {"is_flat", core_is_flat, METH_O,
     "is_flat(list) -> whether no item is a list, tuple or mapping (one batch as it is)"},
    {"copy_many", (PyCFunction)(void (*)(void))core_copy_many, METH_FASTCALL | METH_KEYWORDS, core_copy_many_doc},
    {"from_dlpack", (PyCFunction)(void (*)(void))core_from_dlpack, METH_FASTCALL | METH_KEYWORDS, core_from_dlpack_doc},
    {"copy", (PyCFunction)(void (*)(void))core_copy, METH_FASTCALL | METH_KEYWORDS, core_copy_doc},
    {"vet_destination", (PyCFunction)(void (*)(void))core_vet_destination, METH_FASTCALL,
     "vet_destination(x, context) -> None, or raises what copy(..., x) would raise for x as its destination "
     "before anything moves (read-only; a torch tensor with a conj or neg bit, that requires grad, or made under "
     "inference_mode outside it), naming context: for writes another library makes (MPI)"},
    {"wrote", core_wrote, METH_O,
     "wrote(tensor) -> None: autograd hears of a write into the Tensor made behind the runtime's back (MPI's), "
     "as of a copy's: the torch tensor whose memory it views has its version bumped"},
    {"transfer", (PyCFunction)(void (*)(void))core_transfer, METH_FASTCALL,
     "transfer(x, dst, copy, context) -> Tensor on the (type, id) pair dst; errors name context"},
    {"export", (PyCFunction)(void (*)(void)) export, METH_FASTCALL,
     "export(tensor, versioned, copied) -> a DLPack capsule viewing tensor and keeping it alive"},
    {"hand_over", (PyCFunction)(void (*)(void))core_hand_over, METH_FASTCALL,
     "hand_over(tensor, cls) -> cls's own tensor on the same memory through cls's DLPack C exchange API, or None "
     "when cls has none"},
    {"handover_ns", (PyCFunction)(void (*)(void))core_handover_ns, METH_FASTCALL,
     "handover_ns(tensor, n) -> ns per owning and per borrowed hand-over through our C exchange API, in a C loop"},
    {"capsule_name", capsule_name, METH_O, "capsule_name(capsule) -> its name"},
    {"set_recorder", core_set_recorder, METH_O,
     "set_recorder(callable or None): called after each transfer with (call, from, to, path, bytes, detail, "
     "tensors, seconds) while arraybridge.recording() is on"},
    {"untracked_type", untracked_type, METH_O,
     "untracked_type(cls) -> cls rebuilt as the final type arraybridge.Tensor, whose instances the cycle collector "
     "does not track (a class decorator)"},
    {"setup", (PyCFunction)(void (*)(void))core_setup, METH_VARARGS | METH_KEYWORDS,
     "setup(tensor_type=, parse_device=, parse_dtype=, stream_handle=, producer_strides=, error=, log_transfer=, "
     "producer_traits=, vet_producer=, refusal=, to_device_structure=, copy_structure=, read_only_why=, "
     "logger=, runtime_flags=)"},
    {"devices", core_devices, METH_NOARGS,
     "devices() -> [(type, id, backend, name, platform, memory_bytes, flags)], the CPU first"},
    {"backend_info", core_backend_info, METH_O, "backend_info(abr_backend) -> (available, device_count, detail)"},
    {"pool_stats", core_pool_stats, METH_NOARGS, "pool_stats() -> abr_pool_stats's fields after version, in order"},
    {"device_cache_stats", core_device_cache_stats, METH_NOARGS,
     "device_cache_stats() -> as pool_stats(), for the device cache"},
    {"set_device_cache_limit", core_set_device_cache_limit, METH_O, "set_device_cache_limit(bytes) -> None"},
    {"pool_trim", core_pool_trim, METH_O,
     "pool_trim(only_if_running) -> bytes released; with only_if_running, 0 without creating a runtime"},
    {"set_staging", (PyCFunction)(void (*)(void))core_set_staging, METH_FASTCALL,
     "set_staging(threads, chunk_bytes) -> None"},
    {"ipc_export", (PyCFunction)(void (*)(void))core_ipc_export, METH_FASTCALL,
     "ipc_export(x, stream) -> the bytes of a CUDA IPC handle for x's memory, after the work queued on stream"},
    {"ipc_import", core_ipc_import, METH_O, "ipc_import(handle_bytes) -> the Tensor it names, opened in this process"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "arraybridge._core",
                                        "The hot path of arraybridge in C: transfers, Tensor, DLPack capsules", -1,
                                        methods};

static PyObject* installed; /* the module, once made: installing again puts it back */

/* module.name = type. */
static int add_type(PyObject* module, const char* name, PyTypeObject* type) {
  Py_INCREF(type);
  if (PyModule_AddObject(module, name, (PyObject*)type) == 0) return 0;
  Py_DECREF(type);
  return -1;
}

/* The module made, with its types; NULL with an exception. Each step can be retried
 * after a failure (the out-of-memory walk does): the types and names made stay made. */
static PyObject* make_module(void) {
  if (PyType_Ready(&TensorBaseType) < 0 || PyType_Ready(&EventType) < 0) return NULL;
  if (names_init() < 0 || kinds_init() < 0 || exchange_publish(&TensorBaseType) < 0) return NULL;
  PyObject* module = PyModule_Create(&module_def);
  if (!module) return NULL;
  if (add_type(module, "TensorBase", &TensorBaseType) < 0 || add_type(module, "Event", &EventType) < 0) {
    Py_DECREF(module);
    return NULL;
  }
  return module;
}

/* arraybridge._core lives in the package's one native module, arraybridge._native (a
 * cffi module, which compiles these files too): arraybridge/_lib.py calls this once
 * through cffi, which releases the GIL around the call. It makes the module and puts
 * it in sys.modules as arraybridge._core. 0 on success; else the error's type and
 * message in `error`, and 1 for a MemoryError, 2 for any other. */
int abr_python_core_install(char* error, size_t size) {
  PyGILState_STATE gil = PyGILState_Ensure();
  if (!installed) installed = make_module();
  int rc = installed && PyDict_SetItemString(PyImport_GetModuleDict(), "arraybridge._core", installed) == 0 ? 0 : 2;
  if (rc) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    rc = PyErr_GivenExceptionMatches(type, PyExc_MemoryError) ? 1 : 2;
    PyObject* text = value ? PyObject_Str(value) : NULL;
    const char* message = text ? PyUnicode_AsUTF8(text) : NULL;
    snprintf(error, size, "%s: %s", type ? ((PyTypeObject*)type)->tp_name : "unknown error",
             message ? message : "(no message)");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyErr_Clear(); /* what PyObject_Str may have raised, out of memory itself */
  }
  PyGILState_Release(gil);
  return rc;
}
